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

import time
from dataclasses import replace
from pathlib import Path
from typing import Any, Mapping, Sequence

from ..measure import bench  # noqa: F401 - re-exported: tests replace bench.load_runner through it
from ..model import roofline  # noqa: F401 - re-exported: tests replace roofline.query_device_peak through it
from ..system import model_memory, preflight
from ..builder.pipeline import BuildSettings
from ..engines.cache import EngineRecord
from ..util.files import now_iso
from ..util.signals import interrupts_noted
from ..system.environment import collect
from ..errors import BadInput
from ..measure import budget_memo
from ..measure.budget import StartupLog
from ..model.onnx_model import OnnxModel
from ..system.noise import cpu_state
from .analysis import analyse, compare_timeline
from .comparison import Comparison  # noqa: F401 - re-exported
from .measuring import load_reference, measure, measure_warnings, start_and_load  # noqa: F401 - load_reference re-exported
from .options import (  # noqa: F401 - re-exported
    ISOLATION_IN_PROCESS,
    ISOLATION_PROCESS,
    ISOLATION_SERIAL,
    default_isolation,
    BuildTally,
    CompareHooks,
    CompareOptions,
    budget_line,
)
from .records import arm_labels, resolve_records, select_records  # noqa: F401 - re-exported
from .report_value import CompareReport
from .stamp import stamp_all


# ---------------------------------------------------------------------------------------------
# The whole comparison: engines → loads × interleaved rounds → speedup, accuracy, diagnosis, roofline
# ---------------------------------------------------------------------------------------------


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
