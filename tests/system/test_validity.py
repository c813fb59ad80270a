"""The validity stamp (trtprof.system.validity): every threshold just inside and just outside, the
stamp's text and JSON, and the GPU watch that feeds it, sampled through a block with a FAKE pynvml
(no GPU here: the NVML side is tested against fakes only)."""
from __future__ import annotations

import os
import subprocess
import sys
import time
import types

import pytest

from trtprof.system import nvml, validity as v
from trtprof.system.validity import Facts, assess


def codes(facts: Facts) -> list[str]:
    return [r.code for r in assess(facts).reasons]


def gpu(**kw):
    base = {"samples": 20, "interval_s": 0.1, "sm_clock_mhz": {"min": 1980, "max": 1980}, "temperature_c_max": 50,
            "slowdown_temp_c": 90, "throttle_samples": {}, "other_pids": [], "pids_comparable": True}
    return {**base, **kw}


def test_a_run_with_nothing_wrong_is_valid_and_says_what_it_checked():
    got = assess(Facts(loads=6, min_loads=6, budget_s=10, spent_s=10, gpu=gpu(), cpu={"load_average": [0.1],
                       "usable_cores": 2, "governor": "performance"}, host_timed=True))
    assert got.valid and got.stamp == "VALID" and got.to_json()["reasons"] == []
    assert set(got.checked) == {"loads", "budget", "clocks", "throttle", "temperature", "gpu_processes", "cpu_load",
                                "cpu_governor", "precision"}


def test_nothing_seen_is_nothing_judged():
    got = assess(Facts())
    assert got.valid and got.checked == ("precision",)


def test_loads_below_the_minimum():
    assert codes(Facts(loads=6, min_loads=6)) == []
    assert codes(Facts(loads=5, min_loads=6)) == ["too_few_loads"]


def test_budget_overrun_limit_is_ten_percent():
    assert v.BUDGET_OVERRUN_LIMIT == 0.10
    assert codes(Facts(budget_s=10.0, spent_s=11.0)) == []  # 10 % over: kept
    assert codes(Facts(budget_s=10.0, spent_s=11.01)) == ["budget_overrun"]


def test_clock_range_limit():
    high = 2000
    inside = high - v.CLOCK_RANGE_LIMIT * high  # 1900
    assert codes(Facts(gpu=gpu(sm_clock_mhz={"min": inside, "max": high}))) == []
    assert codes(Facts(gpu=gpu(sm_clock_mhz={"min": inside - 1, "max": high}))) == ["clocks_unsteady"]


def test_throttled_share_limit():
    n = 20
    allowed = int(v.THROTTLED_SHARE_LIMIT * n)  # 1 sample of 20
    assert codes(Facts(gpu=gpu(samples=n, throttle_samples={"sw_power_cap": allowed}))) == []
    got = assess(Facts(gpu=gpu(samples=n, throttle_samples={"sw_power_cap": allowed + 1})))
    assert [r.code for r in got.reasons] == ["gpu_throttled"]
    assert "sw_power_cap in 2 of 20 samples" in got.stamp and "nvidia-smi -lgc" in got.reasons[0].advice


def test_temperature_margin_and_thermal_reasons():
    limit = 90
    assert codes(Facts(gpu=gpu(temperature_c_max=limit - v.TEMPERATURE_MARGIN_C - 1, slowdown_temp_c=limit))) == []
    assert codes(Facts(gpu=gpu(temperature_c_max=limit - v.TEMPERATURE_MARGIN_C, slowdown_temp_c=limit))) == [
        "gpu_temperature"]
    # a thermal slowdown is a temperature reason (not a power throttle), even one sample of many
    assert codes(Facts(gpu=gpu(throttle_samples={"hw_thermal_slowdown": 1}))) == ["gpu_temperature"]


def test_another_process_on_the_gpu():
    assert codes(Facts(gpu=gpu(other_pids=[]))) == []
    got = assess(Facts(gpu=gpu(other_pids=[4242])))
    assert [r.code for r in got.reasons] == ["gpu_other_process"] and "pid 4242" in got.stamp
    assert "another namespace" in assess(Facts(gpu=gpu(other_pids=[-1]))).stamp


def test_cpu_load_average_against_the_cores_only_for_host_timed_results():
    cores = 2
    just_below = v.LOAD_PER_CORE_LIMIT * cores - 0.01
    assert codes(Facts(cpu={"load_average": [just_below], "usable_cores": cores}, host_timed=True)) == []
    assert codes(Facts(cpu={"load_average": [float(cores)], "usable_cores": cores}, host_timed=True)) == ["cpu_busy"]
    assert codes(Facts(cpu={"load_average": [9.0], "usable_cores": cores}, host_timed=False)) == []


def test_cpu_governor():
    assert codes(Facts(cpu={"governor": "performance"}, host_timed=True)) == []
    got = assess(Facts(cpu={"governor": "powersave"}, host_timed=True))
    assert [r.code for r in got.reasons] == ["cpu_governor"] and "cpupower frequency-set -g performance" in \
        got.reasons[0].advice


def test_fp16_that_is_fp32_behind_casts():
    assert codes(Facts(casts=())) == []
    got = assess(Facts(casts=("fp16",)))
    assert [r.code for r in got.reasons] == ["fp16_is_fp32"] and "behind casts" in got.stamp


def _heavy(fp16: dict, fp32: dict, asked: str = "fp16", label: str = "fp16", effective: str = "mixed"):
    census = {asked: fp16, "fp32": fp32}
    return v.HeavyCensus.of(label, asked, effective, census)


def test_heavy_ops_in_fp32_share_limit_is_one_half():
    """The issue's engine: Conv, Gemm and pooling all FP32 behind casts, a Concat in FP16 (``effective
    mixed``): NOT VALID as fp16 with the census as the reason. At most half of the heavy nodes in FP32 (a
    keep-list holding layers back) still measures FP16; just over half does not."""
    assert v.HEAVY_FP32_SHARE_LIMIT == 0.5
    issue = _heavy({"Concat": 1}, {"Conv": 3, "Gemm": 1, "MaxPool": 1, "GlobalAveragePool": 1, "Relu": 3})
    got = assess(Facts(heavy_fp32=(issue,)))
    assert [r.code for r in got.reasons] == ["heavy_ops_fp32"] and "heavy_ops" in got.checked
    text = got.reasons[0].text
    assert "fp16 (effective mixed) ran 6 of its 6 heavy nodes in FP32" in text and "node_precision" in text
    assert "Conv×3" in text and "Relu" not in text and "not a measurement of FP16" in text
    half = _heavy({"Conv": 2}, {"Conv": 1, "MaxPool": 1})  # 2 of 4: at the limit, kept
    assert codes(Facts(heavy_fp32=(half,))) == []
    over = _heavy({"Conv": 2}, {"Conv": 2, "MaxPool": 1})  # 3 of 5 = 0.6: over it
    assert codes(Facts(heavy_fp32=(over,))) == ["heavy_ops_fp32"]
    keep = _heavy({"Conv": 49, "MatMul": 10}, {"Conv": 1})  # a keep-list holding one layer back
    assert codes(Facts(heavy_fp32=(keep,))) == []
    # a census with no heavy op, another precision, or none at all: nothing to judge
    assert _heavy({"Concat": 1}, {"Relu": 2}) is None
    assert v.HeavyCensus.of("fp32", "fp32", "fp32", {"fp32": {"Conv": 3}}) is None
    assert v.HeavyCensus.of("fp16", "fp16", "fp16", None) is None


def test_int8_with_its_heavy_ops_left_fp32_between_qdq_is_not_valid_as_int8():
    inside = v.HeavyCensus.of("int8", "int8", "mixed", {"int8": {"QLinearConv": 3, "QGemm": 1},
                                                          "fp32": {"MaxPool": 1}, "qdq": {"QuantizeLinear": 4}})
    assert codes(Facts(heavy_fp32=(inside,))) == []
    outside = v.HeavyCensus.of("int8", "int8", "mixed", {"int8": {"QLinearConv": 1},
                                                           "fp32": {"Conv": 2, "Gemm": 1}})
    got = assess(Facts(heavy_fp32=(outside,)))
    assert [r.code for r in got.reasons] == ["heavy_ops_fp32"] and "not a measurement of INT8" in got.stamp


def test_an_fp16_behind_casts_is_judged_once_by_its_own_reason():
    census = _heavy({}, {"Conv": 3, "Gemm": 1}, effective="fp32+casts")
    assert codes(Facts(casts=("fp16",), heavy_fp32=(census,))) == ["fp16_is_fp32"]


def test_a_bench_result_of_a_mixed_fp16_is_stamped_from_its_census():
    from trtprof.measure.results import BenchResult, stamp_result

    import numpy as np

    def result(census):
        return BenchResult.from_samples(stages={"latency_ms": np.ones(5)}, span_s=0.005, batch_size=1, model="m",
                                        precision="fp16", backend="onnxruntime",
                                        engine={"effective_precision": "mixed",
                                                "backend_metadata": {"node_precision": census}}, config={})

    quiet = {"load_average": [0.0], "usable_cores": 2, "governor": "performance"}
    bad = stamp_result(result({"fp16": {"Concat": 1}, "fp32": {"Conv": 2, "MaxPool": 1}}), quiet, host_timed=True)
    assert [x.code for x in bad.reasons] == ["heavy_ops_fp32"]
    good = stamp_result(result({"fp16": {"Conv": 2, "MaxPool": 1}, "fp32": {"Concat": 1}}), quiet, host_timed=True)
    assert good.valid


def test_serving_rounds_minimum():
    assert codes(Facts(rounds=v.MIN_SERVING_ROUNDS)) == []
    assert codes(Facts(rounds=v.MIN_SERVING_ROUNDS - 1)) == ["too_few_rounds"]


def test_stamp_lines_json_round_trip_and_merge():
    got = assess(Facts(loads=2, min_loads=6, casts=("fp16",)))
    assert got.stamp.startswith("NOT VALID: 2 of the minimum 6 loads ran; fp16 ran FP32")
    lines = v.stamp_lines(got.to_json())
    assert lines[0] == got.stamp and lines[1].startswith("  to fix [too_few_loads]: ") and len(lines) == 3
    assert v.Validity.from_json(got.to_json()) == got
    merged = v.merge([got, assess(Facts(loads=6, min_loads=6)), None, got])
    assert [r.code for r in merged.reasons] == ["too_few_loads", "fp16_is_fp32"]
    assert v.stamp_lines(None) == []


def test_a_bench_result_of_a_cpu_fp16_behind_casts_is_stamped_so():
    from trtprof.measure.results import BenchResult, stamp_result

    import numpy as np

    r = BenchResult.from_samples(stages={"latency_ms": np.ones(5)}, span_s=0.005, batch_size=1, model="m",
                                 precision="fp16", backend="onnxruntime", engine={"effective_precision": "fp32+casts"},
                                 config={})
    got = stamp_result(r, {"load_average": [0.0], "usable_cores": 2, "governor": "performance"}, host_timed=True)
    assert [x.code for x in got.reasons] == ["fp16_is_fp32"]
    again = BenchResult.from_json(r.to_json())
    assert again.validity == r.validity and again.validity["valid"] is False


# --------------------------------------------------------------------------------------------------
# The GPU watch (nvml.watch_gpu) against a FAKE pynvml
# --------------------------------------------------------------------------------------------------
class FakePynvml(types.ModuleType):
    """FAKE pynvml: one GPU whose throttle mask, clock and process list the test sets while a block runs."""

    NVML_CLOCK_SM = 0
    NVML_CLOCK_MEM = 1
    NVML_TEMPERATURE_GPU = 0
    NVML_TEMPERATURE_THRESHOLD_SLOWDOWN = 1

    def __init__(self) -> None:
        super().__init__("pynvml")
        self.mask, self.clock, self.temp, self.pids, self.calls = 0, 1980, 60, [os.getpid()], 0

    def nvmlInit(self):  # noqa: N802 - pynvml's names
        pass

    def nvmlShutdown(self):  # noqa: N802
        pass

    def nvmlDeviceGetHandleByIndex(self, i):  # noqa: N802
        return "h"

    def nvmlDeviceGetCurrentClocksEventReasons(self, h):  # noqa: N802
        self.calls += 1
        return self.mask

    def nvmlDeviceGetClockInfo(self, h, which):  # noqa: N802
        return self.clock

    def nvmlDeviceGetTemperature(self, h, which):  # noqa: N802
        return self.temp

    def nvmlDeviceGetTemperatureThreshold(self, h, which):  # noqa: N802
        return 88

    def nvmlDeviceGetComputeRunningProcesses(self, h):  # noqa: N802
        return [types.SimpleNamespace(pid=p, usedGpuMemory=1) for p in self.pids]


@pytest.fixture
def fake_nvml(monkeypatch):
    fake = FakePynvml()
    monkeypatch.setitem(sys.modules, "pynvml", fake)
    return fake


def wait_for_calls(fake: FakePynvml, n: int) -> None:
    deadline = time.monotonic() + 30  # a generous stop for a loaded machine, not a speed threshold
    while fake.calls < n and time.monotonic() < deadline:
        time.sleep(0.001)
    assert fake.calls >= n


def test_a_throttle_between_the_first_and_the_last_sample_is_seen(fake_nvml):
    """The loop's first and last reads are clean (what a before/after pair sees); the samples between
    them carry hw_slowdown, and the summary counts it."""
    with nvml.watch_gpu(interval_s=0.002) as summary:
        first = fake_nvml.calls
        fake_nvml.mask, fake_nvml.clock = 0x8, 1500  # hw_slowdown mid-run
        wait_for_calls(fake_nvml, first + 3)
        fake_nvml.mask, fake_nvml.clock = 0, 1980
        wait_for_calls(fake_nvml, fake_nvml.calls + 1)  # a clean sample after it, as at the end of the loop
    assert summary["samples"] >= 4 and summary["throttle_samples"].get("hw_slowdown", 0) >= 2
    assert summary["sm_clock_mhz"] == {"min": 1500, "max": 1980} and summary["slowdown_temp_c"] == 88
    assert summary["other_pids"] == [] and summary["pids_comparable"] is True
    got = assess(Facts(gpu=summary))
    assert "clocks_unsteady" in [r.code for r in got.reasons]


def test_a_second_process_on_the_gpu_is_named_and_our_own_children_are_not(fake_nvml):
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        fake_nvml.pids = [os.getpid(), child.pid, 1]  # 1 (init) is nobody of ours
        with nvml.watch_gpu(interval_s=0.002) as summary:
            wait_for_calls(fake_nvml, 2)
    finally:
        child.kill()
        child.wait()
    assert summary["other_pids"] == [1]
    assert [r.code for r in assess(Facts(gpu=summary)).reasons] == ["gpu_other_process"]


def test_pids_of_another_namespace_count_only_beyond_our_family():
    me = os.getpid()
    assert nvml.other_processes([101, 102], {me}, me, family=lambda heads: 2) == ([], False)
    assert nvml.other_processes([101, 102, 103], {me}, me, family=lambda heads: 2) == ([-1], False)


def test_summaries_merge_over_blocks():
    a = nvml.summarize_watch([{"sm_clock_mhz": 1900, "temperature_c": 60, "throttle_reasons": ["sw_power_cap"],
                               "other_pids": [], "pids_comparable": True}], 0.1)
    b = nvml.summarize_watch([{"sm_clock_mhz": 1980, "temperature_c": 70, "throttle_reasons": ["gpu_idle"],
                               "other_pids": [7], "pids_comparable": True}], 0.1)
    m = nvml.merge_watches(a, b)
    assert m["samples"] == 2 and m["sm_clock_mhz"] == {"min": 1900, "max": 1980} and m["temperature_c_max"] == 70
    assert m["throttle_samples"] == {"sw_power_cap": 1} and m["other_pids"] == [7]
    assert nvml.merge_watches(None, {}) is None and nvml.merge_watches(a, None) == a


def test_without_nvml_the_watch_is_empty(monkeypatch):
    monkeypatch.setitem(sys.modules, "pynvml", None)  # import fails
    with nvml.watch_gpu() as summary:
        pass
    assert summary == {}
