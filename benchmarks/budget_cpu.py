"""Does ``trtprof compare --time-budget-s B`` take about B seconds per batch size? (issue 27, item 2)

Runs the real CLI (``python -m trtprof compare``, ONNX Runtime, A/A ``--precisions fp32,fp32``) on
the CPU machine as it is, N times per setting, and prints each run's whole-command wall time (process
start to exit, measured from outside) over its budget (``B × batch sizes``), with the median and the
max per setting. From the JSON each run writes (``budget``): the start-up before measuring, the
reserve kept for the end, where each batch size's loop stopped and why, and a floor overrun when there
was one; the tail (wall time after the last loop, measured against the outside clock) beside the
reserve that was kept for it.

Models: the power_cpu MLP (40 Gemm+Relu layers × 256, ``benchmarks/power_cpu.py make_mlp``) and a
tiny MLP (2 layers × 64). Engines are built (or found) first, by one untimed run per model: builds
are left out of the budget, and the first import of onnxruntime from a cold disk would be timed
otherwise. The machine is shared: the load average before and after each run is recorded. The results
file is rewritten after every run.

    PYTHONPATH=. nice python benchmarks/budget_cpu.py --out benchmarks/results/budget_cpu-2026-12-01

``--root DIR`` runs another trtprof (e.g. ``git archive main | tar -x -C DIR`` before this change) for
the wall times before, on the same machine; its JSON has no ``budget``, so only wall time and stop
reasons are kept (``--budgets 12`` keeps the settings of one budget).
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
sys.path.insert(0, str(ROOT / "benchmarks"))

from power_cpu import make_mlp  # noqa: E402

# (model, budget s, batch sizes, runs): 12 runs at the default 12 s, 6 at 30 s, one and two batch sizes
SETTINGS = [("mlp40", 12.0, "8", 12), ("mlp40", 12.0, "1,8", 12), ("mlp40", 30.0, "8", 6), ("mlp40", 30.0, "1,8", 6),
            ("tiny", 12.0, "8", 12), ("tiny", 12.0, "1,8", 6)]
WITHIN = 0.10  # the promise: the whole command within 10 % of its budget


def run_once(model: Path, engines: Path, budget_s: float, batches: str, out: Path, root: Path = ROOT) -> dict:
    env = {**os.environ, "PYTHONPATH": str(root)}
    load0 = os.getloadavg()[0]
    t0 = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "trtprof", "compare", str(model), "--precisions", "fp32,fp32",
                           "--backend", "onnxruntime", "--batch-sizes", batches, "--engines", str(engines),
                           "--time-budget-s", f"{budget_s:g}", "--out", str(out)], capture_output=True, text=True, env=env,
                          cwd=root)  # python -m puts the working directory first on sys.path: run the trtprof of root
    wall = time.perf_counter() - t0
    if proc.returncode != 0:
        return {"error": proc.stderr[-1500:], "wall_s": wall}
    data = json.loads(out.read_text())
    n = len(batches.split(","))
    if "budget" not in data:  # a trtprof from before the budget counted the whole command: wall time only
        return {"wall_s": round(wall, 3), "budget_s": budget_s * n, "ratio": round(wall / (budget_s * n), 4),
                "stops": [c["stop_reason"] for c in data["comparisons"]], "load_avg": [load0, os.getloadavg()[0]]}
    budget = data["budget"]
    last = max(b["spent_s"] for b in budget["per_batch"].values())
    return {"wall_s": round(wall, 3), "budget_s": budget_s * n, "ratio": round(wall / (budget_s * n), 4),
            "launch_s": budget["launch_s"], "startup_s": budget["startup_s"], "reserve_s": budget["reserve_s"], "tail_s": round(wall - last, 3),
            "reserve_basis_s": budget.get("reserve_basis_s", budget.get("imports_s", budget["launch_s"])),
            "per_batch": budget["per_batch"], "load_avg": [load0, os.getloadavg()[0]]}


def summary_lines(result: dict) -> list[str]:
    lines = []
    for key, runs in result["runs"].items():
        ok = [r for r in runs if "ratio" in r]
        if not ok:
            continue
        ratios = np.array([r["ratio"] for r in ok])
        if "per_batch" not in ok[0]:  # an older trtprof (--root): wall time and stop reasons only
            stops = [s for r in ok for s in r["stops"]]
            lines.append(f"{key}: {len(ok)} runs, wall/budget median {np.median(ratios):.3f}, min {ratios.min():.3f}, "
                         f"max {ratios.max():.3f}; over +{WITHIN:.0%}: {int(np.sum(ratios > 1 + WITHIN))}; stops: "
                         f"{', '.join(f'{s} {stops.count(s)}' for s in sorted(set(stops)))}; load average "
                         f"{min(min(r['load_avg']) for r in ok):.1f}–{max(max(r['load_avg']) for r in ok):.1f}")
            continue
        stops = [b["stop_reason"] for r in ok for b in r["per_batch"].values()]
        by_budget = np.array([r["ratio"] for r in ok if all(b["stop_reason"] == "time_budget" for b in r["per_batch"].values())])
        floors = sum(bool(b["floor_overrun"]) for r in ok for b in r["per_batch"].values())
        tails = np.array([r["tail_s"] for r in ok])
        per_launch = tails / np.array([r["launch_s"] * len(r["per_batch"]) for r in ok])
        per_basis = tails / np.array([r.get("reserve_basis_s", r["launch_s"]) * len(r["per_batch"]) for r in ok])
        lines.append(f"{key}: {len(ok)} runs, wall/budget median {np.median(ratios):.3f}, min {ratios.min():.3f}, "
                     f"max {ratios.max():.3f}; over +{WITHIN:.0%}: {int(np.sum(ratios > 1 + WITHIN))}"
                     + (f"; runs stopped by the budget alone: {len(by_budget)}, median {np.median(by_budget):.3f}, "
                        f"max {by_budget.max():.3f}" if len(by_budget) else ""))
        lines.append(f"  stops: {', '.join(f'{s} {stops.count(s)}' for s in sorted(set(stops)))}; floor overruns {floors}; "
                     f"launch median {np.median([r['launch_s'] for r in ok]):.2f} s, start-up median "
                     f"{np.median([r['startup_s'] for r in ok]):.2f} s; tail median {np.median(tails):.2f} s "
                     f"(max {tails.max():.2f}) against a reserve of median {np.median([r['reserve_s'] for r in ok]):.2f} s; "
                     f"tail / (launch × batch sizes) median {np.median(per_launch):.2f}, max {per_launch.max():.2f}; "
                     f"tail / (the reserve's basis × batch sizes) median {np.median(per_basis):.2f}, max {per_basis.max():.2f}; "
                     f"load average {min(min(r['load_avg']) for r in ok):.1f}–{max(max(r['load_avg']) for r in ok):.1f}")
        if len(runs) > len(ok):
            lines.append(f"  {len(runs) - len(ok)} runs failed: {runs[-1].get('error', '')[:200]}")
    return lines


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, required=True, help="writes OUT.json and OUT.txt")
    ap.add_argument("--runs-scale", type=float, default=1.0, help="multiply every setting's run count (e.g. 0.25)")
    ap.add_argument("--budgets", default=None, help="only the settings of these budgets, e.g. 12")
    ap.add_argument("--models", default=None, help="only the settings of these models, e.g. mlp40")
    ap.add_argument("--root", type=Path, default=ROOT,
                    help="the trtprof to run (a folder holding trtprof/; default this checkout), e.g. an older one")
    ap.add_argument("--before", type=Path, default=None,
                    help="also run this trtprof (e.g. main before the change), alternating run by run with --root, "
                         "so both see the same load")
    args = ap.parse_args()
    settings = [s for s in SETTINGS if (args.budgets is None or f"{s[1]:g}" in args.budgets.split(","))
                and (args.models is None or s[0] in args.models.split(","))]
    roots = [(args.root, "")] + ([(args.before, " [before]")] if args.before is not None else [])
    result: dict = {"machine": {"node": platform.node(), "cpus": os.cpu_count(), "python": platform.python_version()},
                    "created": datetime.now(timezone.utc).isoformat(timespec="seconds"), "root": str(args.root),
                    "before": None if args.before is None else str(args.before), "runs": {}}

    def save() -> None:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.with_suffix(".json").write_text(json.dumps(result, indent=1) + "\n")
        head = [f"trtprof compare --time-budget-s: whole-command wall time over budget × batch sizes, on "
                f"{platform.node()} ({os.cpu_count()} CPUs, shared with other jobs), {result['created']}; "
                "A/A fp32,fp32, ONNX Runtime; mlp40 = 40 Gemm+Relu × 256, tiny = 2 × 64; trtprof from "
                + ("this checkout" if args.root == ROOT else str(args.root))
                + (f", alternating run by run with [before] {args.before}" if args.before is not None else "")]
        args.out.with_suffix(".txt").write_text("\n".join(head + summary_lines(result)) + "\n")

    with tempfile.TemporaryDirectory(prefix="budget-cpu-") as tmp:
        models = {"mlp40": make_mlp(Path(tmp) / "mlp40.onnx", 40), "tiny": make_mlp(Path(tmp) / "tiny.onnx", 2, width=64)}
        engines = Path(tmp) / "engines"
        for name, model in models.items():  # builds (left out of the budget anyway) and a warm disk cache
            for root, _ in roots:
                run_once(model, engines, 2.0, "1,8", Path(tmp) / "warm.json", root)
        for model, budget_s, batches, runs in settings:
            for k in range(max(1, round(runs * args.runs_scale))):
                for root, tag in roots:
                    key = f"{model} budget {budget_s:g} s × batch sizes {batches}{tag}"
                    r = run_once(models[model], engines, budget_s, batches, Path(tmp) / "run.json", root)
                    result["runs"].setdefault(key, []).append(r)
                    save()
                    if "error" in r:
                        detail = f": {r['error']}"
                    elif "launch_s" in r:
                        detail = (f", ratio {r['ratio']:.3f}, launch {r['launch_s']:.2f} s, start-up {r['startup_s']:.2f} s, "
                                  f"tail {r['tail_s']:.2f} s (reserve {r['reserve_s']:.2f} s)")
                    else:
                        detail = f", ratio {r['ratio']:.3f}"
                    print(f"{key} #{k}: wall {r['wall_s']:.2f} s{detail}", flush=True)
    print("\n".join(summary_lines(result)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
