"""Where a compare block's seconds go on onnxruntime-cuda, and what keeping the device state between blocks saves
(issue 42: the ResNet-50 default run took 89 s against a 60-s target; per batch size about 0.15–0.18 s of each
block was neither warm-up nor timed iterations, at batch 1 as at batch 32).

It loads the given engines as compare's workers do (``measure.bench.load_runner``) in this one process, then per
batch size times blocks of every arm in rounds, as compare's rounds do (``interleave.measure_block``, ROUND_WARMUP
warm-up calls, iterations sized to ~0.1 s), twice: each block setting up and releasing its own state (``fresh``,
trtprof before issue 42's change) and inside a ``kept_launch.LaunchKeeper`` (``kept``, what a worker does now).
Per mode and arm: the wall per block, its set-up, warm-up and timed seconds, the overhead (wall − warm-up − timed),
and the median latency; the kept/fresh ratio of the medians must be 1 within the blocks' spread, the wall ratio
is the saving. Then a cProfile of the fresh blocks at the middle batch size and the NVML calls' own cost.

    python3 benchmarks/ort_block_costs.py ENGINE.onnx:fp32 ENGINE.onnx:tf32 ENGINE.onnx:fp16 [--batch-sizes 1,32,256]
        [--blocks 8] [--json out.json]

An engine is a file trtprof built (``trtprof build --backend onnxruntime-cuda``): the record beside it is read
through trtprof's cache. This script measures trtprof's own loop, so it imports trtprof (the independent
references are ``reference_ort_iobinding.py`` and ``reference_resnet50_graph.py``).
"""
from __future__ import annotations

import argparse
import cProfile
from contextlib import nullcontext
import io
import json
import pstats
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def record_for(path: Path):
    from trtprof.engines.cache import META_SUFFIX, EngineRecord

    for meta in path.parent.glob(f"*{META_SUFFIX}"):
        record = EngineRecord.read(meta)
        if Path(record.artifact_path).resolve() == path.resolve():
            return record
    raise SystemExit(f"{path}: no trtprof engine record beside it")


def labelled_records(items) -> dict:
    """``ENGINE.onnx:LABEL`` arguments as {label: the engine's record} (``record_for``), in the given order."""
    out = {}
    for item in items:
        path, label = item.rsplit(":", 1)
        out[label] = record_for(Path(path))
    return out


def shapes_at(runner, batch: int) -> dict:
    """The runner's input shapes at ``batch``: every dim that is not a fixed size (named, unknown, -1) set to it."""
    return {s.name: tuple(batch if not isinstance(d, int) or d < 0 else d for d in s.shape) for s in runner.inputs}


def run_blocks(runners, feeds, blocks, keep):
    from trtprof.measure.interleave import ROUND_WARMUP, iterations_for, measure_block, RoundPlan
    from trtprof.measure.kept_launch import LaunchKeeper
    from trtprof.measure.timing import TimingConfig

    plan = RoundPlan(cuda_graph=True)
    out = {name: [] for name in runners}
    with (LaunchKeeper() if keep else nullcontext()):
        iters = {}
        for name, runner in runners.items():  # a warm block per arm, as a load's warm-up
            s = measure_block(runner, feeds, TimingConfig(warmup=10, warmup_ms=100, iterations=5, cuda_graph=True))
            iters[name] = iterations_for(float(statistics.median(s.latency_ms)), plan)
        for j in range(blocks):
            order = list(runners) if j % 2 == 0 else list(runners)[::-1]
            for name in order:
                config = TimingConfig(warmup=ROUND_WARMUP, iterations=iters[name], cuda_graph=True)
                t0 = time.perf_counter()
                s = measure_block(runners[name], feeds, config)
                wall = time.perf_counter() - t0
                out[name].append({"wall_s": wall, "setup_s": s.setup_s, "warmup_s": s.warmup_s, "span_s": s.span_s,
                                  "median_ms": float(statistics.median(s.latency_ms)), "n": s.n,
                                  "compute_ms": [float(x) for x in s.stages["compute_ms"]]})
    return out


def summary(blocks):
    mean = lambda k: statistics.fmean(b[k] for b in blocks)  # noqa: E731
    return {"wall_s": mean("wall_s"), "setup_s": mean("setup_s"), "warmup_s": mean("warmup_s"),
            "span_s": mean("span_s"), "overhead_s": mean("wall_s") - mean("warmup_s") - mean("span_s"),
            "median_ms": statistics.median(b["median_ms"] for b in blocks),
            "medians_ms": [round(b["median_ms"], 4) for b in blocks]}


def prime_costs(runners, batches, accuracy_first: bool) -> dict:
    """Seconds of ``timing.prime_launch`` per arm and batch size in this process (its first runs at each shape,
    unless the accuracy pass's ``infer`` ran first), inside a LaunchKeeper as in a worker, and where they go."""
    from trtprof.measure.kept_launch import LaunchKeeper
    from trtprof.measure.timing import TimingConfig, prime_launch
    from trtprof.model.inputs import make_inputs

    first = next(iter(runners.values()))
    feeds = {}
    for batch in batches:
        shapes = shapes_at(first, batch)
        feeds[batch] = make_inputs(first.inputs, shapes, seed=0)
    out: dict = {"accuracy_first": accuracy_first, "accuracy_s": {}, "prime_s": {}}
    if accuracy_first:
        for batch in batches:
            for name, runner in runners.items():
                t0 = time.perf_counter()
                runner.infer(feeds[batch])
                out["accuracy_s"][f"{name} b{batch}"] = round(time.perf_counter() - t0, 4)
    prof = cProfile.Profile()
    with LaunchKeeper():
        for batch in batches:
            for name, runner in runners.items():
                t0 = time.perf_counter()
                prof.enable()
                prime_launch(runner, feeds[batch], TimingConfig(cuda_graph=True))
                prof.disable()
                out["prime_s"][f"{name} b{batch}"] = round(time.perf_counter() - t0, 4)
    text = io.StringIO()
    pstats.Stats(prof, stream=text).sort_stats("tottime").print_stats(25)
    print(f"prime ({'after the accuracy pass' if accuracy_first else 'alone'}): accuracy {out['accuracy_s']} "
          f"(sum {sum(out['accuracy_s'].values()):.2f} s); prime {out['prime_s']} (sum {sum(out['prime_s'].values()):.2f} s)",
          flush=True)
    print(text.getvalue()[-6000:], flush=True)
    return out


def regime_variants(runners, batches, blocks: int, prime: list[int], idle: int) -> dict:
    """``regime`` after what a compare worker has that a plain process has not: every arm first run and captured at
    the ``prime`` batch sizes (its arena grown, its graphs kept: compare primes every batch size before batch 1),
    and ``idle`` other processes holding a CUDA context on the GPU (compare's other workers)."""
    import subprocess

    from trtprof.measure.timing import TimingConfig, prime_launch
    from trtprof.model.inputs import make_inputs

    first = next(iter(runners.values()))
    for batch in prime:
        feeds = make_inputs(first.inputs, shapes_at(first, batch), seed=0)
        for runner in runners.values():
            prime_launch(runner, feeds, TimingConfig(cuda_graph=True))
    hold = "from cuda.bindings import runtime as rt; rt.cudaFree(0); import time; time.sleep(300)"
    procs = [subprocess.Popen([sys.executable, "-c", hold]) for _ in range(idle)]
    try:
        time.sleep(3 if idle else 0)
        return regime(runners, batches, blocks, tag=f"primed{prime} idle{idle}")
    finally:
        for proc in procs:
            proc.kill()


def continuous_compute(runners, feeds) -> dict:
    """Per arm, the median compute ms of ``time_device`` run continuously: 50 warm-up and 600 timed iterations."""
    from trtprof.measure.timing import TimingConfig, time_device

    got = {}
    for name, runner in runners.items():
        s = time_device(runner, feeds, TimingConfig(warmup=50, iterations=600, copies=True, cuda_graph=True))
        got[name] = round(float(statistics.median(s.stages["compute_ms"])), 4)
    return got


def pooled_compute(blocks) -> dict:
    """Per arm, the median compute ms over every iteration of ``run_blocks``' blocks."""
    return {name: round(float(statistics.median([x for b in bl for x in b["compute_ms"]])), 4)
            for name, bl in blocks.items()}


def regime(runners, batches, blocks: int, tag: str = "") -> dict:
    """Compute medians of one arm timed two ways in this process (issue 42: at every batch size compare's arms
    measured ~0.1 ms a run below both the independent queued ORT loop and ``time_device`` alone in a plain process):
    ``continuous`` (``time_device``, 50 warm-up and 600 timed iterations, as ort_b1_gap.py times it), and
    ``blocks`` (compare's rounds: every arm's blocks interleaved, ROUND_WARMUP warm-up calls and ~0.1-s blocks,
    inside a LaunchKeeper, ``run_blocks``), then ``continuous`` again (drift)."""
    from trtprof.model.inputs import make_inputs

    first = next(iter(runners.values()))
    out: dict = {}
    for batch in batches:
        feeds = make_inputs(first.inputs, shapes_at(first, batch), seed=0)

        before = continuous_compute(runners, feeds)
        got = run_blocks(runners, feeds, blocks, keep=True)
        pooled = pooled_compute(got)
        firsts = {name: round(float(statistics.median([b["compute_ms"][0] for b in bl])), 4) for name, bl in got.items()}
        after = continuous_compute(runners, feeds)
        out[batch] = {"continuous_before": before, "blocks": pooled, "blocks_first_iteration": firsts,
                      "continuous_after": after, "iterations_per_block": {n: bl[0]["n"] for n, bl in got.items()}}
        for name in runners:
            print(f"regime{' ' + tag if tag else ''} b{batch} {name}: continuous {before[name]:.4f} / {after[name]:.4f} ms | blocks {pooled[name]:.4f} "
                  f"ms (first iteration of a block {firsts[name]:.4f}) | blocks/continuous "
                  f"{pooled[name] / ((before[name] + after[name]) / 2):.4f}", flush=True)
    return out


def nvml_costs(repeat=20):
    from trtprof.system import nvml

    out = {}
    for name, fn in {"gpu_state": lambda: nvml.gpu_state(0), "watch_gpu_empty": lambda: _watch(nvml)}.items():
        t0 = time.perf_counter()
        for _ in range(repeat):
            fn()
        out[name + "_ms"] = (time.perf_counter() - t0) / repeat * 1e3
    with nvml.held():
        t0 = time.perf_counter()
        for _ in range(repeat):
            nvml.gpu_state(0)
        out["gpu_state_held_ms"] = (time.perf_counter() - t0) / repeat * 1e3
    return out


def _watch(nvml):
    with nvml.watch_gpu(0):
        pass


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("engines", nargs="+", help="ENGINE.onnx:LABEL")
    ap.add_argument("--batch-sizes", default="1,32,256")
    ap.add_argument("--blocks", type=int, default=8)
    ap.add_argument("--json")
    ap.add_argument("--prime", choices=("alone", "after-accuracy"),
                    help="instead: what compare's priming costs in this fresh process, per arm and batch size, with "
                         "a cProfile (after-accuracy: the accuracy pass's host-in/host-out runs first, as load 0's worker)")
    ap.add_argument("--regime", action="store_true",
                    help="instead: compute medians timed continuously (time_device) vs in compare's interleaved blocks")
    ap.add_argument("--prime-first", default="", help="--regime: prime every arm at these batch sizes first")
    ap.add_argument("--idle-contexts", type=int, default=0, help="--regime: other processes holding a CUDA context")
    args = ap.parse_args()
    from trtprof.measure.bench import load_runner
    from trtprof.model.inputs import make_inputs

    runners = {}
    for label, record in labelled_records(args.engines).items():
        t0 = time.perf_counter()
        runners[label] = load_runner(record)
        print(f"load {label}: {time.perf_counter() - t0:.3f} s", flush=True)
    first = next(iter(runners.values()))
    batches = [int(b) for b in args.batch_sizes.split(",")]
    if args.regime:
        prime = [int(b) for b in args.prime_first.split(",")] if args.prime_first else []
        result = (regime_variants(runners, batches, args.blocks, prime, args.idle_contexts)
                  if prime or args.idle_contexts else regime(runners, batches, args.blocks))
        if args.json:
            Path(args.json).write_text(json.dumps(result, indent=1))
        return
    if args.prime:
        result = prime_costs(runners, batches, accuracy_first=args.prime == "after-accuracy")
        if args.json:
            Path(args.json).write_text(json.dumps(result, indent=1))
        return
    result = {"nvml": nvml_costs(), "batches": {}}
    print("nvml:", {k: round(v, 2) for k, v in result["nvml"].items()}, flush=True)
    for batch in batches:
        shapes = shapes_at(first, batch)
        t0 = time.perf_counter()
        feeds = make_inputs(first.inputs, shapes, seed=0)
        make_s = time.perf_counter() - t0
        row = {"make_inputs_s": make_s}
        for mode in ("fresh", "kept", "fresh2", "kept2"):  # twice each, alternating: drift shows as fresh≠fresh2
            got = run_blocks(runners, feeds, args.blocks, keep=mode.startswith("kept"))
            row[mode] = {name: summary(b) for name, b in got.items()}
        result["batches"][batch] = row
        print(f"batch {batch}: make_inputs {make_s:.3f} s", flush=True)
        for name in runners:
            f = [row[m][name] for m in ("fresh", "fresh2")]
            k = [row[m][name] for m in ("kept", "kept2")]
            fw, kw = statistics.fmean(x["wall_s"] for x in f), statistics.fmean(x["wall_s"] for x in k)
            fm, km = statistics.fmean(x["median_ms"] for x in f), statistics.fmean(x["median_ms"] for x in k)
            print(f"  {name}: per block fresh {fw * 1e3:.1f} ms (set-up {f[0]['setup_s'] * 1e3:.1f}, overhead "
                  f"{f[0]['overhead_s'] * 1e3:.1f}) | kept {kw * 1e3:.1f} ms (set-up {k[0]['setup_s'] * 1e3:.1f}, overhead "
                  f"{k[0]['overhead_s'] * 1e3:.1f}) | wall kept/fresh {kw / fw:.3f} | median fresh {f[0]['median_ms']:.4f}/"
                  f"{f[1]['median_ms']:.4f} kept {k[0]['median_ms']:.4f}/{k[1]['median_ms']:.4f} ms, kept/fresh {km / fm:.4f}",
                  flush=True)
    mid = batches[len(batches) // 2]
    shapes = shapes_at(first, mid)
    feeds = make_inputs(first.inputs, shapes, seed=0)
    prof = cProfile.Profile()
    prof.enable()
    run_blocks(runners, feeds, 4, keep=False)
    prof.disable()
    text = io.StringIO()
    pstats.Stats(prof, stream=text).sort_stats("cumulative").print_stats(35)
    print(f"cProfile of 4 fresh rounds at batch {mid}:\n" + text.getvalue()[-9000:], flush=True)
    for r in runners.values():
        r.close()
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
