"""The latency–throughput curve of a concurrency sweep (perf_analyzer's view): per precision and
batch size, one line through its concurrency levels, samples/s across, p99 latency up; the p99
target as a horizontal line. Drawn from the JSON (``serving.points``), so a report can redraw it.
matplotlib is imported inside the function (Agg)."""
from __future__ import annotations

from collections import defaultdict
from pathlib import Path
from typing import Any, Mapping, Sequence

MARKERS = ("o", "s", "^", "D", "v", "P", "X", "*")
# colours for arms that are no precision of ``plots.PRECISION_COLOURS`` (an A/B's "a" and "b", a what-if's
# "fp16+pad-channels"), none of them that table's colours nor its grey
SPARE_COLOURS = ("#17becf", "#e377c2", "#8c564b", "#bcbd22", "#393b79", "#637939", "#843c39", "#7b4173")


def arm_colours(arms: Sequence[str]) -> dict[str, str]:
    """One colour per arm, never two arms alike: a precision keeps its colour (``plots.colour``) the first
    time it is seen; any other arm, or a second arm of the same colour, takes the next spare colour.
    An arm "fp16#2" (a second engine of one precision) shares its precision's colour and is dashed."""
    from .plots import OTHER_COLOUR, colour

    out: dict[str, str] = {}
    spare = iter(SPARE_COLOURS * (len(arms) // len(SPARE_COLOURS) + 1))
    for arm in dict.fromkeys(a.split("#")[0] for a in arms):
        wanted = colour(arm)
        out[arm] = wanted if wanted != OTHER_COLOUR and wanted not in out.values() else next(spare)
    return {a: out[a.split("#")[0]] for a in arms}


def latency_throughput_figure(sweep: Mapping[str, Any], path: Path) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from .plots import legend_below, plain_log_ticks, save_figure, spans_decades

    points: Sequence[Mapping[str, Any]] = sweep["points"]
    lines: dict[tuple[str, int], list[Mapping[str, Any]]] = defaultdict(list)
    for p in points:
        lines[(p["arm"], p["batch_size"])].append(p)
    batches = sorted({b for _, b in lines})
    colours = arm_colours([arm for arm, _ in lines])
    fig, ax = plt.subplots(figsize=(7.5, 5.2), layout="constrained")
    for (arm, batch), group in lines.items():
        group = sorted(group, key=lambda p: p["concurrency"])
        x = [p["samples_per_s"] for p in group]
        y = [p["latency_ms"]["p99"] for p in group]
        ax.plot(x, y, marker=MARKERS[batches.index(batch) % len(MARKERS)], color=colours[arm],
                linestyle="-" if "#" not in arm else "--", label=f"{arm} batch {batch}")
        for p, xi, yi in zip(group, x, y):
            ax.annotate(f"×{p['concurrency']}", (xi, yi), textcoords="offset points", xytext=(3, 3), fontsize=7)
    slo = (sweep.get("slo") or {}).get("slo_p99_ms")
    if slo:
        ax.axhline(slo, color="grey", linestyle=":", linewidth=1, label=f"target p99 {slo:g} ms")
    xs = [p["samples_per_s"] for p in points if p["samples_per_s"] > 0]
    ys = [p["latency_ms"]["p99"] for p in points if p["latency_ms"]["p99"] > 0]
    # log axes when the values span decades (plots.spans_decades): batch 1 and batch 64 differ by 30×
    # and more in samples/s, and a linear axis would squash the small batches into a corner
    if xs and spans_decades(min(xs), max(xs)):
        ax.set_xscale("log")
        plain_log_ticks(ax.xaxis)  # "2,000", "5,000", not "10³"
    if ys and spans_decades(min(ys), max(ys)):
        ax.set_yscale("log")
        plain_log_ticks(ax.yaxis)
    ax.set_xlabel("throughput (samples/s; median over rounds)")
    ax.set_ylabel("p99 latency per request (ms)")
    ax.set_title("Latency vs throughput; ×N: requests in flight")
    legend_below(fig, ax)
    save_figure(fig, Path(path))
    plt.close(fig)
    return Path(path)
