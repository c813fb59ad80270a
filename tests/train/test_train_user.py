"""train-compare on the user's own PyTorch module (factory specs), autotuning as recorded, the
``+graphed`` arms' refusals, what an ONNX source loses, and the CPU output carrying none of the
issue-22 nonsense (unmeasurable CIs as speedups, shares above 100 %, GPU-only reasons, profiler
chatter)."""
from __future__ import annotations

import importlib.util
import json
import os
import sys
from pathlib import Path

import numpy as np
import pytest

from trtprof.system import cuda

needs_torch = pytest.mark.skipif(importlib.util.find_spec("torch") is None, reason="torch missing")
needs_onnx2torch = pytest.mark.skipif(importlib.util.find_spec("onnx2torch") is None, reason="onnx2torch missing")
needs_gpu = pytest.mark.skipif(cuda.device_count() == 0, reason="no CUDA device")
ROOT = Path(__file__).resolve().parents[2]

TINY = '''
import torch
from torch import nn


class Tiny(nn.Module):
    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.conv = nn.Conv2d(3, 8, 3, padding=1)
        self.bn = nn.BatchNorm2d(8)
        self.head = nn.Linear(8, 4)

    def forward(self, x):
        return self.head(torch.relu(self.bn(self.conv(x))).mean((2, 3)))


def make():
    return Tiny(), torch.zeros(2, 3, 8, 8)


def make_model_only():
    return Tiny()


def make_full():
    loss_fn = lambda out: (out.float() ** 2).mean()
    return Tiny(), (torch.zeros(2, 3, 8, 8),), loss_fn, lambda params: torch.optim.SGD(params, lr=0.05)


def make_bad_type():
    return 42


def make_raises():
    raise RuntimeError("weights file missing")


def make_not_module():
    return "resnet", torch.zeros(1)


NOT_A_FUNCTION = 3
'''


@pytest.fixture()
def tiny(tmp_path) -> Path:
    path = tmp_path / "tiny_net.py"
    path.write_text(TINY)
    return path


def _cli(argv, tmp_path):
    from trtprof.cli import main

    return main(["train-compare", *argv, "--device", "cpu", "--budget", "0.3", "--round-iterations", "2",
                 "--steps", "3", "--out", str(tmp_path / "t.json")])


# -- factory specs ---------------------------------------------------------------------------------


def test_factory_spec_parse():
    from trtprof.train.factory import FactorySpec

    spec = FactorySpec.parse("path/to/net.py:make")
    assert spec is not None and spec.file and spec.module == "path/to/net.py" and spec.function == "make"
    spec = FactorySpec.parse("pkg.models:build_net")
    assert spec is not None and not spec.file and spec.module == "pkg.models" and spec.function == "build_net"
    assert FactorySpec.parse("model.onnx") is None
    assert FactorySpec.parse("model.keras") is None
    assert FactorySpec.parse("dir/with space:make") is None  # not a dotted module name, not a .py file
    assert FactorySpec.parse("net.py:1make") is None  # not an identifier


@needs_torch
def test_cli_factory_end_to_end_on_cpu(tiny, tmp_path, capfd):
    """Done-when: `train-compare file.py:make` works on the CPU with a small module, through the CLI;
    the example's batch is the default; the header says autotuning does not apply on a CPU."""
    rc = _cli([f"{tiny}:make", "--precisions", "fp32,amp-bf16", "--html", str(tmp_path / "t.html")], tmp_path)
    out, err = capfd.readouterr()
    assert rc == 0, err
    data = json.loads((tmp_path / "t.json").read_text())
    source = data["environment"]["backend"]["source"]
    assert source["kind"] == "module" and source["form"] == "model+inputs" and source["module_class"] == "Tiny"
    assert data["batches"][0]["batch_size"] == 2  # the example's batch
    assert data["settings"]["autotune"] is True and data["settings"]["cudnn_benchmark"] is None
    assert "cuDNN autotuning: not applicable (CPU)" in out
    assert data["comparisons"][0]["candidate"] == "amp-bf16"
    # the module's BatchNorm is trained as written (train mode): its running stats moved
    assert data["batches"][0]["arms"]["fp32"]["all_finite"]
    _assert_no_cpu_nonsense(data, out + err)


def _assert_no_cpu_nonsense(data, text):
    """None of the items under the issue's "Third"."""
    from trtprof.train.run import MAX_CI_RATIO, NOT_MEASURABLE

    for c in data["comparisons"]:
        s = c["speedup"]
        if s["ci_high"] / s["ci_low"] > MAX_CI_RATIO:
            assert c["verdict"] == NOT_MEASURABLE and c["not_measurable"]
            assert f"{s['estimate']:.3f}×" not in text  # the estimate is not printed as a result
        assert not any(f["rule"] in ("tensor_core_eligibility", "launch_bound", "slower_kernels", "tf32_share", "bf16_vs_fp16",
                                     "low_precision_share") for f in c["diagnosis"])
        for f in c["diagnosis"]:
            share = f["evidence"].get("share_of_step")
            assert share is None or share <= 1.0
            assert "%" not in f["message"] or all(int(p) <= 100 for p in
                                                  __import__("re").findall(r"(\d+)\s?%", f["message"]))
    for noise in ("USDT", "profiler_start", "gpuGetDeviceCount"):
        assert noise not in text


@needs_torch
def test_factory_four_tuple_uses_its_loss_and_optimizer(tiny, tmp_path):
    """The (model, inputs, loss_fn, optimizer_fn) form: the first recorded loss is loss_fn of the
    module's output on trtprof's seeded inputs, computed here independently; SGD from optimizer_fn."""
    import torch

    from trtprof.measure.interleave import RoundPlan
    from trtprof.model.inputs import make_inputs
    from trtprof.spec import TensorSpec
    from trtprof.train.api import train_compare
    from trtprof.train.run import TrainOptions

    plan = RoundPlan(time_budget_s=0.2, round_iterations=2, first_warmup=1, first_warmup_ms=0)
    data = train_compare(f"{tiny}:make_full", "fp32,amp-bf16", (3,), plan, TrainOptions(steps=2, reasons=False, device="cpu"))
    assert data["environment"]["backend"]["source"]["form"] == "model+inputs+loss+optimizer"
    spec = importlib.util.spec_from_file_location("tiny_check", tiny)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    model = mod.Tiny().train()
    x = make_inputs([TensorSpec("input", "float32", (None, 3, 8, 8))], {"input": (3, 3, 8, 8)}, seed=0)["input"]
    with torch.no_grad():
        expected = float((model(torch.from_numpy(x)).float() ** 2).mean())
    first = data["batches"][0]["arms"]["fp32"]["loss_first"]
    assert first == pytest.approx(expected, rel=1e-5)


@needs_torch
def test_factory_model_only_needs_shape(tiny, tmp_path, capsys):
    rc = _cli([f"{tiny}:make_model_only", "--precisions", "fp32,amp-bf16"], tmp_path)
    err = capsys.readouterr().err
    assert rc == 2 and "--shape" in err and "make_model_only" in err and len(err.strip().splitlines()) == 1
    rc = _cli([f"{tiny}:make_model_only", "--precisions", "fp32,amp-bf16", "--shape", "x:1x3x8x8",
               "--batch-sizes", "2"], tmp_path)
    capsys.readouterr()
    data = json.loads((tmp_path / "t.json").read_text())
    assert rc == 0 and data["results"][0]["config"]["input_shapes"] == {"x": [2, 3, 8, 8]}


@pytest.mark.parametrize("target, fragment", [
    ("missing.py:make", "no such file"),
    ("{tiny}:nope", "has no function 'nope'"),
    ("{tiny}:NOT_A_FUNCTION", "NOT_A_FUNCTION is a int, not a function"),
    ("{tiny}:make_bad_type", "make_bad_type() returned a int"),
    ("{tiny}:make_raises", "make_raises() failed: RuntimeError: weights file missing"),
    ("{tiny}:make_not_module", "returned a str as the model"),
    ("{broken}:make", "importing it failed: ZeroDivisionError"),
    ("{exits}:make", "make() called sys.exit(0) instead of returning a model"),
    ("{exits_at_import}:make", "importing it called sys.exit(0)"),
    ("no_such_pkg_xyz.models:make", "no module named 'no_such_pkg_xyz'"),
])
@needs_torch
def test_bad_factory_is_one_line_exit_2(tiny, tmp_path, capsys, target, fragment):
    broken = tmp_path / "broken.py"
    broken.write_text("x = 1 / 0\n")
    exits = tmp_path / "exits.py"
    exits.write_text("import sys\ndef make():\n    sys.exit(0)\n")
    exits_at_import = tmp_path / "exits_at_import.py"
    exits_at_import.write_text("import sys\nsys.exit(0)\ndef make():\n    pass\n")
    rc = _cli([target.format(tiny=tiny, broken=broken, exits=exits, exits_at_import=exits_at_import),
               "--precisions", "fp32,amp-bf16"], tmp_path)
    err = capsys.readouterr().err
    assert rc == 2, err
    assert fragment in err and "Traceback" not in err and len(err.strip().splitlines()) == 1
    where = "missing.py" if target.startswith("missing") else ("no_such_pkg_xyz" if "xyz" in target else
                                                                (str(broken) if "broken" in target else
                                                                 str(exits_at_import) if "import" in target else
                                                                 str(exits) if "exits" in target else str(tiny)))
    assert where in err
    assert not (tmp_path / "t.json").exists()


# -- arms ------------------------------------------------------------------------------------------


@needs_torch
def test_graphed_arms_parse_and_refusals():
    from trtprof.errors import UnsupportedPrecision
    from trtprof.train.run import comparison_pairs
    from trtprof.train.step import parse_arms

    arms = parse_arms("fp32,amp-bf16,amp-bf16+graphed", "cuda")
    assert [a.name for a in arms] == ["fp32", "amp-bf16", "amp-bf16+graphed"]
    assert arms[2].graphed and arms[2].autocast_dtype == "bfloat16" and arms[2].eager_name == "amp-bf16"
    assert comparison_pairs(arms) == [("fp32", "amp-bf16"), ("fp32", "amp-bf16+graphed"),
                                      ("amp-bf16", "amp-bf16+graphed")]
    assert comparison_pairs(parse_arms("fp32,fp32+graphed", "cuda")) == [("fp32", "fp32+graphed")]
    with pytest.raises(UnsupportedPrecision, match="GradScaler"):
        parse_arms("fp32,amp-fp16+graphed", "cuda")
    with pytest.raises(UnsupportedPrecision, match="need a GPU"):
        parse_arms("fp32,amp-bf16+graphed", "cpu")


@needs_torch
def test_graphed_arm_refused_on_cpu_in_one_line(tiny, tmp_path, capsys):
    rc = _cli([f"{tiny}:make", "--precisions", "fp32,amp-bf16+graphed"], tmp_path)
    err = capsys.readouterr().err
    assert rc == 2 and "CUDA graphs need a GPU" in err and len(err.strip().splitlines()) == 1


@needs_torch
def test_no_autotune_is_recorded(tiny, tmp_path, capsys):
    rc = _cli([f"{tiny}:make", "--precisions", "fp32,amp-bf16", "--no-autotune", "--no-reasons"], tmp_path)
    capsys.readouterr()
    data = json.loads((tmp_path / "t.json").read_text())
    assert rc == 0 and data["settings"]["autotune"] is False
    assert all(r["config"]["autotune"] is False for r in data["results"])


def test_header_says_autotuning_state():
    from trtprof.train.page import header_lines

    assert header_lines({"settings": {"cudnn_benchmark": True}, "device": "cuda"})[0].startswith("cuDNN autotuning: on")
    assert "OFF" in header_lines({"settings": {"cudnn_benchmark": False}, "device": "cuda"})[0]
    notes = {"environment": {"backend": {"source": {"notes": ["ONNX source: x"]}}}, "settings": {}, "device": "cpu"}
    assert header_lines(notes) == ["cuDNN autotuning: not applicable (CPU)", "ONNX source: x"]


# -- "not measurable here" -------------------------------------------------------------------------


def test_unmeasurable_ci_threshold_just_inside_and_outside():
    from trtprof.train.run import MAX_CI_RATIO, unmeasurable_reason

    assert unmeasurable_reason(1.0, MAX_CI_RATIO * 0.999, "cpu") is None
    reason = unmeasurable_reason(1.0, MAX_CI_RATIO * 1.001, "cpu")
    assert reason is not None and "CPU" in reason and "factor" in reason
    assert unmeasurable_reason(0.012, 2383.353, "cpu") is not None
    assert unmeasurable_reason(0.0, 1.0, "cuda") is not None
    assert unmeasurable_reason(0.9, 1.1, "cuda") is None


def test_page_prints_not_measurable_instead_of_a_speedup():
    from trtprof.train.page import markdown, summary_lines

    c = {"batch_size": 2, "baseline": "fp32", "candidate": "amp-bf16", "verdict": "not measurable here",
         "not_measurable": "the 95 % CI [0.012, 2.38e+03] spans a factor 1.99e+05 (> 2)",
         "speedup": {"estimate": 5.273, "ci_low": 0.012, "ci_high": 2383.353},
         "latency": {"baseline": {"median_ms": 58.0}, "candidate": {"median_ms": 11.0}},
         "accuracy": {"baseline_loss_last": 1.0, "candidate_loss_last": 1.0, "steps": 3}, "diagnosis": [],
         "rounds": 3, "stop_reason": "time_budget"}
    data = {"comparisons": [c], "device": "cpu", "settings": {}}
    text = "\n".join(summary_lines(data)) + markdown(data)
    assert "5.273" not in text and "NOT MEASURABLE HERE" in text and "spans a factor" in text


# -- shares, GPU-only reasons, chatter ---------------------------------------------------------------


def _profiles(step_ms=10.0):
    from trtprof.train.reasons import StepProfile

    base = StepProfile("fp32", step_ms=step_ms, phases_ms={"forward_loss": 3, "backward": 5, "optimizer": 2})
    cand = StepProfile("amp-bf16", step_ms=step_ms, cast_ms=2 * step_ms,  # profiler-inflated cast time
                       phases_ms={"forward_loss": 3, "backward": 3, "optimizer": 4})
    return base, cand


def test_phase_shares_only_when_the_profiling_pass_agrees_with_the_timed_step():
    from trtprof.train.reasons import PROFILE_STEP_AGREEMENT, RunFacts, findings_for

    base, cand = _profiles(10.0)
    inside = findings_for(base, cand, RunFacts(steps_run=3, device="cpu", timed_ms=10.0 / (PROFILE_STEP_AGREEMENT * 0.99)),
                          layers=[])
    rules = {f.rule: f for f in inside}
    assert "optimizer_step" in rules and "phase_split" not in rules
    assert "4 ms of a 10 ms step (40%)" in rules["optimizer_step"].message
    assert "(100%)" in rules["casts"].message  # a cast time above the step is capped at the step
    outside = {f.rule: f for f in findings_for(base, cand, RunFacts(steps_run=3, device="cpu",
                                                                    timed_ms=10.0 / (PROFILE_STEP_AGREEMENT * 1.01)),
                                               layers=[])}
    assert "phase_split" in outside and "optimizer_step" not in outside and "casts" not in outside


def test_tensor_core_reason_is_gpu_only():
    from trtprof.train.reasons import RunFacts, findings_for

    base, cand = _profiles()
    layers = [{"name": "c", "op": "Conv", "in_channels": 3, "out_channels": 3, "kernel": [3, 3],
               "tensor_core_eligible": False}]
    peer = (base, 1.2)  # a median ratio is a speed claim: GPU only too
    on = {f.rule for f in findings_for(base, cand, RunFacts(steps_run=3, device="cuda"), layers=layers, peer=peer)}
    off = {f.rule for f in findings_for(base, cand, RunFacts(steps_run=3, device="cpu"), layers=layers, peer=peer)}
    assert {"tensor_core_eligibility", "bf16_vs_fp16"} <= on and "cpu_only" in off
    assert not {"tensor_core_eligibility", "bf16_vs_fp16"} & off


def test_captured_output_keeps_library_prints_off_the_terminal(capfd):
    from trtprof.train.reasons import captured_output

    with captured_output() as lines:
        os.write(2, b"USDT probe profiler_start\n")
        os.write(1, b"gpuGetDeviceCount failed with code 35\n")
    out, err = capfd.readouterr()
    assert "USDT" not in err and "gpuGetDeviceCount" not in out
    assert lines == ["USDT probe profiler_start", "gpuGetDeviceCount failed with code 35"]
    print("after")  # the descriptors are back
    assert capfd.readouterr().out == "after\n"


@needs_torch
def test_profile_records_what_the_profiler_printed(tiny):
    from trtprof.train.reasons import profile_arm
    from trtprof.train.step import ARMS, TorchTrainStep

    spec = importlib.util.spec_from_file_location("tiny_prof", tiny)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    from trtprof.spec import TensorSpec

    runner = TorchTrainStep(mod.Tiny(), ARMS["fp32"], (TensorSpec("input", "float32", (None, 3, 8, 8)),), device="cpu")
    prof = profile_arm(runner, runner.tensors_for({"input": np.zeros((2, 3, 8, 8), np.float32)}))
    assert isinstance(prof.to_json()["library_output"], list) and not prof.errors


# -- memory ------------------------------------------------------------------------------------------


def _mem(peak, state, saved, rest):
    return {"peak_allocated_mib": peak, "state_mib": state, "saved_for_backward_mib": saved,
            "workspace_and_temporaries_mib": rest}


def test_memory_finding_names_workspace_when_it_is_most_of_the_difference():
    from trtprof.train.reasons import WORKSPACE_SHARE, RunFacts, findings_for

    base, cand = _profiles()
    b = _mem(100, 50, 30, 20)

    def finding(rest_delta):
        c = _mem(200, 50, 30 + 100 - rest_delta, 20 + rest_delta)
        found = {f.rule: f for f in findings_for(base, cand, RunFacts(steps_run=3, memory={"baseline": b, "candidate": c},
                                                                      autotune=True), layers=[])}
        return found["memory"].message

    assert "working memory, not parameters or activations" in finding(100 * WORKSPACE_SHARE * 1.02)
    assert "autotuned" in finding(100 * WORKSPACE_SHARE * 1.02)
    assert "working memory, not parameters" not in finding(100 * WORKSPACE_SHARE * 0.98)


@needs_torch
def test_memory_breakdown_counts_state_and_saved_tensors(tiny):
    """On a CPU runner: state = parameters + gradients + Adam's two moments (+ its step counters);
    something is saved for backward; the rest is what the given peak leaves."""
    from trtprof.spec import TensorSpec
    from trtprof.train.memory import MIB, breakdown
    from trtprof.train.step import ARMS, TorchTrainStep

    spec = importlib.util.spec_from_file_location("tiny_mem", tiny)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    runner = TorchTrainStep(mod.Tiny(), ARMS["fp32"], (TensorSpec("input", "float32", (None, 3, 8, 8)),), device="cpu")
    tensors = runner.tensors_for({"input": np.zeros((2, 3, 8, 8), np.float32)})
    runner.step(tensors)
    params = sum(p.numel() * 4 for p in runner.module.parameters())
    out = breakdown(runner, tensors, {"peak_allocated_mib": 10.0, "allocated_before_mib": 1.0})
    assert 4 * params / MIB <= out["state_mib"] <= 4 * params / MIB + 1e-3  # p, grad, exp_avg, exp_avg_sq (+ steps)
    assert out["saved_for_backward_mib"] > 0
    assert out["workspace_and_temporaries_mib"] == pytest.approx(9.0 - out["state_mib"] - out["saved_for_backward_mib"])


@needs_torch
def test_module_tensor_core_layers(tiny):
    from torch import nn

    from trtprof.train.reasons import module_tensor_core_layers

    net = nn.Sequential(nn.Conv2d(3, 8, 3), nn.Conv2d(8, 16, 3, groups=2), nn.Linear(16, 8))
    layers = module_tensor_core_layers(net)
    assert [(x["op"], x["in_channels"], x["out_channels"], x["tensor_core_eligible"]) for x in layers] == [
        ("Conv2d", 3, 8, False), ("Conv2d", 4, 8, False), ("Linear", 16, 8, True)]


# -- ONNX: what it loses -------------------------------------------------------------------------------


def _conv_graph(convs: int, *, bias: int, residual: bool, bn: bool = False, dropout: bool = False):
    from onnx import TensorProto, helper

    nodes, prev = [], "x"
    for i in range(convs):
        ins = [prev, f"w{i}"] + ([f"b{i}"] if i < bias else [])
        nodes.append(helper.make_node("Conv", ins, [f"c{i}"]))
        prev = f"c{i}"
    if bn:
        nodes.append(helper.make_node("BatchNormalization", [prev, "s", "bb", "m", "v"], ["bn"]))
    if dropout:
        nodes.append(helper.make_node("Dropout", [prev], ["d"]))
    if residual:
        nodes.append(helper.make_node("Add", ["c0", prev], ["y"]))
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 8, 8, 8])],
                              [helper.make_tensor_value_info(prev, TensorProto.FLOAT, None)])
    return helper.make_model(graph)


def test_folded_batchnorm_heuristic_thresholds():
    from trtprof.train.onnx_source import FOLDED_BN_BIAS_SHARE, FOLDED_BN_MIN_CONVS, training_layers

    n = FOLDED_BN_MIN_CONVS
    assert training_layers(_conv_graph(n, bias=n, residual=True))["folded_batchnorm_suspected"]
    assert not training_layers(_conv_graph(n - 1, bias=n - 1, residual=True))["folded_batchnorm_suspected"]
    assert not training_layers(_conv_graph(n, bias=n, residual=False))["folded_batchnorm_suspected"]
    assert not training_layers(_conv_graph(n, bias=n, residual=True, bn=True))["folded_batchnorm_suspected"]
    twenty = 20  # bias share just inside / just outside FOLDED_BN_BIAS_SHARE (0.9 of 20 = 18)
    inside = int(np.ceil(FOLDED_BN_BIAS_SHARE * twenty))
    assert training_layers(_conv_graph(twenty, bias=inside, residual=True))["folded_batchnorm_suspected"]
    assert not training_layers(_conv_graph(twenty, bias=inside - 1, residual=True))["folded_batchnorm_suspected"]
    info = training_layers(_conv_graph(2, bias=2, residual=False, dropout=True))
    assert info["dropout_nodes"] == 1 and info["batchnorm_nodes"] == 0 and "Dropout nodes: 1" in info["notes"][0]


def test_report_net_onnx_is_not_flagged_as_folded(tmp_path):
    import onnx

    sys.path.insert(0, str(ROOT / "models"))
    from conv_elu import make_onnx

    from trtprof.train.onnx_source import training_layers

    info = training_layers(onnx.load(str(make_onnx("report_conv_elu_k32_256", tmp_path / "r.onnx"))))
    assert not info["folded_batchnorm_suspected"] and info["conv_nodes"] == 4
    assert "the step trains without them" in info["notes"][0]


@needs_torch
@needs_onnx2torch
def test_cli_onnx_prints_what_it_loses(tmp_path, capsys):
    from trtprof.model.demo import make_demo_model

    model = make_demo_model(tmp_path / "tiny.onnx", channels=8, image=8, classes=4)
    rc = _cli([str(model), "--precisions", "fp32,amp-bf16", "--no-reasons"], tmp_path)
    out = capsys.readouterr().out
    assert rc == 0 and "BatchNormalization nodes: 0, Dropout nodes: 0" in out


# -- the report net's module ---------------------------------------------------------------------------


@needs_torch
def test_report_net_module_matches_the_onnx_file(tmp_path):
    """models/report_net.py computes what models/conv_elu.py's ONNX computes (NHWC there, NCHW here)."""
    import onnxruntime as ort
    import torch

    sys.path.insert(0, str(ROOT / "models"))
    import report_net
    from conv_elu import make_onnx

    model, example = report_net.make()
    assert tuple(example.shape) == (report_net.BATCH, 3, 128, 128)
    x = np.random.default_rng(0).standard_normal((2, 128, 128, 3)).astype(np.float32)
    sess = ort.InferenceSession(str(make_onnx("report_conv_elu_k32_256", tmp_path / "r.onnx")),
                                providers=["CPUExecutionProvider"])
    want = sess.run(None, {"image": x})[0]
    with torch.no_grad():
        got = model(torch.from_numpy(x.transpose(0, 3, 1, 2).copy())).numpy().transpose(0, 2, 3, 1)
    assert got.shape == want.shape == (2, 8, 8, 3)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)


# -- GPU -----------------------------------------------------------------------------------------------


@pytest.mark.gpu
@needs_gpu
@needs_torch
def test_gpu_factory_autotuned_graphed_and_memory_breakdown(tiny, tmp_path):
    """On a GPU: autotuning recorded on, the graphed arm measured and compared with its eager arm,
    the memory breakdown present for every arm."""
    from trtprof.measure.interleave import RoundPlan
    from trtprof.train.api import train_compare
    from trtprof.train.run import TrainOptions

    plan = RoundPlan(time_budget_s=1.0, copies=False)
    data = train_compare(f"{tiny}:make", "fp32,amp-bf16,amp-bf16+graphed", (8,), plan, TrainOptions(steps=3, device="cuda"))
    assert data["settings"]["cudnn_benchmark"] is True and data["environment"]["backend"]["cudnn_benchmark"] is True
    pairs = [(c["baseline"], c["candidate"]) for c in data["comparisons"]]
    assert ("amp-bf16", "amp-bf16+graphed") in pairs
    graphed = next(r for r in data["results"] if r["precision"] == "amp-bf16+graphed")
    assert graphed["config"]["cuda_graph"] is True
    for run in data["batches"][0]["arms"].values():
        assert run["all_finite"] and run["memory"]["state_mib"] > 0 and "workspace_and_temporaries_mib" in run["memory"]


@pytest.mark.parametrize("device,cudnn_autotune,autotune,recorded", [
    ("cuda", True, True, True), ("cuda", True, False, False),  # torch on a GPU: as --autotune says
    ("cpu", True, True, None), ("cuda", False, True, None)])  # no cuDNN on the CPU; a trainer without the setting
def test_settings_record_cudnn_autotuning_only_for_a_trainer_that_has_it_on_a_gpu(device, cudnn_autotune, autotune,
                                                                                   recorded):
    """The trainer declares the setting (``Trainer.cudnn_autotune``, True for TorchTrainer); its name is not asked."""
    from trtprof.measure.interleave import RoundPlan
    from trtprof.train.pytorch import TorchTrainer
    from trtprof.train.run import Trainer, TrainOptions, run_settings

    assert TorchTrainer.cudnn_autotune is True and TorchTrainer.framework == "torch" and Trainer.cudnn_autotune is False
    trainer = Trainer()
    trainer.device, trainer.cudnn_autotune = device, cudnn_autotune
    settings = run_settings(trainer, RoundPlan(), TrainOptions(autotune=autotune))
    assert settings["cudnn_benchmark"] is recorded and settings["autotune"] is autotune
