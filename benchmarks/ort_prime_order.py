"""What the order of the shapes run ahead costs a compare worker's priming on onnxruntime-cuda (issue 42).

ONNX Runtime's Conv on cuDNN 9 keeps one shape's execution plans (conv.cc ``last_x_dims``) and builds them again
on the host at every change of shape. A worker runs every batch size's shapes ahead (``expect_shapes``: the
session must run each before its first graph capture), then primes each batch size (``prime_launch``: one
launch, ORT's capture). Run ahead at 1, 32, 256, then primed at 1, 32, 256, each arm builds six times; run ahead at
32, 256, 1 (``worker_loop.shapes_ahead``, the order since 65dd339), five; with a session per batch size (a worker
alone on the GPU, c1c3c09: ``_WorkerState.prime(..., alone=True)``) nothing runs ahead and each arm builds three
times, but opens two sessions more; ``own-parallel`` adds a prototype that makes each arm's first runs in a thread of
its own before priming (cuDNN's plans are built on the host), to size what that would save.

Each sample is a fresh process that loads the engines as a compare worker does (``_WorkerState.init``) and primes
them (``_WorkerState.prime``, TimingConfig defaults but the graph on), in one of the three ways; they take turns,
process after process, on one machine. Prints each order's median seconds per part (the shapes run ahead,
then per batch size) and of the whole priming, and new / old.

    python3 benchmarks/ort_prime_order.py ENGINE.onnx:fp32 ENGINE.onnx:tf32 ENGINE.onnx:fp16 [--reps 4]
        [--batch-sizes 1,32,256] [--json out.json]

This measures trtprof's own worker, so it imports trtprof.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

# the shapes run ahead in the old order (as the batch sizes are listed), in the new (shapes_ahead), or none: a session
# per batch size (``alone``: what a lone-loads worker does since c1c3c09)
# own-parallel: a session per batch size, each arm's first runs in a thread of its own before priming (a prototype)
# own-side-by-side: trtprof's own (since 2026-12-04g: ``_WorkerState.prime(..., side_by_side=...)``, what a life after
# life 0 does), given no life-0 lines (every line it sees goes to every arm, marked as not told apart)
ORDERS = ("first-first", "first-last", "own-sessions", "own-parallel", "own-side-by-side")


def child(order: str, engines: list[str], batch_sizes: list[int]) -> dict:
    from ort_block_costs import labelled_records, shapes_at

    from trtprof.measure import worker_loop
    from trtprof.measure.timing import TimingConfig

    if order == "first-first":
        worker_loop.shapes_ahead = lambda shapes: list(shapes)  # the order before 65dd339
    state = worker_loop._WorkerState(None)
    started = time.monotonic()
    state.init(labelled_records(engines), True)
    engines_s = time.monotonic() - started
    first = next(iter(state.runners.values()))
    batches = [(b, shapes_at(first, b)) for b in batch_sizes]
    profile = None
    if os.environ.get("PRIME_PROFILE"):  # where priming's seconds go, by function (stage primeprof)
        import cProfile
        profile = cProfile.Profile()
        profile.enable()
    started = time.monotonic()
    side_by_side_s = first_runs_side_by_side(state.runners, batches) if order == "own-parallel" else 0.0
    _, answer = state.prime(batches, 0, (0, 100), TimingConfig(cuda_graph=True), alone=order.startswith("own"),
                            side_by_side={} if order == "own-side-by-side" else None)
    if profile is not None:
        import io
        import pstats
        profile.disable()
        text = io.StringIO()
        pstats.Stats(profile, stream=text).sort_stats("tottime").print_stats(25)
        pstats.Stats(profile, stream=text).sort_stats("cumulative").print_stats(40)
        print(text.getvalue(), file=sys.stderr)
    parts = {**({"first runs side by side": round(side_by_side_s, 4)} if order == "own-parallel" else {}),
             **answer.get("seconds", {})}
    return {"order": order, "engines_s": round(engines_s, 4), "priming_s": round(time.monotonic() - started, 4),
            "parts": parts, "primed": answer.get("primed"), "notes": answer.get("notes")}


def first_runs_side_by_side(runners: dict, batches: list) -> float:
    """A PROTOTYPE, not trtprof's priming: each arm in a thread of its own, its sessions of their own opened and run
    once on zeros at every batch size (``prepare``: ORT's cuDNN plans built on the host, no graph captured, ORT
    releases the GIL); the captures then follow, one at a time, in ``_WorkerState.prime``. What ORT wrote meanwhile is
    not attributed to an arm here (the reason trtprof does not do this yet). Returns its seconds."""
    from concurrent.futures import ThreadPoolExecutor

    opted = [r for r in runners.values() if getattr(r, "primes_beside_others", False)]  # as priming's (a CPU runner: none)
    for runner in opted:
        runner.expect_shapes([shapes for _, shapes in batches], own_sessions=True)

    def arm(runner) -> None:
        for _, shapes in batches:
            runner.prepare(shapes)

    started = time.monotonic()
    with ThreadPoolExecutor(max(len(opted), 1)) as pool:
        list(pool.map(arm, opted))
    return time.monotonic() - started


def in_turns(script: str, kinds: tuple[str, ...], reps: int, argv: list[str]) -> dict[str, list[dict]]:
    """``reps`` fresh processes of ``script --child KIND ARGV`` per kind, each kind first in turn; the JSON line each
    printed last, by kind (printed as they come). A child that fails ends the run with its stderr's tail."""
    samples: dict[str, list[dict]] = {k: [] for k in kinds}
    for rep in range(reps):
        for kind in kinds[rep % len(kinds):] + kinds[:rep % len(kinds)]:
            done = subprocess.run([sys.executable, script, "--child", kind, *argv], capture_output=True, text=True,
                                  check=False)
            line = [x for x in done.stdout.splitlines() if x.startswith("{")]
            if done.returncode != 0 or not line:
                raise SystemExit(f"{kind}: rc {done.returncode}: {done.stderr[-2000:]}")
            samples[kind].append(json.loads(line[-1]))
            print(kind, json.dumps(samples[kind][-1]), flush=True)
    return samples


def command_line(doc: str, kinds: tuple[str, ...], reps: int, child_run) -> tuple[argparse.Namespace, dict] | None:
    """A fresh-processes benchmark's command line: ``ENGINE:LABEL… [--reps] [--batch-sizes] [--json]``. In a child
    (``--child KIND``) ``child_run(kind, engines, batch sizes)``'s dict printed as JSON, and None; else the arguments
    and ``in_turns``' samples."""
    ap = argparse.ArgumentParser(description=doc.splitlines()[0])
    ap.add_argument("engines", nargs="+")
    ap.add_argument("--reps", type=int, default=reps)
    ap.add_argument("--batch-sizes", default="1,32,256")
    ap.add_argument("--child", choices=kinds)
    ap.add_argument("--json")
    args = ap.parse_args()
    if args.child:
        print(json.dumps(child_run(args.child, args.engines, [int(b) for b in args.batch_sizes.split(",")])))
        return None
    script = sys.modules[child_run.__module__].__file__
    return args, in_turns(script, kinds, args.reps, ["--batch-sizes", args.batch_sizes, *args.engines])


def main() -> None:
    parsed = command_line(__doc__, ORDERS, 4, child)  # PRIME_PROFILE=1: cProfile's tables of the priming on stderr
    if parsed is None:
        return
    args, samples = parsed
    medians = {}
    for order, runs in samples.items():
        parts = {k: statistics.median(r["parts"][k] for r in runs) for k in runs[0]["parts"]}
        medians[order] = {"priming_s": statistics.median(r["priming_s"] for r in runs), **parts}
        print(f"{order}: median of {len(runs)}: " + ", ".join(f"{k} {v:.3f} s" for k, v in medians[order].items()))
    old = medians["first-first"]["priming_s"]
    labels = {"first-last": "first batch size's shapes run ahead last", "own-sessions": "a session per batch size",
              "own-parallel": "a session per batch size, the arms' first runs side by side (prototype)",
              "own-side-by-side": "a session per batch size, the arms' first runs side by side (trtprof's, 12-04g)"}
    for order, label in labels.items():
        if old > 0:
            new = medians[order]["priming_s"]
            print(f"priming, {label} / shapes run ahead first: {new / old:.3f} ({new:.2f} s / {old:.2f} s)")
    if args.json:
        Path(args.json).write_text(json.dumps({"samples": samples, "medians": medians}, indent=1))


if __name__ == "__main__":
    main()
