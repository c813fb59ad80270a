"""trtprof demo: make a small model, build fp32 + fp16, bench a batch sweep, write results + plots."""
from __future__ import annotations

import argparse
from pathlib import Path

from ..measure.bench import bench_records
from ..build.pipeline import BuildSettings, build_engines
from ..model.inputs import parse_batch_sizes
from ..report.plots import plot_all
from ..model.demo import make_demo_model
from ..util.signals import sigterm_as_interrupt
from ..spec import Precision
from ..util.wording import plural
from . import _common
from .bench import print_table, progress
from .build import print_outcome


def add_parser(sub) -> None:
    p = sub.add_parser("demo", help="end-to-end demo on a small generated model (fp32 vs fp16, batch sweep)")
    p.add_argument("--dir", type=Path, default=Path("trtprof-demo"), help="where to put everything (default ./trtprof-demo)")
    _common.add_backend_arg(p)
    p.add_argument("--batch-sizes", default="1,8,32", help="batch sweep (default 1,8,32)")
    _common.add_timing_args(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    out = Path(args.dir)
    _common.check_output_dir(out, "--dir")
    model = make_demo_model(out / "demo_convnet.onnx")
    print(f"model: {model}")
    sizes = parse_batch_sizes(args.batch_sizes)
    outcomes = build_engines(model, [Precision.FP32, Precision.FP16], sizes,
                             settings=BuildSettings(engines_dir=out / "engines", backend=args.backend),
                             on_done=print_outcome)
    print()
    on_plan, on_start, on_result, close = progress("demo bench")
    try:
        with sigterm_as_interrupt():
            results = bench_records([o.record for o in outcomes], _common.timing_config(args),
                                    seed=args.seed, int_range=_common.int_range(args), threads=args.threads,
                                    on_plan=on_plan, on_start=on_start, on_result=on_result)
    finally:
        close()
    print_table(results)
    results.write_json(out / "results.json")
    results.write_csv(out / "results.csv")
    print(f"\nresults: {out / 'results.json'}  csv: {out / 'results.csv'}")
    if results.interrupted:
        print(f"interrupted: {plural(len(results.pending), 'measurement')} not run; results so far above")
        return _common.EXIT_INTERRUPTED
    for path in plot_all(results.results, out / "plots"):
        print(f"plot: {path}")
    # the table above measured each engine in turn; a speedup claim needs interleaved rounds and a CI
    print(f"\nis fp16 faster, and by how much? trtprof compare {model} --engines {out / 'engines'} "
          f"--backend {args.backend} --precisions fp32,fp16")
    return 0
