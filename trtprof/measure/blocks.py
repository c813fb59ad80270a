"""How many calls a timing block makes (``interleave``'s rounds): its timed calls, sized to ``DEFAULT_ROUND_S`` per arm
within ``MIN_ROUND_ITERATIONS``..``MAX_ROUND_ITERATIONS`` (``iterations_for``; ``block_floor`` for long calls), and the
warm-up calls before them (``round_warmup``); a load's warm-up times, and what a later load's shorter one saves
(``later_load_s``). Re-exported by ``interleave``."""
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
# … and none where every arm's call takes at least this long (ms): the block's median of its ``LONG_CALL_ITERATIONS``
# calls already sets one slow first call aside, and the warm-up call is a quarter of such a block's calls (ResNet-50 at
# batch 256 on the H200: 20 rounds × 3 arms × one 51-87 ms call, about 4 s of a 70-s default run, 2026-12-04f)
ROUND_WARMUP_NONE_MS = 30.0
# A load whose worker primed every arm at this batch size's shapes seconds before (lone loads on a GPU: each life's
# worker runs its first runs and graph captures, then serves its batch sizes one after another, the GPU busy all the
# while) does not start on idle clocks: its warm-up is this long in a batch size's first load, and this in a later one
# (``RoundPlan.primed``). On the H200, ResNet-50 defaults with 100 / 30 ms: every arm's median within 0.04 % of the
# 500 / 100 ms run's in the same call (both within 0.9 % of the independent ORT loop), 3.4 s shorter (2026-12-04f).
PRIMED_FIRST_WARMUP_MS = 100.0
PRIMED_LOAD_WARMUP_MS = 30.0
# A later load of a worker that primed its arms at the load's inputs warms up with a round's warm-up calls
# (``round_warmup`` of the first load's calls: none where every arm's call takes ``ROUND_WARMUP_NONE_MS`` or more, one
# from ``ROUND_WARMUP_ONE_CALL_MS``, else ``ROUND_WARMUP``), and at least the plan's later-load warm-up time, as before.
# False: ``ROUND_WARMUP`` calls whatever the calls' length (before 2026-12-05). What it saves: a later life's batch-256
# warm-up was 2 calls per arm (ResNet-50 on the H200: 70/37/31 ms) where the 30 ms wanted one; 5 lives × 138 ms, about
# 0.7 s of a default run. Built 2026-12-05 without a GPU (none was lent); not yet run on one: the rounds' own rule
# (no warm-up call at 30 ms) was measured there (within 0.2 % of the ORT loop at batch 256, A/A 3 of 3, 2026-12-04f).
# Read at call time (``workers.WorkerLoad``), so that ``benchmarks/ort_setting_whatif.py`` can set it for one run.
PRIMED_WARMUP_AS_ROUND = True


def iterations_for(median_ms: float, plan: Any, floor: int = MIN_ROUND_ITERATIONS) -> int:
    if plan.round_iterations is not None:
        return int(plan.round_iterations)
    if not np.isfinite(median_ms) or median_ms <= 0:
        return MAX_ROUND_ITERATIONS
    wanted = int(plan.round_s * 1e3 / median_ms)
    return int(min(MAX_ROUND_ITERATIONS, max(floor, wanted)))


def long_calls(medians_ms: Sequence[float], at_least_ms: float = ROUND_WARMUP_ONE_CALL_MS) -> bool:
    """Does every arm's call take at least ``at_least_ms`` (default ``ROUND_WARMUP_ONE_CALL_MS``)?"""
    return bool(medians_ms) and min(medians_ms) >= at_least_ms


def block_floor(medians_ms: Sequence[float]) -> int:
    """The fewest timed calls in a block: ``LONG_CALL_ITERATIONS`` where every arm's call is long (``long_calls``),
    else ``MIN_ROUND_ITERATIONS``."""
    return LONG_CALL_ITERATIONS if long_calls(medians_ms) else MIN_ROUND_ITERATIONS


def round_warmup(medians_ms: Sequence[float]) -> int:
    """Warm-up calls before each block's timed ones: ``ROUND_WARMUP``, one where every arm's call is long
    (``long_calls``), none where every arm's call takes ``ROUND_WARMUP_NONE_MS`` or more."""
    if long_calls(medians_ms, ROUND_WARMUP_NONE_MS):
        return 0
    return 1 if long_calls(medians_ms) else ROUND_WARMUP


def later_load_s(first_open_s: float, first_warm_s: float, arms: int, plan: Any) -> float:
    """What a later load costs, from the first one (``first_open_s``, its warm-up ``first_warm_s`` of it): less the
    part of the time-bound warm-up (the plan's ``first_warmup_ms`` per arm) that a later load's shorter one
    (``later_warmup_ms``) skips."""
    by_design_s = min(first_warm_s, arms * plan.first_warmup_ms / 1e3)
    skipped = 1 - plan.later_warmup_ms / plan.first_warmup_ms if plan.first_warmup_ms > 0 else 0.0
    return max(first_open_s - by_design_s * skipped, 0.0)
