"""Issue 36 item 8: the FP16 conversion without onnxconverter-common's quadratic steps gives the very same
graph as the library's own code (byte for byte), on chains, DAGs whose nodes are listed out of order,
branches, subgraphs and keep-lists of every kind; and the number of steps grows ~linearly (counted, not
timed: no timing thresholds in unit tests)."""
from __future__ import annotations

import random

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
float16 = pytest.importorskip("onnxconverter_common.float16")

from onnx import TensorProto, helper, numpy_helper  # noqa: E402

from trtprof.convert import fp16_linear  # noqa: E402
from trtprof.convert.fp16 import DEFAULT_OP_BLOCK_LIST, prepare_for_fp16  # noqa: E402


def _model(nodes, inputs, outputs, inits):
    graph = helper.make_graph(nodes, "g", inputs, outputs, inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model


def chain(n: int):
    rng = np.random.default_rng(0)
    nodes, inits, prev = [], [], "x"
    for i in range(n // 2):
        inits.append(numpy_helper.from_array(rng.standard_normal((4, 4)).astype(np.float32), f"w{i}"))
        nodes += [helper.make_node("MatMul", [prev, f"w{i}"], [f"m{i}"], name=f"matmul_{i}"),
                  helper.make_node("Relu", [f"m{i}"], [f"r{i}"], name=f"relu_{i}")]
        prev = f"r{i}"
    return _model(nodes, [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 4])],
                  [helper.make_tensor_value_info(prev, TensorProto.FLOAT, ["N", 4])], inits)


def shuffled_dag(n: int, seed: int):
    """Each node adds two earlier tensors; the node list is shuffled (the sort has real work to do)."""
    rnd = random.Random(seed)
    names, nodes = ["x"], []
    for i in range(n):
        a, b = rnd.choice(names), rnd.choice(names)
        op = rnd.choice(["Add", "Mul", "Sub"])
        nodes.append(helper.make_node(op, [a, b], [f"t{i}"], name=f"{op.lower()}_{i}"))
        names.append(f"t{i}")
    rnd.shuffle(nodes)
    return _model(nodes, [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 3])],
                  [helper.make_tensor_value_info(f"t{n - 1}", TensorProto.FLOAT, ["N", 3]),
                   helper.make_tensor_value_info(f"t{n // 2}", TensorProto.FLOAT, ["N", 3])], [])


def with_subgraph():
    then = helper.make_graph([helper.make_node("Relu", ["a"], ["o1"], name="then_relu")], "then", [],
                             [helper.make_tensor_value_info("o1", TensorProto.FLOAT, ["N", 3])])
    other = helper.make_graph([helper.make_node("Neg", ["a"], ["o2"], name="else_neg")], "else", [],
                              [helper.make_tensor_value_info("o2", TensorProto.FLOAT, ["N", 3])])
    nodes = [helper.make_node("If", ["c"], ["y"], name="branch", then_branch=then, else_branch=other),
             helper.make_node("Abs", ["x"], ["a"], name="abs")]  # listed after its reader: sorted first
    return _model(nodes, [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 3]),
                          helper.make_tensor_value_info("c", TensorProto.BOOL, [])],
                  [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 3])], [])


def _convert(model, keep, ops, *, linear: bool):
    prepared, _ = prepare_for_fp16(model)
    block = sorted(set(float16.DEFAULT_OP_BLOCK_LIST) | set(DEFAULT_OP_BLOCK_LIST) | set(ops))
    copy = onnx.ModelProto()
    copy.CopyFrom(prepared)
    if linear:
        with fp16_linear.linear_conversion():
            out = float16.convert_float_to_float16(copy, keep_io_types=True, op_block_list=block, node_block_list=keep)
    else:
        out = float16.convert_float_to_float16(copy, keep_io_types=True, op_block_list=block, node_block_list=keep)
    return out.SerializeToString(deterministic=True)


def _names(model):
    return [n.name for n in prepare_for_fp16(model)[0].graph.node]


CASES = {
    "chain, nothing kept": (chain(40), lambda names: [], ()),
    "chain, prefix kept": (chain(40), lambda names: names[:20], ()),
    "chain, every other kept": (chain(40), lambda names: names[::2], ()),
    "chain, window kept": (chain(40), lambda names: names[11:29], ()),
    "chain, an op kept": (chain(20), lambda names: [], ("Relu",)),
    "dag, nothing kept": (shuffled_dag(60, 1), lambda names: [], ()),
    "dag, some kept": (shuffled_dag(60, 2), lambda names: names[::3], ()),
    "dag, all kept": (shuffled_dag(30, 3), lambda names: names, ()),
    "subgraph": (with_subgraph(), lambda names: ["abs"], ()),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_the_linear_conversion_gives_the_librarys_graph(case):
    model, pick, ops = CASES[case]
    keep = pick(_names(model))
    assert _convert(model, keep, ops, linear=True) == _convert(model, keep, ops, linear=False)


def test_keeping_cast_itself_in_fp32_ends(conv_model):
    """``--keep-fp32-ops Cast``: the library's own loop inserts casts for the casts it inserted, without
    end (found while writing this test); the conversion here ends, and every original node is there."""
    from trtprof.convert.fp16 import convert_fp16

    model = onnx.load(str(conv_model))
    converted = convert_fp16(model, keep_fp32_ops=["Cast"], keep_fp32_nodes=_names(model)[:2]).model
    assert {n.name for n in model.graph.node} <= {n.name for n in converted.graph.node}
    onnx.checker.check_model(converted)


def test_the_library_is_restored_after_a_conversion():
    before = (float16.sort_topology, float16.process_node_in_block_list, float16.remove_unnecessary_cast_node)
    with pytest.raises(RuntimeError):
        with fp16_linear.linear_conversion():
            assert float16.sort_topology is fp16_linear.sort_topology
            raise RuntimeError
    assert (float16.sort_topology, float16.process_node_in_block_list,
            float16.remove_unnecessary_cast_node) == before


def test_a_cycle_is_an_error_not_a_hang():
    nodes = [helper.make_node("Relu", ["b"], ["a"], name="p"), helper.make_node("Relu", ["a"], ["b"], name="q")]
    graph = helper.make_graph(nodes, "g", [], [helper.make_tensor_value_info("a", TensorProto.FLOAT, [1])])
    with pytest.raises(ValueError, match="cycle"):
        fp16_linear.sort_graph_node(graph)


def test_the_sort_visits_each_node_a_bounded_number_of_times(monkeypatch):
    """Counted work, not time: heap pushes grow like N (the library's scan grows like N²)."""
    pushes = []
    real = fp16_linear.heapq.heappush
    monkeypatch.setattr(fp16_linear.heapq, "heappush", lambda h, x: (pushes.append(x), real(h, x)))
    counts = {}
    for n in (200, 2000):
        pushes.clear()
        graph = prepare_for_fp16(shuffled_dag(n, 4))[0].graph
        fp16_linear.sort_graph_node(graph)
        counts[n] = len(pushes)
    assert counts[2000] <= 10 * counts[200] + 10
