"""trtprof plot RESULTS.json: histograms per batch size, latency and throughput vs batch size."""
from __future__ import annotations

import argparse
from pathlib import Path

from ..errors import BadInput
from ..report.plots import plot_all
from ..measure.results import ResultSet
from . import _common


def add_parser(sub) -> None:
    p = sub.add_parser("plot", help="plot a results file (histograms, latency/throughput vs batch)")
    p.add_argument("results", type=Path, help="results JSON written by `trtprof bench`")
    p.add_argument("--out", type=Path, default=Path("plots"), help="output folder (default ./plots)")
    p.add_argument("--format", choices=("png", "svg"), default="png", help="image format (default png)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    _common.check_output_dir(args.out, "--out")
    results = ResultSet.read(args.results)
    if not results.results:
        raise BadInput("results file has no entries", path=args.results)
    for path in plot_all(results.results, args.out, args.format):
        print(path)
    if results.serving:  # bench --concurrency: one latency–throughput curve per model and backend
        from ..report.serving_plots import latency_throughput_figure

        for i, sweep in enumerate(results.serving):
            suffix = f"_{i + 1}" if len(results.serving) > 1 else ""
            print(latency_throughput_figure(sweep, args.out / f"latency_vs_throughput{suffix}.{args.format}"))
    return 0
