"""Power of `trtprof compare` on the CPU machine as it is (issue 27), through the real CLI (ONNX Runtime).

A model pair with a real ≈ 5 % difference: two MLPs (width 256, batch 8) whose only difference is
the depth, 40 vs 42 Gemm+Relu layers (≈ 1.05 × the work; 20 vs 21 layers of width 512 measured
0.87–0.88 here — 21 MB of weights against 20, likely a cache boundary — and widths 1024 vs 1048
0.87–0.89, through ONNX Runtime's kernel choice). The truth is measured
independently in the same run, before the A/B runs and after them: both models loaded in this
process (trtprof's own ONNX Runtime runners), alternated block by block for ``--truth-s`` seconds,
the ratio of the median block medians (not through compare's statistics).

Then, until ``--minutes`` are spent, alternately:
* an A/B: ``trtprof compare A.onnx B.onnx --backend onnxruntime --time-budget-s 60`` — the order of
  the two models alternates, so "faster" and "slower" are each the right answer half the time; a
  decisive verdict in the direction of the truth is *right*, against it (or ``equivalent``) *wrong*;
* an A/A: ``trtprof compare A.onnx --precisions fp32,fp32`` at the default budget — decisive is a false
  alarm.
Every run's wall time is recorded beside its budget (the budget includes worker start-up). The
results file is rewritten after every run, so an interrupted run keeps what it measured; the count
of runs is in it. The machine is shared: the load average before and after each run is recorded.

    PYTHONPATH=. python benchmarks/power_cpu.py --minutes 40 --out benchmarks/results/power_cpu-2026-12-01
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

DEPTHS = (40, 42)
WIDTH = 256
BATCH = 8
AB_BUDGET_S = 60.0
MARGIN = 0.01


def make_mlp(path: Path, layers: int, width: int = WIDTH, seed: int = 0, features: int = 256) -> Path:
    """Gemm+Relu × ``layers`` (features → width → … → width → 10), dynamic batch, seeded weights."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(seed)
    nodes, inits, prev, cur = [], [], features, "x"
    dims = [width] * layers + [10]
    for k, d in enumerate(dims):
        w = (rng.standard_normal((prev, d)) * np.sqrt(2.0 / prev)).astype(np.float32)
        inits += [numpy_helper.from_array(w, f"w{k}"), numpy_helper.from_array(np.zeros(d, np.float32), f"b{k}")]
        last = k == len(dims) - 1  # the output is named "y" in both models: the A/B compares outputs by name
        nodes.append(helper.make_node("Gemm", [cur, f"w{k}", f"b{k}"], ["y" if last else f"g{k}"], name=f"gemm{k}"))
        cur = "y" if last else f"g{k}"
        if k < len(dims) - 1:
            nodes.append(helper.make_node("Relu", [cur], [f"r{k}"], name=f"relu{k}"))
            cur = f"r{k}"
        prev = d
    graph = helper.make_graph(nodes, f"mlp{layers}x{width}", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", features])],
                              [helper.make_tensor_value_info(cur, TensorProto.FLOAT, ["batch", 10])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    onnx.save(model, str(path))
    return path


def truth_ratio(models: list[Path], engines: Path, seconds: float) -> dict:
    """lat(A)/lat(B) measured here: both loaded in this process, blocks alternated (A B, B A, …)."""
    from trtprof.measure.bench import load_runner
    from trtprof.builder.pipeline import BuildSettings, build_engines
    from trtprof.model.inputs import make_inputs
    from trtprof.spec import Precision
    from trtprof.measure.timing import TimingConfig, time_host

    runners = []
    for m in models:
        (outcome,) = build_engines(m, [Precision.FP32], [BATCH],
                                   BuildSettings(engines_dir=engines, backend="onnxruntime"))
        runners.append(load_runner(outcome.record))
    feeds = make_inputs(runners[0].inputs, {"x": (BATCH, 256)}, seed=0)
    config = TimingConfig(warmup=5, iterations=50)
    medians: list[list[float]] = [[], []]
    t_end = time.perf_counter() + seconds
    k = 0
    while time.perf_counter() < t_end:
        for i in ((0, 1) if k % 2 == 0 else (1, 0)):
            s = time_host(lambda r=runners[i]: r.infer(feeds), config)
            medians[i].append(float(np.median(s.latency_ms)))
        k += 1
    for r in runners:
        r.close()
    ratios = np.array(medians[0]) / np.array(medians[1])
    return {"ratio": float(np.median(medians[0]) / np.median(medians[1])), "blocks": k,
            "block_ratio_iqr": [float(np.percentile(ratios, 25)), float(np.percentile(ratios, 75))],
            "median_ms": [float(np.median(m)) for m in medians], "seconds": seconds}


def run_compare(args: list[str], out: Path) -> dict:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    load0 = os.getloadavg()[0]
    t0 = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "trtprof", "compare", *args, "--out", str(out)],
                          capture_output=True, text=True, env=env)
    wall = time.perf_counter() - t0
    if proc.returncode != 0:
        return {"error": proc.stderr[-1500:], "wall_s": wall}
    c = json.loads(out.read_text())["comparisons"][0]
    s = c["speedup"]
    return {"verdict": c["verdict"], "estimate": s["estimate"], "ci": [s["ci_low"], s["ci_high"]], "loads": c["loads"],
            "rounds": c["rounds"], "stop_reason": c["stop_reason"], "mixture": s.get("mixture", ""),
            "wall_s": wall, "load_avg": [load0, os.getloadavg()[0]]}


def summarize(result: dict) -> list[str]:
    ab = [r for r in result["ab"] if "verdict" in r]
    aa = [r for r in result["aa"] if "verdict" in r]
    lines = []
    if ab:
        right = sum(r["right"] for r in ab)
        wrong = sum(r["wrong"] for r in ab)
        lines.append(f"A/B (true ≈ {result['truth_mean']:.3f}, {AB_BUDGET_S:g} s budget): {len(ab)} runs, decided the "
                     f"right way {right} ({right / len(ab):.0%}), wrong way {wrong} ({wrong / len(ab):.0%}), "
                     f"undecided {len(ab) - right - wrong}; wall time median {np.median([r['wall_s'] for r in ab]):.1f} s, "
                     f"max {max(r['wall_s'] for r in ab):.1f} s")
    if aa:
        decisive = sum(r["verdict"] in ("faster", "slower") for r in aa)
        lines.append(f"A/A (default budget {result['aa_budget_s']:g} s): {len(aa)} runs, decisive {decisive} "
                     f"({decisive / len(aa):.0%}); wall time median {np.median([r['wall_s'] for r in aa]):.1f} s, "
                     f"max {max(r['wall_s'] for r in aa):.1f} s")
    return lines


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--minutes", type=float, default=40.0)
    ap.add_argument("--truth-s", type=float, default=30.0)
    ap.add_argument("--out", type=Path, required=True, help="writes OUT.json and OUT.txt")
    args = ap.parse_args()
    from trtprof.measure.interleave import DEFAULT_TIME_BUDGET_S

    deadline = time.monotonic() + args.minutes * 60
    result: dict = {"machine": {"node": platform.node(), "cpus": os.cpu_count(), "python": platform.python_version()},
                    "created": datetime.now(timezone.utc).isoformat(timespec="seconds"), "depths": DEPTHS, "width": WIDTH,
                    "batch": BATCH, "ab_budget_s": AB_BUDGET_S, "aa_budget_s": DEFAULT_TIME_BUDGET_S, "ab": [], "aa": []}

    def save() -> None:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.with_suffix(".json").write_text(json.dumps(result, indent=1) + "\n")
        head = [f"power of trtprof compare on {platform.node()} ({os.cpu_count()} CPUs, shared with other jobs), "
                f"{result['created']}; MLPs of {DEPTHS} layers × {WIDTH}, batch {BATCH}, ONNX Runtime",
                f"truth (in-process, alternated blocks): before {result['truth'][0]['ratio']:.4f}"
                + (f", after {result['truth'][1]['ratio']:.4f}" if len(result["truth"]) > 1 else " (after: not reached)")]
        args.out.with_suffix(".txt").write_text("\n".join(head + summarize(result)) + "\n")

    with tempfile.TemporaryDirectory(prefix="power-cpu-") as tmp:
        models = [make_mlp(Path(tmp) / f"mlp{d}.onnx", d) for d in DEPTHS]
        engines = Path(tmp) / "engines"
        result["truth"] = [truth_ratio(models, engines, args.truth_s)]
        result["truth_mean"] = result["truth"][0]["ratio"]
        save()
        k = 0
        while time.monotonic() + AB_BUDGET_S * 1.5 + 2 * args.truth_s < deadline:
            pair = models if k % 2 == 0 else models[::-1]
            r = run_compare([str(pair[0]), str(pair[1]), "--backend", "onnxruntime", "--batch-sizes", str(BATCH),
                             "--engines", str(engines), "--time-budget-s", f"{AB_BUDGET_S:g}"], Path(tmp) / "ab.json")
            truth = result["truth_mean"] if k % 2 == 0 else 1.0 / result["truth_mean"]
            if "verdict" in r:
                right = "slower" if truth < 1 else "faster"
                r.update(truth=truth, right=r["verdict"] == right,
                         wrong=r["verdict"] in ({"faster", "slower"} - {right}) | {"equivalent"})
            result["ab"].append(r)
            save()
            print(f"A/B {k}: {r}", flush=True)
            r = run_compare([str(models[0]), "--precisions", "fp32,fp32", "--backend", "onnxruntime", "--batch-sizes",
                             str(BATCH), "--engines", str(engines)], Path(tmp) / "aa.json")
            result["aa"].append(r)
            save()
            print(f"A/A {k}: {r}", flush=True)
            k += 1
        result["truth"].append(truth_ratio(models, engines, args.truth_s))
        result["truth_mean"] = float(np.mean([t["ratio"] for t in result["truth"]]))
        for r in result["ab"]:  # judged against the mean of the two truth measurements
            if "verdict" in r:
                truth = result["truth_mean"] if r["truth"] < 1 else 1.0 / result["truth_mean"]
                right = "slower" if truth < 1 else "faster"
                r.update(truth=truth, right=r["verdict"] == right,
                         wrong=r["verdict"] in ({"faster", "slower"} - {right}) | {"equivalent"})
        save()
    print("\n".join(summarize(result)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
