"""Does pinning ONNX Runtime's thread count (`bench --threads N`) make CPU timings steadier here?

Side by side in one run, interleaved (A B A B …) so machine load hits both settings alike: the demo
conv net (fp32, ONNX Runtime CPU) at one batch size, ORT's default threads vs ``--threads N``. Each
round times both settings through trtprof's own host timing loop (``bench.bench_one``) and records
the median latency and the CV of that round. Prints, per setting, the median over rounds of the CV
and of the median latency, and the ratios default / pinned. No thresholds: a report, not a test.

Usage (from the repository root):
    python3 benchmarks/cpu_threads_noise.py --out benchmarks/results/cpu_threads_noise-2026-11-30.json
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def main(argv: list[str] | None = None) -> int:
    from trtprof.measure.bench import bench_one, load_runner
    from trtprof.builder.pipeline import BuildSettings, build_engines
    from trtprof.system.environment import collect
    from trtprof.system.noise import cpu_state
    from trtprof.model.demo import make_demo_model
    from trtprof.spec import Precision
    from trtprof.measure.timing import TimingConfig

    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", type=Path, default=None, help="also write the numbers as JSON")
    ap.add_argument("--rounds", type=int, default=10)
    ap.add_argument("--iterations", type=int, default=300)
    ap.add_argument("--batch-size", type=int, default=8)
    ap.add_argument("--threads", type=int, default=1, help="the pinned setting (default 1)")
    args = ap.parse_args(argv)

    with tempfile.TemporaryDirectory(prefix="trtprof-threads-") as tmp:
        model = make_demo_model(Path(tmp) / "demo_convnet.onnx")
        (outcome,) = build_engines(model, [Precision.FP32], [args.batch_size],
                                   settings=BuildSettings(engines_dir=Path(tmp) / "engines", backend="onnxruntime"))
        settings = {"default": None, f"threads={args.threads}": args.threads}
        runners = {name: load_runner(outcome.record, threads) for name, threads in settings.items()}
        config = TimingConfig(warmup=20, iterations=args.iterations)
        rounds: dict[str, list[dict]] = {name: [] for name in settings}
        started = time.time()
        try:
            for i in range(args.rounds):
                order = list(settings) if i % 2 == 0 else list(reversed(settings))  # A B, B A, …
                for name in order:
                    r = bench_one(outcome.record, runners[name], args.batch_size, config, threads=settings[name])
                    rounds[name].append({"p50_ms": r.latency.p50, "cv": r.latency.cv, "n": r.latency.n})
        finally:
            for runner in runners.values():
                runner.close()
    summary = {name: {"median_cv": statistics.median(x["cv"] for x in rs),
                      "median_p50_ms": statistics.median(x["p50_ms"] for x in rs),
                      "spread_p50_ms": [min(x["p50_ms"] for x in rs), max(x["p50_ms"] for x in rs)]}
               for name, rs in rounds.items()}
    pinned = f"threads={args.threads}"
    cv_ratio = summary["default"]["median_cv"] / summary[pinned]["median_cv"]
    p50_ratio = summary["default"]["median_p50_ms"] / summary[pinned]["median_p50_ms"]
    env = collect()
    print(f"host: {env['host']['cpu']} ({env['host']['cpu_count']} CPUs), state {cpu_state()}")
    print(f"batch {args.batch_size}, {args.rounds} interleaved rounds × {args.iterations} iterations, "
          f"{time.time() - started:.0f} s")
    for name, s in summary.items():
        print(f"  {name:<10} median CV {s['median_cv']:.1%}  median p50 {s['median_p50_ms']:.4g} ms  "
              f"(p50 over rounds {s['spread_p50_ms'][0]:.4g}…{s['spread_p50_ms'][1]:.4g} ms)")
    print(f"ratio default/pinned: CV {cv_ratio:.2f}×, median latency {p50_ratio:.2f}×")
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps({"date": time.strftime("%Y-%m-%d"), "host": env["host"],
                                        "cpu_state": cpu_state(), "args": {k: v for k, v in vars(args).items()
                                                                          if k != "out"},
                                        "summary": summary, "cv_ratio": cv_ratio, "p50_ratio": p50_ratio,
                                        "rounds": rounds}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
