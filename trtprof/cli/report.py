"""trtprof report RESULTS.json -o report.html: one self-contained HTML page + Markdown on stdout."""
from __future__ import annotations

import argparse
from pathlib import Path

from . import _common
from ..util.outputs import HTML_PAGE


def add_parser(sub) -> None:
    p = sub.add_parser("report", help="one self-contained HTML report from a compare (or bench) JSON",
                       description="Verdict table, speedup vs batch with CI error bars, histograms and ECDFs per "
                                   "batch size, diagnosis and environment in one HTML file (plots embedded); the "
                                   "Markdown summary goes to stdout.")
    p.add_argument("results", type=Path,
                   help="JSON written by `trtprof compare` (or `trtprof bench`; or OUT/sweep.json of `trtprof sweep`: "
                        "the verdict matrix, plus one page per cell in <HTML stem>_cells/)")
    p.add_argument("-o", "--out", type=Path, default=Path("report.html"), help="HTML output (default report.html)")
    _common.add_common_debug(p)
    _common.add_force_arg(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from ..compare.results_file import read_results
    from .pages import cell_pages, write_report

    _common.check_output_file(args.out, "--out", ".html", kind=HTML_PAGE, args=args)
    with _common.rendering(args.results):  # a wrong kind no check names: one line, as while drawing
        doc = read_results(args.results)  # read once, checked, typed: every page below takes this value
    _common.check_folder_files(args.out.parent, "--out",
                               [(name, HTML_PAGE) for name in cell_pages(doc, args.results, args.out)], args)
    with _common.rendering(args.results):
        out, summary = write_report(doc, args.results, args.out)  # picks the page by the file's schema
    print(summary, end="")
    print(f"report: {out}")
    return 0
