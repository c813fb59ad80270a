"""BF16 and FP8 beside FP16: what the formats do to a model's outputs (measured, on the CPU with
torch), the torch backend's FP8 coverage check, the refusals, and the GPU paths (marked ``gpu``).
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from trtprof.system import cuda
from trtprof.compare.accuracy import compare_outputs
from trtprof.errors import UnsupportedPrecision
from trtprof.spec import Precision

from .test_int8 import make_mlp_model

needs_gpu = pytest.mark.skipif(cuda.device_count() == 0, reason="no CUDA device")


def _chain(path: Path):
    import onnx

    from trtprof.backends.torch_fp8 import mlp_chain

    return mlp_chain(onnx.load(str(path)))


def _run_in(torch, steps, x: np.ndarray, dtype) -> np.ndarray:
    """The chain computed with weights and activations in ``dtype`` (float matmul, CPU)."""
    from trtprof.backends.torch_fp8 import fp8_module

    module = fp8_module(steps, torch, matmul=lambda a, w: a @ w.to(a.dtype))
    with torch.no_grad():
        return module(torch.from_numpy(x).to(dtype)).numpy()


def test_bf16_rounds_more_than_fp16_but_does_not_overflow(tmp_path):
    torch = pytest.importorskip("torch")
    steps = _chain(make_mlp_model(tmp_path / "mlp.onnx", features=64, hidden=256, classes=32))
    x = np.random.default_rng(0).standard_normal((64, 64)).astype(np.float32)
    ref = _run_in(torch, steps, x, torch.float32)
    err16 = compare_outputs({"y": ref}, {"y": _run_in(torch, steps, x, torch.float16)})
    errb16 = compare_outputs({"y": ref}, {"y": _run_in(torch, steps, x, torch.bfloat16)})
    # unit roundoff 2^-8 vs 2^-11: 8x in theory; measured well above 2x on this model
    assert errb16.max_abs_err > 2 * err16.max_abs_err > 0
    big = x * 1e5  # activations beyond FP16's 65504, far inside BF16's (= FP32's) range
    ref_big = _run_in(torch, steps, big, torch.float32)
    assert compare_outputs({"y": ref_big}, {"y": _run_in(torch, steps, big, torch.float16)}).nonfinite > 0
    assert compare_outputs({"y": ref_big}, {"y": _run_in(torch, steps, big, torch.bfloat16)}).nonfinite == 0


def test_the_fp8_chain_computes_the_model(tmp_path):
    """The chain walking (not FP8: float matmuls) reproduces ONNX Runtime's FP32 output."""
    torch = pytest.importorskip("torch")
    ort = pytest.importorskip("onnxruntime")
    model = make_mlp_model(tmp_path / "mlp.onnx")
    steps = _chain(model)
    assert [s.kind for s in steps] == ["matmul", "add", "relu", "matmul"]
    x = np.random.default_rng(1).standard_normal((8, 64)).astype(np.float32)
    (expected,) = ort.InferenceSession(str(model), providers=["CPUExecutionProvider"]).run(None, {"x": x})
    np.testing.assert_allclose(_run_in(torch, steps, x, torch.float32), expected, rtol=1e-5, atol=1e-5)


def test_fp8_on_torch_refuses_what_scaled_mm_does_not_cover(conv_model, tmp_path):
    with pytest.raises(UnsupportedPrecision, match="node conv0 is Conv"):
        _chain(conv_model)
    _chain(make_mlp_model(tmp_path / "ok.onnx", features=16, hidden=32, classes=16))  # multiples of 16: covered
    with pytest.raises(UnsupportedPrecision, match="divisible by 16"):
        _chain(make_mlp_model(tmp_path / "odd.onnx", features=24, hidden=32, classes=16))  # 24 = 16 + 8


def test_bf16_and_fp8_are_refused_on_onnxruntime_with_the_reason():
    pytest.importorskip("onnxruntime")
    from trtprof.backends.onnxruntime import OnnxRuntimeBackend

    with pytest.raises(UnsupportedPrecision, match="no BF16 kernel"):
        OnnxRuntimeBackend().check_precision(Precision.BF16)
    with pytest.raises(UnsupportedPrecision, match="no FP8 kernels"):
        OnnxRuntimeBackend().check_precision(Precision.FP8)


def test_precision_names_parse_and_sort():
    assert [Precision.parse(t) for t in ("BF16", "int8", "fp8")] == [Precision.BF16, Precision.INT8, Precision.FP8]
    assert sorted(["fp8", "int8", "fp32", "bf16", "fp16"], key=Precision.rank) == ["fp32", "fp16", "bf16", "int8", "fp8"]


# -- GPU (the lead runs these on the H200) -----------------------------------------------------------------


def _torch_engine(model: Path, tmp_path: Path, precision: Precision):
    from trtprof.backends import get
    from trtprof.builder.pipeline import BuildSettings, build_engines

    (outcome,) = build_engines(model, [precision], (16,),
                               BuildSettings(engines_dir=tmp_path / "engines", backend="torch"))
    return get("torch").load(outcome.record.artifact_path, outcome.record)


@needs_gpu
@pytest.mark.gpu
@pytest.mark.parametrize("precision", [Precision.BF16, Precision.FP8])
def test_torch_bf16_and_fp8_run_and_stay_close(precision, tmp_path):
    pytest.importorskip("torch")
    model = make_mlp_model(tmp_path / "mlp.onnx")
    x = {"x": np.random.default_rng(0).standard_normal((16, 64)).astype(np.float32)}
    ref = _torch_engine(model, tmp_path, Precision.FP32).infer(x)
    runner = _torch_engine(model, tmp_path, precision)
    out = runner.infer(x)
    delta = compare_outputs(ref, out)
    assert out["y"].dtype == np.float32 and delta.nonfinite == 0
    assert 0 < delta.max_abs_err < 0.25  # rounded (not FP32), but the same function


@needs_gpu
@pytest.mark.gpu
def test_torch_fp8_refuses_a_conv_model_at_build(conv_model, tmp_path):
    pytest.importorskip("torch")
    with pytest.raises(UnsupportedPrecision, match="Conv"):
        _torch_engine(conv_model, tmp_path, Precision.FP8)
