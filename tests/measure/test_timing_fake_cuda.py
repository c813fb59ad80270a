"""time_device's wiring on a FAKE CUDA runtime (CPU): which events bracket which work, what lands in
each stage, when copies and graphs are used, and that every resource is released.

The fake keeps a GPU clock in milliseconds that only the faked work advances (an H2D copy 0.25 ms
per input, the compute 1.0 ms, a D2H copy 0.125 ms per output); event records stamp that clock. So
each stage has a known value and a wrong pairing of events shows as a wrong number. It says nothing
about real GPU timing (tests/measure/test_timing_gpu.py does, on a GPU).
"""
from __future__ import annotations

from contextlib import contextmanager
from types import SimpleNamespace

import numpy as np
import pytest

from trtprof.system import cuda, nvml
from trtprof.spec import TensorSpec
from trtprof.measure.timing import EAGER_BOUND_RATIO, EAGER_PROBE_RUNS, TimingConfig, launch_notes, time_device

H2D_MS, COMPUTE_MS, D2H_MS = 0.25, 1.0, 0.125


class FakeGpu:
    """The fake device: a clock, what is open, and what happened."""

    def __init__(self) -> None:
        self.now_ms = 0.0
        self.open = 0
        self.launches = 0
        self.graph_launches = 0
        self.uploads_before_loop = 0


class FakeResource:
    def __init__(self, gpu: FakeGpu) -> None:
        self.gpu = gpu
        gpu.open += 1

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.gpu.open -= 1


def install(monkeypatch, gpu: FakeGpu) -> None:
    class FakeStream(FakeResource):
        handle = raw = "stream"

        def synchronize(self) -> None:
            pass

    class FakeEvent(FakeResource):
        def __init__(self, blocking_sync: bool = True) -> None:
            super().__init__(gpu)
            self.t_ms = 0.0
            self.raw = self

        def synchronize(self) -> None:
            pass

        def elapsed_ms(self, end: "FakeEvent") -> float:
            return end.t_ms - self.t_ms

    class FakePinned(FakeResource):
        def __init__(self, nbytes: int) -> None:
            super().__init__(gpu)
            self.nbytes = nbytes

        def array(self, shape, dtype) -> np.ndarray:
            return np.zeros(shape, dtype)

    class FakeDeviceBuffer(FakeResource):
        def __init__(self, nbytes: int) -> None:
            super().__init__(gpu)
            self.ptr = 1000 + gpu.open

    class FakeGraph(FakeResource):
        def __init__(self, fn, stream) -> None:
            super().__init__(gpu)
            self.fn = fn

        def launch(self) -> None:
            gpu.graph_launches += 1
            self.fn()

    def memcpy_async(dst, src, nbytes, kind, stream):
        gpu.now_ms += H2D_MS if kind == "h2d" else D2H_MS
        return (0,)

    def event_record(event, stream):
        event.t_ms = gpu.now_ms
        return (0,)

    runtime = SimpleNamespace(cudaMemcpyAsync=memcpy_async, cudaEventRecord=event_record,
                              cudaMemcpyKind=SimpleNamespace(cudaMemcpyHostToDevice="h2d",
                                                             cudaMemcpyDeviceToHost="d2h"))

    def upload(ptr, view, stream) -> None:
        gpu.uploads_before_loop += 1

    for name, value in {
        "device_count": lambda: 1, "current_device": lambda: 0, "pci_bus_id": lambda i: "0000:00:00.0",
        "device_name": lambda i: "FAKE GPU", "Stream": lambda: FakeStream(gpu), "Event": FakeEvent,
        "PinnedHostBuffer": FakePinned, "DeviceBuffer": FakeDeviceBuffer, "Graph": FakeGraph,
        "memcpy_htod_async": upload, "runtime": lambda: runtime, "ok": lambda result, what: None,
    }.items():
        monkeypatch.setattr(cuda, name, value)
    monkeypatch.setattr(nvml, "gpu_state", lambda pci_bus_id=None: {"name": "FAKE GPU"})


class FakeRunner:
    """A FAKE device runner with two inputs and one output; ``enqueue`` is 1.0 ms of fake GPU work."""

    def __init__(self, gpu: FakeGpu, with_bind: bool = False) -> None:
        self.gpu = gpu
        self.outputs = (TensorSpec("y", "float32", (2, 3)),)
        self.bound = 0
        if with_bind:
            self.bind = self._bind

    def prepare(self, input_shapes):
        return {"y": (input_shapes["a"][0], 3)}

    def enqueue(self, buffers, stream) -> None:
        assert set(buffers) == {"a", "b", "y"}
        self.gpu.launches += 1
        self.gpu.now_ms += COMPUTE_MS

    @contextmanager
    def _bind(self, buffers, stream):
        self.bound += 1
        yield lambda: self.enqueue(buffers, stream)


FEEDS = {"a": np.ones((2, 4), np.float32), "b": np.ones((2, 5), np.float32)}


@pytest.mark.parametrize("with_bind", [False, True])
def test_stages_are_bracketed_by_the_right_events(monkeypatch, with_bind):
    gpu = FakeGpu()
    install(monkeypatch, gpu)
    runner = FakeRunner(gpu, with_bind)
    samples = time_device(runner, FEEDS, TimingConfig(warmup=3, iterations=7))
    stages = samples.stages
    assert set(stages) == {"h2d_ms", "compute_ms", "d2h_ms", "latency_ms", "enqueue_ms"}
    assert all(len(v) == 7 for v in stages.values())
    np.testing.assert_allclose(stages["h2d_ms"], 2 * H2D_MS)  # two inputs
    np.testing.assert_allclose(stages["compute_ms"], COMPUTE_MS)
    np.testing.assert_allclose(stages["d2h_ms"], D2H_MS)  # one output
    np.testing.assert_allclose(stages["latency_ms"], 2 * H2D_MS + COMPUTE_MS + D2H_MS)
    assert samples.warmup_done == 3 and gpu.launches == 3 + 7
    assert gpu.uploads_before_loop == 2  # the single upload before anything runs
    assert runner.bound == (1 if with_bind else 0)
    assert samples.device["name"] == "FAKE GPU" and samples.device["sync"] == "blocking"
    assert gpu.open == 0  # every stream, event and buffer released


def test_no_copies_leaves_the_copies_out(monkeypatch):
    gpu = FakeGpu()
    install(monkeypatch, gpu)
    samples = time_device(FakeRunner(gpu), FEEDS, TimingConfig(warmup=0, iterations=4, copies=False))
    assert set(samples.stages) == {"compute_ms", "latency_ms", "enqueue_ms"}
    np.testing.assert_allclose(samples.stages["latency_ms"], COMPUTE_MS)
    assert gpu.now_ms == pytest.approx(4 * COMPUTE_MS)  # no copy ran in the loop


def test_cuda_graph_replays_after_one_eager_run(monkeypatch):
    gpu = FakeGpu()
    install(monkeypatch, gpu)
    samples = time_device(FakeRunner(gpu), FEEDS, TimingConfig(warmup=2, iterations=5, cuda_graph=True,
                                                               spin_wait=True))
    probe = 1 + EAGER_PROBE_RUNS  # the eager/graph ratio: one of each, then the timed runs of each
    assert gpu.graph_launches == probe + 2 + 5  # every timed and warm-up call is a replay
    assert gpu.launches == 1 + probe + (probe + 2 + 5)  # the eager run before the capture, the eager probe
    np.testing.assert_allclose(samples.stages["compute_ms"], COMPUTE_MS)
    assert samples.device["sync"] == "spin" and gpu.open == 0
    launch = samples.device["launch"]
    assert launch["mode"] == "cuda_graph" and launch["eager_over_graph"] == pytest.approx(1.0)
    assert not any("eager" in n for n in samples.notes)  # equal times: nothing host-bound to say
    runner = FakeRunner(gpu)
    time_device(runner, FEEDS, TimingConfig(warmup=0, iterations=1, cuda_graph=True))
    before = gpu.launches
    time_device(runner, FEEDS, TimingConfig(warmup=0, iterations=1, cuda_graph=True))
    assert gpu.launches - before == 1 + 1  # the same runner's ratio is measured once: eager run + the replay
    before = gpu.launches
    time_device(runner, {k: np.ones((3, *v.shape[1:]), v.dtype) for k, v in FEEDS.items()},
                TimingConfig(warmup=0, iterations=1, cuda_graph=True))
    assert gpu.launches - before == 1 + 2 * (1 + EAGER_PROBE_RUNS) + 1  # another batch size: measured again


def test_a_failed_capture_runs_that_arm_eager_and_says_why(monkeypatch):
    gpu = FakeGpu()
    install(monkeypatch, gpu)

    class RefusingGraph:
        def __init__(self, fn, stream) -> None:
            raise RuntimeError("Cannot copy between CPU and CUDA tensors during CUDA graph capture unless the "
                               "CPU tensor is pinned\nC++ context")

    monkeypatch.setattr(cuda, "Graph", RefusingGraph)
    samples = time_device(FakeRunner(gpu), FEEDS, TimingConfig(warmup=2, iterations=5, cuda_graph=True))
    assert gpu.graph_launches == 0 and gpu.launches == 1 + 2 + 5
    assert samples.device["launch"]["mode"] == "eager"
    (note,) = [n for n in samples.notes if n.startswith("eager:")]
    assert "CUDA graph capture failed (RuntimeError: Cannot copy between CPU and CUDA tensors" in note
    assert "\n" not in note and gpu.open == 0


def test_out_of_memory_during_capture_is_not_a_capture_problem(monkeypatch):
    gpu = FakeGpu()
    install(monkeypatch, gpu)

    class OutOfMemoryError(RuntimeError):
        pass

    class Oom:
        def __init__(self, fn, stream) -> None:
            raise OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB")

    monkeypatch.setattr(cuda, "Graph", Oom)
    with pytest.raises(OutOfMemoryError):
        time_device(FakeRunner(gpu), FEEDS, TimingConfig(warmup=0, iterations=2, cuda_graph=True))


@pytest.mark.parametrize("ratio,said", [(EAGER_BOUND_RATIO - 0.01, False), (EAGER_BOUND_RATIO, True)])
def test_host_bound_eager_is_said_with_its_ratio_at_the_threshold(ratio, said):
    info = {"mode": "cuda_graph", "eager_ms": ratio * 2.0, "graph_ms": 2.0, "eager_over_graph": ratio}
    notes = launch_notes(info)
    assert bool(notes) is said
    if said:
        assert f"eager/graph {ratio:.2f}×" in notes[0] and "host-bound" in notes[0]
    assert launch_notes({"mode": "eager"}) == []


def test_the_gpu_is_watched_through_the_timed_loop_and_arms_keep_every_block(monkeypatch):
    """A FAKE pynvml whose throttle mask is set only while the timed loop runs (the runner's enqueue
    sets it, the last sample after the loop clears it): the result's ``device.during`` counts it,
    and an interleave Arm merges the watches of its blocks (system.validity judges them)."""
    import sys

    from tests.system.test_validity import FakePynvml
    from trtprof.measure.interleave import Arm

    fake = FakePynvml()
    monkeypatch.setitem(sys.modules, "pynvml", fake)
    gpu = FakeGpu()
    install(monkeypatch, gpu)
    runner = FakeRunner(gpu)
    enqueue = runner.enqueue

    def throttled(buffers, stream):
        fake.mask = 0x4  # sw_power_cap while the loop runs
        enqueue(buffers, stream)

    runner.enqueue = throttled
    arm = Arm("fp16")
    watches = []
    for _ in range(2):
        samples = time_device(runner, FEEDS, TimingConfig(warmup=0, iterations=3))
        fake.mask = 0
        arm.add(samples)
        watches.append(samples.device["during"])
    for during in watches:  # at least the sample that closes the loop saw it; the one before it did not
        assert during["samples"] >= 2 and during["throttle_samples"]["sw_power_cap"] >= 1
    assert arm.device["during"]["samples"] == sum(w["samples"] for w in watches)
    assert arm.device["during"]["throttle_samples"]["sw_power_cap"] == sum(
        w["throttle_samples"]["sw_power_cap"] for w in watches)


class KeepingRunner(FakeRunner):
    """A FAKE device runner that opts in to keeping its device state (``keeps_launch``), counting prepares."""

    keeps_launch = True

    def __init__(self, gpu: FakeGpu) -> None:
        super().__init__(gpu)
        self.prepared = 0

    def prepare(self, input_shapes):
        self.prepared += 1
        return super().prepare(input_shapes)


def test_a_keeper_keeps_an_opted_in_runners_state_across_blocks_of_one_shape(monkeypatch):
    from trtprof.measure.kept_launch import LaunchKeeper

    gpu = FakeGpu()
    install(monkeypatch, gpu)
    runner, config = KeepingRunner(gpu), TimingConfig(warmup=1, iterations=3)
    with LaunchKeeper() as keeper:
        first = time_device(runner, FEEDS, config)
        kept_open = gpu.open
        # kept: the loop's stream and a pinned + device buffer for each of the two inputs and the output
        assert kept_open == 1 + 2 * 3 and runner.prepared == 1 and gpu.uploads_before_loop == 2
        second = time_device(runner, FEEDS, config)
        assert runner.prepared == 1 and gpu.uploads_before_loop == 2  # no prepare, no upload: the same arrays
        assert gpu.open == kept_open  # the block's events went, the kept buffers stayed
        np.testing.assert_allclose(second.stages["latency_ms"], first.stages["latency_ms"])
        assert first.setup_s >= 0 and second.setup_s >= 0
        other_values = {k: v.copy() for k, v in FEEDS.items()}
        time_device(runner, other_values, config)
        assert runner.prepared == 1 and gpu.uploads_before_loop == 4  # other arrays: their values uploaded again
        bigger = {k: np.ones((3, *v.shape[1:]), v.dtype) for k, v in FEEDS.items()}
        time_device(runner, bigger, config)
        assert runner.prepared == 2 and gpu.open == 2 * kept_open  # another shape: a state of its own beside
        time_device(runner, other_values, config)  # the first shape's state still kept
        assert runner.prepared == 2 and gpu.uploads_before_loop == 4 + 2
        keeper.clear()
        assert gpu.open == 0
        time_device(runner, FEEDS, config)
        assert runner.prepared == 3 and gpu.open == kept_open
    assert gpu.open == 0  # the scope's end releases what it kept


def test_a_keeper_keeps_at_most_its_limit_of_states_per_runner_the_least_recently_used_released(monkeypatch):
    from trtprof.measure import kept_launch
    from trtprof.measure.kept_launch import LaunchKeeper

    gpu = FakeGpu()
    install(monkeypatch, gpu)
    monkeypatch.setattr(kept_launch, "MAX_KEPT_PER_RUNNER", 2)
    runner, other, config = KeepingRunner(gpu), KeepingRunner(gpu), TimingConfig(warmup=0, iterations=2)
    feeds = {b: {k: np.ones((b, *v.shape[1:]), v.dtype) for k, v in FEEDS.items()} for b in (1, 2, 3)}
    with LaunchKeeper() as keeper:
        time_device(other, feeds[1], config)  # another runner's state: not counted against this one's limit
        for b in (1, 2, 1, 3):  # batch 1 used again after 2: batch 2 is the least recently used when 3 comes
            time_device(runner, feeds[b], config)
        assert runner.prepared == 3 and len(keeper.kept) == 3
        kept_batches = sorted(dict(s.key[0])["a"][0] for s in keeper.kept.values() if s.runner is runner)
        assert kept_batches == [1, 3]
        time_device(runner, feeds[2], config)
        assert runner.prepared == 4  # released, so set up again
        time_device(other, feeds[1], config)
        assert other.prepared == 1


def test_outside_a_keeper_or_without_opting_in_every_block_sets_up_and_releases(monkeypatch):
    from trtprof.measure.kept_launch import LaunchKeeper

    gpu = FakeGpu()
    install(monkeypatch, gpu)
    keeping = KeepingRunner(gpu)
    for _ in range(2):
        time_device(keeping, FEEDS, TimingConfig(warmup=0, iterations=2))
        assert gpu.open == 0
    assert keeping.prepared == 2
    plain = FakeRunner(gpu)
    with LaunchKeeper():
        for _ in range(2):
            time_device(plain, FEEDS, TimingConfig(warmup=0, iterations=2))
            assert gpu.open == 0
    assert gpu.uploads_before_loop == 2 * 2 + 2 * 2


def test_a_kept_state_is_per_copies_and_graph_setting(monkeypatch):
    from trtprof.measure.kept_launch import LaunchKeeper

    gpu = FakeGpu()
    install(monkeypatch, gpu)
    runner = KeepingRunner(gpu)
    with LaunchKeeper():
        time_device(runner, FEEDS, TimingConfig(warmup=0, iterations=2))
        time_device(runner, FEEDS, TimingConfig(warmup=0, iterations=2, copies=False))
        assert runner.prepared == 2
        samples = time_device(runner, FEEDS, TimingConfig(warmup=0, iterations=2, copies=False))
        assert runner.prepared == 2 and set(samples.stages) == {"compute_ms", "latency_ms", "enqueue_ms"}


def test_a_failed_set_up_inside_a_keeper_releases_what_it_made(monkeypatch):
    from trtprof.measure.kept_launch import LaunchKeeper

    gpu = FakeGpu()
    install(monkeypatch, gpu)

    class FailingPinned:
        made = 0

        def __init__(self, nbytes):
            FailingPinned.made += 1
            if FailingPinned.made == 3:  # the output's pinned buffer, after both inputs' pairs
                raise MemoryError("cudaHostAlloc: out of memory")
            self.inner = FakeResource(gpu)

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            self.inner.__exit__(*exc)

        def array(self, shape, dtype):
            return np.zeros(shape, dtype)

    monkeypatch.setattr(cuda, "PinnedHostBuffer", FailingPinned)
    runner = KeepingRunner(gpu)
    with LaunchKeeper() as keeper:
        with pytest.raises(MemoryError):
            time_device(runner, FEEDS, TimingConfig(warmup=0, iterations=2))
        assert gpu.open == 0 and keeper.kept == {}


def test_a_keeper_holds_one_nvml_session_from_its_first_gpu_block_to_its_end(monkeypatch):
    import sys

    from tests.system.test_validity import FakePynvml
    from trtprof.measure.kept_launch import LaunchKeeper

    fake = FakePynvml()
    sessions = []
    fake.nvmlInit = lambda: sessions.append(1)
    fake.nvmlShutdown = lambda: sessions.pop()
    monkeypatch.setitem(sys.modules, "pynvml", fake)
    gpu = FakeGpu()
    install(monkeypatch, gpu)
    with LaunchKeeper():
        assert sessions == []
        time_device(FakeRunner(gpu), FEEDS, TimingConfig(warmup=0, iterations=2))
        assert len(sessions) == 1  # held between blocks
        time_device(KeepingRunner(gpu), FEEDS, TimingConfig(warmup=0, iterations=2))
        assert len(sessions) == 1
    assert sessions == []
    time_device(FakeRunner(gpu), FEEDS, TimingConfig(warmup=0, iterations=2))
    assert sessions == []  # outside a scope: each block opens and closes its own


def test_a_worker_keeps_each_batch_sizes_state_until_its_end():
    """The worker's side of compare (measure.worker_loop): ``feeds`` for the next batch size leaves the state
    kept at the last one (priming set up every batch size's before timing); the scope's end releases it."""
    from contextlib import ExitStack

    from trtprof.measure.kept_launch import KeptLaunch, LaunchKeeper
    from trtprof.measure.worker_loop import _WorkerState

    released = []
    with LaunchKeeper() as keeper:
        state = _WorkerState(None)
        state.runners = {"fp32": SimpleNamespace(inputs=(TensorSpec("a", "float32", (-1, 4)),))}
        stack = ExitStack()
        stack.callback(released.append, "batch 2")
        keeper.keep(KeptLaunch(runner=state.runners["fp32"], key=((("a", (2, 4)),), True, False), stack=stack))
        assert state.set_feeds({"a": (3, 4)}, 0, (0, 10), None) == ("ok", None)
        assert released == [] and len(keeper.kept) == 1 and state.feeds["a"].shape == (3, 4)
    assert released == ["batch 2"]


def test_priming_sets_up_launches_once_and_releases_everything(monkeypatch):
    from trtprof.measure.timing import prime_launch

    gpu = FakeGpu()
    install(monkeypatch, gpu)
    runner = KeepingRunner(gpu)
    prime_launch(runner, FEEDS, TimingConfig(cuda_graph=False))
    assert runner.prepared == 1 and gpu.launches == 1 and gpu.uploads_before_loop == 2 and gpu.open == 0
    prime_launch(runner, FEEDS, TimingConfig(cuda_graph=True))  # captured (after its eager run), replayed once
    assert gpu.graph_launches >= 1 and gpu.open == 0


def test_priming_inside_a_keeper_leaves_the_state_for_that_batchs_blocks(monkeypatch):
    from trtprof.measure.kept_launch import LaunchKeeper
    from trtprof.measure.timing import prime_launch

    gpu = FakeGpu()
    install(monkeypatch, gpu)
    runner, config = KeepingRunner(gpu), TimingConfig(warmup=0, iterations=2)
    bigger = {k: np.ones((3, *v.shape[1:]), v.dtype) for k, v in FEEDS.items()}
    with LaunchKeeper():
        prime_launch(runner, FEEDS, config)
        prime_launch(runner, bigger, config)
        assert runner.prepared == 2 and gpu.open > 0 and gpu.launches == 2
        uploads = gpu.uploads_before_loop
        time_device(runner, bigger, config)
        time_device(runner, FEEDS, config)
        assert runner.prepared == 2 and gpu.uploads_before_loop == uploads  # set up and uploaded by priming
        time_device(runner, {k: v.copy() for k, v in FEEDS.items()}, config)  # other arrays: uploaded again
        assert runner.prepared == 2 and gpu.uploads_before_loop == uploads + 2
    assert gpu.open == 0
