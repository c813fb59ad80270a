"""How much does trtprof's harness add over a bare `session.run` loop? (issue: ratio ≤ 1.02)

In one process, on the same model, the same InferenceSession and the same input: rounds of (trtprof bench_one → its median)
and (a bare perf_counter_ns loop around onnxruntime's session.run → its median), interleaved ABAB so
drift hits both. Prints per-round medians, the ratio of the medians of the round medians, and a
bootstrap 95 % CI of that ratio (rounds resampled in pairs). Writes a JSON result with the device and
date.

    python benchmarks/harness_overhead.py [--rounds 30] [--iterations 200] [--batch 1] [--out FILE]
"""
from __future__ import annotations

import argparse
import json
import platform
import tempfile
import time
from pathlib import Path

import numpy as np

from trtprof.measure.bench import bench_one, load_runner
from trtprof.builder.pipeline import BuildSettings, build_engines
from trtprof.system.environment import collect, cpu_name
from trtprof.model.inputs import make_inputs, resolve_shapes
from trtprof.model.demo import make_demo_model
from trtprof.spec import Precision
from trtprof.measure.timing import TimingConfig


def bare_loop(session, feeds, warmup: int, iterations: int) -> float:
    """The loop a user would write: no trtprof code at all."""
    for _ in range(warmup):
        session.run(None, feeds)
    times = np.empty(iterations)
    for i in range(iterations):
        t0 = time.perf_counter_ns()
        session.run(None, feeds)
        times[i] = (time.perf_counter_ns() - t0) / 1e6
    return float(np.median(times))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=30)
    ap.add_argument("--iterations", type=int, default=200)
    ap.add_argument("--warmup", type=int, default=20)
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--out", type=Path, default=Path(__file__).parent / "results" / f"harness_overhead-{time.strftime('%Y-%m-%d')}.json")
    args = ap.parse_args()

    from scipy import stats as sps

    with tempfile.TemporaryDirectory() as tmp:
        model = make_demo_model(Path(tmp) / "demo.onnx")
        (outcome,) = build_engines(model, [Precision.FP32], [args.batch],
                                   settings=BuildSettings(engines_dir=Path(tmp) / "engines", backend="onnxruntime"))
        record = outcome.record
        runner = load_runner(record)
        # The same InferenceSession on both sides: a second session would bring its own intra-op
        # thread pool, whose spinning threads compete with the active one on a small machine.
        bare = runner.session
        feeds = make_inputs(runner.inputs, resolve_shapes(runner.inputs, args.batch))
        config = TimingConfig(warmup=args.warmup, iterations=args.iterations)
        ours, theirs = [], []
        for r in range(args.rounds):
            order = ("trtprof", "bare") if r % 2 == 0 else ("bare", "trtprof")  # ABBA: no fixed order bias
            for who in order:
                if who == "trtprof":
                    ours.append(bench_one(record, runner, args.batch, config).latency.p50)
                else:
                    theirs.append(bare_loop(bare, feeds, args.warmup, args.iterations))
        runner.close()

    ours_a, theirs_a = np.array(ours), np.array(theirs)
    ratio = float(np.median(ours_a) / np.median(theirs_a))
    ci = sps.bootstrap((ours_a, theirs_a), lambda a, b, axis=-1: np.median(a, axis=axis) / np.median(b, axis=axis),
                       paired=True, vectorized=True, n_resamples=5000, method="percentile",
                       random_state=np.random.default_rng(0)).confidence_interval
    for i, (a, b) in enumerate(zip(ours, theirs)):
        print(f"round {i:2d}: trtprof {a:.4f} ms  bare {b:.4f} ms  ratio {a / b:.4f}")
    print(f"\ntrtprof median {np.median(ours_a):.4f} ms, bare session.run median {np.median(theirs_a):.4f} ms")
    print(f"ratio trtprof/bare = {ratio:.4f}  (95% CI {ci.low:.4f} .. {ci.high:.4f}; target <= 1.02)")
    result = {
        "benchmark": "harness_overhead",
        "date": time.strftime("%Y-%m-%d"),
        "device": {"cpu": cpu_name(), "platform": platform.platform()},
        "environment": collect()["packages"],
        "model": "trtprof demo convnet (3 conv, 64x64 input)",
        "batch_size": args.batch,
        "rounds": args.rounds,
        "iterations_per_round": args.iterations,
        "trtprof_median_ms": float(np.median(ours_a)),
        "bare_median_ms": float(np.median(theirs_a)),
        "ratio": ratio,
        "ratio_ci95": [float(ci.low), float(ci.high)],
        "target": 1.02,
        "round_medians_ms": {"trtprof": ours, "bare": theirs},
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=1) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
