"""Issue 22: `trtprof train-compare` against an independent plain-PyTorch training loop, per row.

For each model and batch size, four arms (fp32, tf32, amp-fp16, amp-bf16), two separate processes:

* trtprof: ``python3 -m trtprof train-compare <factory> --device cuda`` (one process per batch size) on the module factory
  (``models/resnet50_factory.py:make``: torchvision ResNet-50 *with BatchNorm*;
  ``models/report_net.py:make``: the report's Conv2D+ELU net), cuDNN autotuning on (the default);
* the reference: ``benchmarks/train_reference.py`` — imports nothing from trtprof, written the way a
  PyTorch user writes the loop (its own ResNet-50 from torchvision, its own hand-written report net,
  ``cudnn.benchmark = True``, ``torch.autocast`` + ``GradScaler``, CUDA events, arms back to back).

Per row: trtprof's median step / the reference's median step, and a 95 % bootstrap CI of the ratio of
the two sides' median round medians (scipy's ``bootstrap``, percentile method, the rounds of each side
resampled independently). The rounds cannot be paired: the two sides run in separate processes one
after the other, so a round of one has no partner in the other that saw the same machine state.
Target (the issue): every row's CI lies within 1 ± 3 % (``ci_within_1_pm_3pct``).

Plans (rows: ResNet-50 at batch 32/128/256 and the report net at batch 10/256, 4 arms each = 20):
the default fits ~8 minutes of one H200; ``--quick`` spends about half; ``--smoke`` is a CPU run on
a tiny net (two arms, one batch) that checks the plumbing, for CI — its ratios mean nothing.

    python3 benchmarks/train_vs_reference.py --out-dir $OUT/train_vs_reference [--quick]
    python3 benchmarks/train_vs_reference.py --smoke --out-dir /tmp/smoke
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
ARMS = ("fp32", "tf32", "amp-fp16", "amp-bf16")
TARGET = 0.03  # the issue's ±3 %


@dataclass(frozen=True)
class Plan:
    models: tuple[tuple[str, str, tuple[int, ...]], ...]  # (name, trtprof factory, batches)
    arms: tuple[str, ...]
    device: str
    budget_s: float  # trtprof --budget per batch size
    ref_rounds: int
    ref_steps: int
    ref_warmup: int
    timeout_s: float  # per subprocess


FULL = Plan(models=(("report_net", "models/report_net.py:make", (10, 256)),
                    ("resnet50", "models/resnet50_factory.py:make", (32, 128, 256))),
            arms=ARMS, device="cuda", budget_s=12.0, ref_rounds=10, ref_steps=5, ref_warmup=5, timeout_s=270)
QUICK = Plan(models=FULL.models, arms=ARMS, device="cuda", budget_s=5.0, ref_rounds=5, ref_steps=4, ref_warmup=4,
             timeout_s=150)
SMOKE = Plan(models=(("tiny", "benchmarks/train_reference.py:make_tiny", (2,)),), arms=("fp32", "amp-bf16"),
             device="cpu", budget_s=0.3, ref_rounds=3, ref_steps=2, ref_warmup=1, timeout_s=300)


def ratio_ci(ours: list[float], ref: list[float], seed: int = 0) -> tuple[float, float, float]:
    """Ratio of the sides' median round medians and its 95 % bootstrap CI (independent resampling)."""
    from scipy.stats import bootstrap

    a, b = np.asarray(ours, float), np.asarray(ref, float)

    def stat(x: np.ndarray, y: np.ndarray, axis: int = -1) -> np.ndarray:
        return np.median(x, axis=axis) / np.median(y, axis=axis)

    est = float(stat(a, b))
    if a.size < 2 or b.size < 2:
        return est, float("nan"), float("nan")
    res = bootstrap((a, b), stat, paired=False, vectorized=True, n_resamples=4000, method="percentile",
                    confidence_level=0.95, random_state=np.random.default_rng(seed))
    return est, float(res.confidence_interval.low), float(res.confidence_interval.high)


def run(cmd: list[str], log: Path, timeout_s: float) -> int:
    env = {**os.environ, "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    t0 = time.perf_counter()
    with log.open("w") as fh:
        try:
            rc = subprocess.run(cmd, cwd=ROOT, env=env, stdout=fh, stderr=subprocess.STDOUT, timeout=timeout_s).returncode
        except subprocess.TimeoutExpired:
            rc = 124
    print(f"  {' '.join(cmd[1:4])} … rc {rc} in {time.perf_counter() - t0:.0f} s (log {log.name})", flush=True)
    return rc


def run_model(name: str, factory: str, batches: tuple[int, ...], plan: Plan, out: Path,
              ends_at: float = float("inf")) -> list[dict]:
    """Both sides for one model; each process gets at most its plan's timeout and never runs past
    ``ends_at`` (perf_counter time), so the whole run ends inside one device call."""
    def timeout() -> float:
        return max(10.0, min(plan.timeout_s, ends_at - time.perf_counter()))

    sizes = ",".join(str(b) for b in batches)
    ref_json = out / f"reference-{name}.json"
    ours_batches = []
    for batch in batches:  # one process per batch size: a cut run keeps the batches it finished
        ours_json = out / f"trtprof-{name}-b{batch}.json"
        run([sys.executable, "-m", "trtprof", "train-compare", factory, "--device", plan.device, "--batch-sizes",
             str(batch), "--precisions", ",".join(plan.arms), "--budget", str(plan.budget_s), "--steps", "2",
             "--no-reasons", "--out", str(ours_json)], out / f"trtprof-{name}-b{batch}.log", timeout())
        if ours_json.exists():
            ours_batches += json.loads(ours_json.read_text())["batches"]
    run([sys.executable, str(ROOT / "benchmarks/train_reference.py"), "--model", name, "--batches", sizes,
         "--arms", ",".join(plan.arms), "--rounds", str(plan.ref_rounds), "--steps", str(plan.ref_steps),
         "--warmup", str(plan.ref_warmup), "--device", plan.device, "--json", str(ref_json)],
        out / f"reference-{name}.log", timeout())
    ours = {"batches": ours_batches}
    ref = json.loads(ref_json.read_text()) if ref_json.exists() else {"batches": {}}
    rows = []
    for batch in batches:
        mine = next((b for b in ours["batches"] if b["batch_size"] == batch), None)
        theirs = ref["batches"].get(str(batch))
        for arm in plan.arms:
            row: dict = {"model": name, "batch": batch, "arm": arm}
            if mine is None or theirs is None:
                row["missing"] = "trtprof" if mine is None else "reference"
            else:
                est, low, high = ratio_ci(mine["round_medians_ms"][arm], theirs[arm]["round_medians_ms"])
                row.update({"trtprof_ms": mine["median_step_ms"][arm], "reference_ms": theirs[arm]["median_ms"],
                            "ratio": mine["median_step_ms"][arm] / theirs[arm]["median_ms"],
                            "round_ratio": est, "ci_low": low, "ci_high": high,
                            "rounds_trtprof": len(mine["round_medians_ms"][arm]),
                            "rounds_reference": len(theirs[arm]["round_medians_ms"]),
                            "ci_within_1_pm_3pct": bool(low >= 1 - TARGET and high <= 1 + TARGET)})
            rows.append(row)
    add_speedups(rows)
    return rows


def add_speedups(rows: list[dict]) -> None:
    """Per row, each side's own speedup over its fp32 arm at that batch (the verdict a user reads),
    and their ratio: the same verdict *and* magnitude means speedup_ratio ≈ 1."""
    base = {(r["model"], r["batch"]): r for r in rows if r["arm"] == "fp32" and "missing" not in r}
    for r in rows:
        b = base.get((r["model"], r["batch"]))
        if r["arm"] == "fp32" or b is None or "missing" in r:
            continue
        r["trtprof_speedup"] = b["trtprof_ms"] / r["trtprof_ms"]
        r["reference_speedup"] = b["reference_ms"] / r["reference_ms"]
        r["speedup_ratio"] = r["trtprof_speedup"] / r["reference_speedup"]


def markdown(doc: dict) -> str:
    lines = [f"# train-compare vs an independent PyTorch loop ({doc['device']}, {doc['date']})", "",
             f"plan: {doc['plan']}; torch {doc.get('torch')}; "
             + ("cuDNN autotuning on in both" if doc["device"] != "cpu" else "CPU: plumbing only, the ratios mean nothing"),
             "",
             "| model | batch | arm | trtprof ms | reference ms | ratio | round ratio [95% CI] | rounds (t/r) "
             "| CI within 1±3 % | speedup vs fp32: trtprof / reference |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for r in doc["rows"]:
        if "missing" in r:
            lines.append(f"| {r['model']} | {r['batch']} | {r['arm']} | – | – | – | {r['missing']} side missing | – | – | – |")
            continue
        lines.append(f"| {r['model']} | {r['batch']} | {r['arm']} | {r['trtprof_ms']:.3f} | {r['reference_ms']:.3f} | "
                     f"{r['ratio']:.4f} | {r['round_ratio']:.4f} [{r['ci_low']:.4f}, {r['ci_high']:.4f}] | "
                     f"{r['rounds_trtprof']}/{r['rounds_reference']} | {'yes' if r['ci_within_1_pm_3pct'] else 'NO'} | "
                     + (f"{r['trtprof_speedup']:.3f}× / {r['reference_speedup']:.3f}× |" if "speedup_ratio" in r else "– |"))
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out-dir", type=Path, required=True)
    mode = ap.add_mutually_exclusive_group()
    mode.add_argument("--quick", action="store_true", help="about half the device time of the default plan")
    mode.add_argument("--smoke", action="store_true", help="CPU, tiny net, two arms: checks the plumbing (CI)")
    ap.add_argument("--models", default=None, help="only these models (comma list)")
    ap.add_argument("--deadline-s", type=float, default=450.0, help="start no further model after this wall time")
    ap.add_argument("--total-s", type=float, default=570.0,
                    help="no process runs past this wall time (the device machine's 600 s per call)")
    args = ap.parse_args(argv)
    plan = SMOKE if args.smoke else QUICK if args.quick else FULL
    args.out_dir.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    import torch

    doc = {"device": torch.cuda.get_device_name(0) if plan.device == "cuda" else "cpu", "torch": torch.__version__,
           "date": time.strftime("%Y-%m-%d"), "plan": "smoke" if args.smoke else "quick" if args.quick else "full",
           "plan_settings": {"trtprof_budget_s": plan.budget_s, "reference_rounds": plan.ref_rounds,
                             "reference_steps": plan.ref_steps, "reference_warmup": plan.ref_warmup},
           "ci_method": "95% percentile bootstrap of median(round medians) ratio, sides resampled independently "
                        "(separate processes: rounds cannot be paired)", "rows": []}
    for name, factory, batches in plan.models:
        if args.models and name not in args.models.split(","):
            continue
        if time.perf_counter() - t0 > args.deadline_s:
            print(f"skipped {name}: past --deadline-s", flush=True)
            continue
        print(f"{name} batches {batches}", flush=True)
        doc["rows"] += run_model(name, factory, batches, plan, args.out_dir, ends_at=t0 + args.total_s)
        (args.out_dir / "table.json").write_text(json.dumps(doc, indent=1) + "\n")  # a cut run keeps its rows
        (args.out_dir / "table.md").write_text(markdown(doc))
    doc["wall_s"] = round(time.perf_counter() - t0, 1)
    (args.out_dir / "table.json").write_text(json.dumps(doc, indent=1) + "\n")
    (args.out_dir / "table.md").write_text(markdown(doc))
    print(markdown(doc), flush=True)
    print(f"total {doc['wall_s']} s", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
