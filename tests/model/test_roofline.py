"""FLOP counts of known layers against their formulas, bytes, and the peak-rate table's shape."""
from __future__ import annotations

import numpy as np
import pytest

from trtprof.model import roofline

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402


def _model(nodes, inputs, outputs, inits):
    graph = helper.make_graph(nodes, "g", inputs, outputs, inits)
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    return m


def _w(name, shape):
    return numpy_helper.from_array(np.zeros(shape, np.float32), name)


def test_conv_with_stride_pads_and_groups_matches_the_formula():
    n, cin, h, w, cout, k, groups, stride = 3, 8, 17, 13, 12, 3, 2, 2
    m = _model([helper.make_node("Conv", ["x", "W", "B"], ["y"], strides=[stride, stride], pads=[1, 1, 1, 1],
                                 group=groups)],
               [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", cin, h, w])],
               [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
               [_w("W", (cout, cin // groups, k, k)), _w("B", (cout,))])
    cost = roofline.graph_cost(m, {"x": (n, cin, h, w)})
    hout = (h + 2 - k) // stride + 1
    wout = (w + 2 - k) // stride + 1
    assert cost.flops == 2 * n * cout * hout * wout * (cin // groups) * k * k
    assert cost.flops_by_op == {"Conv": cost.flops}
    assert cost.weight_bytes == 4 * (cout * (cin // groups) * k * k + cout)
    assert cost.activation_bytes == 4 * (n * cin * h * w + n * cout * hout * wout)
    assert roofline.graph_cost(m, {"x": (n, cin, h, w)}, float_bytes=2).bytes * 2 == cost.bytes


def test_gemm_transposed_and_batched_matmul_match_the_formula():
    m_, k, n_ = 5, 7, 11
    m = _model([helper.make_node("Gemm", ["a", "B"], ["g"], transA=1),
                helper.make_node("Reshape", ["g", "shape"], ["g3"]),
                helper.make_node("MatMul", ["g3", "C"], ["y"])],
               [helper.make_tensor_value_info("a", TensorProto.FLOAT, [k, m_])],
               [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
               [_w("B", (k, n_)), numpy_helper.from_array(np.array([1, m_, n_], np.int64), "shape"), _w("C", (n_, 3))])
    cost = roofline.graph_cost(m, {"a": (k, m_)})
    assert cost.flops_by_op["Gemm"] == 2 * m_ * k * n_
    assert cost.flops_by_op["MatMul"] == 2 * 1 * m_ * n_ * 3
    assert cost.uncounted == ()


def test_shape_inference_leaves_large_weights_out_and_counts_what_a_full_copy_counts(monkeypatch):
    """Shape inference runs on the weights' skeleton (``model.skeleton``: large float initializers keep their
    dims, not their values); the shape tensor a Reshape reads keeps its values, so its data propagation still
    holds: every count is the full copy's, and the model itself is untouched."""
    from trtprof.model import skeleton

    big = skeleton.WEIGHT_ELEMENTS + 1  # just outside the threshold: values left out; "shape": kept
    m = _model([helper.make_node("MatMul", ["x", "W"], ["h"]),
                helper.make_node("Reshape", ["h", "shape"], ["h3"]),
                helper.make_node("MatMul", ["h3", "C"], ["y"])],
               [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 4])],
               [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
               [_w("W", (4, big)), numpy_helper.from_array(np.array([-1, 1, big], np.int64), "shape"),
                _w("C", (big, 3))])
    graph = roofline._with_inputs_fixed(m, {"x": (5, 4)}).graph
    stored = {i.name: len(i.raw_data) + len(i.float_data) + len(i.int64_data) for i in graph.initializer}
    assert stored["W"] == stored["C"] == 0 and stored["shape"] > 0
    assert all(len(i.raw_data) or len(i.float_data) for i in m.graph.initializer if i.name != "shape")
    cost = roofline.graph_cost(m, {"x": (5, 4)})
    assert cost.flops_by_op == {"MatMul": 2 * 5 * 4 * big + 2 * 5 * big * 3} and cost.uncounted == ()
    assert cost.weight_bytes == 4 * (4 * big + big * 3) + 8 * 3

    def full_copy(model):
        copy = onnx.ModelProto()
        copy.CopyFrom(model)
        return copy

    monkeypatch.setattr(skeleton, "skeleton", full_copy)
    assert roofline.graph_cost(m, {"x": (5, 4)}) == cost


def test_flops_scale_with_batch_and_unresolvable_shapes_are_reported_not_guessed():
    m = _model([helper.make_node("MatMul", ["x", "W"], ["y"])],
               [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 4])],
               [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], [_w("W", (4, 6))])
    one, eight = roofline.graph_cost(m, {"x": (1, 4)}), roofline.graph_cost(m, {"x": (8, 4)})
    assert eight.flops == 8 * one.flops
    unknown = roofline.graph_cost(m, {})  # batch left symbolic
    assert unknown.flops == 0 and len(unknown.uncounted) == 1


def test_achieved_share_of_peak_is_flops_over_time_over_peak():
    cost = roofline.GraphCost(batch_size=1, flops=10**9, weight_bytes=10**6, activation_bytes=10**6)
    peak = roofline.DevicePeak(name="test", compute_capability="8.0", multiprocessors=10, max_sm_clock_mhz=1000.0,
                               rates=roofline.PEAKS["8.0"])
    a = roofline.achieved(cost, 2.0, peak, "fp16")
    assert a["achieved_flops_per_s"] == pytest.approx(10**9 / 2e-3)
    assert a["peak_flops_per_s"] == pytest.approx(roofline.PEAKS["8.0"].fp16_flop_per_clk_sm * 10 * 1e9)
    assert a["share_of_peak"] == pytest.approx(a["achieved_flops_per_s"] / a["peak_flops_per_s"])
    assert roofline.achieved(cost, 2.0, None, "fp16")["share_of_peak"] is None


def test_peak_table_cites_a_source_for_every_row_and_orders_rates_sensibly():
    for cc, row in roofline.PEAKS.items():
        assert row.source and ("whitepaper" in row.source or "Programming Guide" in row.source), cc
        assert row.fp32_flop_per_clk_sm > 0 and row.fp16_flop_per_clk_sm > 0
        if row.fp16_tensor_cores:
            assert row.fp16_over_fp32 > 1
        if row.tf32_flop_per_clk_sm:
            assert row.fp32_flop_per_clk_sm < row.tf32_flop_per_clk_sm < row.fp16_flop_per_clk_sm
    assert roofline.peak_rates("6.1").fp16_over_fp32 < 1  # consumer Pascal: FP16 slower than FP32
    assert roofline.peak_rates("12.7") is None and roofline.peak_rates(None) is None


def test_query_device_peak_without_a_gpu_is_none_not_a_crash():
    from trtprof.system.cuda import device_count

    if device_count() > 0:  # device_count answers 0 without a driver or a device; it does not raise
        pytest.skip("a CUDA device is present")
    assert roofline.query_device_peak() is None


@pytest.mark.gpu
def test_query_device_peak_on_a_gpu_reads_its_table_row():
    from trtprof.system.cuda import device_count

    if device_count() == 0:
        pytest.skip("no CUDA device")
    peak = roofline.query_device_peak()
    assert peak is not None and peak.rates == roofline.peak_rates(peak.compute_capability)
    assert peak.multiprocessors > 0 and peak.max_sm_clock_mhz > 0 and peak.name
