"""FP16/BF16 of the torch backend on real converted modules (CPU torch + onnx2torch): every float tensor
and Cast target follows the engine's precision, out-of-range constants saturate, and a converted module
that fails is exit 2 with one line through the real CLI."""
from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import pytest

from trtprof.backends import torch as torch_backend
from trtprof.backends.base import Availability
from trtprof.errors import BadModel
from trtprof.spec import Precision

needs_torch = pytest.mark.skipif(importlib.util.find_spec("torch") is None
                                 or importlib.util.find_spec("onnx2torch") is None,
                                 reason="torch or onnx2torch missing")
pytestmark = needs_torch


def _save(path: Path, nodes, inputs, outputs, inits=()) -> Path:
    import onnx
    from onnx import helper

    model = helper.make_model(helper.make_graph(nodes, path.stem, inputs, outputs, list(inits)),
                              opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.save(model, str(path))
    return path


def _attention_scale_model(path: Path) -> Path:
    """What timm's ViT exports around its attention: a scale computed from ``Cast(Shape(x), FLOAT)``
    (a 1-D float32 tensor) multiplied into the activations before a MatMul with a weight."""
    from onnx import TensorProto, helper, numpy_helper

    w = np.random.default_rng(0).standard_normal((8, 8)).astype(np.float32)
    nodes = [
        helper.make_node("Shape", ["x"], ["shape"], start=-1),
        helper.make_node("Cast", ["shape"], ["dim"], to=TensorProto.FLOAT),
        helper.make_node("Sqrt", ["dim"], ["root"]),
        helper.make_node("Reciprocal", ["root"], ["scale"]),
        helper.make_node("Mul", ["x", "scale"], ["scaled"]),
        helper.make_node("MatMul", ["scaled", "w"], ["y"]),
    ]
    return _save(path, nodes, [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 4, 8])],
                 [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 4, 8])],
                 [numpy_helper.from_array(w, "w")])


def _mask_fill_model(path: Path) -> Path:
    """BERT's extended attention mask: ``(1 - mask) × finfo(float32).min`` added to the scores. In FP16 the
    fill becomes -inf unless saturated, and ``0 × -inf`` is NaN."""
    from onnx import TensorProto, helper, numpy_helper

    nodes = [
        helper.make_node("Sub", ["one", "mask"], ["inverted"]),
        helper.make_node("Mul", ["inverted", "fill"], ["bias"]),
        helper.make_node("Add", ["x", "bias"], ["y"]),
    ]
    inits = [numpy_helper.from_array(np.array(1.0, np.float32), "one"),
             numpy_helper.from_array(np.array(np.finfo(np.float32).min, np.float32), "fill")]
    return _save(path, nodes, [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 6]),
                               helper.make_tensor_value_info("mask", TensorProto.FLOAT, ["batch", 6])],
                 [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 6])], inits)


def _bad_reshape_model(path: Path) -> Path:
    """Converts (onnx2torch accepts it) but cannot run: Reshape to 5 columns of a tensor of 12 values."""
    from onnx import TensorProto, helper, numpy_helper

    nodes = [helper.make_node("Reshape", ["x", "shape"], ["y"])]
    return _save(path, nodes, [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 12])],
                 [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 5, "n"])],
                 [numpy_helper.from_array(np.array([0, 5, -1], np.int64), "shape")])


def _runner(path: Path, precision: Precision):
    from trtprof.model.onnx_model import inspect_model, load_onnx

    info = inspect_model(path)
    return torch_backend.runner_from_proto(load_onnx(path), precision, tuple(info.inputs), tuple(info.outputs),
                                           device="cpu")


def test_fp16_module_follows_the_precision_where_dot_half_alone_fails(tmp_path):
    """The ViT failure reproduced on its pattern: ``.half()`` alone leaves the Cast target float32 and the
    MatMul sees mixed dtypes; with follow_precision every float tensor and Cast target is float16 and the
    answer matches float32's to FP16's rounding."""
    import torch

    from trtprof.model.onnx_model import load_onnx

    path = _attention_scale_model(tmp_path / "vit_scale.onnx")
    x = np.random.default_rng().standard_normal((2, 4, 8)).astype(np.float32)
    plain = torch_backend.to_torch_module(load_onnx(path)).eval().half()
    with pytest.raises(RuntimeError, match="Half|Float|dtype"), torch.inference_mode():
        plain(torch.from_numpy(x).half())

    module = torch_backend.to_torch_module(load_onnx(path)).eval()
    counts = torch_backend.follow_precision(torch, module, torch.float16)
    assert counts["casts"] == 1 and counts["tensors"] >= 1 and counts["saturated"] == 0
    floats = [t for t in list(module.parameters()) + list(module.buffers()) if t.is_floating_point()]
    assert floats and all(t.dtype == torch.float16 for t in floats)

    ref = _runner(path, Precision.FP32).infer({"x": x})["y"]
    got = _runner(path, Precision.FP16).infer({"x": x})["y"]
    assert got.dtype == np.float32 and np.all(np.isfinite(got))
    assert np.linalg.norm(got - ref) / np.linalg.norm(ref) < 5e-3


def test_constants_beyond_fp16_range_saturate_instead_of_making_nan(tmp_path):
    import torch

    from trtprof.model.onnx_model import load_onnx

    path = _mask_fill_model(tmp_path / "mask.onnx")
    module = torch_backend.to_torch_module(load_onnx(path)).eval()
    counts = torch_backend.follow_precision(torch, module, torch.float16)
    assert counts["saturated"] == 1
    inf = torch.tensor([float("inf"), -float("inf"), 1e30, 65504.0])  # real infinities stay; 1e30 saturates
    holder = torch.nn.Module()
    holder.register_buffer("v", inf)
    assert torch_backend.follow_precision(torch, holder, torch.float16)["saturated"] == 1
    assert holder.v.tolist() == [float("inf"), -float("inf"), 65504.0, 65504.0]

    x = np.random.default_rng().standard_normal((2, 6)).astype(np.float32)
    mask = np.array([[1, 1, 1, 0, 0, 0], [1, 1, 1, 1, 1, 1]], np.float32)
    got = _runner(path, Precision.FP16).infer({"x": x, "mask": mask})["y"]
    assert not np.isnan(got).any()
    np.testing.assert_allclose(got[mask == 1], x[mask == 1], rtol=2e-3, atol=2e-3)
    assert np.all(got[mask == 0] < -6e4)


def test_a_module_that_cannot_run_is_one_bad_model_line(tmp_path):
    path = _bad_reshape_model(tmp_path / "bad.onnx")
    runner = _runner(path, Precision.FP32)
    with pytest.raises(BadModel, match=r"the converted torch module \(fp32\) failed: RuntimeError: ") as err:
        runner.infer({"x": np.zeros((2, 12), np.float32)})
    assert "\n" not in str(err.value)


def test_conversion_failure_of_any_kind_is_build_failed(monkeypatch):
    from trtprof.errors import BuildFailed

    onnx2torch = torch_backend.import_onnx2torch()

    def broken(_model):
        raise ValueError('parameter "value" must be scalar\nmore C++ context')

    monkeypatch.setattr(onnx2torch, "convert", broken)
    with pytest.raises(BuildFailed, match=r"cannot convert this model: ValueError: parameter \"value\" must be scalar$"):
        torch_backend.to_torch_module(object())


def test_cli_build_of_a_module_that_cannot_run_exits_2_with_one_line(tmp_path, monkeypatch, capsys):
    """Through the real CLI: ``trtprof build --backend torch`` converts the model (real onnx2torch), runs
    the module once (on the CPU here) and the run's failure is exit 2, one line, no traceback, no engine.
    The machine is faked (a named stand-in: CPU-only CI has no CUDA GPU for the backend's availability
    and environment); the converted module and its failure are real."""
    from trtprof.cli import main

    monkeypatch.setattr(torch_backend.TorchBackend, "available", lambda self: Availability(True))
    monkeypatch.setattr(torch_backend.TorchBackend, "environment",
                        lambda self: {"backend": "torch", "gpu": "fake-for-cpu-test", "torch": "cpu"})
    path = _bad_reshape_model(tmp_path / "bad.onnx")
    engines = tmp_path / "engines"
    for flag in ("--fp32", "--fp16"):
        rc = main(["build", "--backend", "torch", flag, str(path), "--engines", str(engines), "--batch-sizes", "2"])
        err = capsys.readouterr().err
        assert rc == 2
        lines = [line for line in err.splitlines() if line.strip()]
        assert len(lines) == 1 and "Traceback" not in err, err
        assert str(path) in lines[0] and "the converted torch module" in lines[0] and "RuntimeError" in lines[0]
    assert not any(p.suffix == ".onnx" for p in engines.rglob("*")) if engines.exists() else True


@pytest.mark.parametrize("static_batch", [False, True])
def test_cli_build_of_the_vit_pattern_in_fp16_succeeds_and_says_what_changed(tmp_path, monkeypatch, capsys,
                                                                            static_batch):
    """With a dynamic batch the build folds the shapes (issue 43): the scale ``Cast(Shape)`` computes is a
    float32 constant then, held in float16 like the weight; with every dim fixed in the model nothing is
    folded and the Cast to float is retargeted."""
    import onnx

    from trtprof.cli import main
    from trtprof.engines.cache import list_engines

    monkeypatch.setattr(torch_backend.TorchBackend, "available", lambda self: Availability(True))
    monkeypatch.setattr(torch_backend.TorchBackend, "environment",
                        lambda self: {"backend": "torch", "gpu": "fake-for-cpu-test", "torch": "cpu"})
    path = _attention_scale_model(tmp_path / "vit_scale.onnx")
    if static_batch:
        proto = onnx.load(str(path))
        for value in (proto.graph.input[0], proto.graph.output[0]):
            value.type.tensor_type.shape.dim[0].dim_value = 2
        onnx.save(proto, str(path))
    engines = tmp_path / "engines"
    assert main(["build", "--backend", "torch", "--fp16", str(path), "--engines", str(engines),
                 "--batch-sizes", "2"]) == 0, capsys.readouterr().err
    (record,) = list_engines(engines)
    counts = record.backend_metadata["low_precision_tensors"]
    if static_batch:
        assert counts["casts"] == 1 and "fixed_shapes" not in record.backend_metadata
        assert any("1 Cast-to-float target(s) retargeted to float16" in n for n in record.notes)
    else:
        assert counts == {"tensors": 2, "saturated": 0, "casts": 0}  # the weight and the folded scale
        assert record.backend_metadata["fixed_shapes"][0]["folded"] == {"Cast": 1, "Reciprocal": 1, "Shape": 1,
                                                                        "Sqrt": 1}
        assert any("(2 weights and constants), 0 Cast-to-float target(s)" in n for n in record.notes)


def test_greater_or_equal_of_opset_16_converts_as_bert_needs(tmp_path):
    """transformers' BERT at opset 17 holds GreaterOrEqual-16 (only bfloat16 added over 12), which
    onnx2torch 1.5 does not register: the backend registers its -12 converter for -16 too."""
    from onnx import TensorProto, helper

    nodes = [helper.make_node("GreaterOrEqual", ["x", "y"], ["ge"]), helper.make_node("LessOrEqual", ["x", "y"], ["le"]),
             helper.make_node("Cast", ["ge"], ["gef"], to=TensorProto.FLOAT),
             helper.make_node("Cast", ["le"], ["lef"], to=TensorProto.FLOAT),
             helper.make_node("Sub", ["gef", "lef"], ["out"])]
    path = _save(tmp_path / "ge.onnx", nodes, [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 5]),
                                                  helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 5])],
                 [helper.make_tensor_value_info("out", TensorProto.FLOAT, ["batch", 5])])
    x = np.array([[0, 1, 2, 3, 4]], np.float32)
    y = np.full((1, 5), 2, np.float32)
    for precision in (Precision.FP32, Precision.FP16):
        got = _runner(path, precision).infer({"x": x, "y": y})["out"]
        np.testing.assert_array_equal(got, (x >= y).astype(np.float32) - (x <= y).astype(np.float32))
    assert torch_backend.register_type_widened_versions() == []  # registered once, at import


@pytest.mark.parametrize("axis,shape", [(0, (2, 3, 4)), (1, (2, 3, 4)), (2, (2, 3, 4)), (3, (2, 3, 4)), (-1, (2, 3, 4)),
                                        (0, (5,))])
def test_flatten_follows_onnx_at_every_axis_as_bert_needs(tmp_path, axis, shape):
    """onnx2torch 1.5 fails ONNX Flatten(axis=0) (transformers' BERT-base on the H200: "IndexError:
    Dimension out of range ... got 1"); the converted module now matches ONNX Runtime at every axis."""
    import onnxruntime as ort
    from onnx import TensorProto, helper

    at = axis + len(shape) if axis < 0 else axis
    out = (int(np.prod(shape[:at])), int(np.prod(shape[at:])))
    path = _save(tmp_path / f"flatten{axis}.onnx", [helper.make_node("Flatten", ["x"], ["y"], axis=axis)],
                 [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(shape))],
                 [helper.make_tensor_value_info("y", TensorProto.FLOAT, list(out))])
    x = np.arange(int(np.prod(shape)), dtype=np.float32).reshape(shape)
    want = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    got = _runner(path, Precision.FP32).infer({"x": x})["y"]
    assert got.shape == want.shape == out
    np.testing.assert_array_equal(got, want)
