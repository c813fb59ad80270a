"""INT8 and FP8 built for real by TensorRT-RTX (``tensorrt_rtx``), on the CPU: explicit quantization
from trtprof's QDQ models. CI runs these (``.ci/run`` fails on a skip). Running the plans needs an
RTX-class GPU; what is checked here is that the builder took the quantized types: the parsed network
has INT8 / FP8 tensors, the plan is written, and FP8 is refused for targets without FP8 tensor cores.
"""
from __future__ import annotations

import pytest

pytestmark = pytest.mark.tensorrt_rtx

trt = pytest.importorskip("tensorrt_rtx", reason="tensorrt_rtx not installed: pip install 'trtprof[tensorrt-rtx]'")
if getattr(trt, "IS_FAKE", False):  # pragma: no cover - a contract test leaked its fake
    pytest.skip("the fake tensorrt_rtx is installed", allow_module_level=True)

from trtprof.builder.pipeline import BuildSettings, build_engines  # noqa: E402
from trtprof.cli import main  # noqa: E402
from trtprof.errors import UnsupportedPrecision  # noqa: E402
from trtprof.spec import Precision  # noqa: E402

from ..conftest import tree_snapshot  # noqa: E402
from .test_int8 import make_mlp_model  # noqa: E402


def _build(model, tmp_path, precision, **options):
    (outcome,) = build_engines(model, [precision], (1, 4),
                               BuildSettings(engines_dir=tmp_path / "engines", backend="tensorrt-rtx",
                                             options=options or None))
    return outcome.record


@pytest.mark.parametrize("which", ["conv", "mlp"])
def test_int8_qdq_model_builds_with_int8_tensors(which, conv_model, tmp_path):
    model = conv_model if which == "conv" else make_mlp_model(tmp_path / "mlp.onnx")
    record = _build(model, tmp_path, Precision.INT8)
    meta = record.backend_metadata
    assert record.artifact_path.stat().st_size > 0
    assert meta["network_layers_by_dtype"]["int8"] > 0  # the parser made INT8 Q layers: explicit quantization
    assert meta["effective_precision"] == "int8"
    q = meta["int8_quantization"]
    assert q["activations"] == "int8 symmetric" and q["bias"] == "float"  # what TensorRT's parser accepts
    assert record.spec.option("calibration") == "minmax"


@pytest.mark.parametrize("which", ["conv", "mlp"])
def test_fp8_qdq_model_builds_for_an_fp8_target(which, conv_model, tmp_path):
    model = conv_model if which == "conv" else make_mlp_model(tmp_path / "mlp.onnx")
    record = _build(model, tmp_path, Precision.FP8, compute_capability="sm89")
    meta = record.backend_metadata
    assert meta["network_layers_by_dtype"]["fp8"] > 0
    assert meta["effective_precision"] == "fp8"
    assert meta["supported_compute_capabilities"] == ["8.9"]
    assert meta["fp8_quantization"]["opset"] >= 19  # float8 Q/DQ needs opset 19 (the models are 17)


@pytest.mark.parametrize("targets", [None, "sm86", "sm86,sm89"])
def test_fp8_is_refused_for_targets_without_fp8(targets, conv_model, tmp_path):
    with pytest.raises(UnsupportedPrecision, match="fp8 needs compute capability 8.9"):
        _build(conv_model, tmp_path, Precision.FP8, **({"compute_capability": targets} if targets else {}))


def test_fp8_refusal_is_one_line_exit_2_and_writes_nothing(conv_model, tmp_path, capsys):
    engines = tmp_path / "engines"
    engines.mkdir()
    before = tree_snapshot(engines)
    code = main(["build", str(conv_model), "--fp32", "--fp8", "--backend", "tensorrt-rtx", "--engines", str(engines),
                 "--compute-capability", "sm86"])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and "8.6" in err[0]
    assert tree_snapshot(engines) == before  # refused before the fp32 engine was built


def test_fp8_just_at_the_threshold_builds_sm120_too(conv_model, tmp_path):
    record = _build(conv_model, tmp_path, Precision.FP8, compute_capability="sm89,sm120")
    assert record.backend_metadata["supported_compute_capabilities"] == ["8.9", "12.0"]
