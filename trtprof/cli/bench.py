"""trtprof bench PATH: every engine × batch size through the shared timing loop."""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ..bench import bench_path
from ..results import BenchResult, ResultSet
from . import _common

TABLE_HEADERS = ("model", "precision", "backend", "batch", "median ms", "p90 ms", "p99 ms", "mean ± std ms",
                 "throughput/s", "n")


def add_parser(sub) -> None:
    p = sub.add_parser("bench", help="benchmark engines: latency distributions per precision and batch size",
                       description="Benchmark every engine under PATH (an engines dir or one engine) at every "
                                   "batch size.")
    p.add_argument("path", type=Path, help="engines dir, or one engine (artifact or its .json)")
    _common.add_shape_args(p, batch_default=None)
    _common.add_timing_args(p)
    _common.add_autotune_arg(p)
    p.add_argument("--out", type=Path, default=Path("results.json"), help="results JSON (default results.json)")
    p.add_argument("--csv", type=Path, default=None, help="also write a CSV, one row per engine × batch")
    p.set_defaults(func=run)


def table_row(r: BenchResult) -> tuple:
    s = r.latency
    eff = r.engine.get("effective_precision", r.precision)
    prec = r.precision if eff == r.precision else f"{r.precision} ({eff})"
    return (r.model, prec, r.backend, r.batch_size, f"{s.p50:.3f}", f"{s.p90:.3f}", f"{s.p99:.3f}",
            f"{s.mean:.3f} ± {s.std:.3f}", f"{r.throughput_per_s:.1f}", s.n)


def print_table(results: ResultSet) -> None:
    print(_common.format_table(TABLE_HEADERS, [table_row(r) for r in results.results]))
    stages = [k for k in ("h2d_ms", "compute_ms", "d2h_ms", "enqueue_ms") if any(k in r.stats for r in results.results)]
    if stages:
        rows = []
        for r in results.results:
            rows.append((r.model, r.precision, r.batch_size,
                         *(f"{r.stats[k].p50:.3f} (cv {r.stats[k].cv:.1%})" if k in r.stats else "-" for k in stages)))
        print()
        print(_common.format_table(("model", "precision", "batch", *(f"{k[:-3]} median ms" for k in stages)), rows))
    for r in results.results:
        for w in r.warnings:
            print(f"warning: {r.model} {r.precision} batch {r.batch_size}: {w}")


def run(args: argparse.Namespace) -> int:
    from tqdm import tqdm

    config = _common.timing_config(args)
    bar = None

    def on_start(item) -> None:
        nonlocal bar
        if bar is None:
            bar = tqdm(total=None, unit="config", file=sys.stderr, disable=None, leave=False)
        bar.set_description(f"{item.record.model} {item.record.precision} batch {item.batch_size}")

    def on_result(_result) -> None:
        if bar is not None:
            bar.update(1)

    try:
        results = bench_path(
            args.path, config, batch_sizes=_common.batch_sizes(args), shapes=_common.shapes(args),
            seed=args.seed, int_range=_common.int_range(args), on_start=on_start, on_result=on_result,
            autotune=args.autotune,
        )
    finally:
        if bar is not None:
            bar.close()
    print_table(results)
    results.write_json(args.out)
    print(f"results: {args.out}")
    if args.csv:
        results.write_csv(args.csv)
        print(f"csv: {args.csv}")
    return 0
