"""``layers.graph.nan_guards`` on small generated attention graphs: the NaN guard ``torch.onnx.export`` writes
after a decomposed SDPA Softmax, ``Where(IsNaN(p), 0, p)``, is counted exactly; its near misses are not."""
from __future__ import annotations

from typing import Any

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from trtprof.layers.graph import nan_guards, node_facts

B, H, S, D = 2, 2, 4, 8
SHAPES = {"q": (B, H, S, D), "kt": (B, H, D, S), "v": (B, H, S, D)}


def _zero(name: str, kind: str) -> tuple[list[Any], list[Any]]:
    """(nodes, initializers) that make tensor ``name`` the constant 0 as ``kind`` says: a Constant's ``value``
    (torch.onnx.export's ``[0.0]``), a Constant's ``value_float``, a folded initializer; ``one``: the constant 1;
    ``two``: two zeros."""
    if kind == "init":
        return [], [numpy_helper.from_array(np.zeros(1, np.float32), name)]
    if kind == "value_float":
        return [helper.make_node("Constant", [], [name], value_float=0.0)], []
    values = {"value": [0.0], "one": [1.0], "two": [0.0, 0.0]}[kind]
    return [helper.make_node("Constant", [], [name],
                             value=numpy_helper.from_array(np.array(values, np.float32)))], []


def attention_model(layers: int = 2, *, guard: str = "exact", zero: str = "value") -> onnx.ModelProto:
    """``layers`` attention layers chained (each layer's output is the next one's query): MatMul(q, kᵀ),
    Softmax, then the guard as ``guard`` says, MatMul with v. ``exact``: Where(IsNaN(p), 0, p);
    ``none``: no guard; ``not_softmax``: the guard on the scores (the MatMul's output) instead;
    ``other_branch``: Where(IsNaN(p), 0, v-scores) (its false branch another tensor); ``swapped``:
    Where(IsNaN(p), p, 0); ``zero`` how the 0 is made (``_zero``)."""
    nodes: list[Any] = []
    inits: list[Any] = []
    q = "q"
    for i in range(layers):
        scores, p, out = f"scores{i}", f"p{i}", f"out{i}" if i < layers - 1 else "y"
        nodes += [helper.make_node("MatMul", [q, "kt"], [scores], name=f"qk{i}"),
                  helper.make_node("Softmax", [scores], [p], name=f"softmax{i}", axis=-1)]
        weights = p
        if guard != "none":
            z, zn = f"zero{i}", _zero(f"zero{i}", zero)
            nodes += zn[0]
            inits += zn[1]
            guarded = {"exact": p, "not_softmax": scores, "other_branch": p, "swapped": p}[guard]
            cond = [helper.make_node("IsNaN", [guarded], [f"isnan{i}"], name=f"isnan{i}")]
            branches = {"exact": [z, p], "not_softmax": [z, scores], "other_branch": [z, scores],
                        "swapped": [p, z]}[guard]
            nodes += cond + [helper.make_node("Where", [f"isnan{i}", *branches], [f"w{i}"], name=f"where{i}")]
            weights = f"w{i}"
        nodes.append(helper.make_node("MatMul", [weights, "v"], [out], name=f"pv{i}"))
        q = out
    graph = helper.make_graph(
        nodes, "attention",
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, list(s)) for n, s in SHAPES.items()],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [B, H, S, D])], initializer=inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    onnx.checker.check_model(model)
    return model


@pytest.mark.parametrize("zero", ["value", "value_float", "init"])
def test_the_exact_guard_is_counted_once_a_layer(zero):
    assert nan_guards(attention_model(2, zero=zero).graph) == {"where0": "softmax0", "where1": "softmax1"}
    assert len(nan_guards(attention_model(1, zero=zero).graph)) == 1


@pytest.mark.parametrize("guard", ["none", "not_softmax", "other_branch", "swapped"])
def test_near_misses_are_not_counted(guard):
    assert nan_guards(attention_model(2, guard=guard).graph) == {}


@pytest.mark.parametrize("zero", ["one", "two"])
def test_a_branch_other_than_the_single_zero_is_not_the_guard(zero):
    assert nan_guards(attention_model(2, zero=zero).graph) == {}


def test_the_guard_runs_as_the_pattern_says():
    """The generated graph computes what the docstring says: a fully masked (all -inf) row's softmax is NaN and
    the guard makes it 0, the other rows pass unchanged (so the pattern is the guard, not a lookalike)."""
    import onnxruntime as ort

    sess = ort.InferenceSession(attention_model(1).SerializeToString(), providers=["CPUExecutionProvider"])
    rng = np.random.default_rng(0)
    q = rng.standard_normal(SHAPES["q"]).astype(np.float32)
    q[0, 0, 0] = np.inf  # q·kᵀ of this row: ±inf → its softmax is NaN
    kt = np.abs(rng.standard_normal(SHAPES["kt"])).astype(np.float32)
    v = rng.standard_normal(SHAPES["v"]).astype(np.float32)
    (y,) = sess.run(None, {"q": q, "kt": kt, "v": v})
    assert np.all(y[0, 0, 0] == 0.0) and np.isfinite(y).all()
    assert np.any(y[0, 0, 1] != 0.0)


def test_node_facts_mark_the_guards_and_nothing_else():
    facts = node_facts(attention_model(2), SHAPES)
    marked = {name: f["nan_guard"] for name, f in facts.items() if "nan_guard" in f}
    assert marked == {"where0": "softmax0", "where1": "softmax1"}
    assert facts["where0"]["op_type"] == "Where" and facts["where0"]["output_shape"] == [B, H, S, S]
    assert not any("nan_guard" in f for f in node_facts(attention_model(2, guard="other_branch"), SHAPES).values())


def test_the_compares_graph_facts_carry_the_marks(tmp_path):
    """``layers.profile.graph_facts`` — what ``compare.analysis`` hands to ``diagnose`` as ``PairEvidence.graph``
    on a GPU compare — carries the marks of a model read from a file (the record a stand-in with the three
    fields graph_facts reads)."""
    from types import SimpleNamespace

    from trtprof.layers.profile import graph_facts
    from trtprof.model.onnx_model import OnnxModel

    path = tmp_path / "attention.onnx"
    onnx.save(attention_model(2), str(path))
    model = OnnxModel.load(path)
    record = SimpleNamespace(spec=SimpleNamespace(shape_overrides=dict), inputs=model.info.inputs,
                             model_path=str(path))
    facts = graph_facts(model, record, B)  # type: ignore[arg-type]
    assert {n: f["nan_guard"] for n, f in facts.items() if "nan_guard" in f} == {"where0": "softmax0",
                                                                                 "where1": "softmax1"}


def test_torch_onnx_exports_guard_is_the_pattern():
    """The guard as torch's TorchScript exporter writes it (``symbolic_opset14``): two SDPA calls with a boolean
    mask give four Wheres, two of them the mask's (``Where(mask, 0, -inf)``, not counted) and two guards."""
    torch = pytest.importorskip("torch")
    import io

    import torch.nn.functional as F

    class TwoLayers(torch.nn.Module):
        def forward(self, q, k, v, mask):
            return F.scaled_dot_product_attention(F.scaled_dot_product_attention(q, k, v, attn_mask=mask), k, v,
                                                  attn_mask=mask)

    q = torch.randn(2, 4, 8, 16)
    buf = io.BytesIO()
    torch.onnx.export(TwoLayers(), (q, q, q, torch.ones(2, 1, 8, 8, dtype=torch.bool)), buf, opset_version=17,
                      dynamo=False)
    graph = onnx.load_from_string(buf.getvalue()).graph
    assert [n.op_type for n in graph.node].count("Where") == 4
    guards = nan_guards(graph)
    assert len(guards) == 2 and all(graph_op(graph, s) == "Softmax" for s in guards.values())


def graph_op(graph: Any, key: str) -> str:
    return next(n.op_type for n in graph.node if n.name == key)


def test_a_large_initializer_held_by_its_dims_only_is_no_guard_zero():
    """Shape inference runs on a skeleton whose large initializers carry dims but no values
    (``model.skeleton``): such a tensor is no one-element 0, and reading it must not fail."""
    from trtprof.model.skeleton import WEIGHT_ELEMENTS
    from trtprof.layers.graph import _is_zero_constant  # private: the reading this test is about

    stub = TensorProto(name="w", data_type=TensorProto.FLOAT, dims=[WEIGHT_ELEMENTS + 1])
    zero = numpy_helper.from_array(np.zeros((1,), np.float32), "z")
    assert _is_zero_constant("w", {}, {"w": stub}) is False
    assert _is_zero_constant("z", {}, {"z": zero}) is True
