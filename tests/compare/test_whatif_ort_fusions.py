"""--what-if ort-fusions on the CPU with real ONNX Runtime: a tiny BERT-like graph built with onnx.helper
(MatMul+bias → Erf Gelu → MatMul+bias → residual Add → the decomposed LayerNorm pattern
ReduceMean/Sub/Pow/ReduceMean/Add/Sqrt/Div/Mul/Add) that the transformer optimizer fuses, a conv net it
cannot fuse (refused), the other refusals in one line, the output check at its tolerance, and the whole
A/B through the CLI on the onnxruntime backend."""
from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest

from trtprof.cli import main
from trtprof.compare import ab, whatif
from trtprof.errors import BadInput, BadModel, TrtprofError
from trtprof.model.demo import make_demo_model
from trtprof.model.onnx_model import OnnxModel
from trtprof.system import cuda

pytest.importorskip("onnxruntime.transformers.optimizer")
# the optimizer imports torch while it fuses (its fusion passes), not at import: the tests that run it need torch
import importlib.util  # noqa: E402

needs_torch = pytest.mark.skipif(importlib.util.find_spec("torch") is None,
                                 reason="torch missing: onnxruntime.transformers.optimizer imports it while fusing")

FAST = ["--backend", "onnxruntime", "--time-budget-s", "0.5", "--round-iterations", "20"]
H = 16


def tiny_bert(path: Path, *, residual: bool = True) -> Path:
    """One transformer feed-forward block with its LayerNorm, every op decomposed as an exporter writes it."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(0)

    def const(name, value):
        return numpy_helper.from_array(np.asarray(value, np.float32), name)

    inits = [const("w1", rng.standard_normal((H, 4 * H)) * 0.1), const("b1", rng.standard_normal(4 * H) * 0.1),
             const("w2", rng.standard_normal((4 * H, H)) * 0.1), const("b2", rng.standard_normal(H) * 0.1),
             const("gamma", 1 + 0.1 * rng.standard_normal(H)), const("beta", 0.1 * rng.standard_normal(H)),
             const("two", 2.0), const("eps", 1e-5), const("sqrt2", np.sqrt(2.0)), const("one", 1.0),
             const("half", 0.5)]
    n = helper.make_node
    nodes = [n("MatMul", ["x", "w1"], ["h1"]), n("Add", ["h1", "b1"], ["h1b"]),
             n("Div", ["h1b", "sqrt2"], ["g0"]), n("Erf", ["g0"], ["g1"]), n("Add", ["g1", "one"], ["g2"]),
             n("Mul", ["h1b", "g2"], ["g3"]), n("Mul", ["g3", "half"], ["g4"]),
             n("MatMul", ["g4", "w2"], ["h2"]), n("Add", ["h2", "b2"], ["h2b"])]
    if residual:
        nodes.append(n("Add", ["h2b", "x"], ["r"]))
    ln_in = "r" if residual else "h2b"
    nodes += [n("ReduceMean", [ln_in], ["m"], axes=[-1]), n("Sub", [ln_in, "m"], ["d"]), n("Pow", ["d", "two"], ["p"]),
              n("ReduceMean", ["p"], ["v"], axes=[-1]), n("Add", ["v", "eps"], ["ve"]), n("Sqrt", ["ve"], ["s"]),
              n("Div", ["d", "s"], ["nrm"]), n("Mul", ["nrm", "gamma"], ["sc"]), n("Add", ["sc", "beta"], ["y"])]
    g = helper.make_graph(nodes, "tinybert", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 8, H])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 8, H])], inits)
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    onnx.save(model, str(path))
    return path


def _feeds(batch: int = 2) -> dict[str, np.ndarray]:
    return {"x": np.random.default_rng(1).standard_normal((batch, 8, H)).astype(np.float32)}


@needs_torch
@pytest.mark.parametrize("residual, fused", [(True, {"SkipLayerNormalization": 1, "BiasGelu": 1}),
                                             (False, {"LayerNormalization": 1, "BiasGelu": 1})])
def test_the_optimizer_fuses_the_layer_norm_and_gelu_patterns_and_keeps_the_outputs(tmp_path, residual, fused):
    src = tiny_bert(tmp_path / "bert.onnx", residual=residual)
    out = tmp_path / "area" / "bert.ort-fusions.onnx"
    change = whatif.ort_fusions(OnnxModel.load(src), out)
    assert change.model_type == "bert" and change.before == {} and change.fused == fused
    assert change.nodes[1] < change.nodes[0] and out.is_file()
    assert change.to_json()["optimizer"] == {"opt_level": 1, "use_gpu": False, "attention_mask_format": "2-D mask"}
    assert whatif.check_fused(src, out, _feeds()) <= whatif.ORT_FUSIONS_RTOL


@needs_torch
def test_a_fusion_that_changes_the_function_is_refused(tmp_path):
    """Fault injected: the fused LayerNorm's scale doubled in the copy (what a fusion that took the wrong
    initializer would do) moves the outputs far beyond rounding."""
    import onnx
    from onnx import numpy_helper

    src = tiny_bert(tmp_path / "bert.onnx")
    out = tmp_path / "bert.ort-fusions.onnx"
    whatif.ort_fusions(OnnxModel.load(src), out)
    model = onnx.load(str(out))
    node = next(n for n in model.graph.node if n.op_type == "SkipLayerNormalization")
    gamma = next(i for i in model.graph.initializer if i.name == node.input[2])
    gamma.CopyFrom(numpy_helper.from_array(2 * numpy_helper.to_array(gamma), gamma.name))
    onnx.save(model, str(out))
    with pytest.raises(TrtprofError, match=r"the ort-fusions copy's outputs differ .* \(> 0\.001\): not the same model"):
        whatif.check_fused(src, out, _feeds())


@pytest.mark.parametrize("factor, refused", [(0.9, False), (1.1, True)])
def test_the_fusion_tolerance_just_inside_and_just_outside(factor, refused):
    ref = {"y": np.array([[2.0, -4.0, 1.0]], np.float32)}
    got = {"y": ref["y"] + np.array([[0.0, 4.0 * whatif.ORT_FUSIONS_RTOL * factor, 0.0]], np.float32)}
    worst = whatif.max_relative_difference(ref, got)
    assert worst == pytest.approx(whatif.ORT_FUSIONS_RTOL * factor, rel=1e-3)
    if refused:
        with pytest.raises(TrtprofError, match="differ .* of their scale"):
            whatif.refuse_if_different(worst, whatif.ORT_FUSIONS_RTOL, "ort-fusions copy's", "a", "b")
    else:
        assert whatif.refuse_if_different(worst, whatif.ORT_FUSIONS_RTOL, "ort-fusions copy's", "a", "b") == worst


@needs_torch
def test_a_conv_net_it_cannot_fuse_is_refused_in_one_line(tmp_path, capsys):
    src = make_demo_model(tmp_path / "net.onnx", channels=8, image=16, classes=10)
    engines = tmp_path / "e"
    assert main(["compare", str(src), "--what-if", "ort-fusions", "--engines", str(engines), *FAST]) == 2
    err = capsys.readouterr().err.strip()
    assert ("--what-if ort-fusions: onnxruntime.transformers.optimizer (model type vit) fused nothing here" in err
            and "nothing to measure" in err and "\n" not in err)
    assert not engines.exists()  # no copy written, nothing built


@pytest.mark.parametrize("backend", ["torch", "tensorrt"])
def test_a_backend_without_ort_contrib_ops_is_refused_in_one_line(tmp_path, capsys, backend):
    engines = tmp_path / "e"
    assert main(["compare", str(tiny_bert(tmp_path / "bert.onnx")), "--what-if", "ort-fusions", "--backend", backend,
                 "--engines", str(engines)]) == 2
    err = capsys.readouterr().err.strip()
    assert (f"--what-if ort-fusions runs on --backend onnxruntime-cuda or onnxruntime only (the fused copy uses "
            f"ONNX Runtime's contrib ops, com.microsoft; --backend {backend} does not run them)") in err
    assert "\n" not in err and not engines.exists()


def test_an_optimizer_that_cannot_be_imported_is_one_line(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "onnxruntime.transformers.optimizer", None)
    with pytest.raises(BadInput, match=r"needs onnxruntime.transformers.optimizer, which cannot be imported here") as err:
        whatif.ort_fusions(OnnxModel.load(tiny_bert(tmp_path / "bert.onnx")), tmp_path / "out.onnx")
    assert "\n" not in str(err.value) and not (tmp_path / "out.onnx").exists()


def test_an_optimizer_failure_is_one_line_naming_the_model(tmp_path, monkeypatch):
    from onnxruntime.transformers import optimizer

    def broken(*a, **k):
        raise RuntimeError("symbolic shape inference failed\n  at node 7")

    monkeypatch.setattr(optimizer, "optimize_model", broken)
    with pytest.raises(BadModel, match=r"optimizer failed on the model \(RuntimeError: symbolic shape inference "
                                       r"failed at node 7\)") as err:
        whatif.ort_fusions(OnnxModel.load(tiny_bert(tmp_path / "bert.onnx")), tmp_path / "out.onnx")
    assert "\n" not in str(err.value)


def test_the_model_type_follows_the_inputs(tmp_path):
    import onnx

    assert whatif.transformer_model_type(onnx.load(str(tiny_bert(tmp_path / "b.onnx")))) == "bert"
    net = make_demo_model(tmp_path / "net.onnx", channels=8, image=16, classes=10)
    assert whatif.transformer_model_type(onnx.load(str(net))) == "vit"  # an image input


def test_the_backends_that_run_contrib_ops_come_from_capabilities_in_autos_order():
    from trtprof import backends

    assert ab.contrib_op_backends() == ["onnxruntime-cuda", "onnxruntime"]
    assert not backends.capabilities("torch").ort_contrib_ops
    if cuda.device_count() == 0:
        assert ab.first_available(ab.contrib_op_backends()) == "onnxruntime"  # auto, on this CPU machine


@needs_torch
def test_what_if_ort_fusions_runs_the_fused_copy_against_the_original(tmp_path, capsys):
    src = tiny_bert(tmp_path / "bert.onnx")
    out = tmp_path / "wi.json"
    assert main(["compare", str(src), "--what-if", "ort-fusions", "--engines", str(tmp_path / "e"),
                 "--out", str(out), *FAST]) == 0
    printed = capsys.readouterr().out
    assert "what-if: batch 1: no finding suggested it → ort-fusions measured: fp16 vs fp32" in printed
    data = json.loads(out.read_text())
    w = data["ab"]["what_if"]
    assert w["experiment"] == "ort-fusions" and w["suggested_by"] is None
    assert w["change"]["fused"] == {"SkipLayerNormalization": 1, "BiasGelu": 1}
    assert w["outputs_max_rel_diff"] <= whatif.ORT_FUSIONS_RTOL and w["identical_rtol"] == whatif.ORT_FUSIONS_RTOL
    assert [arm["label"] for arm in data["ab"]["arms"]] == ["fp32", "fp16", "fp16+ort-fusions"]
    assert [c["candidate"] for c in data["comparisons"]] == ["fp16", "fp16+ort-fusions"]
    area = whatif.whatif_dir(tmp_path / "e")
    assert Path(w["changed_model"]) == area / "bert.ort-fusions.onnx" and data["ab"]["arms"][2]["engines_dir"] == str(area)
    from trtprof.engines.cache import list_engines

    assert {r.precision for r in list_engines(tmp_path / "e")} == {"fp32", "fp16"}
    fused_engines = list_engines(area)
    assert [r.precision for r in fused_engines] == ["fp16"]
    census = fused_engines[0].backend_metadata["node_precision"]  # the fused op is what that engine runs
    assert any("SkipLayerNormalization" in ops for ops in census.values())


def test_an_optimizer_that_needs_torch_here_says_so_in_one_line(tmp_path, monkeypatch):
    """Without torch the optimizer fails while fusing (it imports torch then): the line names torch and its extra."""
    from onnxruntime.transformers import optimizer

    def needs_torch(*args, **kwargs):
        raise ModuleNotFoundError("No module named 'torch'", name="torch")

    monkeypatch.setattr(optimizer, "optimize_model", needs_torch)
    from trtprof.errors import MissingDependency

    with pytest.raises(MissingDependency) as err:
        whatif.ort_fusions(OnnxModel.load(make_demo_model(tmp_path / "net.onnx")), tmp_path / "out.onnx")
    assert "torch is not installed" in str(err.value) and "trtprof[torch]" in str(err.value)
    assert "\n" not in str(err.value)
