"""Simulated runners of known truth, driven through the REAL loop (``interleave.run_interleaved``). Test code:
kept out of the shipped package (tests/ and benchmarks/verdict_calibration.py use it).

Why: a CI's coverage and a verdict's error rate cannot be checked on real engines (nobody knows
their true ratio), and checking them on i.i.d. samples misses what breaks intervals in practice:
rounds that are disturbed, loads that differ, drift. Here every replicate runs the loop exactly as
``compare`` does — loads, warm-up, block sizing, rounds, the stopping rule, the budget — with a
simulated clock, so a 15 s budget costs milliseconds of real time.

The truth. A simulated arm's latency in load ``i`` is ``base_ms × offset_i × shape noise × …``.
Load offsets are ``exp(±d)`` with ``d`` uniform in [3 %, 8 %] and a random sign, independent per
arm and load, so E[log offset] = 0 and E[offset] is the same for both arms: the *true ratio* is
the ratio of the arms' expected median latencies over loads, ``E_load[median A] / E_load[median B]``,
which here is ``median(A's shape) / median(B's shape)`` (for lognormal noise: ``base_A / base_B``;
for the bimodal case the median of the mixture, computed numerically). Outliers, drift and bursts
are disturbances the truth does not include: a correct interval must not be dragged by them.
The bimodal case: the mixture's median lies on the flank of the 55 % mode, so the median of an
~85-iteration block lands in the other mode in ~19 % of blocks (its round's log ratio then sits ~18
robust σ out) — a legitimate sampling swing, not a disturbance. Set aside as disturbed rounds, those
rounds truncated the estimate's distribution and biased it low (87.7 % coverage in 2000 replicates,
verdict_calibration-2026-12-01-v2-2000); the load value now pools each parity's blocks before taking
medians and a far round goes only when its block moved as a whole (``speedup.load_value``,
``speedup.block_shifted``): 96.1 % (verdict_calibration-2026-12-01-v3-2000). The truth was not changed.
Lopsided cases: the candidate is ``f``× slow in a random share ``p`` of the loads (a mode of process
starts), so the truth is ``ratio / (1 − p + p·f)``. Order effect: whichever arm runs second in a
round is faster by that fraction (both arms run second equally often, so the truth is the ratio).
"""
from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping

import numpy as np

from trtprof.measure.interleave import ROUND_WARMUP, InProcessLoad, InterleavedOutcome, RoundPlan, run_interleaved
from trtprof.measure.serial_loads import run_serial
from trtprof.stats.speedup import EQUIVALENT, FASTER, INCONCLUSIVE, SLOWER
from trtprof.measure.timing import Samples, TimingConfig

SIM_LOAD_START_S = 1.0  # simulated cost of starting one load (a worker process, engines loaded)
SIM_BLOCK_OVERHEAD_S = 0.002  # simulated fixed cost per block (IPC, warm-up bookkeeping)
BURST_FACTOR = 1.3  # a one-engine burst: that block runs 30 % slow (a neighbour, a page-cache miss)


class SimClock:
    """A clock that only moves when a simulated runner runs."""

    def __init__(self) -> None:
        self.t = 0.0

    def __call__(self) -> float:
        return self.t


@dataclass(frozen=True)
class Case:
    """One simulated situation. ``sigma``: per-iteration lognormal spread; the rest as named."""

    name: str
    sigma: float = 0.10
    outlier_fraction: float = 0.0  # share of iterations that take OUTLIER× longer
    outlier_factor: float = 5.0
    drift_per_s: float = 0.0  # latency × (1 + drift_per_s · t)
    shared_burst_rate_hz: float = 0.0  # bursts that slow every arm (Poisson in time) …
    shared_burst_s: float = 0.15  # … lasting this long …
    shared_burst_factor: float = 1.5  # … by this factor
    burst_rounds: int = 0  # one-engine bursts: this many rounds of load 1 run the candidate slow
    load_offsets: tuple[float, float] | None = None  # (low, high) of |log offset| per arm and load
    bimodal: tuple[float, float, float] | None = None  # baseline is (p low, low ms, high ms) × base
    bimodal_sigma: float = 0.02
    lopsided: tuple[float, float] | None = None  # (p, f): each load of the candidate is f× slow with probability p
    order_effect: float = 0.0  # the arm that runs second in a round is this much faster (warm caches)

    def true_ratio(self, ratio: float) -> float:
        """E_load[median baseline] / E_load[median candidate] (see the module docstring)."""
        if self.lopsided is not None:
            p, f = self.lopsided
            return ratio / (1 - p + p * f)
        if self.bimodal is None:
            return ratio
        return _mixture_median(self.bimodal, self.bimodal_sigma) * ratio / _candidate_center(self)


def _candidate_center(case: Case) -> float:
    """The candidate of the bimodal case sits between the modes: (low + high) / 2, steady."""
    p, low, high = case.bimodal or (1.0, 1.0, 1.0)
    return (low + high) / 2


def _mixture_median(bimodal: tuple[float, float, float], sigma: float) -> float:
    from scipy import optimize
    from scipy import stats as sps

    p, low, high = bimodal

    def cdf(x: float) -> float:
        return p * sps.norm.cdf(math.log(x / low) / sigma) + (1 - p) * sps.norm.cdf(math.log(x / high) / sigma)

    return float(optimize.brentq(lambda x: cdf(x) - 0.5, low * 0.5, high * 2))


CASES: tuple[Case, ...] = (
    Case("stationary 2 %", sigma=0.02),
    Case("stationary 10 %", sigma=0.10),
    Case("stationary 30 %", sigma=0.30),
    Case("1 % outliers 5x", sigma=0.10, outlier_fraction=0.01),
    Case("linear drift +2 %/s", sigma=0.10, drift_per_s=0.02),
    Case("shared bursts", sigma=0.10, shared_burst_rate_hz=0.5),
    Case("one-engine burst, 1 round", sigma=0.10, burst_rounds=1),
    Case("one-engine burst, 2 rounds", sigma=0.10, burst_rounds=2),
    Case("per-load offsets 3-8 %", sigma=0.10, load_offsets=(0.03, 0.08)),
    Case("bimodal 55/45 vs steady", sigma=0.02, bimodal=(0.55, 1.0, 1.3)),
    Case("lopsided: 10 % slow in 20 % of loads", sigma=0.10, lopsided=(0.2, 1.10)),
    Case("lopsided: 20 % slow in 10 % of loads", sigma=0.10, lopsided=(0.1, 1.20)),
    Case("order effect: second arm 3 % faster", sigma=0.10, order_effect=0.03),
)
STATIONARY = ("stationary 2 %", "stationary 10 %", "stationary 30 %")


class SimRunner:
    """A simulated engine: one arm in one load, with the case's disturbances."""

    device = "cpu"

    def __init__(self, name: str, base_ms: float, offset: float, case: Case, world: "SimWorld",
                 is_candidate: bool, load: int) -> None:
        self.name, self.base_ms, self.offset, self.case, self.world = name, base_ms, offset, case, world
        self.is_candidate, self.load = is_candidate, load
        self.blocks = 0

    def draw(self, n: int, rng: np.random.Generator) -> np.ndarray:
        case = self.case
        if case.bimodal is not None and not self.is_candidate:
            p, low, high = case.bimodal
            centers = np.where(rng.random(n) < p, low, high)
            x = centers * np.exp(case.bimodal_sigma * rng.standard_normal(n))
        elif case.bimodal is not None:
            x = _candidate_center(case) * np.exp(case.bimodal_sigma * rng.standard_normal(n))
        else:
            x = np.exp(case.sigma * rng.standard_normal(n))
        if case.outlier_fraction:
            x = np.where(rng.random(n) < case.outlier_fraction, x * case.outlier_factor, x)
        return x * self.base_ms * self.offset


class SimWorld:
    """Shared state of one replicate: the clock, the rng, the burst schedule."""

    def __init__(self, case: Case, seed: int) -> None:
        self.case = case
        self.clock = SimClock()
        self.rng = np.random.default_rng(seed)
        horizon = 10_000.0
        if case.shared_burst_rate_hz > 0:
            n = int(self.rng.poisson(case.shared_burst_rate_hz * horizon))
            self.burst_starts = np.sort(self.rng.uniform(0, horizon, n))
        else:
            self.burst_starts = np.empty(0)
        # which (load, round) blocks of the candidate get a one-engine burst: rounds 1.. of load 1
        self.burst_blocks = {(1, r) for r in range(1, 1 + case.burst_rounds)}
        self.round_blocks: dict[int, int] = {}  # load → round blocks measured (the order effect's position)
        self.slow_loads = 0

    def factor_at(self, times_s: np.ndarray) -> np.ndarray:
        case = self.case
        f = 1.0 + case.drift_per_s * times_s
        if self.burst_starts.size:
            idx = np.searchsorted(self.burst_starts, times_s) - 1
            inside = (idx >= 0) & (times_s - self.burst_starts[np.maximum(idx, 0)] < case.shared_burst_s)
            f = np.where(inside, f * case.shared_burst_factor, f)
        return f

    def measure(self, runner: SimRunner, feeds: Mapping[str, np.ndarray], config: TimingConfig) -> Samples:
        warm_n = config.warmup
        if config.warmup_ms:  # warm up by time too, as timing.warm_up does: that time comes out of the budget
            warm_n = max(warm_n, math.ceil(config.warmup_ms / (runner.base_ms * runner.offset)))
        n = config.iterations
        raw = runner.draw(warm_n + n, self.rng)
        t0 = self.clock.t
        times = t0 + np.concatenate([[0.0], np.cumsum(raw[:-1])]) / 1e3
        lat = raw * self.factor_at(times)
        if config.warmup == ROUND_WARMUP and config.warmup_ms is None:  # a round's block, not the load warm-up
            if runner.is_candidate and (runner.load, runner.blocks) in self.burst_blocks:
                lat = lat * BURST_FACTOR
            runner.blocks += 1
            position = self.round_blocks.get(runner.load, 0)  # blocks of a round run back to back: 0 first, 1 second
            self.round_blocks[runner.load] = position + 1
            if position % 2 == 1:
                lat = lat * (1.0 - self.case.order_effect)
        self.clock.t = t0 + float(lat.sum()) / 1e3 + SIM_BLOCK_OVERHEAD_S
        timed = lat[warm_n:]
        return Samples(stages={"latency_ms": timed}, span_s=float(timed.sum()) / 1e3, warmup_done=warm_n,
                       warmup_s=float(lat[:warm_n].sum()) / 1e3)

    def open_load(self, index: int, names: tuple[str, str], base_ms: tuple[float, float],
                  parallel: int = 1) -> InProcessLoad:
        if index == 0 or index >= parallel:  # compare starts its first loads side by side, later ones singly
            self.clock.t += SIM_LOAD_START_S
        arms: dict[str, tuple[Any, Mapping[str, np.ndarray]]] = {}
        for k, (name, base) in enumerate(zip(names, base_ms)):
            offset = 1.0
            if self.case.load_offsets is not None:
                low, high = self.case.load_offsets
                offset = math.exp(self.rng.choice((-1.0, 1.0)) * self.rng.uniform(low, high))
            if self.case.lopsided is not None and k == 1 and self.rng.random() < self.case.lopsided[0]:
                offset *= self.case.lopsided[1]
                self.slow_loads += 1
            arms[name] = (SimRunner(name, base, offset, self.case, self, is_candidate=k == 1, load=index), {})
        return InProcessLoad(arms, measure=self.measure)


@dataclass
class Replicate:
    verdict: str
    estimate: float
    ci_low: float
    ci_high: float
    rounds: int
    loads: int
    sim_s: float
    stop_reason: str
    slow_loads: int = 0  # lopsided cases: loads that drew the candidate's slow mode


def run_replicate(case: Case, ratio: float, seed: int, plan: RoundPlan | None = None,
                  base_ms: float = 1.0, serial: bool = False) -> Replicate:
    """One simulated ``compare`` of baseline (``base_ms × ratio``) against candidate (``base_ms``); ``serial``:
    with ``compare --serial-loads``'s loop (``serial_loads.run_serial``: every load opened alone, at full cost)."""
    world = SimWorld(case, seed)
    names = ("base", "cand")
    plan = plan or RoundPlan()
    bases = (base_ms * ratio, base_ms)
    out: InterleavedOutcome = (run_serial if serial else run_interleaved)(
        names, lambda i: world.open_load(i, names, bases, 1 if serial else plan.min_loads), plan, clock=world.clock)
    s = out.speedups["cand"]
    return Replicate(s.verdict, s.estimate, s.ci_low, s.ci_high, out.rounds, out.loads, world.clock.t, out.stop_reason,
                     world.slow_loads)


@dataclass
class CaseSummary:
    case: str
    truth: float
    replicates: int
    verdicts: dict[str, float]  # share of each verdict
    decisive_rate: float  # faster or slower (A/A: the false-alarm rate)
    coverage: float
    median_width: float  # median of (ci_high − ci_low) / estimate
    median_rounds: float
    median_loads: float
    median_sim_s: float
    wall_s: float
    extra: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return dict(self.__dict__)


def summarize_case(case: Case, ratio: float, replicates: int, *, seed: int = 0,
                   plan: RoundPlan | None = None, serial: bool = False) -> CaseSummary:
    t0 = time.perf_counter()
    truth = case.true_ratio(ratio)
    reps = [run_replicate(case, ratio, seed * 100_003 + k, plan, serial=serial) for k in range(replicates)]
    verdicts = {v: sum(r.verdict == v for r in reps) / replicates for v in (FASTER, SLOWER, EQUIVALENT, INCONCLUSIVE)}
    covered = [r.ci_low <= truth <= r.ci_high for r in reps]
    return CaseSummary(
        case=case.name, truth=truth, replicates=replicates, verdicts=verdicts,
        decisive_rate=verdicts[FASTER] + verdicts[SLOWER], coverage=float(np.mean(covered)),
        median_width=float(np.median([(r.ci_high - r.ci_low) / r.estimate for r in reps])),
        median_rounds=float(np.median([r.rounds for r in reps])), median_loads=float(np.median([r.loads for r in reps])),
        median_sim_s=float(np.median([r.sim_s for r in reps])), wall_s=time.perf_counter() - t0,
        extra={"width_over_spread": width_over_spread(reps), "coverage_by_stop": coverage_by_stop(reps, covered),
               **lopsided_extra(case, reps, covered)},
    )


def coverage_by_stop(reps: list[Replicate], covered: list[bool]) -> dict[str, dict[str, float]]:
    """Coverage of the replicates that stopped for each reason (``decisive``, ``target``,
    ``time_budget``): a stopping rule that selects on the data shows as a gap between them."""
    out = {}
    for reason in sorted({r.stop_reason for r in reps}):
        hits = [c for c, r in zip(covered, reps) if r.stop_reason == reason]
        out[reason] = {"share": len(hits) / len(reps), "coverage": float(np.mean(hits))}
    return out


def lopsided_extra(case: Case, reps: list[Replicate], covered: list[bool]) -> dict[str, float]:
    """For a lopsided case: how often the slow mode was never drawn, and how often the replicate was
    covered or said ``inconclusive`` (the issue's criterion where a mixture cannot be resolved)."""
    if case.lopsided is None:
        return {}
    ok = [c or r.verdict == INCONCLUSIVE for c, r in zip(covered, reps)]
    drawn = [k for k, r in enumerate(reps) if r.slow_loads > 0]
    return {"unseen": float(np.mean([r.slow_loads == 0 for r in reps])), "covered_or_inconclusive": float(np.mean(ok)),
            "covered_or_inconclusive_when_drawn": float(np.mean([ok[k] for k in drawn])) if drawn else float("nan")}


def width_over_spread(reps: list[Replicate]) -> float:
    """Median CI half-width (log) over 1.96 × the replicate-to-replicate SD of log(estimate): about 1
    for an interval as wide as the run-to-run spread says it should be (t with few loads: a bit more)."""
    logs = np.log([r.estimate for r in reps])
    half = np.median([math.log(r.ci_high / r.ci_low) / 2 for r in reps if r.ci_low > 0 and math.isfinite(r.ci_high)])
    spread = float(np.std(logs, ddof=1)) if len(reps) > 1 else float("nan")
    return float(half / (1.96 * spread)) if spread > 0 else float("nan")


def case_named(name: str) -> Case:
    return next(c for c in CASES if c.name == name)


Runner = Callable[..., Replicate]
