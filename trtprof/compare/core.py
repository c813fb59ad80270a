"""FP16 vs FP32 (or any precisions): engine records → interleaved loads and rounds → comparisons.

This module is the assembly: ``compare_model`` finds or builds the engines (``records``) and hands them
to ``compare_records``, which runs the phases and writes one ``CompareReport``: load (``measuring.
load_reference``: every engine's outputs once, the accuracy delta, from load 0's worker, ``reference_pass``,
or loaded here in-process), measure (``measuring.measure`` through ``interleave.run_interleaved``: loads
× interleaved rounds × iterations, stopped on the speedup's own CI; loads are worker processes,
``workers``), analyse (``analysis``: the speedup and its verdict from ``speedup``, the accuracy delta,
the diagnosis and the roofline per candidate) and assemble.

Where things live: the settings and hooks in ``compare.options``; which engines in ``compare.records``;
the load and measure phases in ``compare.measuring``; the analysis in ``compare.analysis``; one pair's
result in ``compare.comparison``; the loop, its plan and stopping rule in ``interleave``; the statistics
(CI, the four verdicts, distribution shape, "what would decide it") in ``speedup``. The names of
``options``, ``records``, ``comparison`` and the phase functions callers and tests use are re-exported
here (``from trtprof.compare import core as cmp``: ``cmp.CompareOptions``, ``cmp.load_reference``, …);
``analyse`` is looked up here when ``compare_records`` runs (a test replaces it).
"""
from __future__ import annotations

import json
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Mapping, Sequence

from ..measure import bench  # noqa: F401 - re-exported: tests replace bench.load_runner through it
from ..model import roofline  # noqa: F401 - re-exported: tests replace roofline.query_device_peak through it
from ..system import model_memory, preflight
from ..builder.pipeline import BuildSettings
from ..engines.cache import EngineRecord
from ..util.files import atomic_write_text, now_iso
from ..util.signals import interrupts_noted
from ..system.environment import collect
from ..errors import BadInput
from ..measure import budget_memo
from ..measure.budget import StartupLog, TimeBudget
from ..measure.interleave import STOP_CONFIDENCE, RoundPlan
from ..model.onnx_model import OnnxModel
from ..measure.results import BenchResult
from ..schemas import COMPARE as SCHEMA
from ..stats.speedup import CONFIDENCE, ENGINE_METHOD, METHOD
from ..system.noise import cpu_state
from ..system.validity import merge as merge_validity
from .analysis import analyse, compare_timeline
from .comparison import Comparison
from .measuring import load_reference, measure, measure_warnings, start_and_load  # noqa: F401 - load_reference re-exported
from .options import (  # noqa: F401 - re-exported
    ISOLATION_IN_PROCESS,
    ISOLATION_PROCESS,
    BuildTally,
    CompareHooks,
    CompareOptions,
    budget_line,
)
from .records import arm_labels, resolve_records, select_records  # noqa: F401 - re-exported
from .stamp import stamp_all


# ---------------------------------------------------------------------------------------------
# The whole comparison: engines → loads × interleaved rounds → speedup, accuracy, diagnosis, roofline
# ---------------------------------------------------------------------------------------------


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


def compare_records(
    records: Mapping[str, EngineRecord],
    batch_sizes: Sequence[int],
    options: CompareOptions = CompareOptions(),
    *,
    model: OnnxModel | None = None,
    hooks: CompareHooks = CompareHooks(),
) -> CompareReport:
    """Measure the engines of ``records`` (arm label → record; the first is the baseline; one record
    may appear under two labels for an A/A run) at each batch size; every candidate gets a speedup,
    its verdict, an accuracy delta and its diagnosis. ``model``: the FP32 ONNX model they were built from,
    read once (``onnx_model.OnnxModel``; None: no range analysis, roofline or graph facts).

    Four phases, each a function: load (``load_reference``: every engine's outputs and input shapes, from
    load 0's worker, or with the engines loaded here once, then closed), measure (``measure``: ``plan.min_loads``+ independent loads
    in interleaved rounds), analyse (``analyse``: speedup, accuracy, roofline, diagnosis per candidate)
    and assemble (the ``CompareReport``). Worker processes (``isolation="process"``) are spawned before
    the load phase so that their start-up overlaps it, and reused across batch sizes. The first batch
    size's budget starts at ``options.budget_start`` (the CLI: its process's start), else here: imports, the
    accuracy pass and the workers' start-up, which overlap, are part of it; so is what runs after
    measuring, for which the measure phase keeps a reserve (issue 27: the budget is the budget)."""
    budget = options.time_budget.began(time.perf_counter())  # launch_s: the interpreter, imports, cache lookup
    if options.timeline is not None:  # a --timeline-batch not compared: refused before measuring
        options.timeline.pick(batch_sizes)
    host_before = cpu_state()  # the load average before measuring, not one our own run raised (system.validity)
    say = budget_memo.checked_before_loading(records, batch_sizes, options.isolation, budget,
                                             StartupLog(hooks.on_startup, budget))
    reference, pool, peak = start_and_load(records, batch_sizes, options, model, say)
    measured = measure(records, batch_sizes, options, reference, pool, hooks, budget=budget)
    warnings = measure_warnings(measured)
    if measured.lost or measured.interrupted:  # no profiling after an interrupt (the user asked to stop) or a death
        options = replace(options, layers=False, timeline=None)
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


def compare_model(
    path: Any,
    precisions: Sequence[Any],
    batch_sizes: Sequence[int],
    options: CompareOptions = CompareOptions(),
    *,
    engines_dir: Any = "engines",
    backend: str = "auto",
    hooks: CompareHooks = CompareHooks(),
) -> CompareReport:
    """The user's ``path`` (an ONNX or TensorFlow model) → build what is missing (in ``engines_dir``, with
    ``backend``) → ``compare_records`` with the ONNX model the build read once. A precision named twice
    (``fp32,fp32``) is an A/A run: one engine, two independently loaded arms. An engines dir (or one
    engine's JSON) → its engines of the asked precisions, batch sizes checked."""
    builds = BuildTally(hooks.on_built)
    fitted: list[Any] = []  # the plan with its load ceiling fitted to the memory, once the model is read

    def fit_memory(source: OnnxModel) -> None:  # issue 36: before anything is built or loaded
        if options.isolation == ISOLATION_PROCESS:  # every load a process: memory × loads
            plan, line = model_memory.fit_plan_loads(options.plan, source.proto, source.path.parent,
                                                     source.path.name, preflight.available_memory_bytes())
            fitted.append(plan)
            if line is not None and hooks.on_note is not None:
                hooks.on_note(line)

    settings = BuildSettings(shapes=options.shapes, engines_dir=Path(engines_dir), backend=backend, data=options.data)
    records, loaded, sizes = resolve_records(path, precisions, batch_sizes, settings, on_built=builds,
                                             on_source=fit_memory)
    options = options.leaving_out(builds.seconds)
    if fitted:
        options = replace(options, plan=fitted[-1])
    labels = arm_labels(precisions)
    if len(labels) < 2:
        raise BadInput("compare needs a baseline and a candidate (e.g. --precisions fp32,fp16; fp32,fp32 for A/A)")
    arms = {label: records[str(p)] for label, p in zip(labels, precisions)}
    return compare_records(arms, sizes, options, model=loaded, hooks=hooks)
