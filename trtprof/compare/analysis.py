"""The analyse phase of a comparison: per measured batch size and candidate, the speedup with its
verdict, the accuracy delta, the roofline and the diagnosis (with layer tables under ``--layers``),
and the ``--timeline`` recording after the timing."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping, Sequence

from .comparison import Comparison
from .measuring import Measured, Reference, candidate_accuracy
from .options import CompareOptions
from ..diagnose.findings import Finding
from ..diagnose.rules import PairEvidence, diagnose
from ..engines.cache import EngineRecord
from ..errors import TrtprofError
from ..layers.profile import ProfileRun, graph_facts, profile_records
from ..measure.results import BenchResult
from ..model.onnx_model import OnnxModel
from ..model.roofline import achieved, graph_cost


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
    run = ProfileRun(shapes=options.shapes, seed=options.seed, int_range=options.int_range,
                     autotune=options.plan.autotune, data=options.data)
    tables = profile_records(records, batch_sizes, run, model=model, graphs=graphs) if options.layers else {}
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
    findings = diagnose(base_result, cand_result, PairEvidence(
        series=evidence.series, rates=rates, speedup=speed.estimate, roofline=roof.get("candidate"),
        device_kind=reference.devices.get(cand), layers=evidence.tables.get(batch), graph=evidence.graphs.get(batch)))
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
