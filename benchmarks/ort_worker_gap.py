"""Why compare's worker processes measure onnxruntime-cuda runs shorter than everything else (issue 42).

On the H200 (2026-12-03, `results/ort_cuda-H200-2026-12-03c/lease4-inproc-*`) ResNet-50 at batch 1 measured
fp16 0.751 / fp32 2.143 ms of GPU compute per run in compare's worker processes and 0.831 / 2.200 ms with
`--in-process`, where the independent ORT loop, `time_device` alone and compare's interleaved blocks in one process
all agree with the in-process numbers. What a worker has that those have not: it is a child process, and it primes
(`timing.prime_launch`, every arm at every batch size) side by side with five other workers, inside a
`LaunchKeeper` whose primed state its blocks then use. This script takes those apart, one factor a variant:

- ``parent``: this process loads the engines, primes them inside a LaunchKeeper, times them (no child);
- ``child``: one child process does the same (a worker's process, nothing beside it);
- ``side_by_side``: N children load and prime at once (``--workers``, compare's 6), then child 0 times, then the
  last child, the others idle (compare's loads take turns);
- ``one_by_one``: N children loaded, primed one after another, then timed as ``side_by_side``;
- ``unprimed``: one child that times without priming (its state set up by the first timed block);
- ``parent_last``: the parent again, after every child has gone.
- ``serial``: N children whose lives do not overlap (each spawned after the previous exited), each loading,
  priming and timing alone: whether loads run that way read what a lone process (the reference) reads, where
  ``side_by_side``'s children read the short-gap state of `results/ort_cuda-H200-2026-12-03d/` (the design
  question of issue 42's batch-1 gap). ``--variants`` picks variants (default: all).

Each variant also gives, per arm, CUPTI's view of a loop of graph replays: per replay the GPU span (first kernel's
start to last kernel's end) and busy time, beside the events' compute median of the same loop.

Each timing: ``time_device`` continuous (50 warm-up, 600 iterations) and compare-like blocks (``ort_block_costs.
run_blocks``, kept state), compute medians per arm. This imports trtprof (it measures trtprof's loop); the
independent reference stays ``reference_ort_iobinding.py``.

    python3 benchmarks/ort_worker_gap.py a.fp32.onnx:fp32 a.fp16.onnx:fp16 [--batch 1] [--workers 6]
        [--variants serial,side_by_side] [--json out.json]
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
from contextlib import ExitStack
from pathlib import Path

sys.path[:0] = [str(Path(__file__).resolve().parent), str(Path(__file__).resolve().parents[1])]


class Engines:
    """The engines of one process, loaded as compare's workers load them, and what it does with them."""

    def __init__(self, items: list[str], batch: int) -> None:
        from ort_block_costs import labelled_records, shapes_at

        from trtprof.measure.bench import load_runner
        from trtprof.measure.kept_launch import LaunchKeeper
        from trtprof.model.inputs import make_inputs

        self.runners = {label: load_runner(record, log_warnings=True)
                        for label, record in labelled_records(items).items()}
        first = next(iter(self.runners.values()))
        self.feeds = make_inputs(first.inputs, shapes_at(first, batch), seed=0)
        self.stack = ExitStack()
        self.stack.enter_context(LaunchKeeper())  # the worker's keeper: priming's state serves the blocks

    def prime(self) -> str:
        from trtprof.measure.timing import TimingConfig, prime_launch

        for runner in self.runners.values():
            prime_launch(runner, self.feeds, TimingConfig(cuda_graph=True))
        return "primed"

    def time(self) -> dict:
        from ort_block_costs import continuous_compute, pooled_compute, run_blocks

        # the blocks run inside this process' keeper already (keep=False: no second one)
        return {"continuous": continuous_compute(self.runners, self.feeds),
                "blocks": pooled_compute(run_blocks(self.runners, self.feeds, 8, keep=False)),
                "kernels": self.kernels()}

    def kernels(self, iterations: int = 50) -> dict:
        """Per arm, the GPU work of ``iterations`` timed runs (CUPTI, cupti-python): ``top``, ms and launches per run
        by kernel name (two processes' kernel choices set side by side); ``replay``, per graph replay (its kernels
        share the launch's correlation id) the median GPU span (first kernel's start to last kernel's end) and busy
        time (kernel durations summed), beside ``events``, the median compute of the same loop by CUDA events: the
        span tells the GPU's own time for a replay, so an event time above it is time outside the replay. {} without
        cupti-python."""
        import statistics
        from collections import defaultdict

        from trtprof.layers.ort_kernels import capture, demangle, import_cupti
        from trtprof.measure.timing import TimingConfig, time_device

        try:
            cupti = import_cupti()
        except Exception:  # noqa: BLE001 - the kernel list is optional here
            return {}
        out = {}
        for name, runner in self.runners.items():
            with capture(cupti) as log:
                samples = time_device(runner, self.feeds, TimingConfig(warmup=0, iterations=iterations, copies=False,
                                                                       cuda_graph=True))
            replays: dict = defaultdict(list)
            for w in log.work:
                replays[w.correlation].append(w)
            runs = [ws for ws in replays.values() if len(ws) > 10]  # graph replays, not single copies or memsets
            ms: dict = defaultdict(float)
            calls: dict = defaultdict(int)
            for w in log.work:
                ms[demangle(w.name)[:90]] += w.duration_ns / 1e6 / max(len(runs), 1)
                calls[demangle(w.name)[:90]] += 1
            spans = sorted((max(w.end_ns for w in ws) - min(w.start_ns for w in ws)) / 1e6 for ws in runs)
            out[name] = {
                "replay": {"n": len(runs),
                           "span_p10_p90_ms": [round(spans[len(spans) // 10], 4), round(spans[-len(spans) // 10 - 1], 4)]
                           if runs else None,
                           "span_ms": round(statistics.median((max(w.end_ns for w in ws) - min(w.start_ns for w in ws)) / 1e6
                                                              for ws in runs), 4) if runs else None,
                           "busy_ms": round(statistics.median(sum(w.duration_ns for w in ws) / 1e6 for ws in runs), 4)
                           if runs else None,
                           "kernels": statistics.median(len(ws) for ws in runs) if runs else None,
                           "events_ms": round(float(statistics.median(samples.stages["compute_ms"])), 4)},
                "top": {k: [round(v, 4), round(calls[k] / max(len(runs), 1), 2)] for k, v in
                        sorted(ms.items(), key=lambda kv: -kv[1])[:25]}}
        return out

    def close(self) -> None:
        self.stack.close()
        for runner in self.runners.values():
            runner.close()


def child_main(items: list[str], batch: int) -> None:
    """A child: one command a line on stdin (prime, time, exit), one JSON answer a line on stdout."""
    engines = Engines(items, batch)
    print(json.dumps("loaded"), flush=True)
    for line in sys.stdin:
        command = line.strip()
        if command == "exit":
            break
        answer = engines.prime() if command == "prime" else engines.time() if command == "time" else f"? {command}"
        print(json.dumps(answer), flush=True)
    engines.close()


class Child:
    def __init__(self, items: list[str], batch: int) -> None:
        self.proc = subprocess.Popen([sys.executable, __file__, "--child", "--batch", str(batch), *items],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)

    def send(self, command: str) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(command + "\n")
        self.proc.stdin.flush()

    def answer(self):
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        if not line:
            raise RuntimeError(f"child exited ({self.proc.wait()})")
        return json.loads(line)

    def ask(self, command: str):
        self.send(command)
        return self.answer()

    def close(self) -> None:
        try:
            self.send("exit")
        except OSError:
            pass
        self.proc.wait(timeout=60)


def variant_children(items: list[str], batch: int, workers: int, prime: bool, together: bool = True) -> dict:
    """``workers`` children loaded and (``prime``) primed at once (``together``) or one after another; child 0
    times, then the last one."""
    children = [Child(items, batch) for _ in range(workers)]
    try:
        for c in children:
            c.answer()  # "loaded"
        if prime and together:
            for c in children:
                c.send("prime")
            for c in children:
                c.answer()
        elif prime:
            for c in children:
                c.ask("prime")
        out = {"child0": children[0].ask("time")}
        if workers > 1:
            out[f"child{workers - 1}"] = children[-1].ask("time")
        return out
    finally:
        for c in children:
            c.close()


def variant_serial(items: list[str], batch: int, workers: int) -> dict:
    """``workers`` children one after another, each alone from its start to its exit: load, prime, time, exit."""
    out = {}
    for i in range(workers):
        child = Child(items, batch)
        try:
            child.answer()  # "loaded"
            child.ask("prime")
            out[f"child{i}"] = child.ask("time")
        finally:
            child.close()
    return out


VARIANTS = ("parent", "child", "side_by_side", "one_by_one", "unprimed", "serial", "parent_last")


def in_parent(items: list[str], batch: int) -> dict:
    parent = Engines(items, batch)
    try:
        parent.prime()
        return {"self": parent.time()}
    finally:
        parent.close()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("engines", nargs="+", help="ENGINE.onnx:LABEL (files trtprof built for onnxruntime-cuda)")
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--workers", type=int, default=6)
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--variants", default=",".join(VARIANTS), help="comma-separated, run in this order")
    ap.add_argument("--json")
    args = ap.parse_args()
    if args.child:
        child_main(args.engines, args.batch)
        return
    result = {}
    runs = {
        "parent": lambda: in_parent(args.engines, args.batch),
        "child": lambda: variant_children(args.engines, args.batch, 1, prime=True),
        "side_by_side": lambda: variant_children(args.engines, args.batch, args.workers, prime=True),
        "one_by_one": lambda: variant_children(args.engines, args.batch, args.workers, prime=True, together=False),
        "unprimed": lambda: variant_children(args.engines, args.batch, 1, prime=False),
        "serial": lambda: variant_serial(args.engines, args.batch, args.workers),
        # the parent again, last: does the GPU keep what the children did?
        "parent_last": lambda: in_parent(args.engines, args.batch),
    }
    asked = args.variants.split(",")
    for i, variant in enumerate(asked):
        again = asked[:i].count(variant)  # a variant asked again: "serial#2"
        result[variant if not again else f"{variant}#{again + 1}"] = runs[variant]()
    for variant, per in result.items():
        for who, got in per.items():
            for how in ("continuous", "blocks"):
                text = " ".join(f"{name} {ms:.4f}" for name, ms in got[how].items())
                print(f"worker-gap b{args.batch} {variant:12s} {who:7s} {how:10s} compute ms: {text}", flush=True)
            for name, kernels in got.get("kernels", {}).items():
                r = kernels["replay"]
                print(f"worker-gap b{args.batch} {variant:12s} {who:7s} replay {name}: {r['n']} replays of "
                      f"{r['kernels']} kernels, GPU span {r['span_ms']} ms, busy {r['busy_ms']} ms, events "
                      f"{r['events_ms']} ms", flush=True)
                top = "; ".join(f"{k[:50]} {v[0]:.4f} ms ×{v[1]:g}" for k, v in list(kernels["top"].items())[:3])
                print(f"worker-gap b{args.batch} {variant:12s} {who:7s} kernels {name}: {top}", flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
