"""The GPU timing loop: its warnings as a pure function (CPU), and time_device on a real GPU with a
runner whose kernel has a known minimum duration (globaltimer spin) and a checkable output."""
from __future__ import annotations

import numpy as np
import pytest

from trtprof.system import cuda
from trtprof.spec import TensorSpec
from trtprof.measure.timing import EAGER_PROBE_RUNS, COMPUTE_CV_WARN, TimingConfig, device_notes, time_device

needs_gpu = pytest.mark.skipif(cuda.device_count() == 0, reason="no CUDA device")


def _stages(compute, enqueue, h2d=None, d2h=None):
    compute = np.asarray(compute, dtype=float)
    out = {"compute_ms": compute, "enqueue_ms": np.asarray(enqueue, dtype=float)}
    out["h2d_ms"] = np.asarray(h2d if h2d is not None else np.zeros_like(compute), dtype=float)
    out["d2h_ms"] = np.asarray(d2h if d2h is not None else np.zeros_like(compute), dtype=float)
    return out


def test_notes_quiet_for_steady_compute_bound_run():
    compute = np.full(100, 2.0)
    notes = device_notes(_stages(compute, compute * 0.1), {"sm_clock_mhz": 1980}, {"sm_clock_mhz": 1980},
                         TimingConfig())
    assert notes == []


def test_notes_flag_noisy_compute_and_say_how_to_lock_clocks():
    rng = np.random.default_rng(1)
    compute = 2.0 * (1 + rng.normal(0, 4 * COMPUTE_CV_WARN, 200))
    notes = device_notes(_stages(compute, compute * 0.1), {}, {}, TimingConfig())
    assert any("CV" in n and "nvidia-smi -lgc" in n for n in notes)


def test_notes_flag_moving_clocks_throttling_enqueue_and_transfer_bound():
    compute = np.full(50, 1.0)
    notes = device_notes(_stages(compute, compute, h2d=compute * 2, d2h=compute),
                         {"sm_clock_mhz": 1980}, {"sm_clock_mhz": 1500, "throttle_reasons": ["sw_power_cap"]},
                         TimingConfig())
    text = "\n".join(notes)
    assert "1980 to 1500" in text
    assert "sw_power_cap" in text
    assert "enqueue-bound" in text and "--cuda-graph" in text
    assert "transfer-bound" in text


class SpinCopyRunner:
    """Fake runner for the loop's contract (no backend): y = x (device copy) after a kernel that
    spins for ``spin_ns`` on the GPU's global timer."""

    device = "cuda"

    def __init__(self, spin_ns: int, shape=(4, 256)) -> None:
        from tests.gpu_kernels import spin_kernel

        self.launch = spin_kernel()
        self.spin_ns = spin_ns
        self.inputs = (TensorSpec("x", "float32", ("batch", shape[1])),)
        self.outputs = (TensorSpec("y", "float32", ("batch", shape[1])),)
        self.enqueues = 0

    def prepare(self, input_shapes):
        self.shape = tuple(input_shapes["x"])
        return {"y": self.shape}

    def enqueue(self, buffers, stream):
        rt = pytest.importorskip("cuda.bindings.runtime")
        self.launch(stream, self.spin_ns)
        nbytes = int(np.prod(self.shape)) * 4
        cuda.check(rt.cudaMemcpyAsync(buffers["y"], buffers["x"], nbytes,
                                      rt.cudaMemcpyKind.cudaMemcpyDeviceToDevice, rt.cudaStream_t(stream)))
        self.enqueues += 1

    def infer(self, feeds):
        return {"y": feeds["x"]}

    def close(self):
        pass


@pytest.mark.gpu
@needs_gpu
@pytest.mark.parametrize("copies,graph,spin", [(True, False, False), (True, True, False), (False, False, True),
                                               (False, True, True)])
def test_time_device_stages_and_bounds(copies, graph, spin):
    spin_ms = 0.2
    runner = SpinCopyRunner(int(spin_ms * 1e6))
    feeds = {"x": np.random.default_rng().standard_normal((4, 256), dtype=np.float32)}
    config = TimingConfig(warmup=5, iterations=30, copies=copies, cuda_graph=graph, spin_wait=spin)
    samples = time_device(runner, feeds, config)
    st = samples.stages
    assert samples.n == 30 and samples.warmup_done == 5
    assert np.all(st["compute_ms"] >= spin_ms * 0.999)  # the spin cannot end sooner
    if copies:
        assert set(st) == {"h2d_ms", "compute_ms", "d2h_ms", "latency_ms", "enqueue_ms"}
        np.testing.assert_allclose(st["latency_ms"], st["h2d_ms"] + st["compute_ms"] + st["d2h_ms"])
    else:
        assert set(st) == {"compute_ms", "latency_ms", "enqueue_ms"}
        np.testing.assert_array_equal(st["latency_ms"], st["compute_ms"])
    # eager: one enqueue per run; graph: a priming run and the capture, then replays — plus, once per
    # runner and shapes, the eager/graph probe's eager launches (one, then EAGER_PROBE_RUNS timed)
    assert runner.enqueues == (2 + 1 + EAGER_PROBE_RUNS if graph else 35)
    assert samples.span_s >= 30 * spin_ms / 1e3
    assert samples.device["sync"] == ("spin" if spin else "blocking")


@pytest.mark.gpu
@needs_gpu
def test_time_device_duration_rule_runs_past_the_count():
    runner = SpinCopyRunner(100_000)  # 0.1 ms
    feeds = {"x": np.ones((4, 256), np.float32)}
    samples = time_device(runner, feeds, TimingConfig(warmup=0, warmup_ms=20, iterations=5, duration_s=0.05))
    assert samples.n > 5  # 50 ms of 0.1 ms iterations
    assert samples.span_s >= 0.05
    assert samples.warmup_s >= 0.02
