"""A/B of two models whose inputs differ only in name: paired by position, in one line, the second built
from a copy with the first's input names in the what-if area (issue 34, deliverable 5)."""
from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from trtprof.cli import main
from trtprof.compare import whatif
from trtprof.compare.rename_inputs import RENAMED_DIR, inputs_by_position, rename, renamed_copy
from trtprof.model.demo import make_demo_model
from trtprof.spec import TensorSpec

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")

FAST = ["--backend", "onnxruntime", "--time-budget-s", "0.5", "--round-iterations", "20", "--batch-sizes", "1"]


def with_input_named(src: Path, name: str, out: Path, clash: bool = False) -> Path:
    """``src`` with its one input renamed to ``name`` (every reader of it too); ``clash``: also name an
    internal tensor like the first model's input, so a rename back would join two tensors."""
    model = onnx.load(str(src))
    old = model.graph.input[0].name
    rename(model.graph, {old: name})
    if clash:
        node = model.graph.node[0]
        produced = node.output[0]
        rename(model.graph, {produced: old})  # the first node's output now carries the original input's name
        for n in model.graph.node:
            for i, o in enumerate(n.output):
                if o == produced:
                    n.output[i] = old
    onnx.save(model, str(out))
    return out


def spec(*inputs: TensorSpec) -> SimpleNamespace:
    return SimpleNamespace(inputs=list(inputs))


def test_inputs_pair_by_position_only_when_dtypes_ranks_and_static_dims_match():
    a = spec(TensorSpec("x", "float32", (-1, 3, 16, 16)), TensorSpec("m", "int64", (-1, 8)))
    assert inputs_by_position(a, spec(TensorSpec("pixels", "float32", (1, 3, 16, 16)),
                                      TensorSpec("m", "int64", (-1, 8)))) == {"pixels": "x"}  # dynamic matches any
    assert inputs_by_position(a, spec(TensorSpec("pixels", "float16", (-1, 3, 16, 16)),
                                      TensorSpec("m", "int64", (-1, 8)))) == {}  # dtype
    assert inputs_by_position(a, spec(TensorSpec("pixels", "float32", (-1, 3, 16, 17)),
                                      TensorSpec("m", "int64", (-1, 8)))) == {}  # a static dim
    assert inputs_by_position(a, spec(TensorSpec("pixels", "float32", (-1, 3, 16)),
                                      TensorSpec("m", "int64", (-1, 8)))) == {}  # rank
    assert inputs_by_position(a, spec(TensorSpec("pixels", "float32", (-1, 3, 16, 16)))) == {}  # count
    assert inputs_by_position(a, spec(TensorSpec("m", "int64", (-1, 8)),
                                      TensorSpec("x", "float32", (-1, 3, 16, 16)))) == {}  # same names: by name


def test_a_rename_reaches_subgraphs_and_the_copy_computes_the_same(tmp_path):
    from onnx import TensorProto, helper

    p = helper.make_tensor_value_info("p", TensorProto.FLOAT, [2])
    c = helper.make_tensor_value_info("c", TensorProto.BOOL, [])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])
    then = helper.make_graph([helper.make_node("Identity", ["p"], ["t"])], "then", [],
                             [helper.make_tensor_value_info("t", TensorProto.FLOAT, [2])])
    other = helper.make_graph([helper.make_node("Neg", ["p"], ["e"])], "else", [],
                              [helper.make_tensor_value_info("e", TensorProto.FLOAT, [2])])
    graph = helper.make_graph([helper.make_node("If", ["c"], ["y"], then_branch=then, else_branch=other)], "g",
                              [p, c], [y])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    src = tmp_path / "if.onnx"
    onnx.save(model, str(src))
    out = renamed_copy(src, {"p": "x"}, tmp_path / "copy.onnx")
    assert out is not None and [i.name for i in out.inputs] == ["x", "c"]  # the copy as written, not read back
    session = ort.InferenceSession(str(out.path), providers=["CPUExecutionProvider"])
    assert [i.name for i in session.get_inputs()] == ["x", "c"]
    x = np.array([1.0, -2.0], np.float32)
    np.testing.assert_array_equal(session.run(None, {"x": x, "c": np.array(False)})[0], -x)
    assert renamed_copy(src, {"p": "y"}, tmp_path / "clash.onnx") is None  # 'y' is a tensor there already
    assert not (tmp_path / "clash.onnx").exists()


def test_ab_of_models_whose_inputs_differ_only_in_name_runs_paired_by_position(tmp_path, capsys):
    a = make_demo_model(tmp_path / "a.onnx", channels=8, image=16, classes=10)
    b = with_input_named(a, "pixels", tmp_path / "b.onnx")
    engines, out = tmp_path / "e", tmp_path / "ab.json"
    assert main(["compare", str(a), str(b), "--engines", str(engines), "--out", str(out), *FAST]) == 0
    printed = capsys.readouterr().out
    copy = whatif.whatif_dir(engines) / RENAMED_DIR / "b.onnx"
    old = onnx.load(str(a)).graph.input[0].name
    line = (f"inputs paired by position (b → a): pixels ↔ {old} (the names differ; dtypes and shapes match; b is "
            f"built from a copy with a's input names: {copy})")
    assert line in printed
    data = json.loads(out.read_text())
    assert line in data["warnings"]
    assert data["comparisons"][0]["accuracy"]["max_abs_err"] == 0  # the same computation, renamed
    assert [arm["model"] for arm in data["ab"]["arms"]] == [str(a), str(copy)]
    # the copy's engine lives in the what-if area, not among the user's engines
    assert not list(engines.glob("b.*.json")) and list((engines / whatif.WHATIF_DIR).glob("b.*.json"))
    assert [i.name for i in onnx.load(str(b)).graph.input] == ["pixels"]  # the user's file is not changed


def test_inputs_whose_new_names_clash_are_still_refused_in_one_line(tmp_path, capsys):
    a = make_demo_model(tmp_path / "a.onnx", channels=8, image=16, classes=10)
    b = with_input_named(a, "pixels", tmp_path / "b.onnx", clash=True)
    from trtprof.compare.ab import model_io

    mapping = inputs_by_position(model_io(a), model_io(b))
    assert mapping == {"pixels": onnx.load(str(a)).graph.input[0].name}  # they would pair by position ...
    assert renamed_copy(b, mapping, tmp_path / "copy.onnx") is None  # ... but the new name is taken inside b
    out = tmp_path / "ab.json"
    assert main(["compare", str(a), str(b), "--engines", str(tmp_path / "e"), "--out", str(out), *FAST]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("trtprof compare: error: cannot A/B") and "inputs differ" in err and "\n" not in err
    assert not out.exists()
