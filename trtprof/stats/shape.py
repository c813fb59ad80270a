"""The shape of a latency distribution beyond its median: its modes (a Gaussian KDE) and whether its tail
is heavy. Reported beside the speedup's verdict (``stats.speedup``), never changing it.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np

from ..util.wording import times

# Distribution shape (beside the verdict, never changing it).
# A KDE mode counts when its peak stands this far (fraction of the highest peak) above the valley
# that separates it from a higher one: smaller bumps are sampling noise of a few hundred samples.
MODE_MIN_PROMINENCE = 0.1
MODE_MIN_MASS = 0.05  # … and at least 5 % of the samples lie nearer to it than to any other mode
KDE_MAX_SAMPLES = 4000  # a seeded subsample above this: the KDE's cost grows with n × grid
KDE_GRID = 512
# Heavy tail: (p99 − p50) over the robust σ (1.4826·MAD). A normal distribution gives 2.33; a
# lognormal with 10 % spread ~2.6. Above 6 the slowest 1 % sit far beyond what the body predicts.
HEAVY_TAIL_RATIO = 6.0


@dataclass(frozen=True)
class LatencyShape:
    """What a latency distribution looks like beyond its median."""

    modes: int
    mode_ms: tuple[float, ...]
    tail_ratio: float  # (p99 − p50) / (1.4826 · MAD): decides "heavy tail"
    p99_over_median: float = float("nan")  # p99 / p50: how a reader says a tail ("p99 = 60× the median")

    @property
    def multimodal(self) -> bool:
        return self.modes > 1

    @property
    def heavy_tail(self) -> bool:
        return self.tail_ratio > HEAVY_TAIL_RATIO

    def describe(self) -> str:
        parts = []
        if self.multimodal:
            parts.append(f"{self.modes} modes (" + ", ".join(f"{m:.4g}" for m in self.mode_ms) + " ms)")
        if self.heavy_tail:
            parts.append("heavy tail" + (f" (p99 = {times(self.p99_over_median)} the median)"
                                         if math.isfinite(self.p99_over_median) else ""))
        return "; ".join(parts)

    def to_json(self) -> dict[str, Any]:
        return {"modes": self.modes, "mode_ms": list(self.mode_ms), "tail_ratio": self.tail_ratio,
                "p99_over_median": self.p99_over_median if math.isfinite(self.p99_over_median) else None,
                "multimodal": self.multimodal, "heavy_tail": self.heavy_tail}


def distribution_shape(samples_ms: Sequence[float] | np.ndarray, seed: int = 0) -> LatencyShape:
    """Modes from a Gaussian KDE (scipy; no dip test in scipy) and a robust tail ratio.

    The KDE runs on the central 99 % (the tail is measured separately), Scott's bandwidth; a mode
    needs ``MODE_MIN_PROMINENCE`` of the highest peak (scipy ``find_peaks``) and ``MODE_MIN_MASS``."""
    from scipy import signal
    from scipy import stats as sps

    x = np.asarray(samples_ms, dtype=np.float64)
    p50 = float(np.median(x)) if x.size else float("nan")
    mad = float(np.median(np.abs(x - p50))) if x.size else 0.0
    p99 = float(np.percentile(x, 99)) if x.size else float("nan")
    tail = (p99 - p50) / (1.4826 * mad) if mad > 0 else 0.0
    p99_ratio = p99 / p50 if p50 > 0 else float("nan")
    if x.size < 50 or mad == 0:
        return LatencyShape(1, (p50,), tail, p99_ratio)
    lo, hi = np.percentile(x, (0.5, 99.5))
    core = x[(x >= lo) & (x <= hi)]
    if core.size > KDE_MAX_SAMPLES:
        core = np.random.default_rng(seed).choice(core, KDE_MAX_SAMPLES, replace=False)
    if np.ptp(core) == 0:
        return LatencyShape(1, (p50,), tail, p99_ratio)
    grid = np.linspace(lo, hi, KDE_GRID)
    density = sps.gaussian_kde(core)(grid)
    peaks, _ = signal.find_peaks(np.concatenate([[0.0], density, [0.0]]), prominence=MODE_MIN_PROMINENCE * density.max())
    peaks = peaks - 1
    if peaks.size > 1:  # mass nearest each peak
        centers = grid[peaks]
        nearest = np.argmin(np.abs(core[:, None] - centers[None, :]), axis=1)
        mass = np.bincount(nearest, minlength=peaks.size) / core.size
        peaks = peaks[mass >= MODE_MIN_MASS]
    if peaks.size == 0:
        return LatencyShape(1, (p50,), tail, p99_ratio)
    return LatencyShape(int(peaks.size), tuple(float(grid[p]) for p in peaks), tail, p99_ratio)
