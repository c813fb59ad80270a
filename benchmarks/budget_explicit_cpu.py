"""An explicit ``--time-budget-s`` on 224×224 image classifiers (issue 44 #2): does each run end within +10 % of
its budget, or stop before measuring (exit 2) with the time the minimum needs? And how soon is the first line?

The models are onnx's own ``light_*`` test models (shipped inside the ``onnx`` wheel: ``onnx/backend/test/data/
light``, 224×224 inputs, weights as constants), so nothing is downloaded. For each model the engines are built
once (builds are left out of the budget), then ``trtprof compare MODEL --time-budget-s B`` runs as a user runs
it (its own process, fresh worker processes); per run: wall, exit code, when the first line came, whether it was
refused (the refusal line), the loads measured, the verdict's budget line. A run passes when it exits 0 within
1.1 × B (B per batch size, one batch size here) or exits 2 with the refusal line before any round's line.
With --repeat N the same engines run N times per budget: the first run of a set of engines probes (its first
load tells what the minimum needs), the later ones find its memo (measure.budget_memo) and are refused before
anything is loaded; each row says which ("before loading" / "after the probe"), when the refusal came, and the
1-min load average before and after the run.

    python3 benchmarks/budget_explicit_cpu.py OUT.txt [--budgets 6,30] [--models squeezenet,resnet50,demo]
        [--repeat 1] [--precisions fp32,fp16]
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REFUSAL = "is too small here"
KEEP = 1.10  # a budget is kept when the wall is within +10 % of it (docs/method.md)


def light_model(name: str, folder: Path) -> Path:
    """onnx's ``light_NAME`` test model; ``demo``: trtprof's own demo conv net (32×32, cheap loads), the case
    where the minimum fits a small budget and the run must end within +10 % of it."""
    import onnx

    if name == "demo":
        from trtprof.model.demo import make_demo_model

        return make_demo_model(folder / "demo_convnet.onnx")

    path = Path(onnx.__file__).parent / "backend" / "test" / "data" / "light" / f"light_{name}.onnx"
    if not path.exists():
        raise SystemExit(f"{path}: not in this onnx wheel")
    return path


def timed_run(cmd: list[str], env: dict[str, str] | None = None) -> dict:
    """Run ``cmd``; every output line with its time since the start (stdout and stderr merged)."""
    started = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, bufsize=1, env=env)
    lines = [(time.perf_counter() - started, line.rstrip("\n")) for line in proc.stdout or ()]
    code = proc.wait()
    return {"wall_s": time.perf_counter() - started, "rc": code, "lines": lines}


def one(model: Path, budget_s: float, engines: Path, out: Path, precisions: str) -> dict:
    cmd = [sys.executable, "-m", "trtprof", "compare", str(model), "--engines", str(engines), "--out", str(out),
           "--time-budget-s", f"{budget_s:g}", "--precisions", precisions]
    env = {k: v for k, v in os.environ.items() if k != "TRTPROF_ALLOW_FEWER_LOADS"}  # a user's run: it may refuse
    run = timed_run(cmd, env)
    texts = [text for _, text in run["lines"]]
    refusal = next((text for text in texts if REFUSAL in text), "")
    refused_at = next((t for t, text in run["lines"] if REFUSAL in text), None)
    first_round = next((t for t, text in run["lines"] if " s spent: " in text), None)
    refused_before = bool(refusal) and first_round is None
    kept = run["rc"] == 0 and run["wall_s"] <= KEEP * budget_s
    verdict = next((text.strip() for text in texts if text.startswith("batch ") and " speedup " in text), "")
    return {"model": model.stem, "budget_s": budget_s, "wall_s": run["wall_s"], "rc": run["rc"],
            "first_line_s": run["lines"][0][0] if run["lines"] else None, "first_line": texts[0] if texts else "",
            "refusal": refusal, "refused_before_measuring": refused_before, "kept": kept, "refused_at_s": refused_at,
            "before_loading": refused_before and "nothing was loaded" in refusal,
            "pass": kept or (run["rc"] == 2 and refused_before), "verdict": verdict,
            "command": " ".join(cmd[1:])}


def refused_words(row: dict) -> str:
    if not row["refused_before_measuring"]:
        return "measured"
    return (f"refused {'before loading' if row['before_loading'] else 'after the probe'} at "
            f"{row['refused_at_s']:.1f} s")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--budgets", default="6,30")
    parser.add_argument("--models", default="squeezenet,resnet50")
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--precisions", default="fp32,fp16")
    args = parser.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for name in args.models.split(","):
            model = light_model(name, Path(tmp))
            engines = Path(tmp) / name
            subprocess.run([sys.executable, "-m", "trtprof", "build", *(f"--{p}" for p in args.precisions.split(",")),
                            "--engines", str(engines), str(model)], check=True, capture_output=True)
            for budget in (float(b) for b in args.budgets.split(",")):
                for i in range(args.repeat):
                    load = os.getloadavg()[0]
                    row = one(model, budget, engines, Path(tmp) / f"{name}-{budget:g}-{i}.json", args.precisions)
                    row["load_before"], row["load_after"] = load, os.getloadavg()[0]
                    rows.append(row)
                    print(f"{row['model']} --time-budget-s {budget:g}: rc {row['rc']}, wall {row['wall_s']:.1f} s "
                          f"(load {load:.1f}), first line at {row['first_line_s']:.2f} s, "
                          f"{refused_words(row)}, "
                          f"{'PASS' if row['pass'] else 'FAIL'}", flush=True)
    with open(args.out, "w", encoding="utf-8") as f:
        f.write(f"# {' '.join(sys.argv)}\n# {time.strftime('%Y-%m-%d %H:%M:%S %Z')}, {os.cpu_count()} CPUs\n")
        for row in rows:
            f.write(f"{row['model']}\tbudget {row['budget_s']:g} s\trc {row['rc']}\twall {row['wall_s']:.2f} s\t"
                    f"wall/budget {row['wall_s'] / row['budget_s']:.2f}\tload {row['load_before']:.1f}-"
                    f"{row['load_after']:.1f}\tfirst line {row['first_line_s']:.2f} s\t{refused_words(row)}\t"
                    f"{'PASS' if row['pass'] else 'FAIL'}\n  command: trtprof {row['command'].split(' ', 2)[2]}\n"
                    f"  first line: {row['first_line']}\n  refusal: {row['refusal'] or '-'}\n"
                    f"  verdict: {row['verdict'] or '-'}\n")
        passed = sum(r["pass"] for r in rows)
        f.write(f"# {passed} of {len(rows)} runs kept their budget (+10 %) or were refused before measuring\n")


if __name__ == "__main__":
    main()
