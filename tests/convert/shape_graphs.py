"""Small ONNX graphs with the shape arithmetic ``torch.onnx.export`` writes for transformers (issue 43),
generated for the fixed-shape folding tests (convert/fixed_shapes.py) and the torch backend's."""
from __future__ import annotations

from pathlib import Path

import numpy as np


def _const(name: str, value) -> object:
    from onnx import helper, numpy_helper

    return helper.make_node("Constant", [], [name], value=numpy_helper.from_array(np.asarray(value), name))


def _save(model, path: Path | None):
    import onnx

    onnx.checker.check_model(model)
    if path is not None:
        onnx.save(model, str(path))
    return model


def shape_arithmetic_model(path: Path | None = None, *, with_if: bool = True):
    """x [N, 4, 8] float32 → out [N, 16], every size computed from ``Shape(x)``:
    Shape → Gather → Mul → Unsqueeze → Concat → Reshape; Range over a size, cast and added; ConstantOfShape
    of [N, 1] expanded to Shape(y); a scale Sqrt(Cast(size)) (a float constant once folded); ``If`` on
    N > 2 (``with_if``: onnx2torch cannot convert an unfolded If); Slice with an end computed from a size;
    Gather of a scalar index, Tile, and an Expand of run-time values to a computed shape; MatMul + Add."""
    from onnx import TensorProto as T, helper as h, numpy_helper as nh

    rng = np.random.default_rng(0)
    w = nh.from_array(rng.standard_normal((16, 16)).astype(np.float32), "W")
    b = nh.from_array(rng.standard_normal((16,)).astype(np.float32), "B")
    nodes = [
        h.make_node("Shape", ["x"], ["s"], name="shape"),
        _const("i0", np.int64(0)), _const("i1", np.int64(1)), _const("i2", np.int64(2)),
        _const("ax0", np.array([0], np.int64)), _const("one1", np.array([1], np.int64)),
        h.make_node("Gather", ["s", "i0"], ["n"], axis=0, name="gather_n"),
        h.make_node("Gather", ["s", "i1"], ["ch"], axis=0, name="gather_c"),
        h.make_node("Gather", ["s", "i2"], ["w"], axis=0, name="gather_w"),
        h.make_node("Mul", ["ch", "w"], ["cw"], name="cw"),
        h.make_node("Unsqueeze", ["n", "ax0"], ["n1"], name="unsq_n"),
        h.make_node("Unsqueeze", ["cw", "ax0"], ["cw1"], name="unsq_cw"),
        h.make_node("Concat", ["n1", "cw1"], ["newshape"], axis=0, name="concat_shape"),
        h.make_node("Reshape", ["x", "newshape"], ["y0"], name="reshape"),
        _const("zero", np.int64(0)), _const("one", np.int64(1)),
        h.make_node("Range", ["zero", "cw", "one"], ["r"], name="range"),
        h.make_node("Cast", ["r"], ["rf"], to=T.FLOAT, name="cast_range"),
        h.make_node("Add", ["y0", "rf"], ["y1"], name="add_range"),
        h.make_node("Concat", ["n1", "one1"], ["mshape"], axis=0, name="concat_mask"),
        h.make_node("ConstantOfShape", ["mshape"], ["m"], value=nh.from_array(np.array([0.5], np.float32)),
                    name="mask"),
        h.make_node("Shape", ["y1"], ["ys"], name="shape_y1"),
        h.make_node("Expand", ["m", "ys"], ["mx"], name="expand_mask"),
        h.make_node("Mul", ["y1", "mx"], ["y2"], name="apply_mask"),
        h.make_node("Cast", ["cw"], ["cwf"], to=T.FLOAT, name="cast_size"),
        h.make_node("Sqrt", ["cwf"], ["scale"], name="sqrt_size"),
        h.make_node("Div", ["y2", "scale"], ["y3"], name="scale"),
    ]
    if with_if:
        nodes += [
            h.make_node("Greater", ["n", "i2"], ["big"], name="n_gt_2"),
            h.make_node("If", ["big"], ["y4"], name="if_on_size",
                        then_branch=h.make_graph([_const("k2", np.float32(2.0)), h.make_node("Mul", ["y3", "k2"], ["t"])],
                                                 "then", [], [h.make_tensor_value_info("t", T.FLOAT, None)]),
                        else_branch=h.make_graph([_const("k1", np.float32(1.0)), h.make_node("Add", ["y3", "k1"], ["e"])],
                                                 "else", [], [h.make_tensor_value_info("e", T.FLOAT, None)])),
        ]
    else:
        nodes.append(h.make_node("Identity", ["y3"], ["y4"], name="no_if"))
    nodes += [
        h.make_node("Div", ["cw", "i2"], ["half"], name="half_size"),
        h.make_node("Unsqueeze", ["half", "ax0"], ["half1"], name="unsq_half"),
        h.make_node("Slice", ["y4", "ax0", "half1", "one1"], ["ys16"], name="slice_half"),  # [N, 16]
        h.make_node("Gather", ["x", "i0"], ["row"], axis=1, name="gather_row"),  # [N, 8]
        _const("reps", np.array([1, 2], np.int64)),
        h.make_node("Tile", ["row", "reps"], ["tiled"], name="tile_row"),  # [N, 16]
        h.make_node("ReduceMean", ["x"], ["mean"], axes=[1, 2], keepdims=1, name="mean"),  # [N, 1, 1]
        h.make_node("Concat", ["n1", "one1"], ["n_by_1"], axis=0, name="concat_n1"),
        h.make_node("Reshape", ["mean", "n_by_1"], ["mean2"], name="reshape_mean"),  # [N, 1]
        _const("sixteen", np.array([16], np.int64)),
        h.make_node("Concat", ["n1", "sixteen"], ["n_by_16"], axis=0, name="concat_n16"),
        h.make_node("Expand", ["mean2", "n_by_16"], ["mean16"], name="expand_mean"),  # [N, 16], run-time values
        h.make_node("Add", ["ys16", "tiled"], ["z0"], name="add_tiled"),
        h.make_node("Add", ["z0", "mean16"], ["z"], name="add_mean"),
        h.make_node("MatMul", ["z", "W"], ["mm"], name="matmul"),
        h.make_node("Add", ["mm", "B"], ["out"], name="bias"),
    ]
    graph = h.make_graph(nodes, "shape_arithmetic", [h.make_tensor_value_info("x", T.FLOAT, ["N", 4, 8])],
                         [h.make_tensor_value_info("out", T.FLOAT, ["N", 16])], [w, b])
    model = h.make_model(graph, opset_imports=[h.make_opsetid("", 17)])
    model.ir_version = 8
    return _save(model, path)


def data_dependent_model(path: Path | None = None):
    """x [N, 8] → as many ones as x has values above 0 (a length known only from the data): NonZero, its
    Shape, a ConstantOfShape of that size. Fixing N leaves the output's length dynamic."""
    from onnx import TensorProto as T, helper as h, numpy_helper as nh

    nodes = [_const("z", np.float32(0)), h.make_node("Greater", ["x", "z"], ["g"]),
             h.make_node("NonZero", ["g"], ["idx"]),
             h.make_node("Shape", ["idx"], ["s"]), _const("i1", np.int64(1)),
             h.make_node("Gather", ["s", "i1"], ["k"], axis=0), _const("ax0", np.array([0], np.int64)),
             h.make_node("Unsqueeze", ["k", "ax0"], ["k1"]),
             h.make_node("ConstantOfShape", ["k1"], ["out"], value=nh.from_array(np.array([1.0], np.float32)))]
    graph = h.make_graph(nodes, "data_dependent", [h.make_tensor_value_info("x", T.FLOAT, ["N", 8])],
                         [h.make_tensor_value_info("out", T.FLOAT, ["K"])])
    model = h.make_model(graph, opset_imports=[h.make_opsetid("", 17)])
    model.ir_version = 8
    return _save(model, path)


def run_ort(model, feeds):
    """Outputs of ``model`` in ONNX Runtime on the CPU, with its graph optimisations off (the graph as
    written is what runs)."""
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    session = ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])
    return session.run(None, feeds)


def pad_cumsum_model(path: Path | None = None):
    """x [N, 6] → Pad(x, pads [0, 1, 0, 2], 0.5) → CumSum over axis 1 (no ``reverse`` attribute: ONNX's
    default, summing from the start) → out [N, 9]: the pads, the fill and the axis are constants that
    onnx2torch takes as tensors (RoBERTa's position ids are such a CumSum; Swin pads its windows)."""
    from onnx import TensorProto as T, helper as h, numpy_helper as nh

    nodes = [h.make_node("Pad", ["x", "pads", "fill"], ["p"], mode="constant", name="pad"),
             h.make_node("CumSum", ["p", "axis"], ["out"], name="cumsum")]
    inits = [nh.from_array(np.array([0, 1, 0, 2], np.int64), "pads"), nh.from_array(np.array(0.5, np.float32), "fill"),
             nh.from_array(np.array(1, np.int64), "axis")]
    graph = h.make_graph(nodes, "pad_cumsum", [h.make_tensor_value_info("x", T.FLOAT, ["N", 6])],
                         [h.make_tensor_value_info("out", T.FLOAT, ["N", 9])], inits)
    model = h.make_model(graph, opset_imports=[h.make_opsetid("", 17)])
    model.ir_version = 8
    return _save(model, path)
