"""Matplotlib figures from results. matplotlib is imported inside functions (Agg, no display).

Readability rules (issues 12 and 26), each checked by a test and by looking at the PNGs in docs/img/:
- each precision keeps one colour in every figure and every run; a second series of one precision
  gets the next line style; filled areas are translucent with a solid outline in the series' colour,
  so two overlapping histograms read as two series, not as a brown/grey third one;
- engines are named by ``labels.engine_labels`` (profile/options added when two would read the same);
- axis limits come from the bulk of the data (``bulk_range``), never from a few spikes; samples
  beyond are counted and marked (an overflow bar per series; a note on the ECDF);
- an axis whose range spans a decade or more is logarithmic (``LOG_AXIS_RATIO``), so small batch
  sizes are not flattened to zero next to large ones;
- legends sit below the axes, outside the data;
- batch ticks are the batch sizes themselves; a series with one batch size is a marker, not a line.
"""
from __future__ import annotations

import io
import math
from collections import defaultdict
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from ..util.console import unescape_figure_text
from ..util.files import atomic_write_bytes
from ..util.outputs import IMAGE_SOFTWARE
from ..util.labels import engine_labels, fmt_ms
from .kit import pyplot
from ..measure.results import BenchResult

HIST_BINS = 60
# Upper edge of the bulk of one series: Q3 + this many IQRs (Tukey's "far out" fence) ...
HIST_FENCE_IQR = 3.0
# ... but never below this percentile: a second mode holding ≥ 5 % of the samples is bulk, not
# outliers (a tight main mode has a tiny IQR, and its fence alone would push that mode off the axis).
BULK_PERCENTILE = 95.0
# An axis whose top is at least this many times its bottom spans a decade: logarithmic.
LOG_AXIS_RATIO = 10.0
FILL_ALPHA = 0.3  # histogram fill; the outline is opaque
# One colour per precision, the same in every figure and every run (matplotlib's default cycle
# would give fp16 whichever colour its position in the file dictates). Tableau colours: distinct
# in hue and lightness, readable by the common colour-vision deficiencies for the first three.
PRECISION_COLOURS = {"fp32": "#1f77b4", "tf32": "#2ca02c", "fp16": "#ff7f0e", "bf16": "#d62728", "int8": "#9467bd"}
OTHER_COLOUR = "#7f7f7f"
LINESTYLES = ("-", "--", ":", "-.")
DODGE_LOG2 = 0.04  # latency_vs_batch: series shifted this many octaves apart, bars stay apart


def save_figure(fig, path: Path, dpi: int = 100) -> None:
    """Render to memory, then write atomically: a full disk or ``ulimit -f`` leaves the old image
    or none, never a truncated PNG that looks like a result."""
    buf = io.BytesIO()
    fmt = Path(path).suffix.lstrip(".") or "png"
    # the tag that lets a later run recognise the file as its own plot (util.outputs.IMAGE)
    tag = {"png": {"Software": IMAGE_SOFTWARE}, "svg": {"Creator": IMAGE_SOFTWARE}}.get(fmt)
    unescape_figure_text(fig)  # a non-ASCII model name under LC_ALL=C
    fig.savefig(buf, format=fmt, dpi=dpi, metadata=tag)
    atomic_write_bytes(path, buf.getvalue())


def colour(precision: str) -> str:
    return PRECISION_COLOURS.get(precision, OTHER_COLOUR)


def bulk_range(arrays: Sequence[np.ndarray]) -> tuple[float, float]:
    """Shared axis range of several series: from the lowest sample to the highest bulk edge, where a
    series' bulk edge is max(Q3 + 3 IQR, p95), not beyond its largest sample. Rare spikes (under 5 %
    of a series and beyond its fence) do not set the axis; they are counted beyond it."""
    low = min(float(a.min()) for a in arrays)
    edges = []
    for a in arrays:
        q1, q3, pct = np.percentile(a, [25, 75, BULK_PERCENTILE])
        edges.append(min(float(a.max()), max(float(q3 + HIST_FENCE_IQR * (q3 - q1)), float(pct))))
    high = max(edges)
    if not high > low:
        high = low + max(abs(low) * 1e-3, 1e-6)
    return low, high



def spans_decades(low: float, high: float) -> bool:
    """True when a positive range is wide enough for a log axis (top ≥ LOG_AXIS_RATIO × bottom)."""
    return low > 0 and high >= LOG_AXIS_RATIO * low


# Tick labels between these are plain numbers ("0.001", "20", "10,000"); outside, a power of ten ("10⁶")
PLAIN_TICKS_FROM, PLAIN_TICKS_TO = 1e-3, 1e6
SUPERSCRIPT = str.maketrans("-0123456789", "⁻⁰¹²³⁴⁵⁶⁷⁸⁹")


def plain_number(v: float) -> str:
    """A tick label a person reads: "0.05", "1", "2,000", "100,000"; "10⁶", "2·10⁻⁵" beyond (never "1e+06")."""
    if v == 0 or PLAIN_TICKS_FROM <= abs(v) < PLAIN_TICKS_TO:
        return f"{v:,g}"
    k = math.floor(math.log10(abs(v)))
    mantissa = round(v / 10.0 ** k, 6)
    power = "10" + str(k).translate(SUPERSCRIPT)
    return power if mantissa == 1 else f"{mantissa:g}·{power}"


def plain_log_ticks(axis) -> None:
    """Log-scaled axis ticks written as plain numbers (0.05, 1, 20, 10,000), not powers of ten."""
    from matplotlib import ticker

    axis.set_major_locator(ticker.LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
    axis.set_major_formatter(ticker.FuncFormatter(lambda v, _pos: plain_number(v)))
    axis.set_minor_formatter(ticker.NullFormatter())


# Tick sets tried on a log ratio axis (the speedup plot) that spans RATIO_DECADE_SPAN or more, coarsest
# first, each as multiples of every power of ten: the first that puts RATIO_TICKS_MIN ticks in view is used.
# minorticks_off had left a plot of speedups between 1.3× and 4.2× with one tick, "10⁰" (issue 34).
RATIO_TICK_SUBS = ((1.0,), (1.0, 2.0, 5.0), (1.0, 1.5, 2.0, 3.0, 4.0, 5.0, 7.0))
RATIO_DECADE_SPAN = 4.0  # high / low; a narrower axis gets evenly spaced ratios (0.8×, 1×, 1.2×) instead
# steps of the evenly spaced ratios, largest first, each dividing 1 (so 1× is a tick): the largest that
# gives RATIO_TICKS_MIN + 1 ticks is used (0.6×–1.4×: 0.2; 0.97×–1.03×: 0.01); multiples of a power of ten
# would crowd one side of 1× (0.625, 0.65, … below it, 1.25 above)
RATIO_STEPS = (1.0, 0.5, 0.25, 0.2, 0.1, 0.05, 0.02, 0.01, 0.005, 0.002, 0.001)
RATIO_TICKS_MIN = 3
RATIO_TICKS_MAX = 9  # more are thinned (1× kept): labels must not run into each other


def _ratio_candidates(low: float, high: float) -> list[float]:
    if high / low >= RATIO_DECADE_SPAN:
        ticks: list[float] = []
        for subs in RATIO_TICK_SUBS:
            ticks = sorted({round(sub * 10.0 ** k, 12) for k in range(math.floor(math.log10(low)) - 1,
                                                                     math.ceil(math.log10(high)) + 1)
                            for sub in subs if low <= sub * 10.0 ** k <= high})
            if len(ticks) >= RATIO_TICKS_MIN:
                break
        return ticks
    for step in RATIO_STEPS:
        # (1e-9: 1.4 / 0.2 is 6.9999…, and the tick at the limit counts)
        ticks = [round(k * step, 10) for k in range(math.ceil(low / step - 1e-9), math.floor(high / step + 1e-9) + 1)]
        if len(ticks) > RATIO_TICKS_MIN:
            break
    return [t for t in ticks if t > 0]


def ratio_ticks(ax) -> list[float]:
    """Label the log y axis of ratios with plain numbers ("0.5×", "1×", "2×"), enough of them to read any
    point, for the limits the axis has now; returns the ticks."""
    from matplotlib import ticker

    low, high = ax.get_ylim()
    ticks = _ratio_candidates(low, high)
    if len(ticks) > RATIO_TICKS_MAX:
        step = math.ceil(len(ticks) / RATIO_TICKS_MAX)
        anchor = ticks.index(1.0) if 1.0 in ticks else 0
        ticks = [t for i, t in enumerate(ticks) if (i - anchor) % step == 0]
    ax.set_yticks(ticks, [f"{plain_number(t)}×" for t in ticks])
    ax.yaxis.set_minor_locator(ticker.NullLocator())
    ax.set_ylim(low, high)
    return ticks


# Legend entries per column under a plot: a serving sweep of 3 precisions × 4 batch sizes had 13 entries in
# one column, taller than its axes, which the constrained layout then squashed to a strip
LEGEND_ROWS = 5


def legend_below(fig, ax) -> None:
    """The legend under the axes, outside the data (the figure is laid out 'constrained'), in columns of
    at most ``LEGEND_ROWS`` entries."""
    handles, labels = ax.get_legend_handles_labels()
    if handles:
        fig.legend(handles, labels, loc="outside lower center", fontsize=8, frameon=False,
                   ncols=math.ceil(len(handles) / LEGEND_ROWS))


def _by_batch(results: Sequence[BenchResult]) -> dict[int, list[BenchResult]]:
    out: dict[int, list[BenchResult]] = defaultdict(list)
    for r in results:
        out[r.batch_size].append(r)
    return dict(sorted(out.items()))


def _series_styles(group: Sequence[BenchResult]) -> list[dict[str, Any]]:
    """Colour by precision; a second series of one precision gets the next line style."""
    seen: dict[str, int] = defaultdict(int)
    styles = []
    for r in group:
        styles.append({"color": colour(r.precision), "linestyle": LINESTYLES[seen[r.precision] % len(LINESTYLES)]})
        seen[r.precision] += 1
    return styles


def histogram_figure(group: Sequence[BenchResult], batch: int, labels: Sequence[str]):
    """Latency histograms of one batch size's engines on shared bins over the bulk range (log bins
    when it spans a decade), an overflow bar per series right of the axis for samples beyond it."""
    plt = pyplot()
    arrays = [np.asarray(r.samples_ms["latency_ms"], dtype=np.float64) for r in group]
    low, high = bulk_range(arrays)
    log = spans_decades(low, high)
    bins = np.geomspace(low, high, HIST_BINS + 1) if log else np.linspace(low, high, HIST_BINS + 1)
    # positions right of the axis in bin steps (multiplicative on a log axis)
    step = (lambda k: high * (bins[1] / bins[0]) ** k) if log else (lambda k: high + k * (bins[1] - bins[0]))
    fig, ax = plt.subplots(figsize=(8, 5), layout="constrained")
    overflow = 0
    for r, a, label, style in zip(group, arrays, labels, _series_styles(group)):
        c = style["color"]
        over = int(np.count_nonzero(a > high))
        text = f"{label}  median {fmt_ms(r.latency.p50)} ms"
        if over:
            text += f"; {over} above {fmt_ms(high)} ms (hatched bar, max {fmt_ms(float(a.max()))} ms)"
        inside = a[a <= high]
        ax.hist(inside, bins=bins, histtype="stepfilled", alpha=FILL_ALPHA, color=c)
        ax.hist(inside, bins=bins, histtype="step", linewidth=1.5, color=c, linestyle=style["linestyle"], label=text)
        ax.axvline(r.latency.p50, linestyle="--", linewidth=1, color=c)
        if over:
            left, right = step(1 + overflow), step(2 + overflow)
            ax.bar(left, over, width=right - left, align="edge", color=c, alpha=0.6, hatch="//", edgecolor=c)
            # upright count above its bar: side-by-side bars are narrower than a 3-digit label
            ax.annotate(str(over), ((left + right) / 2, over), xytext=(0, 2), textcoords="offset points",
                        ha="center", va="bottom", fontsize=8, color=c, rotation=90)
            overflow += 1
    if log:
        ax.set_xscale("log")
        plain_log_ticks(ax.xaxis)
    if overflow:
        ax.axvline(step(0.5), color="grey", linewidth=0.8)
        ax.set_xlim(low if log else low - (bins[1] - bins[0]), step(2 + overflow))
    else:
        ax.set_xlim(low, high)
    ax.set_xlabel("latency (ms" + (", log scale" if log else "") + ")"
                  + (f"; hatched bars right of the grey line: samples above {fmt_ms(high)} ms" if overflow else ""))
    ax.set_ylabel("iterations")
    ax.set_title(f"Latency distribution, batch {batch}")
    legend_below(fig, ax)
    return fig


def ecdf_figure(group: Sequence[BenchResult], batch: int, labels: Sequence[str]):
    """Empirical CDFs of one batch size's engines over the bulk range: shifts and tails at a glance;
    how many samples lie beyond the axis is said in the legend and by an arrow at the right edge."""
    plt = pyplot()
    arrays = [np.sort(np.asarray(r.samples_ms["latency_ms"], dtype=np.float64)) for r in group]
    low, high = bulk_range(arrays)
    log = spans_decades(low, high)
    fig, ax = plt.subplots(figsize=(8, 5), layout="constrained")
    for r, a, label, style in zip(group, arrays, labels, _series_styles(group)):
        frac = np.arange(1, a.size + 1) / a.size
        over = int(np.count_nonzero(a > high))
        text = f"{label}  median {fmt_ms(r.latency.p50)} ms"
        if over:
            text += f"; {over} above {fmt_ms(high)} ms (max {fmt_ms(float(a[-1]))} ms)"
            # a ▶ at the right edge where the curve leaves the axis: the rest lies beyond
            ax.plot([high], [1 - over / a.size], marker=">", markersize=8, color=style["color"], clip_on=False)
        ax.step(a, frac, where="post", label=text, **style)
    if log:
        ax.set_xscale("log")
        plain_log_ticks(ax.xaxis)
    ax.set_xlim(low, high)
    ax.set_ylim(0, 1.02)
    ax.set_xlabel("latency (ms" + (", log scale" if log else "") + f"), up to {fmt_ms(high)} ms: the bulk of the data")
    ax.set_ylabel("fraction of iterations ≤ x")
    ax.set_title(f"Latency ECDF, batch {batch}")
    legend_below(fig, ax)
    return fig


def _save(fig, path: Path) -> Path:
    save_figure(fig, path, dpi=100)
    pyplot().close(fig)
    return path


def histograms(results: Sequence[BenchResult], out_dir: Path, fmt: str = "png") -> list[Path]:
    """hist_batch<B>.<fmt>: one histogram figure per batch size."""
    labels = dict(zip(map(id, results), engine_labels(results)))
    return [_save(histogram_figure(group, batch, [labels[id(r)] for r in group]), Path(out_dir) / f"hist_batch{batch}.{fmt}")
            for batch, group in _by_batch(results).items()]


def ecdfs(results: Sequence[BenchResult], out_dir: Path, fmt: str = "png") -> list[Path]:
    """ecdf_batch<B>.<fmt>: one ECDF figure per batch size."""
    labels = dict(zip(map(id, results), engine_labels(results)))
    return [_save(ecdf_figure(group, batch, [labels[id(r)] for r in group]), Path(out_dir) / f"ecdf_batch{batch}.{fmt}")
            for batch, group in _by_batch(results).items()]


def _by_series(results: Sequence[BenchResult]) -> dict[str, list[BenchResult]]:
    series: dict[str, list[BenchResult]] = defaultdict(list)
    for r, label in zip(results, engine_labels(results)):
        series[label].append(r)
    return {k: sorted(v, key=lambda r: r.batch_size) for k, v in series.items()}


def _styles(series: dict[str, list[BenchResult]]) -> dict[str, dict]:
    """Colour by precision; a second series of the same precision gets the next line style."""
    seen: dict[str, int] = defaultdict(int)
    out = {}
    for label, group in series.items():
        prec = group[0].precision
        out[label] = {"color": colour(prec), "linestyle": LINESTYLES[seen[prec] % len(LINESTYLES)]}
        seen[prec] += 1
        if len(group) == 1:  # one batch size: a marker, never a one-point "line"
            out[label]["linestyle"] = "none"
    return out


def finish_batch_axes(fig, ax, batches: Sequence[int], ylabel: str, title: str, values: Sequence[float] = ()) -> None:
    """Shared finish of the per-batch-size figures: a log2 x axis when there are several batch
    sizes, ticked at the batch sizes written as numbers; a log y axis when ``values`` (everything
    drawn, bars included) span a decade; labels; the legend below the axes."""
    batches = sorted(set(batches))
    if len(batches) > 1:
        ax.set_xscale("log", base=2)
    ax.set_xticks(batches, [str(b) for b in batches])
    ax.minorticks_off()
    positive = [v for v in values if v > 0]
    if positive and spans_decades(min(positive), max(positive)):
        ax.set_yscale("log")
        plain_log_ticks(ax.yaxis)
        ylabel += ", log scale"
    ax.set_xlabel("batch size")
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    legend_below(fig, ax)


def latency_vs_batch(results: Sequence[BenchResult], out_dir: Path, fmt: str = "png") -> Path:
    """Median latency per batch size with bars from the minimum to p90."""
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(7, 5), layout="constrained")
    series = _by_series(results)
    styles = _styles(series)
    drawn: list[float] = []
    for i, (label, group) in enumerate(series.items()):
        # series side by side (a few % apart on the log2 axis) so equal medians do not hide a bar
        dodge = 2 ** (DODGE_LOG2 * (i - (len(series) - 1) / 2))
        b = [r.batch_size * dodge for r in group]
        med = np.array([r.latency.p50 for r in group])
        low = med - np.array([r.latency.min for r in group])
        high = np.array([r.latency.p90 for r in group]) - med
        ax.errorbar(b, med, yerr=[low, high], marker="o", capsize=3, label=label, **styles[label])
        drawn += [*(med - low), *(med + high)]
    finish_batch_axes(fig, ax, [r.batch_size for r in results], "latency (ms): median, bars min…p90",
                      "Latency vs batch size", drawn)
    return _save(fig, Path(out_dir) / f"latency_vs_batch.{fmt}")


def throughput_vs_batch(results: Sequence[BenchResult], out_dir: Path, fmt: str = "png") -> Path:
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(7, 5), layout="constrained")
    series = _by_series(results)
    styles = _styles(series)
    for label, group in series.items():
        ax.plot([r.batch_size for r in group], [r.throughput_per_s for r in group], marker="o", label=label,
                **styles[label])
    finish_batch_axes(fig, ax, [r.batch_size for r in results], "throughput (samples/s)",
                      "Throughput vs batch size", [r.throughput_per_s for r in results])
    return _save(fig, Path(out_dir) / f"throughput_vs_batch.{fmt}")


def plot_names(results: Sequence[BenchResult], fmt: str = "png") -> list[str]:
    """The files ``plot_all`` writes, known before anything is drawn (so none of them is a user's)."""
    batches = list(_by_batch(results))
    return [*(f"hist_batch{b}.{fmt}" for b in batches), *(f"ecdf_batch{b}.{fmt}" for b in batches),
            f"latency_vs_batch.{fmt}", f"throughput_vs_batch.{fmt}"]


def plot_all(results: Sequence[BenchResult], out_dir: Path, fmt: str = "png") -> list[Path]:
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    return [*histograms(results, out_dir, fmt), *ecdfs(results, out_dir, fmt), latency_vs_batch(results, out_dir, fmt),
            throughput_vs_batch(results, out_dir, fmt)]
