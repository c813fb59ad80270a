"""train-compare: the training-step runner, its statistics through compare's machinery, the solo pass
(loss, skipped steps), the reasons, the CLI contract on a CPU, and the GPU path where a GPU exists."""
from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import numpy as np
import pytest

from trtprof.system import cuda

needs_torch = pytest.mark.skipif(importlib.util.find_spec("torch") is None or
                                 importlib.util.find_spec("onnx2torch") is None, reason="torch/onnx2torch missing")
needs_gpu = pytest.mark.skipif(cuda.device_count() == 0, reason="no CUDA device")


def _model(tmp_path: Path) -> Path:
    from trtprof.model.demo import make_demo_model

    return make_demo_model(tmp_path / "tiny.onnx", channels=8, image=8, classes=4)


# -- pure parts ------------------------------------------------------------------------------------


def test_kernel_classes_from_names():
    from trtprof.train.reasons import kernel_class

    assert kernel_class("sm90_xmma_fprop_implicit_gemm_bf16bf16_bf16f32_f32_nhwckrsc") == "bf16"
    assert kernel_class("sm80_xmma_fprop_implicit_gemm_tf32f32_tf32f32_f32_nhwckrsc_nchw") == "tf32"
    assert kernel_class("volta_h884gemm_64x64_ldg8_nn") == "fp16"
    assert kernel_class("void at::native::vectorized_elementwise_kernel<4, c10::Half>") == "fp16"
    assert kernel_class("void cudnn::winograd::generateWinogradTilesKernel<0, float, float>") == "fp32"
    assert kernel_class("ncclKernel_AllReduce") == "other"
    # CUTLASS names the accumulator before the MMA shape: s16816 = FP32 accumulate of FP16 inputs
    assert kernel_class("cutlass_tensorop_f16_s16816dgrad_analytic_f16_256x64_32x4_nhwc_align8") == "fp16"
    assert kernel_class("cutlass_tensorop_s1688tf32gemm_256x128_16x3_tn_align4") == "tf32"


def test_find_max_batch_search_bounds_the_answer():
    from trtprof.measure.maxbatch import find_max_batch

    res = find_max_batch(lambda b: b <= 300, start=1, limit=4096, resolution=0.05)
    assert res.smallest_fail is not None and res.largest_fit <= 300 < res.smallest_fail
    assert res.smallest_fail - res.largest_fit <= max(1, int(0.05 * res.largest_fit))
    assert all(ok == (b <= 300) for b, ok in res.probes)
    at_limit = find_max_batch(lambda b: True, limit=64)
    assert at_limit.largest_fit == 64 and at_limit.smallest_fail is None and at_limit.to_json()["at_limit"]


def test_tensor_core_layers_flags_channels_not_multiple_of_8(tmp_path):
    import onnx

    from trtprof.train.reasons import tensor_core_layers

    layers = tensor_core_layers(onnx.load(str(_model(tmp_path))))
    assert [(x["op"], x["in_channels"], x["out_channels"], x["tensor_core_eligible"]) for x in layers] == [
        ("Conv", 3, 8, False), ("Conv", 8, 16, True), ("Conv", 16, 32, True), ("Gemm", 32, 4, False)]


@needs_torch
def test_parse_arms_rejects_bad_lists():
    from trtprof.errors import BadInput, UnsupportedPrecision
    from trtprof.train.step import parse_arms

    assert [a.name for a in parse_arms(None, "cuda")] == ["fp32", "tf32", "amp-fp16", "amp-bf16"]
    assert [a.name for a in parse_arms("fp32,amp-fp16", "cpu")] == ["fp32", "amp-fp16"]
    with pytest.raises(BadInput):
        parse_arms("fp32,fp64", "cpu")
    with pytest.raises(BadInput):
        parse_arms("fp32", "cpu")
    with pytest.raises(UnsupportedPrecision):
        parse_arms("fp32,tf32", "cpu")


# -- the runner on a CPU ---------------------------------------------------------------------------


@needs_torch
def test_step_trains_and_each_runner_starts_from_the_same_weights(tmp_path):
    """Two fp32 runners from one module take identical steps (same start, same data); the loss
    falls; the source module is never touched (each runner owns a deep copy)."""
    import torch

    from trtprof.train.step import ARMS, StepSettings, TorchTrainStep, load_module

    module, inputs, _ = load_module(_model(tmp_path))
    before = [p.detach().clone() for p in module.parameters()]
    feeds = {"input": np.random.default_rng(0).standard_normal((4, 3, 8, 8)).astype(np.float32)}
    a = TorchTrainStep(module, ARMS["fp32"], inputs, device="cpu", settings=StepSettings(optimizer="adam"))
    b = TorchTrainStep(module, ARMS["fp32"], inputs, device="cpu", settings=StepSettings(optimizer="adam"))
    la = [float(a.infer(feeds)["loss"][0]) for _ in range(15)]
    lb = [float(b.infer(feeds)["loss"][0]) for _ in range(15)]
    assert la == lb
    assert la[-1] < la[0]
    assert all(torch.equal(p, q) for p, q in zip(before, module.parameters()))
    sgd = TorchTrainStep(module, ARMS["fp32"], inputs, device="cpu",
                         settings=StepSettings(optimizer="sgd", loss="cross-entropy"))
    ce = [float(sgd.infer(feeds)["loss"][0]) for _ in range(15)]
    assert np.isfinite(ce).all() and ce[-1] < ce[0]


@needs_torch
def test_bf16_autocast_really_runs_in_bf16_on_cpu(tmp_path):
    """The arm is applied, not just named: the same step under amp-bf16 gives a different (but
    close) loss, and the profiler sees bfloat16 casts."""
    from trtprof.train.reasons import profile_kernels
    from trtprof.train.step import ARMS, StepSettings, TorchTrainStep, load_module

    module, inputs, _ = load_module(_model(tmp_path))
    feeds = {"input": np.random.default_rng(0).standard_normal((4, 3, 8, 8)).astype(np.float32)}
    fp32 = TorchTrainStep(module, ARMS["fp32"], inputs, device="cpu")
    bf16 = TorchTrainStep(module, ARMS["amp-bf16"], inputs, device="cpu")
    l32, l16 = float(fp32.infer(feeds)["loss"][0]), float(bf16.infer(feeds)["loss"][0])
    assert l32 != l16 and abs(l32 - l16) < 0.05 * abs(l32)
    prof32 = profile_kernels(fp32, fp32.tensors_for(feeds), steps=1)
    prof16 = profile_kernels(bf16, bf16.tensors_for(feeds), steps=1)
    assert prof16["cast_ms"] > 0 and prof32["cast_ms"] == 0


@needs_torch
def test_cross_entropy_needs_logits(tmp_path):
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    from trtprof.errors import BadInput
    from trtprof.train.step import ARMS, StepSettings, TorchTrainStep, load_module

    w = numpy_helper.from_array(np.ones((2, 4), np.float32), "w")
    axes = numpy_helper.from_array(np.array([1], np.int64), "axes")
    graph = helper.make_graph([helper.make_node("Gemm", ["x", "w"], ["g"], transB=1),
                               helper.make_node("ReduceSum", ["g", "axes"], ["y"], keepdims=0)], "vec",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3, 4])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [3])], [w, axes])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    path = tmp_path / "vec.onnx"
    onnx.save(model, str(path))
    module, inputs, _ = load_module(path)
    runner = TorchTrainStep(module, ARMS["fp32"], inputs, device="cpu", settings=StepSettings(loss="cross-entropy"))
    with pytest.raises(BadInput, match="logits"):
        runner.infer({"x": np.ones((3, 4), np.float32)})


@needs_torch
def test_interleaved_training_verdict_on_cpu(tmp_path):
    """The whole comparison through compare's run_interleaved/speedup_ci/verdict: fp32 vs amp-fp16
    (GradScaler counted) vs amp-bf16, losses per arm, reasons present, the JSON complete."""
    from trtprof.measure.interleave import FLOOR_ROUNDS, RoundPlan
    from trtprof.stats.speedup import verdict
    from trtprof.train.api import train_compare
    from trtprof.train.run import MAX_CI_RATIO, NOT_MEASURABLE, TrainOptions

    plan = RoundPlan(time_budget_s=0.5, round_iterations=3, first_warmup=2, first_warmup_ms=0)
    data = train_compare(_model(tmp_path), "fp32,amp-fp16,amp-bf16", (2,), plan, TrainOptions(steps=4, device="cpu"))
    assert data["schema"] == "trtprof.train_compare/1" and data["device"] == "cpu"
    assert [(c["baseline"], c["candidate"]) for c in data["comparisons"]] == [("fp32", "amp-fp16"), ("fp32", "amp-bf16")]
    for c in data["comparisons"]:
        s = c["speedup"]
        assert s["ci_low"] <= s["estimate"] <= s["ci_high"]
        wide = s["ci_high"] / s["ci_low"] > MAX_CI_RATIO
        assert c["verdict"] == (NOT_MEASURABLE if wide else verdict(s["ci_low"], s["ci_high"]))
        # a 0.5 s budget and one load: the floor of two round pairs (2 × interleave.FLOOR_ROUNDS) at least
        assert c["rounds"] >= 2 * FLOOR_ROUNDS and len(c["round_ratios"]) == c["rounds"]
        assert c["latency"]["baseline"]["n"] == c["rounds"] * 3
        assert np.isfinite(c["accuracy"]["candidate_loss_last"])
        assert any(f["rule"] == "cpu_only" for f in c["diagnosis"])
    fp16 = data["comparisons"][0]
    assert fp16["accuracy"]["candidate_skipped_steps"] is not None
    # the phase split is reported only when the profiling pass agrees with the timed median (a
    # loaded CPU often does not); either way the comparison says which
    assert any(f["rule"] in ("grad_scaler", "phase_split") for f in fp16["diagnosis"])
    assert not any(f["rule"] == "tensor_core_eligibility" for c in data["comparisons"] for f in c["diagnosis"])
    arms = data["batches"][0]["arms"]
    assert arms["fp32"]["skipped_steps"] is None and arms["amp-fp16"]["steps"] == 4
    prof = arms["amp-bf16"]["profile"]
    assert set(prof["phases_ms"]) == {"forward_loss", "backward", "optimizer"}
    assert set(arms["amp-fp16"]["profile"]["phases_ms"]) == {"forward_loss", "backward", "unscale", "optimizer",
                                                              "scaler_update"}
    assert {r["precision"] for r in data["results"]} == {"fp32", "amp-fp16", "amp-bf16"}


# -- the CLI contract ------------------------------------------------------------------------------


@needs_torch
def test_cli_train_compare_on_cpu_writes_json_and_html(tmp_path, capsys):
    from trtprof.cli import main

    out, page = tmp_path / "t.json", tmp_path / "t.html"
    rc = main(["train-compare", str(_model(tmp_path)), "--device", "cpu", "--precisions", "fp32,amp-bf16",
               "--batch-sizes", "2", "--budget", "0.3", "--round-iterations", "2", "--steps", "3",
               "--out", str(out), "--html", str(page), "--md", "--optimizer", "sgd"])
    text = capsys.readouterr().out
    assert rc == 0
    data = json.loads(out.read_text())
    assert data["settings"]["optimizer"] == "sgd" and data["comparisons"][0]["candidate"] == "amp-bf16"
    assert "amp-bf16 vs fp32" in text and "speed claims need a GPU" in text
    # the stamp: in the JSON (each comparison and the file), first line of the verdict, top of the page
    stamp = data["comparisons"][0]["validity"]
    assert set(stamp) >= {"valid", "reasons", "stamp"} and "budget" in stamp["checked"]
    assert data["validity"]["valid"] == all(c["validity"]["valid"] for c in data["comparisons"])
    lines = text.splitlines()
    assert lines[lines.index(next(x for x in lines if x.startswith("batch 2: amp-bf16"))) - 1 - len(
        stamp["reasons"])] == stamp["stamp"]
    html_text = page.read_text()
    assert ("NOT VALID" if not data["validity"]["valid"] else "<b>VALID</b>") in html_text[:html_text.index("<h2>")]
    assert html_text.startswith("<!DOCTYPE html>") and "amp-bf16" in html_text
    # the environment is the page kit's section/item/value table, as on the inference pages, not a JSON dump
    assert "<h2>Environment and settings</h2>" in html_text and "<h2>Environment</h2><pre>" not in html_text
    assert "<td>optimizer</td><td>sgd</td>" in html_text.replace("\n", "")


@pytest.mark.parametrize("argv, fragment", [
    (["--precisions", "fp32"], "at least one candidate"),
    (["--precisions", "fp32,int8"], "unknown int8"),
    (["--budget", "0"], "--budget"),
    (["--steps", "0"], "--steps"),
    (["--find-max-batch", "--device", "cpu"], "needs a GPU"),
])
@needs_torch
def test_cli_bad_input_is_one_line_exit_2(tmp_path, capsys, argv, fragment):
    from trtprof.cli import main

    rc = main(["train-compare", str(_model(tmp_path)), "--device", "cpu", "--out", str(tmp_path / "x.json"), *argv])
    err = capsys.readouterr().err
    assert rc == 2 and fragment in err and "Traceback" not in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "x.json").exists()


def test_cli_missing_model_is_exit_2(tmp_path, capsys):
    from trtprof.cli import main

    rc = main(["train-compare", str(tmp_path / "nope.onnx"), "--device", "cpu"])
    assert rc == 2 and "no such file" in capsys.readouterr().err


# -- GPU: the device runner through time_device ----------------------------------------------------


@pytest.mark.gpu
@needs_gpu
@needs_torch
def test_gpu_training_verdict_memory_and_reasons(tmp_path):
    from trtprof.measure.interleave import MIN_ROUNDS, RoundPlan
    from trtprof.stats.speedup import verdict
    from trtprof.train.api import train_compare
    from trtprof.train.run import TrainOptions

    plan = RoundPlan(time_budget_s=1.0, copies=False)
    data = train_compare(_model(tmp_path), None, (8,), plan, TrainOptions(steps=5, device="cuda"))
    assert [c["candidate"] for c in data["comparisons"]] == ["tf32", "amp-fp16", "amp-bf16"]
    res = {r["precision"]: r for r in data["results"]}
    assert res["fp32"]["config"]["clock"] == "cuda_events"
    for arm, run in data["batches"][0]["arms"].items():
        assert run["memory"]["peak_allocated_mib"] > 0 and run["all_finite"]
        assert run["profile"]["kernel_ms"] > 0 and not run["profile"]["errors"], run["profile"]
    fp16 = data["batches"][0]["arms"]["amp-fp16"]["profile"]
    assert fp16["kernel_ms_by_class"].get("fp16", 0) > 0


def test_rediagnose_reclassifies_stored_kernels_and_rederives_reasons():
    """An old JSON whose classifier called a CUTLASS FP16 kernel TF32: the class moves, the
    low-precision share rises, timings and verdicts stay as stored."""
    from trtprof.train.rediagnose import rediagnose

    def profile(arm, kernels):
        total = sum(ms for _, _, ms in kernels)
        by_class: dict = {}
        for _, cls, ms in kernels:
            by_class[cls] = by_class.get(cls, 0.0) + ms
        return {"arm": arm, "step_ms": total * 1.02, "phases_ms": {"forward_loss": total / 2, "backward": total / 2},
                "kernel_ms": total, "kernel_ms_by_class": by_class, "kernels_per_step": 10, "cast_ms": 0.0,
                "top_kernels": [{"name": n, "class": c, "ms_per_step": ms} for n, c, ms in kernels]}

    base = profile("fp32", [("implicit_convolve_sgemm<float, float>", "fp32", 10.0)])
    cand = profile("amp-fp16", [("cutlass_tensorop_f16_s16816dgrad_analytic_f16", "tf32", 16.0),
                                ("implicit_convolve_sgemm<__half, __half>", "fp16", 14.0)])
    data = {"device": "cuda", "environment": {"backend": {"tensor_core_layers": [
                {"name": "conv0", "op": "Conv", "in_channels": 3, "out_channels": 3, "kernel": [32, 32],
                 "tensor_core_eligible": False}]}},
            "batches": [{"batch_size": 10, "median_step_ms": {"fp32": 10.2, "amp-fp16": 30.6},
                         "arms": {"fp32": {"profile": base, "skipped_steps": None, "steps": 8, "memory": None},
                                  "amp-fp16": {"profile": cand, "skipped_steps": 1, "steps": 8, "memory": None}}}],
            "comparisons": [{"batch_size": 10, "baseline": "fp32", "candidate": "amp-fp16", "verdict": "slower",
                             "speedup": {"estimate": 0.33}, "diagnosis": []}]}
    out = rediagnose(data)
    prof = out["batches"][0]["arms"]["amp-fp16"]["profile"]
    assert prof["kernel_ms_by_class"] == {"fp16": 30.0} and prof["low_precision_kernel_share"] == 1.0
    assert out["rediagnosed"]["kernel_names_reclassified"] == 1
    rules = {f["rule"]: f for f in out["comparisons"][0]["diagnosis"]}
    assert {"slower_kernels", "tensor_core_eligibility", "grad_scaler", "low_precision_share"} <= set(rules)
    assert "1 of 8 steps were skipped" in rules["grad_scaler"]["message"]
    assert out["comparisons"][0]["verdict"] == "slower" and data["comparisons"][0]["diagnosis"] == []


def test_tf32_share_reason():
    from trtprof.train.reasons import RunFacts, StepProfile, findings_for

    base = StepProfile("fp32", step_ms=10, kernel_ms=9.5, kernel_ms_by_class={"fp32": 9.5})
    cand = StepProfile("tf32", step_ms=10, kernel_ms=9.5, kernel_ms_by_class={"fp32": 9.0, "tf32": 0.5})
    found = {f.rule: f for f in findings_for(base, cand, RunFacts(steps_run=5), layers=[])}
    assert "no TF32 algorithm" in found["tf32_share"].message
    assert abs(found["tf32_share"].evidence["tf32_kernel_share"] - 0.5 / 9.5) < 1e-12


def test_trtprof_report_renders_a_stored_train_compare_json(tmp_path, capsys):
    """`trtprof report` on the committed H200 result: the training page and its Markdown."""
    from trtprof.cli import main
    from trtprof.train import page, run

    assert page.SCHEMA == run.SCHEMA
    src = Path(__file__).resolve().parents[2] / "benchmarks/results/gpu_train-2026-11-30/train-report_net.rediagnosed.json.gz"
    out = tmp_path / "r.html"
    assert main(["report", str(src), "-o", str(out)]) == 0
    text = capsys.readouterr().out
    assert "| 10 | amp-fp16 vs fp32 |" in text and "slower" in text
    assert "slower_kernels" in out.read_text()


def test_training_notes_replace_the_inference_cuda_graph_advice():
    """A training step cannot be captured (train-compare refuses --cuda-graph), so the timing loop's
    enqueue-bound advice is rewritten, block counts kept; other notes pass through unchanged."""
    from trtprof.train.run import ENQUEUE_NOTE, training_notes

    loop_note = ("enqueue-bound: host enqueue 9.000 ms vs GPU compute 8.000 ms (median), the GPU waits for the "
                 "host; --cuda-graph removes most of the launch cost")
    out = training_notes([f"{loop_note} (in 3 of 5 blocks)", loop_note, "clocks moved"])
    assert out == [f"{ENQUEUE_NOTE} [3 of 5 blocks]", ENQUEUE_NOTE, "clocks moved"]
    assert not any("--cuda-graph" in n for n in out)
