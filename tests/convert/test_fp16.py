"""Issue 10: FP16 engines that are what they claim.

FP16 arithmetic is checked with ``onnx.reference.ReferenceEvaluator``, which runs an FP16 graph with
numpy float16 arithmetic (so 1e9 really becomes inf), unlike ONNX Runtime's CPU provider, which
computes "fp16" graphs in FP32 behind casts.
"""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from trtprof.builder.pipeline import BuildSettings, build_engines
from trtprof.cli import main
from trtprof.spec import Precision

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402


def _save(graph, path: Path, opset: int = 17) -> Path:
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)]), str(path))
    return path


def _const(name: str, value: float):
    return helper.make_node("Constant", [], [name], name=f"const_{name}",
                            value=helper.make_tensor(name, TensorProto.FLOAT, [], [value]))


def overflow_model(path: Path, *, second_reader: bool = False) -> Path:
    """y = x · 3e4 · 3e4 / 3e4 / 3e4: the identity in FP32; t2 ≈ 1e9 is inf in FP16."""
    nodes = [_const("k", 3e4),
             helper.make_node("Mul", ["x", "k"], ["t1"], name="mul1"),
             helper.make_node("Mul", ["t1", "k"], ["t2"], name="mul2"),
             helper.make_node("Div", ["t2", "k"], ["t3"], name="div1")]
    if second_reader:  # t2 read twice: the converter alone then keeps a FP16 round trip; y = 2x
        nodes += [helper.make_node("Div", ["t2", "k"], ["t3b"], name="div1b"),
                  helper.make_node("Div", ["t3", "k"], ["t5"], name="div2"),
                  helper.make_node("Div", ["t3b", "k"], ["t5b"], name="div2b"),
                  helper.make_node("Add", ["t5", "t5b"], ["y"], name="add")]
    else:
        nodes.append(helper.make_node("Div", ["t3", "k"], ["y"], name="div2"))
    graph = helper.make_graph(nodes, "overflow", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 8])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 8])])
    return _save(graph, path)


def weights_model(path: Path, values) -> Path:
    w = numpy_helper.from_array(np.asarray(values, np.float32), "w")
    graph = helper.make_graph([helper.make_node("Mul", ["x", "w"], ["y"], name="scale")], "weights",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", len(values)])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", len(values)])], [w])
    return _save(graph, path)


def output_read_inside_model(path: Path) -> Path:
    """gp is a graph output and Add reads it too (the issue's failing fp16 build); nodes unnamed."""
    graph = helper.make_graph(
        [helper.make_node("Mul", ["x", "x"], ["gp"]), helper.make_node("Add", ["gp", "x"], ["y"])], "gp",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 3])],
        [helper.make_tensor_value_info("gp", TensorProto.FLOAT, ["N", 3]),
         helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 3])])
    return _save(graph, path)


def _fp16_run(model_path: Path, x: np.ndarray) -> np.ndarray:
    from onnx.reference import ReferenceEvaluator

    with np.errstate(over="ignore", invalid="ignore"):
        return ReferenceEvaluator(onnx.load(str(model_path))).run(None, {"x": x})[0]


def _bench_x(shape) -> np.ndarray:
    return np.random.default_rng(0).standard_normal(shape, dtype=np.float32)  # == inputs.make_inputs, seed 0


# -- 1. faithful conversion ----------------------------------------------------------------------


def test_a_30000_weight_survives_and_a_1e5_weight_is_reported(tmp_path):
    from trtprof.convert.fp16 import convert_fp16

    model = onnx.load(str(weights_model(tmp_path / "w.onnx", [30000.0, 1e5, -2e5, 0.5, 1e-9, 0.0])))
    conv = convert_fp16(model)
    w = numpy_helper.to_array(next(i for i in conv.model.graph.initializer if i.name == "w"))
    assert w.dtype == np.float16
    assert w[0] == np.float16(30000.0) and float(w[0]) == 30000.0  # exact in FP16, and kept
    assert list(w[1:3]) == [65504.0, -65504.0]  # beyond FP16's range: clamped to its max, sign kept
    assert float(w[4]) == 2.0 ** -24  # below the smallest subnormal: raised to it, not flushed to 0
    assert w[3] == 0.5 and w[5] == 0.0
    [clamped] = [c for c in conv.weights.changes if c.kind == "clamped"]
    assert (clamped.name, clamped.count, clamped.elements) == ("w", 2, 6)
    assert (clamped.original_min_abs, clamped.original_max_abs, clamped.new_abs) == (1e5, 2e5, 65504.0)
    [raised] = [c for c in conv.weights.changes if c.kind == "raised"]
    assert raised.count == 1 and raised.new_abs == 2.0 ** -24
    notes = " ".join(conv.notes)
    assert "2 values in 1 tensor exceed FP16's max 65504 and were clamped to ±65504: w (2 of 6" in notes
    assert "raised to ±5.96e-08 instead of flushed to 0" in notes
    assert "1e-07" not in notes and "10000" not in notes  # the converter's defaults are not in play


def test_weights_inside_range_are_not_reported(tmp_path):
    from trtprof.convert.fp16 import convert_fp16

    conv = convert_fp16(onnx.load(str(weights_model(tmp_path / "w.onnx", [30000.0, -65504.0, 0.25]))))
    assert conv.weights.changes == () and not any("clamped" in n or "raised" in n for n in conv.notes)
    assert conv.weights.to_json()["max_abs"] == 65504.0


def test_build_records_clamped_weights_by_name(tmp_path, capsys):
    model = weights_model(tmp_path / "w.onnx", [30000.0, 1e5])
    assert main(["build", str(model), "--fp16", "--engines", str(tmp_path / "e"), "--backend", "onnxruntime"]) == 0
    out = capsys.readouterr().out
    assert "clamped to ±65504: w (1 of 2, |x| 1e+05 → 65504)" in out
    [meta] = [json.loads(p.read_text()) for p in (tmp_path / "e").glob("*.json")]
    changes = meta["backend_metadata"]["fp16_weights"]["changes"]
    assert changes == [{"name": "w", "kind": "clamped", "count": 1, "elements": 2, "original_min_abs": 1e5,
                        "original_max_abs": 1e5, "new_abs": 65504.0}]


# -- 2. graphs the converter mishandles ------------------------------------------------------------


def test_an_output_read_by_another_node_builds_and_benches_in_fp16(tmp_path, capsys):
    model = output_read_inside_model(tmp_path / "gp.onnx")
    engines = tmp_path / "e"
    assert main(["build", str(model), "--fp32", "--fp16", "--engines", str(engines), "--backend", "onnxruntime",
                 "--batch-sizes", "2"]) == 0
    assert "given their own FP32 cast: gp" in capsys.readouterr().out
    results = tmp_path / "r.json"
    assert main(["bench", str(engines), "--warmup", "1", "--iterations", "3", "--out", str(results)]) == 0
    assert sorted(e["precision"] for e in json.loads(results.read_text())["results"]) == ["fp16", "fp32"]
    # and it computes the same function (FP16 rounding apart)
    from trtprof.measure.bench import load_runner
    from trtprof.engines.cache import list_engines

    runners = {r.precision: load_runner(r) for r in list_engines(engines)}
    x = _bench_x((2, 3))
    y32, y16 = runners["fp32"].infer({"x": x}), runners["fp16"].infer({"x": x})
    for name in ("gp", "y"):
        assert y16[name].dtype == np.float32
        np.testing.assert_allclose(y16[name], y32[name], rtol=2e-3, atol=1e-3)


def test_unnamed_readers_of_one_input_no_longer_collide(tmp_path):
    """Two unnamed nodes reading x: the converter named both input casts ``x_cast_to_``."""
    from trtprof.convert.fp16 import convert_fp16

    graph = helper.make_graph(
        [helper.make_node("Relu", ["x"], ["a"]), helper.make_node("Neg", ["x"], ["b"]),
         helper.make_node("Add", ["a", "b"], ["y"])], "unnamed",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])])
    conv = convert_fp16(onnx.load(str(_save(graph, tmp_path / "u.onnx"))))
    names = [n.name for n in conv.model.graph.node]
    assert len(names) == len(set(names)) and {"Relu_0", "Neg_1", "Add_2"} <= set(names)
    onnx.checker.check_model(conv.model, full_check=True)
    x = _bench_x((2, 3))
    np.testing.assert_allclose(_fp16_run_model(conv.model, x), np.maximum(x, 0) - x, rtol=1e-3, atol=1e-3)


def _fp16_run_model(model, x):
    from onnx.reference import ReferenceEvaluator

    return ReferenceEvaluator(model).run(None, {model.graph.input[0].name: x})[0]


def test_a_tensor_between_two_kept_nodes_stays_fp32_with_two_readers(tmp_path):
    """Keeping producer and readers FP32 must keep the tensor FP32: the converter removes its own
    Cast(FP16)→Cast(FP32) round trip only for a single reader; trtprof removes the others."""
    from trtprof.convert.fp16 import convert_fp16

    model = onnx.load(str(overflow_model(tmp_path / "o.onnx", second_reader=True)))
    x = _bench_x((4, 8))
    plain = convert_fp16(model).model
    with np.errstate(over="ignore", invalid="ignore"):
        assert not np.isfinite(_fp16_run_model(plain, x)).all()  # FP16 really overflows
    kept = convert_fp16(model, keep_fp32_nodes=["mul2", "div1", "div1b"])
    assert any("round trip" in f for f in kept.fixes)
    y = _fp16_run_model(kept.model, x)
    assert np.isfinite(y).all()
    np.testing.assert_allclose(y, 2 * x, rtol=2e-3, atol=4e-3)


def test_a_models_own_cast_to_float_builds_in_fp16(tmp_path):
    """An int64 mask cast to float (NLP models): the converter declared the Cast's output FP16 but
    left ``to=FLOAT`` ("Type (tensor(float16)) of output arg (f) of node (cast) does not match")."""
    from trtprof.measure.bench import load_runner

    w = numpy_helper.from_array(np.full((3,), 0.5, np.float32), "w")
    graph = helper.make_graph(
        [helper.make_node("Cast", ["ids"], ["f"], name="cast", to=TensorProto.FLOAT),
         helper.make_node("Mul", ["f", "w"], ["m"], name="mul"), helper.make_node("Add", ["m", "x"], ["y"], name="add")],
        "mask", [helper.make_tensor_value_info("ids", TensorProto.INT64, ["N", 3]),
                 helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 3])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 3])], [w])
    model = _save(graph, tmp_path / "mask.onnx")
    (out,) = build_engines(model, [Precision.FP16], [2],
                           settings=BuildSettings(engines_dir=tmp_path / "e", backend="onnxruntime"))
    assert any("Cast(to=FLOAT)" in n and "cast" in n for n in out.record.notes)
    ids, x = np.array([[0, 1, 2], [3, 4, 5]], np.int64), _bench_x((2, 3))
    y = load_runner(out.record).infer({"ids": ids, "x": x})["y"]
    np.testing.assert_allclose(y, ids * 0.5 + x, rtol=1e-3, atol=1e-3)


def test_constant_of_shape_without_value_builds_in_fp16(tmp_path):
    from trtprof.measure.bench import load_runner

    graph = helper.make_graph(
        [helper.make_node("Shape", ["x"], ["s"], name="shape"), helper.make_node("ConstantOfShape", ["s"], ["z"], name="zeros"),
         helper.make_node("Add", ["z", "x"], ["y"], name="add")], "zeros",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 3])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 3])])
    (out,) = build_engines(_save(graph, tmp_path / "z.onnx"), [Precision.FP16], [2],
                           settings=BuildSettings(engines_dir=tmp_path / "e", backend="onnxruntime"))
    x = _bench_x((2, 3))
    np.testing.assert_allclose(load_runner(out.record).infer({"x": x})["y"], x, rtol=1e-3, atol=1e-3)


def test_keep_fp32_ops_on_the_last_node_keeps_the_output_fp32(tmp_path):
    """LayerNormalization → Softmax, both kept FP32 with --keep-fp32-ops: the graph output must stay
    float32 (the converter alone made it FP16) and equal the FP32 result (no FP16 round trip)."""
    from trtprof.measure.bench import load_runner

    graph = helper.make_graph(
        [helper.make_node("LayerNormalization", ["x", "g", "b"], ["l"], name="ln", axis=-1),
         helper.make_node("Softmax", ["l"], ["y"], name="sm", axis=-1)], "lnsm",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 16])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 16])],
        [numpy_helper.from_array(np.ones(16, np.float32), "g"), numpy_helper.from_array(np.zeros(16, np.float32), "b")])
    model = _save(graph, tmp_path / "lnsm.onnx")
    fp32, fp16 = build_engines(model, [Precision.FP32, Precision.FP16], [2],
                               settings=BuildSettings(engines_dir=tmp_path / "e", backend="onnxruntime",
                                                      options={"keep_fp32_ops": "Softmax,LayerNormalization"}))
    artifact = onnx.load(str(fp16.record.artifact_path))
    assert [o.type.tensor_type.elem_type for o in artifact.graph.output] == [TensorProto.FLOAT]
    x = _bench_x((2, 16))
    y32, y16 = load_runner(fp32.record).infer({"x": x})["y"], load_runner(fp16.record).infer({"x": x})["y"]
    assert y16.dtype == np.float32
    np.testing.assert_allclose(y16, y32, rtol=1e-6, atol=1e-7)  # everything computed in FP32: no FP16 rounding
    np.testing.assert_allclose(_fp16_run_model(artifact, x), y32, rtol=1e-6, atol=1e-7)


def test_a_keep_list_naming_no_node_is_an_error(tmp_path):
    from trtprof.convert.fp16 import convert_fp16
    from trtprof.errors import BadInput

    with pytest.raises(BadInput, match="nosuch"):
        convert_fp16(onnx.load(str(overflow_model(tmp_path / "o.onnx"))), keep_fp32_nodes=["nosuch"])


def test_a_refused_fp16_graph_blames_the_conversion_and_names_the_node(tmp_path, monkeypatch):
    """Without the output repair, ORT refuses the converted graph; the error must say trtprof's FP16
    conversion produced it (the FP32 model loads), name the node and suggest the keep option."""
    from trtprof.convert import fp16_fixes
    from trtprof.errors import BuildFailed

    monkeypatch.setattr(fp16_fixes, "detach_graph_outputs", lambda model: [])  # the repair, switched off
    model = output_read_inside_model(tmp_path / "gp.onnx")
    with pytest.raises(BuildFailed) as caught:
        build_engines(model, [Precision.FP16], [2],
                      settings=BuildSettings(engines_dir=tmp_path / "e", backend="onnxruntime"))
    text = str(caught.value)
    assert "trtprof's FP16 conversion produced" in text and "the FP32 model itself loads" in text
    assert "node Add_1 (Add)" in text and "--layer-precisions Add_1:fp32" in text  # the reader of gp
    assert not list((tmp_path / "e").glob("*.onnx"))  # nothing half-written
    # and the suggestion works, even without the repair
    (out,) = build_engines(model, [Precision.FP16], [2],
                           settings=BuildSettings(engines_dir=tmp_path / "e", backend="onnxruntime",
                                                  options={"layer_precisions": "Add_1:fp32"}))
    assert out.built


@pytest.mark.parametrize("name", ["light_squeezenet", "light_inception_v2", "light_densenet121"])
def test_model_zoo_graphs_convert_and_load(name):
    """Graphs trtprof's authors did not write (IR 3, unnamed nodes): the converted graph passes the
    ONNX checker and ORT loads it; inception_v2's 5.29e4 weight is no longer clamped (to 1e4)."""
    from trtprof.backends.onnxruntime import ort_session as _session
    from trtprof.convert.fp16 import convert_fp16

    path = Path(onnx.__file__).parent / "backend" / "test" / "data" / "light" / f"{name}.onnx"
    if not path.is_file():
        pytest.skip(f"this onnx build does not ship {path.name}")
    conv = convert_fp16(onnx.load(str(path)))
    assert conv.weights.count("clamped") == 0
    names = [n.name for n in conv.model.graph.node]
    assert all(names) and len(names) == len(set(names))
    _session(conv.model.SerializeToString(), Precision.FP16, path=path)


# -- 3. range analysis -------------------------------------------------------------------------------


def test_range_analysis_finds_the_overflow_and_the_option_that_fixes_it(tmp_path):
    from trtprof.convert.fp16 import convert_fp16
    from trtprof.convert.fp16range import OVERFLOW, analyze

    path = overflow_model(tmp_path / "o.onnx")
    x = _bench_x((4, 8))
    analysis = analyze(onnx.load(str(path)), {"x": x})
    assert analysis.analysed == analysis.float_tensors == 4 and not analysis.sampled
    [finding] = analysis.findings
    assert (finding.kind, finding.tensor, finding.node) == (OVERFLOW, "t2", "mul2")
    assert finding.value == pytest.approx(float(np.abs(x).max()) * 9e8, rel=1e-5)
    assert finding.option == "--layer-precisions mul2:fp32,div1:fp32"
    # the prediction holds: FP16 arithmetic overflows, and the suggested keep-list removes it
    with np.errstate(over="ignore", invalid="ignore"):
        assert not np.isfinite(_fp16_run_model(convert_fp16(onnx.load(str(path))).model, x)).all()
    kept = convert_fp16(onnx.load(str(path)), keep_fp32_nodes=finding.keep_nodes).model
    assert np.isfinite(_fp16_run_model(kept, x)).all()


def test_range_analysis_finds_underflow(tmp_path):
    from trtprof.convert.fp16range import UNDERFLOW, analyze

    graph = helper.make_graph([_const("tiny", 1e-9), helper.make_node("Mul", ["x", "tiny"], ["small"], name="shrink"),
                               _const("big", 1e9), helper.make_node("Mul", ["small", "big"], ["y"], name="grow")],
                              "under", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 64])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 64])])
    analysis = analyze(onnx.load(str(_save(graph, tmp_path / "u.onnx"))), {"x": _bench_x((2, 64))})
    [finding] = analysis.of_kind(UNDERFLOW)
    assert (finding.tensor, finding.node, finding.keep_nodes) == ("small", "shrink", ("shrink", "grow"))
    assert finding.value > 0.9  # |x|·1e-9 < 5.96e-8 unless |x| > 59.6
    small = next(t for t in analysis.tensors if t.name == "small")
    assert small.below_normal_share == 1.0 and "underflow risk" in finding.message


def test_range_analysis_samples_tensors_when_runs_would_exceed_the_bound(tmp_path):
    from trtprof.convert.fp16range import analyze, plan_runs

    runs = plan_runs([f"t{i}" for i in range(100)], {}, unknown_size=10, max_run_elements=10, max_runs=8)
    assert len(runs) <= 8 and all(len(r) == 1 for r in runs) and runs[0] == ["t0"] and runs[-1] == ["t99"]
    analysis = analyze(onnx.load(str(overflow_model(tmp_path / "o.onnx"))), {"x": _bench_x((4, 8))},
                       max_run_elements=32, max_runs=2)
    assert analysis.sampled and analysis.analysed == 2 and analysis.runs == 2
    assert "2 of 4 float tensors (sampled evenly to bound the cost)" in analysis.summary()


def test_range_analysis_on_a_model_zoo_graph():
    """A model trtprof's authors did not write: every float tensor analysed, and the analysis agrees
    with the model's own output (computed separately by ONNX Runtime)."""
    import onnxruntime as ort

    from trtprof.convert.fp16range import analyze

    path = Path(onnx.__file__).parent / "backend" / "test" / "data" / "light" / "light_squeezenet.onnx"
    if not path.is_file():
        pytest.skip("this onnx build does not ship light_squeezenet")
    model = onnx.load(str(path))
    feeds = {"data_0": _bench_x((1, 3, 224, 224))}
    analysis = analyze(model, feeds)
    assert analysis.analysed == analysis.float_tensors == len([n for n in model.graph.node if n.op_type != "Constant"])
    out = model.graph.output[0].name
    [ref] = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"]).run([out], feeds)
    mine = next(t for t in analysis.tensors if t.name == out)
    assert mine.max_abs == pytest.approx(float(np.abs(ref).max()), rel=1e-6)
    # its node names are the ones --layer-precisions takes (unnamed nodes got OpType_INDEX)
    from trtprof.convert.fp16 import convert_fp16

    peak = max(analysis.tensors, key=lambda t: t.max_abs)
    converted_nodes = [n.name for n in convert_fp16(model).model.graph.node]
    kept = convert_fp16(model, keep_fp32_nodes=[peak.node])
    assert peak.node in converted_nodes and kept.kept_fp32_nodes == (peak.node,)


def test_compare_predicts_the_overflow_cpu_fp16_does_not_show(tmp_path, capsys):
    """The 'done when': compare on the CPU says overflow risk, naming the tensor and its value, beside
    a caveat that the observed (finite) error is not FP16's."""
    model = overflow_model(tmp_path / "o.onnx")
    out = tmp_path / "c.json"
    assert main(["compare", str(model), "--precisions", "fp32,fp16", "--engines", str(tmp_path / "e"),
                 "--backend", "onnxruntime", "--batch-sizes", "4", "--time-budget-s", "0.2",
                 "--round-iterations", "5", "--out", str(out)]) == 0
    text = capsys.readouterr().out
    assert "non-finite 0" in text  # ORT CPU computed it in FP32
    assert "caveat: observed error is not FP16's: the fp16 engine ran fp32+casts" in text
    assert "predicted: overflow risk: tensor t2 (node mul2, Mul) reaches max |x| 1.556e+09 ≥ 65520" in text
    acc = json.loads(out.read_text())["comparisons"][0]["accuracy"]
    [finding] = acc["predicted"]["findings"]
    assert finding["tensor"] == "t2" and finding["value"] > 65504 and finding["option"].startswith("--layer-precisions")
    assert acc["caveat"].startswith("observed error is not FP16's")
    from trtprof.report.compare_page import load, markdown_summary, render_html

    data = load(out)
    assert "predicted: overflow risk: tensor t2" in markdown_summary(data)
    assert "Accuracy: verdict, predicted vs observed" in render_html(data)


def test_build_prints_the_range_analysis_and_a_keep_list_covers_it(tmp_path, capsys):
    model = overflow_model(tmp_path / "o.onnx")
    engines = tmp_path / "e"
    assert main(["build", str(model), "--fp16", "--engines", str(engines), "--backend", "onnxruntime",
                 "--batch-sizes", "4"]) == 0
    assert "keep it FP32 with --layer-precisions mul2:fp32,div1:fp32" in capsys.readouterr().out
    assert main(["build", str(model), "--fp16", "--engines", str(engines), "--backend", "onnxruntime",
                 "--batch-sizes", "4", "--layer-precisions", "mul2:fp32,div1:fp32"]) == 0
    text = capsys.readouterr().out
    assert " built " in text and "already kept in FP32 by this build's keep-list" in text
    kept = [p for p in engines.glob("*.onnx")]
    assert len(kept) == 2  # the keep-list is in the cache key: a second engine
    x = _bench_x((4, 8))
    finite = {p.name: bool(np.isfinite(_fp16_run(p, x)).all()) for p in kept}
    assert sorted(finite.values()) == [False, True]
    assert main(["build", str(model), "--fp16", "--engines", str(engines), "--backend", "onnxruntime",
                 "--batch-sizes", "4", "--no-range-check", "--rebuild"]) == 0
    assert "range analysis" not in capsys.readouterr().out


# -- 5. keep-lists and the cache key ----------------------------------------------------------------------


def test_keep_lists_are_in_the_fp16_cache_key_only(tmp_path):
    model = overflow_model(tmp_path / "o.onnx")
    kw = dict(engines_dir=tmp_path / "e", backend="onnxruntime", range_check=False)
    base32, base16 = build_engines(model, [Precision.FP32, Precision.FP16], [1], settings=BuildSettings(**kw))
    ops32, ops16 = build_engines(model, [Precision.FP32, Precision.FP16], [1],
                                 settings=BuildSettings(options={"keep_fp32_ops": "Mul"}, **kw))
    assert ops32.record.key == base32.record.key and not ops32.built  # FP32 is unaffected
    assert ops16.record.key != base16.record.key and ops16.built
    census = ops16.record.backend_metadata["fp16_weights"]
    assert census["kept_fp32_ops"] == ["Mul"]
    from trtprof.errors import BadInput

    with pytest.raises(BadInput, match="fp16 builds only"):
        build_engines(model, [Precision.FP32], [1], settings=BuildSettings(options={"keep_fp32_ops": "Mul"}, **kw))
    with pytest.raises(BadInput, match="can only keep named nodes"):
        build_engines(model, [Precision.FP16], [1],
                      settings=BuildSettings(options={"layer_precisions": "*:fp32"}, **kw))


def test_keep_fp32_ops_adds_to_the_converters_own_block_list(tmp_path):
    """Passing an op list must not drop the converter's defaults (Resize, TopK, Range, … stay FP32)."""
    from onnxconverter_common import float16

    from trtprof.convert.fp16 import convert_fp16, tensor_elem_types

    model = onnx.load(str(overflow_model(tmp_path / "o.onnx")))
    conv = convert_fp16(model, keep_fp32_ops=["Div"])
    types = tensor_elem_types(conv.model)
    divs = [n for n in conv.model.graph.node if n.op_type == "Div"]
    assert divs and all(types[i] == TensorProto.FLOAT for n in divs for i in n.input)
    assert "Resize" in float16.DEFAULT_OP_BLOCK_LIST  # what "adds to" relies on


def test_torch_fp16_with_a_keep_list_builds_from_the_fp16_graph(tmp_path):
    """CPU check of the torch backend's keep-list path (the GPU run is not tested here): the artifact
    is trtprof's FP16 ONNX graph, and onnx2torch's module of it keeps the FP32 islands."""
    import importlib.util

    if importlib.util.find_spec("onnx2torch") is None or importlib.util.find_spec("torch") is None:
        pytest.skip("needs torch and onnx2torch")
    import torch
    from trtprof.backends.torch import TorchBackend, engine_onnx, to_torch_module
    from trtprof.spec import BuildSpec

    model = overflow_model(tmp_path / "o.onnx")
    x = _bench_x((4, 8))
    outs = {}
    for keep in (None, "mul2:fp32,div1:fp32"):
        spec = BuildSpec.make(model_sha256="0", backend="torch", precision=Precision.FP16, batch_sizes=[4],
                              options={"layer_precisions": keep})
        artifact = tmp_path / f"{bool(keep)}.torch.zip"
        report = TorchBackend().build(model, spec, artifact)
        module = to_torch_module(engine_onnx(artifact)).eval()
        if keep is None:
            assert "fp16_graph" not in report.metadata
            module = module.half()
            with torch.inference_mode():
                outs[keep] = module(torch.from_numpy(x).half()).float().numpy()
        else:
            assert report.metadata["fp16_graph"] == "converted"
            with torch.inference_mode():
                outs[keep] = module(torch.from_numpy(x)).numpy()
    assert not np.isfinite(outs[None]).all()  # half() everywhere: t2 overflows
    np.testing.assert_allclose(outs["mul2:fp32,div1:fp32"], x, rtol=2e-3, atol=2e-3)


def test_casts_the_converter_inserted_are_traced_back_to_their_node():
    from trtprof.convert.fp16_fixes import origin_node

    nodes = {"mul1", "mul2"}
    assert origin_node("mul2_input_cast0", nodes) == "mul2"
    assert origin_node("mul2_output_cast0", nodes) == "mul2"
    assert origin_node("x_cast_to_mul1", nodes) == "mul1"  # graph-input cast named INPUT_cast_to_READER
    assert origin_node("mul2", nodes) == "mul2" and origin_node("trtprof_output_y", nodes) is None


def test_compare_on_a_model_zoo_graph_predicts_its_overflows(tmp_path, capsys):
    """The 'done when' on a model trtprof's authors did not write (its synthetic weights drive
    activations far past 65504): compare names tensor, node and value, and the caveat."""
    path = Path(onnx.__file__).parent / "backend" / "test" / "data" / "light" / "light_squeezenet.onnx"
    if not path.is_file():
        pytest.skip("this onnx build does not ship light_squeezenet")
    out = tmp_path / "c.json"
    assert main(["compare", str(path), "--precisions", "fp32,fp16", "--engines", str(tmp_path / "e"),
                 "--backend", "onnxruntime", "--time-budget-s", "0.2", "--round-iterations", "2",
                 "--out", str(out)]) == 0
    text = capsys.readouterr().out
    assert "caveat: observed error is not FP16's" in text and "predicted: overflow risk: tensor " in text
    predicted = json.loads(out.read_text())["comparisons"][0]["accuracy"]["predicted"]
    assert predicted["overflow_risks"] == len(predicted["findings"]) > 0 and not predicted["sampled"]
    produced = {o: n for n in onnx.load(str(path)).graph.node for o in n.output}
    for finding in predicted["findings"]:
        assert finding["value"] > 65504 and produced[finding["tensor"]].name == finding["node"]
        assert f"tensor {finding['tensor']} (node {finding['node']}" in finding["message"]


def test_a_large_dynamic_batch_is_analysed_on_its_first_samples():
    from trtprof.convert.fp16range import first_samples
    from trtprof.spec import TensorSpec

    feeds = {"x": np.arange(64, dtype=np.float32).reshape(32, 2)}
    dynamic, static = [TensorSpec("x", "float32", ("N", 2))], [TensorSpec("x", "float32", (32, 2))]
    assert first_samples(feeds, dynamic, max_batch=8)["x"].shape == (8, 2)
    np.testing.assert_array_equal(first_samples(feeds, dynamic, max_batch=8)["x"], feeds["x"][:8])
    assert first_samples(feeds, static, max_batch=8)["x"].shape == (32, 2)  # a static batch is fed whole


def test_every_onnx_backend_test_graph_that_runs_in_fp32_converts_to_fp16():
    """Graphs trtprof's authors did not write: the onnx package's pytorch-converted, pytorch-operator
    and simple backend-test models (single ops and small nets, sequence ops among them). Each that ORT
    runs in FP32 must load in FP16 with FP32 IO kept and outputs close to FP32 on its own test inputs."""
    import onnxruntime as ort

    from trtprof.convert.fp16 import convert_fp16

    root = Path(onnx.__file__).parent / "backend" / "test" / "data"
    paths = sorted([*root.glob("pytorch-*/*/model.onnx"), *root.glob("simple/*/model.onnx")])
    if not paths:
        pytest.skip("this onnx build ships no backend test models")
    options = ort.SessionOptions()
    options.log_severity_level = 4
    checked, problems = 0, []
    for path in paths:
        model = onnx.load(str(path))
        if not any(i.type.tensor_type.elem_type == TensorProto.FLOAT for i in model.graph.input):
            continue
        try:
            s32 = ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])
            feeds = {}
            for i, inp in enumerate(s32.get_inputs()):
                tensor = onnx.TensorProto()
                tensor.ParseFromString((path.parent / "test_data_set_0" / f"input_{i}.pb").read_bytes())
                feeds[inp.name] = numpy_helper.to_array(tensor)
            y32 = s32.run(None, feeds)
        except Exception:  # noqa: BLE001 - not an FP32 model ORT runs: not this test's business
            continue
        checked += 1
        name = f"{path.parent.parent.name}/{path.parent.name}"
        try:
            converted = convert_fp16(model).model
            y16 = ort.InferenceSession(converted.SerializeToString(), options,
                                       providers=["CPUExecutionProvider"]).run(None, feeds)
        except Exception as err:  # noqa: BLE001 - collected, so one run lists every failing graph
            problems.append(f"{name}: {err}")
            continue
        for a, b in zip(y32, y16):
            if a.dtype != b.dtype or a.shape != b.shape:
                problems.append(f"{name}: output {a.dtype}{a.shape} became {b.dtype}{b.shape}")
            elif a.dtype.kind == "f" and a.size:
                finite = np.isfinite(a)
                scale = float(np.abs(a[finite]).max(initial=0.0)) + 1e-6
                err = float(np.abs(a[finite].astype(np.float64) - b[finite]).max(initial=0.0)) / scale
                if err > 5e-2 or not np.array_equal(finite, np.isfinite(b)):
                    problems.append(f"{name}: relative error {err:.3g}")
    assert checked >= 50 and problems == []


def test_the_prediction_holds_on_a_model_zoo_graph_in_real_fp16_arithmetic():
    """light_squeezenet: ORT's CPU "fp16" shows no overflow (it computes in FP32), but executing the
    converted graph in numpy float16 (onnx's ReferenceEvaluator) gives inf everywhere, as predicted;
    keeping the nodes the analysis names in FP32 makes every output finite again."""
    from trtprof.convert.fp16 import convert_fp16
    from trtprof.convert.fp16range import analyze

    path = Path(onnx.__file__).parent / "backend" / "test" / "data" / "light" / "light_squeezenet.onnx"
    if not path.is_file():
        pytest.skip("this onnx build does not ship light_squeezenet")
    model = onnx.load(str(path))
    x = _bench_x((1, 3, 224, 224))
    analysis = analyze(model, {"data_0": x})
    assert analysis.findings and all(f.kind == "overflow" for f in analysis.findings)
    with np.errstate(all="ignore"):
        plain = _fp16_run_model(convert_fp16(model).model, x)
    assert not np.isfinite(plain).any()
    keep = list(dict.fromkeys(n for f in analysis.findings for n in f.keep_nodes))
    assert analysis.suggested_option == "--layer-precisions " + ",".join(f"{n}:fp32" for n in keep)
    with np.errstate(all="ignore"):
        kept = _fp16_run_model(convert_fp16(model, keep_fp32_nodes=keep).model, x)
    assert np.isfinite(kept).all()


def test_range_analysis_text_for_the_build_and_for_compare():
    """One text for the analysis: the build's notes point at the build JSON and give no keep-list advice
    (they are build notes already); compare/report lines of the stored JSON point at accuracy.predicted
    and say keep-lists are build options. Findings beyond ``shown`` per kind are counted, not listed."""
    from trtprof.convert.fp16range import (
        OVERFLOW,
        UNDERFLOW,
        RangeAnalysis,
        RangeFinding,
        predicted_lines,
    )

    over = tuple(RangeFinding(OVERFLOW, f"t{i}", f"n{i}", "Mul", 1e6, (f"n{i}",)) for i in range(4))
    under = (RangeFinding(UNDERFLOW, "u", "m", "Div", 0.5, ("m",), covered=True),)
    analysis = RangeAnalysis(findings=over + under, float_tensors=9, analysed=9, runs=1, input_shapes={"x": (1, 3)})
    build = analysis.lines(shown=2)
    assert build[0] == analysis.summary()
    assert build[1:3] == [over[0].message, over[1].message]
    assert "… and 2 more overflow risks (JSON: fp16_range)" in build
    assert under[0].message in build
    assert build[-1] == "to keep all of them FP32: --layer-precisions n0:fp32,n1:fp32,n2:fp32,n3:fp32"
    assert not any("keep-lists are build options" in line for line in build)
    stored = predicted_lines(analysis.to_json(), shown=2)
    assert "… and 2 more overflow risks (JSON: accuracy.predicted)" in stored
    assert stored[-1].startswith("keep-lists are build options")
    assert predicted_lines(RangeAnalysis(skipped="no model").to_json()) == ["FP16 range analysis skipped: no model"]
