"""A/B of two models / two backends and the pad-channels what-if, on the embedded backend (ONNX Runtime,
CPU). No timing assertions: the contract is the refusals (exit 2, one line naming the mismatch), the
JSON's A/B block and the what-if's identity check."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from trtprof.compare import ab, whatif
from trtprof.cli import main
from trtprof.model.demo import make_demo_model
from trtprof.model.onnx_model import OnnxModel
from trtprof.spec import TensorSpec

pytest.importorskip("onnxruntime")

FAST = ["--backend", "onnxruntime", "--time-budget-s", "0.5", "--round-iterations", "20"]
VERDICTS = ("faster", "slower", "equivalent", "inconclusive")


def feeds_for(model: Path, batch: int = 2) -> dict[str, np.ndarray]:
    return {"input": np.random.default_rng(0).standard_normal((batch, 3, 16, 16)).astype(np.float32)}


def test_pad_channels_pads_every_conv_and_gemm_to_multiples_of_8_and_keeps_the_outputs(tmp_path):
    src = make_demo_model(tmp_path / "m.onnx", channels=12, image=16, classes=10)
    change, copy = whatif.pad_channels(OnnxModel.load(src), tmp_path / "p.onnx")
    assert set(change.padded) == {"conv0", "conv1", "fc"} and change.skipped == {"conv2": "channels already multiples of 8"}
    for dims in change.padded.values():
        assert all(new % whatif.PAD_MULTIPLE == 0 and new >= old for old, new in dims.values())
    assert change.padded["conv0"] == {"out_channels": (12, 16), "in_channels": (3, 8)}
    assert whatif.check_identical(src, tmp_path / "p.onnx", feeds_for(src)) <= whatif.IDENTICAL_RTOL
    import onnx

    padded = onnx.load(str(tmp_path / "p.onnx"))
    convs = [i for i in padded.graph.initializer if i.name.endswith("_W")]
    assert convs and all(i.dims[0] % 8 == 0 and i.dims[1] % 8 == 0 for i in convs)
    again = OnnxModel.load(tmp_path / "p.onnx")  # the copy as returned is the file as read back
    assert (copy.path, copy.sha256, copy.info) == (again.path, again.sha256, again.info)


@pytest.mark.parametrize("factor, refused", [(0.5, False), (2.0, True)])
def test_the_identity_check_refuses_a_copy_just_beyond_its_tolerance(tmp_path, factor, refused):
    import onnx
    import onnxruntime as ort
    from onnx import numpy_helper

    src = make_demo_model(tmp_path / "m.onnx", channels=8, image=16, classes=10)
    feeds = feeds_for(src)
    ref = ort.InferenceSession(str(src), providers=["CPUExecutionProvider"]).run(None, feeds)[0]
    model = onnx.load(str(src))
    bias = next(i for i in model.graph.initializer if i.name == "fc.b")
    shifted = numpy_helper.to_array(bias) + factor * whatif.IDENTICAL_RTOL * float(np.max(np.abs(ref)))
    bias.CopyFrom(numpy_helper.from_array(shifted.astype(np.float32), "fc.b"))
    onnx.save(model, str(tmp_path / "changed.onnx"))
    if refused:
        with pytest.raises(Exception, match="not the same model"):
            whatif.check_identical(src, tmp_path / "changed.onnx", feeds)
    else:
        assert whatif.check_identical(src, tmp_path / "changed.onnx", feeds) <= whatif.IDENTICAL_RTOL


class Spec:
    """Fake runner surface: only the inputs/outputs ``io_mismatch`` reads."""

    def __init__(self, inputs, outputs=(TensorSpec("y", "float32", ("batch", 10)),)):
        self.inputs, self.outputs = tuple(inputs), tuple(outputs)


@pytest.mark.parametrize("b_inputs, needle", [
    ([TensorSpec("x", "float32", ("batch", 3, 16, 16))], ""),
    ([TensorSpec("x", "float32", (4, 3, 16, 16))], ""),  # a dynamic dim matches a fixed one
    ([TensorSpec("z", "float32", ("batch", 3, 16, 16))], "inputs differ"),
    ([TensorSpec("x", "float16", ("batch", 3, 16, 16))], "takes float16"),
    ([TensorSpec("x", "float32", ("batch", 3, 16))], "rank"),
    ([TensorSpec("x", "float32", ("batch", 3, 24, 24))], "dim 2"),
])
def test_io_mismatch_names_the_first_difference(b_inputs, needle):
    a = Spec([TensorSpec("x", "float32", ("batch", 3, 16, 16))])
    why = ab.io_mismatch("A", a, "B", Spec(b_inputs))
    assert (why == "") if not needle else (needle in why)


def test_io_mismatch_compares_output_names():
    a = Spec([TensorSpec("x", "float32", (1,))])
    b = Spec([TensorSpec("x", "float32", (1,))], outputs=[TensorSpec("logits", "float32", (1, 11))])
    assert "outputs differ" in ab.io_mismatch("A", a, "B", b)  # other names and another shape
    renamed = Spec([TensorSpec("x", "float32", (1,))], outputs=[TensorSpec("logits", "float32", (1, 10))])
    assert ab.io_mismatch("A", a, "B", renamed) == ""  # only the name differs: paired by position


def test_compare_two_models_is_an_a_b_with_the_accuracy_between_them(tmp_path, capsys):
    a = make_demo_model(tmp_path / "small.onnx", channels=8, image=16, classes=10)
    b = make_demo_model(tmp_path / "wide.onnx", channels=16, image=16, classes=10)
    out = tmp_path / "ab.json"
    assert main(["compare", str(a), str(b), "--engines", str(tmp_path / "e"), "--out", str(out), *FAST]) == 0
    printed = capsys.readouterr().out
    assert "batch 1: wide vs small" in printed and "accuracy vs small" in printed
    data = json.loads(out.read_text())
    assert [arm["label"] for arm in data["ab"]["arms"]] == ["small", "wide"]
    assert {arm["precision"] for arm in data["ab"]["arms"]} == {"fp32"}
    (c,) = data["comparisons"]
    assert (c["baseline"], c["candidate"]) == ("small", "wide") and c["verdict"] in VERDICTS
    assert c["accuracy"]["max_abs_err"] > 0  # two different models: their outputs differ, and it is said
    assert c["latency"]["baseline"]["engine"] != c["latency"]["candidate"]["engine"]
    assert any("roofline" in w for w in data["warnings"])


def test_incompatible_models_are_refused_in_one_line_naming_the_input(tmp_path, capsys):
    a = make_demo_model(tmp_path / "a.onnx", channels=8, image=16, classes=10)
    b = make_demo_model(tmp_path / "b.onnx", channels=8, image=24, classes=10)
    out = tmp_path / "x.json"
    assert main(["compare", str(a), str(b), "--engines", str(tmp_path / "e"), "--out", str(out), *FAST]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("trtprof compare: error:") and "input 'input' dim 2" in err and "\n" not in err
    assert not out.exists()
    # refused from the ONNX files before any engine was built (compare.ab.check_models_compatible)
    built = list((tmp_path / "e").glob("*.onnx")) if (tmp_path / "e").exists() else []
    assert built == []


@pytest.mark.parametrize("args, needle", [
    (["B", "--precisions", "fp32,fp16"], "one --precision"),
    (["B", "C"], "not 3"),
    (["--backends", "onnxruntime,onnxruntime"], "two different backends"),
    (["--precision", "fp16"], "--precision is for an A/B"),
    (["B", "--what-if", "pad-channels"], "give one model"),
])
def test_a_b_argument_errors_are_one_line(tmp_path, capsys, args, needle):
    a = make_demo_model(tmp_path / "a.onnx", channels=8, image=16, classes=10)
    args = [str(a) if x in ("B", "C") else x for x in args]
    assert main(["compare", str(a), *args, "--engines", str(tmp_path / "e"), "--out", str(tmp_path / "x.json")]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("trtprof compare: error:") and needle in err and "\n" not in err


def test_two_backends_of_one_model_refuse_a_backend_that_cannot_run_here(tmp_path, capsys):
    """torch runs on CUDA only: on this CPU machine the A/B stops at the build, in one line."""
    a = make_demo_model(tmp_path / "a.onnx", channels=8, image=16, classes=10)
    rc = main(["compare", str(a), "--backends", "onnxruntime,torch", "--engines", str(tmp_path / "e"),
               "--out", str(tmp_path / "x.json"), "--time-budget-s", "0.5"])
    err = capsys.readouterr().err.strip()
    if rc == 0:  # a machine with a CUDA GPU: then it ran, and the arms are the backends
        data = json.loads((tmp_path / "x.json").read_text())
        assert [arm["label"] for arm in data["ab"]["arms"]] == ["onnxruntime", "torch"]
    else:
        assert rc == 2 and "torch" in err and "\n" not in err


def test_what_if_pad_channels_runs_against_the_original_and_says_what_suggested_it(tmp_path, capsys):
    src = make_demo_model(tmp_path / "net.onnx", channels=12, image=16, classes=10)
    out = tmp_path / "wi.json"
    assert main(["compare", str(src), "--what-if", "pad-channels", "--engines", str(tmp_path / "e"),
                 "--out", str(out), *FAST]) == 0
    printed = capsys.readouterr().out
    assert "what-if: batch 1: tensor_core_ineligible" in printed and "pad-channels measured: fp16 vs fp32" in printed
    data = json.loads(out.read_text())
    w = data["ab"]["what_if"]
    assert w["experiment"] == "pad-channels" and w["suggested_by"] == "tensor_core_ineligible"
    assert w["outputs_max_rel_diff"] <= whatif.IDENTICAL_RTOL and "conv0" in w["change"]["padded"]
    assert [arm["label"] for arm in data["ab"]["arms"]] == ["fp32", "fp16", "fp16+pad-channels"]
    assert [c["candidate"] for c in data["comparisons"]] == ["fp16", "fp16+pad-channels"]
    assert all(c["verdict"] in VERDICTS for c in data["comparisons"])
    # the original's graph is analysed (roofline, FP16 range); the padded copy's FLOPs are not claimed
    assert data["comparisons"][0]["roofline"]["candidate"]["flops"] > 0
    assert "candidate" not in data["comparisons"][1]["roofline"] and any("roofline of the changed" in x
                                                                          for x in data["warnings"])
    # the padded copy and its engine live in the what-if area, apart from the user's engines (issue 34)
    engines, area = tmp_path / "e", whatif.whatif_dir(tmp_path / "e")
    assert Path(w["changed_model"]) == area / "net.pad-channels.onnx" and Path(w["changed_model"]).is_file()
    assert data["ab"]["arms"][2]["engines_dir"] == str(area) and "engines_dir" not in data["ab"]["arms"][0]
    from trtprof.engines.cache import list_engines

    assert {(r.model, r.precision) for r in list_engines(engines)} == {("net", "fp32"), ("net", "fp16")}
    assert {(r.model, r.precision) for r in list_engines(area)} == {("net.pad-channels", "fp16")}
    capsys.readouterr()
    assert main(["bench", str(engines), "--batch-sizes", "1", "--iterations", "3",
                 "--warmup", "1", "--out", str(tmp_path / "b.json")]) == 0
    printed = capsys.readouterr().out
    assert f"note: 1 what-if engine in {area} not listed" in printed
    benched = json.loads((tmp_path / "b.json").read_text())["results"]
    assert {r["model"] for r in benched} == {"net"}  # bench ENGINES/ measures the user's engines only


def test_what_if_on_a_model_with_nothing_to_pad_is_refused(tmp_path, capsys):
    src = make_demo_model(tmp_path / "net.onnx", channels=8, image=16, classes=16)
    whatif_change, _ = whatif.pad_channels(OnnxModel.load(src), tmp_path / "p.onnx")
    assert set(whatif_change.padded) == {"conv0"}  # only the 3-channel image input is not a multiple of 8
    import onnx
    from onnx import helper

    model = onnx.load(str(src))  # a model whose only Conv already has 8 channels in and out
    x = helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, ["batch", 8, 4, 4])
    y = helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, ["batch", 8, 4, 4])
    w = onnx.numpy_helper.from_array(np.ones((8, 8, 1, 1), np.float32), "w")
    g = helper.make_graph([helper.make_node("Conv", ["x", "w"], ["y"])], "g", [x], [y], [w])
    onnx.save(helper.make_model(g, opset_imports=model.opset_import), str(tmp_path / "eight.onnx"))
    assert main(["compare", str(tmp_path / "eight.onnx"), "--what-if", "pad-channels", "--engines",
                 str(tmp_path / "e"), "--out", str(tmp_path / "x.json"), *FAST]) == 2
    assert "nothing to measure" in capsys.readouterr().err


def test_outputs_that_differ_only_in_name_are_paired_by_position_saying_so(tmp_path, capsys):
    """A model and the same model plus an Identity at its end name their output differently; the
    A/B pairs them by position (one line says so) and the accuracy between them is exact. Outputs of
    different shapes still are refused."""
    import onnx
    from onnx import helper

    a = make_demo_model(tmp_path / "a.onnx", channels=8, image=16, classes=10)
    model = onnx.load(str(a))
    old = model.graph.output[0]
    model.graph.node.append(helper.make_node("Identity", [old.name], ["renamed"], name="tail"))
    new = onnx.ValueInfoProto()
    new.CopyFrom(old)
    new.name = "renamed"
    del model.graph.output[:]
    model.graph.output.append(new)
    b = tmp_path / "b.onnx"
    onnx.save(model, str(b))
    out = tmp_path / "ab.json"
    assert main(["compare", str(a), str(b), "--engines", str(tmp_path / "e"), "--out", str(out), *FAST]) == 0
    printed = capsys.readouterr().out
    line = f"outputs paired by position (b → a): renamed ↔ {old.name} (the names differ; dtypes and shapes match)"
    assert line in printed
    data = json.loads(out.read_text())
    assert line in data["warnings"] and data["comparisons"][0]["accuracy"]["max_abs_err"] == 0

    other = Spec([TensorSpec("x", "float32", (1,))], outputs=[TensorSpec("logits", "float32", (1, 10))])
    wider = Spec([TensorSpec("x", "float32", (1,))], outputs=[TensorSpec("y", "float32", (1, 11))])
    assert ab.outputs_by_position(other, wider) == {} and "outputs differ" in ab.io_mismatch("A", other, "B", wider)
    same_shape = Spec([TensorSpec("x", "float32", (1,))], outputs=[TensorSpec("y", "float32", (1, 10))])
    assert ab.outputs_by_position(other, same_shape) == {"y": "logits"}


def _what_if_report(old, new, *, raised=True, rule="tensor_core_ineligible"):
    """FAKE comparisons (named so): the original fp16 and the changed arm, each against fp32, with their CIs."""
    from types import SimpleNamespace

    def comp(candidate, est, low, high, verdict):
        finding = [SimpleNamespace(rule=rule)] if raised else []
        return SimpleNamespace(candidate=candidate, batch_size=10, diagnosis=finding,
                               speedup=SimpleNamespace(estimate=est, ci_low=low, ci_high=high, verdict=verdict))

    return SimpleNamespace(comparisons=[comp("fp16", *old), comp("fp16+pad-channels", *new)])


@pytest.mark.parametrize("new, expected", [
    # the changed arm's interval just above / just touching / just below the original's [0.331, 0.333]
    ((0.40, 0.3331, 0.45, "slower"), "the change helps — tensor_core_ineligible is a cause here"),
    ((0.34, 0.333, 0.35, "slower"), "no clear change (the intervals overlap)"),
    # slower: the padding's added products cost more than the tensor cores save; the cause is not refuted by it
    ((0.116, 0.115, 0.3309, "slower"), "the change makes it slower — this answer to tensor_core_ineligible costs more "
                                       "than it saves here"),
])
def test_a_what_if_line_says_whether_the_change_helped(new, expected):
    from trtprof.compare import ab, whatif

    arms = [ab.ArmSpec("fp32", Path("m"), "onnxruntime-cuda", "fp32"),
            ab.ArmSpec("fp16", Path("m"), "onnxruntime-cuda", "fp16"),
            ab.ArmSpec("fp16+pad-channels", Path("p"), "onnxruntime-cuda", "fp16")]
    (line,) = ab.what_if_lines(_what_if_report((0.332, 0.331, 0.333, "slower"), new), whatif.PAD_CHANNELS, arms)
    assert line.startswith("batch 10: tensor_core_ineligible (raised here) → pad-channels measured: fp16 vs fp32 "
                           "0.332× → fp16+pad-channels vs fp32 ") and expected in line


@pytest.mark.parametrize("verdict, expected", [("faster", "the change helps — tensor_core_ineligible is a cause here"),
                                               ("equivalent", "the change makes no difference — tensor_core_ineligible"),
                                               ("slower", "the change makes it slower — this answer to tensor_core_ineligible"),
                                               ("inconclusive", "no clear change")])
def test_a_what_if_measured_against_the_original_directly_reads_its_verdict(verdict, expected):
    """An fp32 what-if (the changed arm against the original itself): the verdict says whether it helped."""
    from types import SimpleNamespace

    from trtprof.compare import ab, whatif

    arms = [ab.ArmSpec("fp32", Path("m"), "onnxruntime", "fp32"),
            ab.ArmSpec("fp32+pad-channels", Path("p"), "onnxruntime", "fp32")]
    changed = SimpleNamespace(candidate="fp32+pad-channels", batch_size=4, diagnosis=[],
                              speedup=SimpleNamespace(estimate=1.1, ci_low=1.05, ci_high=1.15, verdict=verdict))
    (line,) = ab.what_if_lines(SimpleNamespace(comparisons=[changed]), whatif.PAD_CHANNELS, arms)
    assert "(not raised here)" in line and expected in line.replace("would be", "is")
    assert ab.what_if_outcome("faster", None, False) == "the change helps"
