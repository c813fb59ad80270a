"""Each diagnosis rule on crafted results: fires on its evidence, stays silent without it."""
from __future__ import annotations

import numpy as np
import pytest

from trtprof.diagnose import rules as dg
from trtprof.measure.results import BenchResult
from trtprof.model.roofline import PEAKS


def crafted(precision="fp16", batch=1, *, backend="torch", metadata=None, device=None, warnings=(), cv=0.0,
            clock="cuda_events", config=None, **stage_medians_ms) -> BenchResult:
    """Fake result: each stage is 101 samples around the given median (spread ``cv``)."""
    stage_medians_ms.setdefault("latency_ms", sum(stage_medians_ms.values()) or 1.0)
    spread = np.linspace(-1.0, 1.0, 101) * cv * np.sqrt(3)  # uniform with std ≈ cv (relative)
    stages = {k: v * (1.0 + spread) for k, v in stage_medians_ms.items()}
    meta = dict(metadata or {})
    return BenchResult.from_samples(
        stages=stages, span_s=1.0, batch_size=batch, model="m", precision=precision, backend=backend,
        engine={"effective_precision": meta.get("effective_precision", precision), "backend_metadata": meta},
        config={"clock": clock, **(config or {})}, warnings=list(warnings), device=dict(device or {}),
    )


def test_gpu_underutilised_fit_reports_the_intercept_share_of_compute():
    series = [crafted(batch=b, compute_ms=2.0 + 0.01 * b, enqueue_ms=0.1) for b in (1, 8, 64)]
    f = dg.gpu_underutilised(series, 1)
    assert f is not None and f.rule == "gpu_underutilised" and f.evidence["stage"] == "compute_ms"
    assert f.evidence["intercept_ms"] == pytest.approx(2.0)
    assert f.evidence["slope_ms_per_sample"] == pytest.approx(0.01)
    assert f.evidence["intercept_share"] == pytest.approx(2.0 / 2.01)
    assert "overhead" not in f.message and "under-used" in f.message
    # at batch 256 the same fit is mostly per-sample work: not under-used
    series.append(crafted(batch=256, compute_ms=2.0 + 0.01 * 256, enqueue_ms=0.1))
    assert dg.gpu_underutilised(series, 256) is None
    assert dg.gpu_underutilised(series[:1], 1) is None  # one batch size: no fit, no claim


def test_fixed_time_with_host_enqueue_as_long_is_left_to_enqueue_bound():
    series = [crafted(batch=b, compute_ms=2.0 + 0.01 * b, enqueue_ms=1.95) for b in (1, 8, 64)]
    assert dg.gpu_underutilised(series, 1) is None
    assert dg.enqueue_bound(series[0]) is not None


def test_host_bound_points_stay_out_of_the_fit():
    # eager at small batch: compute ≈ host time; at batch 64 enqueue is 72 % of compute (host-heavy)
    series = [crafted(batch=1, compute_ms=5.0, enqueue_ms=5.0), crafted(batch=8, compute_ms=3.6, enqueue_ms=3.6),
              crafted(batch=64, compute_ms=6.6, enqueue_ms=4.8), crafted(batch=256, compute_ms=26.0, enqueue_ms=4.0)]
    assert dg.gpu_underutilised(series, 64) is None
    assert dg.gpu_underutilised(series, 256) is None  # one GPU-bound point left: no fit


def test_compute_bound_series_is_not_underutilised():
    series = [crafted(batch=b, compute_ms=0.05 + 1.0 * b) for b in (1, 4, 16)]
    assert dg.gpu_underutilised(series, 1) is None


def test_heuristic_kernels_only_when_autotune_was_off():
    f = dg.heuristic_kernels(crafted(compute_ms=1.0, config={"autotune": False}))
    assert f is not None and f.evidence["autotune"] is False
    assert dg.heuristic_kernels(crafted(compute_ms=1.0, config={"autotune": True})) is None
    assert dg.heuristic_kernels(crafted(compute_ms=1.0)) is None  # not recorded: no claim


def test_transfer_bound():
    f = dg.transfer_bound(crafted(h2d_ms=0.6, d2h_ms=0.5, compute_ms=1.0))
    assert f is not None and f.evidence["compute_ms"] == pytest.approx(1.0)
    assert dg.transfer_bound(crafted(h2d_ms=0.2, d2h_ms=0.1, compute_ms=1.0)) is None
    assert dg.transfer_bound(crafted(latency_ms=1.0)) is None  # CPU result: no copy stages


def test_enqueue_bound():
    assert dg.enqueue_bound(crafted(enqueue_ms=0.85, compute_ms=1.0)) is not None
    assert dg.enqueue_bound(crafted(enqueue_ms=0.5, compute_ms=1.0)) is None


def test_tf32_on_ampere_depends_on_what_the_backend_recorded():
    on = crafted("fp32", metadata={"tf32": True})
    off = crafted("fp32", metadata={"tf32": False})
    unknown = crafted("fp32")
    a100, volta = PEAKS["8.0"], PEAKS["7.0"]
    f = dg.tf32(on, a100)
    assert f is not None and f.evidence["baseline_tf32"] is True and "TF32" in f.message
    assert dg.tf32(off, a100).evidence["baseline_tf32"] is False  # says it is true FP32, suggests tf32
    assert dg.tf32(unknown, a100).evidence["baseline_tf32"] is None
    assert dg.tf32(on, volta) is None  # no TF32 before compute capability 8.0
    assert dg.tf32(on, None) is None


def test_hardware_line_cites_its_source_and_says_when_fp16_is_slower():
    pascal = dg.hardware(PEAKS["6.1"], 0.1)
    assert "1/64" in pascal.message and pascal.evidence["source"]
    hopper = dg.hardware(PEAKS["9.0"], 1.4, {"share_of_peak": 0.12})
    assert "measured 1.40×" in hopper.message and "12.0%" in hopper.message
    assert dg.hardware(None, 1.0) is None
    assert hopper.evidence["peak_ratio"] == 16  # no results given: fp16 against true fp32


def test_hardware_line_uses_the_candidates_own_peak():
    h100 = PEAKS["9.0"]
    fp16_vs_tf32 = dg.hardware(h100, 1.1, baseline=crafted("tf32"), candidate=crafted("fp16"))
    assert fp16_vs_tf32.evidence["peak_ratio"] == 2 and "FP16 peak is 2× TF32" in fp16_vs_tf32.message
    tf32_vs_fp32 = dg.hardware(h100, 5.0, baseline=crafted("fp32", metadata={"tf32": False}), candidate=crafted("tf32"))
    assert tf32_vs_fp32.evidence["peak_ratio"] == 8 and "TF32 peak is 8× FP32" in tf32_vs_fp32.message
    # an fp32 baseline that ran with TF32 on is held against the TF32 peak
    tf32_on = dg.hardware(h100, 1.1, baseline=crafted("fp32", metadata={"tf32": True}), candidate=crafted("fp16"))
    assert tf32_on.evidence["baseline_peak"] == "tf32"


def test_fp16_not_fp16_from_ort_census_and_trt_layers():
    ort = crafted(backend="onnxruntime", clock="perf_counter_ns", metadata={
        "effective_precision": "fp32+casts", "node_precision": {"fp16": {}, "fp32": {"Conv": 3, "Gemm": 1}},
        "fp16_nodes": 0, "fp32_fallback_nodes": 4})
    f = dg.fp16_not_fp16(ort, "cpu")
    assert f is not None and f.evidence["precision_counts"] == {"fp16": 0, "fp32": 4}
    assert "4 of 4" in f.message and "CPU provider" in f.message
    trt = crafted(backend="tensorrt", metadata={"effective_precision": "mixed",
                                                 "layers_by_precision": {"FP16": 40, "FP32": 3}, "reformat_layers": 2})
    f = dg.fp16_not_fp16(trt, "cuda")
    assert f.evidence["precision_counts"] == {"fp16": 40, "fp32": 3} and f.evidence["reformat_layers"] == 2
    clean = crafted(backend="tensorrt", metadata={"effective_precision": "fp16", "layers_by_precision": {"FP16": 40}})
    assert dg.fp16_not_fp16(clean, "cuda") is None
    assert dg.fp16_not_fp16(crafted("fp32", metadata={"effective_precision": "fp32"})) is None


def test_unstable_clocks_from_nvml_state_and_compute_cv():
    moved = {"first_round": {"before": {"sm_clock_mhz": 1980, "max_sm_clock_mhz": 1980, "throttle_reasons": ["gpu_idle"]}},
             "last_round": {"after": {"sm_clock_mhz": 1500, "max_sm_clock_mhz": 1980,
                                      "throttle_reasons": ["sw_thermal_slowdown"]}}}
    f = dg.unstable_clocks(crafted(device=moved, compute_ms=1.0))
    assert f is not None and "1500–1980" in f.message and "sw_thermal_slowdown" in f.message
    steady = {"first_round": {"before": {"sm_clock_mhz": 1980, "throttle_reasons": ["gpu_idle"]}},
              "last_round": {"after": {"sm_clock_mhz": 1965, "throttle_reasons": []}}}
    assert dg.unstable_clocks(crafted(device=steady, compute_ms=1.0, cv=0.005)) is None
    noisy = dg.unstable_clocks(crafted(device=steady, compute_ms=1.0, cv=0.2))
    assert noisy is not None and noisy.evidence["compute_cv"] > dg.UNSTABLE_CV
    # the timing loop's milder CV note (it mentions locking clocks) is not clock evidence by itself
    cv_note = "GPU compute time CV is 3.0% (> 2.5%): the numbers are noisy; lock clocks for steadier numbers"
    assert dg.unstable_clocks(crafted(device=steady, compute_ms=1.0, cv=0.03, warnings=[cv_note])) is None
    moved_note = "SM clock moved from 1980 to 1755 MHz during the measurement; lock clocks"
    found = dg.unstable_clocks(crafted(device=steady, compute_ms=1.0, cv=0.005, warnings=[moved_note]))
    assert found is not None and "1755" in found.message and found.message.count("CV") == 0


def test_diagnose_collects_only_rules_with_evidence():
    base = crafted("fp32", compute_ms=1.0, h2d_ms=0.1, d2h_ms=0.1, metadata={"tf32": False})
    cand = crafted("fp16", compute_ms=0.3, h2d_ms=0.2, d2h_ms=0.2)
    rules = [f.rule for f in dg.diagnose(base, cand, dg.PairEvidence(rates=PEAKS["9.0"], speedup=1.5))]
    assert rules == ["transfer_bound", "tf32", "hardware"]
    assert dg.diagnose(crafted("fp32"), crafted("fp16")) == []


def _int8(node_precision):
    return crafted("int8", backend="onnxruntime", clock="perf_counter_ns",
                   metadata={"effective_precision": "mixed", "node_precision": node_precision})


def test_int8_not_faster_names_the_fp32_nodes_between_qdq():
    """Issue 44 item 6: int8 2.3× slower printed "no rule found evidence"."""
    census = {"int8": {"QLinearConv": 20}, "fp32": {"Add": 16, "BatchNormalization": 2},
              "qdq": {"QuantizeLinear": 40, "DequantizeLinear": 40}}
    f = dg.int8_not_faster(_int8(census), 1 / 2.3)
    assert f is not None and f.rule == "int8_not_faster"
    assert "20 of 38 compute nodes run integer kernels" in f.message
    assert "18 run FP32 between DequantizeLinear and QuantizeLinear (Add×16, BatchNormalization×2)" in f.message
    assert "80 Q/DQ conversion nodes" in f.message and f.evidence["node_precision"]["fp32"]["Add"] == 16
    assert any(x.rule == "int8_not_faster" for x in dg.diagnose(crafted("fp32", backend="onnxruntime"),
                                                                  _int8(census), dg.PairEvidence(speedup=1 / 2.3)))


def test_int8_not_faster_threshold_and_silence():
    census = {"int8": {"QLinearConv": 3}, "fp32": {}, "qdq": {"QuantizeLinear": 1, "DequantizeLinear": 1}}
    assert dg.int8_not_faster(_int8(census), 0.999) is not None  # just inside: slower than fp32
    assert dg.int8_not_faster(_int8(census), 1.0) is None  # just outside: as fast
    assert "every compute node integer" in dg.int8_not_faster(_int8(census), 0.5).message
    assert dg.int8_not_faster(_int8(census), None) is None  # no speedup: no claim
    assert dg.int8_not_faster(crafted("fp16", metadata={"node_precision": census}), 0.5) is None
    assert dg.int8_not_faster(_int8(None), 0.5) is None  # no census: no evidence
