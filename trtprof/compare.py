"""FP16 vs FP32 (or any precisions): engine records → interleaved loads and rounds → comparisons.

This module is the assembly: it loads the engines once for their outputs (the accuracy delta),
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
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

import numpy as np

# accuracy, bench, roofline and workers are used as modules (bench.load_runner, ...): tests replace those
# attributes with fakes, which a name bound here at import time would not see.
from . import accuracy, bench, fp16range, preflight, roofline, workers
from .accuracy import AccuracyBudget, compare_outputs, judge
from .backends.base import set_autotune
from .bench import effective_precision
from .build import as_onnx, build_engines
from .cache import atomic_write_text, list_engines, now_iso
from .diagnose import diagnose
from .environment import collect
from .errors import BadInput, TrtprofError
from .findings import Finding
from .inputs import DEFAULT_INT_RANGE, make_inputs, resolve_shapes
from .interleave import (
    ROUND_WARMUP, STOP_CONFIDENCE, Arm, InProcessLoad, InterleavedOutcome, Progress, RoundPlan, run_interleaved,
)
from .layers.profile import graph_facts, profile_records
from .memory import artifact_bytes, outputs_and_memory, rss_bytes
from .model import load_onnx
from .results import BenchResult
from .roofline import achieved, graph_cost
from .schemas import COMPARE as SCHEMA
from .speedup import (
    CONFIDENCE, ENGINE_METHOD, INCONCLUSIVE, METHOD, Shape, Speedup, distribution_shape, inconclusive_hint,
    mean_median_note,
)
from .stats import median_ci_exact
from .user_inputs import run_all
from .workers import trim

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
    accuracy: Any  # accuracy.AccuracyDelta | None
    diagnosis: list[Any]  # diagnose.Finding
    baseline_result: Any  # results.BenchResult
    candidate_result: Any
    rounds: int
    stop_reason: str
    round_ratios: list[float]
    half_widths: dict[str, float]
    roofline: dict[str, Any] = field(default_factory=dict)
    loads: int = 1
    median_cis_ms: dict[str, tuple[float, float]] = field(default_factory=dict)  # side → hierarchical CI
    round_s: float = 0.0  # seconds per round, for the "about N more rounds" estimate

    @property
    def verdict(self) -> str:
        return self.speedup.verdict

    @property
    def verdict_note(self) -> str:
        """What an inconclusive verdict would need, and what the distributions look like."""
        notes = []
        if self.verdict == INCONCLUSIVE:
            notes.append(inconclusive_hint(self.speedup, self.round_s))
        if self.baseline == self.candidate.split("#")[0]:
            notes.append(f"A/A (same engine loaded independently): the noise floor here is "
                         f"[{self.speedup.ci_low:.3f}, {self.speedup.ci_high:.3f}]; no difference inside it is claimed")
        mm = mean_median_note(self.speedup)
        if mm:
            notes.append(mm)
        for side, result in (("baseline", self.baseline_result), ("candidate", self.candidate_result)):
            text = self.shapes.get(side, Shape(1, (), 0.0)).describe()
            if text:
                notes.append(f"{result.precision if side == 'baseline' else self.candidate}: {text}")
        return "; ".join(notes)

    @property
    def shapes(self) -> dict[str, Shape]:
        cached = self.__dict__.get("_shapes")
        if cached is None:
            cached = {side: distribution_shape(r.samples_ms["latency_ms"])
                      for side, r in (("baseline", self.baseline_result), ("candidate", self.candidate_result))}
            self.__dict__["_shapes"] = cached
        return cached

    def to_json(self) -> dict[str, Any]:
        def side(name: str, r: Any) -> dict[str, Any]:
            lat = r.stats["latency_ms"]
            low, high = self.median_cis_ms.get(name) or median_ci_exact(r.samples_ms["latency_ms"])
            return {"precision": r.precision, "effective_precision": r.engine.get("effective_precision", r.precision),
                    "median_ms": lat.p50, "ci_low_ms": low, "ci_high_ms": high, "n": lat.n, "cv": lat.cv,
                    "stage_medians_ms": {k: s.p50 for k, s in r.stats.items()},
                    "engine": r.engine.get("artifact", "")}

        acc = self.accuracy.to_json() if self.accuracy is not None else None
        return {
            "batch_size": self.batch_size,
            "baseline": self.baseline,
            "candidate": self.candidate,
            "speedup": self.speedup.to_json(),
            "verdict": self.verdict,
            "accuracy": acc,
            "diagnosis": [f.to_json() for f in self.diagnosis],
            "verdict_note": self.verdict_note,
            "shape": {k: v.to_json() for k, v in self.shapes.items()},
            "latency": {"baseline": side("baseline", self.baseline_result),
                        "candidate": side("candidate", self.candidate_result)},
            "loads": self.loads,
            "rounds": self.rounds,
            "stop_reason": self.stop_reason,
            "round_ratios": self.round_ratios,
            "median_ci_half_width": self.half_widths,
            "roofline": self.roofline,
        }


@dataclass
class CompareReport:
    model: str
    backend: str
    plan: RoundPlan
    comparisons: list[Comparison]
    results: list[Any]  # results.BenchResult, one per precision × batch size (raw samples inside)
    environment: dict[str, Any]
    created: str = ""
    device_peak: dict[str, Any] | None = None
    warnings: list[str] = field(default_factory=list)
    isolation: str = ISOLATION_PROCESS
    layers: dict[int, Any] = field(default_factory=dict)  # batch → layers.LayerTable (compare --layers)
    interrupted: bool = False  # Ctrl-C/SIGTERM: the comparisons are the batch sizes finished before it
    pending: list[int] = field(default_factory=list)  # batch sizes not measured because of the interrupt
    serving: dict[str, Any] | None = None  # --concurrency sweep and --slo-ms verdicts (trtprof.serving_sweep)

    def to_json(self) -> dict[str, Any]:
        extra = {"layers": {str(b): t.to_json() for b, t in self.layers.items()}} if self.layers else {}
        if self.serving is not None:
            extra["serving"] = self.serving
        return {
            "schema": SCHEMA,
            "created": self.created,
            "model": self.model,
            "backend": self.backend,
            "settings": {**self.plan.to_json(), "min_rounds": self.plan.min_rounds, "confidence": CONFIDENCE,
                         "stop_confidence": STOP_CONFIDENCE, "isolation": self.isolation,
                         "method": {"speedup": METHOD, "median_ci": ENGINE_METHOD}},
            "comparisons": [c.to_json() for c in self.comparisons],
            "warnings": self.warnings,
            "device_peak": self.device_peak,
            "environment": self.environment,
            "results": [r.to_json() for r in self.results],
            "interrupted": self.interrupted,
            "pending_batch_sizes": self.pending,
            **extra,
        }

    def write_json(self, path) -> None:
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_text(path, json.dumps(self.to_json(), indent=1, allow_nan=True) + "\n")


def select_records(records: Sequence[Any], precisions: Sequence[Any], backend: str = "auto") -> dict[str, Any]:
    """One engine per precision from an engines dir, in the order of ``precisions`` (first = baseline)."""
    wanted = list(dict.fromkeys(str(p) for p in precisions))  # A/A names one precision twice
    chosen: dict[str, Any] = {}
    for precision in wanted:
        matches = [r for r in records if r.precision == precision and (backend == "auto" or r.backend == backend)]
        if not matches:
            have = sorted({f"{r.precision}/{r.backend}" for r in records})
            raise BadInput(f"no {precision} engine here (have: {', '.join(have) or 'none'}); build it or pass the model")
        keys = {(r.model, r.backend) for r in matches}
        if len(keys) > 1:
            raise BadInput(f"several {precision} engines here ({', '.join(sorted(f'{m}/{b}' for m, b in keys))}); "
                           "narrow with --backend or a folder holding one model")
        chosen[precision] = max(matches, key=lambda r: r.created)
    models = {r.model_path for r in chosen.values()}
    if len(models) > 1:
        raise BadInput(f"the engines come from different models ({', '.join(sorted(models))})")
    return chosen


def _result_for(record: Any, arm: Arm, batch_size: int, plan: RoundPlan, outcome: InterleavedOutcome,
                input_shapes: Mapping[str, tuple[int, ...]], seed: int, device_kind: str = "cpu",
                autotune: bool | None = None, memory: dict[str, Any] | None = None) -> Any:
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
                "copies": plan.copies if clock == "cuda_events" else None, "cuda_graph": plan.cuda_graph,
                "clock": clock, "autotune": autotune, "input_shapes": {k: list(v) for k, v in input_shapes.items()}, "seed": seed},
        warnings=warnings,
        device=arm.device,
        memory=memory or {},
    )


def compare_records(
    records: Mapping[str, Any],
    batch_sizes: Sequence[int],
    plan: RoundPlan = RoundPlan(),
    *,
    shapes: Mapping[str, tuple[int, ...]] | None = None,
    seed: int = 0,
    int_range: tuple[int, int] | None = None,
    onnx_path: Any = None,
    on_batch: Callable[[int, InterleavedOutcome], None] | None = None,
    on_progress: Callable[[int, Progress], None] | None = None,
    isolation: str = ISOLATION_PROCESS,
    device: str | None = None,
    layers: bool = False,
    accuracy_budget: Any = None,
    data: Any = None,
) -> CompareReport:
    """Measure the engines of ``records`` (arm label → record; the first is the baseline; one record
    may appear under two labels for an A/A run) at each batch size; every candidate gets a speedup,
    its verdict, an accuracy delta and its diagnosis.

    The engines are loaded here once for their outputs and input specs, then closed; the timing
    runs in ``plan.min_loads``+ independent loads: worker processes (``isolation="process"``, told
    ``device`` for CUDA_VISIBLE_DEVICES; spawned before that pass so that their start-up overlaps
    it) reused across batch sizes, or fresh in-process runners
    (``"in-process"``). ``on_progress`` hears every look of the stopping rule, ``on_batch`` each
    batch size as soon as its verdict is decided. ``layers``: also profile every engine layer by layer
    (a separate run after the timing, ``trtprof.layers``). ``accuracy_budget`` (accuracy.AccuracyBudget;
    default ``DEFAULT_BUDGET``) gives every candidate its accuracy verdict; ``data`` (user_inputs.InputData)
    replaces the random inputs: accuracy runs on all its samples, timing on its first batch."""
    names = list(records)
    baseline = names[0]
    comparisons: list[Comparison] = []
    results: list[Any] = []
    warnings: list[str] = []
    outcomes: dict[int, InterleavedOutcome] = {}
    per_batch: dict[int, dict[str, Any]] = {}
    ints = int_range or DEFAULT_INT_RANGE
    first = records[baseline]
    pool = None
    if isolation == ISOLATION_PROCESS:
        pool = workers.WorkerPool(records, device=device, autotune=plan.autotune)
        # started now, waited for after the accuracy pass: their imports and engine loads (seconds to
        # tens of seconds for a torch model on a GPU host) overlap the parent's own
        pool.spawn(plan.min_loads)
    runners: dict[str, Any] = {}
    load_rss: dict[str, tuple[int | None, int | None]] = {}
    memory: dict[int, dict[str, dict[str, Any]]] = {}  # batch → arm → memory in use (trtprof.memory)
    try:  # outputs (accuracy) and shapes from one in-process load, closed before the timing
        for name in names:
            rss_before = rss_bytes()
            runners[name] = bench.load_runner(records[name])
            load_rss[name] = (rss_before, rss_bytes())
        autotune = {name: set_autotune(runners[name], plan.autotune) for name in names}
        if data is not None:  # the user's inputs: refused (exit 2) before any measurement
            data.check(runners[baseline].inputs, model_path=first.model_path)
        overrides = {**first.spec.shape_overrides(), **(shapes or {}), **(data.shape_overrides() if data else {})}
        all_shapes = {b: resolve_shapes(runners[baseline].inputs, b, overrides, model_path=first.model_path)
                      for b in batch_sizes}  # every shape checked before the first measurement
        needed = {b: preflight.check_batch_memory(runners[baseline], b, all_shapes[b])  # as bench does
                  for b in batch_sizes}
        devices = {name: runners[name].device for name in names}
        outputs = {}
        fp16_range = None
        for batch in batch_sizes:
            with preflight.allocation_guard(batch, needed[batch]):
                feeds = make_inputs(runners[baseline].inputs, all_shapes[batch], seed=seed, int_range=ints, data=data)
                if batch == min(batch_sizes):  # FP16 range risks predicted from the FP32 model, one batch (issue 10)
                    fp16_range = fp16range.for_compare(onnx_path, records, feeds, data=data)
                outputs[batch], memory[batch] = outputs_and_memory(  # the accuracy pass, memory read around it
                    runners, load_rss, lambda r, f=feeds, b=batch: reference_outputs({"arm": r}, f, data, b)["arm"])
    except BaseException:
        if pool is not None:
            pool.kill()
            pool.close()
        raise
    finally:
        for runner in runners.values():
            runner.close()
        if pool is not None:  # after close, so that what the closed runners held is given back too
            trim(runners)  # the parent idles while the loads measure: keep no autotuning workspaces
    on_gpu = any(d == "cuda" for d in devices.values())
    peak = None
    if on_gpu:
        peak = roofline.query_device_peak()

    interrupted = False
    try:
        if pool is not None:
            pool.start(plan.min_loads)  # wait until the workers spawned above have loaded their engines
        for batch in batch_sizes:
            try:
                feeds_args = (all_shapes[batch], seed, ints)
                fixed = data.batch(batch, dtypes=input_dtypes(records[baseline])) if data is not None else None

                def open_load(index: int, feeds_args=feeds_args, fixed=fixed) -> Any:
                    if pool is not None:
                        shapes_b, seed_b, ints_b = feeds_args
                        return pool.load(index, shapes_b, seed_b, ints_b, fixed=fixed)
                    fresh = {name: bench.load_runner(records[name]) for name in names}
                    for r in fresh.values():
                        set_autotune(r, plan.autotune)
                    batch_feeds = fixed if fixed is not None else \
                        make_inputs(fresh[baseline].inputs, feeds_args[0], seed=seed, int_range=ints)

                    def close(fresh=fresh) -> None:
                        for r in fresh.values():
                            r.close()

                    return InProcessLoad({n: (fresh[n], batch_feeds) for n in names}, on_close=close)

                def progress(p: Progress, batch: int = batch) -> None:
                    if on_progress is not None:
                        on_progress(batch, p)

                outcome = run_interleaved(names, open_load, plan, on_progress=progress)
                per_batch[batch] = {arm.name: _result_for(records[arm.name], arm, batch, plan, outcome, all_shapes[batch],
                                                          seed, devices[arm.name], autotune[arm.name],
                                                          memory=memory[batch][arm.name])
                                    for arm in outcome.arms}
                outcomes[batch] = outcome
                results.extend(per_batch[batch].values())
                if on_batch is not None:
                    on_batch(batch, outcome)
            except KeyboardInterrupt:  # Ctrl-C / SIGTERM: keep the batch sizes already decided (issue 12)
                interrupted = True
                if pool is not None:
                    pool.kill()
                break
    finally:
        if pool is not None:
            pool.close()
    done = [b for b in batch_sizes if b in outcomes]
    pending = [b for b in batch_sizes if b not in outcomes]
    if interrupted:
        warnings.append(f"interrupted: kept batch sizes {', '.join(map(str, done)) or 'none'}; "
                        f"not measured: {', '.join(map(str, pending))}")
        batch_sizes = done
        layers = False  # no profiling after an interrupt: the user asked to stop

    series = {name: [per_batch[b][name] for b in batch_sizes] for name in names}
    costs = _graph_costs(onnx_path, all_shapes, {n: records[n].precision for n in names}, warnings)
    graphs = {b: graph_facts(onnx_path, records[baseline], b, shapes) for b in batch_sizes} if on_gpu else {}
    tables = profile_records(records, batch_sizes, onnx_path=onnx_path, shapes=shapes, seed=seed, int_range=int_range,
                             autotune=plan.autotune, graphs=graphs, data=data) if layers else {}
    for batch in batch_sizes:
        outcome = outcomes[batch]
        base_result = per_batch[batch][baseline]
        for cand in names[1:]:
            cand_result = per_batch[batch][cand]
            speed = outcome.speedups[cand]
            acc = accuracy_of(outputs[batch][baseline], outputs[batch][cand], fp16_range, cand_result,
                              accuracy_budget, data, seed)
            roof = {}
            for side, name, result in (("baseline", baseline, base_result), ("candidate", cand, cand_result)):
                cost = costs.get((batch, name))
                if cost is not None:
                    stage = "compute_ms" if "compute_ms" in result.stats else "latency_ms"
                    roof[side] = {**achieved(cost, result.stats[stage].p50, peak, result.precision), "timed_stage": stage,
                                  "flops_by_op": cost.flops_by_op, "counted_ops": list(cost.counted_ops)}
            rates = peak.rates if peak is not None else None
            findings = diagnose(base_result, cand_result, series=series, rates=rates, speedup=speed.estimate,
                                   roofline=roof.get("candidate"), device_kind=devices.get(cand),
                                   layers=tables.get(batch), graph=graphs.get(batch))
            if acc.flagged:
                msg = (f"{cand} produced {acc.nonfinite} non-finite output values (inf/NaN) at batch {batch} where "
                       f"{baseline} is finite: FP16 overflow (max 65504); keep the overflowing layers in FP32 "
                       "(`trtprof fix-fp16 MODEL` finds which and measures the cost)")
                findings.insert(0, Finding("nonfinite", msg, {"nonfinite": acc.nonfinite, "elements": acc.elements}))
                warnings.append(msg)
            comparisons.append(Comparison(
                batch_size=batch, baseline=baseline, candidate=cand, speedup=speed, accuracy=acc, diagnosis=findings,
                baseline_result=base_result, candidate_result=cand_result, rounds=outcome.rounds,
                stop_reason=outcome.stop_reason, round_ratios=outcome.round_ratios(baseline, cand),
                half_widths=outcome.half_widths, roofline=roof, loads=outcome.loads,
                median_cis_ms={"baseline": outcome.arm(baseline).median_ci_ms(),
                               "candidate": outcome.arm(cand).median_ci_ms()},
                round_s=outcome.round_s,
            ))
    env = collect()
    env["backend"] = dict(first.environment)
    return CompareReport(model=first.model, backend=first.backend, plan=plan, comparisons=comparisons,
                         results=results, environment=env, created=now_iso(),
                         device_peak=peak.to_json() if peak is not None else None, warnings=warnings,
                         isolation=isolation, layers=tables, interrupted=interrupted, pending=pending)


def reference_outputs(runners: Mapping[str, Any], feeds: Mapping[str, Any], data: Any, batch: int) -> dict[str, Any]:
    """Every arm's outputs for the accuracy delta: on ``feeds`` (one random batch), or on all of the
    user's samples in batches of ``batch`` (``data``)."""
    if data is not None:
        return {name: run_all(runner, data, batch) for name, runner in runners.items()}
    return {name: accuracy.run_outputs(runner, feeds) for name, runner in runners.items()}


def input_dtypes(record: Any) -> dict[str, Any]:
    return {t.name: np.dtype(t.dtype) for t in record.inputs}


def accuracy_of(reference: Mapping[str, Any], candidate: Mapping[str, Any], fp16_range: Any, cand_result: Any,
                budget: Any, data: Any, seed: int) -> Any:
    """The accuracy delta of one candidate: metrics on what the outputs were computed on, the FP16
    range prediction and caveat (fp16), and the verdict against ``budget``."""
    inputs = data.describe() if data is not None else f"random inputs (seed {seed})"
    acc = fp16range.annotate(compare_outputs(reference, candidate, inputs=inputs), fp16_range, cand_result)
    return replace(acc, verdict=judge(acc, budget if budget is not None else AccuracyBudget.parse(None)))


def _graph_costs(onnx_path: Any, all_shapes: Mapping[int, Mapping[str, tuple[int, ...]]],
                 precisions: Mapping[str, str], warnings: list[str]) -> dict[tuple[int, str], Any]:
    """Roofline counts per (batch, precision); a model that cannot be counted costs a warning, not the run."""
    if onnx_path is None:
        return {}
    try:
        model = load_onnx(onnx_path)
        out = {}
        for batch, shapes in all_shapes.items():
            for name, precision in precisions.items():
                out[(batch, name)] = graph_cost(model, shapes, float_bytes=2 if precision == "fp16" else 4)
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
) -> tuple[dict[str, Any], Any, tuple[int, ...]]:
    """MODEL or engines dir → (precision → record, source ONNX path or None, batch sizes).

    An engines dir (a folder with engine JSONs, not a TF SavedModel) → its engines of the asked
    precisions; batch sizes default to those every chosen engine was built for; the ONNX source is
    optional (None when it is gone or cannot be converted). Otherwise the model's missing engines are
    built at ``batch_sizes`` (default 1)."""
    path = Path(model)
    if path.is_dir() and any(path.glob("*.json")) and not (path / "saved_model.pb").exists():
        records = select_records(list_engines(path), precisions, backend)
        built = set.intersection(*(set(r.spec.batch_sizes) for r in records.values()))
        sizes = tuple(batch_sizes) or tuple(sorted(built))
        onnx_path = None
        source = Path(next(iter(records.values())).model_path)
        if source.exists():
            try:
                onnx_path = as_onnx(source, path)
            except Exception:  # graph facts and roofline are optional here: a TF source without TF installed
                onnx_path = None
    else:
        sizes = tuple(batch_sizes) or (1,)
        unique = list(dict.fromkeys(precisions))
        outcomes = build_engines(path, unique, sizes, shapes=shapes, engines_dir=Path(engines_dir),
                                 backend=backend, on_done=on_built)
        records = {o.record.precision: o.record for o in outcomes}
        onnx_path = as_onnx(path, Path(engines_dir))
    return records, onnx_path, sizes


def compare_model(
    model: Any,
    precisions: Sequence[Any],
    batch_sizes: Sequence[int],
    plan: RoundPlan = RoundPlan(),
    *,
    engines_dir: Any = "engines",
    backend: str = "auto",
    shapes: Mapping[str, tuple[int, ...]] | None = None,
    seed: int = 0,
    int_range: tuple[int, int] | None = None,
    on_built: Callable[[Any], None] | None = None,
    on_batch: Callable[[int, InterleavedOutcome], None] | None = None,
    on_progress: Callable[[int, Progress], None] | None = None,
    isolation: str = ISOLATION_PROCESS,
    device: str | None = None,
    layers: bool = False,
    accuracy_budget: Any = None,
    data: Any = None,
) -> CompareReport:
    """MODEL (ONNX or TensorFlow) → build what is missing → ``compare_records``.
    A precision named twice (``fp32,fp32``) is an A/A run: one engine, two independently loaded arms.
    An engines dir (or one engine's JSON) → its engines of the asked precisions, batch sizes checked."""
    records, onnx_path, sizes = resolve_records(model, precisions, batch_sizes, engines_dir=engines_dir,
                                                backend=backend, shapes=shapes, on_built=on_built)
    labels = arm_labels(precisions)
    if len(labels) < 2:
        raise BadInput("compare needs a baseline and a candidate (e.g. --precisions fp32,fp16; fp32,fp32 for A/A)")
    arms = {label: records[str(p)] for label, p in zip(labels, precisions)}
    return compare_records(arms, sizes, plan, shapes=shapes, seed=seed, int_range=int_range,
                           onnx_path=onnx_path, on_batch=on_batch, on_progress=on_progress, isolation=isolation,
                           device=device, layers=layers, accuracy_budget=accuracy_budget, data=data)
