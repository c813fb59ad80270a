"""PyTorch-CUDA backend: availability and the ONNX→torch conversion on any machine with torch (CPU);
build → bench through the CLI and numerical agreement with ONNX Runtime on a GPU."""
from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import numpy as np
import pytest

from trtprof.system import cuda
from trtprof.backends.torch import TorchBackend, fold_identity_initializers
from trtprof.errors import UnsupportedPrecision
from trtprof.spec import Precision

needs_gpu = pytest.mark.skipif(cuda.device_count() == 0, reason="no CUDA device")
# find_spec, not importorskip: onnx2torch itself fails to import without torchvision, which the
# backend works around (that workaround is under test here).
needs_onnx2torch = pytest.mark.skipif(importlib.util.find_spec("onnx2torch") is None, reason="onnx2torch missing")


def _identity_model(path: Path) -> Path:
    """Conv whose weight reaches it through Identity(initializer), as torch.onnx.export writes
    de-duplicated weights; followed by Elu so the graph is not a single op."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(0)
    w = rng.standard_normal((4, 3, 3, 3)).astype(np.float32)
    graph = helper.make_graph(
        [helper.make_node("Identity", ["w_shared"], ["w_alias"]),
         helper.make_node("Conv", ["x", "w_alias"], ["c"], kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
         helper.make_node("Elu", ["c"], ["y"])],
        "identity_conv",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 3, 8, 8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 4, 8, 8])],
        [numpy_helper.from_array(w, "w_shared")],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.save(model, str(path))
    return path


def test_backend_is_registered_and_says_why_not_available():
    from trtprof import backends

    backend = backends.get("torch")
    assert isinstance(backend, TorchBackend)
    av = backend.available()
    if cuda.device_count() == 0:
        assert not av and "no CUDA GPU" in av.reason
    for p in (Precision.FP32, Precision.TF32, Precision.FP16, Precision.BF16, Precision.FP8):
        backend.check_precision(p)  # fp8: checked against the model and GPU at build (test_precisions.py)
    with pytest.raises(UnsupportedPrecision, match="int8 is not run on the torch backend"):
        backend.check_precision(Precision.INT8)


def test_fold_identity_initializers_keeps_the_function(tmp_path):
    import onnx

    ort = pytest.importorskip("onnxruntime")
    path = _identity_model(tmp_path / "m.onnx")
    model = onnx.load(str(path))
    assert fold_identity_initializers(model) == 1
    assert [n.op_type for n in model.graph.node] == ["Conv", "Elu"]
    onnx.checker.check_model(model)
    x = np.random.default_rng().standard_normal((2, 3, 8, 8), dtype=np.float32)
    before = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    after = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    np.testing.assert_array_equal(before, after)


@needs_onnx2torch
def test_conversion_matches_onnxruntime_on_cpu(tmp_path, conv_model):
    """The module onnx2torch builds computes what ONNX Runtime computes (float32, CPU)."""
    torch = pytest.importorskip("torch")
    import onnx

    from trtprof.backends.torch import to_torch_module

    ort = pytest.importorskip("onnxruntime")
    for path in (conv_model, _identity_model(tmp_path / "id.onnx")):
        model = onnx.load(str(path))
        fold_identity_initializers(model)
        module = to_torch_module(model).eval()
        name = model.graph.input[0].name
        x = np.random.default_rng().standard_normal(
            [2] + [d.dim_value for d in model.graph.input[0].type.tensor_type.shape.dim[1:]]).astype(np.float32)
        ref = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"]).run(None, {name: x})[0]
        with torch.inference_mode():
            got = module(torch.from_numpy(x)).numpy()
        assert np.linalg.norm(got - ref) / np.linalg.norm(ref) < 1e-5


@pytest.mark.gpu
@needs_gpu
@needs_onnx2torch
def test_cli_build_and_bench_torch_engines(tmp_path, conv_model, capsys):
    pytest.importorskip("torch")
    from trtprof.cli import main

    engines = tmp_path / "engines"
    assert main(["build", "--backend", "torch", "--fp32", "--fp16", "--tf32", str(conv_model),
                 "--engines", str(engines), "--batch-sizes", "1,4"]) == 0
    out = tmp_path / "results.json"
    for extra in ([], ["--cuda-graph", "--no-copies", "--spin-wait"]):
        assert main(["bench", str(engines), "--warmup", "5", "--iterations", "20", "--out", str(out), *extra]) == 0
        data = json.loads(out.read_text())
        results = data["results"]
        assert len(results) == 3 * 2  # 3 precisions x 2 batch sizes
        for r in results:
            assert r["backend"] == "torch"
            stages = set(r["stats"])
            assert {"latency_ms", "compute_ms", "enqueue_ms"} <= stages
            assert ("h2d_ms" in stages) == (not extra)
    printed = capsys.readouterr().out
    assert "torch" in printed


@pytest.mark.gpu
@needs_gpu
@pytest.mark.parametrize("precision,tol", [("fp32", 1e-5), ("tf32", 5e-3), ("fp16", 5e-3)])
def test_runner_writes_the_profilers_buffers_and_matches_onnxruntime(tmp_path, conv_model, precision, tol):
    """enqueue on the profiler's stream and buffers gives ONNX Runtime's answer (fresh random input,
    poisoned output buffer): proves the zero-copy wrapping, the stream and the precision handling."""
    torch = pytest.importorskip("torch")
    ort = pytest.importorskip("onnxruntime")
    from trtprof.builder.pipeline import BuildSettings, build_engines

    (outcome,) = build_engines(conv_model, [Precision(precision)], (3,),
                               settings=BuildSettings(engines_dir=tmp_path / "e", backend="torch"))
    record = outcome.record
    runner = TorchBackend().load(record.artifact_path, record)
    x = np.random.default_rng().standard_normal((3, 3, 16, 16), dtype=np.float32)
    in_name, out_name = runner.inputs[0].name, runner.outputs[0].name
    ref = ort.InferenceSession(str(conv_model), providers=["CPUExecutionProvider"]).run(None, {in_name: x})[0]
    shapes = runner.prepare({in_name: x.shape})
    assert shapes[out_name] == ref.shape
    with cuda.Stream() as stream, cuda.PinnedHostBuffer(x.nbytes) as hx, cuda.PinnedHostBuffer(ref.nbytes) as hy, \
            cuda.DeviceBuffer(x.nbytes) as dx, cuda.DeviceBuffer(ref.nbytes) as dy:
        hx.array(x.shape, x.dtype)[...] = x
        y = hy.array(ref.shape, np.float32)
        y[...] = np.nan
        cuda.memcpy_htod_async(dx.ptr, hx.array(x.shape, x.dtype), stream)
        cuda.memcpy_htod_async(dy.ptr, y, stream)  # poison the device output too
        runner.enqueue({in_name: dx.ptr, out_name: dy.ptr}, stream.handle)
        cuda.memcpy_dtoh_async(y, dy.ptr, stream)
        stream.synchronize()
        got = y.copy()
    runner.close()
    assert np.all(np.isfinite(got))
    assert np.linalg.norm(got - ref) / np.linalg.norm(ref) < tol
    # TF32 state is restored after each enqueue: the process default is untouched
    assert torch.backends.cudnn.allow_tf32 is True
