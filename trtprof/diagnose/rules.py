"""Why FP16 is not (much) faster: one rule per known cause, each finding carrying its evidence.

Rules read only what was measured or recorded (per-stage medians, the fit across batch sizes, the
engine's backend metadata, NVML state, the peak-rate table) and say nothing when their evidence is
absent: a missing stage is not a finding. Thresholds are named constants with their reasons.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable, Mapping, Sequence

import numpy as np

from .. import backends
from .findings import Finding
from .layer_rules import layer_findings, sdpa_nan_guard
from .ort_rules import ort_findings
from ..measure.results import BenchResult
from ..measure.timing import capture_failure
from ..model.roofline import PeakRates

# Compute time is "fixed" at a batch size when at least half of it is the intercept of a fit of GPU
# compute time vs batch — kernel time that does not grow with the work, which FP16 arithmetic cannot
# cut. Whether the GPU then waits for the host or runs under-filled kernels is told apart by enqueue
# time (enqueue_bound) and, with a layer profile, by the kernels' own time (layers.rules).
FIXED_SHARE = 0.5
# trtexec warns when host enqueue time approaches GPU compute time: the GPU then waits for the host.
ENQUEUE_BOUND_RATIO = 0.8
# Clocks "moved" when the SM clock differs by more than 5 % between rounds (boost/throttle steps are
# larger than that; reading noise is smaller).
CLOCK_DRIFT = 0.05
# GPU compute-time CV above 5 %: steady kernels on locked clocks vary well under 1 % (FACTS.md).
UNSTABLE_CV = 0.05
# Compute capability from which FP32 convolutions/GEMMs may silently use TF32 tensor cores.
TF32_MIN_CC = 8.0

TF32_KEYS = ("tf32", "allow_tf32", "tf32_enabled", "uses_tf32")


def _median(result: BenchResult, stage: str) -> float | None:
    s = result.stats.get(stage)
    return None if s is None else float(s.p50)


def _metadata(result: BenchResult) -> dict[str, Any]:
    return dict(result.engine.get("backend_metadata", {}) or {})


# The GPU is "busy" at a batch size only while host enqueue time stays under half the compute time:
# above that, eager launches leave gaps that look like fixed GPU time (measured on the H200: eager
# ResNet-50 at batch 64 enqueues 4.8 ms per 6.6 ms of compute).
HOST_SHARE = 0.5


def _host_heavy(result: BenchResult, share: float) -> bool:
    enqueue, compute = _median(result, "enqueue_ms"), _median(result, "compute_ms")
    return enqueue is not None and compute is not None and enqueue >= share * compute


def gpu_underutilised(series: Sequence[BenchResult], batch_size: int) -> Finding | None:
    """Fit median GPU compute time = intercept + slope · batch over the batch sizes of one precision.

    A large intercept share says the time does not scale with the work. It is *not* blamed on
    per-call overhead: when the host is the bottleneck (enqueue ≥ ENQUEUE_BOUND_RATIO × compute)
    ``enqueue_bound`` says so and this rule stays silent; otherwise the GPU is busy with kernels that
    are too small to fill it (few channels, small spatial/batch extent)."""
    if not series or any(r.config.get("clock") != "cuda_events" or "compute_ms" not in r.stats for r in series):
        return None  # GPU results only: the rule is about kernels filling a GPU
    stage = "compute_ms"
    # Host-bound points measure the host, not the kernels: they stay out of the fit, and at the
    # batch size asked the host must leave the GPU mostly to itself before the GPU is blamed.
    points = sorted({r.batch_size: float(r.stats[stage].p50) for r in series
                     if not _host_heavy(r, ENQUEUE_BOUND_RATIO)}.items())
    if len(points) < 2:
        return None
    from scipy import stats as sps  # lazy: scipy.stats takes up to ~1 s to import; only this rule needs it

    x = np.array([b for b, _ in points], dtype=np.float64)
    y = np.array([m for _, m in points], dtype=np.float64)
    fit = sps.linregress(x, y)
    at = dict(points).get(batch_size)
    if at is None or at <= 0 or fit.intercept <= 0:
        return None
    share = min(1.0, float(fit.intercept) / at)
    if share < FIXED_SHARE:
        return None
    result = next(r for r in series if r.batch_size == batch_size)
    enqueue = _median(result, "enqueue_ms")
    if _host_heavy(result, HOST_SHARE):
        return None  # the host holds the GPU back here: enqueue_bound / host_bound speak to it
    precision = series[0].precision
    per_sample = [m / b for b, m in points]
    return Finding(
        "gpu_underutilised",
        f"{precision} at batch {batch_size}: the GPU is busy but under-used — {share:.0%} of the {at:.3g} ms "
        f"{stage[:-3]} time does not grow with batch (fit over batch sizes {', '.join(str(int(b)) for b in x)}: "
        f"intercept {fit.intercept:.3g} ms, slope {fit.slope:.3g} ms/sample; per sample "
        f"{per_sample[0]:.3g} → {per_sample[-1]:.3g} ms)"
        + (f", while the host enqueues in {enqueue:.3g} ms" if enqueue is not None else "")
        + ": kernels too small to fill the GPU, which FP16 math does not fix (larger batches or wider layers do)",
        {"precision": precision, "stage": stage, "intercept_ms": float(fit.intercept),
         "slope_ms_per_sample": float(fit.slope), "intercept_share": share, "time_ms": at,
         "enqueue_ms": enqueue, "batch_sizes": [int(b) for b in x], "medians_ms": [float(v) for v in y],
         "threshold": FIXED_SHARE},
    )


def transfer_bound(result: BenchResult) -> Finding | None:
    h2d, d2h, compute = _median(result, "h2d_ms"), _median(result, "d2h_ms"), _median(result, "compute_ms")
    if compute is None or (h2d is None and d2h is None):
        return None
    copies = (h2d or 0.0) + (d2h or 0.0)
    if copies < compute:
        return None
    return Finding(
        "transfer_bound",
        f"{result.precision} at batch {result.batch_size}: host↔device copies take {copies:.3g} ms "
        f"(H2D {h2d or 0:.3g} + D2H {d2h or 0:.3g}) ≥ compute {compute:.3g} ms; FP16 math does not shrink "
        "FP32 inputs/outputs (keep data on the GPU, or measure with --no-copies)",
        {"precision": result.precision, "h2d_ms": h2d, "d2h_ms": d2h, "compute_ms": compute},
    )


def enqueue_bound(result: BenchResult) -> Finding | None:
    enqueue, compute = _median(result, "enqueue_ms"), _median(result, "compute_ms")
    if enqueue is None or compute is None or compute <= 0:
        return None
    if enqueue < ENQUEUE_BOUND_RATIO * compute:
        return None
    failed = capture_failed(result)
    advice = ("try CUDA graphs, a larger batch" if failed is None else
              f"its CUDA graph capture failed ({failed}), so it ran eager: a graph would remove the launch cost "
              "once every op of the module can be captured; meanwhile a larger batch amortises it")
    return Finding(
        "enqueue_bound",
        f"{result.precision} at batch {result.batch_size}: host enqueue {enqueue:.3g} ms ≥ "
        f"{ENQUEUE_BOUND_RATIO:g} × GPU compute {compute:.3g} ms: the GPU waits for the host ({advice})",
        {"precision": result.precision, "enqueue_ms": enqueue, "compute_ms": compute,
         "ratio": enqueue / compute, "threshold": ENQUEUE_BOUND_RATIO, "capture_failed": failed},
    )


def capture_failed(result: BenchResult) -> str | None:
    """Why this result's CUDA graph capture failed (``timing.capture_failure``), or None: telling an arm
    that ran eager because capture failed to "try CUDA graphs" sends the user to what was tried (ViT-B/16
    and BERT-base on the H200: onnx2torch's host-side shape ops copy to the CPU during capture)."""
    return capture_failure(getattr(result, "device", None))


def _tf32_state(result: BenchResult) -> bool | None:
    meta = _metadata(result)
    if str(result.engine.get("effective_precision", meta.get("effective_precision", ""))) == "tf32":
        return True
    for key in TF32_KEYS:
        if key in meta and meta[key] is not None:
            return bool(meta[key])
    return None


def tf32(baseline: BenchResult, rates: PeakRates | None) -> Finding | None:
    if rates is None or baseline.precision != "fp32" or float(rates.compute_capability) < TF32_MIN_CC:
        return None
    used = _tf32_state(baseline)
    ratio = rates.fp16_over_tf32
    evidence = {"compute_capability": rates.compute_capability, "baseline_tf32": used,
                "fp16_over_tf32_peak": ratio, "fp16_over_fp32_peak": rates.fp16_over_fp32}
    if used is False:
        return Finding(
            "tf32",
            f"the fp32 baseline is true FP32 (TF32 off) on sm_{rates.compute_capability.replace('.', '')}; "
            f"frameworks default to TF32 here (PyTorch convolutions), against which FP16's peak is only "
            f"{ratio:g}×: add tf32 to --precisions to measure that gain",
            evidence,
        )
    if used:
        return Finding(
            "tf32",
            f"the fp32 baseline ran with TF32 tensor cores (sm_{rates.compute_capability.replace('.', '')}): "
            f"FP16's peak is only {ratio:g}× TF32's, not {rates.fp16_over_fp32:g}× true FP32",
            evidence,
        )
    return Finding(
        "tf32",
        f"compute capability {rates.compute_capability} ≥ {TF32_MIN_CC}: the fp32 baseline may have used TF32 "
        "tensor cores (the backend did not record whether), which narrows FP16's advantage",
        evidence,
    )


def _peak_precision(result: BenchResult | None, default: str) -> str:
    """Which peak a result ran against: tf32 when it ran with TF32 on, else its precision."""
    if result is None:
        return default
    if result.precision == "fp32" and _tf32_state(result):
        return "tf32"
    return result.precision if result.precision in ("fp32", "tf32", "fp16") else default


def hardware(rates: PeakRates | None, speedup: float | None, roofline: Mapping[str, Any] | None = None,
             baseline: BenchResult | None = None, candidate: BenchResult | None = None) -> Finding | None:
    """The ceiling of the candidate's own peak over the baseline's (FP16 vs TF32 is not FP16 vs FP32)."""
    if rates is None:
        return None
    base_p = _peak_precision(baseline, "fp32")
    cand_p = _peak_precision(candidate, "fp16")
    base_rate, cand_rate = rates.per_clock(base_p), rates.per_clock(cand_p)
    sm = f"sm_{rates.compute_capability.replace('.', '')}"
    if not base_rate or not cand_rate:
        return None
    ratio = cand_rate / base_rate
    where = "tensor cores" if (cand_p == "fp16" and rates.fp16_tensor_cores) or cand_p == "tf32" else "CUDA cores"
    if ratio < 1:
        text = (f"this GPU ({sm}) runs {cand_p.upper()} at 1/{1 / ratio:g} of its {base_p.upper()} rate: "
                f"{cand_p.upper()} cannot be faster here")
    elif ratio == 1:
        text = f"hardware ceiling: {cand_p.upper()} and {base_p.upper()} have the same peak on {sm}: no gain to expect"
    else:
        text = (f"hardware ceiling: {cand_p.upper()} peak is {ratio:g}× {base_p.upper()} on {sm} ({where})"
                + (f"; measured {speedup:.2f}×" if speedup is not None else ""))
    evidence: dict[str, Any] = {"compute_capability": rates.compute_capability, "baseline_peak": base_p,
                                "candidate_peak": cand_p, "peak_ratio": ratio,
                                "fp16_over_fp32_peak": rates.fp16_over_fp32,
                                "fp32_flop_per_clk_sm": rates.fp32_flop_per_clk_sm,
                                "tf32_flop_per_clk_sm": rates.tf32_flop_per_clk_sm,
                                "fp16_flop_per_clk_sm": rates.fp16_flop_per_clk_sm, "source": rates.source}
    if roofline:
        share = roofline.get("share_of_peak")
        if share is not None:
            text += f"; the candidate reaches {share:.2g} of its peak FLOP/s" if share < 0.001 else \
                f"; the candidate reaches {share:.1%} of its peak FLOP/s"
        evidence["roofline"] = dict(roofline)
    return Finding("hardware", text, evidence)


def heuristic_kernels(result: BenchResult) -> Finding | None:
    """Autotuning was switched off (--no-autotune): cuDNN picked kernels by heuristics."""
    if result.config.get("autotune") is not False:
        return None
    return Finding(
        "heuristic_kernels",
        f"{result.precision} at batch {result.batch_size}: cuDNN chose kernels by heuristics (--no-autotune); "
        "autotuned kernels (the default, and what TensorRT always does) can be much faster and change the verdict",
        {"precision": result.precision, "autotune": False, "backend": result.backend},
    )


# Where backends record per-precision counts, most specific first: TensorRT's engine inspector (the
# layers that really run), ONNX Runtime's census of the graph it executes, the converted ONNX graph.
PRECISION_COUNT_KEYS = ("layers_by_precision", "node_precision", "onnx_nodes_by_precision")
_PRECISION_NAMES = {"fp16": "fp16", "half": "fp16", "float16": "fp16", "fp32": "fp32", "float": "fp32",
                    "float32": "fp32", "tf32": "fp32"}
# Benign NVML clock-event reasons (idle between rounds, an application clock setting).
BENIGN_THROTTLE = frozenset({"gpu_idle", "applications_clocks_setting"})


def _precision_counts(meta: Mapping[str, Any]) -> tuple[str, dict[str, int]]:
    """(key used, {"fp16": n, "fp32": m}) from the first of ``PRECISION_COUNT_KEYS`` present.

    Values may be counts (``{"FP16": 12}``) or per-op counts (``{"fp16": {"Conv": 3}}``).
    """
    for key in PRECISION_COUNT_KEYS:
        table = meta.get(key)
        if not isinstance(table, Mapping) or not table:
            continue
        out: dict[str, int] = {}
        for name, value in table.items():
            bucket = _PRECISION_NAMES.get(str(name).lower())
            if bucket is None:
                continue
            if isinstance(value, Mapping):
                n = sum(int(v) for v in value.values() if isinstance(v, (int, float)) and not isinstance(v, bool))
            elif isinstance(value, (int, float)) and not isinstance(value, bool):
                n = int(value)
            else:
                continue
            out[bucket] = out.get(bucket, 0) + n
        if out:
            return key, out
    return "", {}


def _reformats(meta: Mapping[str, Any]) -> int | None:
    for key in ("reformat_layers", "reformats", "num_reformats"):
        value = meta.get(key)
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return int(value)
        if isinstance(value, (list, tuple)):
            return len(value)
    return None


def fp16_not_fp16(candidate: BenchResult, device_kind: str | None = None) -> Finding | None:
    if candidate.precision != "fp16":
        return None
    meta = _metadata(candidate)
    effective = str(candidate.engine.get("effective_precision", meta.get("effective_precision", "fp16")))
    source, counts = _precision_counts(meta)
    reformats = _reformats(meta)
    reasons = []
    if effective != "fp16":
        reasons.append(f"the backend reports effective precision {effective!r}")
    if counts.get("fp32"):
        reasons.append(f"{counts['fp32']} of {counts.get('fp32', 0) + counts.get('fp16', 0)} compute nodes/layers "
                       f"still run in FP32 ({source})")
    if reformats:
        reasons.append(f"{reformats} reformat (FP32↔FP16 cast) layers")
    cause = backends.capabilities(candidate.backend).fp16_fallback_cause
    if cause and (device_kind == "cpu" or candidate.config.get("clock") == "perf_counter_ns"):
        reasons.append(cause)
    if not reasons:
        return None
    return Finding(
        "fp16_not_fp16",
        f"fp16 that is not FP16 ({candidate.backend}, batch {candidate.batch_size}): " + "; ".join(reasons),
        {"effective_precision": effective, "precision_counts": counts, "counts_from": source,
         "reformat_layers": reformats,
         "backend": candidate.backend, "notes": list(candidate.engine.get("notes", []))[:3]},
    )


def _op_list(counts: Mapping[str, Any]) -> str:
    return ", ".join(f"{op}×{n}" for op, n in sorted(counts.items(), key=lambda kv: (-int(kv[1]), kv[0])))


def int8_not_faster(candidate: BenchResult, speedup: float | None) -> Finding | None:
    """Why an int8 engine is not faster, from its census (``node_precision``: integer kernels, FP32 nodes left
    between DequantizeLinear and QuantizeLinear, the Q/DQ conversions): it fires when the speedup is below 1
    (an int8 2.3× slower than fp32 got "no rule found evidence", issue 44)."""
    if candidate.precision != "int8" or speedup is None or speedup >= 1.0:
        return None
    census = _metadata(candidate).get("node_precision")
    if not isinstance(census, Mapping):
        return None
    n8, n32, nqdq = (census.get(k) or {} for k in ("int8", "fp32", "qdq"))
    total = sum(n8.values()) + sum(n32.values())
    reasons = [f"{sum(n8.values())} of {total} compute nodes run integer kernels"
               + (f" ({_op_list(n8)})" if n8 else "")]
    if n32:
        reasons.append(f"{sum(n32.values())} run FP32 between DequantizeLinear and QuantizeLinear ({_op_list(n32)}): "
                       "each pays the conversions and keeps FP32 arithmetic")
    if nqdq:
        reasons.append(f"{sum(nqdq.values())} Q/DQ conversion nodes run besides them ({_op_list(nqdq)})")
    if not n32:
        reasons.append("with every compute node integer, what is left is the conversions and the integer kernels "
                       "themselves on this CPU (profile the layers: `trtprof profile --precisions fp32,int8`)")
    return Finding(
        "int8_not_faster",
        f"int8 not faster ({speedup:.3g}×, {candidate.backend}, batch {candidate.batch_size}): " + "; ".join(reasons),
        {"speedup": speedup, "node_precision": {k: dict(v) for k, v in (("int8", n8), ("fp32", n32), ("qdq", nqdq))},
         "effective_precision": candidate.engine.get("effective_precision"), "backend": candidate.backend},
    )


def _walk(obj: Any, path: str = "") -> Iterable[tuple[str, Any]]:
    if isinstance(obj, Mapping):
        for k, v in obj.items():
            yield from _walk(v, f"{path}.{k}" if path else str(k))
    elif isinstance(obj, (list, tuple)) and obj and all(isinstance(v, Mapping) for v in obj):
        for i, v in enumerate(obj):
            yield from _walk(v, f"{path}[{i}]")
    else:
        yield path, obj


def _is_sm_clock(path: str) -> bool:
    leaf = path.rsplit(".", 1)[-1].lower()
    return "sm" in leaf and "clock" in leaf and "max" not in leaf


def unstable_clocks(result: BenchResult) -> Finding | None:
    """NVML evidence (SM clock drift between rounds, throttle reasons) or a high compute CV."""
    clocks = [(p, float(v)) for p, v in _walk(result.device) if _is_sm_clock(p)
              and isinstance(v, (int, float)) and not isinstance(v, bool) and v > 0]
    throttles = []
    for p, v in _walk(result.device):
        if "throttle" not in p.lower() or not v:
            continue
        active = [r for r in v if r not in BENIGN_THROTTLE] if isinstance(v, (list, tuple)) else v
        if active:
            throttles.append((p, active))
    # the timing loop's own clock evidence (SM clock moved, clocks limited); its CV note is not
    # repeated here because the compute CV is reported below from the stats themselves
    notes = [w for w in result.warnings if w.startswith(("SM clock moved", "GPU clocks were limited")) or "throttl" in w.lower()]
    compute = result.stats.get("compute_ms")
    reasons = []
    evidence: dict[str, Any] = {"precision": result.precision}
    if clocks:
        values = [v for _, v in clocks]
        drift = (max(values) - min(values)) / max(values)
        evidence["sm_clock_mhz"] = dict(clocks)
        if drift > CLOCK_DRIFT:
            reasons.append(f"SM clock ranged {min(values):.0f}–{max(values):.0f} MHz during the run")
    if throttles:
        evidence["throttle"] = dict((p, v) for p, v in throttles)
        reasons.append("NVML reported throttling (" + ", ".join(f"{p}={v}" for p, v in throttles[:3]) + ")")
    if compute is not None and compute.cv > UNSTABLE_CV:
        evidence["compute_cv"] = compute.cv
        reasons.append(f"GPU compute time CV {compute.cv:.1%} > {UNSTABLE_CV:.0%}")
    if notes:
        evidence["warnings"] = notes
        reasons.extend(notes[:2])
    if not reasons:
        return None
    return Finding(
        "unstable_clocks",
        f"{result.precision} at batch {result.batch_size}: unstable clocks or noisy timing — " + "; ".join(reasons)
        + " (lock clocks: nvidia-smi -lgc <max SM MHz>; nvidia-smi -rgc undoes it)",
        evidence,
    )


@dataclass(frozen=True)
class PairEvidence:
    """What the rules draw on besides one baseline/candidate pair's results, as one record (each part
    optional: a rule without its evidence says nothing). ``series``: each precision's results across batch
    sizes (the overhead fit); ``rates``: the device's peak rates; ``speedup``: the measured estimate;
    ``roofline``: the candidate's achieved rates; ``device_kind``: "cuda"/"cpu"; ``layers`` (a
    ``layers.LayerTable`` of this batch size) and ``graph`` (``layers.graph.node_facts``): the layer rules."""

    series: Mapping[str, Sequence[BenchResult]] | None = None
    rates: PeakRates | None = None
    speedup: float | None = None
    roofline: Mapping[str, Any] | None = None
    device_kind: str | None = None
    layers: Any = None
    graph: Mapping[str, Mapping[str, Any]] | None = None


def diagnose(baseline: BenchResult, candidate: BenchResult, evidence: PairEvidence = PairEvidence()) -> list[Finding]:
    """Every rule that has evidence for one baseline/candidate pair at one batch size.

    ``evidence.layers`` and ``evidence.graph`` enable the layer rules: FP16-slower layers, cast/reformat
    share, tensor-core-ineligible layers, GPU idle gaps. The ONNX-Runtime-on-GPU rules (``ort_rules``: CPU EP
    nodes, NCHW, the refused graph, the cuDNN search mode) speak where the capabilities and the recorded
    provider options say they apply; ``sdpa_nan_guard`` where the graph facts count the export's SDPA NaN
    guards."""
    series, rates, speedup, roofline = evidence.series, evidence.rates, evidence.speedup, evidence.roofline
    device_kind, layers, graph = evidence.device_kind, evidence.layers, evidence.graph
    series = series or {}
    findings = [
        gpu_underutilised(series.get(candidate.precision, []), candidate.batch_size),
        transfer_bound(candidate),
        enqueue_bound(candidate),
        heuristic_kernels(candidate),
        tf32(baseline, rates),
        hardware(rates, speedup, roofline, baseline, candidate),
        fp16_not_fp16(candidate, device_kind),
        int8_not_faster(candidate, speedup),
        unstable_clocks(baseline),
        unstable_clocks(candidate),
        *ort_findings(baseline, candidate, table=layers, graph=graph, speedup=speedup),
        sdpa_nan_guard(graph, candidate.precision, candidate.backend),
    ]
    if layers is not None or graph:
        compute = {r.precision: _median(r, "compute_ms") for r in (baseline, candidate)}
        findings += layer_findings(layers, graph, candidate.precision, compute, gpu=device_kind == "cuda")
    return [f for f in findings if f is not None]
