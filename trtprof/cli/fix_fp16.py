"""trtprof fix-fp16 MODEL: the smallest FP32 keep-list found that makes FP16 meet the accuracy budget,
and what it costs in speed."""
from __future__ import annotations

import argparse
import shlex
import sys
from pathlib import Path

from ..compare import core as cmp
from ..compare.accuracy import DEFAULT_BUDGET, AccuracyBudget
from ..errors import BadInput, StaticBatch
from ..measure.interleave import DEFAULT_ROUND_S, DEFAULT_TIME_BUDGET_S, RoundPlan
from ..util.signals import sigterm_as_interrupt
from . import _common
from ..util.outputs import COMPARE_JSON
from ..util.bounds import Bound

MAX_BUILDS = 1_000  # each trial is a conversion, a build and a run: the default of 24 bisects any model met
max_builds = Bound(int, 1, MAX_BUILDS, why="each is a conversion, a build and a run")


def add_parser(sub) -> None:
    from ..compare.fix_fp16 import DEFAULT_MAX_BUILDS

    p = sub.add_parser(
        "fix-fp16", help="find nodes to keep in FP32 so FP16 meets an accuracy budget, then measure the speedup",
        description="Search a small set of nodes to keep in FP32 (seeded by the FP16 range analysis, then "
                    "bisection over the graph, as Polygraphy's debug precision) until the FP16 candidate meets "
                    "--accuracy on your --inputs; build it and compare it with FP32 (speedup with a 95 % CI, "
                    "verdicts, accuracy). Prints the option to reuse. See docs/accuracy.md.")
    p.add_argument("model", type=Path, help="ONNX/TensorFlow model")
    p.add_argument("--accuracy", default=None, metavar="METRIC>=V,…",
                   help=f"accuracy budget the FP16 candidate must meet (default {DEFAULT_BUDGET})")
    _common.add_inputs_arg(p, what="the search judges accuracy on all its samples")
    p.add_argument("--batch-size", type=_common.batch_size, default=8,
                   help="batch size of the search's inference and of the measurement (default 8)")
    _common.add_shape_arg(p)
    p.add_argument("--max-builds", type=max_builds, default=DEFAULT_MAX_BUILDS,
                   help=f"most keep-lists built and judged (default {DEFAULT_MAX_BUILDS})")
    p.add_argument("--engines", type=Path, default=Path("engines"), help="engine cache dir (default ./engines)")
    _common.add_backend_arg(p)
    p.add_argument("--time-budget-s", type=_common.seconds_in_a_day, default=DEFAULT_TIME_BUDGET_S,
                   help=f"wall time of the speed measurement (default {DEFAULT_TIME_BUDGET_S:g})")
    p.add_argument("--round-iterations", type=_common.iteration_count, default=None,
                   help="iterations per precision per round of the measurement (default: about "
                        f"{DEFAULT_ROUND_S:g} s worth)")
    p.add_argument("--in-process", action="store_true", help="measure in this process (as compare --in-process)")
    p.add_argument("--seed", type=_common.seed_value, default=0, help="seed of the random inputs (without --inputs)")
    p.add_argument("--out", type=Path, default=Path("fix_fp16.json"),
                   help="JSON output: the comparison (readable by trtprof report) and the search (default fix_fp16.json)")
    _common.add_common_debug(p)
    _common.add_force_arg(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from ..builder.pipeline import BuildSettings
    from ..compare.fix_fp16 import fix_fp16

    _common.check_output_file(args.out, "--out", kind=COMPARE_JSON, args=args)
    budget = AccuracyBudget.parse(args.accuracy)
    data = _common.load_inputs(args)
    if not args.model.exists():
        raise BadInput("no such file or directory", path=args.model)
    plan = RoundPlan(time_budget_s=args.time_budget_s, round_iterations=args.round_iterations)
    options = cmp.CompareOptions(plan=plan, shapes=_common.shapes(args), seed=args.seed, accuracy_budget=budget,
                                 isolation=cmp.ISOLATION_IN_PROCESS if args.in_process else cmp.ISOLATION_PROCESS,
                                 data=data)

    def on_trial(t) -> None:
        score = f"cosine {t.cosine:.6f}" if t.cosine is not None else ""
        print(f"  {t.stage:<7} {len(t.nodes):>4} node(s) in fp32: {t.verdict:<12} {score} {t.reason}".rstrip(),
              file=sys.stderr)

    found: list = []  # the search's Fix, once it ended: kept whatever happens to the measurement

    def on_search_done(searched) -> None:
        found.append(searched)
        print_search(searched.search, args.model)
        sys.stdout.flush()  # the keep-list is on screen before the measurement starts

    try:
        with sigterm_as_interrupt():
            settings = BuildSettings(engines_dir=args.engines, backend=args.backend)
            fix = fix_fp16(args.model, args.batch_size, options, settings, max_builds=args.max_builds,
                           on_trial=on_trial, on_search_done=on_search_done)
    except StaticBatch as err:  # its advice names fix-fp16's option, not compare's --batch-sizes
        raise err.for_option("--batch-size") from err
    except KeyboardInterrupt:
        if not found:
            raise
        write_fix(args.out, found[0].to_json(), interrupted=True)
        print("trtprof fix-fp16: interrupted after the search; its keep-list is above and in "
              f"{args.out}, not measured", file=sys.stderr)
        return _common.EXIT_INTERRUPTED
    interrupted = fix.report is not None and fix.report.interrupted
    doc = fix.document()  # one value, saved and printed (None: nothing was measured)
    write_fix(args.out, doc.to_json() if doc is not None else fix.to_json(), interrupted=interrupted)
    print_measured(fix.search, doc)
    print(f"fix-fp16: {args.out}")
    if interrupted:
        print("trtprof fix-fp16: interrupted during the measurement; the keep-list is above", file=sys.stderr)
        return _common.EXIT_INTERRUPTED
    return 0 if fix.search.keep is not None else 1


def write_fix(out: Path, data: dict, *, interrupted: bool) -> None:
    """The JSON, with Ctrl-C/SIGTERM deferred; a full disk is one line saying the keep-list is above."""
    import json

    from ..errors import write_failure
    from ..util.files import atomic_write_text
    from ..util.signals import signals_deferred

    if interrupted:
        data = {**data, "interrupted": True}
    with signals_deferred():
        try:
            out.parent.mkdir(parents=True, exist_ok=True)
            atomic_write_text(out, json.dumps(data, indent=1, allow_nan=True) + "\n")
        except OSError as err:
            raise write_failure(err, out, kept="the keep-list is printed above") from err


def print_search(s, model: Path) -> None:
    """The search's outcome and the option to reuse, printed as soon as the search ends."""
    how = ("FP16 emulated with numpy float16 arithmetic (this backend computes its fp16 graph in FP32)"
           if s.evaluation == "emulated" else "the backend's FP16 engines")
    print(f"search: {len(s.trials)} build(s) of at most {s.max_builds}, {s.nodes} candidate nodes, budget {s.budget}, "
          f"judged on {s.inputs} with {how}" + (f"; {s.stopped}" if s.stopped else ""))
    if s.keep is None:
        print("no keep-list met the budget")
        return
    if not s.keep:
        print("nothing to keep in FP32: plain FP16 meets the budget")
    print(f"reuse: trtprof build {shlex.quote(str(model))} --fp16 {s.option}".rstrip())


def print_measured(s, doc) -> None:
    """The measured cost of the search's keep-list (after ``print_search``), from ``doc``: the document the
    JSON holds (``compare.fix_fp16.Fix.document``; None when nothing was measured)."""
    if s.keep is None:
        return
    best = s.best
    score = f", cosine {best.cosine:.6g}" + (f", top-1 {best.top1:.2%}" if best.top1 is not None else "") if best else ""
    if doc is not None and doc.comparisons:
        c = doc.comparisons[0]
        sp = c.speedup
        acc = c.accuracy or {}
        from .compare import print_comparison

        print_comparison(c)
        relation = {"faster": "faster than", "slower": "slower than", "equivalent": "equivalent to"}.get(
            c.verdict, "(inconclusive) vs")
        print(f"fp16 with {len(s.keep)} node(s) in fp32: {sp.estimate:.3g}× [{sp.ci_low:.3g}, {sp.ci_high:.3g}] "
              f"{relation} fp32{score} ({'emulated FP16' if s.evaluation == 'emulated' else 'FP16 engine'}); "
              f"the measured engine: accuracy {acc['verdict']['label']}, cosine {acc['cosine']:.6g} on {acc['inputs']}")
