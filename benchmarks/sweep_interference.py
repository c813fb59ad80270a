"""Does a busy neighbour change a sweep cell's numbers? The same cell alone, beside a busy neighbour, alone again.

The cell and the neighbour are real sweep cells (``trtprof compare`` processes started by
``trtprof.sweep``, pinned as the local executor pins them): on a GPU host the cell runs on GPU 0 with
half the cores and the neighbour on GPU 1 with the other half; with ``--device cpu`` the two share
the host as two CPU workers do (half the cores each). Printed per precision: the median latency
alone (twice: before and after), beside the neighbour, and the ratio busy / alone; the noise floor is
how much the two alone runs differ. ``--out FILE`` writes the figures for ``trtprof sweep
--interference FILE``, which warns about cells that ran beside others when the ratio exceeded the
noise floor. Each phase is a whole cell (on a GPU host about a minute); a run cut after the busy phase
leaves ``OUT.partial.json`` with both records, and ``--finish`` (same arguments, same machine) runs only
"alone again" and writes ``OUT``.

    python benchmarks/sweep_interference.py MODEL --backend torch --batch-size 64 \\
        --precisions fp32,fp16 --time-budget-s 4 --out benchmarks/results/sweep_interference-…json
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

PARTIAL_SCHEMA = "trtprof.sweep_interference.partial/2"
NOISE_MIN = 0.01  # below ±1 % the compare's own stopping target cannot tell anything apart anyway


def medians(record: dict[str, Any]) -> dict[str, float]:
    """precision → median ms, from a compare cell's summary rows."""
    out: dict[str, float] = {}
    for row in record.get("summary") or []:
        if row.get("baseline_median_ms") is not None:
            out[row["baseline"]] = row["baseline_median_ms"]
        if row.get("candidate_median_ms") is not None:
            out[row["candidate"]] = row["candidate_median_ms"]
    return out


def speedups(record: dict[str, Any]) -> dict[str, float]:
    return {f"{r['candidate']} vs {r['baseline']}": r["speedup"] for r in record.get("summary") or []
            if r.get("speedup") is not None}


def time_to_first_round_s(record: dict[str, Any]) -> float:
    """Seconds from process start to the first timed round: the cell's wall time minus its timed blocks
    (process start, engine loading, warmup; the accuracy run and writing the JSON count as well,
    which only makes the neighbour start earlier)."""
    results = (record.get("result") or {}).get("results") or []
    timed = sum(float(r.get("span_s") or 0) for r in results)
    return max(0.0, float(record["wall_s"]) - timed)


def figures(alone1: dict[str, Any], busy: dict[str, Any], alone2: dict[str, Any]) -> dict[str, Any]:
    a1, b, a2 = medians(alone1), medians(busy), medians(alone2)
    per: dict[str, Any] = {}
    for p in a1:
        if p in b and p in a2:
            alone = statistics.fmean([a1[p], a2[p]])
            per[p] = {"alone_before_ms": a1[p], "busy_ms": b[p], "alone_after_ms": a2[p],
                      "busy_over_alone": b[p] / alone, "alone_after_over_before": a2[p] / a1[p]}
    noise = max([abs(v["alone_after_over_before"] - 1) for v in per.values()] + [NOISE_MIN])
    worst = max((v["busy_over_alone"] - 1 for v in per.values()), key=abs, default=0.0)
    return {"per_precision": per, "noise_floor": noise, "worst_slowdown": worst, "above_noise": abs(worst) > noise,
            "speedup_alone": speedups(alone1), "speedup_busy": speedups(busy), "speedup_alone_after": speedups(alone2)}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("model", type=Path)
    ap.add_argument("--backend", default="auto")
    ap.add_argument("--batch-size", type=int, default=1)
    ap.add_argument("--neighbour-batch-size", type=int, default=None, help="default: the cell's batch size")
    ap.add_argument("--precisions", default="fp32,fp16")
    ap.add_argument("--time-budget-s", type=float, default=4.0)
    ap.add_argument("--round-iterations", type=int, default=None)
    ap.add_argument("--device", choices=("gpu", "cpu"), default=None, help="default: gpu when NVML sees 2+ GPUs")
    ap.add_argument("--engines", type=Path, default=Path("engines"))
    ap.add_argument("--out", type=Path, default=None, help="JSON for trtprof sweep --interference")
    ap.add_argument("--finish", action="store_true",
                    help="a run cut after its busy phase left OUT.partial.json: run only 'alone again' (same "
                         "arguments, the same machine) and write OUT from the three phases")
    args = ap.parse_args(argv)
    if args.finish and not args.out:
        ap.error("--finish needs --out (the partial file is OUT.partial.json)")

    from trtprof.util.files import now_iso
    from trtprof.system.environment import host
    from trtprof.sweep.cell import build_model, run_cell
    from trtprof.sweep.local import local_slots, visible_gpus
    from trtprof.sweep.spec import make_spec

    gpus = visible_gpus()
    device = args.device or ("gpu" if len(gpus) >= 2 else "cpu")
    slots = local_slots("all", None) if device == "gpu" else local_slots("none", 2)
    if len(slots) < 2:
        print(f"need two {device} workers here, have {len(slots)}", file=sys.stderr)
        return 2
    target, neighbour_slot = slots[0], slots[1]
    nb = args.neighbour_batch_size or args.batch_size
    sweep = {"backend": args.backend, "precisions": args.precisions, "batch_sizes": sorted({args.batch_size, nb}),
             "time_budget_s": args.time_budget_s, "engines": str(args.engines.resolve())}
    if args.round_iterations:
        sweep["round_iterations"] = args.round_iterations
    spec = make_spec({"sweep": sweep, "models": [{"path": str(args.model.resolve())}]}, base=Path.cwd())
    by_batch = {c.batch_size: c for c in spec.cells()}
    cell = by_batch[args.batch_size]
    # the neighbour keeps measuring for much longer than the cell: it is busy the whole time the cell is
    busy_spec = make_spec({"sweep": {**sweep, "time_budget_s": args.time_budget_s * 20 + 60, "target_ci": 1e-6},
                           "models": [{"path": str(args.model.resolve())}]}, base=Path.cwd())
    neighbour_cell = {c.batch_size: c for c in busy_spec.cells()}[nb]

    print(f"device {device}: cell on {target.name} {target.gpu.get('name') if target.gpu else ''} cores "
          f"{target.cpus}; neighbour on {neighbour_slot.name} cores {neighbour_slot.cpus}", flush=True)
    built = build_model(cell, target)
    if not built["ok"]:
        print(f"build failed: {built['error']}", file=sys.stderr)
        return 1
    t0 = time.perf_counter()
    partial = args.out.with_name(args.out.stem + ".partial.json") if args.out else None
    what = {"model": str(args.model.resolve()), "backend": args.backend, "batch_size": args.batch_size,
            "neighbour_batch_size": nb, "precisions": args.precisions, "time_budget_s": args.time_budget_s,
            "round_iterations": args.round_iterations, "device": device, "target_slot": target.name,
            "neighbour_slot": neighbour_slot.name}
    if args.finish:
        assert partial is not None
        alone1, busy, delay = resume_partial(partial, what)
        print(f"finishing {partial}: alone {medians(alone1)}, busy {medians(busy)} (measured {alone1.get('started')})",
              flush=True)
    else:
        alone1, busy, delay = first_phases(cell, neighbour_cell, target, neighbour_slot)
        if alone1 is None or busy is None:
            return 1
        if partial is not None:  # a run cut off before "alone again" (a time limit) still leaves what it measured
            partial.parent.mkdir(parents=True, exist_ok=True)
            partial.write_text(json.dumps({
                "schema": PARTIAL_SCHEMA, "created": now_iso(), "host": host(), "device": device,
                "alone_ms": medians(alone1), "busy_ms": medians(busy), "neighbour_started_before_cell_s": round(delay, 2),
                "arguments": what, "records": {"alone": alone1, "busy": busy},
                "note": "no 'alone again' phase yet: no noise floor; not for --interference (finish it with --finish)"},
                indent=1, default=str) + "\n")
    alone2 = run_cell(cell, target, build=False)
    print(f"alone:  {alone2['status']} in {alone2['wall_s']:.1f} s {medians(alone2)}", flush=True)
    if alone2["status"] != "ok":
        print(alone2.get("error"), file=sys.stderr)
        return 1
    fig = figures(alone1, busy, alone2)
    if args.finish:
        fig["finished_later"] = {"alone_again_started": alone2.get("started"),
                                 "note": "alone and busy came from an earlier run's partial file (--finish)"}
    fig.update({"device": target.gpu.get("name") if target.gpu else host().get("cpu"),
                "cell": {"model": cell.model.stem, "batch_size": cell.batch_size, "backend": cell.model.backend,
                         "precisions": list(cell.model.precisions), "time_budget_s": args.time_budget_s},
                "neighbour": {"batch_size": nb, "slot": neighbour_slot.to_json(), "started_before_cell_s": round(delay, 2)},
                "target_slot": target.to_json(), "seconds": round(time.perf_counter() - t0, 1)})
    print()
    print(f"{'precision':<10} {'alone ms':>10} {'busy ms':>10} {'alone again':>12} {'busy/alone':>11}")
    for p, v in fig["per_precision"].items():
        print(f"{p:<10} {v['alone_before_ms']:>10.4g} {v['busy_ms']:>10.4g} {v['alone_after_ms']:>12.4g} "
              f"{v['busy_over_alone']:>11.4f}")
    print(f"interference ratio (worst busy/alone − 1): {fig['worst_slowdown']:+.2%}; noise floor (alone vs alone "
          f"again, at least {NOISE_MIN:.0%}): ±{fig['noise_floor']:.2%}; above the noise: {fig['above_noise']}")
    print(f"speedups alone {fig['speedup_alone']}, busy {fig['speedup_busy']}, alone again {fig['speedup_alone_after']}")
    if args.out:
        data = {"schema": "trtprof.sweep_interference/1", "created": now_iso(), "host": host(), device: fig,
                "command": [sys.executable, *sys.argv]}
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(data, indent=1) + "\n")
        print(f"interference: {args.out}")
    return 0


def resume_partial(partial: Path, what: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any], float]:
    """The alone and busy records an earlier run left, checked to be the same measurement."""
    if not partial.is_file():
        raise SystemExit(f"sweep_interference: {partial}: no partial file to finish")
    data = json.loads(partial.read_text())
    if data.get("schema") != PARTIAL_SCHEMA or "records" not in data:
        raise SystemExit(f"sweep_interference: {partial}: not a partial file this version can finish")
    differs = {k: (data["arguments"].get(k), v) for k, v in what.items() if data["arguments"].get(k) != v}
    if differs:
        raise SystemExit(f"sweep_interference: {partial}: measured with other arguments: "
                         + ", ".join(f"{k} {a!r} there, {b!r} now" for k, (a, b) in differs.items()))
    return data["records"]["alone"], data["records"]["busy"], float(data["neighbour_started_before_cell_s"])


def first_phases(cell, neighbour_cell, target, neighbour_slot):
    """Alone, then beside a neighbour that keeps measuring on the other worker."""
    from trtprof.sweep.cell import Interrupted, Processes, run_cell

    alone1 = run_cell(cell, target, build=False)
    print(f"alone:  {alone1['status']} in {alone1['wall_s']:.1f} s {medians(alone1)}", flush=True)
    if alone1["status"] != "ok":
        print(alone1["error"], file=sys.stderr)
        return None, None, 0.0

    procs = Processes()
    neighbour_window: dict[str, float] = {}

    def keep_busy() -> None:
        neighbour_window["start"] = time.time()
        while not procs.stopping.is_set():
            try:
                run_cell(neighbour_cell, neighbour_slot, processes=procs, build=False)
            except Interrupted:
                break
        neighbour_window["end"] = time.time()

    thread = threading.Thread(target=keep_busy, daemon=True)
    thread.start()
    delay = time_to_first_round_s(alone1) + 1.0  # the neighbour is measuring before the cell starts
    time.sleep(delay)
    busy = run_cell(cell, target, build=False)
    procs.stop_all()
    thread.join()
    print(f"busy:   {busy['status']} in {busy['wall_s']:.1f} s {medians(busy)} (neighbour started {delay:.1f} s "
          f"before)", flush=True)
    if busy["status"] != "ok":
        print(busy.get("error"), file=sys.stderr)
        return alone1, None, delay
    return alone1, busy, delay


if __name__ == "__main__":
    sys.exit(main())
