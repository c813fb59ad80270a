"""onnxruntime-cuda on a real GPU (marked ``gpu``; skipped without onnxruntime-gpu and a GPU): the runner's
launches, eager and through ORT's own CUDA graph, write the profiler's device buffers with what ONNX Runtime
on the CPU computes for the same engine file. Each launch's output buffer is poisoned (0xFF bytes: NaN)
first, so a replay that wrote elsewhere, or nothing, fails; a second set of buffers gets a graph of its
own (a replay writes to the addresses it captured)."""
from __future__ import annotations

import subprocess
import sys
from contextlib import ExitStack

import numpy as np
import pytest

from trtprof import backends

pytestmark = pytest.mark.gpu


def usable() -> bool:
    try:
        return backends.get("onnxruntime-cuda").available().ok
    except Exception:  # noqa: BLE001
        return False


needs_ort_cuda = pytest.mark.skipif(not usable(), reason="needs onnxruntime-gpu and a CUDA GPU")


def outputs_through_the_loop(runner, feeds, cuda_graph: bool, buffer_sets: int = 2) -> list[np.ndarray]:
    from trtprof.measure import timing
    from trtprof.system import cuda

    shapes = runner.prepare({k: v.shape for k, v in feeds.items()})
    dtypes = {s.name: s.dtype for s in runner.outputs}
    got = []
    with ExitStack() as stack:
        stream = timing.runner_stream(runner)
        for _ in range(buffer_sets):
            buffers, _host_in, host_out = timing.device_buffers(stack, stream, feeds, shapes, dtypes)
            info: dict = {}
            launch = timing.compute_launch(stack, runner, buffers, stream, cuda_graph, info)
            assert info["mode"] == ("cuda_graph" if cuda_graph else "eager")
            for _ in range(4):  # ORT captures after its first runs, then replays
                for view, ptr in host_out:
                    cuda.ok(cuda.runtime().cudaMemsetAsync(ptr, 0xFF, view.nbytes, stream.raw), "cudaMemsetAsync")
                launch()
                for view, ptr in host_out:
                    cuda.memcpy_dtoh_async(view, ptr, stream)
                stream.synchronize()
                got.append(np.array(host_out[0][0]))
    return got


@needs_ort_cuda
@pytest.mark.parametrize("cuda_graph", [True, False])
@pytest.mark.parametrize("precision", ["fp32", "fp16"])
def test_launches_write_what_ort_on_the_cpu_computes(conv_model, tmp_path, precision, cuda_graph):
    import onnxruntime as ort

    from trtprof.engines.cache import list_engines
    from trtprof.measure.bench import load_runner

    engines = tmp_path / "engines"
    proc = subprocess.run([sys.executable, "-m", "trtprof", "build", "--backend", "onnxruntime-cuda", f"--{precision}",
                           "--engines", str(engines), str(conv_model)], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    (record,) = list_engines(engines)
    runner = load_runner(record)
    try:
        spec = runner.inputs[0]
        shape = tuple(d if isinstance(d, int) and d > 0 else 3 for d in spec.shape)  # batch 3
        feeds = {spec.name: np.random.default_rng(1).standard_normal(shape).astype(np.float32)}
        reference = ort.InferenceSession(str(record.artifact_path), providers=["CPUExecutionProvider"]).run(None, feeds)[0]
        for out in outputs_through_the_loop(runner, feeds, cuda_graph):
            assert np.isfinite(out).all()
            np.testing.assert_allclose(out, reference, rtol=2e-2 if precision == "fp16" else 1e-3,
                                       atol=2e-3 if precision == "fp16" else 1e-4)
    finally:
        runner.close()


@needs_ort_cuda
def test_a_life_started_ahead_holds_no_cuda_context_while_the_current_one_serves(conv_model, tmp_path):
    """``--serial-loads`` on the GPU (onnxruntime-cuda's default loads): the next life's process, started ahead while
    life 0 is primed and serving, is not on the GPU (NVML lists life 0's pid and not its), so no CUDA context is made
    beside a timed load; told its engines, it is (it became life 1)."""
    import time

    from trtprof.engines.cache import list_engines
    from trtprof.measure.serial_loads import LifePriming, LifeWorkers
    from trtprof.measure.timing import TimingConfig
    from trtprof.system import nvml

    engines = tmp_path / "engines"
    proc = subprocess.run([sys.executable, "-m", "trtprof", "build", "--backend", "onnxruntime-cuda", "--fp32",
                           "--engines", str(engines), str(conv_model)], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    (record,) = list_engines(engines)
    spec = record.inputs[0]
    shapes = {spec.name: tuple(d if isinstance(d, int) and d > 0 else 2 for d in spec.shape)}

    def on_gpu() -> list[int] | None:
        with nvml._session() as nv:
            return None if nv is None else nvml.gpu_pids(nv, nvml.gpu_handle(nv, 0, None))

    lives = LifeWorkers({"fp32": record}, priming=LifePriming([(2, shapes)], 0, (0, 100), TimingConfig(cuda_graph=True)),
                        ahead=True)
    try:
        lives.begin_life([0])
        first = lives.load(0, shapes, 0, (0, 100))
        spare = lives.spare
        assert spare is not None
        time.sleep(5.0)  # its imports done
        pids = on_gpu()
        if pids is None or first.worker.proc.pid not in pids:
            pytest.skip("NVML does not list this machine's pids (a container): cannot tell which process is on the GPU")
        assert spare.proc.pid not in pids and spare.proc.poll() is None
        lives.begin_life([0])
        second = lives.load(1, shapes, 0, (0, 100))
        assert second.worker is spare and spare.proc.pid in (on_gpu() or [])
    finally:
        lives.close()


@needs_ort_cuda
def test_a_later_life_primes_side_by_side_and_replays_graphs_at_every_batch_size(conv_model, tmp_path):
    """Lone loads on the GPU: life 0 primes one arm at a time; life 1 makes its arms' first runs side by side in
    threads (``PRIME_SIDE_BY_SIDE``), then captures one at a time: it primes every batch size without a failure
    note, and its warm-ups and rounds then replay ORT's CUDA graphs at each batch size; what ORT wrote in life 1 is
    marked as written side by side."""
    from trtprof.engines.cache import list_engines
    from trtprof.measure.serial_loads import LifePriming, LifeWorkers
    from trtprof.measure.timing import TimingConfig
    from trtprof.measure.worker_loop import AS_IN_LIFE_0, NOT_TOLD_APART

    engines = tmp_path / "engines"
    proc = subprocess.run([sys.executable, "-m", "trtprof", "build", "--backend", "onnxruntime-cuda", "--fp32",
                           "--fp16", "--engines", str(engines), str(conv_model)], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    records = {r.precision: r for r in list_engines(engines)}
    spec = records["fp32"].inputs[0]
    batches = [(b, {spec.name: tuple(d if isinstance(d, int) and d > 0 else b for d in spec.shape)}) for b in (1, 4)]
    lives = LifeWorkers(records, priming=LifePriming(batches, 0, (0, 100), TimingConfig(cuda_graph=True)), ahead=True)
    try:
        for life in (0, 1):
            lives.begin_life([0, 1])
            for batch, shapes in batches:
                load = lives.load(life, shapes, 0, (0, 100))
                warm = load.warm_up(TimingConfig(warmup=1, iterations=2, cuda_graph=True))
                rounds = load.rounds(0, 2, TimingConfig(warmup=0, iterations=3, cuda_graph=True), list(records))
                assert all(s.device["launch"]["mode"] == "cuda_graph" for s in warm.values())
                assert len(rounds) == 2 and all(s.n == 3 for r in rounds for s in r.values())
                if life == 1:
                    marked = [line for s in warm.values() for line in s.run_warnings if "side by side" in line]
                    assert all(line.endswith((AS_IN_LIFE_0, NOT_TOLD_APART)) for line in marked)
            worker = lives.current
            assert worker is not None and worker.primed_side_by_side is (life == 1)
            assert not worker.side_by_side_failed and not worker.prime_notes and len(worker.primed) == 2
            assert (any("side by side" in part for part in worker.prime_s)) is (life == 1)
    finally:
        lives.close()
    assert [life["first_runs_side_by_side"] for life in lives.lives] == [False, True]
