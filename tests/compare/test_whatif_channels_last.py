"""--what-if channels-last: the torch runner's NHWC path on CPU torch (the transformation, the layout
check inside the runner, the identity tolerance just inside/outside, the refusals, the cache key),
and the real compare A/B on a GPU (marked gpu: the lead runs it on the H200)."""
from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from trtprof.compare import ab, whatif
from trtprof.system import cuda
from trtprof.cli import main
from trtprof.errors import BadInput, BadModel, TrtprofError
from trtprof.model.demo import make_demo_model
from trtprof.model.onnx_model import OnnxModel
from trtprof.spec import BuildSpec, CacheKey, Precision, TensorSpec

needs_onnx2torch = pytest.mark.skipif(importlib.util.find_spec("onnx2torch") is None, reason="onnx2torch missing")
needs_gpu = pytest.mark.skipif(cuda.device_count() == 0, reason="no CUDA device")
GPU_FAST = ["--backend", "torch", "--time-budget-s", "3", "--round-iterations", "20"]


def _feeds(batch: int = 2, image: int = 16) -> dict[str, np.ndarray]:
    return {"input": np.random.default_rng(0).standard_normal((batch, 3, image, image)).astype(np.float32)}


def _runner(model: Path, memory_format: str):
    from trtprof.backends.torch import fold_identity_initializers, runner_from_proto
    from trtprof.model.onnx_model import inspect_model, load_onnx

    proto = load_onnx(model)
    fold_identity_initializers(proto)
    info = inspect_model(model)
    return runner_from_proto(proto, Precision.FP32, info.inputs, info.outputs, memory_format=memory_format,
                             device="cpu")


def _mlp(path: Path) -> Path:
    """A model with no 4-D input and no Conv: nothing for channels-last to change."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    w = numpy_helper.from_array(np.ones((4, 2), np.float32), "w")
    g = helper.make_graph([helper.make_node("MatMul", ["x", "w"], ["y"])], "mlp",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 4])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 2])], [w])
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), str(path))
    return path


@needs_onnx2torch
def test_the_channels_last_runner_feeds_the_module_nhwc_and_gives_the_nchw_outputs(tmp_path):
    torch = pytest.importorskip("torch")
    from trtprof.backends.torch import CHANNELS_LAST, CONTIGUOUS

    src = make_demo_model(tmp_path / "net.onnx", channels=12, image=16, classes=10)
    nchw, nhwc = _runner(src, CONTIGUOUS), _runner(src, CHANNELS_LAST)
    weights = [p for p in nhwc.module.parameters() if p.dim() == 4]
    assert weights and all(p.is_contiguous(memory_format=torch.channels_last) for p in weights)
    assert not any(p.is_contiguous(memory_format=torch.channels_last)  # 3×3 filters: the two layouts differ
                   for p in nchw.module.parameters() if p.dim() == 4)
    seen = []
    nhwc.module.register_forward_pre_hook(lambda _m, args: seen.append(args[0]))
    got, ref = nhwc.infer(_feeds()), nchw.infer(_feeds())
    x = seen[0]  # what the module really received through the runner's cast path
    assert nhwc.nhwc_inputs == {"input"}  # the demo net's input feeds its first Conv directly
    assert x.is_contiguous(memory_format=torch.channels_last) and not x.is_contiguous()
    assert set(got) == set(ref) and all(got[k].flags["C_CONTIGUOUS"] for k in got)
    assert whatif.max_relative_difference(ref, got) <= whatif.CHANNELS_LAST_RTOL
    assert whatif.check_channels_last(OnnxModel.load(src), _feeds(), device="cpu") <= whatif.CHANNELS_LAST_RTOL


@needs_onnx2torch
def test_an_nhwc_input_behind_a_transpose_is_handed_over_as_it_is(tmp_path):
    """Models from TensorFlow take NHWC and Transpose(0,3,1,2) to the first Conv, which then already reads
    channels-last memory: the runner must not convert that input as if it were NCHW (it would scramble
    its strides — (N, 128, 128, 3) taken as C=128, H=128, W=3 — and add copies)."""
    import onnx

    pytest.importorskip("torch")
    from trtprof.backends.torch import CHANNELS_LAST, CONTIGUOUS, conv_fed_inputs

    src = _conv_elu(tmp_path)
    assert conv_fed_inputs(onnx.load(str(src))) == ()
    targets = whatif.channels_last_targets(OnnxModel.load(src))
    assert targets["inputs"] == [] and targets["inputs_left"] == ["image"] and targets["convs"]
    nhwc = _runner(src, CHANNELS_LAST)
    assert nhwc.nhwc_inputs == frozenset()
    seen = []
    nhwc.module.register_forward_pre_hook(lambda _m, args: seen.append(args[0]))
    feeds = {"image": np.random.default_rng(0).random((1, 128, 128, 3), np.float32)}
    got = nhwc.infer(feeds)
    assert seen[0].is_contiguous() and tuple(seen[0].shape) == (1, 128, 128, 3)
    assert whatif.max_relative_difference(_runner(src, CONTIGUOUS).infer(feeds), got) <= whatif.CHANNELS_LAST_RTOL


@needs_onnx2torch
def test_the_runner_refuses_to_run_nchw_inputs_under_a_channels_last_label(tmp_path):
    """Fault injected: a cast path that drops the layout (the tensors pass through unchanged)."""
    pytest.importorskip("torch")
    from trtprof.backends.torch import CHANNELS_LAST

    runner = _runner(make_demo_model(tmp_path / "net.onnx", channels=8, image=16, classes=10), CHANNELS_LAST)
    runner.cast_in = lambda t, name: t  # type: ignore[method-assign]
    with pytest.raises(BadModel, match="input 'input' reaches the module .* not channels-last"):
        runner.prepare({"input": (2, 3, 16, 16)})


@pytest.mark.parametrize("factor, refused", [(0.9, False), (1.1, True)])
def test_the_channels_last_tolerance_just_inside_and_just_outside(factor, refused):
    ref = {"y": np.array([[2.0, -4.0, 1.0]], np.float32)}
    got = {"y": ref["y"] + np.array([[0.0, 4.0 * whatif.CHANNELS_LAST_RTOL * factor, 0.0]], np.float32)}
    worst = whatif.max_relative_difference(ref, got)
    assert worst == pytest.approx(whatif.CHANNELS_LAST_RTOL * factor, rel=1e-3)
    if refused:
        with pytest.raises(TrtprofError, match="differ .* of their scale"):
            whatif.refuse_if_different(worst, whatif.CHANNELS_LAST_RTOL, "channels-last module's", "a", "b")
    else:
        assert whatif.refuse_if_different(worst, whatif.CHANNELS_LAST_RTOL, "channels-last module's", "a", "b") == worst


@needs_onnx2torch
def test_a_layout_mistake_is_far_outside_the_tolerance(tmp_path):
    """Why 1e-3 separates rounding from a wrong layout: reading the image with H and W swapped (what a
    mislabelled stride does) moves the outputs by a large part of their scale."""
    pytest.importorskip("torch")
    from trtprof.backends.torch import CONTIGUOUS

    runner = _runner(make_demo_model(tmp_path / "net.onnx", channels=12, image=16, classes=10), CONTIGUOUS)
    x = _feeds()
    swapped = {"input": np.ascontiguousarray(x["input"].transpose(0, 1, 3, 2))}
    assert whatif.max_relative_difference(runner.infer(x), runner.infer(swapped)) > 100 * whatif.CHANNELS_LAST_RTOL


@needs_onnx2torch
def test_the_torch_build_records_the_memory_format_and_refuses_a_model_without_convs(tmp_path):
    pytest.importorskip("torch")
    from trtprof.backends.torch import CHANNELS_LAST, CONTIGUOUS, MEMORY_FORMAT_OPTION, TorchBackend

    src = make_demo_model(tmp_path / "net.onnx", channels=8, image=16, classes=10)
    for fmt in (None, CHANNELS_LAST):
        spec = BuildSpec.make(model_sha256="x", backend="torch", precision=Precision.FP16, batch_sizes=(1,),
                              options={MEMORY_FORMAT_OPTION: fmt})
        report = TorchBackend().build(src, spec, tmp_path / f"{fmt}.torch.onnx")
        assert report.metadata["memory_format"] == (fmt or CONTIGUOUS)
    spec = BuildSpec.make(model_sha256="x", backend="torch", precision=Precision.FP32, batch_sizes=(1,),
                          options={MEMORY_FORMAT_OPTION: CHANNELS_LAST})
    with pytest.raises(BadModel, match="channels_last changes nothing here"):
        TorchBackend().build(_mlp(tmp_path / "mlp.onnx"), spec, tmp_path / "mlp.torch.onnx")


def test_nchw_and_nhwc_engines_have_different_cache_keys_and_are_never_picked_silently():
    from trtprof.backends.torch import CHANNELS_LAST, MEMORY_FORMAT_OPTION
    from trtprof.builder.pipeline import key_spec
    from trtprof.engines.cache import EngineRecord
    from trtprof.compare.core import select_records

    def spec(options):
        return BuildSpec.make(model_sha256="x", backend="torch", precision=Precision.FP16, batch_sizes=(1, 8),
                              options=options)

    plain, nhwc = spec({}), spec({MEMORY_FORMAT_OPTION: CHANNELS_LAST})
    env = {"torch": "2.x"}
    assert CacheKey.derive(key_spec(plain), env) != CacheKey.derive(key_spec(nhwc), env)
    assert dict(key_spec(nhwc).options) == {MEMORY_FORMAT_OPTION: CHANNELS_LAST}  # batch sizes still left out

    def record(s, created):
        return EngineRecord(key=created, model="net", model_path="/m/net.onnx", spec=s, environment=env,
                            artifact="a", artifact_sha256="", inputs=(), outputs=(), build_seconds=0.0,
                            created=created)

    assert select_records([record(plain, "1")], ["fp16"], "torch")["fp16"].spec == plain
    with pytest.raises(BadInput, match=r"several fp16 engines here \(net/torch, net/torch\+channels_last\)"):
        select_records([record(plain, "1"), record(nhwc, "2")], ["fp16"], "torch")


@pytest.mark.parametrize("args, needle", [
    (["--backend", "onnxruntime"], "--what-if channels-last runs on --backend torch only"),
    (["--backend", "tensorrt"], "--backend tensorrt has none to set"),
])
def test_channels_last_on_another_backend_is_one_line(tmp_path, capsys, args, needle):
    src = make_demo_model(tmp_path / "net.onnx", channels=8, image=16, classes=10)
    engines = tmp_path / "e"
    assert main(["compare", str(src), "--what-if", "channels-last", "--engines", str(engines), *args]) == 2
    err = capsys.readouterr().err.strip()
    assert needle in err and "\n" not in err and not engines.exists()


@pytest.mark.skipif(cuda.device_count() > 0, reason="the refusal of a machine without a GPU")
def test_channels_last_without_a_gpu_is_the_backend_unavailable_line(tmp_path, capsys):
    src = make_demo_model(tmp_path / "net.onnx", channels=8, image=16, classes=10)
    engines = tmp_path / "e"
    for backend in ("torch", "auto"):  # auto means torch for this experiment
        assert main(["compare", str(src), "--what-if", "channels-last", "--backend", backend,
                     "--engines", str(engines)]) == 2
        err = capsys.readouterr().err.strip()
        assert "backend 'torch' cannot build here: no CUDA GPU" in err and "\n" not in err
    assert not engines.exists()


def test_a_model_with_nothing_to_change_is_refused_in_one_line(tmp_path, capsys):
    engines = tmp_path / "e"
    assert main(["compare", str(_mlp(tmp_path / "mlp.onnx")), "--what-if", "channels-last", "--backend", "torch",
                 "--engines", str(engines)]) == 2
    err = capsys.readouterr().err.strip()
    assert ("no 4-D input and no 2-D Conv with constant 4-D weights (initializers); nothing to change" in err
            and "\n" not in err)
    assert not engines.exists()


def test_a_conv1d_model_has_no_2d_conv_to_change(tmp_path):
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    w = numpy_helper.from_array(np.ones((4, 3, 3), np.float32), "w")  # Conv1d: 3-D weights
    g = helper.make_graph([helper.make_node("Conv", ["x", "w"], ["y"])], "c1",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 3, 4, 8])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 4, 4, 6])], [w])
    path = tmp_path / "c1.onnx"
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), str(path))
    with pytest.raises(BadInput, match=r"has no 2-D Conv with constant 4-D weights \(initializers\); "
                                       r"nothing to change$"):
        whatif.channels_last_targets(OnnxModel.load(path))


def _conv_with_weight_from(path: Path, op: str) -> Path:
    """One 2-D Conv whose 4-D weight ``w`` is an output of ``op`` (Constant, Identity of an
    initializer) instead of an initializer."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    weight = np.ones((4, 3, 3, 3), np.float32)
    if op == "Constant":
        nodes, inits = [helper.make_node("Constant", [], ["w"], value=numpy_helper.from_array(weight, "v"))], []
    else:
        nodes, inits = [helper.make_node("Identity", ["w0"], ["w"])], [numpy_helper.from_array(weight, "w0")]
    g = helper.make_graph(nodes + [helper.make_node("Conv", ["x", "w"], ["y"], name="conv")], "c",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 3, 8, 8])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 4, 6, 6])], inits)
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), str(path))
    return path


def test_conv_weights_computed_by_a_node_are_refused_saying_so(tmp_path):
    """It said "no 2-D Conv (4-D weights)" for a model full of 2-D Convs: only initializers were looked
    at. Now the message says what was checked and where the weights come from."""
    with pytest.raises(BadInput, match=r"no 2-D Conv with constant 4-D weights \(initializers\); the weights of "
                                       r"its 1 Conv\(s\) come from Constant nodes, and the torch runner "
                                       r"\(onnx2torch\) loads"):
        whatif.channels_last_targets(OnnxModel.load(_conv_with_weight_from(tmp_path / "const.onnx", "Constant")))


def test_a_conv_weight_behind_identity_counts_as_the_torch_runner_folds_it(tmp_path):
    """torch.onnx.export puts shared weights behind Identity nodes; the torch runner's pre-pass folds them
    into initializers, so channels-last changes that Conv (it was refused as having no 2-D Conv)."""
    targets = whatif.channels_last_targets(OnnxModel.load(_conv_with_weight_from(tmp_path / "id.onnx", "Identity")))
    assert targets == {"inputs": ["x"], "inputs_left": [], "convs": ["conv"]}


@needs_onnx2torch
def test_the_conv_behind_identity_runs_channels_last_on_cpu(tmp_path):
    src = _conv_with_weight_from(tmp_path / "id.onnx", "Identity")
    feeds = {"x": np.random.default_rng(0).standard_normal((2, 3, 8, 8)).astype(np.float32)}
    assert whatif.check_channels_last(OnnxModel.load(src), feeds, device="cpu") <= whatif.CHANNELS_LAST_RTOL


def test_onnx_light_resnet50_with_constant_of_shape_weights_is_refused_in_one_line(tmp_path, capsys):
    """The onnx package's test model: 53 Convs whose weights are ConstantOfShape outputs."""
    import onnx

    src = Path(onnx.__file__).parent / "backend/test/data/light/light_resnet50.onnx"
    if not src.exists():
        pytest.skip(f"{src} is not in this onnx package")
    engines = tmp_path / "e"
    assert main(["compare", str(src), "--what-if", "channels-last", "--backend", "torch",
                 "--engines", str(engines)]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and not engines.exists()
    assert ("no 2-D Conv with constant 4-D weights (initializers); the weights of its 53 Conv(s) come from "
            "ConstantOfShape nodes" in err)


def test_the_what_if_line_says_no_finding_suggested_it():
    """No diagnose/layers rule measures cuDNN's NCHW↔NHWC transposes on torch (they run inside the Conv
    rows), so the line says so instead of naming a finding."""
    assert whatif.SUGGESTED_BY[whatif.CHANNELS_LAST] is None

    def comp(candidate, est):
        s = SimpleNamespace(estimate=est, ci_low=est - 0.1, ci_high=est + 0.1, verdict="faster")
        return SimpleNamespace(candidate=candidate, batch_size=8, speedup=s, diagnosis=[])

    arms = [ab.ArmSpec("fp32", Path("m"), "torch", "fp32"), ab.ArmSpec("fp16", Path("m"), "torch", "fp16"),
            ab.ArmSpec("fp16+channels-last", Path("m"), "torch", "fp16", (("memory_format", "channels_last"),))]
    report = SimpleNamespace(comparisons=[comp("fp16", 1.5), comp("fp16+channels-last", 2.0)])
    lines = ab.what_if_lines(report, whatif.CHANNELS_LAST, arms)
    assert lines == ["batch 8: no finding suggested it → channels-last measured: fp16 vs fp32 1.500× → "
                     "fp16+channels-last vs fp32 2.000× [1.900, 2.100] (faster): the change helps"]


# -- on a GPU (the lead runs these on the H200) ------------------------------------------------------

def _conv_elu(tmp_path: Path) -> Path:
    from ..tf_helpers import load_model_script

    return load_model_script("conv_elu").make_onnx("conv_elu_3x3_f32_256", tmp_path / "conv_elu.onnx")


@pytest.mark.gpu
@needs_gpu
@needs_onnx2torch
def test_compare_what_if_channels_last_end_to_end(tmp_path, capsys):
    from trtprof.backends.torch import CHANNELS_LAST, CONTIGUOUS

    src, out = _conv_elu(tmp_path), tmp_path / "cl.json"
    assert main(["compare", str(src), "--what-if", "channels-last", "--batch-sizes", "8", "--engines",
                 str(tmp_path / "e"), "--out", str(out), *GPU_FAST]) == 0
    printed = capsys.readouterr().out
    assert "what-if: batch 8: no finding suggested it → channels-last measured: fp16 vs fp32" in printed
    data = json.loads(out.read_text())
    arms = data["ab"]["arms"]
    assert [a["label"] for a in arms] == ["fp32", "fp16", "fp16+channels-last"]
    assert all(a["backend"] == "torch" for a in arms) and arms[2]["options"] == {"memory_format": CHANNELS_LAST}
    assert "options" not in arms[0] and "options" not in arms[1]
    w = data["ab"]["what_if"]
    assert w["experiment"] == "channels-last" and w["suggested_by"] is None and w["changed_model"] is None
    assert 0 <= w["outputs_max_rel_diff"] <= w["identical_rtol"] == whatif.CHANNELS_LAST_RTOL
    assert [c["candidate"] for c in data["comparisons"]] == ["fp16", "fp16+channels-last"]
    formats = {r["config"]["arm"]: r["engine"]["backend_metadata"]["memory_format"] for r in data["results"]}
    assert formats == {"fp32": CONTIGUOUS, "fp16": CONTIGUOUS, "fp16+channels-last": CHANNELS_LAST}
    keys = {r["config"]["arm"]: r["engine"]["key"] for r in data["results"]}
    assert keys["fp16"] != keys["fp16+channels-last"]


@pytest.mark.gpu
@needs_gpu
@needs_onnx2torch
def test_the_channels_last_engine_runs_nhwc_on_the_gpu_and_agrees_with_nchw(tmp_path):
    """The runner the timing loop uses (prepare → enqueue path via infer), fp16 both ways: NHWC agrees
    with NCHW within FP16 rounding (5e-3 of the scale, as test_torch_backend's fp16 check)."""
    from trtprof.measure import bench
    from trtprof.backends.torch import CHANNELS_LAST, MEMORY_FORMAT_OPTION
    from trtprof.builder.pipeline import BuildSettings, build_engines

    src = _conv_elu(tmp_path)
    runs = {}
    for fmt in (None, CHANNELS_LAST):
        outcome, = build_engines(src, [Precision.FP16], (4,), BuildSettings(
            engines_dir=tmp_path / "e", backend="torch", options={MEMORY_FORMAT_OPTION: fmt}))
        runner = bench.load_runner(outcome.record)
        try:
            assert runner.memory_format == (fmt or "contiguous")
            runner.prepare({"image": (4, 128, 128, 3)})
            runs[fmt] = runner.infer({"image": np.random.default_rng(0).random((4, 128, 128, 3), np.float32)})
        finally:
            runner.close()
    assert whatif.max_relative_difference(runs[None], runs[CHANNELS_LAST]) < 5e-3
