"""Issue 10 on the TensorRT backend, against the FAKE ``tensorrt`` module of the contract tests: the
FP16 conversion's keep-lists and error wording on TensorRT >= 11 (strongly typed), and what TensorRT
< 11 refuses. Nothing here runs TensorRT."""
from __future__ import annotations

import pytest

from trtprof.errors import BadInput, BuildFailed
from trtprof.spec import Precision

from .test_tensorrt_contract import _build, trt10, trt11  # noqa: F401 - the fake-TensorRT fixtures


def test_keep_fp32_ops_on_11x_keep_that_op_type_fp32(trt11, conv_model, tmp_path):
    import onnx

    from trtprof.convert.fp16 import tensor_elem_types

    report, _, _ = _build(conv_model, tmp_path, Precision.FP16, keep_fp32_ops="Gemm,Softmax")
    parsed = trt11.state["parsed_model"]
    fc = next(n for n in parsed.graph.node if n.op_type == "Gemm")
    types = tensor_elem_types(parsed)
    assert {types[i] for i in fc.input} == {onnx.TensorProto.FLOAT}  # Gemm in FP32 …
    conv = next(n for n in parsed.graph.node if n.op_type == "Conv")
    assert {types[i] for i in conv.input} == {onnx.TensorProto.FLOAT16}  # … the rest in FP16
    assert report.metadata["fp16_weights"]["kept_fp32_ops"] == ["Gemm", "Softmax"]


def test_a_parser_refusal_on_11x_blames_the_fp16_conversion(trt11, conv_model, tmp_path):
    trt11.behaviour.parse_errors = [("conv1", "Conv", 2, "no FP16 implementation")]
    with pytest.raises(BuildFailed) as caught:
        _build(conv_model, tmp_path, Precision.FP16)
    text = str(caught.value)
    assert "refused the FP16 graph that trtprof's FP16 conversion produced" in text
    assert "node conv1 (Conv): keep it in FP32 with --layer-precisions conv1:fp32" in text
    with pytest.raises(BuildFailed, match="rejected the model"):  # FP32 parses the user's file: its wording stays
        _build(conv_model, tmp_path, Precision.FP32)


def test_keep_fp32_ops_is_refused_on_10x(trt10, conv_model, tmp_path):
    with pytest.raises(BadInput, match="--keep-fp32-ops needs TensorRT >= 11"):
        _build(conv_model, tmp_path, Precision.FP16, keep_fp32_ops="Gemm")
