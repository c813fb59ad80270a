"""Keep-lists that build (issue 23): a keep-list keeps its nodes FP32 whatever their neighbours are,
and the range analysis suggests only keep-lists it has built. FP16 arithmetic is checked with
``onnx.reference.ReferenceEvaluator`` (numpy float16: 1e9 really is inf), as in test_fp16."""
from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

from trtprof.cli import main

onnx = pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402


def shared_scale_model(path: Path) -> Path:
    """The issue's model: y = x·k·k/k/k with one shared weight k = 3e4 and unnamed nodes (named
    Mul_0, Mul_1, Div_2, Div_3 by trtprof); t2 ≈ 1e9 is inf in FP16."""
    k = numpy_helper.from_array(np.array(3e4, np.float32), "k")
    nodes = [helper.make_node("Mul", ["x", "k"], ["t1"]), helper.make_node("Mul", ["t1", "k"], ["t2"]),
             helper.make_node("Div", ["t2", "k"], ["t3"]), helper.make_node("Div", ["t3", "k"], ["y"])]
    graph = helper.make_graph(nodes, "shared", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 8])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 8])], [k])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.save(model, str(path))
    return path


def _fp16_run(model, x: np.ndarray) -> np.ndarray:
    from onnx.reference import ReferenceEvaluator

    with np.errstate(over="ignore", invalid="ignore"):
        return ReferenceEvaluator(model).run(None, {"x": x})[0]


def _x() -> np.ndarray:
    return np.random.default_rng(0).standard_normal((4, 8), dtype=np.float32)  # the bench's seed-0 inputs


def test_a_keep_list_sharing_a_weight_with_fp16_nodes_loads_and_computes(tmp_path):
    import onnxruntime as ort

    from trtprof.convert.fp16 import convert_fp16

    model = onnx.load(str(shared_scale_model(tmp_path / "m.onnx")))
    conv = convert_fp16(model, keep_fp32_nodes=["Mul_1", "Div_2"])
    assert any("given an FP32 copy for the kept ones: k" in f for f in conv.fixes)
    ort.InferenceSession(conv.model.SerializeToString(), providers=["CPUExecutionProvider"])  # loads
    x = _x()
    y = _fp16_run(conv.model, x)
    assert np.isfinite(y).all()
    np.testing.assert_allclose(y, x, rtol=5e-3, atol=5e-3)  # the identity, through FP16 and FP32 islands
    assert not np.isfinite(_fp16_run(convert_fp16(model).model, x)).all()  # without it: inf


def test_without_the_split_the_converter_fails_and_the_check_says_so(tmp_path, monkeypatch):
    """What the fix repairs (so the check is not vacuous): onnxconverter-common alone leaves k FP32
    for the FP16 Mul_0; ``build_error`` reports the refusal instead of suggesting the option."""
    from trtprof.convert import fp16_fixes
    from trtprof.convert.fp16range import build_error

    model = onnx.load(str(shared_scale_model(tmp_path / "m.onnx")))
    assert build_error(model, ["Mul_1", "Div_2"]) == ""
    monkeypatch.setattr(fp16_fixes, "split_shared_initializers", lambda *a: [])
    assert "bound to different types" in build_error(model, ["Mul_1", "Div_2"])


def test_the_suggested_option_builds_as_printed(tmp_path, capsys):
    """The issue's failure end to end through the CLI: build prints a keep-list; running exactly the
    printed option builds, and the engine it makes is finite in FP16 arithmetic."""
    model = shared_scale_model(tmp_path / "m.onnx")
    engines = tmp_path / "e"
    common = ["--engines", str(engines), "--backend", "onnxruntime", "--batch-sizes", "4"]
    assert main(["build", str(model), "--fp16", *common]) == 0
    text = capsys.readouterr().out
    match = re.search(r"keep it FP32 with (--layer-precisions \S+) \(built and loaded: checked\)", text)
    assert match, text
    option = match.group(1).split()
    assert option == ["--layer-precisions", "Mul_1:fp32,Div_2:fp32"]
    assert main(["build", str(model), "--fp16", *common, *option]) == 0
    assert "already kept in FP32 by this build's keep-list" in capsys.readouterr().out
    kept = [p for p in engines.glob("*.onnx") if "fp16" in p.name]
    finite = sorted(bool(np.isfinite(_fp16_run(onnx.load(str(p)), _x())).all()) for p in kept)
    assert finite == [False, True]


def test_a_finding_whose_keep_list_does_not_build_is_not_suggested(tmp_path, monkeypatch):
    from trtprof.convert import fp16range

    model = onnx.load(str(shared_scale_model(tmp_path / "m.onnx")))
    monkeypatch.setattr(fp16range, "build_error", lambda *a, **k: "refused (a fake refusal for this test)")
    analysis = fp16range.analyze_safely(model, {"x": _x()})
    [finding] = analysis.findings
    assert finding.built is False and "did not build here (refused (a fake refusal" in finding.message
    assert "keep it FP32 with" not in finding.message
    assert analysis.suggested_option == "" and analysis.to_json()["suggestion_error"].startswith("refused")
