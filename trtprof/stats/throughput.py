"""Throughput from a robust statistic, so that the throughput figure and the verdict cannot disagree.

Why not ``batch × iterations / total span``: that is batch / *mean* cycle time, and one stalled
block (a descheduled process, a GC pause, a clock drop) moves a mean as far as it likes. The
verdict is built from block medians (``trtprof.stats.speedup``); a throughput from the mean could show
FP16 3.4× ahead while the verdict says 0.99× (issue 24, the mlp at batch 1). Two robust definitions,
chosen by what a measurement has:

* **blocks** (``compare``'s rounds, the serving driver's rounds): each block's own rate,
  batch × its iterations / its wall time, then the *median over blocks*. A stalled block is one
  block, outvoted by the others; stalls that hit every block are real and stay.
* **one block** (``bench``'s single timed loop): one request in flight, so the engine serves one
  request per latency: batch / *median* latency.

The mean rate over the whole span is kept beside it (``wall_per_s``): when the two differ by more
than ``WALL_DISAGREE`` the result says so, because then the stalls, not the engine, set the mean.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np

from ..util.labels import fmt_rate

METHOD_BLOCKS = "median over blocks of batch × iterations / block wall time"
METHOD_MEDIAN = "batch / median latency (one request in flight)"
# the methods in words, for the note a person reads (the formula follows it as "Exactly:")
METHOD_WORDS = {METHOD_BLOCKS: "the typical timed block's rate", METHOD_MEDIAN: "from the median latency"}
# Relative gap between the robust throughput and the mean over the whole span above which a result
# carries a note: a few per cent is ordinary jitter; beyond 10 % stalls are setting the mean.
WALL_DISAGREE = 0.10


@dataclass(frozen=True)
class Throughput:
    per_s: float  # samples per second, robust (see the module docstring)
    method: str
    wall_per_s: float  # batch × all iterations / all wall time: the mean rate, stalls included
    blocks: int  # blocks the robust figure is the median of (1: batch / median latency)

    @property
    def note(self) -> str | None:
        """A sentence when the mean rate and the robust rate disagree by more than ``WALL_DISAGREE``."""
        if not (np.isfinite(self.per_s) and np.isfinite(self.wall_per_s)) or self.per_s <= 0:
            return None
        gap = self.wall_per_s / self.per_s - 1.0
        if abs(gap) <= WALL_DISAGREE:
            return None
        return (f"throughput {fmt_rate(self.per_s)}/s ({METHOD_WORDS.get(self.method, self.method)}) but "
                f"{fmt_rate(self.wall_per_s)}/s over the whole run ({gap:+.0%}): stalls or slow blocks, not the engine, "
                f"move the average rate. Exactly: {self.method}")

    def to_json(self) -> dict[str, Any]:
        return {"per_s": self.per_s, "method": self.method, "wall_per_s": self.wall_per_s, "blocks": self.blocks}


def throughput(batch_size: int, samples_ms: Sequence[float] | np.ndarray, span_s: float,
               blocks: Sequence[tuple[int, float]] | None = None) -> Throughput:
    """Samples/s of one engine at one batch size.

    ``blocks``: (iterations, wall seconds) of each timed block; with two or more, the median block
    rate; otherwise batch / median latency. ``span_s`` (all blocks' wall time) gives the mean rate."""
    x = np.asarray(samples_ms, dtype=np.float64)
    n = int(x.size)
    wall = batch_size * n / span_s if span_s > 0 and n else float("nan")
    usable = [(int(k), float(s)) for k, s in (blocks or ()) if k > 0 and s > 0]
    if len(usable) >= 2:
        rates = [batch_size * k / s for k, s in usable]
        return Throughput(float(np.median(rates)), METHOD_BLOCKS, wall, len(usable))
    median = float(np.median(x)) if n else float("nan")
    robust = batch_size * 1e3 / median if n and median > 0 else float("nan")
    return Throughput(robust, METHOD_MEDIAN, wall, 1)
