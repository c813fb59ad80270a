"""The load and measure phases of a comparison: every engine's outputs and input shapes once before any
timing (``load_reference``: load 0's worker, or in-process), then per batch size independent loads in
interleaved rounds (``measure``: ``interleave.run_interleaved`` in its budget's window), each arm's
``BenchResult`` and every candidate's accuracy delta kept in ``Measured``."""
from __future__ import annotations

import time
from dataclasses import dataclass, field, replace
from typing import Any, Callable, Mapping, Sequence

import numpy as np

# accuracy, bench, roofline and workers are used as modules (bench.load_runner, ...): tests replace those attributes
# with fakes, which a name bound here at import time would not see.
from . import accuracy, accuracy_pass, reference_pass
from .accuracy import AccuracyBudget, AccuracyDelta, compare_outputs, judge
from .options import ISOLATION_PROCESS, ISOLATION_SERIAL, CompareHooks, CompareOptions, budget_line
from ..backends.base import set_autotune
from ..convert import fp16range
from ..engines.cache import EngineRecord
from ..measure import bench, blocks, serial_loads, workers
from ..measure.bench import effective_precision
from ..measure import budget_memo
from ..measure.budget import BudgetTooSmall, StartupLog, TimeBudget, preload_analysis
from ..measure.interleave import (
    FLOOR_LOADS,
    Arm,
    InProcessLoad,
    InterleavedOutcome,
    LoopHooks,
    Progress,
    RoundPlan,
    run_interleaved,
)
from ..measure.results import BenchResult
from ..measure.timing import TimingConfig
from ..measure.workers import trim
from ..model.inputs import make_inputs
from ..model import roofline
from ..model.onnx_model import OnnxModel
from ..system import preflight
from ..system.memory import artifact_bytes, outputs_and_memory, rss_bytes


@dataclass(frozen=True)
class Reference:
    """What one load of every engine tells before any timing (load 0's worker, or in-process): the
    input shapes per batch size (all checked up front), each arm's device and autotune setting, the
    outputs (accuracy), and the FP16 range prediction."""

    shapes: dict[int, dict[str, tuple[int, ...]]]
    devices: dict[str, str]
    autotune: dict[str, Any]
    outputs: dict[int, dict[str, Any]]
    fp16_range: Any
    memory: dict[int, dict[str, dict[str, Any]]]  # batch → arm → memory in use (trtprof.system.memory)
    samples: dict[int, Any] = field(default_factory=dict)  # batch → accuracy_pass.SampleCount (--inputs only)

    @property
    def on_gpu(self) -> bool:
        return any(d == "cuda" for d in self.devices.values())


@dataclass
class Measured:
    """The timing phase's yield: per batch size the interleaved outcome and one BenchResult per arm;
    after an interrupt, only the batch sizes decided before it (``pending`` the rest)."""

    outcomes: dict[int, InterleavedOutcome] = field(default_factory=dict)
    per_batch: dict[int, dict[str, BenchResult]] = field(default_factory=dict)
    interrupted: bool = False
    pending: list[int] = field(default_factory=list)
    budget: TimeBudget = TimeBudget(0.0, start=0.0, launch_s=0.0)  # the budget measured under (began)
    lost: str = ""  # a worker died: which load, how, during which batch size (issue 36)
    partial: list[int] = field(default_factory=list)  # batch sizes kept from the rounds before that
    accuracy: dict[int, dict[str, Any]] = field(default_factory=dict)  # batch → candidate → AccuracyDelta
    concurrent: dict[str, Any] = field(default_factory=dict)  # WorkerPool.concurrent: what ran beside the timing
    startup_s: float = 0.0  # of the budget, spent before measuring began (the launch, the accuracy pass, …)
    reserve_s: float = 0.0  # of the budget, kept for what runs after measuring
    lives: list[dict[str, Any]] = field(default_factory=list)  # --serial-loads: each life's seconds (LifeWorkers)

    def budget_account(self, plan: RoundPlan) -> dict[str, Any]:
        """What the budget covered, for the JSON (``spent_s``, when the JSON is made: CompareReport)."""
        basis, basis_s = self.budget.reserve_basis
        return {"time_budget_s": plan.time_budget_s, "counts_from": self.budget.counts_from,
                "batch_sizes": len(self.outcomes) + len(self.pending),
                "launch_s": round(self.budget.launch_s or 0.0, 3), "startup_s": round(self.startup_s, 3),
                "reserve_s": round(self.reserve_s, 3), "reserve_basis": basis, "reserve_basis_s": round(basis_s, 3),
                "per_batch": {str(b): {"budget_s": round(o.budget_s, 3), "spent_s": round(o.elapsed_s, 3),
                                       "stop_reason": o.stop_reason, "floor_overrun": o.floor_overrun,
                                       "budget_note": o.budget_note}
                              for b, o in self.outcomes.items()},
                **({"lives": self.lives} if self.lives else {})}

    @property
    def batch_sizes(self) -> list[int]:
        return list(self.outcomes)

    @property
    def results(self) -> list[BenchResult]:
        return [r for batch in self.per_batch.values() for r in batch.values()]


def start_pool(records: Mapping[str, EngineRecord], options: CompareOptions, say: Callable[[str], None]) -> Any:
    """The worker processes of the minimum loads, started now and waited for after the accuracy pass: their
    imports and engine loads (seconds to tens of seconds for a torch model on a GPU host) overlap the
    parent's own, and every later load's cost is what the first load shows (``BatchWindow.fitted``)."""
    ahead = min(options.plan.min_loads, workers.SPAWN_AHEAD)
    pool = workers.WorkerPool(records, device=options.device, autotune=options.plan.autotune,
                              planned=options.plan.min_loads)
    pool.spawn(ahead)
    say(f"{ahead} worker processes starting (each imports trtprof and loads every engine: one load each)")
    preload_analysis(say)  # while they start, not once load 0's worker is ready (issue 44 #2)
    return pool


def start_and_load(records: Mapping[str, EngineRecord], batch_sizes: Sequence[int], options: CompareOptions,
                   model: OnnxModel | None, say: Callable[[str], None]) -> tuple[Reference, Any, Any]:
    """The worker processes started (``isolation="process"``: ``start_pool``), then the load phase
    (``load_reference``) while they start, and the device's peak rates on a GPU: (the reference, the pool or
    None, the peak or None). A failure or Ctrl-C before measuring leaves no worker running."""
    pool: Any = None
    try:
        if options.isolation == ISOLATION_PROCESS:
            pool = start_pool(records, options, say)
        elif options.isolation == ISOLATION_SERIAL:  # life 0's worker runs the accuracy pass (``LifeWorkers``)
            pool = serial_loads.LifeWorkers(records, device=options.device, autotune=options.plan.autotune)
        reference = load_reference(records, batch_sizes, options, model, pool, say=say)
        peak = roofline.query_device_peak() if reference.on_gpu else None
    except BaseException:
        if pool is not None:
            pool.kill()
            pool.close()
        raise
    return reference, pool, peak


def measure_warnings(measured: Measured) -> list[str]:
    """What the measure phase warns of: a worker lost, an interrupt (the batch sizes kept and those not
    measured), the floor of loads run past the budget."""
    warnings: list[str] = []
    if measured.lost:
        warnings.append(f"{measured.lost}: kept batch sizes {', '.join(map(str, measured.batch_sizes)) or 'none'}"
                        + (f" (partial: {', '.join(map(str, measured.partial))})" if measured.partial else "")
                        + f"; not measured: {', '.join(map(str, measured.pending)) or 'nothing'}")
    if measured.interrupted:
        warnings.append(f"interrupted: kept batch sizes {', '.join(map(str, measured.batch_sizes)) or 'none'}; "
                        f"not measured: {', '.join(map(str, measured.pending)) or 'nothing'}")
    warnings.extend(o.floor_overrun if len(measured.outcomes) == 1 else f"batch {b}: {o.floor_overrun}"
                    for b, o in measured.outcomes.items() if o.floor_overrun)
    return warnings


def worker_loads(records: Mapping[str, EngineRecord], options: CompareOptions, pool: Any,
                 shapes: Mapping[str, tuple[int, ...]], fixed: Any) -> Callable[[int], Any]:
    """``open_load`` for one batch size: worker ``index`` of ``pool`` (a ``WorkerPool``, or ``LoneWorkers``: a
    fresh process alone), else fresh in-process runners."""
    def open_load(index: int) -> Any:
        if pool is None:
            return in_process_load(records, options, shapes, fixed)
        return pool.load(index, shapes, options.seed, options.ints, fixed=fixed)

    return open_load


def load_reference(records: Mapping[str, EngineRecord], batch_sizes: Sequence[int], options: CompareOptions,
                   model: OnnxModel | None, pool: Any, say: Callable[[str], None] | None = None) -> Reference:
    """The load phase: the outputs of every engine at each batch size (the accuracy delta) and the input
    shapes, before the timing. With worker processes (``pool``) load 0's worker computes them
    (``reference_pass.from_worker``); in-process, or on the user's ``--inputs``, every engine is loaded once
    in this process, then closed (on a failure the caller, ``compare_records``, kills the worker pool);
    after closing, its idle memory is trimmed. On the user's inputs the pass at each batch size runs as many
    samples as its share of the budget allows (``accuracy_pass.user_outputs``; ``Reference.samples``: how
    many), and says so when it stops early. ``say`` hears each part as it begins (``StartupLog``)."""
    say = say or (lambda line: None)
    if pool is not None and options.data is None:  # load 0's worker computes it: no engine loaded here (issue 33)
        return Reference(**reference_pass.from_worker(records, batch_sizes, options, model, pool, say=say))
    on = f"your --inputs, {accuracy_pass.start_words(options)}," if options.data is not None else "the seeded inputs"
    say(f"the accuracy pass: every engine loaded here once, run on {on} at batch {', '.join(map(str, batch_sizes))}")
    names = list(records)
    baseline = names[0]
    first = records[baseline]
    runners: dict[str, Any] = {}
    load_rss: dict[str, tuple[int | None, int | None]] = {}
    memory: dict[int, dict[str, dict[str, Any]]] = {}
    try:
        for name in names:
            rss_before = rss_bytes()
            runners[name] = bench.load_runner(records[name])
            load_rss[name] = (rss_before, rss_bytes())
        autotune = {name: set_autotune(runners[name], options.plan.autotune) for name in names}
        data = options.data
        all_shapes, needed = reference_pass.checked_shapes(first, runners[baseline], batch_sizes, options, model)
        devices = {name: runners[name].device for name in names}
        outputs, samples = {}, {}
        fp16_range = None
        for batch in batch_sizes:
            with preflight.allocation_guard(batch, needed[batch]):
                feeds = make_inputs(runners[baseline].inputs, all_shapes[batch], seed=options.seed,
                                    int_range=options.ints, data=data)
                if batch == min(batch_sizes):  # FP16 range risks predicted from the FP32 model, one batch (issue 10)
                    fp16_range = fp16range.for_compare(model, records, feeds, data=data,
                                                       seeded_as_build=reference_pass.seeded_as_build(options),
                                                       deadline=reference_pass.range_deadline(options, say))
                if data is None:  # the accuracy pass, memory read around it
                    outputs[batch], memory[batch] = outputs_and_memory(
                        runners, load_rss, lambda r, f=feeds: accuracy.run_outputs(r, f))
                else:  # the user's samples, bounded by the budget (issue 44 #2)
                    outputs[batch], memory[batch], samples[batch] = accuracy_pass.user_outputs(
                        runners, load_rss, data, batch, options)
                    if samples[batch].cut:
                        say(samples[batch].stop_line(batch))
    finally:
        for runner in runners.values():
            runner.close()
        if pool is not None:  # after close, so that what the closed runners held is given back too
            trim(runners)  # the parent idles while the loads measure: keep no autotuning workspaces
    return Reference(shapes=all_shapes, devices=devices, autotune=autotune, outputs=outputs, fp16_range=fp16_range,
                     memory=memory, samples=samples)


def in_process_load(records: Mapping[str, EngineRecord], options: CompareOptions,
                    input_shapes: Mapping[str, tuple[int, ...]], fixed: Any) -> InProcessLoad:
    """One load without a worker process: every engine loaded afresh here, fed the same seeded inputs
    (or ``fixed``, the first batch of the user's inputs)."""
    names = list(records)
    fresh = {name: bench.load_runner(records[name], log_warnings=True) for name in names}  # its blocks capture them
    for r in fresh.values():
        set_autotune(r, options.plan.autotune)
    batch_feeds = fixed if fixed is not None else \
        make_inputs(fresh[names[0]].inputs, input_shapes, seed=options.seed, int_range=options.ints)

    def close() -> None:
        for r in fresh.values():
            r.close()

    return InProcessLoad({n: (fresh[n], batch_feeds) for n in names}, on_close=close)


def measure(records: Mapping[str, EngineRecord], batch_sizes: Sequence[int], options: CompareOptions, reference: Reference,
            pool: Any, hooks: CompareHooks, *, budget: TimeBudget | None = None) -> Measured:
    """The measure phase: per batch size, independent loads (worker processes from ``pool``, else fresh in-process
    runners; ``--serial-loads``: ``measure_lives``) in interleaved rounds until the speedup's CI is decided, each
    batch size in its ``budget.window`` (``budget``: began; default: ``options.time_budget`` from now): done ``k+1``
    budgets after the start and one after it began, less its share of the reserve for what runs after measuring
    (``budget.reserve_s``). Ctrl-C/SIGTERM keeps the batch sizes already decided (issue 12); the pool is closed."""
    names = list(records)
    budget = budget if budget is not None else options.time_budget.began(time.perf_counter())
    if options.isolation == ISOLATION_SERIAL:
        return measure_lives(records, batch_sizes, options, reference, hooks, budget, pool)
    measured = Measured(budget=budget)
    try:
        start_measuring(measured, budget, hooks, len(batch_sizes))
        if pool is not None:  # the floor's workers, and those started with them (WorkerPool.start says why);
            pool.start(min(FLOOR_LOADS, options.plan.min_loads))  # workers never handed a load: killed at close
        for k, batch in enumerate(batch_sizes):
            try:
                shapes = reference.shapes[batch]
                open_load = worker_loads(records, options, pool, shapes, fixed_inputs(records, options, batch))
                outcome = run_interleaved(names, open_load, options.plan, window=budget.window(k, time.perf_counter(), len(batch_sizes)),
                                          hooks=loop_hooks(hooks, batch, records, pool.ready if pool is not None else None))
                batch_decided(measured, batch, outcome, records, options, reference, hooks)
            except KeyboardInterrupt:  # Ctrl-C / SIGTERM: keep the batch sizes already decided (issue 12)
                measured.interrupted = True
                if pool is not None:
                    pool.kill()
                break
            except BudgetTooSmall as err:  # a given budget that cannot hold the minimum: its line names the batch
                budget_refused(err, k, batch_sizes, records, options)
            except workers.WorkerDied as err:  # kill -9 / OOM killer: keep what was decided (issue 36)
                keep_lost_batch(measured, batch, err, records, options, reference, shapes)
                if pool is not None:
                    pool.kill()
                break
    finally:
        if pool is not None:
            close_keeping_results(pool, measured)
            measured.concurrent = pool.concurrent
    measured.pending = [b for b in batch_sizes if b not in measured.outcomes]
    return measured


def measure_lives(records: Mapping[str, EngineRecord], batch_sizes: Sequence[int], options: CompareOptions,
                  reference: Reference, hooks: CompareHooks, budget: TimeBudget, lives: Any) -> Measured:
    """``--serial-loads``: load ``i`` of every batch size is one worker process living alone, life ``i``
    (``serial_loads.run_lives``: it serves every batch size still measuring, then exits before the next starts);
    each batch size in its window, on a clock of its own turns. ``lives``: the ``LifeWorkers`` whose life 0 ran the
    accuracy pass (``start_and_load``). On a GPU each life primes every batch size it serves, and the next life's process
    starts ahead, importing only (``LifeWorkers``). A batch size is announced once decided; Ctrl-C, a lost worker and
    a refused budget are handled as ``measure`` handles them."""
    names = list(records)
    measured = Measured(budget=budget)
    if reference.on_gpu:  # every life primes its batch sizes before serving them: shorter warm-ups (``RoundPlan.primed``)
        options = replace(options, plan=options.plan.primed())
    ahead = " (on a GPU: the next one's process starts ahead, importing only, no CUDA context)" if reference.on_gpu else ""
    StartupLog(hooks.on_startup, budget)("loads one at a time (--serial-loads): load i of every batch size is one "
                                         f"worker process, started once the previous one's rounds are done, alone on the "
                                         f"{'GPU' if reference.on_gpu else 'machine'}{ahead}")
    priming = serial_loads.LifePriming([(b, reference.shapes[b]) for b in batch_sizes], options.seed, options.ints,
                                       TimingConfig(cuda_graph=options.plan.cuda_graph, copies=options.plan.copies))
    lives.priming = priming if reference.on_gpu else None
    lives.ahead = reference.on_gpu
    try:
        lives.begin_life(range(len(batch_sizes)))  # life 0 serves every batch size: it primes while scipy imports here
        lives.begin_priming(0)
        start_measuring(measured, budget, hooks, len(batch_sizes))
        lives.overlap_exit = serial_loads.overlap_exit_for(records, reference.on_gpu)  # (while life 0 primes)
        opens = [worker_loads(records, options, lives, reference.shapes[b], fixed_inputs(records, options, b))
                 for b in batch_sizes]

        def done(k: int, outcome: InterleavedOutcome) -> None:
            batch_decided(measured, batch_sizes[k], outcome, records, options, reference, hooks)

        try:
            calls = serial_loads.LifeCalls(lives.end_life, done, lives.begin_life, lives.start_life)
            serial_loads.run_lives(names, opens, options.plan, calls=calls,
                                   windows=lambda k, now: budget.window(k, now, len(batch_sizes)),
                                   hooks=[loop_hooks(hooks, b, records, None) for b in batch_sizes])
        except KeyboardInterrupt:  # Ctrl-C / SIGTERM: keep the batch sizes already decided (issue 12)
            measured.interrupted = True
            lives.kill()
        except BudgetTooSmall as err:
            budget_refused(err, getattr(err, "turn", 0), batch_sizes, records, options)
        except workers.WorkerDied as err:  # kill -9 / OOM killer: keep what was decided (issue 36)
            batch = batch_sizes[getattr(err, "turn", 0)]
            keep_lost_batch(measured, batch, err, records, options, reference, reference.shapes[batch])
            lives.kill()
    finally:
        close_keeping_results(lives, measured)
        measured.concurrent = lives.concurrent
        measured.lives = lives.lives
    measured.pending = [b for b in batch_sizes if b not in measured.outcomes]
    return measured


def start_measuring(measured: Measured, budget: TimeBudget, hooks: CompareHooks, batch_sizes: int) -> None:
    """The analysis libraries imported inside the budget's clock (not after it), then what the start-up spent and
    what is kept for the end."""
    preload_analysis(StartupLog(hooks.on_startup, budget))
    measured.startup_s = budget.elapsed_s(time.perf_counter())
    measured.reserve_s = budget.reserve_s(batch_sizes)


def fixed_inputs(records: Mapping[str, EngineRecord], options: CompareOptions, batch: int) -> Any:
    """The first batch of the user's ``--inputs`` at ``batch`` (None on seeded inputs)."""
    if options.data is None:
        return None
    return options.data.batch(batch, dtypes=input_dtypes(records[next(iter(records))]))


def loop_hooks(hooks: CompareHooks, batch: int, records: Mapping[str, EngineRecord],
               ready: Callable[[int], bool] | None) -> LoopHooks:
    """What one batch size's loop tells: its looks (``hooks.on_progress`` with the batch size), its budget's line."""
    def progress(p: Progress) -> None:
        if hooks.on_progress is not None:
            hooks.on_progress(batch, p)

    return LoopHooks(progress, budget_line(hooks, batch, records[next(iter(records))].spec.backend), ready)


def batch_decided(measured: Measured, batch: int, outcome: InterleavedOutcome, records: Mapping[str, EngineRecord],
                  options: CompareOptions, reference: Reference, hooks: CompareHooks) -> None:
    """Batch size ``batch`` decided: its outcome and results kept, its accuracy judged, announced; the first batch
    size's start-up (it holds the command's) remembered: the next run's estimate."""
    if batch == next(iter(reference.shapes), batch):  # the batch sizes in order (reference_pass.checked_shapes)
        budget_memo.remember(budget_memo.memo_path(records, batch, options.isolation), outcome.minimum)
    keep_outcome(measured, batch, outcome, records, options, reference, reference.shapes[batch])
    judge_accuracy(measured, batch, list(records), reference, options)
    if hooks.on_batch is not None:
        hooks.on_batch(batch, outcome)


def budget_refused(err: BudgetTooSmall, k: int, batch_sizes: Sequence[int], records: Mapping[str, EngineRecord],
                   options: CompareOptions) -> None:
    """A given budget that cannot hold the minimum at batch size ``k``, raised: the first one's cost kept (the
    next run with these engines is refused before it loads anything); the line names the batch size where there
    are more."""
    batch = batch_sizes[k]
    if k == 0:
        budget_memo.remember(budget_memo.memo_path(records, batch, options.isolation), err.cost)
    if len(batch_sizes) > 1:
        raise BudgetTooSmall(f"batch {batch}: {err}", cost=err.cost) from err
    raise err


def judge_accuracy(measured: Measured, batch: int, names: Sequence[str], reference: Reference,
                   options: CompareOptions) -> None:
    """Every candidate's accuracy delta at ``batch`` (``candidate_accuracy``), kept for the analysis and
    its verdict put on the outcome before the batch size is announced: the line that says FASTER must
    know whether the outputs are BROKEN (compare.verdict_words)."""
    deltas = {cand: candidate_accuracy(batch, names[0], cand, measured, reference, options) for cand in names[1:]}
    measured.accuracy[batch] = deltas
    outcome = measured.outcomes[batch]
    outcome.accuracy = {cand: str((d.verdict or {}).get("verdict")) for cand, d in deltas.items() if d.verdict}


def candidate_accuracy(batch: int, baseline: str, cand: str, measured: Measured, reference: Reference,
                       options: CompareOptions) -> AccuracyDelta:
    """One candidate's accuracy delta against the baseline's outputs at ``batch`` (its outputs renamed
    to the baseline's for an A/B by position)."""
    outputs = reference.outputs[batch]
    renamed = (options.output_pairs or {}).get(cand) or {}  # compare.ab.outputs_by_position
    cand_outputs = {renamed.get(k, k): v for k, v in outputs[cand].items()}
    count = reference.samples.get(batch)
    inputs = (count.describe(options.data.source) if count is not None else options.data.describe()) \
        if options.data is not None else f"random inputs (seed {options.seed})"
    return accuracy_of(outputs[baseline], cand_outputs, reference.fp16_range, measured.per_batch[batch][cand],
                       options.accuracy_budget, inputs, count)


def keep_lost_batch(measured: Measured, batch: int, err: Any, records: Mapping[str, EngineRecord],
                    options: CompareOptions, reference: Reference, shapes: Mapping[str, tuple[int, ...]]) -> None:
    """A worker died during ``batch``: say which and how (``measured.lost``); the rounds every load
    finished before it are kept as that batch size's outcome, marked partial (``measured.partial``)."""
    measured.lost = f"{err.message} during batch size {batch}"
    if err.partial is None:
        return
    keep_outcome(measured, batch, err.partial, records, options, reference, shapes)
    measured.partial.append(batch)


def keep_outcome(measured: Measured, batch: int, outcome: Any, records: Mapping[str, EngineRecord],
                 options: CompareOptions, reference: Reference, shapes: Mapping[str, tuple[int, ...]]) -> None:
    """A batch size's interleaved outcome and each arm's result from it, into ``measured``."""
    measured.per_batch[batch] = {
        arm.name: arm_result(records[arm.name], arm, batch, outcome, options, reference, shapes)
        for arm in outcome.arms}
    measured.outcomes[batch] = outcome


def arm_result(record: EngineRecord, arm: Arm, batch_size: int, outcome: InterleavedOutcome, options: CompareOptions,
               reference: Reference, input_shapes: Mapping[str, tuple[int, ...]]) -> BenchResult:
    """One arm's ``BenchResult`` at ``batch_size`` from the interleaved ``outcome``: its pooled samples, its
    engine, how it was timed (``options.plan``, ``options.seed``; its device, autotune setting and memory in use
    as the load phase found them, ``reference``)."""
    plan, device_kind = options.plan, reference.devices[arm.name]
    clock = "perf_counter_ns" if device_kind == "cpu" else "cuda_events"
    warnings = list(arm.notes)
    if record.backend_metadata.get("effective_precision") not in (None, record.precision):
        warnings.append(f"requested {record.precision}, effective {record.backend_metadata['effective_precision']}"
                        + (": " + record.notes[0] if record.notes else ""))
    return BenchResult.from_samples(
        stages=arm.pooled(), span_s=arm.span_s, blocks=arm.block_spans, batch_size=batch_size, model=record.model,
        precision=record.precision, backend=record.backend,
        engine={"key": record.key, "artifact": str(record.artifact_path), "artifact_bytes": artifact_bytes(record.artifact_path),
                "effective_precision": effective_precision(record), "build_seconds": record.build_seconds,
                "backend_metadata": record.backend_metadata, "environment": record.environment,
                "notes": list(record.notes)},
        config={"interleaved": True, "arm": arm.name, "loads": outcome.loads, "rounds": outcome.rounds, "round_iterations": outcome.round_iterations[arm.name],
                "round_warmup": outcome.round_warmup, "min_rounds_per_load": outcome.min_rounds, "warmup_done": arm.warmup_done, "warmup_s": round(arm.warmup_s, 4),
                "warmup_ms": {"first_load": plan.first_warmup_ms, "later_loads": plan.later_warmup_ms},
                # a primed worker's later load: a round's warm-up calls (``round_warmup``), else ``ROUND_WARMUP``
                "primed_warmup_as_round": blocks.PRIMED_WARMUP_AS_ROUND,
                "block_setup_s": round(arm.setup_s, 4),
                "target_ci": plan.target_ci, "time_budget_s": plan.time_budget_s, "stop_reason": outcome.stop_reason,
                "elapsed_s": round(outcome.elapsed_s, 3),  # of the budget (the first batch size: from compare's start)
                "copies": plan.copies if clock == "cuda_events" else None, "cuda_graph": plan.cuda_graph and clock == "cuda_events",
                "clock": clock, "autotune": reference.autotune[arm.name],
                "input_shapes": {k: list(v) for k, v in input_shapes.items()}, "seed": options.seed},
        warnings=warnings,
        device=arm.device,
        memory=reference.memory[batch_size][arm.name] or {},
        third_party_warnings=arm.third_party.to_json(),
    )


def close_keeping_results(pool: Any, measured: Measured) -> None:
    """Close the workers; a Ctrl-C/SIGTERM while they exit (after the last batch size, when every
    verdict is in) kills them instead and keeps what was measured, like one during the rounds."""
    try:
        pool.close()
    except KeyboardInterrupt:
        measured.interrupted = True
        pool.kill()
        pool.close()




def input_dtypes(record: EngineRecord) -> dict[str, Any]:
    return {t.name: np.dtype(t.dtype) for t in record.inputs}


def accuracy_of(reference: Mapping[str, Any], candidate: Mapping[str, Any], fp16_range: Any, cand_result: Any,
                budget: Any, inputs: str, count: Any = None) -> Any:
    """The accuracy delta of one candidate: metrics on what the outputs were computed on (``inputs``, in
    words; ``count``: how many of the user's samples, an ``accuracy_pass.SampleCount``, None on random
    inputs), the FP16 range prediction and caveat (fp16), and the verdict against ``budget``."""
    acc = compare_outputs(reference, candidate, inputs=inputs)
    if count is not None:
        acc = replace(acc, samples=count.ran, samples_total=count.total)
    acc = fp16range.annotate(acc, fp16_range, cand_result)
    return replace(acc, verdict=judge(acc, budget if budget is not None else AccuracyBudget.parse(None)))
