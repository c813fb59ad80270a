"""Matplotlib figures from results. matplotlib is imported inside functions (Agg, no display).

Readability rules (issue 12): each precision keeps one colour in every figure and every run; engines
are named by ``labels.engine_labels`` (which add the profile/options when two engines would read the
same); the histogram axis comes from a robust range with an overflow bin that says how many samples
it holds, so a few spikes cannot squash the rest into one bar; batch ticks are the batch sizes
themselves; a series with one batch size is a marker, not a one-point line.
"""
from __future__ import annotations

from collections import defaultdict
from pathlib import Path
from typing import Sequence

import numpy as np

from .labels import engine_labels, fmt_ms
from .results import BenchResult

HIST_BINS = 60
# Upper edge of the histogram axis: Q3 + this many IQRs (Tukey's "far out" fence). Samples beyond it
# go to one overflow bin with their count written on it.
HIST_FENCE_IQR = 3.0
# One colour per precision, the same in every figure and every run (matplotlib's default cycle
# would give fp16 whichever colour its position in the file dictates).
PRECISION_COLOURS = {"fp32": "#1f77b4", "tf32": "#2ca02c", "fp16": "#ff7f0e", "bf16": "#d62728", "int8": "#9467bd"}
OTHER_COLOUR = "#7f7f7f"
LINESTYLES = ("-", "--", ":", "-.")



def save_figure(fig, path: Path) -> None:
    """Render to memory, then write atomically: a full disk or ``ulimit -f`` leaves the old image
    or none, never a truncated PNG that looks like a result."""
    import io

    from .cache import atomic_write_bytes

    buf = io.BytesIO()
    fig.savefig(buf, format=Path(path).suffix.lstrip(".") or "png")
    atomic_write_bytes(path, buf.getvalue())

def _plt():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def colour(precision: str) -> str:
    return PRECISION_COLOURS.get(precision, OTHER_COLOUR)


def robust_range(arrays: Sequence[np.ndarray]) -> tuple[float, float]:
    """Shared x range: from the lowest sample to the highest Tukey far-out fence (Q3 + 3 IQR, not
    beyond the largest sample), so rare spikes do not set the axis."""
    low = min(float(a.min()) for a in arrays)
    fences = []
    for a in arrays:
        q1, q3 = np.percentile(a, [25, 75])
        fences.append(min(float(a.max()), float(q3 + HIST_FENCE_IQR * (q3 - q1))))
    high = max(fences)
    if not high > low:
        high = low + max(abs(low) * 1e-3, 1e-6)
    return low, high


def histograms(results: Sequence[BenchResult], out_dir: Path, fmt: str = "png") -> list[Path]:
    """One figure per batch size: latency histograms of every engine on shared bins, plus an
    overflow bin right of the axis for samples beyond the robust range."""
    plt = _plt()
    labels = dict(zip(map(id, results), engine_labels(results)))
    by_batch: dict[int, list[BenchResult]] = defaultdict(list)
    for r in results:
        by_batch[r.batch_size].append(r)
    paths = []
    for batch, group in sorted(by_batch.items()):
        arrays = [np.asarray(r.samples_ms["latency_ms"], dtype=np.float64) for r in group]
        low, high = robust_range(arrays)
        bins = np.linspace(low, high, HIST_BINS + 1)
        width = bins[1] - bins[0]
        fig, ax = plt.subplots(figsize=(8, 4.5))
        any_overflow = False
        for r, a in zip(group, arrays):
            c = colour(r.precision)
            over = int(np.count_nonzero(a > high))
            label = f"{labels[id(r)]}  median {fmt_ms(r.latency.p50)} ms"
            if over:
                label += f"; {over} above {fmt_ms(high)} ms (overflow bin)"
            ax.hist(a[a <= high], bins=bins, alpha=0.5, color=c, label=label)
            ax.axvline(r.latency.p50, linestyle="--", linewidth=1, color=c)
            if over:
                any_overflow = True
                ax.bar(high + 1.5 * width, over, width=width, color=c, alpha=0.5, hatch="//", edgecolor=c)
                ax.annotate(str(over), (high + 1.5 * width, over), ha="center", va="bottom", fontsize=8)
        if any_overflow:
            ax.axvline(high + 0.5 * width, color="grey", linewidth=0.8)
            ax.set_xlim(low - width, high + 3 * width)
        ax.set_xlabel("latency (ms)" + (f"; hatched bar: samples above {fmt_ms(high)} ms" if any_overflow else ""))
        ax.set_ylabel("iterations")
        ax.set_title(f"Latency distribution, batch {batch}")
        ax.legend(fontsize=8)
        fig.tight_layout()
        path = Path(out_dir) / f"hist_batch{batch}.{fmt}"
        save_figure(fig, path)
        plt.close(fig)
        paths.append(path)
    return paths


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


def _save_batch_figure(plt, fig, ax, batches: Sequence[int], ylabel: str, title: str, path: Path) -> Path:
    """Shared finish of the per-batch-size figures: a log2 axis when there are several batch sizes,
    ticked at the batch sizes written as numbers; labels, legend, save, close."""
    batches = sorted(set(batches))
    if len(batches) > 1:
        ax.set_xscale("log", base=2)
    ax.set_xticks(batches, [str(b) for b in batches])
    ax.minorticks_off()
    ax.set_xlabel("batch size")
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.legend(fontsize=8)
    fig.tight_layout()
    save_figure(fig, path)
    plt.close(fig)
    return path


def latency_vs_batch(results: Sequence[BenchResult], out_dir: Path, fmt: str = "png") -> Path:
    """Median latency per batch size with bars from the minimum to p90."""
    plt = _plt()
    fig, ax = plt.subplots(figsize=(7, 4.5))
    series = _by_series(results)
    styles = _styles(series)
    for label, group in series.items():
        b = [r.batch_size for r in group]
        med = np.array([r.latency.p50 for r in group])
        low = med - np.array([r.latency.min for r in group])
        high = np.array([r.latency.p90 for r in group]) - med
        ax.errorbar(b, med, yerr=[low, high], marker="o", capsize=3, label=label, **styles[label])
    return _save_batch_figure(plt, fig, ax, [r.batch_size for r in results], "latency (ms): median, bars min…p90",
                              "Latency vs batch size", Path(out_dir) / f"latency_vs_batch.{fmt}")


def throughput_vs_batch(results: Sequence[BenchResult], out_dir: Path, fmt: str = "png") -> Path:
    plt = _plt()
    fig, ax = plt.subplots(figsize=(7, 4.5))
    series = _by_series(results)
    styles = _styles(series)
    for label, group in series.items():
        ax.plot([r.batch_size for r in group], [r.throughput_per_s for r in group], marker="o", label=label,
                **styles[label])
    return _save_batch_figure(plt, fig, ax, [r.batch_size for r in results], "throughput (samples/s)",
                              "Throughput vs batch size", Path(out_dir) / f"throughput_vs_batch.{fmt}")


def plot_all(results: Sequence[BenchResult], out_dir: Path, fmt: str = "png") -> list[Path]:
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    return [*histograms(results, out_dir, fmt), latency_vs_batch(results, out_dir, fmt),
            throughput_vs_batch(results, out_dir, fmt)]
