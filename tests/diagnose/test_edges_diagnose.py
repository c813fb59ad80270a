"""Each diagnosis threshold tested just inside and just outside it (values within 2 % of the
threshold, so moving the constant by 10 % or flipping ``<`` to ``<=`` fails a test)."""
from __future__ import annotations

import pytest

from trtprof.diagnose import rules as dg
from trtprof.model.roofline import peak_rates

from .test_diagnose import crafted


def _fixed_series(share_at_1: float, enqueue_at_1: float = 0.0):
    """Two batch sizes whose compute time is exactly ``intercept + slope · batch`` with the intercept
    ``share_at_1`` of batch 1's 2 ms (a two-point fit is exact)."""
    intercept = 2.0 * share_at_1
    slope = 2.0 - intercept
    return [crafted(batch=1, compute_ms=2.0, enqueue_ms=enqueue_at_1),
            crafted(batch=2, compute_ms=intercept + 2 * slope, enqueue_ms=0.0)]


def test_fixed_share_fires_just_above_the_threshold_and_not_just_below():
    assert dg.FIXED_SHARE == 0.5
    above = dg.gpu_underutilised(_fixed_series(0.51), 1)
    assert above is not None and above.evidence["intercept_share"] == pytest.approx(0.51)
    assert above.evidence["threshold"] == dg.FIXED_SHARE
    assert dg.gpu_underutilised(_fixed_series(0.49), 1) is None


def test_fixed_share_exactly_at_the_threshold_counts():
    f = dg.gpu_underutilised(_fixed_series(0.5), 1)
    assert f is not None and f.evidence["intercept_share"] == pytest.approx(0.5)


def test_the_host_gate_silences_the_rule_from_half_the_compute_time():
    # batch 1: 2 ms of compute; enqueue 0.98 ms (49 %) leaves the GPU to itself, 1.02 ms (51 %) does not
    assert dg.HOST_SHARE == 0.5
    assert dg.gpu_underutilised(_fixed_series(0.6, enqueue_at_1=0.98), 1) is not None
    assert dg.gpu_underutilised(_fixed_series(0.6, enqueue_at_1=1.02), 1) is None
    assert dg.gpu_underutilised(_fixed_series(0.6, enqueue_at_1=1.0), 1) is None  # ≥: exactly half is host-heavy


def test_a_host_bound_point_leaves_the_fit_from_the_enqueue_bound_ratio():
    """Batch 4 with enqueue at 81 % of compute is host-bound and left out (the fit over batches 1, 2
    shows a 50 % fixed share); at 79 % it stays in and its 100 ms make the intercept negative."""
    def series(ratio_at_4: float):
        return [crafted(batch=1, compute_ms=2.0, enqueue_ms=0.0), crafted(batch=2, compute_ms=3.0, enqueue_ms=0.0),
                crafted(batch=4, compute_ms=100.0, enqueue_ms=100.0 * ratio_at_4)]

    left_out = dg.gpu_underutilised(series(0.81), 1)
    assert left_out is not None and left_out.evidence["batch_sizes"] == [1, 2]
    assert dg.gpu_underutilised(series(0.79), 1) is None
    assert dg.gpu_underutilised(series(0.80), 1) is not None  # ≥: exactly the ratio is host-bound


def test_enqueue_bound_from_the_ratio_on():
    assert dg.ENQUEUE_BOUND_RATIO == 0.8
    # compute 2 ms, not 1: a ratio taken the wrong way round (× for ÷) must not pass unnoticed
    f = dg.enqueue_bound(crafted(enqueue_ms=1.62, compute_ms=2.0))
    assert f is not None and f.evidence["ratio"] == pytest.approx(0.81) and f.evidence["threshold"] == 0.8
    assert dg.enqueue_bound(crafted(enqueue_ms=1.60, compute_ms=2.0)) is not None
    assert dg.enqueue_bound(crafted(enqueue_ms=1.58, compute_ms=2.0)) is None
    assert dg.enqueue_bound(crafted(enqueue_ms=0.0, compute_ms=0.0)) is None  # no compute time: no ratio


def test_an_enqueue_bound_arm_whose_capture_failed_is_not_told_to_try_cuda_graphs():
    reason = "RuntimeError: Cannot copy between CPU and CUDA tensors during CUDA graph capture"
    failed = crafted(enqueue_ms=1.9, compute_ms=2.0,
                     device={"last_round": {"launch": {"mode": "eager", "capture_failed": reason}}})
    f = dg.enqueue_bound(failed)
    assert f is not None and f.evidence["capture_failed"] == reason
    assert "try CUDA graphs" not in f.message and "capture failed" in f.message and reason in f.message
    plain = dg.enqueue_bound(crafted(enqueue_ms=1.9, compute_ms=2.0))
    assert plain is not None and "try CUDA graphs" in plain.message and plain.evidence["capture_failed"] is None


def test_transfer_bound_from_copies_equal_to_compute_on():
    assert dg.transfer_bound(crafted(h2d_ms=0.5, d2h_ms=0.5, compute_ms=1.0)) is not None
    assert dg.transfer_bound(crafted(h2d_ms=0.5, d2h_ms=0.49, compute_ms=1.0)) is None
    assert dg.transfer_bound(crafted(h2d_ms=1.01, compute_ms=1.0)) is not None  # one copy stage recorded


def _clocks(*mhz: float) -> dict:
    return {"rounds": [{"sm_clock_mhz": v} for v in mhz]}


def test_clock_drift_just_above_five_percent_is_unstable_and_just_below_is_not():
    assert dg.CLOCK_DRIFT == 0.05
    moved = dg.unstable_clocks(crafted(compute_ms=1.0, device=_clocks(1000.0, 949.0)))  # 5.1 %
    assert moved is not None and "SM clock ranged 949–1000 MHz" in moved.message
    assert dg.unstable_clocks(crafted(compute_ms=1.0, device=_clocks(1000.0, 951.0))) is None  # 4.9 %
    assert dg.unstable_clocks(crafted(compute_ms=1.0, device=_clocks(1000.0, 950.0))) is None  # exactly 5 %


def test_a_max_clock_is_not_a_drift():
    # the board's maximum SM clock differs from the running clock by design
    steady = {"rounds": [{"sm_clock_mhz": 1000.0}, {"sm_clock_mhz": 1000.0}], "max_sm_clock_mhz": 1980.0}
    assert dg.unstable_clocks(crafted(compute_ms=1.0, device=steady)) is None


def test_compute_cv_just_above_five_percent_is_unstable_and_just_below_is_not():
    assert dg.UNSTABLE_CV == 0.05
    noisy, steady = crafted(compute_ms=1.0, cv=0.0505), crafted(compute_ms=1.0, cv=0.0485)
    assert 0.0505 < noisy.stats["compute_ms"].cv < 0.052 and 0.048 < steady.stats["compute_ms"].cv < 0.0495
    f = dg.unstable_clocks(noisy)
    assert f is not None and f.evidence["compute_cv"] == pytest.approx(noisy.stats["compute_ms"].cv)
    assert dg.unstable_clocks(steady) is None


def test_benign_throttle_reasons_are_not_instability():
    assert dg.unstable_clocks(crafted(compute_ms=1.0, device={"throttle_reasons": ["gpu_idle"]})) is None
    f = dg.unstable_clocks(crafted(compute_ms=1.0, device={"throttle_reasons": ["gpu_idle", "sw_thermal_slowdown"]}))
    assert f is not None and f.evidence["throttle"] == {"throttle_reasons": ["sw_thermal_slowdown"]}


def test_tf32_from_compute_capability_8_0_on():
    assert dg.TF32_MIN_CC == 8.0
    baseline = crafted("fp32", metadata={"tf32": True})
    assert dg.tf32(baseline, peak_rates("8.0")) is not None
    assert dg.tf32(baseline, peak_rates("7.5")) is None
    assert dg.tf32(crafted("fp16"), peak_rates("8.0")) is None  # only an fp32 baseline is in question


def test_fp16_not_fp16_counts_fp32_layers_and_reformats_from_one():
    clean = crafted("fp16", metadata={"layers_by_precision": {"FP16": 10, "FP32": 0}})
    assert dg.fp16_not_fp16(clean) is None
    one = dg.fp16_not_fp16(crafted("fp16", metadata={"layers_by_precision": {"FP16": 10, "FP32": 1}}))
    assert one is not None and "1 of 11 compute nodes/layers still run in FP32" in one.message
    assert dg.fp16_not_fp16(crafted("fp16", metadata={"reformat_layers": 0})) is None
    assert "1 reformat" in dg.fp16_not_fp16(crafted("fp16", metadata={"reformat_layers": 1})).message
    assert dg.fp16_not_fp16(crafted("fp32", metadata={"layers_by_precision": {"FP32": 3}})) is None


def test_hardware_ratio_below_at_and_above_one():
    """sm_61 runs FP16 at 1/64 of FP32 (below one), sm_75 FP16 on tensor cores above it."""
    slow = dg.hardware(peak_rates("6.1"), 0.9, baseline=crafted("fp32"), candidate=crafted("fp16"))
    assert slow is not None and "cannot be faster here" in slow.message and slow.evidence["peak_ratio"] < 1
    fast = dg.hardware(peak_rates("7.5"), 1.5, baseline=crafted("fp32"), candidate=crafted("fp16"))
    assert fast is not None and fast.evidence["peak_ratio"] > 1 and "measured 1.50×" in fast.message
    same = dg.hardware(peak_rates("7.5"), 1.0, baseline=crafted("fp32"), candidate=crafted("fp32"))
    assert same is not None and "same peak" in same.message and same.evidence["peak_ratio"] == 1


def test_the_fit_is_for_gpu_results_with_compute_times_only():
    cpu = [crafted(batch=b, latency_ms=2.0 + 0.01 * b, clock="perf_counter_ns") for b in (1, 8)]
    assert dg.gpu_underutilised(cpu, 1) is None
    no_compute = [crafted(batch=b, latency_ms=2.0 + 0.01 * b) for b in (1, 8)]
    assert dg.gpu_underutilised(no_compute, 1) is None
    assert dg.gpu_underutilised([], 1) is None


def test_the_fit_says_nothing_about_a_batch_size_it_did_not_measure():
    assert dg.gpu_underutilised(_fixed_series(0.9), 4) is None
    assert dg.gpu_underutilised(_fixed_series(0.9), 1) is not None


def test_transfer_bound_needs_a_compute_time_to_compare_with():
    assert dg.transfer_bound(crafted(h2d_ms=5.0, latency_ms=6.0)) is None
    assert dg.transfer_bound(crafted(compute_ms=1.0)) is None  # no copy stages measured


def test_tf32_says_what_the_baseline_ran():
    rates = peak_rates("8.0")
    by_effective = dg.tf32(crafted("fp32", metadata={"effective_precision": "tf32"}), rates)
    assert by_effective.evidence["baseline_tf32"] is True and "ran with TF32 tensor cores" in by_effective.message
    off = dg.tf32(crafted("fp32", metadata={"tf32": False}), rates)
    assert off.evidence["baseline_tf32"] is False and "true FP32 (TF32 off)" in off.message
    unknown = dg.tf32(crafted("fp32", metadata={"tf32": None}), rates)
    assert unknown.evidence["baseline_tf32"] is None and "may have used TF32" in unknown.message


def test_hardware_says_nothing_without_a_peak_for_the_precision():
    # sm_75 has no TF32: a baseline that ran TF32 has no peak to compare against
    tf32_baseline = crafted("fp32", metadata={"tf32": True})
    assert dg.hardware(peak_rates("7.5"), 1.0, baseline=tf32_baseline, candidate=crafted("fp16")) is None
    assert dg.hardware(None, 1.0) is None
    on_ampere = dg.hardware(peak_rates("8.0"), 1.0, baseline=tf32_baseline, candidate=crafted("fp16"))
    assert on_ampere.evidence["baseline_peak"] == "tf32" and on_ampere.evidence["peak_ratio"] == 2


def test_the_fit_holds_for_sub_millisecond_times():
    """0.2 ms of compute at batch 1 with 60 % of it fixed: the rule applies to fast engines too."""
    series = [crafted(batch=1, compute_ms=0.2), crafted(batch=2, compute_ms=0.28)]
    f = dg.gpu_underutilised(series, 1)
    assert f is not None and f.evidence["intercept_ms"] == pytest.approx(0.12)


def test_one_missing_copy_stage_counts_as_zero():
    assert dg.transfer_bound(crafted(d2h_ms=0.99, compute_ms=1.0)) is None
    assert dg.transfer_bound(crafted(d2h_ms=1.0, compute_ms=1.0)) is not None
    assert dg.transfer_bound(crafted(h2d_ms=0.99, compute_ms=1.0)) is None


def test_hardware_says_where_the_candidates_peak_comes_from():
    fp32, fp16 = crafted("fp32"), crafted("fp16")
    assert "(tensor cores)" in dg.hardware(peak_rates("7.5"), None, baseline=fp32, candidate=fp16).message
    assert "(CUDA cores)" in dg.hardware(peak_rates("6.0"), None, baseline=fp32, candidate=fp16).message
    tf32 = crafted("fp32", metadata={"tf32": True})
    assert "TF32 peak is 8× FP32 on sm_80 (tensor cores)" in dg.hardware(peak_rates("8.0"), None, baseline=fp32, candidate=tf32).message


def test_a_tiny_share_of_peak_is_written_as_a_number_and_a_larger_one_as_a_percentage():
    def text(share: float) -> str:
        return dg.hardware(peak_rates("7.5"), 1.0, {"share_of_peak": share}, crafted("fp32"), crafted("fp16")).message

    assert text(0.00095).endswith("reaches 0.00095 of its peak FLOP/s")
    assert text(0.001).endswith("reaches 0.1% of its peak FLOP/s")


def test_reformat_layers_recorded_as_a_list_are_counted():
    f = dg.fp16_not_fp16(crafted("fp16", metadata={"reformat_layers": ["r1", "r2"]}))
    assert f is not None and "2 reformat" in f.message and f.evidence["reformat_layers"] == 2


def test_the_ort_cpu_sentence_is_for_onnx_runtime_only():
    sentence = "ONNX Runtime's CPU provider has no FP16 kernels"
    ort = dg.fp16_not_fp16(crafted("fp16", backend="onnxruntime", clock="perf_counter_ns"), device_kind="cpu")
    assert ort is not None and sentence in ort.message
    assert dg.fp16_not_fp16(crafted("fp16", backend="onnxruntime"), device_kind="cuda") is None
    torch_cpu = dg.fp16_not_fp16(crafted("fp16", backend="torch", clock="perf_counter_ns"), device_kind="cpu")
    assert torch_cpu is None or sentence not in torch_cpu.message


def test_diagnose_runs_the_layer_rules_when_given_a_layer_table():
    from ..layers.test_edges_layers import table

    layers = table({"conv": 1.0}, {"conv": 0.5, "cast": 0.5}, {"cast": "cast"})
    rules = [f.rule for f in dg.diagnose(crafted("fp32", compute_ms=1.0), crafted("fp16", compute_ms=1.0),
                                         dg.PairEvidence(layers=layers, device_kind="cuda"))]
    assert "cast_reformat" in rules
    assert "cast_reformat" not in [f.rule for f in dg.diagnose(crafted("fp32", compute_ms=1.0),
                                                               crafted("fp16", compute_ms=1.0))]
