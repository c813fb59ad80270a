"""Contract test of the GPU branch of compare without a GPU: fakes named as such.

A real ONNX Runtime engine pair provides records and outputs; ``FakeCudaRunner`` declares itself a
"cuda" runner, and ``fake_time_device`` returns what ``timing.time_device`` returns (per-stage
samples, NVML state, notes), so the path through stage medians, NVML evidence, the peak table and
the JSON is exercised here; the real GPU run is benchmarks/gpu_compare.py.
"""
from __future__ import annotations

import json

import numpy as np
import pytest

from trtprof.compare import core as cmp
from trtprof.model import roofline
from trtprof.measure import timing
from trtprof.measure.interleave import FLOOR_LOADS, Arm, RoundPlan
from trtprof.measure.timing import Samples

pytest.importorskip("onnxruntime")


class FakeCudaRunner:
    """Fake: an ORT runner that claims to be a CUDA runner (infer still computes real outputs)."""

    device = "cuda"

    def __init__(self, inner) -> None:
        self.inner = inner
        self.inputs, self.outputs = inner.inputs, inner.outputs
        self.precision = ""

    def infer(self, feeds):
        return self.inner.infer(feeds)

    def close(self) -> None:
        self.inner.close()


# per precision: (compute ms, enqueue ms); copies 0.4 + 0.4 ms for both
STAGES = {"fp32": (1.0, 0.2), "fp16": (0.5, 0.45)}


def fake_time_device(runner, feeds, config):
    compute_ms, enqueue_ms = STAGES[runner.precision]
    rng = np.random.default_rng(len(runner.precision) + config.iterations)
    n = config.iterations
    noise = 1 + 0.002 * rng.standard_normal(n)
    stages = {"h2d_ms": 0.4 * noise, "compute_ms": compute_ms * noise, "d2h_ms": 0.4 * noise,
              "enqueue_ms": np.full(n, enqueue_ms)}
    stages["latency_ms"] = stages["h2d_ms"] + stages["compute_ms"] + stages["d2h_ms"]
    state = {"sm_clock_mhz": 1980, "max_sm_clock_mhz": 1980, "throttle_reasons": ["gpu_idle"]}
    return Samples(stages=stages, span_s=float(stages["latency_ms"].sum()) / 1e3, warmup_done=config.warmup,
                   warmup_s=0.0, notes=[f"enqueue-bound: host enqueue {enqueue_ms + rng.random():.3f} ms"],
                   device={"before": state, "after": state})


def test_gpu_shaped_samples_flow_into_diagnosis_roofline_and_json(conv_model, tmp_path, monkeypatch):
    from trtprof.measure import bench
    from trtprof.builder.pipeline import BuildSettings, build_engines
    from trtprof.spec import Precision

    outcomes = build_engines(conv_model, [Precision.FP32, Precision.FP16], [1, 2],
                             settings=BuildSettings(engines_dir=tmp_path / "e", backend="onnxruntime"))
    records = {o.record.precision: o.record for o in outcomes}
    real_load = bench.load_runner

    def fake_load(record, *args, **kwargs):
        runner = FakeCudaRunner(real_load(record, *args, **kwargs))
        runner.precision = record.precision
        return runner

    peak = roofline.DevicePeak(name="fake H100", compute_capability="9.0", multiprocessors=132,
                               max_sm_clock_mhz=1980.0, rates=roofline.PEAKS["9.0"])
    monkeypatch.setattr(bench, "load_runner", fake_load)
    monkeypatch.setattr(timing, "time_device", fake_time_device)
    monkeypatch.setattr(roofline, "query_device_peak", lambda: peak)

    # in-process loads: the fakes are monkeypatched into this process, a worker process would not see them
    options = cmp.CompareOptions(plan=RoundPlan(time_budget_s=0.0, round_iterations=50),
                                 isolation=cmp.ISOLATION_IN_PROCESS)
    report = cmp.compare_records(records, [1, 2], options, model=outcomes[0].model)
    data = json.loads(json.dumps(report.to_json()))
    assert data["device_peak"]["compute_capability"] == "9.0"
    for c in data["comparisons"]:
        s = c["speedup"]
        assert s["ci_low"] <= 1.8 / 1.3 <= s["ci_high"]  # (0.4+1.0+0.4) / (0.4+0.5+0.4)
        assert c["verdict"] == "faster"
        rules = [f["rule"] for f in c["diagnosis"]]
        # copies 0.8 ms ≥ fp16 compute 0.5 ms; enqueue 0.45 ≥ 0.8 × 0.5; sm_90 has TF32; ORT census
        assert {"transfer_bound", "enqueue_bound", "tf32", "hardware", "fp16_not_fp16"} <= set(rules)
        assert "unstable_clocks" not in rules  # steady 1980 MHz, only the benign gpu_idle reason
        r = c["roofline"]["candidate"]
        assert r["timed_stage"] == "compute_ms" and 0 < r["share_of_peak"] < 1
        assert r["peak_flops_per_s"] == pytest.approx(4096 * 132 * 1980e6)
    fp16 = next(r for r in data["results"] if r["precision"] == "fp16")
    assert set(fp16["stage_samples_ms"]) == {"h2d_ms", "compute_ms", "d2h_ms", "enqueue_ms"}
    assert sum("enqueue-bound" in w for w in fp16["warnings"]) == 1  # one per kind, not one per block
    assert fp16["device"]["first_round"]["before"]["sm_clock_mhz"] == 1980
    # a 0 s budget runs the floor only (issue 27: the budget is the budget), not the minimum loads
    assert fp16["config"]["clock"] == "cuda_events" and fp16["config"]["loads"] == FLOOR_LOADS


def test_notes_are_kept_once_per_kind_with_their_block_count():
    arm = Arm("fp16")
    for v in (0.1, 0.25, 0.3):
        arm.add(Samples(stages={"latency_ms": np.ones(4)}, span_s=1.0, warmup_done=0, warmup_s=0.0,
                        notes=[f"enqueue-bound: host enqueue {v:.3f} ms", "SM clock moved"]))
    assert arm.notes == ["enqueue-bound: host enqueue 0.100 ms (in 3 of 3 blocks)", "SM clock moved (in 3 of 3 blocks)"]
