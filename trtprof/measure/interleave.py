"""The measurement loop of ``compare``: loads × interleaved rounds × iterations, stopped on the speedup.

Why loads: a *load* is one independent instance of every engine (by default a fresh worker process,
``trtprof.measure.workers``: its own allocation, ASLR, thread placement, CUDA context). Two instances of the
same engine can differ by several per cent through every round; only measuring several loads shows
that spread, and the speedup CI (``trtprof.stats.speedup``) is built on it.

Why interleaved rounds: inside a load every arm runs one block per round and the order flips every
round (A B, then B A), so drift and throttling hit every arm alike, each round gives a paired ratio,
and each *pair* of rounds cancels an order effect (the arm that runs second being a little faster
or slower). Which order a load starts with is drawn at random, balanced over the loads (of every
two loads, one starts A B and one B A), so no load pattern is the same in every worker.

Why this stopping rule: the user asks "is the candidate faster, by how much?". So the loop looks at
the speedup's CI after each sweep (every load runs a few more round pairs; sweeps grow
geometrically, so there are few looks) and stops when every candidate's CI is decisive (wholly
beyond the equivalence margin, or wholly inside it), or when its half-width is within
``target_ci``, or the time budget is spent. Where effort goes follows the measured variance
components and what each costs (``wants_load``): the next sweep adds a load when that shrinks the
interval more per second than more rounds would (the load-to-load spread dominates, or few loads
leave a large t quantile), otherwise round pairs.

The budget is a ``budget.BatchWindow``: wall time from its ``started`` up to its ``budget_s`` (the CLI
counts from its process's start, ``clock.process_start``, so that imports, the cache lookup, the accuracy
pass and the workers' start-up are inside the first batch size's budget; compare gives each batch size
its window from one ``budget.TimeBudget``, keeping ``reserve_s`` for what runs after measuring): blocks are
sized so that the minimum design (``min_loads`` × ``min_rounds``) fits in the budget (a given budget that cannot
hold it is refused after the first load, before any round: ``BudgetTooSmall``), a load or a sweep that would end
past it is not started, and below the minimum only the floor of two loads × one round pair runs regardless
(without it there is no interval at all); the outcome says so when the floor ends past it (``floor_overrun``).

Everything time-related goes through an injectable ``clock`` and every measurement through a
``Load`` (``trtprof.measure.loads``; ``InProcessLoad`` takes an injectable ``measure``): the calibration simulation
(``benchmarks/verdict_calibration.py``, ``tests/stats/test_verdict_calibration.py``) drives this very loop
with runners of known truth on a simulated clock.
"""
from __future__ import annotations

import math
import time
from dataclasses import dataclass, field, replace
from typing import Any, Callable, Mapping, Sequence

import numpy as np

from . import timing
from ..errors import TrtprofError
from ..system import nvml
from .blocks import (  # noqa: F401  (re-exported: the tests and the workers import them from here)
    DEFAULT_ROUND_S, LOAD_WARMUP_ITERATIONS, LONG_CALL_ITERATIONS, MAX_ROUND_ITERATIONS, MIN_ROUND_ITERATIONS,
    PRIMED_FIRST_WARMUP_MS, PRIMED_LOAD_WARMUP_MS, ROUND_WARMUP, ROUND_WARMUP_NONE_MS, ROUND_WARMUP_ONE_CALL_MS,
    block_floor, iterations_for, later_load_s, round_warmup)
from .budget import (  # noqa: F401  (re-exported)
    FLOOR_LOADS, FLOOR_ROUNDS, BatchWindow, BudgetTooSmall, MinimumCost, floor_overrun_line)
from ..stats.speedup import DECISIVE, EQUIVALENCE_MARGIN, Speedup, engine_median_ci, speedup_ci, verdict
from .loads import (  # noqa: F401  (re-exported: the workers, compare, train and the tests import them from here)
    Arm, InProcessLoad, Load, Measure, load_order, measure_block, round_order, warm_up_side_by_side, with_load_warnings)
from .timing import Samples, TimingConfig

DEFAULT_TARGET_CI = 0.005  # stop when the speedup's 95 % CI half-width is within ±0.5 % (half the margin)
DEFAULT_TIME_BUDGET_S = 12.0  # per batch size, the whole command (start-up, warm-up, the end) included
MIN_LOADS = 6  # t(5 df) = 2.57, and a minority mode of the loads can show (speedup.load_mixture)
MAX_LOADS = 20  # the allocation (wants_load) decides below this, from the variance components and costs
LOADS_LIMIT = 64  # the most loads a user can ask for (--min-loads lifts max_loads up to it): 59 see a 5 % mode
MIN_ROUNDS = 4  # per load before the first look: two round pairs (A B + B A, twice)
MIN_DESIGN_SHARE = 0.6  # the minimum rounds' blocks are sized to this share of the budget left after the loads
# Every decision plans against this share of the budget: what a round costs varies from round to round
# (measured on the loaded 2-core machine: ±30 %), and the budget is a promise within 10 %.
BUDGET_PLAN_SHARE = 0.95
SWEEP_GROWTH = 0.5  # each sweep adds this fraction of the rounds a load already has (few looks)
FIRST_WARMUP = 10  # before a load's first round, per arm: at least this many calls …
# A grown default window is fitted again after the second load when that load cost more than this times the
# first (``RoundLoop.refit_window``): on the H200 a pre-warmed load 0 took 1.8 s and the later ones ~4 s (2.2×);
# loads of one kind differ by a few per cent, and a later load's warm-up is shorter by design.
REFIT_LOAD_RATIO = 1.25
FIRST_WARMUP_MS = 500.0  # … and this long in a batch size's first load (GPU clocks ramp from idle: FACTS.md)
LOAD_WARMUP_MS = 100.0  # later loads start on a machine the first load has already warmed

# An early stop (before the budget is spent) needs the stricter interval to be decisive: the loop
# looks several times, and stopping at the first look whose 95 % CI happens to be decisive would
# raise the false-alarm rate above 5 % and drop coverage below 95 % (simulated, 3-8 % load offsets:
# at 0.99, 4 % of A/A runs decisive and 91 % coverage of a true 1.05).
# The reported CI and verdict stay at 95 %; at the end of the budget they are what they are.
# The stricter interval's SE is also at least what the rounds' spread implies (Speedup.stop_interval).
STOP_CONFIDENCE = 0.999


ORDINALS = ("first", "second", "third", "fourth", "fifth", "sixth", "seventh", "eighth", "ninth", "tenth")

STOP_DECISIVE = "decisive"
STOP_TARGET = "target"
STOP_BUDGET = "time_budget"
STOP_LOAD_LOST = "load_lost"  # a load's process died: the outcome holds the rounds finished before (partial)


class LoadLost(TrtprofError):
    """A load is gone mid-run (its worker process died). ``partial``: the outcome of the rounds every
    load finished before, set by ``run_interleaved`` (None when there were none)."""

    partial: "InterleavedOutcome | None" = None


@dataclass(frozen=True)
class RoundPlan:
    target_ci: float = DEFAULT_TARGET_CI
    time_budget_s: float = DEFAULT_TIME_BUDGET_S
    round_iterations: int | None = None  # None: sized to ~round_s from the warmup
    min_rounds: int = MIN_ROUNDS  # per load
    min_loads: int = MIN_LOADS
    max_loads: int = MAX_LOADS
    margin: float = EQUIVALENCE_MARGIN
    first_warmup: int = FIRST_WARMUP
    first_warmup_ms: float = FIRST_WARMUP_MS
    load_warmup_ms: float = LOAD_WARMUP_MS  # a later load's warm-up (never longer than the first's)
    round_s: float = DEFAULT_ROUND_S
    copies: bool = True
    cuda_graph: bool = False
    autotune: bool = True  # torch: cudnn.benchmark during the run (backends.base.set_autotune), in every load
    order_seed: int = 0  # which loads start with which arm (load_order)

    def block_config(self, iterations: int, warmup: int = ROUND_WARMUP) -> TimingConfig:
        return TimingConfig(warmup=warmup, iterations=iterations, copies=self.copies, cuda_graph=self.cuda_graph)

    @property
    def later_warmup_ms(self) -> float:
        return min(self.first_warmup_ms, self.load_warmup_ms)

    def primed(self) -> "RoundPlan":
        """For loads their worker primed: ``PRIMED_FIRST_WARMUP_MS``/``PRIMED_LOAD_WARMUP_MS`` (never longer)."""
        return replace(self, first_warmup_ms=min(self.first_warmup_ms, PRIMED_FIRST_WARMUP_MS),
                       load_warmup_ms=min(self.load_warmup_ms, PRIMED_LOAD_WARMUP_MS))

    def warmup_config(self, first_load: bool = True) -> TimingConfig:
        wanted = self.first_warmup_ms if first_load else self.later_warmup_ms
        warm_ms = min(wanted, self.time_budget_s * 1e3 * 0.05)
        return TimingConfig(warmup=self.first_warmup, warmup_ms=warm_ms,
                            iterations=MIN_ROUND_ITERATIONS if first_load else LOAD_WARMUP_ITERATIONS,
                            copies=self.copies, cuda_graph=self.cuda_graph)

    def to_json(self) -> dict[str, Any]:
        return {"target_ci": self.target_ci, "time_budget_s": self.time_budget_s,
                "round_iterations": self.round_iterations, "min_rounds_per_load": self.min_rounds,
                "min_loads": self.min_loads, "max_loads": self.max_loads, "equivalence_margin": self.margin,
                "round_s": self.round_s, "copies": self.copies, "cuda_graph": self.cuda_graph,
                "autotune": self.autotune, "order_seed": self.order_seed}


@dataclass(frozen=True)
class Progress:
    """What the loop knows after one look: printed per batch size while it runs."""

    loads: int
    rounds: int
    elapsed_s: float  # spent of the budget so far (worker start-up included when compare passed it)
    speedups: dict[str, Speedup]
    stop_reason: str | None  # set on the last look
    budget_s: float = float("nan")


@dataclass
class InterleavedOutcome:
    arms: list[Arm]
    rounds: int  # all loads together
    stop_reason: str  # "decisive" | "target" | "time_budget"
    elapsed_s: float
    round_iterations: dict[str, int]
    half_widths: dict[str, float]  # per arm: relative half-width of its (hierarchical) median CI
    loads: int = 1
    speedups: dict[str, Speedup] = field(default_factory=dict)  # per candidate, as of the last look
    round_s: float = 0.0  # measured seconds per round (all arms), for "about N more rounds"
    budget_s: float = float("nan")  # the budget it ran under (elapsed_s counts from the same start)
    reserve_s: float = 0.0  # of the budget, kept for what runs after measuring
    floor_overrun: str = ""  # floor_overrun_line when the floor ended past the deadline
    budget_note: str = ""  # BatchWindow.fitted's line: the budget grew to fit the loads, or would need more
    # per candidate, its accuracy verdict (OK/DEGRADED/BROKEN) where the caller judged it before announcing
    # the batch size (compare: a BROKEN candidate's verdict is never shown as plainly faster)
    accuracy: dict[str, str] = field(default_factory=dict)
    minimum: MinimumCost | None = None  # what the minimum design was reckoned to need after the first load
    round_warmup: int = ROUND_WARMUP  # warm-up calls before each block's timed ones (``round_warmup``)
    min_rounds: int = MIN_ROUNDS  # the minimum rounds per load the loop ran under (``RoundLoop.rounds_plan``)

    def arm(self, name: str) -> Arm:
        return next(a for a in self.arms if a.name == name)

    def round_ratios(self, baseline: str, candidate: str) -> list[float]:
        b, c = self.arm(baseline).round_medians_ms, self.arm(candidate).round_medians_ms
        return [x / y for x, y in zip(b, c) if y > 0]

    def speedup(self, baseline: str, candidate: str, margin: float = EQUIVALENCE_MARGIN) -> Speedup:
        return speedup_ci(self.arm(baseline).latency_blocks(), self.arm(candidate).latency_blocks(), margin=margin)


def settled(speedups: Mapping[str, Speedup], target_ci: float, loads_opened: int = 0) -> str | None:
    """Stop early (decisive, or the CI target) — but not while a load opened has no value in an
    interval (every round of it set aside as disturbed): an early stop on fewer loads than were opened
    covered 92 % in the one-engine-burst calibration case (v3), where the whole burst load was set aside."""
    if any(s.loads < loads_opened for s in speedups.values()):
        return None
    strict = {name: s.stop_interval(STOP_CONFIDENCE) for name, s in speedups.items()}
    decided = {name: not s.mixture and verdict(*strict[name], s.margin) in DECISIVE for name, s in speedups.items()}
    if all(decided.values()):
        return STOP_DECISIVE
    narrow = {name: not s.mixture and (strict[name][1] - strict[name][0]) / 2 / s.estimate <= target_ci
              for name, s in speedups.items()}
    if all(decided[n] or narrow[n] for n in speedups):
        return STOP_TARGET
    return None


def wants_load(speedups: Mapping[str, Speedup], rounds_per_load: float, load_cost_s: float, round_s: float) -> bool:
    """Add a load (rather than rounds) when, for the same seconds, it shrinks some candidate's interval more.

    The interval's half-width² is ``t(df)² × (between + within / pairs) / loads`` (the variance
    components of ``speedup.variance_components``). One more load costs ``load_cost_s`` (open,
    warm-up and its first round pairs); the same seconds spent on round pairs spread over the loads
    it has. A load also buys a degree of freedom, and a load mixture is only resolved by more loads."""
    from ..stats.speedup import t_quantile

    for s in speedups.values():
        if s.mixture:
            return True
        loads = max(s.loads, 1)
        between, within = s.components.get("between", 0.0), s.components.get("within", 0.0)
        pairs = max(rounds_per_load / 2, 1.0)
        extra_pairs = load_cost_s / max(2 * round_s * loads, 1e-9)
        more_rounds = t_quantile(loads - 1) ** 2 * (between + within / (pairs + extra_pairs)) / loads
        more_loads = t_quantile(loads) ** 2 * (between + within / pairs) / (loads + 1)
        if more_loads < more_rounds:
            return True
    return False


@dataclass(frozen=True)
class LoopHooks:
    """The caller's side of ``run_interleaved`` (each optional): ``on_progress`` hears a ``Progress`` after
    every look; ``on_note`` hears, before the rounds, what the first load says of the budget
    (``BatchWindow.fitted``); ``load_ready(i)`` answers whether load ``i`` would open without waiting for
    a worker to start."""

    on_progress: Callable[[Progress], None] | None = None
    on_note: Callable[[str], None] | None = None
    load_ready: Callable[[int], bool] | None = None


def run_interleaved(names: Sequence[str], open_load: Callable[[int], Load], plan: RoundPlan, *,
                    clock: Callable[[], float] = time.perf_counter, window: BatchWindow | None = None,
                    hooks: LoopHooks = LoopHooks()) -> InterleavedOutcome:
    """Open loads, warm each, size the blocks, then sweep round pairs over the loads, look at every
    candidate's speedup CI after each sweep, and stop as the module docstring says.

    ``names[0]`` is the baseline; ``open_load(i)`` gives load ``i``. The budget is ``window`` (its
    ``started`` a ``clock()`` value; default: ``plan.time_budget_s`` from now, nothing reserved), of which
    the loop leaves ``window.reserve_s`` to what its caller does after it. ``hooks.load_ready(i)``: would load
    ``i`` open without waiting for a worker to start? When not, opening it is costed like the first load
    (start-up included) rather than like the last one. ``hooks.on_note`` hears, before the rounds, what the
    first load says of the budget (``BatchWindow.fitted``). Loads are closed on return."""
    names = list(names)
    if len(names) < 2:
        raise ValueError("need a baseline and at least one candidate")
    loop = RoundLoop(names, open_load, plan, clock,
                     window if window is not None else BatchWindow(started=clock(), budget_s=plan.time_budget_s))
    loop.load_ready, loop.on_note = hooks.load_ready, hooks.on_note
    on_progress = hooks.on_progress
    stop: str | None = None
    try:
        loop.open_minimum()
        while True:
            loop.look()
            stop = settled(loop.speedups, plan.target_ci, len(loop.loads))
            counts, adding = ([], False) if stop is not None else loop.next_sweep()
            if stop is None and not counts:
                stop = STOP_BUDGET
            if on_progress is not None:
                on_progress(loop.progress(stop))
            if stop is not None:
                break
            for i, count in enumerate(counts):
                loop.run(i, count)
            if adding:
                loop.add_one_more()
    except LoadLost as err:  # the rounds finished before it stand: the caller keeps them, marked partial
        err.partial = loop.partial_outcome()
        raise
    finally:
        for load in loop.loads:
            load.close()
    return loop.outcome(stop or STOP_BUDGET)


def run_one_load(arms: Sequence[Arm], plan: RoundPlan, *, measure: Measure = measure_block,
                 clock: Callable[[], float] = time.perf_counter,
                 on_progress: Callable[[Progress], None] | None = None) -> InterleavedOutcome:
    """The given ``Arm`` objects' runners as ONE load (for callers whose runners cannot be re-created
    per load, e.g. a training step), measured by ``run_interleaved`` and filled in place. Between-load
    differences are then not in the CI, and ``Speedup.method`` says so ("one load only")."""
    arms = list(arms)
    load = InProcessLoad({a.name: (a.runner, a.feeds or {}) for a in arms}, measure)  # the caller closes runners
    single = replace(plan, min_loads=1, max_loads=1)
    out = run_interleaved([a.name for a in arms], lambda i: load, single, clock=clock,
                          hooks=LoopHooks(on_progress=on_progress))
    for mine, filled in zip(arms, out.arms):
        for name in ("blocks", "span_s", "block_spans", "note_counts", "device_first", "device_last", "warmup_done", "warmup_s",
                     "setup_s", "third_party"):
            setattr(mine, name, getattr(filled, name))
    out.arms = arms
    return out


class RoundLoop:
    """The state of one ``run_interleaved``: loads, rounds done per load, the cost estimates."""

    def __init__(self, names: list[str], open_load: Callable[[int], Load], plan: RoundPlan,
                 clock: Callable[[], float], window: BatchWindow) -> None:
        self.names, self.open_load, self.plan, self.clock, self.window = names, open_load, plan, clock, window
        self.started, self.budget_s, self.reserve_s = window.started, window.budget_s, window.reserve_s
        self.floor_overrun = ""
        self.arms = {n: Arm(n) for n in names}
        self.loads: list[Load] = []
        self.done: list[int] = []  # rounds run per load
        self.iterations = 0
        self.floor_iterations = MIN_ROUND_ITERATIONS  # the fewest timed calls in a block (``block_floor``)
        self.round_warmup = ROUND_WARMUP  # calls before each block's timed ones (``round_warmup``)
        self.config = plan.block_config(MIN_ROUND_ITERATIONS)
        self.round_s = 0.0  # seconds per round (all arms), measured on the last rounds
        self.load_open_s = 0.0  # seconds the last load took to open and warm up
        self.first_open_s = 0.0  # from ``started`` until the first load was open and warm (start-up included)
        self.grown = False  # did fit_window grow the window?
        self.load_ready: Callable[[int], bool] | None = None
        self.on_note: Callable[[str], None] | None = None
        self.budget_note = ""
        self.minimum: MinimumCost | None = None  # reckoned after the first load (fit_window): what it took, …
        self.speedups: dict[str, Speedup] = {}

    def elapsed(self) -> float:
        return self.clock() - self.started

    def remaining(self) -> float:
        """Seconds the loop may still plan for: to the deadline (the budget less the reserve), less the
        slack of ``BUDGET_PLAN_SHARE`` of one batch size's budget."""
        slack = (1 - BUDGET_PLAN_SHARE) * self.window.slack_basis_s
        return self.budget_s - self.reserve_s - slack - self.elapsed()

    def add_load(self) -> dict[str, Samples]:
        t0 = self.clock()
        load = self.open_load(len(self.loads))
        self.loads.append(load)
        self.done.append(0)
        self.tell_round_warmup(load)
        warm = load.warm_up(self.plan.warmup_config(first_load=len(self.loads) == 1))
        for name, samples in warm.items():
            self.arms[name].add_warmup(samples)
        # what this load cost, less its wait for the run's other work (priming, a worker's start-up): the first
        # load's wait for priming is no later load's cost (it made the batch-1 window grow to 52 s for 30 s of
        # need, ResNet-50 on the H200, 2026-12-03); the wait stays in ``first_open_s``
        self.load_open_s = max(0.0, self.clock() - t0 - float(getattr(load, "waited_s", 0.0)))
        if len(self.loads) == 1:
            self.first_open_s = self.elapsed()
        return warm

    def tell_round_warmup(self, load: Any) -> None:
        """A later load that takes it (a worker's, primed: ``WorkerLoad.warm_up``) is told the rounds' warm-up calls."""
        if len(self.loads) > 1 and hasattr(load, "round_warmup"):
            load.round_warmup = self.round_warmup

    def minimum_loads_fitting(self) -> int:
        """How many of the minimum's loads not yet open fit what is left, each costed as one opened alone (and
        its floor rounds): the most that ``add_loads_side_by_side`` opens at once (at least one)."""
        count = 0
        while len(self.loads) + count < self.plan.min_loads:
            k = count + 1
            needed = k * self.next_load_cost() + (len(self.loads) + k) * FLOOR_ROUNDS * self.round_s
            if needed > self.remaining():
                break
            count = k
        return max(1, count)

    def add_loads_side_by_side(self, count: int) -> None:
        """``count`` more loads, their warm-ups run side by side (``loads.warm_up_side_by_side``: each in its
        worker, none beside a timed round), instead of one after another: on the H200 five later loads' warm-ups
        took 2-4 s of every batch size one by one (issue 42). What a later load costs stays the one measured
        alone (``load_open_s``), which the budget's later decisions use."""
        opened = []
        for _ in range(count):
            opened.append(self.open_load(len(self.loads)))
            self.loads.append(opened[-1])
            self.done.append(0)
            self.tell_round_warmup(opened[-1])
        for warm in warm_up_side_by_side(opened, self.plan.warmup_config(first_load=False)):
            for name, samples in warm.items():
                self.arms[name].add_warmup(samples)

    def next_load_cost(self) -> float:
        """Seconds the next load will take to open: like the last one, or like the first when its
        worker is still starting."""
        if self.load_ready is not None and not self.load_ready(len(self.loads)):
            return max(self.load_open_s, self.first_open_s)
        return self.load_open_s

    def run(self, index: int, count: int) -> None:
        if count <= 0:
            return
        t0 = self.clock()
        order = load_order(self.names, index, self.plan.order_seed)
        for rnd in self.loads[index].rounds(self.done[index], count, self.config, order):
            for name, samples in rnd.items():
                self.arms[name].add(samples, index)
        self.done[index] += count
        self.round_s = (self.clock() - t0) / count

    def max_pairs_fitting(self, loads: int) -> int:
        """Rounds (an even number, at least FLOOR_ROUNDS) per load that ``loads`` loads can still afford."""
        fit = int(self.remaining() / max(self.round_s * loads, 1e-9)) // 2 * 2
        return max(FLOOR_ROUNDS, fit)

    def add_one_more(self) -> None:
        """The load a sweep asked for (``next_sweep``), with its first rounds."""
        self.add_load()
        self.run(len(self.loads) - 1, min(self.plan.min_rounds, self.max_pairs_fitting(1)))

    def first_load(self) -> tuple[list[float], int, float]:
        """The first load opened and warm; from its warm-up: each arm's wall time per call (ms), the designed
        iterations per block and what a round of them costs; the floor's round cost set, the window fitted."""
        plan = self.plan
        warm0 = self.add_load()
        # what one iteration costs in wall time (the host loop and its bookkeeping included: a 13 µs
        # model took ~0.3 ms a call through time_host on the loaded 2-core machine), not its latency
        medians_ms = [max(float(np.median(w.latency_ms)), 1e3 * (w.warmup_s + w.span_s) / max(w.warmup_done + w.n, 1))
                      for w in warm0.values()]
        self.plan = plan = self.rounds_plan(medians_ms)
        floor = self.floor_iterations = block_floor(medians_ms)
        wanted = plan.round_iterations or min(iterations_for(m, plan, floor) for m in medians_ms)
        warm = self.round_warmup = round_warmup(medians_ms)
        self.round_s = sum((floor + warm) * m / 1e3 for m in medians_ms)  # the floor's blocks
        design_round_s = sum((wanted + warm) * m / 1e3 for m in medians_ms)
        self.fit_window(design_round_s, sum(w.warmup_s + w.span_s for w in warm0.values()))
        return medians_ms, int(wanted), design_round_s

    def rounds_plan(self, medians_ms: Sequence[float]) -> RoundPlan:
        """The plan once the first load's calls are timed (ms per call per arm): as given (``SerialLoop``: its own)."""
        return self.plan

    def size_blocks(self, medians_ms: Sequence[float], wanted: int, loads: int, later_s: float = 0.0) -> None:
        """Iterations per block: ``wanted``, shrunk (without a fixed ``round_iterations``) until the minimum
        rounds of ``loads`` loads take at most ``MIN_DESIGN_SHARE`` of what is left after ``later_s`` (loads still
        to open); ``config`` and ``round_s`` follow."""
        plan, warm = self.plan, self.round_warmup
        if plan.round_iterations is None:
            per_iteration_s = loads * plan.min_rounds * sum(medians_ms) / 1e3
            affordable = int(MIN_DESIGN_SHARE * (self.remaining() - later_s) / per_iteration_s) - warm \
                if per_iteration_s > 0 else wanted
            wanted = max(self.floor_iterations, min(wanted, affordable))
        self.iterations = int(wanted)
        self.config = plan.block_config(self.iterations, warm)
        self.round_s = sum((self.iterations + warm) * m / 1e3 for m in medians_ms)

    def open_minimum(self) -> None:
        """The minimum loads, each only while it fits (the floor always runs); then blocks sized so that
        the minimum rounds take at most ``MIN_DESIGN_SHARE`` of what is left, and those rounds."""
        plan = self.plan
        medians_ms, wanted, design_round_s = self.first_load()
        while len(self.loads) < plan.min_loads:
            needed = self.next_load_cost() + (len(self.loads) + 1) * FLOOR_ROUNDS * self.round_s
            if len(self.loads) >= FLOOR_LOADS and needed > self.remaining():
                break
            if len(self.loads) >= FLOOR_LOADS:  # the rest of the minimum that fits, warmed up side by side
                self.add_loads_side_by_side(self.minimum_loads_fitting())
                break
            self.add_load()
            if len(self.loads) == 2:
                self.refit_window(design_round_s)
        self.size_blocks(medians_ms, wanted, loads=len(self.loads))  # shrunk until the minimum rounds fit
        # one load alone: its round pairs are the interval's units, so its floor is two pairs
        floor = FLOOR_ROUNDS if len(self.loads) >= FLOOR_LOADS else 2 * FLOOR_ROUNDS
        for i in range(len(self.loads)):  # the floor's round pairs first: they measure what a round costs …
            self.run(i, floor)
        self.note_floor_overrun(floor)
        more = min(plan.min_rounds - floor, self.max_pairs_fitting(len(self.loads)))
        if len(self.loads) * more * self.round_s > self.remaining():  # … and the rest of the minimum if it fits
            more = 0
        for i in range(len(self.loads)):
            self.run(i, more)

    def note_floor_overrun(self, rounds: int) -> None:
        """After the floor, which runs regardless: where it ended past the deadline, the line that says so."""
        if self.elapsed() > self.budget_s - self.reserve_s:
            self.floor_overrun = floor_overrun_line(self.elapsed() + self.reserve_s, self.budget_s, self.reserve_s,
                                                    loads=len(self.loads), rounds=rounds)

    def fit_window(self, round_s: float, first_warm_s: float) -> None:
        """After the first load, before any round: what the minimum loads × rounds need from the budget's
        start, each later load costing what this one did less the part of its warm-up a later load skips
        (the plan's ``first_warmup_ms`` per arm here, ``later_warmup_ms`` later; ``first_warm_s``: what the warm-up took,
        a worker's start-up it waited for included, which is not skipped), rounds ``round_s``, with the reserve and
        the slack (kept: ``minimum``); the window grows to it or the note says how long it would need (``fitted``)."""
        plan = self.plan
        later_s = later_load_s(self.load_open_s, first_warm_s, len(self.names), plan)
        # the designed blocks (``round_s``), and the least ones the loop shrinks them to (``self.round_s``)
        before_s = self.window.budget_s
        least_s = self.minimum_needs_s(later_s, self.round_s)
        self.minimum = MinimumCost(least_s, self.load_open_s, self.first_open_s)
        if self.window.refuses and not self.window.minimum_fits(least_s):  # a given budget: stop, say what it needs
            raise BudgetTooSmall(self.window.refusal(least_s, self.load_open_s, plan.min_loads, plan.min_rounds), cost=self.minimum)
        self.window, self.budget_note = self.window.fitted(
            self.minimum_needs_s(later_s, round_s), self.load_open_s, plan.min_loads, plan.min_rounds, least_s=least_s)
        self.grown = self.window.budget_s > before_s
        self.budget_s = self.window.budget_s
        if self.budget_note and self.on_note is not None:
            self.on_note(self.budget_note)

    def minimum_needs_s(self, later_s: float, block_round_s: float) -> float:
        """Seconds from the budget's start the minimum design needs from now: the loads not yet open at
        ``later_s`` each, every load's minimum rounds at ``block_round_s``, the reserve, and the slack."""
        plan = self.plan
        rounds_left = max(plan.min_loads * plan.min_rounds - sum(self.done), 0)  # the rounds run are in elapsed()
        rest_s = (plan.min_loads - len(self.loads)) * later_s + rounds_left * block_round_s
        return (self.elapsed() + rest_s + self.reserve_s) / BUDGET_PLAN_SHARE

    def refit_window(self, round_s: float, index: int = 1) -> None:
        """After the second load opened (``index`` 1), where the first fit grew the default window: fit it again
        with what that load cost, which is what the later ones cost. The first load can be cheaper than the
        rest: on the H200 load 0's worker had run the accuracy pass, so cuDNN's first runs per shape
        were done before its warm-up, and the window fitted to its 1.8 s left room for 3 of the 6 loads
        where later ones took ~4 s (2026-12-02). After a later load of the minimum (``index`` 2 and on: loads
        living one at a time, ``serial_loads``), fit it again with what that one cost, whatever the ratio. Only a
        grown window is refitted after the second load, and a default one (``BatchWindow.grows``) after a later one;
        it grows further only (``BatchWindow.fitted``, up to its cap); one line says so."""
        if (first := self.minimum) is None or not (self.grown or (index > 1 and self.window.grows)):
            return
        if index == 1 and self.load_open_s <= REFIT_LOAD_RATIO * first.first_load_s:
            return
        plan = self.plan
        window, note = self.window.fitted(self.minimum_needs_s(self.load_open_s, round_s), self.load_open_s,
                                          plan.min_loads, plan.min_rounds,
                                          least_s=self.minimum_needs_s(self.load_open_s, self.round_s),
                                          which=ORDINALS[index] if index < len(ORDINALS) else f"#{index + 1}")
        if window.budget_s > self.window.budget_s:
            said = round(window.budget_s - window.opened_s) > round(self.window.budget_s - self.window.opened_s)
            self.window, self.budget_s, self.grown = window, window.budget_s, True
            if said:  # a line where the budget it names changes (not for every fraction of a second)
                self.budget_note = f"{self.budget_note}; {note}" if self.budget_note else note
                if self.on_note is not None:
                    self.on_note(note)

    def progress(self, stop: str | None) -> Progress:
        """What the last look knows (``stop``: set on the last one), for the caller's ``on_progress``."""
        return Progress(len(self.loads), sum(self.done), self.elapsed(), dict(self.speedups), stop, self.budget_s)

    def look(self) -> None:
        base = self.arms[self.names[0]].latency_blocks()
        self.speedups = {c: speedup_ci(base, self.arms[c].latency_blocks(), margin=self.plan.margin)
                         for c in self.names[1:]}

    def next_sweep(self) -> tuple[list[int], bool]:
        """Rounds per load of the next sweep (even counts; every load grows by ``step``, a newer load
        catches up by at most 2 steps; shrunk to what the budget allows), or ``([0, …], True)``: add a
        load instead. ``[]``: nothing more fits."""
        plan, remaining = self.plan, self.remaining()
        step = max(2, int(math.ceil(SWEEP_GROWTH * min(self.done) / 2)) * 2)
        load_cost = self.next_load_cost() + plan.min_rounds * self.round_s
        adding = (len(self.loads) < plan.max_loads and load_cost <= remaining
                  and wants_load(self.speedups, sum(self.done) / len(self.done), load_cost, self.round_s))
        if adding:  # the spread is between loads: a load, not rounds for the loads it has
            return [0] * len(self.done), True
        while True:
            top = max(self.done) + step
            counts = [max(0, min(top - d, 2 * step)) // 2 * 2 or 2 for d in self.done]
            if sum(counts) * self.round_s <= remaining:
                return counts, adding
            if step == 2:  # what is left: a round pair for the loads with the fewest rounds, as many as fit
                fit = int(remaining / max(2 * self.round_s, 1e-9))
                if fit < 1:
                    return [], False
                chosen = set(sorted(range(len(self.done)), key=lambda i: self.done[i])[:fit])
                return [2 if i in chosen else 0 for i in range(len(self.done))], False
            step = max(2, step // 4 * 2)

    def partial_outcome(self) -> InterleavedOutcome | None:
        """The outcome of the rounds finished so far (a load was lost), or None with none to show."""
        if sum(self.done) == 0:
            return None
        try:
            self.look()
            out = self.outcome(STOP_LOAD_LOST)
            out.loads = sum(1 for d in self.done if d)  # the lost load counts only with rounds of its own
            return out
        except (ValueError, ZeroDivisionError, IndexError):  # too little to summarise: nothing kept
            return None

    def outcome(self, stop: str) -> InterleavedOutcome:
        half = {}
        for name, arm in self.arms.items():
            low, high = arm.median_ci_ms()
            med = float(np.median(arm.latency_ms))
            half[name] = (high - low) / 2 / med if med > 0 else float("inf")
        return InterleavedOutcome(arms=[self.arms[n] for n in self.names], rounds=sum(self.done), stop_reason=stop,
                                  elapsed_s=self.elapsed(), round_iterations={n: self.iterations for n in self.names},
                                  round_warmup=self.round_warmup, min_rounds=self.plan.min_rounds,
                                  half_widths=half, loads=len(self.loads), speedups=self.speedups,
                                  round_s=self.round_s, budget_s=self.budget_s, reserve_s=self.reserve_s,
                                  floor_overrun=self.floor_overrun, budget_note=self.budget_note, minimum=self.minimum)
