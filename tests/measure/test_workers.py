"""Worker processes: a real ONNX Runtime engine measured in a fresh process, and failures named."""
from __future__ import annotations

import pickle

import numpy as np
import pytest

from trtprof.measure import interleave, workers
from trtprof.errors import TrtprofError
from trtprof.measure.timing import TimingConfig

pytest.importorskip("onnxruntime")


def test_a_worker_loads_every_arm_once_and_runs_interleaved_rounds(fp32_record):
    pool = workers.WorkerPool({"fp32": fp32_record, "fp32#2": fp32_record})
    try:
        pool.start(2)
        assert len({w.proc.pid for w in pool.workers}) == 2
        load = pool.load(1, {"input": (1, 3, 16, 16)}, 0, (0, 100))
        warm = load.warm_up(TimingConfig(warmup=1, iterations=3))
        assert set(warm) == {"fp32", "fp32#2"} and all(s.n == 3 for s in warm.values())
        rounds = load.rounds(0, 3, TimingConfig(warmup=0, iterations=4), ["fp32#2", "fp32"])
        assert [list(r) for r in rounds] == [["fp32#2", "fp32"], ["fp32", "fp32#2"], ["fp32#2", "fp32"]]
        assert all(np.all(s.latency_ms > 0) and s.n == 4 for r in rounds for s in r.values())
    finally:
        pool.close()
    assert pool.workers == []


def test_the_loop_runs_on_worker_loads(fp32_record):
    pool = workers.WorkerPool({"a": fp32_record, "b": fp32_record})
    plan = interleave.RoundPlan(time_budget_s=0.0, round_iterations=5, min_loads=2, min_rounds=2)
    try:
        out = interleave.run_interleaved(["a", "b"], lambda i: pool.load(i, {"input": (1, 3, 16, 16)}, 0, (0, 100)), plan)
    finally:
        pool.close()
    assert out.loads == 2 and out.rounds == 4 and out.stop_reason == interleave.STOP_BUDGET
    assert [len(load) for load in out.arm("b").blocks] == [2, 2]


def test_a_failure_in_the_worker_comes_back_as_a_named_one_line_error(fp32_record):
    pool = workers.WorkerPool({"fp32": fp32_record})
    try:
        load = pool.load(0, {"input": (1, 3, 16, 16, 2)}, 0, (0, 100))  # wrong rank: ORT refuses it
        with pytest.raises(TrtprofError, match="load 0 \\(worker process\\)"):
            load.warm_up(TimingConfig(warmup=1, iterations=2))
    finally:
        pool.close()


def test_a_worker_that_dies_is_reported_with_its_stderr(fp32_record, tmp_path):
    broken = pickle.loads(pickle.dumps(fp32_record))
    object.__setattr__(broken, "meta_path", tmp_path / "nowhere" / "x.json")
    pool = workers.WorkerPool({"fp32": broken})
    try:
        with pytest.raises(TrtprofError, match="load 0|worker 0"):
            pool.start(1)
    finally:
        pool.close()


def test_a_worker_can_be_told_its_gpu(fp32_record):
    import os

    if not os.path.exists("/proc/self/environ"):
        pytest.skip("reads the worker's environment from /proc (Linux)")
    pool = workers.WorkerPool({"fp32": fp32_record}, device="1")
    try:
        pool.start(1)
        environ = open(f"/proc/{pool.workers[0].proc.pid}/environ", "rb").read().split(b"\0")
        assert b"CUDA_VISIBLE_DEVICES=1" in environ
    finally:
        pool.close()


def test_worker_trims_device_memory_before_going_idle(monkeypatch):
    """serve() asks each runner to give back cached device memory after its warm-up and after every
    batch of rounds (before replying), so idle loads do not hold autotuning workspaces. A recording
    fake runner stands in for the torch runner; the protocol is the real one, over in-memory pipes."""
    import io
    import pickle

    from trtprof.measure import bench

    log = []

    class RecordingRunner:
        inputs = ()

        def trim(self):
            log.append("trim")

        def close(self):
            log.append("close")

    monkeypatch.setattr(bench, "load_runner", lambda record, **options: RecordingRunner())
    monkeypatch.setattr(interleave, "measure_block", lambda runner, feeds, config: log.append("block") or "samples")
    monkeypatch.setattr("trtprof.model.inputs.make_inputs", lambda *a, **k: {})
    inp = io.BytesIO()
    for message in (("init", {"a": None, "b": None}, True), ("feeds", {}, 0, (0, 1), None), ("warm", None),
                    ("rounds", 0, 2, None, ["a", "b"]), ("close",)):
        pickle.dump(message, inp)
    inp.seek(0)
    out = io.BytesIO()
    workers.serve(inp, out)
    out.seek(0)
    replies = []
    while True:
        try:
            replies.append(pickle.load(out))
        except EOFError:
            break
    assert [kind for kind, _ in replies] == ["ready", "ok", "ok", "ok"]
    assert replies[3][1] == [{"a": "samples", "b": "samples"}, {"b": "samples", "a": "samples"}]
    # warm: 2 blocks then both runners trimmed; rounds: 4 blocks then trimmed; close at the end
    assert log == ["block"] * 2 + ["trim"] * 2 + ["block"] * 4 + ["trim"] * 2 + ["close"] * 2


def test_compare_starts_its_workers_before_the_accuracy_pass_and_stops_them_if_it_fails(fp32_record):
    """The worker processes load their engines while load 0's worker runs the accuracy pass (on a GPU
    host both take seconds); if that pass fails, no worker is left running. The failure is real: the
    worker's ORT session refuses the shapes the recording pool swaps in."""
    from trtprof.compare.core import CompareOptions, compare_records

    pools, seen = [], []

    class RecordingPool(workers.WorkerPool):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            pools.append(self)

        def outputs(self, batches, seed, int_range):
            seen.append(len(self.workers))  # spawned already, when the pass is asked for
            return super().outputs([(b, {"input": (1, 3, 16, 16, 2)}, n) for b, _, n in batches], seed, int_range)

    plan = interleave.RoundPlan(time_budget_s=0.0, round_iterations=5, min_loads=3, min_rounds=2)
    original = workers.WorkerPool
    workers.WorkerPool = RecordingPool
    try:
        with pytest.raises(TrtprofError) as caught:
            compare_records({"fp32": fp32_record, "fp32#2": fp32_record}, [1], CompareOptions(plan=plan))
    finally:
        workers.WorkerPool = original
    assert seen == [3]
    assert "load 0" not in str(caught.value)  # the pass's error reads as the parent's own would
    assert all(w.proc.poll() is not None for w in pools[0].workers)


def test_a_worker_reports_its_arms_and_runs_the_accuracy_pass(fp32_record):
    """``ready`` carries each arm's specs and device; ``outputs`` runs every arm once on the seeded
    inputs the parent would make (the same arrays: ``make_inputs`` of the same specs and seed)."""
    from trtprof.measure import bench
    from trtprof.model.inputs import make_inputs

    pool = workers.WorkerPool({"fp32": fp32_record, "fp32#2": fp32_record})
    try:
        facts = pool.facts()
        assert set(facts) == {"fp32", "fp32#2"} and facts["fp32"].device == "cpu"
        shapes = {"input": (2, 3, 16, 16)}
        (outputs, memory), = pool.outputs([(2, shapes, 0)], 7, (0, 100)).values()
    finally:
        pool.close()
    runner = bench.load_runner(fp32_record)
    try:
        here = {k: np.asarray(v) for k, v in runner.infer(make_inputs(runner.inputs, shapes, seed=7)).items()}
        assert tuple(facts["fp32"].inputs) == tuple(runner.inputs)
    finally:
        runner.close()
    assert set(outputs) == {"fp32", "fp32#2"} and set(memory) == {"fp32", "fp32#2"}
    for name, value in here.items():
        np.testing.assert_array_equal(outputs["fp32"][name], value)
    assert [r["what"] for r in pool.concurrent["work"]][-1] == "the accuracy pass (load 0's worker)"


# -- spares: workers started before the engines are known (issue 27: the GPU's worker start-up) ----------


def alive(worker: workers.Worker) -> bool:
    return worker.proc.poll() is None


def test_spares_are_taken_by_the_next_pool_and_load_its_engines(fp32_record):
    """A spare (started with the torch backend's preload: torch and onnx2torch imported ahead, where
    installed) becomes the pool's worker — the same process — and then loads and runs the engines."""
    with workers.spares(2, ["torch"]):
        spares = list(workers.waiting_spares())
        assert len(spares) == 2 and all(alive(w) for w in spares)
        pool = workers.WorkerPool({"a": fp32_record, "b": fp32_record})
        try:
            pool.start(3)  # two spares, one started fresh
            assert [w.proc.pid for w in pool.workers[:2]] == [w.proc.pid for w in spares]
            assert [w.index for w in pool.workers] == [0, 1, 2] and workers.waiting_spares() == []
            load = pool.load(1, {"input": (1, 3, 16, 16)}, 0, (0, 100))
            assert set(load.warm_up(TimingConfig(warmup=1, iterations=2))) == {"a", "b"}
        finally:
            pool.close()
    assert not any(alive(w) for w in spares)


def test_unused_spares_are_stopped_on_exit_and_a_pool_on_another_device_starts_its_own(fp32_record):
    with workers.spares(1, ["torch"], device="7"):
        (spare,) = workers.waiting_spares()
        pool = workers.WorkerPool({"a": fp32_record}, device=None)
        try:
            pool.spawn(1)
            assert pool.workers[0] is not spare and workers.waiting_spares() == [spare]
        finally:
            pool.kill()
            pool.close()
    assert workers.waiting_spares() == [] and not alive(spare)


def test_no_spares_for_backends_without_heavy_libraries():
    """ONNX Runtime imports in ~0.1 s: spares would only compete with the parent for the CPU."""
    assert workers.has_preload("torch") and not workers.has_preload("onnxruntime")
    assert not workers.has_preload("no-such-backend")
    with workers.spares(3, ["onnxruntime", "no-such-backend"]):
        assert workers.waiting_spares() == []


def test_a_preload_that_fails_is_left_for_init_to_report(monkeypatch):
    from trtprof import backends

    class Failing:
        def preload(self):
            raise RuntimeError("libcudart.so.13: cannot open shared object file")

    monkeypatch.setattr(backends, "get", lambda name: Failing())
    workers.preload(["torch"])  # no exception: the engine's init meets it again, named


def test_an_interrupt_while_the_workers_close_keeps_every_decided_batch_size(fp32_record, monkeypatch):
    """Ctrl-C after the last batch size, while the workers exit: the verdicts are kept (marked
    interrupted), the workers killed — not a lost comparison."""
    from trtprof.compare.core import CompareOptions, compare_records

    pools, procs = [], []
    real_close = workers.WorkerPool.close

    def interrupted_once(self):
        pools.append(self)
        if len(pools) == 1:
            procs.extend(w.proc for w in self.workers)
            raise KeyboardInterrupt
        real_close(self)

    monkeypatch.setattr(workers.WorkerPool, "close", interrupted_once)
    plan = interleave.RoundPlan(time_budget_s=0.0, round_iterations=5, min_loads=2, min_rounds=2)
    report = compare_records({"fp32": fp32_record, "fp32#2": fp32_record}, [1], CompareOptions(plan=plan))
    assert report.interrupted and report.pending == [] and [c.batch_size for c in report.comparisons] == [1]
    assert len(pools) == 2 and len(procs) == 2 and all(p.poll() is not None for p in procs)


@pytest.mark.parametrize("planned, opened, started", [(6, 1, 6), (29, 1, 9), (29, 3, 11), (29, 28, 29)])
def test_a_pool_starts_at_most_spawn_ahead_workers_beyond_the_load_it_opens(fp32_record, monkeypatch, planned,
                                                                             opened, started):
    """--min-loads 29 must not start 29 processes at once (on a GPU each makes a CUDA context): the
    planned loads start SPAWN_AHEAD (8) at a time, ahead of the load being opened. Recording fake
    workers (no processes): only the pool's arithmetic is under test."""
    class FakeWorker:
        def __init__(self, index, *args, **kwargs):
            self.index = index

        def wait_ready(self):
            return None

    monkeypatch.setattr(workers, "Worker", FakeWorker)
    assert workers.SPAWN_AHEAD == 8
    pool = workers.WorkerPool({"a": fp32_record}, planned=planned)
    pool.spawn(min(planned, workers.SPAWN_AHEAD))
    for index in range(opened):
        pool.load(index, {"input": (1, 3, 16, 16)}, 0, (0, 100))
    assert len(pool.workers) == started


def test_close_kills_the_workers_never_handed_a_load_and_lets_the_others_exit(fp32_record):
    """Workers started ahead and never used (the budget ended the run first) are killed at close — one
    still starting would be waited for after the budget — while a worker that measured exits itself."""
    pool = workers.WorkerPool({"a": fp32_record}, planned=3)
    pool.start(3)
    pool.load(0, {"input": (1, 3, 16, 16)}, 0, (0, 100)).warm_up(TimingConfig(warmup=0, iterations=1))
    procs = [w.proc for w in pool.workers]
    pool.close()
    assert [p.returncode for p in procs] == [0, -9, -9] and pool.used == 0


def test_a_dead_workers_tail_drops_python_warnings_and_keeps_the_error():
    stderr = ("/x/torch/export/pt2_archive/_package.py:790: UserWarning: The given buffer is not writable\n"
              "  tensor = torch.frombuffer(\n"
              "Traceback (most recent call last):\n"
              "  File \"w.py\", line 3, in <module>\n"
              "MemoryError: out of host memory\n")
    tail = workers.error_tail(stderr)
    assert "UserWarning" not in tail and "frombuffer" not in tail
    assert tail.endswith("MemoryError: out of host memory") and "Traceback" in tail
    assert workers.error_tail("a.py:1: DeprecationWarning: old\n") == ""


def test_a_worker_killed_by_a_signal_is_named_by_the_signal_alone(fp32_record):
    import signal as sig

    pool = workers.WorkerPool({"fp32": fp32_record})
    try:
        pool.start(1)
        w = pool.workers[0]
        w.proc.send_signal(sig.SIGKILL)
        w.proc.wait()
        w.stderr.write(b"/x/a.py:1: UserWarning: noise that explains nothing\n")
        died = w._died()
        assert str(died).endswith("was killed by SIGKILL"), str(died)
    finally:
        pool.close()


def test_a_worker_asked_to_profile_itself_writes_its_statistics_when_it_ends(fp32_record, tmp_path, monkeypatch):
    """``TRTPROF_WORKER_PROFILE`` (a developer's diagnostic): a real worker serves under cProfile and writes pstats'
    file into the folder when it is closed, its commands in it; its answers are the same."""
    import pstats

    from trtprof.measure import worker_loop

    folder = tmp_path / "prof"
    monkeypatch.setenv(worker_loop.PROFILE_ENV, str(folder))
    pool = workers.WorkerPool({"fp32": fp32_record})
    try:
        load = pool.load(0, {"input": (1, 3, 16, 16)}, 0, (0, 100))
        warm = load.warm_up(TimingConfig(warmup=1, iterations=3))
        assert warm["fp32"].n == 3
    finally:
        pool.close()
    (written,) = folder.glob("worker-*-*.prof")
    names = {name for (_, _, name) in pstats.Stats(str(written)).stats}  # type: ignore[attr-defined]
    assert {"serve", "init", "warm"} <= names


def test_a_profile_folder_that_cannot_be_written_loses_the_statistics_not_the_run(tmp_path, capsys):
    from trtprof.measure import worker_loop

    blocker = tmp_path / "a-file"
    blocker.write_text("mine")
    ran: list[int] = []
    worker_loop.profiled(str(blocker / "prof"), lambda: ran.append(1))
    assert ran == [1] and "statistics not written" in capsys.readouterr().err and blocker.read_text() == "mine"
