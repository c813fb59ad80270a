"""The serving sweep on a real GPU (issue 24): torch backend, N streams, allocator memory, NVML energy.
Skipped without a CUDA device; the lead runs it on the H200 (see docs/serving.md)."""
from __future__ import annotations

import importlib.util

import numpy as np
import pytest

from trtprof.system import cuda

pytestmark = [pytest.mark.gpu,
              pytest.mark.skipif(cuda.device_count() == 0, reason="no CUDA device"),
              pytest.mark.skipif(importlib.util.find_spec("onnx2torch") is None, reason="onnx2torch missing")]


@pytest.fixture
def torch_arms(tmp_path):
    from trtprof.builder.pipeline import BuildSettings, build_engines
    from trtprof.model.demo import make_demo_model
    from trtprof.spec import Precision

    model = make_demo_model(tmp_path / "net.onnx", channels=32, image=64, classes=10)
    outcomes = build_engines(model, [Precision.FP32, Precision.FP16], (1, 8),
                             settings=BuildSettings(engines_dir=tmp_path / "engines", backend="torch"))
    return {o.record.precision: o.record for o in outcomes}


def test_torch_sweep_streams_memory_energy_and_slo(torch_arms):
    from trtprof.serving.driver import ServingConfig
    from trtprof.serving.sweep import sweep_records

    sweep = sweep_records(torch_arms, (1, 8), ServingConfig(concurrency=(1, 4), window_s=0.3, rounds=2,
                                                            slo_ms=1000.0)).to_json()
    assert len(sweep["points"]) == 8
    for p in sweep["points"]:
        assert p["sessions"] == {"kind": "cuda", "streams": p["concurrency"], "contexts": 1,
                                 "per_stream_context": False, "copies": True}
        assert all(r["requests"] > 0 for r in p["rounds"])
        assert p["memory"]["kind"] == "torch_allocator" and p["memory"]["allocated_peak_bytes"] > 0
        e = p["energy"]
        assert e["status"] == "ok", e  # the H200 has NVML's total-energy counter
        assert e["joules"] > 0 and np.isfinite(e["joules_per_inference"]) and e["agreement"] is not None
    assert {v["candidate"] for v in sweep["slo"]["verdicts"]} == {"fp16"}


def test_concurrent_streams_compute_the_same_outputs_as_one(torch_arms):
    """Four sessions on one shared torch runner, each on its own stream and buffers, must produce the
    runner's own output (a race in binding would mix buffers up)."""
    from trtprof.measure.bench import load_runner
    from trtprof.model.inputs import make_inputs, resolve_shapes
    from trtprof.serving.driver import ServingConfig, gpu_sessions, run_window

    runner = load_runner(torch_arms["fp32"])
    try:
        feeds = make_inputs(runner.inputs, resolve_shapes(runner.inputs, 8, {}), seed=3)
        expected = next(iter(runner.infer(feeds).values()))
        with gpu_sessions(runner, 4, feeds) as (sessions, info):
            run_window(sessions, ServingConfig(warmup_s=0.05, window_s=0.2))
            outputs = sessions.outputs()
        for out in outputs:
            np.testing.assert_allclose(next(iter(out.values())), expected, rtol=1e-4, atol=1e-5)
    finally:
        runner.close()


def test_energy_of_the_single_stream_loop_is_recorded(torch_arms):
    from trtprof.measure.bench import bench_records
    from trtprof.measure.timing import TimingConfig

    results = bench_records([torch_arms["fp16"]], TimingConfig(warmup=10, iterations=200, duration_s=1.0))
    e = results.results[0].energy
    assert e["status"] == "ok" and e["joules"] > 0 and e["inferences"] == results.results[0].latency.n * 1


def test_windows_reuse_the_sweeps_threads_and_streams(torch_arms):
    """Two windows on one ``Workers`` and the caller's streams (as ``sweep_records`` runs them): both
    measure requests, and the streams outlive the sessions (they are the caller's to close)."""
    from trtprof.measure.bench import load_runner
    from trtprof.model.inputs import make_inputs, resolve_shapes
    from trtprof.serving.driver import ServingConfig, Workers, gpu_sessions, run_window

    runner = load_runner(torch_arms["fp16"])
    streams = [cuda.Stream() for _ in range(2)]
    try:
        feeds = make_inputs(runner.inputs, resolve_shapes(runner.inputs, 8, {}), seed=3)
        with Workers(2) as workers:
            for _ in range(2):
                with gpu_sessions(runner, 2, feeds, streams=streams) as (sessions, info):
                    window = run_window(sessions, ServingConfig(warmup_s=0.05, window_s=0.1), workers=workers)
                assert window.requests > 0 and info["streams"] == 2
        for s in streams:
            s.synchronize()  # still alive: gpu_sessions did not destroy them
    finally:
        for s in streams:
            s.close()
        runner.close()
