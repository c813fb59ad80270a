"""trtprof compare MODEL_OR_ENGINES: FP16 vs FP32 speedup with a CI, accuracy beside it, and why."""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

from ..builder.pipeline import BuildSettings
from ..compare import core as cmp
from ..measure import workers
from ..measure.budget import (
    FEWER_LOADS_ENV,
    FEWER_LOADS_FLAG,
    GROWN_BUDGET_CAP_S,
    RANGE_ANALYSIS_SHARE,
    BudgetStart,
    fewer_loads_allowed,
)
from ..compare.accuracy_pass import check_samples, parse_samples
from ..compare.accuracy import BUDGET_METRICS, DEFAULT_BUDGET, FIELD_DOCS, AccuracyBudget, summary_line
from ..compare.records import likely_records
from ..compare.report_value import CompareDocument
from ..compare.result import ArmLatency, ComparisonResult
from ..compare.verdict_words import colour_enabled, coloured, shown_verdict
from ..errors import BadInput
from ..model.inputs import FeedSettings, parse_batch_sizes
from ..measure.interleave import (
    DEFAULT_ROUND_S,
    DEFAULT_TARGET_CI,
    DEFAULT_TIME_BUDGET_S,
    FLOOR_LOADS,
    LOADS_LIMIT,
    MAX_LOADS,
    MIN_LOADS,
    MIN_ROUNDS,
    InterleavedOutcome,
    Progress,
    RoundPlan,
)
from ..util.clock import CommandClock
from ..util.signals import sigterm_as_interrupt
from ..spec import Precision
from ..stats.speedup import EQUIVALENCE_MARGIN, few_loads_words, median_interval_units
from ..util.wording import plural
from . import _common, _serving, _timeline
from ..system.validity import stamp_lines
from .build import print_outcome
from ..util.outputs import COMPARE_JSON
from ..util.thirdparty import terminal_line
from ..util.bounds import Bound

# --margin: a CI wholly inside [1/(1+m), 1+m] is "equivalent"; 0.5 would call 1.5× "equivalent"
margin = Bound(float, 0, 0.5, low_open=True, high_open=True, between=True)
# --min-loads: one load has no load-to-load spread to show; LOADS_LIMIT processes at most
min_loads = Bound(int, FLOOR_LOADS, LOADS_LIMIT, between=True)


def add_parser(sub) -> None:
    p = sub.add_parser(
        "compare", help="FP16 vs FP32: speedup with a 95%% CI, accuracy delta, and a why-not-faster diagnosis",
        description="Measure the precisions in several independent loads (fresh worker processes), each in "
                    "interleaved rounds (A B, B A, …; each load starts with either arm, balanced) on the same inputs, "
                    "until the speedup's 95% CI is decisive "
                    "or within --target-ci or the time budget is spent; per batch size print the speedup with its "
                    "hierarchical CI, a verdict (faster, slower, equivalent, inconclusive), the accuracy delta and "
                    "the reasons. --precisions fp32,fp32 measures the noise floor (A/A).")
    add_arm_args(p)
    _common.add_shape_args(p, batch_default=None)
    for action in p._actions:  # the shared help describes bench; say what compare does
        if action.dest == "batch_sizes":
            action.help = ("batch sizes, comma-separated (default: the batch a model fixes, else 1; the built sizes "
                           "for an engines dir); two or more let the overhead-bound diagnosis fit latency vs batch")
    p.add_argument("--engines", type=Path, default=Path("engines"), help="engine cache dir (default ./engines)")
    _common.add_backend_arg(p)
    add_loop_args(p)
    p.add_argument("--out", type=Path, default=Path("compare.json"), help="JSON output (default compare.json)")
    p.add_argument("--md", action="store_true", help="also print the Markdown summary")
    p.add_argument("--no-copies", action="store_true", help="GPU: time compute only, without H2D/D2H copies")
    _common.add_launch_args(p)
    _common.add_autotune_arg(p)
    p.add_argument("--layers", action="store_true",
                   help="also profile every precision layer by layer (a separate run after the timing; "
                        "as `trtprof profile`) and diagnose from the per-layer table")
    _timeline.add_compare_args(p)
    p.add_argument("--accuracy", default=None, metavar="METRIC>=V,…",
                   help="accuracy budget for the OK / DEGRADED / BROKEN verdict (default "
                        f"{DEFAULT_BUDGET}; metrics: {', '.join(BUDGET_METRICS)}; see docs/accuracy.md)")
    _common.add_inputs_arg(p, what="accuracy and the FP16 range analysis run on its samples, each within its "
                                   "share of the time budget (--accuracy-samples), timing on the first batch")
    p.add_argument("--accuracy-samples", type=parse_samples, default=None, metavar="all|N",
                   help="with --inputs: the samples the accuracy verdict rests on; default: as many as "
                        f"{RANGE_ANALYSIS_SHARE * 100:.0f} %% of a batch size's --time-budget-s allows (whole batches, at least "
                        "one; the pass says when it stops early, the verdict and the JSON give the count); 'all': "
                        "every sample, N: the first N, whatever the budget (docs/accuracy.md)")
    p.add_argument("--seed", type=_common.seed_value, default=0, help="seed of the random inputs")
    p.add_argument("--int-range", default="0,100", metavar="LOW,HIGH", help="range of random integer inputs")
    _serving.add_serving_args(p)
    _common.add_common_debug(p)
    _common.add_force_arg(p)
    p.set_defaults(func=run)


def add_arm_args(p: argparse.ArgumentParser) -> None:
    """What is compared: one model's precisions, or an A/B (two models, two backends, a what-if)."""
    p.add_argument("model", type=Path, nargs="+", metavar="MODEL_OR_ENGINES",
                   help="ONNX/TensorFlow model (missing engines are built), or an engines dir; two of them: an A/B "
                        "of the two (the first is the baseline; see docs/ab-and-what-if.md); or a results file of "
                        "imported trtexec runs (docs/precisions.md)")
    p.add_argument("--precision", default=None, metavar="P",
                   help="A/B, --backends and --what-if: the one precision both arms run at (default fp32; "
                        "--what-if: fp16, measured against the original's fp32 and fp16)")
    p.add_argument("--backends", default=None, metavar="X,Y",
                   help="A/B of one model on two backends, e.g. onnxruntime,torch (the first is the baseline)")
    p.add_argument("--what-if", default=None, choices=["pad-channels", "channels-last", "nhwc", "ort-fusions",
                                                                "keep-fp32"],
                   help="measure a change as an A/B against the original (outputs checked identical first): "
                        "pad-channels zero-pads every Conv/Gemm's channels to multiples of 8; channels-last "
                        "(--backend torch, CUDA) runs the torch module and the 4-D inputs that feed a Conv in NHWC "
                        "memory; nhwc (--backend onnxruntime-cuda) loads the same engine with ORT's prefer_nhwc=1; "
                        "ort-fusions (ONNX Runtime backends) runs a copy fused by onnxruntime.transformers.optimizer "
                        "(BERT/ViT-like graphs); keep-fp32 builds the fp16 engine with the layers that cannot "
                        "fill tensor cores (channels or GEMM dims not multiples of 8) kept in FP32")
    p.add_argument("--precisions", default=None, metavar="BASE,CAND,…",
                   help="baseline first, then candidates (default fp32,fp16); the same precision twice (fp32,fp32) "
                        "is an A/A run: one engine loaded independently as two arms, the noise floor")


def add_loop_args(p: argparse.ArgumentParser) -> None:
    """How the loads and rounds run and stop: the target CI, the margin of every verdict, the time
    budget, the loads, where the workers run and how many iterations a round holds."""
    p.add_argument("--target-ci", type=_common.fraction, default=DEFAULT_TARGET_CI,
                   help=f"also stop when the speedup's CI half-width is within this fraction of it "
                        f"(default {DEFAULT_TARGET_CI})")
    p.add_argument("--margin", type=margin, default=EQUIVALENCE_MARGIN,
                   help=f"equivalence margin: a CI wholly inside [1/(1+m), 1+m] is 'equivalent', wholly beyond it "
                        f"'faster'/'slower' (default {EQUIVALENCE_MARGIN})")
    p.add_argument("--time-budget-s", type=_common.seconds_in_a_day, default=None,
                   help=f"the command's wall time per batch size, from its start to its exit: imports, worker "
                        f"start-up, warm-up and the summary included, engine builds left out (default "
                        f"{DEFAULT_TIME_BUDGET_S:g}, grown to what {MIN_LOADS} loads × {MIN_ROUNDS} rounds need as "
                        f"measured from the first load, at most {GROWN_BUDGET_CAP_S:g} s, announced before "
                        f"measuring); a given budget stays, and one too small for {MIN_LOADS} loads × {MIN_ROUNDS} "
                        f"rounds stops before the first round with exit 2 and the time they need (unless "
                        f"{FEWER_LOADS_FLAG}) (docs/method.md)")
    p.add_argument(FEWER_LOADS_FLAG, action="store_true",
                   help=f"with a --time-budget-s too small for {MIN_LOADS} loads × {MIN_ROUNDS} rounds, measure "
                        f"anyway: fewer loads (a NOT VALID result), and the floor of {FLOOR_LOADS} loads × 2 rounds "
                        f"runs even past the budget ({FEWER_LOADS_ENV}=1 in the environment does the same)")
    p.add_argument("--min-loads", type=min_loads, default=MIN_LOADS, metavar="N",
                   help=f"independent loads before the first look (default {MIN_LOADS}, at most "
                        f"{LOADS_LIMIT}; above {MAX_LOADS} it also lifts the most loads a run opens): a slow "
                        "mode that only some process starts fall into is missed by all N loads with probability (1 − its share)^N, so more loads guard rarer modes, at a "
                        "load's start-up each (docs/method.md); the time budget still bounds the run")
    p.add_argument("--device", default=None, metavar="GPU",
                   help="GPU the worker processes use (sets their CUDA_VISIBLE_DEVICES; default: inherited)")
    lone = p.add_mutually_exclusive_group()
    lone.add_argument("--in-process", action="store_true",
                      help="reload the engines in this process for each load instead of fresh worker processes "
                           "(for backends that cannot be started in a subprocess; misses process-level variation)")
    lone.add_argument("--serial-loads", action="store_true",
                      help="every load a worker process that lives alone: load i of every batch size is one "
                           "process, started once the previous one's rounds are done (slower: nothing runs side by side). On a GPU a "
                           "process replays small CUDA graphs faster once another process has created a CUDA context "
                           "during its life (H200, ResNet-50 batch 1: fp16 10%%, fp32 3%%); loads side by side "
                           "measure in that state, a lone user's loop does not: this measures as it does. The default "
                           "for backends where that was measured (onnxruntime-cuda)")
    lone.add_argument("--side-by-side-loads", action="store_true",
                      help="the loads' worker processes started side by side (the default but for onnxruntime-cuda): "
                           "faster to run (their start-ups overlap); on a GPU small batch sizes can read faster than a "
                           "lone process does")
    p.add_argument("--round-iterations", type=_common.iteration_count, default=None,
                   help=f"iterations per precision per round (default: about {DEFAULT_ROUND_S:g} s worth)")


def isolation(args: argparse.Namespace) -> str:
    """What the loads are: re-created in this process (``--in-process``), worker processes one after another
    (``--serial-loads``) or side by side (``--side-by-side-loads``); without a flag, the backend's default
    (``compare.options.default_isolation``: lone for onnxruntime-cuda, side by side for the others)."""
    if args.in_process:
        return cmp.ISOLATION_IN_PROCESS
    if args.serial_loads:
        return cmp.ISOLATION_SERIAL
    if args.side_by_side_loads:
        return cmp.ISOLATION_PROCESS
    return cmp.default_isolation(getattr(args, "backend", "auto"))


def parse_precisions(text: str) -> list[Precision]:
    precisions = [Precision.parse(t) for t in text.split(",") if t.strip()]
    if len(precisions) < 2:
        raise BadInput(f"--precisions {text!r}: give a baseline and at least one candidate, e.g. fp32,fp16 "
                       "(fp32,fp32 for an A/A run)")
    return precisions


def _plan(args: argparse.Namespace) -> RoundPlan:
    _common.check_round_args(args)
    if not 0 < args.margin < 0.5:
        raise BadInput("--margin must be between 0 and 0.5 (e.g. 0.01 for ±1 %)")
    budget_s = DEFAULT_TIME_BUDGET_S if args.time_budget_s is None else args.time_budget_s
    plan = RoundPlan(target_ci=args.target_ci, time_budget_s=budget_s,
                     round_iterations=args.round_iterations, margin=args.margin, copies=not args.no_copies,
                     cuda_graph=_common.cuda_graph(args), autotune=args.autotune, min_loads=args.min_loads,
                     max_loads=max(MAX_LOADS, args.min_loads))  # asking for more loads lifts the ceiling
    if not FLOOR_LOADS <= plan.min_loads <= LOADS_LIMIT:  # one load has no load-to-load spread to show
        raise BadInput(f"--min-loads {plan.min_loads}: must be from {FLOOR_LOADS} to {LOADS_LIMIT}")
    return plan


def print_comparison(c: ComparisonResult) -> None:
    s, acc = c.speedup, c.accuracy or {}
    for line in stamp_lines(c.validity):  # the first line of each verdict: VALID or NOT VALID: why
        print(line)
    few = few_loads_words(c.loads)  # beside the interval: what 2 loads mean for it
    shown = coloured(c.shown(), colour_enabled(sys.stdout))  # provisional / accuracy BROKEN: verdict_words
    print(f"batch {c.batch_size}: {c.candidate} vs {c.baseline}  speedup {s.estimate:.3f}× "
          f"[95% CI {s.ci_low:.3f}, {s.ci_high:.3f}]  {shown}  "
          f"({few or plural(c.loads, 'load')}, {plural(c.rounds or 0, 'round')}, stopped: {c.stop_reason})")
    if c.verdict_note:
        print(f"  note: {c.verdict_note}")
    for side in ("baseline", "candidate"):
        x = c.latency[side]
        eff = "" if x.effective_precision == x.precision else f" (effective {x.effective_precision})"
        label = c.label(side) if c.label(side).split("#")[0] != x.precision else x.precision  # an A/B arm's label
        print(f"  {label}{eff}: median {x.median_ms:.4g} ms {arm_interval(x, c.loads)}, n={x.n}")
    print_accuracy(c)
    if c.nonfinite:
        print(f"  !!! {c.candidate} OUTPUT HAS {c.nonfinite} NON-FINITE VALUES (inf/NaN): overflow !!!")
    if acc.get("caveat"):
        print(f"  caveat: {acc['caveat']}")
    from ..convert.fp16range import predicted_lines

    for line in predicted_lines(acc.get("predicted")):
        print(f"  predicted: {line}")
    for f in c.diagnosis:
        print(f"  why [{f.rule}]: {f.message}")


def arm_interval(x: ArmLatency, loads: int) -> str:
    """An arm's median interval as printed: its bounds, or that it is not defined (fewer loads than a
    distribution-free 95 % interval of a median needs: ``stats.speedup.engine_median_ci``)."""
    if x.ci_defined:
        return f"[{x.ci_low_ms:.4g}, {x.ci_high_ms:.4g}]"
    return f"[no 95% interval from {plural(loads, 'load')}: {median_interval_units()} needed]"


def check_model_paths(models: Sequence[str]) -> None:
    """Refuse, in one line naming it, a model that is missing or a directory that is neither an engines dir
    nor a TensorFlow SavedModel: an A/B checks both before it builds the first arm's engine."""
    from ..convert.tf.args import detect_format

    for model in map(Path, models):
        if not model.exists():
            raise BadInput("no such file or directory", path=model)
        if model.is_dir() and not any(model.glob("*.json")):  # an engines dir holds metadata JSON
            detect_format(model)  # a SavedModel, or a BadModel line saying what the directory is not


def default_batch_sizes(models: Sequence[Any]) -> tuple[int, ...]:
    """Without --batch-sizes: the batch every given ONNX model fixes (a model exported at batch 4 runs at 4,
    not at a default 1 it cannot run), said in one line; else () for the defaults (1 for a model, the built
    sizes for an engines dir). ``models``: the user's paths, or the ``OnnxModel`` an A/B arm read (not read
    again)."""
    from ..model.onnx_model import OnnxModel, model_fixed_batch

    fixed = {model_fixed_batch(m if isinstance(m, OnnxModel) else Path(m)) for m in models}
    if len(fixed) != 1 or None in fixed:
        return ()
    (batch,) = fixed
    if batch != 1:  # on stdout, as the start-up lines: a bad input's stderr stays one line
        print(f"batch size {batch}: the model fixes its batch to {batch} (--batch-sizes to choose)")
    return (batch,)  # type: ignore[return-value]


def ab_mode(args: argparse.Namespace) -> bool:
    """An A/B (two models, two backends or a what-if) rather than precisions of one model?"""
    if args.precisions is not None and (len(args.model) > 1 or args.backends or args.what_if):
        raise BadInput("--precisions compares precisions of one model; an A/B (two models, --backends, --what-if) "
                       "takes one --precision")
    if len(args.model) > 2:
        raise BadInput(f"compare takes one model (precisions) or two (an A/B), not {len(args.model)}")
    if args.what_if and (len(args.model) > 1 or args.backends):
        raise BadInput("--what-if runs one model against its changed copy: give one model, no --backends")
    if args.precision is not None and not (len(args.model) > 1 or args.backends or args.what_if):
        raise BadInput("--precision is for an A/B (two models, --backends, --what-if); for one model use --precisions")
    return len(args.model) > 1 or bool(args.backends) or bool(args.what_if)


def named_backends(args: argparse.Namespace) -> list[str]:
    """``--backends a,b`` (an A/B of two backends), else ``--backend``."""
    return [b.strip() for b in args.backends.split(",") if b.strip()] if args.backends else [args.backend]


def preload_backends(args: argparse.Namespace) -> list[str]:
    """The backends whose libraries the spare workers import while the engines are found or built
    (``auto`` is resolved by the build: nothing to preload for it)."""
    return [b for b in dict.fromkeys(named_backends(args)) if b != "auto"]


def user_arms(args: argparse.Namespace) -> list[Any]:
    """A plain A/B's arms (two models, or one model on two backends: ``ab.ab_arms``), each ONNX file read once
    (``ab.load_arms``): the default batch sizes, the input checks and the builds take that ``OnnxModel``."""
    from ..compare import ab

    precision = str(Precision.parse(args.precision or "fp32"))
    return ab.load_arms(ab.ab_arms(list(args.model), precision, named_backends(args)))


def run_ab(args: argparse.Namespace, options: cmp.CompareOptions, sizes: tuple[int, ...],
           hooks: cmp.CompareHooks, arms: Sequence[Any] | None = None) -> Any:
    """Two models, two backends (``arms``: ``user_arms``, read once), or a what-if: ``trtprof.compare.ab``."""
    from ..compare import ab

    if args.what_if:
        precision = str(Precision.parse(args.precision or "fp16"))
        return ab.what_if_experiment(args.what_if)(args.model[0], precision, sizes, options, engines_dir=args.engines,
                                                   backend=args.backend, hooks=hooks)
    return ab.compare_ab(arms if arms is not None else user_arms(args), sizes, options, engines_dir=args.engines,
                         hooks=hooks)


def print_accuracy(c: ComparisonResult) -> None:
    """The accuracy verdict (against the budget, on which inputs) and the metrics behind it."""
    acc = c.accuracy or {}
    v = acc.get("verdict") or {}
    if v:
        on = samples_words(acc)
        print(f"  accuracy vs {c.baseline}: {v['label']}{on} [{v['budget']}: {v['reason']}]")
    print(f"    {summary_line(acc)}" + (" (not FP16's error: see caveat)" if acc.get("caveat") else ""))


def samples_words(acc: Mapping[str, Any]) -> str:
    """How many of the user's samples the verdict rests on (" on 1,024 of 10,000 samples", " on all 100
    samples"); "" on random inputs (the JSON has no count)."""
    ran, total = acc.get("samples"), acc.get("samples_total")
    if ran is None:
        return ""
    return f" on all {ran:,} samples" if ran == total else f" on {ran:,} of {total:,} samples"


def print_accuracy_legend() -> None:
    print("accuracy metrics (worst output; JSON: accuracy.field_docs):")
    for name, doc in FIELD_DOCS.items():
        print(f"  {name}: {doc}")


def run_serving(args: argparse.Namespace, precisions: list[Precision], sizes: tuple[int, ...], serving,
                report: cmp.CompareReport, built: Mapping[str, Any]) -> None:
    """After the verdicts: the --concurrency sweep of the same engines (``built``: precision → the record
    compare built or found for the model, so the model is not read again; from an engines dir, resolved
    again from it) and, with --slo-ms, the throughput-at-target verdicts."""
    from ..serving.sweep import SweepHooks, sweep_records

    if built:
        records, sizes = built, tuple(sizes) or (1,)  # as resolve_records sizes a model's build
    else:
        settings = BuildSettings(shapes=_common.shapes(args), engines_dir=Path(args.engines), backend=args.backend)
        records, _, sizes = cmp.resolve_records(args.model[0], precisions, sizes, settings)
    arms = {label: records[str(p)] for label, p in zip(cmp.arm_labels(precisions), precisions)}
    on_point, close = _serving.progress(len(arms) * len(sizes) * len(serving.concurrency) * serving.rounds)
    try:
        with sigterm_as_interrupt():
            sweep = sweep_records(arms, sizes, serving, autotune=args.autotune, hooks=SweepHooks(on_point=on_point),
                                  feed=FeedSettings(_common.shapes(args), args.seed, _common.int_range(args)))
    except KeyboardInterrupt:
        report.warnings.append("interrupted during the --concurrency sweep: no serving results")
        return
    finally:
        close()
    report.serving = sweep.to_json()


def run(args: argparse.Namespace, clock: CommandClock | None = None) -> int:
    """``clock``: when the command started and its imports ended (``cli.main``): the time budget counts
    from there; without it (a caller in its own process), from when the comparison begins."""
    from . import compare_imported

    if compare_imported.is_results_file(args):  # imported trtexec runs: nothing to build or measure
        return compare_imported.run(args)
    _common.check_output_file(args.out, "--out", engines=[args.engines], kind=COMPARE_JSON, args=args)  # before any build or measurement (issue 12)
    is_ab = ab_mode(args)
    if is_ab:
        check_model_paths(args.model)  # both, before the first arm's engine is built
    precisions = parse_precisions(args.precisions or "fp32,fp16") if not is_ab else []
    plan = _plan(args)
    first_line(args, plan, clock)  # within the first seconds, before any engine is found, built or loaded
    budget = AccuracyBudget.parse(args.accuracy)
    data = _common.load_inputs(args)
    check_samples(args.accuracy_samples, data)
    serving = _serving.serving_config(args, copies=not args.no_copies)
    if serving is not None and is_ab:  # refused before any build or measurement
        raise BadInput("--concurrency/--slo-ms: serving sweeps compare precisions of one model, not an A/B")
    arms = user_arms(args) if is_ab and not args.what_if else None  # an A/B's files read once, before any build
    sizes = parse_batch_sizes(args.batch_sizes) if args.batch_sizes else default_batch_sizes(
        args.model if arms is None else [a.loaded if a.loaded is not None else a.model for a in arms])
    timeline = _timeline.compare_request(args, sizes, cmp.arm_labels(precisions), is_ab)  # files checked now
    budget_start = (BudgetStart.for_command(clock, grows=args.time_budget_s is None,
                                            refuses=not fewer_loads_allowed(args.allow_fewer_loads))
                    if clock is not None else None)
    ab_outcome = None
    with sigterm_as_interrupt():  # Ctrl-C / SIGTERM keep the batch sizes already decided
        options = cmp.CompareOptions(
            plan=plan, shapes=_common.shapes(args), seed=args.seed, int_range=_common.int_range(args),
            isolation=isolation(args), device=args.device,
            layers=args.layers, accuracy_budget=budget, data=data, budget_start=budget_start, timeline=timeline,
            accuracy_samples=args.accuracy_samples,
        )  # compare_model and the A/B leave the engine builds out of the budget
        built: dict[str, Any] = {}  # precision → the engine compare built or found for the model (the sweep's)
        hooks = run_hooks(args, plan, built, options.isolation)
        lone = options.isolation == cmp.ISOLATION_SERIAL
        ahead = likely_records(args.model[0], precisions, args.engines, args.backend) if lone and not is_ab else None
        with workers.spares(min(plan.min_loads, workers.SPAWN_AHEAD) if options.isolation == cmp.ISOLATION_PROCESS else 0,
                            preload_backends(args), args.device, lone=lone, engines=ahead, autotune=plan.autotune):
            if is_ab:
                ab_outcome = run_ab(args, options, sizes, hooks, arms)
                report = ab_outcome.report
            else:
                report = cmp.compare_model(args.model[0], precisions, sizes, options, engines_dir=args.engines,
                                           backend=args.backend, hooks=hooks)
    if serving is not None and not report.interrupted and not report.lost:
        run_serving(args, precisions, sizes, serving, report, built)
    doc = ab_outcome.document() if ab_outcome is not None else report.seal().document()  # printed and saved
    data = doc.to_json()
    print_results(args, doc, report)
    _common.write_compare_outputs(args.out, doc.write_json, data["warnings"], doc if args.md else None)
    _timeline.write_compare_files(args, data.get("timeline"), str(data.get("model", "")))
    return exit_status(args, data, report)


def gpu_lines(args: argparse.Namespace, how: str) -> str | None:
    """On a GPU: how launches are timed (``_common.launch_line``) and what the loads are (``how``: ``isolation``'s
    answer), since at small batch sizes the GPU's state depends on them (``measure.serial_loads``); None where the
    timing is the CPU's."""
    launch = _common.launch_line(args)
    if launch is None or how == cmp.ISOLATION_IN_PROCESS:
        return launch
    if how == cmp.ISOLATION_SERIAL:
        why = "--serial-loads" if args.serial_loads else "the default here; --side-by-side-loads runs them side by side"
        return (f"{launch}\nloads: one worker process at a time ({why}), each alone on the GPU as a user's own loop "
                "is; load i of every batch size is one process (the next one's starts ahead, importing only: no CUDA "
                "context beside a timed load)")
    chosen = "--side-by-side-loads" if args.side_by_side_loads else "the default"
    return (f"{launch}\nloads: worker processes side by side ({chosen}). A process replays small CUDA graphs faster "
            "once another process has created a CUDA context during its life (H200, batch 1: up to 10 %), so at small "
            "batch sizes these loads can read faster than a lone process does; --serial-loads measures each load alone "
            "(slower: a process start per load, one after another)")


def run_hooks(args: argparse.Namespace, plan: RoundPlan, built: dict[str, Any], how: str) -> cmp.CompareHooks:
    """What a compare prints while it runs: the launch line once, before the first build or measurement
    says anything; each engine built or found (kept in ``built`` by precision); each batch size's budget,
    looks of the stopping rule (stderr) and verdict; one-off notes (stderr) and the start-up's parts
    (stdout, as the build's lines: stderr before a bad input's error stays that one line). ``how``: the loads
    (``isolation``), which the launch line names."""
    launch = [gpu_lines(args, how)]  # printed once, before the first build or measurement says anything

    def announce() -> None:
        if launch[0] is not None:
            print(launch[0], file=sys.stderr)
            launch[0] = None

    def on_progress(batch: int, p: Progress) -> None:
        announce()
        cis = ", ".join(f"{name} {s.estimate:.3f}× [{s.ci_low:.3f}, {s.ci_high:.3f}] {s.verdict}"
                        for name, s in p.speedups.items())
        print(f"  batch {batch}: {plural(p.loads, 'load')}, {plural(p.rounds, 'round')}, {p.elapsed_s:.1f} of "
              f"{round(p.budget_s, 1):g} s spent: {cis}", file=sys.stderr)

    def on_batch(batch: int, outcome: InterleavedOutcome) -> None:
        announce()
        few = few_loads_words(outcome.loads)
        for name, s in outcome.speedups.items():
            shown = coloured(shown_verdict(s.verdict, loads=outcome.loads, min_loads=plan.min_loads,
                                           accuracy=outcome.accuracy.get(name)), colour_enabled(sys.stderr))
            print(f"batch {batch}: {name} vs {outcome.arms[0].name}: {s.estimate:.3f}× [{s.ci_low:.3f}, {s.ci_high:.3f}] "
                  f"{shown} ({few or plural(outcome.loads, 'load')}, {plural(outcome.rounds, 'round')}, "
                  f"{outcome.elapsed_s:.1f} of {round(outcome.budget_s, 1):g} s spent with {outcome.reserve_s:.1f} s "
                  f"kept for the end, stopped: {outcome.stop_reason})", file=sys.stderr)

    def on_built(outcome: Any) -> None:  # compare_model and the A/B leave the builds out of the budget
        announce()
        print_outcome(outcome)
        built[outcome.record.precision] = outcome.record

    def on_budget(batch: int, line: str) -> None:  # before the batch size's rounds (BatchWindow.fitted)
        announce()
        print(f"  batch {batch}: budget: {line}", file=sys.stderr)

    return cmp.CompareHooks(on_built=on_built, on_progress=on_progress, on_batch=on_batch, on_budget=on_budget,
                            on_note=lambda line: print(line, file=sys.stderr),
                            on_startup=lambda line: print(line, flush=True))


def print_results(args: argparse.Namespace, doc: CompareDocument, report: cmp.CompareReport) -> None:
    """The result as saved (``doc``, the sealed report's one value): every comparison, eager fallbacks, the
    accuracy legend, the layer tables, the what-if lines, the serving sweep, third-party warnings."""
    data = doc.to_json()
    for c in doc.comparisons:
        print_comparison(c)
    for line in eager_fallback_lines(data.get("results", [])):
        print(line)
    if data["comparisons"]:
        print_accuracy_legend()
    if data.get("layers"):
        from ..layers.table import format_table

        for batch, table in data["layers"].items():
            print(f"\nlayers at batch {batch}:")
            print(format_table(table, top=15))
    for line in data.get("ab", {}).get("what_if", {}).get("lines", []):
        print(f"what-if: {line}")
    if report.serving is not None:
        _serving.print_sweep(report.serving)
    library = terminal_line((r.get("third_party_warnings") or [] for r in data.get("results", [])),
                           f"{args.out}: results[].third_party_warnings")
    if library:
        print(library)


def exit_status(args: argparse.Namespace, data: Mapping[str, Any], report: cmp.CompareReport) -> int:
    """0; 130 after an interrupt (what finished is kept); 2 when a worker died (kill -9, the OOM killer:
    what finished is in the JSON, the run failed), each with its line on stderr."""
    if report.interrupted:
        print(f"interrupted: kept {plural(len({c['batch_size'] for c in data['comparisons']}), 'finished batch size')}; "
              f"not measured: {', '.join(map(str, report.pending)) or 'nothing'}", file=sys.stderr)
        return _common.EXIT_INTERRUPTED
    if report.lost:
        kept = sorted({c["batch_size"] for c in data["comparisons"]})
        print(f"trtprof compare: error: {report.lost}; kept batch sizes {', '.join(map(str, kept)) or 'none'}"
              + (f" (partial: {', '.join(map(str, report.partial))})" if report.partial else "")
              + f" in {args.out}", file=sys.stderr)
        return 2
    return 0


def first_line(args: argparse.Namespace, plan: RoundPlan, clock: CommandClock | None,
               now: Callable[[], float] = time.perf_counter) -> None:
    """The first line a compare prints (stdout, as the build's lines), before the engines are found: what it measures and under
    which budget, with the seconds since the command's start (issue 44 #2: nothing was printed for the
    first 20-40 s of a 6-s budget)."""
    spent = f", {now() - clock.started:.1f} s in" if clock is not None else ""
    budget = (f"--time-budget-s {plan.time_budget_s:g} per batch size" if args.time_budget_s is not None else
              f"the default budget, {plan.time_budget_s:g} s per batch size, grown to what {plan.min_loads} loads "
              f"need (at most {GROWN_BUDGET_CAP_S:g} s)")
    print(f"start-up{spent}: compare {' vs '.join(str(m) for m in args.model)} under {budget}; finding the engines "
          "(a build is left out of the budget)", flush=True)  # stdout: a bad input's error stays one line on stderr


def eager_fallback_lines(results: Sequence[Mapping[str, Any]]) -> list[str]:
    """One line per arm whose CUDA graph capture failed (it ran eager; its ``device`` launch record says
    why), the batch sizes it happened at named: the run does not fail, but a user must not read eager
    times as graph ones."""
    from ..measure.timing import capture_failure

    seen: dict[tuple[str, str], list[int]] = {}
    for r in results:
        reason = capture_failure(r.get("device"))
        if reason is not None:
            seen.setdefault((str(r.get("precision")), reason), []).append(int(r.get("batch_size", 0)))
    return [f"{precision}: ran eager at batch {', '.join(map(str, sorted(set(batches))))}: "
            f"CUDA graph capture failed ({reason})" for (precision, reason), batches in seen.items()]
