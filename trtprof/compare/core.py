"""FP16 vs FP32 (or any precisions): engine records → interleaved loads and rounds → comparisons.

This module is the assembly: it takes every engine's outputs once (the accuracy delta: from load 0's
worker, ``reference_pass``, or loaded here in-process),
measures through ``interleave.run_interleaved`` (loads × interleaved rounds × iterations, stopped
on the speedup's own CI; loads are worker processes, ``workers``), takes the speedup, its verdict
and the per-engine median CIs from ``speedup`` (hierarchical: loads, then rounds), adds the
accuracy delta, the diagnosis and the roofline, and writes one ``CompareReport``.

Where things live: the loop, its plan and stopping rule in ``interleave``; the statistics (CI,
the four verdicts, distribution shape, "what would decide it") in ``speedup``; the process
workers in ``workers``; the calibration simulation in ``calibration``. Import their names from there
(this module re-exports nothing).
"""
from __future__ import annotations

import json
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

import numpy as np

# accuracy, bench, roofline and workers are used as modules (bench.load_runner, ...): tests replace those
# attributes with fakes, which a name bound here at import time would not see.
from . import accuracy, reference_pass
from ..convert import fp16range
from ..measure import bench, workers
from ..measure.budget import BudgetTooSmall, StartupLog, TimeBudget
from ..model import roofline
from ..system import model_memory, preflight
from .accuracy import AccuracyBudget, AccuracyDelta, compare_outputs, judge
from .result import ArmLatency, ComparisonResult, SpeedupSummary
from .. import backends
from ..backends.base import set_autotune
from ..measure.bench import effective_precision
from ..builder.pipeline import RUNNER_OPTIONS, BuildSettings, as_onnx, build_engines
from ..engines.cache import EngineRecord, list_engines
from ..util.files import atomic_write_text, now_iso
from ..util.signals import interrupts_noted
from ..diagnose.rules import diagnose
from ..system.environment import collect
from ..errors import BadInput, TrtprofError
from ..diagnose.findings import Finding
from ..model.inputs import DEFAULT_INT_RANGE, make_inputs
from ..measure.interleave import (
    FLOOR_LOADS,
    LOADS_LIMIT,
    ROUND_WARMUP,
    STOP_CONFIDENCE,
    Arm,
    InProcessLoad,
    InterleavedOutcome, LoopHooks,
    Progress,
    RoundPlan,
    run_interleaved,
)
from ..layers.profile import graph_facts, profile_records
from ..system.memory import artifact_bytes, outputs_and_memory, rss_bytes
from ..model.onnx_model import OnnxModel, as_model
from ..measure.results import BenchResult
from ..model.roofline import achieved, graph_cost
from ..schemas import COMPARE as SCHEMA
from ..stats.speedup import (
    CONFIDENCE,
    ENGINE_METHOD,
    INCONCLUSIVE,
    METHOD,
    LatencyShape,
    Speedup,
    distribution_shape,
    few_loads_words,
    inconclusive_hint,
    mean_median_note,
    unseen_mode_note,
)
from ..stats.latency import median_ci_exact
from ..model.user_inputs import run_all
from ..system.noise import cpu_state
from ..system.validity import merge as merge_validity
from .stamp import stamp_all
from ..measure.workers import trim

ISOLATION_PROCESS = "process"  # every load a fresh worker process (default)
ISOLATION_IN_PROCESS = "in-process"  # loads re-created in this process (fakes; backends that cannot be spawned)


def arm_labels(precisions: Sequence[Any]) -> list[str]:
    """Labels of the arms: the precision, with ``#2``, ``#3`` … when one repeats (A/A: fp32, fp32#2)."""
    seen: dict[str, int] = {}
    labels = []
    for p in precisions:
        name = str(p)
        seen[name] = seen.get(name, 0) + 1
        labels.append(name if seen[name] == 1 else f"{name}#{seen[name]}")
    return labels


# ---------------------------------------------------------------------------------------------
# The whole comparison: engines → loads × interleaved rounds → speedup, accuracy, diagnosis, roofline
# ---------------------------------------------------------------------------------------------


@dataclass
class Comparison:
    """One candidate precision against the baseline at one batch size (one JSON ``comparisons`` entry)."""

    batch_size: int
    baseline: str
    candidate: str
    speedup: Speedup
    accuracy: AccuracyDelta | None
    diagnosis: list[Finding]
    baseline_result: BenchResult
    candidate_result: BenchResult
    rounds: int
    stop_reason: str
    round_ratios: list[float]
    half_widths: dict[str, float]
    roofline: dict[str, Any] = field(default_factory=dict)
    loads: int = 1
    median_cis_ms: dict[str, tuple[float, float]] = field(default_factory=dict)  # side → hierarchical CI
    round_s: float = 0.0  # seconds per round, for the "about N more rounds" estimate
    validity: Any = None  # system.validity.Validity, set by compare.stamp once the comparison is made
    min_loads: int | None = None  # the minimum it was stamped against (compare.stamp): below it, provisional

    @property
    def verdict(self) -> str:
        return self.speedup.verdict

    @property
    def verdict_note(self) -> str:
        """What an inconclusive verdict would need, and what the distributions look like."""
        notes = [few_loads_words(self.loads)] if few_loads_words(self.loads) else []
        if self.verdict == INCONCLUSIVE:
            notes.append(inconclusive_hint(self.speedup, self.round_s))
        if self.baseline == self.candidate.split("#")[0]:
            notes.append(f"A/A (same engine loaded independently): the noise floor here is "
                         f"[{self.speedup.ci_low:.3f}, {self.speedup.ci_high:.3f}]; no difference inside it is claimed")
        unseen = unseen_mode_note(self.speedup, max_loads=LOADS_LIMIT)  # --min-loads can ask up to it
        if unseen:
            notes.append(unseen)
        mm = mean_median_note(self.speedup)
        if mm:
            notes.append(mm)
        for side, result in (("baseline", self.baseline_result), ("candidate", self.candidate_result)):
            text = self.shapes.get(side, LatencyShape(1, (), 0.0)).describe()
            if text:
                notes.append(f"{result.precision if side == 'baseline' else self.candidate}: {text}")
        return "; ".join(notes)

    @property
    def shapes(self) -> dict[str, LatencyShape]:
        cached = self.__dict__.get("_shapes")
        if cached is None:
            cached = {side: distribution_shape(r.samples_ms["latency_ms"])
                      for side, r in (("baseline", self.baseline_result), ("candidate", self.candidate_result))}
            self.__dict__["_shapes"] = cached
        return cached

    def result(self) -> ComparisonResult:
        """The typed result the CLI prints and the pages show; its ``to_json`` is this entry's JSON."""
        def side(name: str, r: Any) -> ArmLatency:
            lat = r.stats["latency_ms"]
            low, high = self.median_cis_ms.get(name) or median_ci_exact(r.samples_ms["latency_ms"])
            return ArmLatency(precision=r.precision, effective_precision=r.engine.get("effective_precision", r.precision),
                              median_ms=lat.p50, ci_low_ms=low, ci_high_ms=high, n=lat.n, cv=lat.cv,
                              stage_medians_ms={k: s.p50 for k, s in r.stats.items()},
                              engine=r.engine.get("artifact", ""))

        return ComparisonResult(
            batch_size=self.batch_size, baseline=self.baseline, candidate=self.candidate,
            speedup=SpeedupSummary.from_json(self.speedup.to_json()), verdict=self.verdict,
            validity=self.validity.to_json() if self.validity is not None else None,
            accuracy=self.accuracy.to_json() if self.accuracy is not None else None,
            diagnosis=tuple(self.diagnosis), verdict_note=self.verdict_note,
            shape={k: v.to_json() for k, v in self.shapes.items()},
            latency={"baseline": side("baseline", self.baseline_result),
                     "candidate": side("candidate", self.candidate_result)},
            loads=self.loads, rounds=self.rounds, stop_reason=self.stop_reason,
            round_ratios=tuple(self.round_ratios), median_ci_half_width=dict(self.half_widths),
            roofline=dict(self.roofline), min_loads=self.min_loads)

    def to_json(self) -> dict[str, Any]:
        return self.result().to_json()


@dataclass
class CompareReport:
    model: str
    backend: str
    plan: RoundPlan
    comparisons: list[Comparison]
    results: list[BenchResult]  # one per precision × batch size (raw samples inside)
    environment: dict[str, Any]
    created: str = ""
    device_peak: dict[str, Any] | None = None
    warnings: list[str] = field(default_factory=list)
    isolation: str = ISOLATION_PROCESS
    layers: dict[int, Any] = field(default_factory=dict)  # batch → layers.LayerTable (compare --layers)
    interrupted: bool = False  # Ctrl-C/SIGTERM: the comparisons are the batch sizes finished before it
    pending: list[int] = field(default_factory=list)  # batch sizes not measured because of the interrupt
    serving: dict[str, Any] | None = None  # --concurrency sweep and --slo-ms verdicts (trtprof.serving.sweep)
    budget: dict[str, Any] = field(default_factory=dict)  # Measured.budget_account: what the time budget covered
    time_budget: TimeBudget | None = None  # the budget it ran under (began: its start fixed)
    lost: str = ""  # a measurement worker died: which load and how (the CLI exits 2 with it)
    partial: list[int] = field(default_factory=list)  # batch sizes kept from the rounds before that death
    timeline: dict[str, Any] | None = None  # compare --timeline: compare.timeline.record_timelines's block
    concurrent: dict[str, Any] = field(default_factory=dict)  # measure.concurrent.record: what ran beside the timing
    spent_s: float | None = None  # the budget spent, fixed by seal(): to_json reads no clock once sealed

    def seal(self) -> "CompareReport":
        """Fix what the report says about time (the budget spent, after measuring, the analysis and any
        serving sweep), so that every ``to_json`` after it — the printed result and the saved file — is the
        same value (issue 41: the printed and the saved result differed by the clock read in between)."""
        if self.time_budget is not None and self.spent_s is None:
            self.spent_s = round(self.time_budget.elapsed_s(time.perf_counter()), 3)
        return self

    def to_json(self) -> dict[str, Any]:
        """Pure once ``seal``ed (the CLI seals before it prints); before that the budget spent is read now."""
        extra = {"layers": {str(b): t.to_json() for b, t in self.layers.items()}} if self.layers else {}
        if self.timeline is not None:
            extra["timeline"] = self.timeline
        if self.serving is not None:
            extra["serving"] = self.serving
        if self.budget:  # spent: after measuring and the analysis (fixed by seal())
            spent = self.spent_s
            if spent is None and self.time_budget is not None:
                spent = round(self.time_budget.elapsed_s(time.perf_counter()), 3)
            extra["budget"] = {**self.budget, "spent_s": spent}
        return {
            "schema": SCHEMA,
            "created": self.created,
            "model": self.model,
            "backend": self.backend,
            "settings": {**self.plan.to_json(), "min_rounds": self.plan.min_rounds, "confidence": CONFIDENCE,
                         "stop_confidence": STOP_CONFIDENCE, "isolation": self.isolation,
                         "method": {"speedup": METHOD, "median_ci": ENGINE_METHOD}},
            **({"validity": merge_validity([c.validity for c in self.comparisons]).to_json()}
               if any(c.validity is not None for c in self.comparisons) else {}),
            "comparisons": [{**c.to_json(), **({"partial": True} if c.batch_size in self.partial else {})}
                            for c in self.comparisons],
            "warnings": self.warnings,
            "device_peak": self.device_peak,
            "environment": self.environment,
            "results": [r.to_json() for r in self.results],
            "interrupted": self.interrupted,
            "pending_batch_sizes": self.pending,
            "worker_lost": self.lost or None,
            "concurrent_with_timing": self.concurrent or None,
            **extra,
        }

    def write_json(self, path) -> None:
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_text(path, json.dumps(self.to_json(), indent=1, allow_nan=True) + "\n")


def select_records(records: Sequence[EngineRecord], precisions: Sequence[Any],
                   backend: str = "auto") -> dict[str, EngineRecord]:
    """One engine per precision from an engines dir, in the order of ``precisions`` (first = baseline)."""
    wanted = list(dict.fromkeys(str(p) for p in precisions))  # A/A names one precision twice
    chosen: dict[str, EngineRecord] = {}
    for precision in wanted:
        matches = [r for r in records if r.precision == precision and (backend == "auto" or r.backend == backend)]
        if not matches:
            have = sorted({f"{r.precision}/{r.backend}" for r in records})
            raise BadInput(f"no {precision} engine here (have: {', '.join(have) or 'none'}); build it or pass the model")
        # a torch engine's memory format (--what-if channels-last) makes it another engine: never picked silently
        keys = {(r.model, r.backend + "".join(f"+{v}" for k, v in r.spec.options if k in RUNNER_OPTIONS))
                for r in matches}
        if len(keys) > 1:
            raise BadInput(f"several {precision} engines here ({', '.join(sorted(f'{m}/{b}' for m, b in keys))}); "
                           "narrow with --backend where their backends differ, else keep one per folder (give a "
                           "what-if its own --engines folder)")
        chosen[precision] = max(matches, key=lambda r: r.created)
    models = {r.model_path for r in chosen.values()}
    if len(models) > 1:
        raise BadInput(f"the engines come from different models ({', '.join(sorted(models))})")
    return chosen


def _result_for(record: EngineRecord, arm: Arm, batch_size: int, plan: RoundPlan, outcome: InterleavedOutcome,
                input_shapes: Mapping[str, tuple[int, ...]], seed: int, device_kind: str = "cpu",
                autotune: bool | None = None, memory: dict[str, Any] | None = None) -> BenchResult:
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
                "round_warmup": ROUND_WARMUP, "warmup_done": arm.warmup_done, "warmup_s": round(arm.warmup_s, 4),
                "target_ci": plan.target_ci, "time_budget_s": plan.time_budget_s, "stop_reason": outcome.stop_reason,
                "elapsed_s": round(outcome.elapsed_s, 3),  # of the budget (the first batch size: from compare's start)
                "copies": plan.copies if clock == "cuda_events" else None, "cuda_graph": plan.cuda_graph and clock == "cuda_events",
                "clock": clock, "autotune": autotune, "input_shapes": {k: list(v) for k, v in input_shapes.items()}, "seed": seed},
        warnings=warnings,
        device=arm.device,
        memory=memory or {},
        third_party_warnings=arm.third_party.to_json(),
    )


@dataclass(frozen=True)
class CompareOptions:
    """How to compare, carried whole through the phases of ``compare_records`` (torch.utils.benchmark
    carries one frozen spec per measurement the same way): one object to log, test and pass on
    instead of a dozen loose parameters.

    ``shapes``: input shape overrides (name → shape); ``seed``/``int_range``: the random inputs;
    ``data`` (user_inputs.InputData) replaces them: accuracy runs on all its samples, timing on its
    first batch; ``budget`` (measure.budget.TimeBudget): where the time budget counts from and what
    its end's reserve is a multiple of (the CLI: its process's start and imports; ``compare_model``
    leaves the engine builds out; default: ``plan.time_budget_s`` from when ``compare_records`` begins,
    the reserve a multiple of the launch up to it); ``accuracy_budget`` (accuracy.AccuracyBudget; default ``DEFAULT_BUDGET``) gives every
    candidate its accuracy verdict; ``isolation``: every load a worker process (``device`` sets its
    CUDA_VISIBLE_DEVICES) or fresh in-process runners; ``layers``: also profile every engine layer by
    layer after the timing."""

    plan: RoundPlan = RoundPlan()
    shapes: Mapping[str, tuple[int, ...]] | None = None
    seed: int = 0
    int_range: tuple[int, int] | None = None
    isolation: str = ISOLATION_PROCESS
    device: str | None = None
    layers: bool = False
    accuracy_budget: Any = None
    output_pairs: Mapping[str, Mapping[str, str]] | None = None  # arm → {its output: baseline's} (A/B by position)
    data: Any = None
    budget: TimeBudget | None = None
    timeline: Any = None  # compare.timeline.TimelineRequest: one batch size's timelines after the timing

    def __post_init__(self) -> None:
        if self.budget is not None and self.budget.per_batch_s != self.plan.time_budget_s:
            raise ValueError(f"budget {self.budget.per_batch_s} s per batch size, plan {self.plan.time_budget_s} s")

    @property
    def ints(self) -> tuple[int, int]:
        return self.int_range or DEFAULT_INT_RANGE

    @property
    def time_budget(self) -> TimeBudget:
        """The budget given, else ``plan.time_budget_s`` from when the comparison begins."""
        return self.budget if self.budget is not None else TimeBudget(self.plan.time_budget_s)

    def leaving_out(self, seconds: float) -> CompareOptions:
        """These options with ``seconds`` (engine builds: a one-off) left out of the time budget."""
        return replace(self, budget=self.time_budget.leaving_out(seconds))


class BuildTally:
    """An ``on_built`` hook that adds up the seconds of the engines really built (the time budget
    leaves them out) and passes every outcome on to ``on_built``."""

    def __init__(self, on_built: Callable[[Any], None] | None = None) -> None:
        self.on_built, self.seconds = on_built, 0.0

    def __call__(self, outcome: Any) -> None:
        self.seconds += outcome.seconds if outcome.built else 0.0
        if self.on_built is not None:
            self.on_built(outcome)


@dataclass(frozen=True)
class CompareHooks:
    """Who hears what while a comparison runs (the CLI prints them): ``on_built`` each engine built or
    found, ``on_progress`` every look of the stopping rule, ``on_batch`` each batch size once decided."""

    on_built: Callable[[Any], None] | None = None
    on_progress: Callable[[int, Progress], None] | None = None
    on_batch: Callable[[int, InterleavedOutcome], None] | None = None
    on_budget: Callable[[int, str], None] | None = None  # before a batch size's rounds: its budget's line
    on_note: Callable[[str], None] | None = None  # a one-off line before the rounds (loads lowered to fit memory)
    on_startup: Callable[[str], None] | None = None  # each part of the start-up as it begins (StartupLog's lines)


def budget_line(hooks: CompareHooks, batch: int, backend: str) -> Callable[[str], None] | None:
    """The budget's line for ``batch`` (``BatchWindow.fitted``: the budget grew for the loads, or cannot hold
    them), with the backend's word on why its loads cost seconds where it has one (``Capabilities.costly_loads``:
    torch's cuDNN autotuning, issue 43)."""
    on_budget = hooks.on_budget
    if on_budget is None:
        return None
    why = backends.capabilities(backend).costly_loads

    def line(text: str) -> None:
        on_budget(batch, f"{text}; {why}" if why else text)

    return line


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
                              for b, o in self.outcomes.items()}}

    @property
    def batch_sizes(self) -> list[int]:
        return list(self.outcomes)

    @property
    def results(self) -> list[BenchResult]:
        return [r for batch in self.per_batch.values() for r in batch.values()]


def compare_records(
    records: Mapping[str, EngineRecord],
    batch_sizes: Sequence[int],
    options: CompareOptions = CompareOptions(),
    *,
    source: OnnxModel | Path | None = None,
    hooks: CompareHooks = CompareHooks(),
) -> CompareReport:
    """Measure the engines of ``records`` (arm label → record; the first is the baseline; one record
    may appear under two labels for an A/A run) at each batch size; every candidate gets a speedup,
    its verdict, an accuracy delta and its diagnosis. ``source``: the FP32 model they were built from
    (an ``OnnxModel``, read once, or a path read here once; None: no range analysis, roofline or graph facts).

    Four phases, each a function: load (``load_reference``: every engine's outputs and input shapes, from
    load 0's worker, or with the engines loaded here once, then closed), measure (``measure``: ``plan.min_loads``+ independent loads
    in interleaved rounds), analyse (``analyse``: speedup, accuracy, roofline, diagnosis per candidate)
    and assemble (the ``CompareReport``). Worker processes (``isolation="process"``) are spawned before
    the load phase so that their start-up overlaps it, and reused across batch sizes. The first batch
    size's budget starts at ``options.budget``'s start (the CLI: its process's start), else here: imports, the
    accuracy pass and the workers' start-up, which overlap, are part of it; so is what runs after
    measuring, for which the measure phase keeps a reserve (issue 27: the budget is the budget)."""
    budget = options.time_budget.began(time.perf_counter())  # launch_s: the interpreter, imports, cache lookup
    if options.timeline is not None:  # a --timeline-batch not compared: refused before measuring
        options.timeline.pick(batch_sizes)
    host_before = cpu_state()  # the load average before measuring, not one our own run raised (system.validity)
    model = as_model(source)
    pool = None
    say = StartupLog(hooks.on_startup, budget)
    try:
        if options.isolation == ISOLATION_PROCESS:
            pool = start_pool(records, options, say)
        reference = load_reference(records, batch_sizes, options, model, pool, say=say)
        peak = roofline.query_device_peak() if reference.on_gpu else None
    except BaseException:  # a failure or Ctrl-C before measuring: no worker is left running
        if pool is not None:
            pool.kill()
            pool.close()
        raise
    measured = measure(records, batch_sizes, options, reference, pool, hooks, budget=budget)
    warnings: list[str] = []
    if measured.lost:
        warnings.append(f"{measured.lost}: kept batch sizes {', '.join(map(str, measured.batch_sizes)) or 'none'}"
                        + (f" (partial: {', '.join(map(str, measured.partial))})" if measured.partial else "")
                        + f"; not measured: {', '.join(map(str, measured.pending)) or 'nothing'}")
        options = replace(options, layers=False, timeline=None)
    if measured.interrupted:
        warnings.append(f"interrupted: kept batch sizes {', '.join(map(str, measured.batch_sizes)) or 'none'}; "
                        f"not measured: {', '.join(map(str, measured.pending)) or 'nothing'}")
        options = replace(options, layers=False, timeline=None)  # no profiling after an interrupt: the user asked to stop
    warnings.extend(o.floor_overrun if len(measured.outcomes) == 1 else f"batch {b}: {o.floor_overrun}"
                    for b, o in measured.outcomes.items() if o.floor_overrun)
    noted: list[int] = []
    with interrupts_noted(noted):  # a Ctrl-C/SIGTERM here waits for the verdicts; a second one does not
        comparisons, tables = analyse(records, measured, options, reference, model, peak, warnings)
    if noted:
        measured.interrupted = True
        warnings.append("interrupted after every batch size was measured: the analysis finished and the verdicts "
                        "are kept; nothing more was recorded")
        options = replace(options, timeline=None)
    timeline = compare_timeline(records, measured, options, comparisons, warnings)
    stamp_all(comparisons, measured.outcomes, options.plan.min_loads, host_before, reference.devices)
    first = next(iter(records.values()))
    env = collect()
    env.setdefault("host", {})["cpu_state"] = host_before
    env["backend"] = dict(first.environment)
    return CompareReport(model=first.model, backend=first.backend, plan=options.plan, comparisons=comparisons,
                         results=measured.results, environment=env, created=now_iso(),
                         device_peak=peak.to_json() if peak is not None else None, warnings=warnings,
                         isolation=options.isolation, layers=tables, interrupted=measured.interrupted,
                         pending=measured.pending, time_budget=budget, budget=measured.budget_account(options.plan),
                         lost=measured.lost, partial=measured.partial, timeline=timeline,
                         concurrent=measured.concurrent)


def start_pool(records: Mapping[str, EngineRecord], options: CompareOptions, say: Callable[[str], None]) -> Any:
    """The worker processes of the minimum loads, started now and waited for after the accuracy pass: their
    imports and engine loads (seconds to tens of seconds for a torch model on a GPU host) overlap the
    parent's own, and every later load's cost is what the first load shows (``BatchWindow.fitted``)."""
    ahead = min(options.plan.min_loads, workers.SPAWN_AHEAD)
    pool = workers.WorkerPool(records, device=options.device, autotune=options.plan.autotune,
                              planned=options.plan.min_loads)
    pool.spawn(ahead)
    say(f"{ahead} worker processes starting (each imports trtprof and loads every engine: one load each)")
    return pool


def worker_loads(records: Mapping[str, EngineRecord], options: CompareOptions, pool: Any,
                 shapes: Mapping[str, tuple[int, ...]], fixed: Any) -> Callable[[int], Any]:
    """``open_load`` for one batch size: worker ``index`` of ``pool``, else fresh in-process runners."""
    def open_load(index: int) -> Any:
        if pool is None:
            return in_process_load(records, options, shapes, fixed)
        return pool.load(index, shapes, options.seed, options.ints, fixed=fixed)

    return open_load


def compare_timeline(records: Mapping[str, EngineRecord], measured: Measured, options: CompareOptions,
                     comparisons: Sequence[Comparison], warnings: list[str]) -> dict[str, Any] | None:
    """``--timeline``: the timelines after the timing (``compare.timeline``), their findings put into
    the comparisons at that batch size; one that cannot be recorded costs a warning, not the verdicts."""
    from . import timeline as tl

    if options.timeline is None or not measured.batch_sizes:
        return None
    try:
        block = tl.record_timelines(records, measured.batch_sizes, options)
    except (TrtprofError, ValueError, RuntimeError, OSError) as err:
        warnings.append(f"timeline not recorded: {type(err).__name__}: {err}")
        return None
    tl.point_findings(comparisons, block)
    return block


def load_reference(records: Mapping[str, EngineRecord], batch_sizes: Sequence[int], options: CompareOptions,
                   model: OnnxModel | None, pool: Any, say: Callable[[str], None] | None = None) -> Reference:
    """The load phase: the outputs of every engine at each batch size (the accuracy delta) and the input
    shapes, before the timing. With worker processes (``pool``) load 0's worker computes them
    (``reference_pass.from_worker``); in-process, or on the user's ``--inputs``, every engine is loaded once
    in this process, then closed (on a failure the caller, ``compare_records``, kills the worker pool);
    after closing, its idle memory is trimmed. ``say`` hears each part as it begins (``StartupLog``)."""
    say = say or (lambda line: None)
    if pool is not None and options.data is None:  # load 0's worker computes it: no engine loaded here (issue 33)
        return Reference(**reference_pass.from_worker(records, batch_sizes, options, model, pool, say=say))
    say(f"the accuracy pass: every engine loaded here once, run on "
        f"{'your --inputs' if options.data is not None else 'the seeded inputs'} at batch "
        f"{', '.join(map(str, batch_sizes))}")
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
        outputs = {}
        fp16_range = None
        for batch in batch_sizes:
            with preflight.allocation_guard(batch, needed[batch]):
                feeds = make_inputs(runners[baseline].inputs, all_shapes[batch], seed=options.seed,
                                    int_range=options.ints, data=data)
                if batch == min(batch_sizes):  # FP16 range risks predicted from the FP32 model, one batch (issue 10)
                    fp16_range = fp16range.for_compare(model, records, feeds, data=data,
                                                       seeded_as_build=reference_pass.seeded_as_build(options),
                                                       deadline=reference_pass.range_deadline(options, say))
                outputs[batch], memory[batch] = outputs_and_memory(  # the accuracy pass, memory read around it
                    runners, load_rss, lambda r, f=feeds, b=batch: reference_outputs({"arm": r}, f, data, b)["arm"])
    finally:
        for runner in runners.values():
            runner.close()
        if pool is not None:  # after close, so that what the closed runners held is given back too
            trim(runners)  # the parent idles while the loads measure: keep no autotuning workspaces
    return Reference(shapes=all_shapes, devices=devices, autotune=autotune, outputs=outputs, fp16_range=fp16_range,
                     memory=memory)


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
    """The measure phase: per batch size, independent loads (worker processes from ``pool``, else fresh
    in-process runners) in interleaved rounds until the speedup's CI is decided, each batch size in its
    ``budget.window`` (``budget``: began; default: ``options.time_budget`` from now): done ``k+1``
    budgets after the start and one budget after it began, less its share of the reserve for what runs
    after measuring (``budget.reserve_s``).
    Ctrl-C/SIGTERM keeps the batch sizes already decided (issue 12); the pool is closed in every case."""
    names = list(records)
    budget = budget if budget is not None else options.time_budget.began(time.perf_counter())
    measured = Measured(budget=budget)
    try:
        StartupLog(hooks.on_startup, budget)("importing the statistics the analysis after measuring needs (scipy)")
        preload_analysis()  # while the workers start: inside the budget's clock, not after it
        measured.startup_s = budget.elapsed_s(time.perf_counter())
        measured.reserve_s = budget.reserve_s(len(batch_sizes))
        if pool is not None:  # the floor's workers, and those started with them (WorkerPool.start says why);
            pool.start(min(FLOOR_LOADS, options.plan.min_loads))  # workers never handed a load are killed at close
        for k, batch in enumerate(batch_sizes):
            try:
                shapes = reference.shapes[batch]
                fixed = (options.data.batch(batch, dtypes=input_dtypes(records[names[0]]))
                         if options.data is not None else None)

                open_load = worker_loads(records, options, pool, shapes, fixed)
                def progress(p: Progress, batch: int = batch) -> None:
                    if hooks.on_progress is not None:
                        hooks.on_progress(batch, p)

                loop_hooks = LoopHooks(progress, budget_line(hooks, batch, records[names[0]].spec.backend),
                                       pool.ready if pool is not None else None)
                outcome = run_interleaved(names, open_load, options.plan, hooks=loop_hooks,
                                          window=budget.window(k, time.perf_counter(), len(batch_sizes)))
                keep_outcome(measured, batch, outcome, records, options, reference, shapes)
                judge_accuracy(measured, batch, names, reference, options)
                if hooks.on_batch is not None:
                    hooks.on_batch(batch, outcome)
            except KeyboardInterrupt:  # Ctrl-C / SIGTERM: keep the batch sizes already decided (issue 12)
                measured.interrupted = True
                if pool is not None:
                    pool.kill()
                break
            except BudgetTooSmall as err:  # a given budget that cannot hold the minimum: its line names the batch
                if len(batch_sizes) > 1:
                    raise BudgetTooSmall(f"batch {batch}: {err}") from err
                raise
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
    return accuracy_of(outputs[baseline], cand_outputs, reference.fp16_range, measured.per_batch[batch][cand],
                       options.accuracy_budget, options.data, options.seed)


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
        arm.name: _result_for(records[arm.name], arm, batch, options.plan, outcome, shapes, options.seed,
                              reference.devices[arm.name], reference.autotune[arm.name],
                              memory=reference.memory[batch][arm.name])
        for arm in outcome.arms}
    measured.outcomes[batch] = outcome


def close_keeping_results(pool: Any, measured: Measured) -> None:
    """Close the workers; a Ctrl-C/SIGTERM while they exit (after the last batch size, when every
    verdict is in) kills them instead and keeps what was measured, like one during the rounds."""
    try:
        pool.close()
    except KeyboardInterrupt:
        measured.interrupted = True
        pool.kill()
        pool.close()


def preload_analysis() -> None:
    """Import what the analysis after measuring needs (scipy.stats and scipy.signal: 0.75 s on the idle
    2-core machine, 2–3 s loaded) before measuring, while the workers start: the budget's clock then
    counts it and the loop plans around it, instead of it running after the budget is spent."""
    from scipy import signal, stats  # noqa: F401


@dataclass(frozen=True)
class Evidence:
    """What the analysis of every pair draws on besides the timings: each arm's results across batch
    sizes (the fit), the roofline counts, the device's peak rates, the graph facts and layer tables."""

    baseline: str
    series: dict[str, list[BenchResult]]
    costs: dict[tuple[int, str], Any]
    peak: Any
    graphs: dict[int, Any]
    tables: dict[int, Any]


def analyse(records: Mapping[str, EngineRecord], measured: Measured, options: CompareOptions, reference: Reference,
            model: OnnxModel | None, peak: Any, warnings: list[str]) -> tuple[list[Comparison], dict[int, Any]]:
    """The analyse phase: per measured batch size and candidate, the speedup with its verdict, the
    accuracy delta, the roofline and the diagnosis (with layer tables when ``options.layers``).
    Returns the comparisons and the layer tables; what cannot be analysed is added to ``warnings``."""
    names = list(records)
    baseline = names[0]
    batch_sizes = measured.batch_sizes
    series = {name: [measured.per_batch[b][name] for b in batch_sizes] for name in names}
    costs = _graph_costs(model, reference.shapes, {n: records[n].precision for n in names}, warnings)
    graphs = ({b: graph_facts(model, records[baseline], b, options.shapes) for b in batch_sizes}
              if reference.on_gpu else {})
    tables = profile_records(records, batch_sizes, onnx_path=model, shapes=options.shapes, seed=options.seed,
                             int_range=options.int_range, autotune=options.plan.autotune,
                             graphs=graphs, data=options.data) if options.layers else {}
    evidence = Evidence(baseline=baseline, series=series, costs=costs, peak=peak, graphs=graphs, tables=tables)
    comparisons = [analyse_pair(batch, cand, measured, reference, evidence, options, warnings)
                   for batch in batch_sizes for cand in names[1:]]
    return comparisons, tables


def analyse_pair(batch: int, cand: str, measured: Measured, reference: Reference, evidence: Evidence,
                 options: CompareOptions, warnings: list[str]) -> Comparison:
    """One candidate against the baseline at one batch size: speedup, accuracy, roofline, diagnosis."""
    baseline, peak = evidence.baseline, evidence.peak
    outcome = measured.outcomes[batch]
    base_result = measured.per_batch[batch][baseline]
    cand_result = measured.per_batch[batch][cand]
    speed = outcome.speedups[cand]
    acc = measured.accuracy.get(batch, {}).get(cand) or candidate_accuracy(batch, baseline, cand, measured, reference,
                                                                          options)
    roof = {}
    for side, name, result in (("baseline", baseline, base_result), ("candidate", cand, cand_result)):
        cost = evidence.costs.get((batch, name))
        if cost is not None:
            stage = "compute_ms" if "compute_ms" in result.stats else "latency_ms"
            roof[side] = {**achieved(cost, result.stats[stage].p50, peak, result.precision), "timed_stage": stage,
                          "flops_by_op": cost.flops_by_op, "counted_ops": list(cost.counted_ops)}
    rates = peak.rates if peak is not None else None
    findings = diagnose(base_result, cand_result, series=evidence.series, rates=rates, speedup=speed.estimate,
                        roofline=roof.get("candidate"), device_kind=reference.devices.get(cand),
                        layers=evidence.tables.get(batch), graph=evidence.graphs.get(batch))
    if acc.flagged:
        msg = (f"{cand} produced {acc.nonfinite} non-finite output values (inf/NaN) at batch {batch} where "
               f"{baseline} is finite: FP16 overflow (max 65504); keep the overflowing layers in FP32 "
               "(`trtprof fix-fp16 MODEL` finds which and measures the cost)")
        findings.insert(0, Finding("nonfinite", msg, {"nonfinite": acc.nonfinite, "elements": acc.elements}))
        warnings.append(msg)
    return Comparison(
        batch_size=batch, baseline=baseline, candidate=cand, speedup=speed, accuracy=acc, diagnosis=findings,
        baseline_result=base_result, candidate_result=cand_result, rounds=outcome.rounds,
        stop_reason=outcome.stop_reason, round_ratios=outcome.round_ratios(baseline, cand),
        half_widths=outcome.half_widths, roofline=roof, loads=outcome.loads,
        median_cis_ms={"baseline": outcome.arm(baseline).median_ci_ms(),
                       "candidate": outcome.arm(cand).median_ci_ms()},
        round_s=outcome.round_s,
    )


def reference_outputs(runners: Mapping[str, Any], feeds: Mapping[str, Any], data: Any, batch: int) -> dict[str, Any]:
    """Every arm's outputs for the accuracy delta: on ``feeds`` (one random batch), or on all of the
    user's samples in batches of ``batch`` (``data``)."""
    if data is not None:
        return {name: run_all(runner, data, batch) for name, runner in runners.items()}
    return {name: accuracy.run_outputs(runner, feeds) for name, runner in runners.items()}


def input_dtypes(record: EngineRecord) -> dict[str, Any]:
    return {t.name: np.dtype(t.dtype) for t in record.inputs}


def accuracy_of(reference: Mapping[str, Any], candidate: Mapping[str, Any], fp16_range: Any, cand_result: Any,
                budget: Any, data: Any, seed: int) -> Any:
    """The accuracy delta of one candidate: metrics on what the outputs were computed on, the FP16
    range prediction and caveat (fp16), and the verdict against ``budget``."""
    inputs = data.describe() if data is not None else f"random inputs (seed {seed})"
    acc = fp16range.annotate(compare_outputs(reference, candidate, inputs=inputs), fp16_range, cand_result)
    return replace(acc, verdict=judge(acc, budget if budget is not None else AccuracyBudget.parse(None)))


# Bytes per tensor element the roofline assumes for a precision (int8/fp8: the quantized tensors).
ELEMENT_BYTES = {"fp16": 2, "bf16": 2, "int8": 1, "fp8": 1}


def _graph_costs(model: OnnxModel | None, all_shapes: Mapping[int, Mapping[str, tuple[int, ...]]],
                 precisions: Mapping[str, str], warnings: list[str]) -> dict[tuple[int, str], Any]:
    """Roofline counts per (batch, precision); a model that cannot be counted costs a warning, not the run."""
    if model is None:
        return {}
    try:
        out = {}
        for batch, shapes in all_shapes.items():
            for name, precision in precisions.items():
                out[(batch, name)] = graph_cost(model.proto, shapes, float_bytes=ELEMENT_BYTES.get(precision, 4))
        return out
    except (TrtprofError, ValueError, KeyError) as err:
        warnings.append(f"roofline skipped: {err}")
        return {}


def resolve_records(
    model: Any,
    precisions: Sequence[Any],
    batch_sizes: Sequence[int],
    *,
    engines_dir: Any = "engines",
    backend: str = "auto",
    shapes: Mapping[str, tuple[int, ...]] | None = None,
    on_built: Callable[[Any], None] | None = None,
    data: Any = None,
    on_source: Callable[[OnnxModel], None] | None = None,
) -> tuple[dict[str, EngineRecord], OnnxModel | None, tuple[int, ...]]:
    """MODEL or engines dir → (precision → record, the source ONNX model read once or None, batch sizes).

    An engines dir (a folder with engine JSONs, not a TF SavedModel) → its engines of the asked
    precisions; batch sizes default to those every chosen engine was built for; the ONNX source is
    optional (None when it is gone or cannot be converted). Otherwise the model's missing engines are
    built at ``batch_sizes`` (default 1), with the user's inputs (``data``) for what builds use them:
    the FP16 range analysis and the int8/fp8 calibration. ``on_source`` gets the ONNX model once it is
    read, before anything is built (build_engines) or loaded."""
    path = Path(model)
    if path.is_dir() and any(path.glob("*.json")) and not (path / "saved_model.pb").exists():
        records = select_records(list_engines(path), precisions, backend)
        built = set.intersection(*(set(r.spec.batch_sizes) for r in records.values()))
        sizes = tuple(batch_sizes) or tuple(sorted(built))
        loaded = None
        source = Path(next(iter(records.values())).model_path)
        if source.exists():
            try:
                loaded = OnnxModel.load(as_onnx(source, path))
            except Exception:  # graph facts and roofline are optional here: a TF source without TF installed
                loaded = None
        if loaded is not None and on_source is not None:
            on_source(loaded)
    else:
        sizes = tuple(batch_sizes) or (1,)
        unique = list(dict.fromkeys(precisions))
        outcomes = build_engines(path, unique, sizes,
                                 settings=BuildSettings(shapes=shapes, engines_dir=Path(engines_dir), backend=backend,
                                                        data=data),
                                 on_done=on_built, on_source=on_source)
        records = {o.record.precision: o.record for o in outcomes}
        loaded = outcomes[0].source  # read once by the build (its hash is the engines' key)
    return records, loaded, sizes


def compare_model(
    model: Any,
    precisions: Sequence[Any],
    batch_sizes: Sequence[int],
    options: CompareOptions = CompareOptions(),
    *,
    engines_dir: Any = "engines",
    backend: str = "auto",
    hooks: CompareHooks = CompareHooks(),
) -> CompareReport:
    """MODEL (ONNX or TensorFlow) → build what is missing (in ``engines_dir``, with ``backend``) →
    ``compare_records``. A precision named twice (``fp32,fp32``) is an A/A run: one engine, two
    independently loaded arms. An engines dir (or one engine's JSON) → its engines of the asked
    precisions, batch sizes checked."""
    builds = BuildTally(hooks.on_built)
    fitted: list[Any] = []  # the plan with its load ceiling fitted to the memory, once the model is read

    def fit_memory(source: OnnxModel) -> None:  # issue 36: before anything is built or loaded
        if options.isolation == ISOLATION_PROCESS:  # every load a process: memory × loads
            plan, line = model_memory.fit_plan_loads(options.plan, source.proto, source.path.parent,
                                                     source.path.name, preflight.available_memory_bytes())
            fitted.append(plan)
            if line is not None and hooks.on_note is not None:
                hooks.on_note(line)

    records, source, sizes = resolve_records(model, precisions, batch_sizes, engines_dir=engines_dir,
                                                backend=backend, shapes=options.shapes, on_built=builds,
                                                data=options.data, on_source=fit_memory)
    options = options.leaving_out(builds.seconds)
    if fitted:
        options = replace(options, plan=fitted[-1])
    labels = arm_labels(precisions)
    if len(labels) < 2:
        raise BadInput("compare needs a baseline and a candidate (e.g. --precisions fp32,fp16; fp32,fp32 for A/A)")
    arms = {label: records[str(p)] for label, p in zip(labels, precisions)}
    return compare_records(arms, sizes, options, source=source, hooks=hooks)
