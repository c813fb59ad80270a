"""The measurement loop of ``compare``: loads × interleaved rounds × iterations, stopped on the speedup.

Why loads: a *load* is one independent instance of every engine (by default a fresh worker process,
``trtprof.workers``: its own allocation, ASLR, thread placement, CUDA context). Two instances of the
same engine can differ by several per cent through every round; only measuring several loads shows
that spread, and the speedup CI (``trtprof.speedup``) is built on it.

Why interleaved rounds: inside a load every arm runs one block per round and the order alternates
(A B, B A, …), so drift and throttling hit every arm alike and each round gives a paired ratio.

Why this stopping rule: the user asks "is the candidate faster, by how much?". So the loop looks at
the speedup's CI after each sweep (every load runs a few more rounds; sweeps grow geometrically, so
there are few looks) and stops when every candidate's CI is decisive (wholly beyond the equivalence
margin, or wholly inside it), or when its half-width is within ``target_ci``, or the time budget is
spent. Before the first look every load has ``min_rounds`` rounds and there are ``min_loads`` loads,
so no single load or round decides the interval. When the load-to-load spread dominates the SE, the
next sweep adds a load (more rounds could not help); otherwise it adds rounds.

Everything time-related goes through an injectable ``clock`` and every measurement through a
``Load`` (``InProcessLoad`` takes an injectable ``measure``): the calibration simulation
(``benchmarks/verdict_calibration.py``, ``tests/test_verdict_calibration.py``) drives this very loop
with runners of known truth on a simulated clock.
"""
from __future__ import annotations

import math
import re
import time
from dataclasses import dataclass, field, replace
from typing import Any, Callable, Mapping, Protocol, Sequence, overload

import numpy as np

from . import timing
from .speedup import DECISIVE, EQUIVALENCE_MARGIN, Speedup, engine_median_ci, speedup_ci, verdict
from .timing import Samples, TimingConfig

DEFAULT_TARGET_CI = 0.005  # stop when the speedup's 95 % CI half-width is within ±0.5 % (half the margin)
DEFAULT_TIME_BUDGET_S = 12.0  # per batch size, warmup and load starts included: 3 batch sizes < 60 s
MIN_LOADS = 6  # t(5 df) = 2.57; with 4 loads, four that happen to agree decided A/A runs falsely (sim)
MAX_LOADS = 10  # beyond this, loads cost more start-up than they buy in df
MIN_ROUNDS = 3  # per load before the first look: a load's median round needs a few rounds
SWEEP_GROWTH = 0.5  # each sweep adds this fraction of the rounds a load already has (few looks)
DEFAULT_ROUND_S = 0.1  # one block per arm per round: short, so drift within a block is small
MIN_ROUND_ITERATIONS = 5  # a block of a very slow model still gives a median of several samples
MAX_ROUND_ITERATIONS = 2000  # a block of a very fast model stays short in samples
ROUND_WARMUP = 2  # the first calls after another engine ran pay for cold caches; not steady state
FIRST_WARMUP = 10  # before a load's first round, per arm: at least this many calls …
FIRST_WARMUP_MS = 500.0  # … and this long in a batch size's first load (GPU clocks ramp from idle: FACTS.md)
LOAD_WARMUP_MS = 100.0  # later loads start on a machine the first load has already warmed

# An early stop (before the budget is spent) needs the stricter interval to be decisive: the loop
# looks several times, and stopping at the first look whose 95 % CI happens to be decisive would
# raise the false-alarm rate above 5 % and drop coverage below 95 % (simulated, 3-8 % load offsets:
# at 0.99, 4 % of A/A runs decisive and 91 % coverage of a true 1.05).
# The reported CI and verdict stay at 95 %; at the end of the budget they are what they are.
STOP_CONFIDENCE = 0.999

STOP_DECISIVE = "decisive"
STOP_TARGET = "target"
STOP_BUDGET = "time_budget"


def measure_block(runner: Any, feeds: Mapping[str, np.ndarray], config: TimingConfig) -> Samples:
    """One block through THE shared loop: host clock for cpu runners, CUDA events for cuda runners."""
    if runner.device == "cpu":
        return timing.time_host(lambda: runner.infer(feeds), config)
    time_device = getattr(timing, "time_device", None)
    if time_device is None:  # pragma: no cover - depends on the GPU timing loop being present
        from .errors import BackendUnavailable

        raise BackendUnavailable("this trtprof has no GPU timing loop (timing.time_device)")
    return time_device(runner, feeds, config)


Measure = Callable[[Any, Mapping[str, np.ndarray], TimingConfig], Samples]


class Load(Protocol):
    """One instance of every arm. ``rounds`` runs rounds ``first … first+count−1`` of this load,
    arm order as given on even rounds, reversed on odd ones; returns arm name → Samples per round."""

    def warm_up(self, config: TimingConfig) -> dict[str, Samples]: ...

    def rounds(self, first: int, count: int, config: TimingConfig) -> list[dict[str, Samples]]: ...

    def close(self) -> None: ...


def round_order(names: Sequence[str], index: int) -> list[str]:
    return list(names) if index % 2 == 0 else list(names)[::-1]


class InProcessLoad:
    """A load whose runners live in this process (test fakes, simulations, backends that cannot be
    spawned). ``measure`` is injectable: the simulation passes runners of known truth."""

    def __init__(self, arms: Mapping[str, tuple[Any, Mapping[str, np.ndarray]]], measure: Measure = measure_block,
                 on_close: Callable[[], None] | None = None) -> None:
        self.arms = dict(arms)
        self.measure = measure
        self.on_close = on_close

    def warm_up(self, config: TimingConfig) -> dict[str, Samples]:
        return {name: self.measure(runner, feeds, config) for name, (runner, feeds) in self.arms.items()}

    def rounds(self, first: int, count: int, config: TimingConfig) -> list[dict[str, Samples]]:
        out = []
        for j in range(first, first + count):
            out.append({name: self.measure(*self.arms[name], config) for name in round_order(list(self.arms), j)})
        return out

    def close(self) -> None:
        if self.on_close is not None:
            self.on_close()


@dataclass
class Arm:
    """One arm (precision label) at one batch size: its samples per load and round, notes, device state."""

    name: str
    runner: Any = None  # kept for callers that build arms by hand; the loop measures through loads
    feeds: Mapping[str, np.ndarray] | None = None
    blocks: list[list[dict[str, np.ndarray]]] = field(default_factory=list)  # load → round → stage → ms
    span_s: float = 0.0
    note_counts: dict[str, list] = field(default_factory=dict)  # note shape → [first text, blocks]
    device_first: dict[str, Any] = field(default_factory=dict)
    device_last: dict[str, Any] = field(default_factory=dict)
    warmup_done: int = 0
    warmup_s: float = 0.0
    block_spans: list[tuple[int, float]] = field(default_factory=list)  # (iterations, wall s) per block

    def add(self, samples: Samples, load: int = 0) -> None:
        while len(self.blocks) <= load:
            self.blocks.append([])
        self.blocks[load].append({k: np.asarray(v, dtype=np.float64) for k, v in samples.stages.items()})
        self.span_s += samples.span_s
        self.block_spans.append((samples.n, samples.span_s))  # throughput: the median block rate
        for note in samples.notes:  # one entry per kind of note, not one per block
            key = re.sub(r"[-+]?\d[\d.,]*", "#", note)
            self.note_counts.setdefault(key, [note, 0])[1] += 1
        if not self.device_first:
            self.device_first = dict(samples.device)
        self.device_last = dict(samples.device)

    def add_warmup(self, samples: Samples) -> None:
        self.warmup_done += samples.warmup_done + samples.n
        self.warmup_s += samples.warmup_s + samples.span_s

    @property
    def n_blocks(self) -> int:
        return sum(len(b) for b in self.blocks)

    @property
    def notes(self) -> list[str]:
        """The timing loop's warnings, each once, with how many of the blocks raised it."""
        blocks = self.n_blocks
        return [f"{text} (in {n} of {blocks} blocks)" if blocks > 1 else text
                for text, n in self.note_counts.values()]

    @property
    def stages(self) -> dict[str, list[np.ndarray]]:
        """Stage → every block in order (loads one after the other): the schema-1 view of an arm."""
        out: dict[str, list[np.ndarray]] = {}
        for load in self.blocks:
            for r in load:
                for k, v in r.items():
                    out.setdefault(k, []).append(v)
        return out

    def latency_blocks(self, stage: str = "latency_ms") -> list[list[np.ndarray]]:
        return [[r[stage] for r in load if stage in r] for load in self.blocks]

    @property
    def round_medians_ms(self) -> list[float]:
        return [float(np.median(b)) for load in self.latency_blocks() for b in load]

    def pooled(self) -> dict[str, np.ndarray]:
        stages: dict[str, list[np.ndarray]] = {}
        for load in self.blocks:
            for r in load:
                for k, v in r.items():
                    stages.setdefault(k, []).append(v)
        return {k: np.concatenate(v) for k, v in stages.items() if v}

    @property
    def latency_ms(self) -> np.ndarray:
        return self.pooled().get("latency_ms", np.empty(0))

    def median_ci_ms(self) -> tuple[float, float]:
        return engine_median_ci(self.latency_blocks())

    @property
    def device(self) -> dict[str, Any]:
        """NVML state at the first and the last round (clock drift shows as a difference)."""
        if not self.device_first:
            return {}
        return {"first_round": self.device_first, "last_round": self.device_last}


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
    round_s: float = DEFAULT_ROUND_S
    copies: bool = True
    cuda_graph: bool = False
    autotune: bool = True  # torch: cudnn.benchmark during the run (backends.base.set_autotune), in every load

    def block_config(self, iterations: int) -> TimingConfig:
        return TimingConfig(warmup=ROUND_WARMUP, iterations=iterations, copies=self.copies, cuda_graph=self.cuda_graph)

    def warmup_config(self, first_load: bool = True) -> TimingConfig:
        wanted = self.first_warmup_ms if first_load else min(self.first_warmup_ms, LOAD_WARMUP_MS)
        warm_ms = min(wanted, self.time_budget_s * 1e3 * 0.05)
        return TimingConfig(warmup=self.first_warmup, warmup_ms=warm_ms, iterations=MIN_ROUND_ITERATIONS,
                            copies=self.copies, cuda_graph=self.cuda_graph)

    def to_json(self) -> dict[str, Any]:
        return {"target_ci": self.target_ci, "time_budget_s": self.time_budget_s,
                "round_iterations": self.round_iterations, "min_rounds_per_load": self.min_rounds,
                "min_loads": self.min_loads, "max_loads": self.max_loads, "equivalence_margin": self.margin,
                "round_s": self.round_s, "copies": self.copies, "cuda_graph": self.cuda_graph,
                "autotune": self.autotune}


@dataclass(frozen=True)
class Progress:
    """What the loop knows after one look: printed per batch size while it runs."""

    loads: int
    rounds: int
    elapsed_s: float
    speedups: dict[str, Speedup]
    stop_reason: str | None  # set on the last look


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

    def arm(self, name: str) -> Arm:
        return next(a for a in self.arms if a.name == name)

    def round_ratios(self, baseline: str, candidate: str) -> list[float]:
        b, c = self.arm(baseline).round_medians_ms, self.arm(candidate).round_medians_ms
        return [x / y for x, y in zip(b, c) if y > 0]

    def speedup(self, baseline: str, candidate: str, margin: float = EQUIVALENCE_MARGIN) -> Speedup:
        return speedup_ci(self.arm(baseline).latency_blocks(), self.arm(candidate).latency_blocks(), margin=margin)


def iterations_for(median_ms: float, plan: RoundPlan) -> int:
    if plan.round_iterations is not None:
        return int(plan.round_iterations)
    if not np.isfinite(median_ms) or median_ms <= 0:
        return MAX_ROUND_ITERATIONS
    wanted = int(plan.round_s * 1e3 / median_ms)
    return int(min(MAX_ROUND_ITERATIONS, max(MIN_ROUND_ITERATIONS, wanted)))


def _settled(speedups: Mapping[str, Speedup], target_ci: float) -> str | None:
    strict = {name: s.interval(STOP_CONFIDENCE) for name, s in speedups.items()}
    decided = {name: verdict(*strict[name], s.margin) in DECISIVE for name, s in speedups.items()}
    if all(decided.values()):
        return STOP_DECISIVE
    narrow = {name: (high - low) / 2 / s.estimate <= target_ci for name, ((low, high), s)
              in ((n, (strict[n], speedups[n])) for n in speedups)}
    if all(decided[n] or narrow[n] for n in speedups):
        return STOP_TARGET
    return None


def _wants_load(speedups: Mapping[str, Speedup]) -> bool:
    """More loads, not more rounds, when the load-to-load spread is most of the SE² of some speedup."""
    for s in speedups.values():
        between, within = s.components.get("between", 0.0), s.components.get("within", 0.0)
        rounds_per_load = s.rounds / max(s.loads, 1)
        if between / max(s.loads, 1) > within / max(s.rounds, 1) and rounds_per_load >= MIN_ROUNDS:
            return True
    return False


@overload
def run_interleaved(names: Sequence[str], open_load: Callable[[int], Load], plan: RoundPlan, *,
                    clock: Callable[[], float] = ..., on_progress: Callable[[Progress], None] | None = ...,
                    measure: Measure = ...) -> InterleavedOutcome: ...


@overload
def run_interleaved(names: Sequence[Arm], open_load: RoundPlan, plan: None = None, *,
                    clock: Callable[[], float] = ..., on_progress: Callable[[Progress], None] | None = ...,
                    measure: Measure = ...) -> InterleavedOutcome: ...


def run_interleaved(names: Any, open_load: Any, plan: RoundPlan | None = None, *,
                    clock: Callable[[], float] = time.perf_counter,
                    on_progress: Callable[[Progress], None] | None = None,
                    measure: Measure = measure_block) -> InterleavedOutcome:
    """``run_interleaved(names, open_load, plan)``: the loop (see ``run_loads``).

    ``run_interleaved(arms, plan)`` — the schema-1 call, kept for callers whose runners cannot be
    re-created per load (e.g. a training step): the given ``Arm`` objects' runners are ONE load,
    measured in interleaved rounds and filled in place. Between-load differences are then not in
    the CI, and ``Speedup.method`` says so ("one load only")."""
    if plan is not None:
        return run_loads(names, open_load, plan, clock=clock, on_progress=on_progress)
    arms: list[Arm] = list(names)
    load = InProcessLoad({a.name: (a.runner, a.feeds or {}) for a in arms}, measure)  # the caller closes runners
    single = replace(open_load, min_loads=1, max_loads=1)
    out = run_loads([a.name for a in arms], lambda i: load, single, clock=clock, on_progress=on_progress)
    for mine, filled in zip(arms, out.arms):
        for name in ("blocks", "span_s", "block_spans", "note_counts", "device_first", "device_last", "warmup_done", "warmup_s"):
            setattr(mine, name, getattr(filled, name))
    out.arms = arms
    return out


def run_loads(
    names: Sequence[str],
    open_load: Callable[[int], Load],
    plan: RoundPlan,
    *,
    clock: Callable[[], float] = time.perf_counter,
    on_progress: Callable[[Progress], None] | None = None,
) -> InterleavedOutcome:
    """Open ``plan.min_loads`` loads, warm each, size the blocks, then sweep rounds over the loads,
    look at every candidate's speedup CI after each sweep, and stop as the module docstring says.

    ``names[0]`` is the baseline. The budget covers everything from the call on (load starts and
    warmups too) and is checked before each sweep with the last rounds' duration: a sweep that
    would end past the budget is shrunk, or not started. The minimum loads and rounds always run.
    Loads are closed on return.
    """
    names = list(names)
    if len(names) < 2:
        raise ValueError("need a baseline and at least one candidate")
    baseline, candidates = names[0], names[1:]
    arms = {n: Arm(n) for n in names}
    loads: list[Load] = []
    done: list[int] = []  # rounds run per load
    started = clock()
    iterations = 0
    round_s = 0.0
    load_open_s = 0.0
    try:
        def add_load() -> dict[str, Samples]:
            nonlocal load_open_s
            t0 = clock()
            load = open_load(len(loads))
            loads.append(load)
            done.append(0)
            warm = load.warm_up(plan.warmup_config(first_load=not loads[:-1]))
            for name, samples in warm.items():
                arms[name].add_warmup(samples)
            load_open_s = clock() - t0
            return warm

        # One block size for every arm and load, sized by the slowest arm in the first load's
        # warm-up: every round compares like with like.
        warm0 = add_load()
        iterations = plan.round_iterations or min(
            iterations_for(float(np.median(w.latency_ms)), plan) for w in warm0.values())
        config = plan.block_config(iterations)
        while len(loads) < plan.min_loads:
            add_load()

        def run(load_index: int, count: int) -> None:
            nonlocal round_s
            t0 = clock()
            for rnd in loads[load_index].rounds(done[load_index], count, config):
                for name, samples in rnd.items():
                    arms[name].add(samples, load_index)
            done[load_index] += count
            round_s = (clock() - t0) / count

        for i in range(len(loads)):
            run(i, plan.min_rounds)
        speedups: dict[str, Speedup] = {}
        stop: str | None = None
        while True:
            speedups = {c: speedup_ci(arms[baseline].latency_blocks(), arms[c].latency_blocks(), margin=plan.margin)
                        for c in candidates}
            stop = _settled(speedups, plan.target_ci)
            elapsed = clock() - started
            remaining = plan.time_budget_s - elapsed
            # The next sweep: every load grows by ``step`` rounds (geometric, so few looks), a newer
            # load catches up by at most 2 steps; shrunk to what the budget still allows.
            step = max(1, int(math.ceil(SWEEP_GROWTH * min(done))))
            load_cost = load_open_s + plan.min_rounds * round_s
            adding = (stop is None and len(loads) < plan.max_loads and load_cost + len(loads) * round_s <= remaining
                      and _wants_load(speedups))
            if adding:
                remaining -= load_cost
            counts: list[int] = []
            while stop is None:
                top = max(done) + step
                counts = [max(1, min(top - d, 2 * step)) for d in done]
                if sum(counts) * round_s <= remaining or step == 1:
                    break
                step = max(1, step // 2)
            if stop is None and sum(counts) * round_s > remaining:
                stop = STOP_BUDGET
            if on_progress is not None:
                on_progress(Progress(len(loads), sum(done), elapsed, dict(speedups), stop))
            if stop is not None:
                break
            for i, count in enumerate(counts):
                run(i, count)
            if adding:
                add_load()
                run(len(loads) - 1, plan.min_rounds)
    finally:
        for load in loads:
            load.close()
    half = {}
    for name, arm in arms.items():
        low, high = arm.median_ci_ms()
        med = float(np.median(arm.latency_ms))
        half[name] = (high - low) / 2 / med if med > 0 else float("inf")
    return InterleavedOutcome(arms=[arms[n] for n in names], rounds=sum(done), stop_reason=stop or STOP_BUDGET,
                              elapsed_s=clock() - started, round_iterations={n: iterations for n in names},
                              half_widths=half, loads=len(loads), speedups=speedups, round_s=round_s)
