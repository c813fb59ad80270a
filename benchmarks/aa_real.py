"""Real runs of `trtprof compare` on the CPU machine (ONNX Runtime), through the real CLI:

1. A/A: N runs of ``--precisions fp32,fp32`` on a model trtprof's authors did not write (the onnx
   package's model-zoo graph, as tests/cli/test_cli.py uses), default settings: how many are decisive
   (faster/slower)? Issue 9 asks for at most 1 in 20.
2. Repeatability: three runs of ``--precisions fp32,fp16`` on the same model: the same verdict with
   overlapping CIs?
3. Cost: one default ``compare`` of fp32,fp16 × batch sizes 1,4,16 on the small demo model: wall
   time (issue 9: under 60 s on the 2-core CPU machine).

The machine is shared (other jobs run beside it): the load average before and after each run is
recorded with it.

    PYTHONPATH=. python benchmarks/aa_real.py --out benchmarks/results/aa_real-2026-11-30
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

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def zoo_model(name: str) -> Path:
    import onnx

    return Path(onnx.__file__).parent / "backend" / "test" / "data" / "light" / f"{name}.onnx"


def compare(model: Path, out: Path, engines: Path, *extra: str) -> dict:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    load0 = os.getloadavg()[0]
    t0 = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "trtprof", "compare", str(model), "--backend", "onnxruntime",
                           "--engines", str(engines), "--out", str(out), *extra],
                          capture_output=True, text=True, env=env)
    wall = time.perf_counter() - t0
    if proc.returncode != 0:
        raise SystemExit(f"compare failed ({proc.returncode}): {proc.stderr[-2000:]}")
    data = json.loads(out.read_text())
    rows = []
    for c in data["comparisons"]:
        s = c["speedup"]
        rows.append({"batch": c["batch_size"], "candidate": c["candidate"], "verdict": c["verdict"],
                     "estimate": s["estimate"], "ci_low": s["ci_low"], "ci_high": s["ci_high"], "loads": c["loads"],
                     "rounds": c["rounds"], "stop_reason": c["stop_reason"],
                     "median_ratio": s["median_ratio"], "mean_ratio": s["mean_ratio"]})
    return {"wall_s": wall, "load_avg_before": load0, "load_avg_after": os.getloadavg()[0], "rows": rows}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--aa-runs", type=int, default=20)
    ap.add_argument("--model", default="light_shufflenet", help="onnx model-zoo graph name (static batch 1)")
    ap.add_argument("--out", type=Path, default=None, help="write OUT.json and OUT.txt")
    ap.add_argument("--skip", default="", help="comma list of parts to skip: aa,repeat,cost")
    ap.add_argument("--repeat-budget-s", type=float, default=None,
                    help="--time-budget-s of the repeatability runs (default: compare's default)")
    args = ap.parse_args()
    skip = set(filter(None, args.skip.split(",")))
    model = zoo_model(args.model)
    lines = [f"real compare runs: {platform.node()}, {os.cpu_count()} CPUs, python {platform.python_version()}, "
             f"{datetime.now(timezone.utc).isoformat(timespec='seconds')}; model {model.name} (onnx model zoo)", ""]
    result: dict = {"machine": {"node": platform.node(), "cpus": os.cpu_count()}, "model": model.name}

    def say(text: str) -> None:
        lines.append(text)
        print(text, flush=True)

    print("\n".join(lines), flush=True)
    with tempfile.TemporaryDirectory(prefix="aa-real-") as tmp:
        engines = Path(tmp) / "engines"
        if "aa" not in skip:
            say(f"A/A: {args.aa_runs} × compare --precisions fp32,fp32 (defaults)")
            aa = []
            for k in range(args.aa_runs):
                r = compare(model, Path(tmp) / f"aa{k}.json", engines, "--precisions", "fp32,fp32")
                row = r["rows"][0]
                aa.append(r)
                say(f"  run {k + 1:2d}: {row['estimate']:.3f}× [{row['ci_low']:.3f}, {row['ci_high']:.3f}] "
                    f"{row['verdict']:12s} {row['loads']} loads {row['rounds']:3d} rounds  {r['wall_s']:5.1f} s  "
                    f"load avg {r['load_avg_before']:.1f}→{r['load_avg_after']:.1f}")
            decisive = sum(r["rows"][0]["verdict"] in ("faster", "slower") for r in aa)
            verdicts = [r["rows"][0]["verdict"] for r in aa]
            say(f"A/A decisive (faster/slower): {decisive} of {len(aa)}; "
                + ", ".join(f"{v} {verdicts.count(v)}" for v in sorted(set(verdicts))))
            result["aa"] = {"runs": aa, "decisive": decisive}
        if "repeat" not in skip:
            budget = [] if args.repeat_budget_s is None else ["--time-budget-s", f"{args.repeat_budget_s:g}"]
            say(f"Repeatability: 3 × compare --precisions fp32,fp16 {' '.join(budget) or '(defaults)'}")
            reps = []
            for k in range(3):
                r = compare(model, Path(tmp) / f"rep{k}.json", engines, "--precisions", "fp32,fp16", *budget)
                row = r["rows"][0]
                reps.append(r)
                say(f"  run {k + 1}: {row['estimate']:.3f}× [{row['ci_low']:.3f}, {row['ci_high']:.3f}] "
                    f"{row['verdict']:12s} {row['loads']} loads {row['rounds']:3d} rounds  {r['wall_s']:5.1f} s")
            rows = [r["rows"][0] for r in reps]
            same = len({x["verdict"] for x in rows}) == 1
            overlap = max(x["ci_low"] for x in rows) <= min(x["ci_high"] for x in rows)
            say(f"same verdict: {same}; all three CIs overlap: {overlap}")
            result["repeat"] = {"runs": reps, "same_verdict": same, "overlap": overlap}
        if "cost" not in skip:
            from trtprof.model.demo import make_demo_model

            demo = make_demo_model(Path(tmp) / "demo.onnx")
            r = compare(demo, Path(tmp) / "cost.json", Path(tmp) / "demo-engines", "--batch-sizes", "1,4,16")
            say(f"Cost: default compare fp32,fp16 × batch 1,4,16 on the demo model (engines built in the run): "
                f"{r['wall_s']:.1f} s (load avg {r['load_avg_before']:.1f}→{r['load_avg_after']:.1f})")
            for row in r["rows"]:
                say(f"  batch {row['batch']:2d}: {row['estimate']:.3f}× [{row['ci_low']:.3f}, {row['ci_high']:.3f}] "
                    f"{row['verdict']} ({row['loads']} loads, {row['rounds']} rounds, {row['stop_reason']})")
            result["cost"] = r
    if args.out is not None:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.with_suffix(".txt").write_text("\n".join(lines) + "\n")
        args.out.with_suffix(".json").write_text(json.dumps(result, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
