"""Latency statistics: computed eagerly from raw samples, immutable, no GPU and no plotting.

Outliers use the MAD (hyperfine): 1.4826 · MAD estimates σ for normal data, and unlike σ it is not
inflated by the outliers it is meant to find.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

import numpy as np

MAD_TO_SIGMA = 1.4826  # consistency constant: 1.4826 · MAD ≈ σ for a normal distribution
OUTLIER_MADS = 5.0  # hyperfine-style: beyond 5 robust σ from the median is an outlier
PERCENTILES = (50, 90, 95, 99)
CONFIDENCE = 0.95  # two-sided level of every interval trtprof reports
# the keys of one stats object that LatencyStats types, in the order it writes them (any other read is kept in ``extra``)
STAT_KEYS = ("n", "mean", "std", "min", "p50", "p90", "p95", "p99", "max", "cv", "iqr", "mad", "outliers")


@dataclass(frozen=True)
class LatencyStats:
    n: int
    mean: float
    std: float
    min: float
    p50: float
    p90: float
    p95: float
    p99: float
    max: float
    cv: float  # std / mean
    iqr: float
    mad: float  # median absolute deviation (raw, not scaled)
    outliers: int  # samples more than OUTLIER_MADS robust σ from the median
    # keys read that this type does not know (a newer writer's): written back by ``to_json``
    extra: dict[str, Any] = field(default_factory=dict, hash=False)

    @property
    def median(self) -> float:
        return self.p50

    @classmethod
    def from_samples(cls, samples: Sequence[float] | np.ndarray) -> "LatencyStats":
        x = np.asarray(samples, dtype=np.float64)
        if x.size == 0:
            raise ValueError("no samples")
        p50, p90, p95, p99 = np.percentile(x, PERCENTILES)
        q25, q75 = np.percentile(x, (25, 75))
        mean = float(x.mean())
        std = float(x.std(ddof=1)) if x.size > 1 else 0.0
        mad = float(np.median(np.abs(x - p50)))
        robust_sigma = MAD_TO_SIGMA * mad
        outliers = int(np.count_nonzero(np.abs(x - p50) > OUTLIER_MADS * robust_sigma)) if robust_sigma > 0 else 0
        return cls(
            n=int(x.size),
            mean=mean,
            std=std,
            min=float(x.min()),
            p50=float(p50),
            p90=float(p90),
            p95=float(p95),
            p99=float(p99),
            max=float(x.max()),
            cv=std / mean if mean > 0 else 0.0,
            iqr=float(q75 - q25),
            mad=mad,
            outliers=outliers,
        )

    def to_json(self) -> dict[str, Any]:
        return {**{k: getattr(self, k) for k in STAT_KEYS}, **self.extra}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> "LatencyStats":
        """A ``stats`` object as ``to_json`` writes it; keys this type does not know are kept in ``extra``."""
        return cls(**{k: data[k] for k in STAT_KEYS}, extra={k: v for k, v in data.items() if k not in STAT_KEYS})


def median_ci_exact(samples: Sequence[float] | np.ndarray, confidence: float = CONFIDENCE) -> tuple[float, float]:
    """Distribution-free CI of the median from order statistics (scipy ``quantile_test``).

    Why not the bootstrap here: this runs after every round on every precision, and the exact
    binomial interval costs one sort instead of thousands of resampled medians, with guaranteed
    coverage for any continuous distribution (heavy tails included).
    """
    from scipy import stats as sps

    x = np.asarray(samples, dtype=np.float64)
    if x.size == 0:
        raise ValueError("no samples")
    if x.size < 2 or np.all(x == x[0]):
        m = float(np.median(x))
        return m, m
    ci = sps.quantile_test(x, q=float(np.median(x)), p=0.5).confidence_interval(confidence_level=confidence)
    low = float(ci.low) if np.isfinite(ci.low) else float(x.min())
    high = float(ci.high) if np.isfinite(ci.high) else float(x.max())
    return low, high
