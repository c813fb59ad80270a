"""The layer rules' thresholds (layers.table.SLOWER_MARGIN, layers.rules.MIN_SHARE,
KERNEL_BUSY_SHARE, TOP) tested just inside and just outside, on hand-made profiles."""
from __future__ import annotations

import pytest

from trtprof.diagnose import layer_rules as rules
from trtprof.layers.table import CAST, COMPUTE, SLOWER_MARGIN, LayerTable, LayerTiming, PrecisionProfile


def profile(precision: str, layers: dict[str, float], kinds: dict[str, str] | None = None, backend: str = "torch",
            iteration_total_ms: float | None = None) -> PrecisionProfile:
    kinds = kinds or {}
    return PrecisionProfile(precision, backend, "hand-made", 8, 20,
                            tuple(LayerTiming(n, "Conv", kinds.get(n, COMPUTE), ms) for n, ms in layers.items()),
                            iteration_total_ms=iteration_total_ms)


def table(fp32: dict[str, float], fp16: dict[str, float], kinds: dict[str, str] | None = None) -> LayerTable:
    return LayerTable(8, ("fp32", "fp16"), {"fp32": profile("fp32", fp32), "fp16": profile("fp16", fp16, kinds)})


def test_a_layer_is_slower_from_just_above_five_percent():
    assert SLOWER_MARGIN == 0.05
    # one layer of 1 ms in fp32; "big" keeps its share of the fp16 total well above MIN_SHARE
    def finding(ratio: float):
        return rules.fp16_slower_layers(table({"l": 1.0, "big": 1.0}, {"l": ratio, "big": 0.5}), "fp16")

    assert finding(1.051) is not None and finding(1.051).evidence["layers"][0]["name"] == "l"
    assert finding(1.049) is None
    assert finding(1.05) is None  # exactly the margin: not slower


def test_slower_layers_count_from_five_percent_of_the_candidates_time():
    assert rules.MIN_SHARE == 0.05
    # "l" is 2× slower; its share of fp16's total is 0.051 / 0.049 of it
    def finding(share: float):
        slow = 0.2
        rest = slow / share - slow
        return rules.fp16_slower_layers(table({"l": 0.1, "rest": rest * 2}, {"l": slow, "rest": rest}), "fp16")

    assert finding(0.051) is not None and finding(0.051).evidence["share_of_candidate"] == pytest.approx(0.051)
    assert finding(0.049) is None


def test_the_message_names_the_top_five_slower_layers():
    fp32 = {f"l{i}": 1.0 for i in range(6)}
    fp16 = {f"l{i}": 2.0 + i for i in range(6)}
    f = rules.fp16_slower_layers(table(fp32, fp16), "fp16")
    assert rules.TOP == 5 and "6 layers are slower" in f.message
    assert "l5 " in f.message and "l1 " in f.message and "l0 " not in f.message  # the least extra time left out


def test_casts_count_from_five_percent_of_the_candidates_time():
    def finding(share: float):
        cast = 0.1
        return rules.cast_reformat_share(
            table({"conv": 1.0}, {"conv": cast / share - cast, "cast": cast}, {"cast": CAST}), "fp16")

    assert finding(0.051) is not None and finding(0.051).evidence["share"] == pytest.approx(0.051)
    assert finding(0.05) is not None
    assert finding(0.049) is None


def test_gpu_idle_gaps_from_below_half_busy():
    assert rules.KERNEL_BUSY_SHARE == 0.5

    def finding(kernel_ms: float, compute_ms: float = 2.0):
        t = LayerTable(8, ("fp16",), {"fp16": profile("fp16", {"l": kernel_ms})})
        return rules.gpu_idle_gaps(t, "fp16", compute_ms)

    assert finding(0.98) is not None and finding(0.98).evidence["busy_share"] == pytest.approx(0.49)
    assert finding(1.0) is None  # exactly half busy: not host-bound
    assert finding(1.02) is None
    assert finding(0.5, compute_ms=0.0) is None  # no compute time measured: no claim


# ------------------------------------------------ layers that ran the same FP32 kernels in both arms
def _marked(precision: str, layers: dict[str, float], fp32: set[str], mark: str = "runs FP32") -> PrecisionProfile:
    from trtprof.layers.table import KernelTime

    return PrecisionProfile(precision, "onnxruntime", "hand-made", 1, 20, tuple(
        LayerTiming(n, "Conv", COMPUTE, ms, (KernelTime(f"Conv (CPUExecutionProvider{', ' + mark if n in fp32 else ''})",
                                                        ms),)) for n, ms in layers.items()))


def test_a_layer_that_ran_fp32_in_both_arms_is_never_an_fp16_slower_layer():
    """Issue 44: ``profile`` named ``n96 (8.60×)`` of an ORT CPU "fp16" (effective mixed) whose Conv ran the
    same FP32 kernel as the baseline. Such a layer is left out whatever its ratio; the same layer with an FP16
    kernel counts from just above the margin, as before."""
    from trtprof.layers.table import FP32_MARKS

    assert FP32_MARKS == ("FP32 behind inserted casts", "runs FP32")
    for mark in FP32_MARKS:
        base = _marked("fp32", {"l": 1.0, "big": 1.0}, set())
        for ratio in (1.051, 8.6):
            fp32_both = LayerTable(1, ("fp32", "fp16"), {"fp32": base, "fp16": _marked("fp16", {"l": ratio, "big": 0.5},
                                                                                    {"l"}, mark)})
            assert rules.fp16_slower_layers(fp32_both, "fp16") is None
        fp16_kernel = LayerTable(1, ("fp32", "fp16"), {"fp32": base, "fp16": _marked("fp16", {"l": 1.051, "big": 0.5},
                                                                                      set())})
        assert rules.fp16_slower_layers(fp16_kernel, "fp16").evidence["layers"][0]["name"] == "l"
        assert rules.fp16_slower_layers(LayerTable(1, ("fp32", "fp16"), {"fp32": base, "fp16": _marked(
            "fp16", {"l": 1.049, "big": 0.5}, set())}), "fp16") is None
    # one FP16 layer slower, one FP32-in-both layer slower: only the first is named, the other said left out
    both = LayerTable(1, ("fp32", "fp16"), {"fp32": _marked("fp32", {"a": 1.0, "b": 1.0}, set()),
                                            "fp16": _marked("fp16", {"a": 2.0, "b": 9.0}, {"b"})})
    f = rules.fp16_slower_layers(both, "fp16")
    assert "a (2.00×)" in f.message and "b (" not in f.message and f.evidence["left_out_fp32_in_both"] == ["b"]
    assert "1 layer that ran the same FP32 kernels in both left out" in f.message


def test_the_page_and_the_text_table_never_mark_a_layer_that_ran_fp32_in_both_as_slower():
    from trtprof.report.layers_section import layers_section
    from trtprof.layers.table import format_table

    def table_json(mark: str) -> dict:
        return LayerTable(1, ("fp32", "fp16"), {"fp32": _marked("fp32", {"l": 1.0}, set()),
                                                "fp16": _marked("fp16", {"l": 2.0}, {"l"} if mark else set(),
                                                                mark or "runs FP32")}).to_json()

    same, fp16 = table_json("runs FP32"), table_json("")
    assert 'class="l-slower"' not in layers_section({"1": same}) and 'class="l-slower"' in layers_section({"1": fp16})
    assert "2.00=" in format_table(same) and "2.00!" in format_table(fp16)


def test_a_gpu_profile_on_the_hosts_clock_claims_no_layer_time_share():
    """onnxruntime-cuda's layer times are ORT's host-side node times (kernel launches): the rules that read
    time shares stay off there and one finding says why; the same table on torch (CUPTI kernels) keeps them;
    the CPU backend's host times are its compute and keep them too."""
    def findings(backend: str):
        t = LayerTable(8, ("fp32", "fp16"), {"fp32": profile("fp32", {"l": 1.0, "big": 1.0}, backend=backend),
                                             "fp16": profile("fp16", {"l": 2.0, "big": 0.5}, {"l": CAST}, backend)})
        return [f.rule for f in rules.layer_findings(t, {}, "fp16")]

    assert findings("onnxruntime-cuda") == ["layer_times_host_clock"]
    assert "fp16_slower_layers" in findings("torch") and "cast_reformat" in findings("torch")
    assert "fp16_slower_layers" in findings("onnxruntime")
