"""Loads whose worker processes never live at the same time (``compare --serial-loads``).

Why: on the H200 (2026-12-04, ``benchmarks/results/ort_cuda-H200-2026-12-04/``) a process replays a small CUDA
graph faster once any other process has created a CUDA context while it lives — a bare ``cudaFree(0)`` does it,
and the process stays fast after the other one exits: ResNet-50 at batch 1 through ONNX Runtime's CUDA EP,
0.839 → 0.756 ms (fp16) and 2.243 → 2.175 ms (fp32), the same kernels with shorter gaps between them. compare's
default loads are worker processes started side by side, so all but the last one started measure in that
state, while a user's own loop, alone on the GPU, does not. Here every load is a lone process, as the user's
loop is (six such loads read 2.242-2.245 / 0.835-0.840 ms; the independent ORT loop 2.231 / 0.833 back to back).

Lives: load ``i`` of every batch size is one worker process, *life* ``i`` (``run_lives``): it starts only after
life ``i-1``'s rounds are all done and that process was told to exit (it is waited for while life ``i`` loads its
engines, before life ``i`` primes), loads its engines once, then serves each batch size still
measuring in turn — that batch size's loop (``SerialLoop``) warms it up at its shape and runs its rounds — and
exits when the last of them is done. A default run of three batch sizes × six loads is six process lives, not
eighteen; the batch sizes a life serves share its start. On a GPU a life's worker primes every batch size it will
serve when it starts (``LifePriming``: the first runs at each shape, and ONNX Runtime's one session for all of them,
instead of a session reopened per shape), before any round; after life 0, the arms' first runs at a shape side by
side in threads, the captures one at a time (``PRIME_SIDE_BY_SIDE``). Life 0's worker also runs compare's accuracy pass
(``LifeWorkers.outputs``), so the parent loads no engine and makes no CUDA context of its own. On a GPU the next
life's process starts ahead, once the current life is ready to serve: it imports and waits, making no CUDA context
(what the finding above is about) until it is told its engines, once the current life's rounds are done (life 0's
process starts with the command, while the engines are found: ``workers.spares(lone=True)``); what it does
beside the timed rounds is in the run's ``concurrent_with_timing``, and each life's seconds in ``budget.lives``.

Budgets: each batch size keeps its own window (``budget.TimeBudget.window``), but its loop's clock runs only in
its own turns (``TurnClocks``): the seconds the other batch sizes spend in a life are not its seconds, so each
loop plans as if it ran alone, and the command's wall time is the sum of the turns (and what runs after them). A
life's start (its process, engines and priming: 5.5-9.3 s for ResNet-50 × 3 batch sizes on the H200) is split evenly
over the clocks of the batch sizes it serves, and counted in what a load costs each of them (``LifeCalls.start_life``):
charged to the first batch size alone, it made that one's window need six starts (54 s of a 60-s cap) and left the
next batch size a start it had not planned for once the first had left.

What it costs: no two loads run side by side, and the rounds of a load are no longer
interleaved in time with the other loads' (drift between loads falls into the load-to-load spread, which the
interval already carries). ``SerialLoop`` is ``interleave.RoundLoop`` with that order: a load's rounds are decided
when it opens, a load gets no rounds after its life ended, and after the minimum loads are added, not rounds.
"""
from __future__ import annotations

import time
from contextlib import contextmanager
from dataclasses import dataclass, replace
from typing import Any, Callable, Iterator, Mapping, Sequence

from .blocks import long_calls
from .budget import BatchWindow, BudgetTooSmall
from .interleave import FLOOR_LOADS, FLOOR_ROUNDS, STOP_BUDGET, InterleavedOutcome, Load, LoadLost, LoopHooks, \
    Progress, RoundLoop, RoundPlan, settled
from .timing import TimingConfig
from .concurrent import Span, record
from .workers import ArmFacts, Worker, WorkerLoad, engines_identity, has_preload, take_spare


# Lone loads where every arm's call takes at least this long (ms): a load's minimum rounds are one round pair (A B, B A)
# instead of ``MIN_ROUNDS``' two. A lone load is a process life, so the loop adds loads, not rounds, after the minimum,
# and the interval's units are the loads; calls this long barely vary within a load (ResNet-50 at batch 256 on the
# H200, 13 comparisons: the rounds' variance of the log ratio 0.4-6.5e-6, so one pair gives a load's value to a
# standard error of 0.2 % at most), while the second pair cost 2 × 3 arms × 3 calls of 51-87 ms per load, about 6 s
# of a 63-s default run (2026-12-04f). Simulated runners of known truth through this loop with one pair per load keep
# the A/A rate and the coverage (``tests/measure/test_serial_loads.py``).
ONE_PAIR_MS = 30.0


# A life after the first makes its arms' first runs at each batch size side by side, one thread per arm, before
# the captures, which stay one at a time (``worker_loop.first_runs_side_by_side``): ONNX Runtime builds cuDNN's plans
# on the host, and releases the GIL while it runs. A prototype of it on the H200 (2026-12-04e, ResNet-50 × 3 arms × 3
# batch sizes, fresh processes, 3 each: ``benchmarks/results/ort_cuda-H200-2026-12-04e/prime-order.txt``) primed in
# 3.79 s against 4.73 s one arm at a time. Life 0 stays one arm at a time: what the library wrote there is told apart
# by arm, and a later life gives each line it sees to the arms that wrote it in life 0 (marked so).
PRIME_SIDE_BY_SIDE = True


# The last life's exit overlaps the next one's engine loading (``LifeWorkers.overlap_exit``) only where the engines'
# files together are at most this share of the memory they load into (the smallest GPU's, or the host's): for that
# moment both processes hold their weights, and a large model that fits once must not be refused for it.
OVERLAP_EXIT_SHARE = 0.1


def exit_may_overlap(engine_bytes: int | None, memory_bytes: int | None) -> bool:
    """May the last life's exit overlap the next one's engine loading (``OVERLAP_EXIT_SHARE``)? Not where either size
    is unknown."""
    if engine_bytes is None or not memory_bytes:
        return False
    return engine_bytes <= OVERLAP_EXIT_SHARE * memory_bytes


def overlap_exit_for(records: Mapping[str, Any], on_gpu: bool) -> bool:
    """``exit_may_overlap`` for these engines (their files' bytes: unknown where one cannot be read), loaded on a GPU
    or on the host (``loading_memory_bytes``)."""
    from ..system.memory import artifact_bytes

    sizes = [artifact_bytes(r.artifact_path) for r in records.values()]
    total = None if None in sizes else sum(b for b in sizes if b is not None)
    return exit_may_overlap(total, loading_memory_bytes(on_gpu))


def loading_memory_bytes(on_gpu: bool) -> int | None:
    """The memory a life loads its engines into: the smallest GPU's (NVML, which makes no CUDA context) or the
    host's (``/proc/meminfo``); None where it cannot be read."""
    if on_gpu:
        from ..system.nvml import describe_gpus

        totals = [g["memory_total_mib"] for g in describe_gpus() if g.get("memory_total_mib")]
        return min(totals) * (1 << 20) if totals else None
    from ..system.memory import proc_kib_field

    return proc_kib_field("/proc/meminfo", "MemTotal")


class TurnClocks:
    """One clock per loop that runs only during that loop's turns (``turn``), from the real clock's value when this
    object was made (``start``)."""

    def __init__(self, clock: Callable[[], float], count: int) -> None:
        self.real, self.start = clock, clock()
        self.spent = [0.0] * count
        self.current: int | None = None
        self.since = 0.0

    def clock(self, k: int) -> Callable[[], float]:
        def now() -> float:
            running = self.real() - self.since if self.current == k else 0.0
            return self.start + self.spent[k] + running
        return now

    def share(self, ks: Sequence[int], seconds: float) -> None:
        """``seconds`` of work done for the loops ``ks`` together (a life's start), split evenly onto their clocks."""
        for k in ks:
            self.spent[k] += seconds / len(ks)

    @contextmanager
    def turn(self, k: int) -> Iterator[None]:
        self.current, self.since = k, self.real()
        try:
            yield
        finally:
            self.spent[k] += self.real() - self.since
            self.current = None


class SerialLoop(RoundLoop):
    """``RoundLoop`` for loads that live one at a time, driven a load at a time (``run_lives``): ``wants_load``
    says whether it takes part in the next life (below the minimum: while one fits, the floor's regardless; after
    it: while the interval is undecided and a load fits), ``take_load`` opens that load and runs its rounds."""

    stop: str | None = None  # why it stopped, once it has
    minimum_done = False  # the minimum's loads (or those that fitted) have run
    design_round_s = 0.0  # a round of the designed blocks (``first_load``), for ``refit_window``
    on_progress: Callable[[Progress], None] | None = None
    refits_later = True  # the window refitted after every load of the minimum, not only the second (``refit_window``)
    life_share_s = 0.0  # this loop's share of the coming load's life start (``run_lives``), part of what the load costs

    def rounds_plan(self, medians_ms: Sequence[float]) -> RoundPlan:
        """One round pair per load where every arm's call takes ``ONE_PAIR_MS`` or more (two for a plan of one load:
        its pairs are the interval's units); else the plan as given."""
        plan = self.plan
        pairs = FLOOR_ROUNDS if plan.min_loads >= FLOOR_LOADS else 2 * FLOOR_ROUNDS
        if long_calls(medians_ms, ONE_PAIR_MS) and plan.min_rounds > pairs:
            return replace(plan, min_rounds=pairs)
        return plan

    def wants_load(self) -> bool:
        if self.stop is not None:
            return False
        plan, opened = self.plan, len(self.loads)
        if opened == 0:
            return True
        if not self.minimum_done:
            fits = opened < FLOOR_LOADS or self.load_open_s + FLOOR_ROUNDS * self.round_s <= self.remaining()
            if opened < plan.min_loads and fits:
                return True
            self.minimum_done = True
            self.note_floor_overrun(min(self.done))
        self.look()
        stop = settled(self.speedups, plan.target_ci, opened)
        if stop is None and not self.another_load_fits():
            stop = STOP_BUDGET
        if self.on_progress is not None:
            self.on_progress(self.progress(stop))
        self.stop = stop
        return stop is None

    def take_load(self) -> None:
        """The next load opened, warmed up and its rounds run: the first sizes the blocks for the minimum's loads
        opened one by one; the minimum's get its rounds where they fit (``rounds_for``); a later one, its rounds."""
        index = len(self.loads)
        if index == 0:
            medians_ms, wanted, self.design_round_s = self.first_load()
            later_s = (self.plan.min_loads - 1) * self.load_open_s  # the minimum's other loads, opened one by one
            self.size_blocks(medians_ms, wanted, loads=self.plan.min_loads, later_s=later_s)
            self.run(0, self.rounds_for(opened=True))
            return
        rounds = self.rounds_for(opened=False) if not self.minimum_done else self.plan.min_rounds
        self.add_load()
        if not self.minimum_done and (index == 1 or self.refits_later):
            # a life's cost varies (the H200, ResNet-50 × 3 batch sizes: 5.5-8.3 s, 2026-12-04): fitted to the second
            # one only, the window left batch 1 five of its six loads
            self.refit_window(self.design_round_s, index)
            rounds = self.rounds_for(opened=True)
        self.run(index, rounds)

    def add_load(self) -> Any:
        """``RoundLoop.add_load``, the load's cost counting this loop's share of its life's start (already on its
        clock: ``TurnClocks.share``)."""
        warm = super().add_load()
        self.load_open_s += self.life_share_s
        return warm

    def rounds_for(self, opened: bool) -> int:
        """Rounds for the next load (``opened``: the newest, already open): the minimum's when they and the
        minimum's loads still to open after it fit what is left, else the floor's (two round pairs for a plan of
        one load: its pairs are the interval's units)."""
        plan = self.plan
        floor = FLOOR_ROUNDS if plan.min_loads >= FLOOR_LOADS else 2 * FLOOR_ROUNDS
        after = max(plan.min_loads - len(self.loads) - (0 if opened else 1), 0)
        load_s = self.load_open_s + plan.min_rounds * self.round_s
        needed = (0.0 if opened else self.load_open_s) + plan.min_rounds * self.round_s + after * load_s
        return max(plan.min_rounds, floor) if needed <= self.remaining() else floor

    def another_load_fits(self) -> bool:
        """After the minimum (a load whose life ended gets no more rounds): does another load with the minimum's
        rounds fit what is left, below the most loads?"""
        cost = self.load_open_s + self.plan.min_rounds * self.round_s
        return len(self.loads) < self.plan.max_loads and cost <= self.remaining()


@dataclass(frozen=True)
class LifeCalls:
    """``run_lives``'s calls out: ``begin_life(turns)`` hears which loops take part in the coming life (before its
    first load opens); ``end_life()`` ends the life whose loads have all run (its process told to exit);
    ``on_done(k, outcome)`` hears loop ``k`` as soon as it stopped."""

    end_life: Callable[[], None] = lambda: None
    on_done: Callable[[int, InterleavedOutcome], None] | None = None
    begin_life: Callable[[Sequence[int]], None] = lambda turns: None  # before a life: the loops taking part
    # start_life(i): life i started (its process ready and primed) before its first load opens; its seconds are split
    # evenly onto the clocks of the loops taking part. None: the first loop's open_load starts it, on that loop's clock.
    start_life: Callable[[int], None] | None = None


def run_lives(names: Sequence[str], open_loads: Sequence[Callable[[int], Load]], plan: RoundPlan, *,
              clock: Callable[[], float] = time.perf_counter,
              windows: Callable[[int, float], BatchWindow] | None = None, hooks: Sequence[LoopHooks] = (),
              calls: LifeCalls = LifeCalls()) -> list[InterleavedOutcome | None]:
    """One ``SerialLoop`` per ``open_loads[k]`` (a batch size), driven life by life: at each life every loop still
    measuring says whether it wants a load (one that does not is done: ``calls.on_done`` hears it at once), those
    that do each open load ``i`` in turn and run its rounds, then ``calls.end_life()`` ends the life. The life starts
    in ``calls.start_life(i)`` before its first load opens, its seconds split evenly onto the clocks of the loops taking
    part (and into what their load costs); without it, in the first one's ``open_load``, on its clock. Loop ``k``'s
    budget is ``windows(k, start)`` (``start``: the clock's value now; default ``plan.time_budget_s`` from it), its clock
    the seconds of its own turns and its shares (``TurnClocks``);
    ``hooks[k]`` hears its looks and its budget's line. A lost load's exception carries the rounds its loop finished
    before (``partial``) and which loop it was (``turn``), as does a budget refused (``turn``). Loads are closed on
    return. The outcomes, by ``k`` (None: not done)."""
    names = list(names)
    if len(names) < 2:
        raise ValueError("need a baseline and at least one candidate")
    clocks = TurnClocks(clock, len(open_loads))
    loops = make_loops(names, open_loads, plan, clocks, windows, hooks)
    outcomes: list[InterleavedOutcome | None] = [None] * len(loops)
    active, turn = list(range(len(loops))), -1
    try:
        while active:
            wanting = []
            for turn in active:
                with clocks.turn(turn):
                    wants = loops[turn].wants_load()
                if wants:
                    wanting.append(turn)
                    continue
                outcomes[turn] = loops[turn].outcome(loops[turn].stop or STOP_BUDGET)
                if calls.on_done is not None:
                    calls.on_done(turn, outcomes[turn])  # type: ignore[arg-type]
            active = wanting
            if active:
                calls.begin_life(active)
            if active and calls.start_life is not None:
                turn = active[0]  # (a lost worker names the first batch size of the life)
                start_shared(calls.start_life, clocks, loops, active)
            for j, turn in enumerate(active):
                with clocks.turn(turn):  # the life's end is its last loop's time
                    loops[turn].take_load()
                    if j == len(active) - 1:
                        calls.end_life()
    except LoadLost as err:  # the rounds its loop finished before it stand: the caller keeps them, marked partial
        err.partial = loops[turn].partial_outcome()
        setattr(err, "turn", turn)
        raise
    except BudgetTooSmall as err:
        setattr(err, "turn", turn)
        raise
    finally:  # a life cut short by an error is the caller's to end (it may have to kill the process)
        for loop in loops:
            for load in loop.loads:
                load.close()
    return outcomes


def make_loops(names: list[str], open_loads: Sequence[Callable[[int], Load]], plan: RoundPlan, clocks: TurnClocks,
               windows: Callable[[int, float], BatchWindow] | None, hooks: Sequence[LoopHooks]) -> list[SerialLoop]:
    """``run_lives``' loops: one per ``open_loads[k]``, on clock ``k`` of ``clocks``, in ``windows(k, start)``
    (default ``plan.time_budget_s`` from the clocks' start), hearing ``hooks[k]``."""
    loops: list[SerialLoop] = []
    for k, open_load in enumerate(open_loads):
        window = windows(k, clocks.start) if windows is not None else \
            BatchWindow(started=clocks.start, budget_s=plan.time_budget_s)
        loop = SerialLoop(names, open_load, plan, clocks.clock(k), window)
        own = hooks[k] if k < len(hooks) else LoopHooks()
        loop.on_note, loop.on_progress = own.on_note, own.on_progress
        loops.append(loop)
    return loops


def start_shared(start_life: Callable[[int], None], clocks: TurnClocks, loops: Sequence[SerialLoop],
                 active: Sequence[int]) -> None:
    """The next life started (``start_life(i)``, ``i`` the loads the active loops have) and its seconds split evenly
    over the clocks of the ``active`` loops, and into what their coming load costs (``SerialLoop.life_share_s``)."""
    began = clocks.real()
    start_life(len(loops[active[0]].loads))
    seconds = clocks.real() - began
    clocks.share(active, seconds)
    for k in active:
        loops[k].life_share_s = seconds / len(active)


def run_serial(names: Sequence[str], open_load: Callable[[int], Load], plan: RoundPlan, *,
               clock: Callable[[], float] = time.perf_counter, window: BatchWindow | None = None,
               hooks: LoopHooks = LoopHooks()) -> InterleavedOutcome:
    """``run_lives`` for one loop, whose every load is a life of its own: closed (``Load.close``) when its rounds
    are done, before the next one opens. A load that ``open_load`` gives must be closable more than once."""
    opened: list[Load] = []

    def opening(index: int) -> Load:
        opened.append(open_load(index))
        return opened[-1]

    def end_life() -> None:
        if opened:
            opened[-1].close()

    outcome = run_lives(names, [opening], plan, clock=clock, hooks=[hooks], calls=LifeCalls(end_life),
                        windows=None if window is None else (lambda k, start: window))[0]
    assert outcome is not None  # one loop, run to its end
    return outcome


@dataclass(frozen=True)
class LifePriming:
    """What a life's worker primes when it starts (``Worker.prime``: each arm's first runs and graph captures at
    each batch size it will serve, where they time no kernels): the batch sizes' shapes in order, the seeded inputs'
    seed and integer range, and the timing's graph and copy settings. Without it, each batch size's first block in a
    life pays those first runs (ONNX Runtime: a session reopened per shape)."""

    batches: list[tuple[int, Mapping[str, tuple[int, ...]]]]
    seed: int
    int_range: tuple[int, int]
    config: TimingConfig


class LifeWorkers:
    """``open_load`` for ``run_lives``: load ``i`` of any batch size is life ``i``'s worker process, started by the
    first batch size that opens load ``i`` once the previous life's rounds are done (``end_life`` told it to exit;
    ``start`` waits for it, while the new one loads its engines where ``overlap_exit``), and ended by ``end_life``. No
    CUDA context is ever created beside a timed load (what this mode avoids);
    with ``ahead`` (on a GPU), once a life has primed, the next life's process starts beside its rounds, importing
    only (``preload``: the backends' libraries, no CUDA context; the run's record counts it as work beside the timing),
    and becomes that life when it is asked for. As load 0's worker (``facts``, ``outputs``) life 0 runs compare's
    accuracy pass, so that the parent loads no engine. ``lives``: each ended life's seconds (``life_record``)."""

    def __init__(self, records: Mapping[str, Any], device: str | None = None, autotune: bool = True,
                 priming: LifePriming | None = None, *, ahead: bool = False) -> None:
        self.records, self.device, self.autotune, self.priming = dict(records), device, autotune, priming
        self.ahead = ahead
        # what a process started ahead imports: the records' backends that have libraries to import ahead
        self.preload = [b for b in dict.fromkeys(r.backend for r in self.records.values()) if has_preload(b)]
        self.started: list[Worker] = []  # every life's worker, in order; all but a live current one have exited
        self.current: Worker | None = None
        self.exiting: Worker | None = None  # the last life, told to exit, not yet waited for (``reap``)
        self.overlap_exit = False  # may ``exiting`` exit while the next life loads its engines (``exit_may_overlap``)
        self.spare: Worker | None = None  # the next life's process, started ahead (``ahead``), importing or idle
        self.coming: list[tuple[int, Mapping[str, tuple[int, ...]]]] = []  # the next life's batch sizes, to prime
        self.primed_life: int | None = None  # the life whose priming ran
        # batch size → arm → what the library wrote in the first life primed one arm at a time
        # (``Worker.prime_lines``): a later life's side-by-side first runs give what they wrote to arms by it
        self.known_lines: dict[int, dict[str, list[str]]] | None = None
        self.beside_failed = False  # a life's side-by-side first runs failed: the later ones prime one arm at a time
        self.lives: list[dict[str, Any]] = []
        self.asked: dict[int, float] = {}  # life → when the parent asked for it (its process spawned, or the spare told)
        self.serving: dict[int, float] = {}  # life → when it was ready to serve (primed), by this clock
        self.end_asked: dict[int, float] = {}
        self.created_at = time.monotonic()
        self.timed: list[Span] = []  # every call of timed rounds
        self.busy: list[Span] = []  # other work of this run: the accuracy pass, spares' start-ups
        self.concurrent: dict[str, Any] = {}  # set by close: concurrent.record of it against the timed rounds
        # the seeded inputs, made once by this process during life 0's accuracy pass, read by every life (``outputs``)
        self.shared: Any = None
        self.shared_s: float | None = None  # what making them took here

    def begin_life(self, turns: Sequence[int]) -> None:
        """The coming life serves these batch sizes (indices into ``priming.batches``): its worker primes them."""
        if self.priming is not None:
            self.coming = [self.priming.batches[k] for k in turns]

    def start(self, index: int) -> Worker:
        """Life ``index``'s worker (the spare started ahead, told its engines, where one is alive), waited for until
        it has loaded them."""
        if self.current is not None and self.current.index != index:  # a new life: the last one ends first
            self.end_life()
        if self.current is None:
            if not self.overlap_exit:
                self.reap()
            spare, self.spare = self.spare, None
            if spare is None:  # life 0: the process started with the command (``workers.spares(lone=True)``), if any
                spare = take_spare(self.device)
            told = getattr(spare, "told", None)  # the engines it was told ahead, if any (``workers.spares``)
            if spare is not None and told is not None and told != engines_identity(self.records):
                spare.proc.kill()  # told other engines ahead than those found (a guess that missed): a fresh one
                spare.close()
                spare = None
            self.asked[index] = time.monotonic()
            if spare is not None and spare.proc.poll() is None:
                spare.index = index
                spare.init(self.records, self.autotune)
                self.current = spare
            else:
                if spare is not None:  # died while waiting (its libraries failed to import): a fresh one
                    spare.close()
                self.current = Worker(index, self.records, self.device, self.autotune)
            self.started.append(self.current)
            self.reap(beside_next=True)  # the last life's exit, while this one loads its engines (``overlap_exit``)
            self.current.wait_ready(who="" if index == 0 else None)  # load 0: an engine that cannot load, as the parent's
            self.tell_shared(self.current)
        return self.current

    def facts(self) -> dict[str, ArmFacts]:
        """Each arm's ``ArmFacts`` as life 0's worker found them (started now, waited for)."""
        return dict(self.start(0).facts)

    def prime(self, *args: Any, **kwargs: Any) -> int:
        """Nothing ahead of the lives: each life's worker primes when it starts (``LifePriming``). Returns 0."""
        return 0

    def outputs(self, batches: Sequence[tuple[int, Mapping[str, tuple[int, ...]], int]], seed: int,
                int_range: tuple[int, int]) -> dict[int, tuple[dict[str, Any], dict[str, Any]]]:
        """compare's accuracy pass in life 0's worker (``WorkerPool.outputs``' protocol), before its priming; alone
        on the GPU, its runners set each shape up on the session that will time it (``_WorkerState.outputs``).
        Meanwhile this process makes the batch sizes' seeded inputs once for every life (``shared_inputs``), and
        life 0 is told where they are."""
        worker = self.start(0)
        asked, done_at = time.monotonic(), None
        try:
            worker.ask("outputs", [(b, dict(s), n) for b, s, n in batches], seed, int_range, True)
            self.make_shared([dict(s) for _, s, _ in batches], seed, int_range)
            payload = worker.answer(who="")
            done_at = payload["done_at"]
            self.tell_shared(worker)
            return payload["outputs"]
        finally:
            self.busy.append(Span("the accuracy pass (life 0's worker)", asked, done_at or time.monotonic()))

    def make_shared(self, shapes: Sequence[Mapping[str, tuple[int, ...]]], seed: int, int_range: tuple[int, int]) -> None:
        """The seeded inputs at these shapes, made once here (``SharedInputs``), unless made already."""
        from .shared_inputs import SharedInputs
        from .worker_loop import feeds_key

        if self.shared is None and self.records:
            started = time.monotonic()
            specs = next(iter(self.records.values())).inputs
            try:
                self.shared = SharedInputs.make(specs, [(s, feeds_key(s, seed, int_range)) for s in shapes], seed,
                                                int_range)
            except Exception:  # noqa: BLE001 - a saving only: each life makes its inputs (and meets any failure) itself
                self.shared = None
            self.shared_s = round(time.monotonic() - started, 4)

    def tell_shared(self, worker: Worker) -> None:
        """Tell a life's worker where the shared seeded inputs are (nothing where there are none)."""
        where = self.shared.locator() if self.shared is not None else None
        if where is not None:
            worker.ask("shared", where)
            worker.answer()
            worker.told_shared = True

    def begin_priming(self, index: int) -> Worker:
        """Life ``index``'s worker started (``start``) and asked to prime the batch sizes of ``begin_life``, without
        waiting (``start_life`` waits): compare asks life 0 so before importing its analysis libraries, which then
        load while the worker primes instead of before."""
        worker = self.start(index)
        if self.primed_life != index:
            self.primed_life = index
            if self.priming is not None and self.coming:  # every batch size's first runs, now, before any round
                p, side = self.priming, PRIME_SIDE_BY_SIDE and self.known_lines is not None and not self.beside_failed
                worker.prime(self.coming, p.seed, p.int_range, p.config, alone=True,  # lone: a session per shape
                             side_by_side=self.known_lines if side else None)
        return worker

    def start_life(self, index: int) -> Worker:
        """Life ``index`` ready to serve (``LifeCalls.start_life``): its worker started and primed for the batch sizes
        of ``begin_life`` (``begin_priming``, waited for); then, with ``ahead``, the next life's process started."""
        worker = self.begin_priming(index)
        if index not in self.serving:
            worker.wait_primed()
            lines = getattr(worker, "prime_lines", None)  # (a worker that primed nothing: none)
            if self.known_lines is None and lines and not getattr(worker, "primed_side_by_side", False):
                self.known_lines = lines
            self.beside_failed |= bool(getattr(worker, "side_by_side_failed", False))  # later lives: one at a time
            self.serving[index] = time.monotonic()
            self.start_ahead(index + 1)
        return worker

    def load(self, index: int, shapes: Mapping[str, tuple[int, ...]], seed: int, int_range: tuple[int, int],
             fixed: Mapping[str, Any] | None = None) -> WorkerLoad:
        worker = self.start_life(index)  # (started already where run_lives called start_life)
        return WorkerLoad(worker, (dict(shapes), seed, int_range, fixed), timed=self.timed)

    def start_ahead(self, index: int) -> None:
        """With ``ahead``: life ``index``'s process started now, importing only (no CUDA context), idle until
        ``start`` tells it its engines; its start-up kept as work beside the timing."""
        if self.ahead and self.spare is None:
            self.spare = Worker(index, None, self.device, preload=self.preload)

    def end_life(self) -> None:
        """The current life's process told to exit (nothing when none is alive): its rounds are all done. With
        ``overlap_exit``, the next life's worker is told its engines before this one is waited for (``reap``, in
        ``start``): its exit (0.3-0.5 s on the H200) overlaps their loading. No timed round ever runs beside it, and
        the new process makes its CUDA context after this one's, which is the order where a process keeps the state a
        lone process has (``measure.serial_loads``' first finding: the process whose life sees another context created
        is the one that changes)."""
        if self.current is not None:
            current, self.current = self.current, None
            self.end_asked[current.index] = time.monotonic()
            current.ask_to_close()
            self.exiting = current

    def reap(self, beside_next: bool = False) -> None:
        """The life told to exit (``end_life``) waited for; its seconds kept (``beside_next``: the next life was told
        its engines before)."""
        if self.exiting is not None:
            exiting, self.exiting = self.exiting, None
            exiting.close()
            self.lives.append({**self.life_record(exiting), "exit_beside_next_load": beside_next})

    def life_record(self, w: Worker) -> dict[str, Any]:
        """One life's seconds: its interpreter and trtprof's imports (``python_s``), the backends' libraries imported
        ahead (``preload_s``), whether it was told its engines before it was asked for (``engines_told_ahead``: life 0
        where compare guessed them, ``compare.records.likely_records``), its engines loaded (``engines_s``, per arm
        ``arms_s``), its priming (``priming_s``, its parts ``priming``), what the run waited for it from asking until
        it could serve (``waited_s``: the GPU idle between two lives, but for the previous one's exit), serving, its
        exit (``exit_s``), whether it was told where the seeded inputs this process made are (``inputs_shared``; life
        0's record says what making them took, ``shared_inputs_made_s``), and whether its arms' first runs ran side by
        side (``first_runs_side_by_side``, ``PRIME_SIDE_BY_SIDE``)."""
        m, i = w.marks, w.index

        def span(a: float | None, b: float | None) -> float | None:
            return None if a is None or b is None else round(b - a, 4)

        ready_to_serve = self.serving.get(i)
        started_ahead = w.spawned_at < self.asked.get(i, w.spawned_at)
        told_at = getattr(w, "told_at", None)
        told_ahead = started_ahead and told_at is not None and told_at < self.asked[i]
        what = 'imports and engines' if told_ahead else 'imports only'
        self.busy.append(Span(f"life {i}'s process starting ahead ({what})" if started_ahead else f"life {i}'s start-up",
                              w.spawned_at, w.ready_at if told_ahead or not started_ahead else m.get("preloaded")))
        return {"life": i, "started_ahead": started_ahead, "engines_told_ahead": told_ahead,
                "python_s": span(w.spawned_at, m.get("main")),
                "preload_s": span(m.get("main"), m.get("preloaded")), "engines_s": span(m.get("init"), w.ready_at),
                "arms_s": dict(w.arms_s), "priming_s": span(w.ready_at, w.primed_at), "priming": dict(w.prime_s),
                "waited_s": span(self.asked.get(i), ready_to_serve), "serving_s": span(ready_to_serve, self.end_asked.get(i)),
                "exit_s": span(self.end_asked.get(i), w.closed_at), "inputs_shared": w.told_shared,
                "first_runs_side_by_side": getattr(w, "primed_side_by_side", False),
                **({"shared_inputs_made_s": self.shared_s} if i == 0 else {})}

    def close(self) -> None:
        self.end_life()
        self.reap()
        if self.shared is not None:
            self.shared.close()
        spare, self.spare = self.spare, None
        if spare is not None:  # never told its engines: nothing to finish
            if spare.proc.poll() is None:
                spare.proc.kill()
            spare.close()
            self.busy.append(Span("a process started ahead, not used", spare.spawned_at, spare.closed_at))
        self.concurrent = record(self.busy, self.timed, self.created_at, time.monotonic())

    def kill(self) -> None:
        for w in [*self.started, *([self.spare] if self.spare is not None else [])]:
            if w.proc.poll() is None:
                w.proc.kill()
                w.proc.wait()
