"""Fixed-shape folding (convert/fixed_shapes.py, issue 43) on small generated graphs with the shape
arithmetic torch.onnx.export writes: outputs exactly equal before and after in ONNX Runtime, no shape op
left, what was removed counted; a graph whose shapes stay dynamic (NonZero) left alone with a note."""
from __future__ import annotations

import numpy as np
import pytest

from tests.convert.shape_graphs import data_dependent_model, run_ort, shape_arithmetic_model
from trtprof.convert import fixed_shapes
from trtprof.convert.fixed_shapes import fold_shapes, has_shape_arithmetic, op_counts
from trtprof.errors import BadInput


@pytest.mark.parametrize("batch", [1, 2, 3, 5])  # 1–2 take If's else branch, 3 and 5 its then branch
def test_folding_keeps_the_outputs_exactly_and_leaves_no_shape_op(batch):
    model = shape_arithmetic_model()
    before = model.SerializeToString()
    x = np.random.default_rng(batch).standard_normal((batch, 4, 8)).astype(np.float32)
    result = fold_shapes(model, {"x": x.shape})
    assert model.SerializeToString() == before  # the caller's graph is not changed
    assert result.folded and result.static and result.dynamic == ""
    assert result.remaining_shape_ops == {}
    ops = op_counts(result.model.graph)
    assert not set(ops) & {"Shape", "Range", "ConstantOfShape", "If", "Concat", "Unsqueeze", "Cast", "Sqrt"}
    for op in ("Shape", "Range", "ConstantOfShape", "If", "Concat", "Sqrt"):
        assert result.removed[op] >= 1, op
    assert result.nodes_after == len(result.model.graph.node) < result.nodes_before == len(model.graph.node)
    assert [d.dim_value for d in result.model.graph.input[0].type.tensor_type.shape.dim] == [batch, 4, 8]
    want, got = run_ort(model, {"x": x}), run_ort(result.model, {"x": x})
    assert got[0].dtype == np.float32 and np.array_equal(got[0], want[0])
    # the compute that reads the data is all still there (only shape arithmetic went)
    for op in ("MatMul", "ReduceMean", "Tile", "Slice", "Expand", "Gather"):
        assert ops[op] >= 1, op
    line = result.line()
    assert line.startswith(f"shapes fixed at x {batch}x4x8 and folded (onnxruntime ") and "→ 15 nodes" in line
    assert result.to_json()["removed"] == result.removed


def test_a_graph_whose_shapes_stay_dynamic_is_left_alone_with_a_note():
    model = data_dependent_model()
    result = fold_shapes(model, {"x": (3, 8)})
    assert result.model is model and not result.folded and not result.static
    assert result.dynamic.startswith("its shapes stay dynamic: data-dependent op(s) NonZero")
    assert result.remaining_shape_ops == {"Shape": 1, "ConstantOfShape": 1}
    assert result.line() == f"shapes not folded at x 3x8: {result.dynamic}"
    x = np.array([[1, -1, 2, 0, 3, -2, 0.5, 4]] * 3, np.float32)
    assert np.array_equal(run_ort(result.model, {"x": x})[0], np.ones(int((x > 0).sum()), np.float32))


def test_an_input_left_without_a_shape_leaves_the_graph_alone():
    from onnx import TensorProto, helper

    model = shape_arithmetic_model()
    model.graph.input.append(helper.make_tensor_value_info("extra", TensorProto.FLOAT, ["M", 2]))
    result = fold_shapes(model, {"x": (2, 4, 8)})
    assert result.model is model and result.dynamic == "input(s) extra not fixed (no shape given)"


def test_a_graph_without_shape_arithmetic_has_nothing_to_fold():
    from onnx import TensorProto, helper, numpy_helper

    w = numpy_helper.from_array(np.ones((4, 2), np.float32), "w")
    graph = helper.make_graph([helper.make_node("MatMul", ["x", "w"], ["y"])], "plain",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 4])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 2])], [w])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    assert not has_shape_arithmetic(model)
    result = fold_shapes(model, {"x": (2, 4)})
    assert result.model is model and not result.folded and result.static
    assert result.line() == "shapes fixed at x 2x4: nothing to fold"


def test_has_shape_arithmetic_needs_a_dynamic_input_and_a_shape_op():
    model = shape_arithmetic_model()
    assert has_shape_arithmetic(model)
    for dim, size in zip(model.graph.input[0].type.tensor_type.shape.dim, (2, 4, 8)):
        dim.Clear()
        dim.dim_value = size
    assert not has_shape_arithmetic(model)  # every dim already fixed: the exporter's graph is what runs


def test_shapes_that_contradict_the_model_are_refused():
    model = shape_arithmetic_model()
    with pytest.raises(BadInput, match="rank 3, not 2"):
        fold_shapes(model, {"x": (2, 32)})
    with pytest.raises(BadInput, match="fixes dim 1 to 4, not 5"):
        fold_shapes(model, {"x": (2, 5, 8)})
    with pytest.raises(BadInput, match="no graph input named y"):
        fold_shapes(model, {"x": (2, 4, 8), "y": (1,)})


def test_an_optimiser_that_rewrites_the_computation_is_not_kept(monkeypatch):
    """With ONNX Runtime's fusions left on, MatMul+Add becomes Gemm: not a fold, so the graph is kept as
    written (what the check after the optimiser is for, whatever a later ORT adds to its basic level)."""
    monkeypatch.setattr(fixed_shapes, "NOT_A_FOLD", ())
    model = shape_arithmetic_model()
    result = fold_shapes(model, {"x": (2, 4, 8)})
    assert result.model is model and not result.folded
    assert "rewrote more than shapes (Gemm +1)" in result.dynamic


def test_shape_inference_runs_on_a_skeleton_without_the_weights_values():
    """fix_input_shapes infers on ``skeleton``: large float initializers keep name, type and dims but not
    their values (copying BERT-base's weights through inference took seconds); small ones stay whole."""
    from onnx import numpy_helper

    model = shape_arithmetic_model()
    big = numpy_helper.from_array(np.ones((64, 32), np.float32), "big")
    model.graph.initializer.append(big)
    bones = fixed_shapes.skeleton(model)
    stub = {i.name: i for i in bones.graph.initializer}
    assert list(stub["big"].dims) == [64, 32] and not stub["big"].raw_data and not stub["big"].float_data
    assert stub["W"].raw_data == {i.name: i for i in model.graph.initializer}["W"].raw_data  # 256 values: kept
    fixed = fixed_shapes.fix_input_shapes(model, {"x": (3, 4, 8)})
    assert {i.name: i for i in fixed.graph.initializer}["big"].raw_data == big.raw_data  # the copy has them
    shapes = {v.name: [d.dim_value for d in v.type.tensor_type.shape.dim] for v in fixed.graph.value_info}
    assert shapes["y0"] == [3, 32] and shapes["mean"] == [3, 1, 1]
