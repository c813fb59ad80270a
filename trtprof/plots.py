"""Matplotlib figures from results. matplotlib is imported inside functions (Agg, no display)."""
from __future__ import annotations

from collections import defaultdict
from pathlib import Path
from typing import Sequence

import numpy as np

from .results import BenchResult

HIST_BINS = 60


def _plt():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def series_label(r: BenchResult) -> str:
    eff = r.engine.get("effective_precision", r.precision)
    prec = r.precision if eff == r.precision else f"{r.precision} ({eff})"
    return f"{r.model} {prec} [{r.backend}]"


def _clip_range(arrays: Sequence[np.ndarray]) -> tuple[float, float]:
    """Shared x range: from the lowest minimum to the highest p99.5, so one slow outlier does not
    squash every histogram into one bin (the max is still reported in the tables)."""
    low = min(float(a.min()) for a in arrays)
    high = max(float(np.percentile(a, 99.5)) for a in arrays)
    return (low, high if high > low else low + 1e-6)


def histograms(results: Sequence[BenchResult], out_dir: Path, fmt: str = "png") -> list[Path]:
    """One figure per batch size: latency histograms of every engine, on shared bins and axis."""
    plt = _plt()
    by_batch: dict[int, list[BenchResult]] = defaultdict(list)
    for r in results:
        by_batch[r.batch_size].append(r)
    paths = []
    for batch, group in sorted(by_batch.items()):
        arrays = [np.asarray(r.samples_ms["latency_ms"]) for r in group]
        bins = np.linspace(*_clip_range(arrays), HIST_BINS + 1)
        fig, ax = plt.subplots(figsize=(8, 4.5))
        for r, a in zip(group, arrays):
            ax.hist(np.clip(a, bins[0], bins[-1]), bins=bins, alpha=0.5,
                    label=f"{series_label(r)}  median {r.latency.p50:.3f} ms")
            ax.axvline(r.latency.p50, linestyle="--", linewidth=1, color=ax.patches[-1].get_facecolor()[:3])
        ax.set_xlabel("latency (ms; values above p99.5 piled in the last bin)")
        ax.set_ylabel("iterations")
        ax.set_title(f"Latency distribution, batch {batch}")
        ax.legend(fontsize=8)
        fig.tight_layout()
        path = Path(out_dir) / f"hist_batch{batch}.{fmt}"
        fig.savefig(path)
        plt.close(fig)
        paths.append(path)
    return paths


def _by_series(results: Sequence[BenchResult]) -> dict[str, list[BenchResult]]:
    series: dict[str, list[BenchResult]] = defaultdict(list)
    for r in results:
        series[series_label(r)].append(r)
    return {k: sorted(v, key=lambda r: r.batch_size) for k, v in series.items()}


def _save_batch_figure(plt, fig, ax, ylabel: str, title: str, path: Path) -> Path:
    """Shared finish of the per-batch-size figures: log2 batch axis, labels, legend, save, close."""
    ax.set_xscale("log", base=2)
    ax.set_xlabel("batch size")
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return path


def latency_vs_batch(results: Sequence[BenchResult], out_dir: Path, fmt: str = "png") -> Path:
    """Median latency per batch size with p10–p90… bars (p90 above, min below)."""
    plt = _plt()
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for label, group in _by_series(results).items():
        b = [r.batch_size for r in group]
        med = np.array([r.latency.p50 for r in group])
        low = med - np.array([r.latency.min for r in group])
        high = np.array([r.latency.p90 for r in group]) - med
        ax.errorbar(b, med, yerr=[low, high], marker="o", capsize=3, label=label)
    return _save_batch_figure(plt, fig, ax, "latency (ms): median, bars min…p90", "Latency vs batch size",
                              Path(out_dir) / f"latency_vs_batch.{fmt}")


def throughput_vs_batch(results: Sequence[BenchResult], out_dir: Path, fmt: str = "png") -> Path:
    plt = _plt()
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for label, group in _by_series(results).items():
        ax.plot([r.batch_size for r in group], [r.throughput_per_s for r in group], marker="o", label=label)
    return _save_batch_figure(plt, fig, ax, "throughput (samples/s)", "Throughput vs batch size",
                              Path(out_dir) / f"throughput_vs_batch.{fmt}")


def plot_all(results: Sequence[BenchResult], out_dir: Path, fmt: str = "png") -> list[Path]:
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    return [*histograms(results, out_dir, fmt), latency_vs_batch(results, out_dir, fmt),
            throughput_vs_batch(results, out_dir, fmt)]
