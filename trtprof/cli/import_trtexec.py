"""trtprof import trtexec --times T.json [--profile P.json] [--layer-info L.json] --precision P --batch-size N:
trtexec's JSON exports as a trtprof results file (for `trtprof report` and `trtprof plot`)."""
from __future__ import annotations

import argparse
from pathlib import Path

from ..errors import BadInput
from ..util.labels import fmt_rate
from . import _common
from ..util.outputs import RESULTS_JSON


def add_parser(sub) -> None:
    p = sub.add_parser("import", help="read another tool's measurements into a trtprof results file (trtexec)",
                       description="Read another tool's measurements into a trtprof results file, for `trtprof "
                                   "report` and `trtprof plot`.")
    tools = p.add_subparsers(dest="tool", metavar="TOOL")
    tools.required = True
    t = tools.add_parser(
        "trtexec", help="trtexec --exportTimes/--exportProfile/--exportLayerInfo JSON",
        description="trtexec's per-iteration times (--exportTimes), per-layer profile (--exportProfile) and layer "
                    "info (--exportLayerInfo) as one trtprof record. One trtexec run is one process and one engine "
                    "load: its statistics hold iteration-to-iteration noise only, and the record says so. Import "
                    "the fp32 and fp16 runs into one file (--append) to see the speedup of one load each.")
    t.add_argument("--times", type=Path, required=True, metavar="T.json", help="trtexec --exportTimes output")
    t.add_argument("--profile", type=Path, default=None, metavar="P.json", help="trtexec --exportProfile output")
    t.add_argument("--layer-info", type=Path, default=None, metavar="L.json", help="trtexec --exportLayerInfo output")
    t.add_argument("--precision", type=_common.precision, required=True, help="what trtexec was asked for (fp32, fp16, …)")
    t.add_argument("--batch-size", type=_common.batch_size, required=True,
                   help="the batch of the timed input shape (trtexec's --shapes)")
    t.add_argument("--model", default=None, help="model name for the report (default: the --times file's stem)")
    t.add_argument("--out", type=Path, default=Path("results.json"), help="results JSON (default results.json)")
    t.add_argument("--append", action="store_true",
                   help="add to --out (an existing trtprof results file) instead of replacing it")
    _common.add_force_arg(t)
    t.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from ..util.files import now_iso
    from ..compare.results_file import read_bench
    from ..measure.results import ResultSet
    from ..measure.trtexec import read_run, to_result

    _common.check_output_file(args.out, "--out", kind=RESULTS_JSON, args=args)
    existing = read_bench(args.out) if args.out.exists() else None  # refuses a file trtprof did not write
    if args.append and existing is None:
        raise BadInput("--append: no results file to add to", path=args.out)
    run_ = read_run(args.times, args.profile, args.layer_info)
    files = {k: str(v) for k, v in (("times", args.times), ("profile", args.profile), ("layer_info", args.layer_info))
             if v is not None}
    result = to_result(run_, precision=args.precision, batch_size=args.batch_size,
                       model=args.model or Path(args.times).name.split(".")[0], files=files)
    results = [*(existing.results if existing is not None and args.append else []), result]
    environment = existing.environment if existing is not None and args.append else {
        "source": "trtexec", "device": "not recorded (trtexec's JSON exports do not name the GPU)"}
    kept = existing.extra if existing is not None and args.append else {}  # keys of a newer writer: written back
    ResultSet(environment=environment, results=results, created=now_iso(), extra=kept).write_json(args.out)
    lat = result.latency
    print(f"{result.model} {result.precision} batch {result.batch_size}: {lat.n} trtexec iterations, median "
          f"{lat.p50:.4g} ms (p99 {lat.p99:.4g} ms), {fmt_rate(result.throughput_per_s)}/s; one load")
    if len({r.precision for r in results if r.batch_size == result.batch_size}) > 1:
        print(f"compare them: trtprof compare {args.out}")  # the one statistic for imported pairs lives there
    print(f"results: {args.out}")
    return 0
