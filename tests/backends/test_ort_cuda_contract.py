"""Contract tests of the onnxruntime-cuda backend on the CPU, against a RECORDING FAKE of ORT's session
(no GPU here): which provider options a load asks for, what the runner binds, which run options each
launch carries (no sync, graph ids), the graph refused by ORT, and that the timing loop does not capture
around a runtime that replays its own graph. Real runs: benchmarks/ort_cuda_fidelity.sh on the H200 (results: benchmarks/results/ort_cuda-H200-2026-12-02/)."""
from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from trtprof import backends
from trtprof.backends import onnxruntime_cuda as oc
from trtprof.backends.onnxruntime import CUDA_EP, SessionSettings, provider_list
from trtprof.errors import BadModel, UnsupportedPrecision
from trtprof.measure import timing
from trtprof.spec import BuildSpec, Precision, TensorSpec

INPUTS = (TensorSpec("x", "float32", ("N", 3)),)
OUTPUTS = (TensorSpec("y", "float32", ("N", 2)),)


class FakeBinding:
    def __init__(self) -> None:
        self.inputs: list[tuple] = []
        self.outputs: list[tuple] = []

    def bind_input(self, name, device, device_id, dtype, shape, ptr):
        self.inputs.append((name, device, device_id, np.dtype(dtype), tuple(shape), ptr))

    def bind_output(self, name, device, device_id, dtype, shape, ptr):
        self.outputs.append((name, device, device_id, np.dtype(dtype), tuple(shape), ptr))


class FakeSession:
    """Records what the runner asks of an InferenceSession (a fake: nothing runs)."""

    def __init__(self, options: dict[str, str]) -> None:
        self.options = options
        self.runs: list[tuple[FakeBinding, dict[str, str]]] = []
        self.host_runs: list[dict[str, str]] = []

    def get_provider_options(self):
        return {CUDA_EP: {**self.options, "device_id": "0"}}

    def io_binding(self):
        return FakeBinding()

    def run_with_iobinding(self, binding, run_options):
        self.runs.append((binding, config(run_options)))

    def run(self, names, feeds, run_options):
        self.host_runs.append(config(run_options))
        batch = next(iter(feeds.values())).shape[0]
        return [np.zeros((batch, 2), np.float32) for _ in names]


def config(run_options) -> dict[str, str]:
    keys = (oc.NO_SYNC, oc.GRAPH_ID)
    return {k: run_options.get_run_config_entry(k) for k in keys if _has(run_options, k)}


def _has(run_options, key) -> bool:
    try:
        return run_options.get_run_config_entry(key) is not None
    except Exception:  # ORT raises for a key never set
        return False


class FakeStream:
    def __init__(self, handle: int = 4242) -> None:
        self.handle = handle
        self.closed = False

    def close(self) -> None:
        self.closed = True


def record(precision: Precision = Precision.FP16, options=None):
    spec = BuildSpec.make(model_sha256="x", backend="onnxruntime-cuda", precision=precision, batch_sizes=(1,),
                          options=options)
    return SimpleNamespace(spec=spec, inputs=INPUTS, outputs=OUTPUTS)


@pytest.fixture
def fake_ort(monkeypatch):
    """The backend's load with ORT's session and the CUDA stream replaced by recording fakes."""
    made: list[dict] = []
    streams: list[FakeStream] = []
    # graph: refused when not fixed; fixed_graph: refused even with the dims fixed
    refuse: dict[str, Exception | None] = {"graph": None, "any": None, "fixed_graph": None}

    def session(path, precision, *, path_, **kw):  # pragma: no cover - replaced below
        raise AssertionError

    def fake_session(model, precision, *, path, settings=SessionSettings(), device="cpu", cuda_options=None, **kw):
        log_severity, configure = settings.log_severity, settings.configure
        if memory["free"] is not None:  # a session's weights taken from the fake device's free memory
            memory["free"] -= memory["session"]
        overrides: dict[str, int] = {}
        if configure is not None:  # what the runner sets on ORT's SessionOptions (free-dimension overrides)
            configure(SimpleNamespace(add_free_dimension_override_by_name=overrides.__setitem__))
        made.append({"precision": precision, "device": device, "cuda_options": dict(cuda_options or {}),
                     "log_severity": log_severity, "overrides": overrides})
        if refuse["any"] is not None:
            raise refuse["any"]
        graph = (cuda_options or {}).get("enable_cuda_graph") == "1"
        refused = refuse["fixed_graph"] if overrides else refuse["graph"]
        if refused is not None and graph:
            raise refused
        made[-1]["session"] = FakeSession(dict(cuda_options or {}))
        return made[-1]["session"]

    def fake_stream():
        streams.append(FakeStream(4242 + len(streams)))
        return streams[-1]

    # the device's free memory as cudaMemGetInfo would say it (None: unreadable), what one session takes
    memory: dict[str, int | None] = {"free": 80 * 2 ** 30, "session": 100 * 2 ** 20}
    monkeypatch.setattr(oc, "free_device_bytes", lambda: memory["free"])
    monkeypatch.setattr(oc, "ort_session", fake_session)
    monkeypatch.setattr(oc, "cuda_availability", lambda: backends.base.Availability(True))
    from trtprof.system import cuda

    monkeypatch.setattr(cuda, "Stream", fake_stream)
    return SimpleNamespace(made=made, streams=streams, refuse=refuse, memory=memory)


def test_load_asks_for_the_chosen_provider_options_on_its_own_stream(fake_ort):
    runner = oc.OnnxRuntimeCudaBackend().load(Path("m.onnx"), record(Precision.FP16), log_warnings=True)
    (made,) = fake_ort.made
    opts = made["cuda_options"]
    assert made["device"] == "cuda" and made["log_severity"] == 2
    assert opts["enable_cuda_graph"] == "1"
    assert opts["cudnn_conv_algo_search"] == "EXHAUSTIVE" and opts["prefer_nhwc"] == "0"
    assert opts["user_compute_stream"] == str(fake_ort.streams[0].handle)
    assert runner.stream is fake_ort.streams[0]
    # recorded as ORT reports them, without the per-process stream pointer
    assert runner.settings["provider_options"]["cudnn_conv_algo_search"] == "EXHAUSTIVE"
    assert "user_compute_stream" not in runner.settings["provider_options"]
    assert runner.runtime_graph(True)["mode"] == "cuda_graph"


def test_what_if_options_override_the_defaults_and_graph_off_is_honoured(fake_ort):
    runner = oc.OnnxRuntimeCudaBackend().load(Path("m.onnx"), record(), graph=False,
                                             cuda_options={"prefer_nhwc": "1"})
    opts = fake_ort.made[0]["cuda_options"]
    assert opts["prefer_nhwc"] == "1" and opts["enable_cuda_graph"] == "0"
    info = runner.runtime_graph(True)
    assert info["mode"] == "eager" and info["capture_failed"] == "not enabled"


def test_a_graph_ort_refuses_runs_eager_and_says_why(fake_ort):
    cause = RuntimeError("[ONNXRuntimeError] : 1 : FAIL : This session cannot use the graph capture feature as "
                         "requested by the user as all compute graph nodes have not been partitioned to the "
                         "CUDAExecutionProvider")
    fake_ort.refuse["graph"] = BadModel("onnxruntime cannot load the model")
    fake_ort.refuse["graph"].__cause__ = cause
    runner = oc.OnnxRuntimeCudaBackend().load(Path("m.onnx"), record())
    assert [m["cuda_options"]["enable_cuda_graph"] for m in fake_ort.made] == ["1", "0"]
    info = runner.runtime_graph(True)
    assert info["mode"] == "eager" and "not been partitioned" in info["capture_failed"]
    assert timing.launch_notes(info)[0].startswith("eager: CUDA graph capture failed")


def graph_refused_error(text: str = "as all compute graph nodes have not been partitioned to the "
                        "CUDAExecutionProvider") -> BadModel:
    err = BadModel("onnxruntime cannot load the model")
    err.__cause__ = RuntimeError(f"[ONNXRuntimeError] : 1 : FAIL : This session cannot use the graph capture "
                                 f"feature as requested by the user {text}")
    return err


def test_a_refused_graph_is_captured_once_the_named_dims_are_fixed_at_prepare(fake_ort):
    fake_ort.refuse["graph"] = graph_refused_error()
    runner = oc.OnnxRuntimeCudaBackend().load(Path("m.onnx"), record())
    assert runner.runtime_graph(True)["mode"] == "eager"  # before prepare: the load's session, refused
    dynamic = runner.session
    assert runner.prepare({"x": (4, 3)}) == {"y": (4, 2)}
    # load: graph (refused), eager; prepare: graph with N fixed at 4 on the same stream
    assert [(m["cuda_options"]["enable_cuda_graph"], m["overrides"]) for m in fake_ort.made] == [
        ("1", {}), ("0", {}), ("1", {"N": 4})]
    assert fake_ort.made[2]["cuda_options"]["user_compute_stream"] == str(runner.stream.handle)
    fixed = runner.session
    assert fixed is not dynamic and fixed.host_runs == [{oc.GRAPH_ID: "-1"}]
    info = runner.runtime_graph(True)
    assert info["mode"] == "cuda_graph" and "capture_failed" not in info
    assert info["free_dimension_overrides"] == {"N": 4}  # in every result's device.launch
    assert runner.settings["free_dimension_overrides"] == {"N": 4}
    assert "not been partitioned" in runner.settings["cuda_graph_refused_dynamic"]
    with runner.bind({"x": 1, "y": 2}, runner.stream.handle) as launch:
        launch()
    assert fixed.runs[0][1][oc.GRAPH_ID] == "1"
    # another batch through infer (the accuracy path): the load's session, which takes any shape
    runner.infer({"x": np.zeros((2, 3), np.float32)})
    assert dynamic.host_runs == [{}] and len(fixed.host_runs) == 1
    runner.prepare({"x": (4, 3)})  # the same dims again: nothing reopened
    assert len(fake_ort.made) == 3
    runner.prepare({"x": (8, 3)})  # other dims: a session for them
    assert fake_ort.made[-1]["overrides"] == {"N": 8} and runner.runtime_graph(True)["mode"] == "cuda_graph"


def test_a_graph_refused_with_the_dims_fixed_too_stays_eager_and_says_both(fake_ort):
    fake_ort.refuse["graph"] = graph_refused_error()
    fake_ort.refuse["fixed_graph"] = graph_refused_error("as all compute graph nodes have not been partitioned to the CUDAExecutionProvider: NonZero")
    runner = oc.OnnxRuntimeCudaBackend().load(Path("m.onnx"), record())
    dynamic = runner.session
    runner.prepare({"x": (4, 3)})
    info = runner.runtime_graph(True)
    assert info["mode"] == "eager" and runner.session is dynamic
    assert "not been partitioned" in info["capture_failed"]
    assert "with the dims fixed (N=4) still:" in info["capture_failed"] and "NonZero" in info["capture_failed"]
    assert "free_dimension_overrides" not in runner.settings


def test_an_unnamed_dynamic_dim_cannot_be_fixed_and_is_named_as_the_reason(fake_ort):
    fake_ort.refuse["graph"] = graph_refused_error()
    rec = record()
    rec.inputs = (TensorSpec("x", "float32", (None, 3)),)
    runner = oc.OnnxRuntimeCudaBackend().load(Path("m.onnx"), rec)
    runner.prepare({"x": (4, 3)})
    assert len(fake_ort.made) == 2  # nothing reopened
    assert "unnamed dynamic dim" in runner.runtime_graph(True)["capture_failed"]


def test_an_accepted_graph_opens_no_second_session(fake_ort):
    runner = oc.OnnxRuntimeCudaBackend().load(Path("m.onnx"), record())
    runner.prepare({"x": (4, 3)})
    assert [m["overrides"] for m in fake_ort.made] == [{}]
    assert "free_dimension_overrides" not in runner.settings


def launch_once(runner):
    with runner.bind({"x": 10, "y": 20}, runner.stream.handle) as launch:
        launch()


def test_a_shape_met_after_a_capture_runs_on_a_session_of_its_own(fake_ort):
    """Issue 42: on the H200 one session that captured at batch 1, then ran and captured at 32, faulted replaying 1
    (cudaErrorIllegalAddress, EfficientNet-B0 and MobileNetV3-L). A shape the load's session did not run before
    its first capture gets a session of the same options (graph on, same stream); switching back opens nothing."""
    runner = oc.OnnxRuntimeCudaBackend().load(Path("m.onnx"), record())
    first = runner.session
    runner.prepare({"x": (1, 3)})
    launch_once(runner)  # the first capture
    assert runner.session is first and len(fake_ort.made) == 1 and "session_per_shape" not in runner.settings
    runner.prepare({"x": (32, 3)})
    second = runner.session
    assert second is not first and len(fake_ort.made) == 2
    opened = fake_ort.made[1]
    assert opened["cuda_options"] == fake_ort.made[0]["cuda_options"] and opened["overrides"] == {}
    assert runner.runtime_graph(True)["mode"] == "cuda_graph" and runner.settings["session_per_shape"] is True
    launch_once(runner)
    runner.prepare({"x": (1, 3)})  # back: the first session, its own graph ids, nothing opened
    assert runner.session is first and len(fake_ort.made) == 2 and runner.sessions_opened == 2
    launch_once(runner)
    assert [r[1][oc.GRAPH_ID] for r in second.runs] == ["1"] and [r[1][oc.GRAPH_ID] for r in first.runs] == ["1", "1"]
    assert first.host_runs == [{oc.GRAPH_ID: "-1"}] * 2 and second.host_runs == [{oc.GRAPH_ID: "-1"}]


def test_shapes_run_before_the_first_capture_share_the_loads_session(fake_ort):
    """What ran without fault on the H200: the session run eagerly at every shape before its first capture.
    ``expect_shapes`` does those runs (compare's workers call it before priming); then every shape is captured
    in the load's session, one graph id each, and no session is opened; ``prepare`` takes the output shapes of
    those runs instead of running again; after a capture it does nothing."""
    runner = oc.OnnxRuntimeCudaBackend().load(Path("m.onnx"), record())
    first = runner.session
    runner.expect_shapes([{"x": (1, 3)}, {"x": (32, 3)}])
    assert first.host_runs == [{oc.GRAPH_ID: "-1"}] * 2 and len(fake_ort.made) == 1
    for batch in (1, 32, 1, 32):
        assert runner.prepare({"x": (batch, 3)}) == {name: (batch, *rest) for name, (_, *rest) in
                                                      runner._ran_outputs[(("x", (1, 3)),)][1].items()}
        assert runner.session is first and "session_per_shape" not in runner.settings
        launch_once(runner)
    assert [r[1][oc.GRAPH_ID] for r in first.runs] == ["1", "2", "1", "2"] and len(fake_ort.made) == 1
    assert len(first.host_runs) == 2  # no second eager run at a shape expect_shapes ran
    runner.expect_shapes([{"x": (64, 3)}])  # after a capture: not run (it would be the fault's order)
    assert len(first.host_runs) == 2 and len(fake_ort.made) == 1
    runner.prepare({"x": (64, 3)})
    assert runner.session is not first and runner.sessions_opened == 2


def test_shapes_told_with_own_sessions_run_nothing_ahead_and_each_keeps_a_session(fake_ort):
    """A worker alone on the GPU (lone loads) tells its shapes with ``own_sessions``: ORT's Conv keeps one shape's
    cuDNN plans and builds them again whenever its session switches shape (~2 s per arm for EfficientNet-B0 on the
    H200), so each told shape gets a session of its own, opened when told, the first told keeping the load's;
    nothing runs ahead, every session runs (its zeros once, its launches) at its own shape only, switching back
    opens and runs nothing more."""
    runner = oc.OnnxRuntimeCudaBackend().load(Path("m.onnx"), record())
    first = runner.session
    runner.expect_shapes([{"x": (1, 3)}, {"x": (32, 3)}], own_sessions=True)
    assert first.host_runs == [] and len(fake_ort.made) == 2  # nothing ran ahead; the second shape's session opened
    second = fake_ort.made[1]["session"]
    assert second.host_runs == [] and fake_ort.made[1]["cuda_options"] == fake_ort.made[0]["cuda_options"]
    runner.expect_shapes([{"x": (1, 3)}, {"x": (32, 3)}], own_sessions=True)  # told again: nothing more
    assert len(fake_ort.made) == 2
    runner.prepare({"x": (1, 3)})  # the first told: the load's session
    assert runner.session is first and "session_per_shape" not in runner.settings
    launch_once(runner)
    runner.prepare({"x": (32, 3)})
    assert runner.session is second and runner.settings["session_per_shape"] is True
    assert runner.runtime_graph(True)["mode"] == "cuda_graph"
    launch_once(runner)
    for batch, session in ((1, first), (32, second), (1, first)):
        assert runner.prepare({"x": (batch, 3)}) == {"y": (batch, 2)}
        assert runner.session is session
        launch_once(runner)
    assert len(fake_ort.made) == 2 and runner.sessions_opened == 2
    # one zero run per session, at its shape, graph-less (ORT's graph id -1): later prepares take its output shapes
    assert first.host_runs == [{oc.GRAPH_ID: "-1"}] and second.host_runs == [{oc.GRAPH_ID: "-1"}]
    assert [r[1][oc.GRAPH_ID] for r in first.runs] == ["1"] * 3 and [r[1][oc.GRAPH_ID] for r in second.runs] == ["1"] * 2
    runner.infer({"x": np.zeros((32, 3), np.float32)})  # the accuracy path at a told shape: its own session
    assert len(second.host_runs) == 2 and len(first.host_runs) == 1


def test_the_accuracy_pass_told_the_shapes_sets_each_up_on_its_own_session(fake_ort):
    """Life 0 of lone loads tells its shapes before the accuracy pass: each arm's host run at a shape is that
    shape's first run on the session that will time it (ORT builds its cuDNN plans there, once), and priming's
    ``prepare`` takes that run's output shapes instead of running the session again."""
    runner = oc.OnnxRuntimeCudaBackend().load(Path("m.onnx"), record())
    first = runner.session
    runner.expect_shapes([{"x": (1, 3)}, {"x": (32, 3)}], own_sessions=True)
    second = fake_ort.made[1]["session"]
    for batch in (1, 32):
        runner.infer({"x": np.zeros((batch, 3), np.float32)})
    assert len(first.host_runs) == 1 and len(second.host_runs) == 1  # each shape on its own session
    runner.expect_shapes([{"x": (1, 3)}, {"x": (32, 3)}], own_sessions=True)  # priming tells them again
    assert runner.prepare({"x": (32, 3)}) == {"y": (32, 2)} and runner.session is second
    assert runner.prepare({"x": (1, 3)}) == {"y": (1, 2)} and runner.session is first
    assert len(first.host_runs) == 1 and len(second.host_runs) == 1 and len(fake_ort.made) == 2


def told_own(runner, batches=(32, 1, 256)):
    runner.expect_shapes([{"x": (b, 3)} for b in batches], own_sessions=True)


@pytest.mark.parametrize("room", ["inside", "outside"])
def test_sessions_of_their_own_only_where_their_weights_fit_half_the_free_memory(fake_ort, room):
    """A session per shape holds the weights once more per shape: the load measures what its session took
    (cudaMemGetInfo before and after), and ``own_sessions`` is honoured only where the 2 more sessions of 3 shapes
    fit within ``SESSION_ROOM`` of the free memory (here at exactly half, then one byte over); else the load's
    session runs every shape ahead, as side-by-side workers do, and the result's launch record says why."""
    runner = oc.OnnxRuntimeCudaBackend().load(Path("m.onnx"), record())
    assert runner.footprint == fake_ort.memory["session"]
    # 2 more sessions need 2 × its bytes, allowed up to half the free memory: 4 × its bytes free is the edge
    assert oc.SESSION_ROOM == 0.5
    fake_ort.memory["free"] = 4 * fake_ort.memory["session"] - (room == "outside")
    first = runner.session
    told_own(runner)
    if room == "inside":
        assert first.host_runs == []
        assert len(fake_ort.made) == 3  # the two more sessions, opened when told
        runner.prepare({"x": (1, 3)})
        assert runner.session is not first and "session_per_shape_refused" not in runner.settings
    else:
        assert len(first.host_runs) == 3 and len(fake_ort.made) == 1  # the shapes run ahead instead
        runner.prepare({"x": (32, 3)})
        assert runner.session is first and len(fake_ort.made) == 1
        assert "exceed 50% of the" in runner.runtime_graph(True)["session_per_shape_refused"]


def test_sessions_opened_by_earlier_runners_leave_less_room_for_the_next(fake_ort):
    """The free memory is read when each runner is told its shapes, after the sessions earlier runners opened."""
    one = oc.OnnxRuntimeCudaBackend().load(Path("m.onnx"), record())
    two = oc.OnnxRuntimeCudaBackend().load(Path("m.onnx"), record())
    three = oc.OnnxRuntimeCudaBackend().load(Path("m.onnx"), record())
    session = fake_ort.memory["session"]
    fake_ort.memory["free"] = 7 * session  # 2 more need 2 ≤ 3.5, then (5 left) 2 ≤ 2.5, then (3 left) 2 > 1.5
    told_own(one)
    told_own(two)
    assert one._own and two._own and fake_ort.memory["free"] == 3 * session
    told_own(three)
    assert not three._own and "exceed 50% of the 0.29 GiB free" in three._load_entry.notes["session_per_shape_refused"]


def test_unreadable_device_memory_keeps_one_session_and_says_why(fake_ort):
    fake_ort.memory["free"] = None
    runner = oc.OnnxRuntimeCudaBackend().load(Path("m.onnx"), record())
    assert runner.footprint is None
    told_own(runner, (1, 32))
    assert not runner._own and len(runner.session.host_runs) == 2
    assert "could not be read" in runner._load_entry.notes["session_per_shape_refused"]


def test_one_shape_told_with_own_sessions_needs_no_room(fake_ort):
    runner = oc.OnnxRuntimeCudaBackend().load(Path("m.onnx"), record())
    fake_ort.memory["free"] = 0
    told_own(runner, (8,))
    assert len(fake_ort.made) == 1 and "session_per_shape_refused" not in runner._load_entry.notes


def test_prepares_before_the_first_capture_share_the_loads_session(fake_ort):
    runner = oc.OnnxRuntimeCudaBackend().load(Path("m.onnx"), record())
    first = runner.session
    runner.prepare({"x": (1, 3)})
    runner.prepare({"x": (32, 3)})  # no launch yet: nothing captured, the same session
    launch_once(runner)
    runner.prepare({"x": (1, 3)})
    launch_once(runner)
    assert runner.session is first and len(fake_ort.made) == 1 and runner.sessions_opened == 1


def test_infer_at_shapes_met_after_a_capture_runs_on_one_graphless_session_that_trim_gives_back(fake_ort):
    runner = oc.OnnxRuntimeCudaBackend().load(Path("m.onnx"), record())
    first = runner.session
    runner.infer({"x": np.zeros((2, 3), np.float32)})  # before any capture: the load's session, shape kept
    assert len(fake_ort.made) == 1 and first.host_runs == [{oc.GRAPH_ID: "-1"}]
    runner.prepare({"x": (1, 3)})
    launch_once(runner)
    runner.infer({"x": np.zeros((5, 3), np.float32)})  # after it, at a shape never run: the graph-less session
    runner.infer({"x": np.zeros((5, 3), np.float32)})
    assert [m["cuda_options"]["enable_cuda_graph"] for m in fake_ort.made] == ["1", "0"]
    assert runner.sessions_opened == 2 and len(first.host_runs) == 2
    runner.infer({"x": np.zeros((2, 3), np.float32)})  # run before the capture: the load's session, no graph
    runner.infer({"x": np.zeros((1, 3), np.float32)})
    assert first.host_runs == [{oc.GRAPH_ID: "-1"}] * 4
    runner.trim()
    assert runner.sessions_opened == 1
    runner.infer({"x": np.zeros((5, 3), np.float32)})
    assert len(fake_ort.made) == 3 and fake_ort.made[-1]["cuda_options"]["enable_cuda_graph"] == "0"


def test_with_the_graph_off_one_session_runs_every_shape(fake_ort):
    runner = oc.OnnxRuntimeCudaBackend().load(Path("m.onnx"), record(), graph=False)
    only = runner.session
    for batch in (1, 32, 1):
        runner.prepare({"x": (batch, 3)})
        runner.infer({"x": np.zeros((7, 3), np.float32)})
    assert runner.session is only and len(fake_ort.made) == 1
    assert only.host_runs == [{}] * 6  # no graph id where the session has no graph


def test_free_dims_reads_each_named_dim_once():
    two = (TensorSpec("a", "int64", ("batch", "seq")), TensorSpec("m", "int64", ("batch", "seq")))
    assert oc.free_dims(two, {"a": (2, 128), "m": (2, 128)}) == ({"batch": 2, "seq": 128}, "")
    dims, why = oc.free_dims(two, {"a": (2, 128), "m": (3, 128)})
    assert dims == {} and "'batch' is 2 and 3" in why
    assert oc.free_dims((TensorSpec("s", "float32", (4, 3)),), {"s": (4, 3)}) == ({}, "no dynamic input dim")
    assert "rank" in oc.free_dims(two, {"a": (2,), "m": (2, 128)})[1]


def test_any_other_load_failure_is_raised_and_the_stream_released(fake_ort):
    fake_ort.refuse["any"] = BadModel("onnxruntime cannot load the model: Tensor element type mismatch")
    with pytest.raises(BadModel):
        oc.OnnxRuntimeCudaBackend().load(Path("m.onnx"), record())
    assert len(fake_ort.made) == 1 and fake_ort.streams[0].closed


def test_launches_bind_the_profilers_buffers_and_never_synchronise(fake_ort):
    runner = oc.OnnxRuntimeCudaBackend().load(Path("m.onnx"), record())
    assert runner.prepare({"x": (4, 3)}) == {"y": (4, 2)}
    assert runner.session.host_runs == [{oc.GRAPH_ID: "-1"}]  # prepare/infer: never a graph
    handle = runner.stream.handle
    runner.runtime_graph(True)
    with runner.bind({"x": 1000, "y": 2000}, handle) as launch:
        launch()
        launch()
    with runner.bind({"x": 3000, "y": 4000}, handle) as launch:
        launch()
    with runner.bind({"x": 1000, "y": 2000}, handle) as launch:
        launch()
    runs = runner.session.runs
    binding = runs[0][0]
    assert binding.inputs == [("x", "cuda", 0, np.dtype("float32"), (4, 3), 1000)]
    assert binding.outputs == [("y", "cuda", 0, np.dtype("float32"), (4, 2), 2000)]
    assert all(r[1][oc.NO_SYNC] == "1" for r in runs)
    # one graph per set of bound buffers, ids from 1; the same buffers replay the same graph
    assert [r[1][oc.GRAPH_ID] for r in runs] == ["1", "1", "2", "1"]
    runner.runtime_graph(False)  # --eager: the same session, no graph in these runs
    with runner.bind({"x": 1000, "y": 2000}, handle) as launch:
        launch()
    assert runs[-1][1][oc.GRAPH_ID] == "-1"


def test_the_timing_loop_leaves_the_graph_to_the_runtime(fake_ort, monkeypatch):
    runner = oc.OnnxRuntimeCudaBackend().load(Path("m.onnx"), record())
    runner.prepare({"x": (2, 3)})
    from contextlib import ExitStack

    from trtprof.system import cuda

    monkeypatch.setattr(cuda, "Graph", lambda *a, **k: pytest.fail("the loop captured around ORT's own graph"))
    info: dict = {}
    with ExitStack() as stack:
        launch = timing.compute_launch(stack, runner, {"x": 1, "y": 2}, runner.stream, True, info)
        launch()
    assert info["mode"] == "cuda_graph" and info["graph_by"] == "onnxruntime"
    assert info["provider_options"]["enable_cuda_graph"] == "1"
    assert timing.runner_stream(runner) is runner.stream


def test_precisions_it_refuses_in_one_line():
    backend = oc.OnnxRuntimeCudaBackend()
    for precision in (Precision.BF16, Precision.INT8, Precision.FP8):
        with pytest.raises(UnsupportedPrecision) as err:
            backend.check_precision(precision)
        assert "\n" not in str(err.value) and "onnxruntime-cuda" in str(err.value)
    for precision in (Precision.FP32, Precision.TF32, Precision.FP16):
        backend.check_precision(precision)


def test_tf32_is_on_only_for_tf32():
    fp32 = dict(provider_list(Precision.FP32, "cuda", {"prefer_nhwc": "0"})[0][1])
    tf32 = dict(provider_list(Precision.TF32, "cuda")[0][1])
    assert fp32["use_tf32"] == "0" and fp32["prefer_nhwc"] == "0" and tf32["use_tf32"] == "1"
    assert provider_list(Precision.FP32, "cpu") == ["CPUExecutionProvider"]


def test_availability_names_the_package_imported(monkeypatch):
    from trtprof.system import cuda

    monkeypatch.setattr(cuda, "device_count", lambda: 1)
    av = oc.cuda_availability()  # the CPU onnxruntime of this machine: no CUDA provider in it
    assert not av.ok
    assert "no CUDA execution provider" in av.reason and "onnxruntime" in av.reason
    assert "module imported from" in av.reason and "pip uninstall -y onnxruntime" in av.reason
    monkeypatch.setattr(cuda, "device_count", lambda: 0)
    assert "no CUDA GPU" in oc.cuda_availability().reason


def test_capabilities_are_the_gpu_ones():
    caps = backends.capabilities("onnxruntime-cuda")
    assert caps.device == "cuda" and caps.graph_capture == "runner" and caps.layer_profiler == "ort-session"
    assert not caps.host_threads and caps.fp16_fallback_cause is None
    cpu = backends.capabilities("onnxruntime")
    assert cpu.device == "cpu" and cpu.host_threads and cpu.fp16_fallback_cause


def test_auto_prefers_it_after_tensorrt():
    order = backends.auto_order()
    assert order.index("onnxruntime-cuda") < order.index("torch") < order.index("onnxruntime")
    assert order.index("tensorrt") < order.index("tensorrt-rtx") < order.index("onnxruntime-cuda")


def test_a_profiling_session_is_told_the_dims_the_timed_session_fixed(fake_ort):
    """``profile_dims``: where the load's graph was refused, the dims the timed session fixes at these shapes
    (a profiling session then runs the same graph); none where the load's own session is the timed one."""
    fake_ort.refuse["graph"] = graph_refused_error()
    refused = oc.OnnxRuntimeCudaBackend().load(Path("m.onnx"), record())
    assert refused.profile_dims({"x": (4, 3)}) == {"N": 4}
    fake_ort.refuse["graph"] = None
    accepted = oc.OnnxRuntimeCudaBackend().load(Path("m.onnx"), record())
    assert accepted.profile_dims({"x": (4, 3)}) == {}
    assert set(accepted.profile_options()) <= {*oc.CUDA_OPTIONS, oc.LAYOUT_OPTION}


def test_a_load_starts_the_readahead_once_its_session_has_loaded_the_provider(fake_ort, monkeypatch):
    """``system.readahead.start`` after the load's session is open (ORT's CUDA provider, cuDNN with it, is mapped
    then), once per load; the readahead itself is tested in tests/system/test_readahead.py."""
    started: list[int] = []
    monkeypatch.setattr(oc.readahead, "start", lambda: started.append(len(fake_ort.made)))
    oc.OnnxRuntimeCudaBackend().load(Path("m.onnx"), record())
    assert started == [1]
