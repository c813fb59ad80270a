"""trtprof demo: make a small model, build its engines, bench a batch sweep, write results + plots, and
print the compare that answers a question this machine can answer (int8 vs fp32 on a CPU, fp16 vs fp32
on a GPU)."""
from __future__ import annotations

import argparse
from pathlib import Path

from ..measure.bench import BenchHooks, bench_records
from ..builder.pipeline import BuildSettings, build_engines
from ..model.inputs import FeedSettings, parse_batch_sizes
from ..report.plots import plot_all
from ..model.demo import DEMO_CHANNELS, DEMO_IMAGE, make_demo_model
from ..util.signals import sigterm_as_interrupt
from ..spec import Precision
from ..util.wording import plural
from . import _common
from .bench import print_table, progress
from .build import print_outcome


# The demo's bench is a first look (the suggested compare decides): 100 timed runs after 20 warm-up ones per
# engine and batch size, half bench's 200 + 50, keep README's first command short on a busy 2-core machine.
DEMO_WARMUP, DEMO_ITERATIONS = 20, 100


def add_parser(sub) -> None:
    p = sub.add_parser("demo", help="end-to-end demo on a small generated model (fp32, fp16 and, on a CPU, int8; "
                                     "batch sweep)")
    p.add_argument("--dir", type=Path, default=Path("trtprof-demo"), help="where to put everything (default ./trtprof-demo)")
    _common.add_backend_arg(p)
    p.add_argument("--batch-sizes", default="1,8,32", help="batch sweep (default 1,8,32)")
    _common.add_timing_args(p, warmup=DEMO_WARMUP, iterations=DEMO_ITERATIONS)
    p.set_defaults(func=run)


def demo_precisions(backend: str) -> tuple[list[Precision], Precision]:
    """The precisions the demo builds and the candidate its suggested compare measures against fp32.

    On a CPU runtime that takes INT8 (ONNX Runtime's CPU provider has integer Conv/Gemm kernels) the
    candidate is int8: its fp16 runs FP32 kernels behind casts (the build note says so), so fp16 vs fp32
    there measures casts, never FP16. Elsewhere (a GPU backend) the candidate is fp16."""
    from .. import backends
    from ..errors import UnsupportedPrecision

    impl = backends.resolve(backend)
    if impl.capabilities.device == "cpu":
        try:
            impl.check_precision(Precision.INT8)
        except UnsupportedPrecision:
            pass
        else:
            return [Precision.FP32, Precision.FP16, Precision.INT8], Precision.INT8
    return [Precision.FP32, Precision.FP16], Precision.FP16


def benched(outcomes: list, candidate: Precision) -> list:
    """The engines the demo benches: fp32 and the candidate. With an int8 candidate the fp16 engine is
    built for its note (FP32 kernels behind casts) but not timed: its times would be fp32's plus casts,
    and leaving it out keeps the demo short."""
    return [o.record for o in outcomes if o.record.spec.precision in (Precision.FP32, candidate)]


def run(args: argparse.Namespace) -> int:
    out = Path(args.dir)
    _common.check_output_dir(out, "--dir")
    precisions, candidate = demo_precisions(args.backend)
    model = make_demo_model(out / "demo_convnet.onnx", channels=DEMO_CHANNELS, image=DEMO_IMAGE)
    print(f"model: {model}")
    sizes = parse_batch_sizes(args.batch_sizes)
    outcomes = build_engines(model, precisions, sizes,
                             settings=BuildSettings(engines_dir=out / "engines", backend=args.backend),
                             on_done=print_outcome)
    print()
    on_plan, on_start, on_result, close = progress("demo bench")
    try:
        with sigterm_as_interrupt():
            results = bench_records(benched(outcomes, candidate), _common.timing_config(args),
                                    feed=FeedSettings(seed=args.seed, int_range=_common.int_range(args)),
                                    hooks=BenchHooks(on_plan=on_plan, on_start=on_start, on_result=on_result),
                                    threads=args.threads)
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
    print_suggestion(model, out / "engines", outcomes[0].record.backend, candidate)
    return 0


def print_suggestion(model: Path, engines: Path, backend: str, candidate: Precision) -> None:
    """The table above measured each engine in turn; a speedup claim needs interleaved rounds and a CI:
    the compare that gives them, for the candidate this machine can answer."""
    print(f"\nis {candidate.value} faster than fp32, and by how much? trtprof compare {model} --engines {engines} "
          f"--backend {backend} --precisions fp32,{candidate.value}")
    if candidate is Precision.INT8:
        print("(fp16 is not the question on this CPU: its build note above says it runs FP32 kernels behind "
              "casts, so it was built but not benched; compare fp16 on a GPU backend)")
