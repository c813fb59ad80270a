"""--inputs (issue 23): the user's own data for accuracy, the FP16 range analysis and timing — three
forms (.npz, a folder of .npy, a loader function), checked against the model (exit 2 naming the input),
and an accuracy verdict with top-1 agreement on a classifier-shaped model."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from trtprof.cli import main

onnx = pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

SAMPLES = 100


def classifier_model(path: Path, classes: int = 10) -> Path:
    """x [N, 16] → MatMul → Relu → MatMul → logits [N, classes]: shaped like an image classifier's head."""
    rng = np.random.default_rng(0)
    w1 = numpy_helper.from_array(rng.standard_normal((16, 32)).astype(np.float32), "w1")
    w2 = numpy_helper.from_array(rng.standard_normal((32, classes)).astype(np.float32), "w2")
    nodes = [helper.make_node("MatMul", ["x", "w1"], ["h"], name="fc1"),
             helper.make_node("Relu", ["h"], ["r"], name="relu"),
             helper.make_node("MatMul", ["r", "w2"], ["logits"], name="fc2")]
    graph = helper.make_graph(nodes, "cls", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 16])],
                              [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["N", classes])], [w1, w2])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.save(model, str(path))
    return path


def _x(n: int = SAMPLES) -> np.ndarray:
    return np.random.default_rng(1).standard_normal((n, 16)).astype(np.float32)


def _reference_logits(model: Path, x: np.ndarray) -> np.ndarray:
    import onnxruntime as ort

    return ort.InferenceSession(str(model), providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]


def test_three_forms_give_the_same_samples(tmp_path):
    from trtprof.model.user_inputs import InputData

    x = _x()
    np.savez(tmp_path / "d.npz", x=x)
    (tmp_path / "npy").mkdir()
    np.save(tmp_path / "npy" / "x.npy", x)
    (tmp_path / "loader.py").write_text(
        "import numpy as np\n"
        "def batches():\n"
        f"    x = np.random.default_rng(1).standard_normal(({SAMPLES}, 16)).astype(np.float32)\n"
        "    for i in range(0, len(x), 30):\n"
        "        yield {'x': x[i:i + 30]}\n")
    for text in (tmp_path / "d.npz", tmp_path / "npy", f"{tmp_path / 'loader.py'}:batches"):
        data = InputData.load(text)
        assert data.samples == SAMPLES and np.array_equal(data.arrays["x"], x), text
    data = InputData.load(tmp_path / "d.npz")
    # batches cycle from the first sample to fill the last one; the first batch is what timing uses
    batches = list(data.batches(32))
    assert len(batches) == 4 and np.array_equal(batches[3]["x"][:4], x[96:]) and np.array_equal(batches[3]["x"][4:], x[:28])
    assert data.shape_overrides() == {"x": (SAMPLES, 16)}


def test_all_samples_through_the_runner_in_batches(tmp_path):
    from trtprof.measure.bench import load_runner
    from trtprof.builder.pipeline import BuildSettings, build_engines
    from trtprof.spec import Precision
    from trtprof.model.user_inputs import InputData, run_all

    model = classifier_model(tmp_path / "cls.onnx")
    [outcome] = build_engines(model, [Precision.FP32], [32],
                              settings=BuildSettings(engines_dir=tmp_path / "e", backend="onnxruntime"))
    np.savez(tmp_path / "d.npz", x=_x())
    runner = load_runner(outcome.record)
    try:
        out = run_all(runner, InputData.load(tmp_path / "d.npz"), 32)
    finally:
        runner.close()
    assert out["logits"].shape == (SAMPLES, 10)  # 4 batches of 32, the 28 fill-up rows dropped
    np.testing.assert_allclose(out["logits"], _reference_logits(model, _x()), rtol=1e-5, atol=1e-5)


def test_compare_on_a_classifier_with_npz_inputs_gets_top1_and_a_verdict(tmp_path, capsys):
    """The 'done when': a classifier-shaped model with an .npz of inputs → top-1 agreement over all
    samples and an accuracy verdict, in the CLI, the JSON, the Markdown and the HTML verdict table."""
    model = classifier_model(tmp_path / "cls.onnx")
    npz = tmp_path / "d.npz"
    np.savez(npz, x=_x())
    out = tmp_path / "c.json"
    assert main(["compare", str(model), "--engines", str(tmp_path / "e"), "--backend", "onnxruntime",
                 "--batch-sizes", "8", "--time-budget-s", "0.2", "--round-iterations", "3", "--out", str(out),
                 "--inputs", str(npz), "--accuracy-samples", "all", "--accuracy", "cosine>=0.999,top1>=0.99",
                 "--md"]) == 0
    text = capsys.readouterr().out
    acc = json.loads(out.read_text())["comparisons"][0]["accuracy"]
    assert acc["inputs"] == f"inputs {npz} ({SAMPLES} samples)"
    [logits] = acc["outputs"]
    assert logits["samples"] == SAMPLES and acc["top1"] == logits["top1"] is not None
    assert acc["verdict"]["verdict"] == ("OK" if acc["cosine"] >= 0.999 and acc["top1"] >= 0.99 else "DEGRADED")
    assert acc["verdict"]["budget"] == "cosine>=0.999,top1>=0.99"
    assert [c["threshold"] for c in acc["verdict"]["checked"]] == ["cosine>=0.999", "top1>=0.99"]
    assert acc["samples"] == acc["samples_total"] == SAMPLES  # --accuracy-samples all: whatever the budget
    assert f"accuracy vs fp32: {acc['verdict']['label']} on all {SAMPLES} samples [cosine>=0.999,top1>=0.99" in text
    assert f"top-1 {acc['top1']:.2%}" in text and f"(on inputs {npz} ({SAMPLES} samples))" in text
    assert "top1: share of samples whose top-1 class agrees" in text  # the one-line legend
    assert f"| {acc['verdict']['label']} (inputs {npz} ({SAMPLES} samples)) |" in text  # Markdown verdict table
    predicted = acc["predicted"]
    assert predicted["samples"] == SAMPLES and predicted["inputs"] == acc["inputs"]
    from trtprof.report.compare_page import load, render_html

    page = render_html(load(out))
    assert "accuracy (inputs)" in page and "What the metrics mean" in page


def test_without_inputs_every_accuracy_figure_says_random(tmp_path, capsys):
    model = classifier_model(tmp_path / "cls.onnx")
    out = tmp_path / "c.json"
    assert main(["compare", str(model), "--engines", str(tmp_path / "e"), "--backend", "onnxruntime",
                 "--batch-sizes", "4", "--time-budget-s", "0.2", "--round-iterations", "3", "--out", str(out),
                 "--md"]) == 0
    text = capsys.readouterr().out
    assert "(on random inputs (seed 0))" in text and "(random inputs (seed 0)) |" in text
    acc = json.loads(out.read_text())["comparisons"][0]["accuracy"]
    assert acc["inputs"] == "random inputs (seed 0)" and acc["outputs"][0]["samples"] == 4
    assert "samples_total" not in acc and "samples" not in acc and "samples" not in acc["verdict"]  # as before
    assert " on all " not in text  # the verdict line as before: no count on random inputs


def _bad(tmp_path, **arrays) -> Path:
    path = tmp_path / "bad.npz"
    np.savez(path, **arrays)
    return path


@pytest.mark.parametrize("arrays, cause", [
    ({"y": np.zeros((4, 16), np.float32)}, "lacks input(s) x; has unknown name(s) y (model inputs: x)"),
    ({"x": np.zeros((4, 16), np.int64)}, "input 'x' is int64, the model takes float32"),
    ({"x": np.zeros((4, 16, 1), np.float32)}, "input 'x' has shape [4, 16, 1] (3 dims)"),
    ({"x": np.zeros((4, 15), np.float32)}, "input 'x' dim 1 is 15; the model fixes it to 16"),
])
@pytest.mark.parametrize("command", ["compare", "build", "bench", "profile"])
def test_inputs_that_cannot_feed_the_model_are_exit_2_naming_the_input(tmp_path, capsys, arrays, cause, command):
    model = classifier_model(tmp_path / "cls.onnx")
    engines = tmp_path / "e"
    npz = _bad(tmp_path, **arrays)
    if command == "bench":
        assert main(["build", str(model), "--engines", str(engines), "--backend", "onnxruntime"]) == 0
        capsys.readouterr()
    argv = {"compare": ["compare", str(model), "--out", str(tmp_path / "c.json")],
            "build": ["build", str(model), "--fp16"],
            "bench": ["bench", str(engines), "--out", str(tmp_path / "r.json")],
            "profile": ["profile", str(model), "--out", str(tmp_path / "l.json")]}[command]
    if command != "bench":
        argv += ["--engines", str(engines), "--backend", "onnxruntime"]
    assert main([*argv, "--inputs", str(npz)]) == 2
    err = capsys.readouterr().err.strip()
    assert f"--inputs {npz}: {cause}" in err and len(err.splitlines()) == 1 and "Traceback" not in err
    assert not any(tmp_path.glob("*.json"))  # nothing written


@pytest.mark.parametrize("make, cause", [
    (lambda d: (d / "a.npz").write_text("not an npz"), "not a readable .npz"),
    (lambda d: np.savez(d / "a.npz", x=np.zeros((4, 16)), z=np.zeros((5, 1))), "different sample counts (x 4, z 5)"),
    (lambda d: np.savez(d / "a.npz", x=np.float32(1)), "input 'x' is a scalar"),
])
def test_unreadable_or_inconsistent_files_are_refused(tmp_path, make, cause):
    from trtprof.errors import BadInput
    from trtprof.model.user_inputs import InputData

    make(tmp_path)
    with pytest.raises(BadInput, match=cause.replace("(", r"\(").replace(")", r"\)")):
        InputData.load(tmp_path / "a.npz")


def test_a_failing_loader_is_one_line(tmp_path, capsys):
    model = classifier_model(tmp_path / "cls.onnx")
    (tmp_path / "loader.py").write_text("def feeds():\n    raise RuntimeError('no camera')\n")
    argv = ["compare", str(model), "--engines", str(tmp_path / "e"), "--backend", "onnxruntime",
            "--out", str(tmp_path / "c.json")]
    assert main([*argv, "--inputs", f"{tmp_path / 'loader.py'}:feeds"]) == 2
    assert "the data loader failed: RuntimeError: no camera" in capsys.readouterr().err
    assert main([*argv, "--inputs", f"{tmp_path / 'loader.py'}:nosuch"]) == 2
    assert "has no function 'nosuch'" in capsys.readouterr().err
    assert main([*argv, "--inputs", str(tmp_path / "missing.npz")]) == 2
    assert "no such file or directory" in capsys.readouterr().err


def test_bench_and_profile_time_the_first_batch_of_the_inputs(tmp_path, capsys):
    model = classifier_model(tmp_path / "cls.onnx")
    engines = tmp_path / "e"
    npz = tmp_path / "d.npz"
    np.savez(npz, x=_x())
    assert main(["build", str(model), "--engines", str(engines), "--backend", "onnxruntime", "--batch-sizes", "8",
                 "--fp16", "--inputs", str(npz)]) == 0
    assert f"FP16 range analysis of the FP32 model on inputs {npz} ({SAMPLES} samples) in batches" in \
        capsys.readouterr().out
    out = tmp_path / "r.json"
    assert main(["bench", str(engines), "--out", str(out), "--inputs", str(npz), "--iterations", "3"]) == 0
    [result] = json.loads(out.read_text())["results"]
    assert result["config"]["inputs"] == f"inputs {npz} ({SAMPLES} samples), first batch"
    assert main(["profile", str(model), "--engines", str(engines), "--backend", "onnxruntime", "--batch-size", "8",
                 "--out", str(tmp_path / "l.json"), "--inputs", str(npz), "--iterations", "2", "--warmup", "0"]) == 0


def test_train_compare_trains_on_the_first_batch_of_the_inputs(tmp_path, capsys):
    pytest.importorskip("torch")
    (tmp_path / "net.py").write_text(
        "import torch\n"
        "def make():\n"
        "    torch.manual_seed(0)\n"
        "    return torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(16, 4)), torch.zeros(2, 16)\n")
    npz = tmp_path / "d.npz"
    out = tmp_path / "t.json"
    argv = ["train-compare", f"{tmp_path / 'net.py'}:make", "--device", "cpu", "--budget", "0.3",
            "--round-iterations", "2", "--steps", "2", "--no-reasons", "--out", str(out), "--inputs", str(npz)]
    np.savez(npz, input=_x(6))
    assert main(argv) == 0
    assert json.loads(out.read_text())["settings"]["inputs"] == f"inputs {npz} (6 samples), first batch"
    out.unlink()
    np.savez(npz, x=_x(6))
    assert main(argv) == 2 and not out.exists()  # refused before any step
    assert "lacks input(s) input; has unknown name(s) x" in capsys.readouterr().err
