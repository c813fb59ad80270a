"""Issue 13 on a GPU: `train-compare` verdicts for ResNet-50 and the report's Conv2D+ELU net, checked
against an independent plain-PyTorch training loop.

Models (both ONNX, random seeded weights, built here):
* ResNet-50: torchvision ``resnet50(weights=None)`` exported by ``gpu_fidelity.export_resnet50``
  (eval-mode export, so BatchNorm is folded into the convolutions: the trained graph is
  conv+bias+relu, not torchvision's train-mode BN network);
* the report's Keras net *as written*: ``Conv2D(3, k, 2, 'same', activation='elu')`` for
  k = 32, 64, 128, 256, i.e. 3 filters with 32…256-wide kernels, stride 2, TF 'same' padding,
  input 128×128×3 (NCHW here), written with onnx.helper, Glorot-uniform weights as Keras draws them.

For each model and batch size, trtprof's ``train_compare`` (the code behind ``trtprof
train-compare``: arms fp32 (TF32 off), tf32, amp-fp16, amp-bf16; Adam; mean(|y-1|) loss) gives
verdicts, memory and reasons. The reference (``interleaved_fidelity``) is an independent plain loop
over a fresh onnx2torch module per arm (``torch.autocast`` + ``torch.amp.GradScaler``, default
stream, one ``torch.cuda.Event`` pair per step), run block by block against trtprof's own timed
runner in the same process (AB BA …). Per row the script prints trtprof's median step / the
reference's, the ratio of the two speedups, and train-compare's own median for the row.

Usage (device machine, repo root): python3 benchmarks/gpu_train.py --out-dir $OUT
"""
from __future__ import annotations

import argparse
import copy
import json
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

ARMS = ("fp32", "tf32", "amp-fp16", "amp-bf16")
PLAN = {"resnet50": (32, 128, 256), "report_net": (10, 256)}


def export_report_net(path: Path, seed: int = 0) -> Path:
    """Conv2D(3, k, 2, 'same', activation='elu') for k in 32, 64, 128, 256 on 128×128×3, as ONNX."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(seed)
    nodes, inits = [], []
    prev, cin, size = "input", 3, 128
    for i, k in enumerate((32, 64, 128, 256)):
        out = -(-size // 2)  # TF 'same': ceil(size / stride)
        pad = max((out - 1) * 2 + k - size, 0)
        limit = np.sqrt(6.0 / (k * k * cin + k * k * 3))  # glorot_uniform: fan_in + fan_out
        w = rng.uniform(-limit, limit, (3, cin, k, k)).astype(np.float32)
        inits += [numpy_helper.from_array(w, f"conv{i}.w"), numpy_helper.from_array(np.zeros(3, np.float32), f"conv{i}.b")]
        nodes.append(helper.make_node("Conv", [prev, f"conv{i}.w", f"conv{i}.b"], [f"c{i}"], name=f"conv{i}",
                                      kernel_shape=[k, k], strides=[2, 2],
                                      pads=[pad // 2, pad // 2, pad - pad // 2, pad - pad // 2]))
        nodes.append(helper.make_node("Elu", [f"c{i}"], [f"e{i}"], name=f"elu{i}"))
        prev, cin, size = f"e{i}", 3, out
    graph = helper.make_graph(nodes, "report_net",
                              [helper.make_tensor_value_info("input", TensorProto.FLOAT, ["batch", 3, 128, 128])],
                              [helper.make_tensor_value_info(prev, TensorProto.FLOAT, ["batch", 3, size, size])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    onnx.save(model, str(path))
    return path


def round_ratio_ci(ours: np.ndarray, ref: np.ndarray, seed: int = 0) -> dict:
    """The rounds are the independent units (each round is a trtprof block beside a reference block):
    the ratio of the two sides' median-of-round-medians with a 95 % bootstrap CI over paired rounds
    (scipy's BCa), so a ratio outside ±2 % can be told apart from the rounds' own spread."""
    from scipy.stats import bootstrap

    def ratio(a: np.ndarray, b: np.ndarray, axis: int = -1) -> np.ndarray:
        return np.median(a, axis=axis) / np.median(b, axis=axis)

    res = bootstrap((ours, ref), ratio, paired=True, vectorized=True, n_resamples=5000,
                    confidence_level=0.95, random_state=np.random.default_rng(seed))
    ci = res.confidence_interval
    return {"round_ratio": float(ratio(ours, ref)), "round_ratio_ci": [float(ci.low), float(ci.high)],
            "round_medians_trtprof": [float(x) for x in ours], "round_medians_reference": [float(x) for x in ref]}


def interleaved_fidelity(onnx_path: Path, batch: int, arms, *, rounds: int, steps: int, warmup: int = 5,
                         seed: int = 0) -> dict:
    """trtprof's timed training step against a plain-PyTorch step, block by block in the same process.

    Per arm: trtprof's runner (``TorchTrainer.make_runner``, timed by trtprof's own GPU loop through
    ``interleave.measure_block``) and an independent plain loop over a fresh onnx2torch module (Adam,
    ``torch.autocast`` + ``torch.amp.GradScaler``, one ``torch.cuda.Event`` pair per step on the
    default stream) alternate in ``rounds`` blocks of ``steps`` steps (AB BA …), so both see the same
    machine: at small batch a ResNet-50 step is host-bound and its time moves with the host's state
    (a first version that ran the reference after the whole train-compare differed by up to 18 %
    at batch 32 on rows with a 15 % step-to-step CV)."""
    import onnx
    import torch
    from onnx2torch import convert

    from trtprof.model.inputs import make_inputs
    from trtprof.measure.interleave import measure_block
    from trtprof.measure.timing import TimingConfig
    from trtprof.train.pytorch import TorchTrainer
    from trtprof.train.step import ARMS as ARM_SPECS
    # the same Identity pre-pass trtprof needs for torch-exported graphs (onnx2torch limitation)
    from trtprof.backends.torch import fold_identity_initializers

    proto = onnx.load(str(onnx_path))
    fold_identity_initializers(proto)
    base = convert(proto).float()
    trainer = TorchTrainer(onnx_path, device="cuda", optimizer="adam", loss="mae-to-ones", seed=seed)
    side = 224 if "resnet" in onnx_path.stem else 128
    feeds = make_inputs(trainer.inputs, {trainer.inputs[0].name: (batch, 3, side, side)}, seed=seed)
    x = torch.as_tensor(feeds[trainer.inputs[0].name]).cuda()
    dtypes = {"amp-fp16": torch.float16, "amp-bf16": torch.bfloat16}
    config = TimingConfig(warmup=2, iterations=steps, copies=False)
    out = {}
    for arm in arms:
        runner = trainer.make_runner(ARM_SPECS[arm])
        model = copy.deepcopy(base).cuda().train()
        opt = torch.optim.Adam(model.parameters(), lr=1e-3)
        scaler = torch.amp.GradScaler("cuda", enabled=arm == "amp-fp16")
        dtype = dtypes.get(arm)

        def step() -> None:
            opt.zero_grad(set_to_none=True)
            with torch.autocast("cuda", dtype=dtype or torch.float32, enabled=dtype is not None):
                y = model(x)
            loss = (y.float() - 1.0).abs().mean()
            scaler.scale(loss).backward()
            scaler.step(opt)
            scaler.update()

        def reference_block(n: int) -> list[float]:
            torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = arm == "tf32"
            events = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(n)]
            for _ in range(2):
                step()
            for a, b in events:
                a.record()
                step()
                b.record()
            torch.cuda.synchronize()
            return [a.elapsed_time(b) for a, b in events]

        reference_block(warmup)
        measure_block(runner, feeds, TimingConfig(warmup=warmup, iterations=1, copies=False))
        ours: list[list[float]] = []
        ref: list[list[float]] = []
        # per round, to tell the host's drift from the GPU's: seconds since the arm's first round,
        # the SM clock when trtprof's block started (NVML), and trtprof's median host enqueue time
        # per step (the CPU time of a step: a host-bound step's GPU time tracks it)
        trace: dict[str, list[float]] = {"t_s": [], "sm_clock_mhz": [], "enqueue_ms": []}
        started = time.perf_counter()
        for r in range(rounds):
            for side_name in (("trtprof", "reference") if r % 2 == 0 else ("reference", "trtprof")):
                if side_name == "trtprof":
                    samples = measure_block(runner, feeds, config)
                    ours.append([float(v) for v in samples.latency_ms])
                    trace["sm_clock_mhz"].append(samples.device.get("before", {}).get("sm_clock_mhz") or float("nan"))
                    trace["enqueue_ms"].append(float(np.median(samples.stages["enqueue_ms"])))
                else:
                    ref.append(reference_block(steps))
            trace["t_s"].append(round(time.perf_counter() - started, 3))
        o, f = np.array(ours), np.array(ref)
        out[arm] = {"trtprof_ms": float(np.median(o)), "reference_ms": float(np.median(f)), "n": int(o.size),
                    "rounds": rounds, "trtprof_cv": float(o.std(ddof=1) / o.mean()),
                    "reference_cv": float(f.std(ddof=1) / f.mean()),
                    **round_ratio_ci(np.median(o, axis=1), np.median(f, axis=1)), "round_trace": trace}
        runner.close()
        del runner  # model, opt and scaler are rebound by the next arm (the closures above use them)
        trainer.release()
        torch.cuda.empty_cache()
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = True
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out-dir", type=Path, required=True)
    ap.add_argument("--budget-s", type=float, default=6.0, help="train-compare time budget per batch size")
    ap.add_argument("--steps", type=int, default=10, help="accuracy steps per arm")
    ap.add_argument("--ref-steps", type=int, default=10,
                    help="steps per fidelity block (a host-bound row needs short blocks, e.g. 4 with ~450 "
                         "rounds: results/gpu_train-2026-11-30/run4/)")
    ap.add_argument("--ref-rounds", type=int, default=6, help="fidelity blocks per side (AB BA …)")
    ap.add_argument("--ref-arms", default=",".join(ARMS), help="arms of the reference check (comma list)")
    ap.add_argument("--batches", default=None, help="only these batch sizes (comma list; default: the plan's)")
    ap.add_argument("--models", default="report_net,resnet50")
    ap.add_argument("--deadline-s", type=float, default=330.0, help="skip optional parts past this wall time")
    ap.add_argument("--fidelity-only", action="store_true",
                    help="skip train-compare itself; only the interleaved reference check (its rows already exist)")
    ap.add_argument("--max-batch", action="store_true", help="ResNet-50: --find-max-batch (if time is left)")
    args = ap.parse_args(argv)
    t0 = time.time()

    import torch

    args.out_dir.mkdir(parents=True, exist_ok=True)
    work = Path("/tmp/gpu_train")
    work.mkdir(exist_ok=True)
    print(f"device {torch.cuda.get_device_name(0)}, torch {torch.__version__}, cudnn.benchmark "
          f"{torch.backends.cudnn.benchmark}", flush=True)
    summary = {"device": torch.cuda.get_device_name(0), "torch": torch.__version__,
               "date": time.strftime("%Y-%m-%d"), "rows": []}
    for name in args.models.split(","):
        try:
            run_model(name, args, summary, t0, work)
        except Exception:  # noqa: BLE001 - log it and go on with the next model: device time is scarce
            import traceback

            traceback.print_exc()
            print(f"FAILED: {name}", flush=True)
    print(f"total {time.time() - t0:.0f} s", flush=True)
    return 0


def run_model(name: str, args, summary: dict, t0: float, work: Path) -> None:
    if name == "resnet50":
        from gpu_fidelity import export_resnet50

        path = export_resnet50(work / "resnet50.onnx")
    else:
        path = export_report_net(work / "report_net.onnx")
    batches = [b for b in PLAN[name] if args.batches is None or str(b) in args.batches.split(",")]
    if not batches:
        return
    if args.fidelity_only:  # train-compare's own rows exist from an earlier run: only the reference check
        data = {"batches": [{"batch_size": b, "median_step_ms": {}} for b in batches]}
    else:
        data = run_train_compare(name, path, batches, args, t0)
    arms = [a for a in ARMS if a in args.ref_arms.split(",")]
    for b in batches:
        if time.time() - t0 > args.deadline_s:
            print(f"  reference skipped for {name} batch {b}: past the deadline", flush=True)
            continue
        fid = interleaved_fidelity(path, b, arms, rounds=args.ref_rounds, steps=args.ref_steps)
        compare_ms = next(x for x in data["batches"] if x["batch_size"] == b)["median_step_ms"]
        for arm in arms:
            f = fid[arm]
            # every measured field of the arm, renamed n → n_per_side ("rounds" is the run's argument)
            measured = {k: v for k, v in f.items() if k not in ("n", "rounds")}
            row = {"model": name, "batch": b, "arm": arm, **measured, "ratio": f["trtprof_ms"] / f["reference_ms"],
                   "n_per_side": f["n"], "train_compare_ms": compare_ms.get(arm)}
            if arm != "fp32" and "fp32" in fid:
                row["trtprof_speedup"] = fid["fp32"]["trtprof_ms"] / f["trtprof_ms"]
                row["reference_speedup"] = fid["fp32"]["reference_ms"] / f["reference_ms"]
                row["speedup_ratio"] = row["trtprof_speedup"] / row["reference_speedup"]
            summary["rows"].append(row)
            print(f"  ref {name} b{b} {arm}: trtprof {f['trtprof_ms']:.3f} ms, reference {f['reference_ms']:.3f} ms, "
                  f"ratio {row['ratio']:.4f}, per-round {f['round_ratio']:.4f} [95% CI {f['round_ratio_ci'][0]:.4f}, "
                  f"{f['round_ratio_ci'][1]:.4f}]"
                  + (f" (train-compare's median {compare_ms[arm]:.3f} ms)" if arm in compare_ms else "")
                  + (f", speedup ratio {row['speedup_ratio']:.4f}" if "speedup_ratio" in row else ""), flush=True)
        # after every batch size: a run cut by a time limit keeps the rows it measured
        (args.out_dir / "reference.json").write_text(json.dumps(summary, indent=1) + "\n")


def run_train_compare(name: str, path: Path, batches: list[int], args, t0: float) -> dict:
    """train-compare itself on every arm (and, if asked, the largest batch per arm); writes train-NAME.json."""
    from trtprof.measure.interleave import RoundPlan
    from trtprof.train.api import train_compare
    from trtprof.train.page import markdown
    from trtprof.train.run import TrainOptions, write_json

    plan = RoundPlan(time_budget_s=args.budget_s, copies=False)
    options = TrainOptions(steps=args.steps, find_max_batch=False)
    data = train_compare(path, ",".join(ARMS), batches, plan, options, device="cuda",
                         on_batch=lambda b, o: print(f"  {name} batch {b}: {o.rounds} rounds {o.elapsed_s:.1f} s "
                                                     f"({o.stop_reason})", flush=True))
    print(markdown(data), flush=True)
    if args.max_batch and name == "resnet50" and time.time() - t0 < args.deadline_s:
        from trtprof.model.inputs import make_inputs
        from trtprof.train.pytorch import TorchTrainer
        from trtprof.train.step import ARMS as ARM_SPECS

        trainer = TorchTrainer(path, device="cuda", optimizer="adam", loss="mae-to-ones", seed=0)
        data["max_batch"] = {}
        for arm in ("fp32", "amp-fp16", "amp-bf16"):
            if time.time() - t0 > args.deadline_s:
                break
            res = trainer.max_batch(ARM_SPECS[arm], lambda bb: make_inputs(trainer.inputs, {"input": (bb, 3, 224, 224)}),
                                    4096, start=256, resolution=0.25)
            data["max_batch"][arm] = res
            print(f"  max batch {arm}: {res}", flush=True)
        del trainer
    write_json(data, args.out_dir / f"train-{name}.json")
    return data


if __name__ == "__main__":
    raise SystemExit(main())
