from __future__ import annotations

import numpy as np
import pytest

from trtprof.measure.bench import load_runner
from trtprof.builder.pipeline import BuildSettings, build_engines
from trtprof.model.inputs import make_inputs, resolve_shapes
from trtprof.spec import Precision
from trtprof.measure.timing import TimingConfig, time_host


def test_fp16_engine_reports_what_really_runs_in_fp16(conv_model, tmp_path):
    fp32, fp16 = build_engines(conv_model, [Precision.FP32, Precision.FP16], [2],
                               settings=BuildSettings(engines_dir=tmp_path, backend="onnxruntime"))
    meta = fp16.record.backend_metadata
    # CPU provider: no FP16 Conv/Relu/Gemm kernels, so every compute node falls back to FP32
    assert meta["provider"] == "CPUExecutionProvider"
    assert meta["node_precision"]["fp32"]["Conv"] == 3
    assert meta["fp32_fallback_nodes"] >= 7 and meta["fp16_nodes"] == 0
    assert meta["effective_precision"] == "fp32+casts"
    assert fp32.record.backend_metadata["effective_precision"] == "fp32"
    # the fp16 artifact really holds FP16 weights, IO stays float32
    import onnx

    model = onnx.load(str(fp16.record.artifact_path))
    assert {i.data_type for i in model.graph.initializer} == {onnx.TensorProto.FLOAT16}
    assert [i.type.tensor_type.elem_type for i in model.graph.input] == [onnx.TensorProto.FLOAT]

    r32, r16 = load_runner(fp32.record), load_runner(fp16.record)
    feeds = make_inputs(r32.inputs, resolve_shapes(r32.inputs, 2))
    y32, y16 = r32.infer(feeds)["logits"], r16.infer(feeds)["logits"]
    assert y32.shape == (2, 10) and y16.dtype == np.float32
    # FP16 weight rounding changes results a little, not a lot
    assert 0 < np.abs(y32 - y16).max() < 5e-2 * np.abs(y32).max()


def test_transpose_keeps_an_fp16_kernel_on_cpu(tmp_path):
    """An op that has a CPU FP16 kernel counts as FP16: the census is read from ORT, not guessed."""
    import onnx
    from onnx import TensorProto, helper

    graph = helper.make_graph(
        [helper.make_node("Transpose", ["x"], ["t"], name="tr", perm=[1, 0]),
         helper.make_node("Relu", ["t"], ["y"], name="relu")], "tr",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 6])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [6, 4])],
    )
    path = tmp_path / "tr.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), str(path))
    (out,) = build_engines(path, [Precision.FP16], [4],
                           settings=BuildSettings(engines_dir=tmp_path / "e", backend="onnxruntime"))
    census = out.record.backend_metadata["node_precision"]
    assert census["fp16"] == {"Transpose": 1} and census["fp32"] == {"Relu": 1}
    assert out.record.backend_metadata["effective_precision"] == "mixed"


def test_host_loop_counts_and_duration():
    calls = []
    samples = time_host(lambda: calls.append(1), TimingConfig(warmup=3, iterations=10))
    assert len(calls) == 13 and samples.n == 10 and samples.warmup_done == 3
    assert (samples.latency_ms >= 0).all() and samples.span_s > 0
    calls.clear()
    samples = time_host(lambda: calls.append(1), TimingConfig(warmup=0, iterations=1, duration_s=0.05))
    assert samples.n > 1 and samples.span_s >= 0.05


def test_host_loop_warmup_by_time():
    samples = time_host(lambda: None, TimingConfig(warmup=1, warmup_ms=20, iterations=1))
    assert samples.warmup_done > 1 and samples.warmup_s >= 0.02


@pytest.mark.parametrize("kw", [dict(iterations=0), dict(warmup=-1), dict(duration_s=-1.0)])
def test_bad_timing_config(kw):
    from trtprof.errors import BadInput

    with pytest.raises(BadInput):
        TimingConfig(**kw)


def test_fp16_of_an_ir3_model_that_lists_weights_as_inputs(tmp_path):
    """Old (IR < 4) models list every initializer as a graph input too; the FP16 converter alone then
    writes a graph ORT rejects ("Tensor element type mismatch"). The build must still work."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    w = numpy_helper.from_array(np.random.default_rng(0).standard_normal((4, 3)).astype(np.float32), "w")
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "w"], ["y"], name="mm")], "ir3",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 4]),
         helper.make_tensor_value_info("w", TensorProto.FLOAT, [4, 3])],  # the weight, as an input
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 3])], [w],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 9)])
    model.ir_version = 3
    path = tmp_path / "ir3.onnx"
    onnx.save(model, str(path))
    fp32, fp16 = build_engines(path, [Precision.FP32, Precision.FP16], [2],
                               settings=BuildSettings(engines_dir=tmp_path / "e", backend="onnxruntime"))
    assert [t.name for t in fp16.record.inputs] == ["x"]  # the weight is not something to feed
    r32, r16 = load_runner(fp32.record), load_runner(fp16.record)
    feeds = make_inputs(r32.inputs, resolve_shapes(r32.inputs, 2))
    np.testing.assert_allclose(r16.infer(feeds)["y"], r32.infer(feeds)["y"], rtol=1e-2, atol=1e-2)


def test_ort_error_cause_drops_nested_prefixes_and_source_locations():
    from trtprof.backends.onnxruntime import ort_cause as _ort_cause

    text = ("[ONNXRuntimeError] : 1 : FAIL : /onnxruntime_src/onnxruntime/core/graph/graph.cc:1483 "
            "onnxruntime::Graph::Graph(const onnxruntime::Model&, bool) [ONNXRuntimeError] : 1 : FAIL : "
            "Tensor element type mismatch. 10 != 1\n")
    assert _ort_cause(text) == "Tensor element type mismatch. 10 != 1"
    assert _ort_cause("[ONNXRuntimeError] : 10 : INVALID_GRAPH : bad node x") == "bad node x"


def test_converter_truncation_warnings_are_replaced_by_exact_counts():
    """The converter names one value per tensor; trtprof's weight report counts them exactly, so its
    truncation warnings are dropped and other warnings kept, one line each."""
    from trtprof.convert.fp16 import summarize_warnings

    lines = summarize_warnings([
        "the float32 number 1e-12 will be truncated to 1e-07",
        "the float32 number -3e-09 will be truncated to -1e-07",
        "some other warning",
        "some other warning",
    ])
    assert lines == ["some other warning"]
