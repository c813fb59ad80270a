"""Issue 27 on the H200 (prepared on the CPU machine, run by the lead on the device): two checks through
the real CLI on the torch backend (eager, autotuned as compare's default).

1. The report's net with ``--what-if pad-channels`` at batch 10 and 256: every Conv of
   ``report_conv_elu_k32_256`` has 3 input and 3 output channels (tensor-core ineligible); the what-if
   pads them to 8 (outputs checked identical) and measures fp32 → fp16 → padded fp16:
   ``trtprof compare report.onnx --what-if pad-channels --backend torch --batch-sizes 10,256``.
   Its "what-if:" lines ("tensor_core_ineligible → pad-channels measured: fp16 vs fp32 A× → B×") and
   JSON go to OUT/what_if.{txt,json}.
2. A 1 % difference decided within 30 s: two MLPs of 100 and 101 Gemm+ReLU layers (≈ 1 % more work),
   width ``--width`` (default 512) at batch ``--batch`` (default 16384: each layer ~0.15 ms of GPU work,
   GPU-bound). ``--batch 256`` makes every layer a few microseconds of GPU work: the pair is then
   launch-bound and host jitter between processes (1–3 %) exceeds the 1 % effect. The truth is measured without
   trtprof first and last (``truth``: onnx2torch modules, CUDA events, blocks alternated for
   ``--truth-s`` seconds). Then ``--runs`` × ``trtprof compare A B --backend torch --batch-sizes N
   --time-budget-s 30 --margin 0.005`` (the order alternating; at the default margin 0.01 a 1 % difference
   sits on the margin's edge and is never called): decided the right way / the wrong way / not, and the
   wall time of each against its 30 s budget (worker start-up included). Results in
   OUT/one_percent.{txt,json}, saved after every run.

    python3 benchmarks/gpu_power.py --out-dir benchmarks/results/gpu_power-2026-12-01
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "models"))
sys.path.insert(0, str(ROOT / "benchmarks"))

DEPTHS = (100, 101)
WIDTH = 512  # 100 layers × 512² weights: 105 MB per model, kept out of the results folder
BATCH = 16384  # each 512-wide layer ~8.6 GFLOP: GPU-bound (at 256 the pair is launch-bound, host jitter > 1 %)
BUDGET_S = 30.0


def cli(*args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p)}
    return subprocess.run([sys.executable, "-m", "trtprof", *args], capture_output=True, text=True, env=env)


def what_if(out_dir: Path, work: Path, budget: str) -> None:
    import conv_elu

    net = conv_elu.make_onnx("report_conv_elu_k32_256", work / "report_conv_elu_k32_256.onnx")
    t0 = time.perf_counter()
    proc = cli("compare", str(net), "--what-if", "pad-channels", "--backend", "torch", "--batch-sizes", "10,256",
               "--time-budget-s", budget, "--engines", str(work / "engines"), "--out", str(out_dir / "what_if.json"))
    wall = time.perf_counter() - t0
    (out_dir / "what_if.txt").write_text(proc.stdout + proc.stderr + f"\nexit {proc.returncode}, wall {wall:.1f} s\n")
    print(proc.stdout[-4000:], proc.stderr[-2000:], flush=True)


def truth(models: list[Path], batch: int, seconds: float) -> dict:
    """The true latency ratio, measured without trtprof: each ONNX model converted by onnx2torch and run
    the way a user times PyTorch (eval, inference_mode, cudnn.benchmark, TF32 off as trtprof's fp32,
    torch.cuda.Event around blocks of 20 calls), both models in this process, blocks alternated for
    ``seconds``; the ratio of the median block times."""
    import onnx
    import onnx2torch
    import torch

    torch.backends.cudnn.benchmark = True
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    nets = [onnx2torch.convert(onnx.load(str(m))).cuda().eval() for m in models]
    x = torch.randn(batch, 256, device="cuda")
    blocks: list[list[float]] = [[], []]
    with torch.inference_mode():
        for net in nets:
            for _ in range(5):
                net(x)
        torch.cuda.synchronize()
        end, k = time.perf_counter() + seconds, 0
        while time.perf_counter() < end:
            for i in ((0, 1) if k % 2 == 0 else (1, 0)):
                start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                start.record()
                for _ in range(20):
                    nets[i](x)
                stop.record()
                stop.synchronize()
                blocks[i].append(start.elapsed_time(stop) / 20)
            k += 1
    del nets
    torch.cuda.empty_cache()
    return {"ratio": float(np.median(blocks[0]) / np.median(blocks[1])), "blocks": k,
            "median_ms": [float(np.median(b)) for b in blocks],
            "method": "plain PyTorch (onnx2torch modules), CUDA events over blocks of 20 calls, alternated"}


def one_percent(out_dir: Path, work: Path, runs: int, truth_s: float, width: int, batch: int, margin: str) -> None:
    from power_cpu import make_mlp

    models = [make_mlp(work / f"mlp{d}.onnx", d, width=width) for d in DEPTHS]
    engines = work / "engines"
    result: dict = {"depths": DEPTHS, "width": width, "batch": batch, "budget_s": BUDGET_S, "margin": float(margin),
                    "truth": [], "runs": []}

    def save() -> None:  # after every step: a run cut short by the device's limit keeps what it measured
        (out_dir / "one_percent.json").write_text(json.dumps(result, indent=1) + "\n")

    for m in models:  # built before the runs: the budget leaves builds out, and so does each run's wall time
        built = cli("build", "--fp32", str(m), "--backend", "torch", "--batch-sizes", str(batch), "--engines", str(engines))
        if built.returncode:
            raise SystemExit(f"build of {m.name} failed: {built.stderr[-1500:]}")
    result["truth"].append(truth(models, batch, truth_s))
    print("truth", result["truth"][0], flush=True)
    save()
    for k in range(runs):
        pair = models if k % 2 == 0 else models[::-1]
        t0 = time.perf_counter()
        proc = cli("compare", str(pair[0]), str(pair[1]), "--backend", "torch", "--batch-sizes", str(batch),
                   "--time-budget-s", f"{BUDGET_S:g}", "--margin", margin, "--engines", str(engines),
                   "--out", str(work / "c.json"))
        wall = time.perf_counter() - t0
        row: dict = {"order": [p.stem for p in pair], "wall_s": wall, "exit": proc.returncode}
        if proc.returncode == 0:
            report = json.loads((work / "c.json").read_text())
            c = report["comparisons"][0]
            row.update(verdict=c["verdict"], estimate=c["speedup"]["estimate"], ci=[c["speedup"]["ci_low"],
                       c["speedup"]["ci_high"]], loads=c["loads"], rounds=c["rounds"], stop=c["stop_reason"],
                       budget=report.get("budget"))
        else:
            row["error"] = proc.stderr[-1500:]
        result["runs"].append(row)
        print(row, flush=True)
        save()
    result["truth"].append(truth(models, batch, truth_s))
    t = float(np.mean([x["ratio"] for x in result["truth"]]))  # lat(100 layers) / lat(101 layers) < 1
    right = wrong = 0
    for k, row in enumerate(result["runs"]):
        expected = "slower" if k % 2 == 0 else "faster"  # A=100 layers first: the candidate is slower
        right += row.get("verdict") == expected
        wrong += row.get("verdict") in ({"faster", "slower"} - {expected}) | {"equivalent"}
    lines = [f"MLPs {DEPTHS} layers x {width}, batch {batch}; truth lat(100)/lat(101) (plain PyTorch): "
             f"{result['truth'][0]['ratio']:.4f} before, {result['truth'][1]['ratio']:.4f} after (mean {t:.4f})",
             f"{runs} runs at --time-budget-s {BUDGET_S:g}: right way {right}, wrong way {wrong}, undecided {runs - right - wrong}; "
             f"wall time max {max(r['wall_s'] for r in result['runs']):.1f} s (budget × 1.1 = {BUDGET_S * 1.1:.0f} s)"]
    result["summary"] = lines
    save()
    (out_dir / "one_percent.txt").write_text("\n".join(lines) + "\n")
    print("\n".join(lines), flush=True)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out-dir", type=Path, required=True)
    ap.add_argument("--runs", type=int, default=10)
    ap.add_argument("--truth-s", type=float, default=30.0)
    ap.add_argument("--what-if-budget-s", default="20", help="--time-budget-s of the what-if run (per batch size)")
    ap.add_argument("--skip", default="", help="what-if,one-percent")
    ap.add_argument("--width", type=int, default=WIDTH, help="the MLPs' width (one-percent)")
    ap.add_argument("--batch", type=int, default=BATCH, help="the batch size of the one-percent check")
    ap.add_argument("--margin", default="0.005", help="compare's --margin in the one-percent check: a 1 %% difference "
                                                      "sits on the default 0.01 margin's edge and can never be called")
    args = ap.parse_args(argv)
    args.out_dir.mkdir(parents=True, exist_ok=True)
    import tempfile

    work = Path(tempfile.mkdtemp(prefix="gpu-power-"))  # models and engines: not brought back
    subprocess.run(["nvidia-smi"], stdout=open(args.out_dir / "nvidia-smi.txt", "w"), check=False)
    if "what-if" not in args.skip:
        what_if(args.out_dir, work, args.what_if_budget_s)
    if "one-percent" not in args.skip:
        one_percent(args.out_dir, work, args.runs, args.truth_s, args.width, args.batch, args.margin)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
