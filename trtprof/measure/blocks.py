"""How many calls a timing block makes (``interleave``'s rounds): its timed calls, sized to ``DEFAULT_ROUND_S`` per arm
within ``MIN_ROUND_ITERATIONS``..``MAX_ROUND_ITERATIONS`` (``iterations_for``; ``block_floor`` for long calls), and the
warm-up calls before them (``round_warmup``). Re-exported by ``interleave``."""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np

DEFAULT_ROUND_S = 0.1  # one block per arm per round: short, so drift within a block is small
MIN_ROUND_ITERATIONS = 5  # a block of a very slow model still gives a median of several samples
# … three where every arm's call takes at least ROUND_WARMUP_ONE_CALL_MS: calls that long vary little within a block
# (ResNet-50 at batch 256 on the H200: CV 0.3 %), and the interval's units are rounds of loads, not calls; the two
# calls fewer per block were 5.5 s of a default ResNet-50 run (20 rounds × 2 × 137 ms, 2026-12-04)
LONG_CALL_ITERATIONS = 3
LOAD_WARMUP_ITERATIONS = 1  # a later load's warm-up block times one call: only the first load's size the blocks
MAX_ROUND_ITERATIONS = 2000  # a block of a very fast model stays short in samples
ROUND_WARMUP = 2  # the first calls after another engine ran pay for cold caches; not steady state
# … where every arm's call takes at least this long (ms), one call does it: a call that long rewrites the GPU's L2
# (50 MB on an H200) many times over and the GPU has not idled between the blocks, so a second warm-up call only
# costs time (ResNet-50 at batch 256 on the H200: 24 rounds × 137 ms, 3.3 s of a default run, 2026-12-03)
ROUND_WARMUP_ONE_CALL_MS = 10.0


def iterations_for(median_ms: float, plan: Any, floor: int = MIN_ROUND_ITERATIONS) -> int:
    if plan.round_iterations is not None:
        return int(plan.round_iterations)
    if not np.isfinite(median_ms) or median_ms <= 0:
        return MAX_ROUND_ITERATIONS
    wanted = int(plan.round_s * 1e3 / median_ms)
    return int(min(MAX_ROUND_ITERATIONS, max(floor, wanted)))


def long_calls(medians_ms: Sequence[float]) -> bool:
    """Does every arm's call take at least ``ROUND_WARMUP_ONE_CALL_MS``?"""
    return bool(medians_ms) and min(medians_ms) >= ROUND_WARMUP_ONE_CALL_MS


def block_floor(medians_ms: Sequence[float]) -> int:
    """The fewest timed calls in a block: ``LONG_CALL_ITERATIONS`` where every arm's call is long (``long_calls``),
    else ``MIN_ROUND_ITERATIONS``."""
    return LONG_CALL_ITERATIONS if long_calls(medians_ms) else MIN_ROUND_ITERATIONS


def round_warmup(medians_ms: Sequence[float]) -> int:
    """Warm-up calls before each block's timed ones: ``ROUND_WARMUP``, one where every arm's call is long
    (``long_calls``)."""
    return 1 if long_calls(medians_ms) else ROUND_WARMUP
