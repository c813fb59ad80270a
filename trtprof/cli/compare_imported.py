"""``trtprof compare results.json``: imported trtexec runs (``trtprof import trtexec``) compared without
measuring; the statistics are those one trtexec process per precision allows (trtprof.compare.imported)."""
from __future__ import annotations

import argparse
import json

from ..util.files import atomic_write_text
from ..errors import BadInput
from ..schemas import RESULTS
from ..spec import Precision
from ..util.wording import plural
from . import _common
from ..util.outputs import COMPARE_JSON

# compare options that need a model, engines or a measurement: refused with an imported results file
MEASURING_OPTIONS = ("backends", "what_if", "precision", "layers", "accuracy", "inputs", "concurrency", "slo_ms")


def is_results_file(args: argparse.Namespace) -> bool:
    """One .json (or .json.gz) positional holding a trtprof results file (an engine's JSON or a model is not)."""
    if len(args.model) != 1 or not args.model[0].name.endswith((".json", ".json.gz")) or not args.model[0].is_file():
        return False
    from ..measure.results import read_json

    data = read_json(args.model[0])
    args.results_json = data  # read once: ``run`` takes the file's JSON from here
    return data.get("schema") == RESULTS


def run(args: argparse.Namespace) -> int:
    from ..compare.imported import compare_imported
    from ..compare.results_file import bench_value, read_bench

    path = args.model[0]
    _common.check_output_file(args.out, "--out", kind=COMPARE_JSON, args=args)
    given = [f"--{name.replace('_', '-')}" for name in MEASURING_OPTIONS if getattr(args, name, None)]
    if given:
        raise BadInput(f"{', '.join(given)}: not for imported trtexec runs (nothing is measured or run)", path=path)
    if not 0 < args.margin < 0.5:
        raise BadInput("--margin must be between 0 and 0.5 (e.g. 0.01 for ±1 %)")
    precisions = [str(Precision.parse(t)) for t in args.precisions.split(",") if t.strip()] if args.precisions else None
    read = getattr(args, "results_json", None)  # is_results_file read it
    stored = bench_value(read, path) if read is not None else read_bench(path)
    data = compare_imported(stored.results, path, precisions=precisions, margin=args.margin,
                            environment=stored.environment)
    from ..compare.report_value import CompareDocument

    doc = CompareDocument.from_json(data, args.out)  # what is saved, as one value: printed, and its Markdown
    for c in doc.comparisons:
        s = c.speedup
        print(f"batch {c.batch_size}: {c.candidate} vs {c.baseline}  speedup {s.estimate:.3f}× "
              f"[95% CI {s.ci_low:.3f}, {s.ci_high:.3f}]  {c.verdict.upper()}  "
              f"(imported: one load each, {plural(c.rounds or 0, 'pseudo-round')} not interleaved)")
        for side in ("baseline", "candidate"):
            x = c.latency[side]
            print(f"  {x.precision}: median {x.median_ms:.4g} ms [{x.ci_low_ms:.4g}, {x.ci_high_ms:.4g}], n={x.n}")
    def write(out) -> None:
        out.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_text(out, json.dumps(data, indent=1, allow_nan=True) + "\n")

    _common.write_compare_outputs(args.out, write, data["warnings"], doc if args.md else None)
    return 0
