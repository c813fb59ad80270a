"""trtprof plot RESULTS.json: histograms per batch size, latency and throughput vs batch size."""
from __future__ import annotations

import argparse
from typing import Any
from pathlib import Path

from ..errors import BadInput
from ..report.plots import plot_all, plot_names
from ..util.outputs import IMAGE
from ..compare.results_file import read_bench
from . import _common


def add_parser(sub) -> None:
    p = sub.add_parser("plot", help="plot a results file (histograms, latency/throughput vs batch)")
    p.add_argument("results", type=Path, help="results JSON written by `trtprof bench`")
    p.add_argument("--out", type=Path, default=Path("plots"), help="output folder (default ./plots)")
    p.add_argument("--format", choices=("png", "svg"), default="png", help="image format (default png)")
    _common.add_force_arg(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    _common.check_output_dir(args.out, "--out")
    with _common.rendering(args.results):
        results = read_bench(args.results)  # read once, checked, typed
    if not results.results:
        raise BadInput("results file has no entries", path=args.results)
    with _common.rendering(args.results):
        names = plot_names(results.results, args.format) + [
            f"latency_vs_throughput{_serving_suffix(i, results.serving)}.{args.format}"
            for i in range(len(results.serving or []))]
    _common.check_folder_files(args.out, "--out", [(name, IMAGE) for name in names], args)  # before any plot is drawn
    with _common.rendering(args.results):
        _draw(args, results)
    return 0


def _draw(args: argparse.Namespace, results: Any) -> None:
    for path in plot_all(results.results, args.out, args.format):
        print(path)
    if results.serving:  # bench --concurrency: one latency–throughput curve per model and backend
        from ..report.serving_plots import latency_throughput_figure

        for i, sweep in enumerate(results.serving):
            print(latency_throughput_figure(
                sweep, args.out / f"latency_vs_throughput{_serving_suffix(i, results.serving)}.{args.format}"))


def _serving_suffix(i: int, sweeps) -> str:
    return f"_{i + 1}" if len(sweeps) > 1 else ""
