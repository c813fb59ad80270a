"""trtprof train-compare MODEL: is a mixed-precision *training* step faster, with a CI, memory and why."""
from __future__ import annotations

import argparse
import sys
from dataclasses import replace
from pathlib import Path

from ..model.inputs import parse_batch_sizes
from ..measure.interleave import DEFAULT_TARGET_CI, MIN_ROUNDS, InterleavedOutcome, RoundPlan
from . import _common
from ..util.outputs import HTML_PAGE, TRAIN_JSON
from ..util.bounds import Bound

DEFAULT_TRAIN_BUDGET_S = 10.0
MAX_STEPS = 100_000  # the loss comparison's steps per arm: a check of the precisions, not a training run
steps = Bound(int, 1, MAX_STEPS, why="a check, not a training run")


def add_parser(sub) -> None:
    p = sub.add_parser(
        "train-compare",
        help="training step (forward+loss+backward+optimizer): FP32 vs TF32 vs AMP FP16 vs AMP BF16, "
             "speedup with a 95%% CI, memory, loss after N steps, and why",
        description="Time one training step per precision, interleaved like `trtprof compare`, on your own "
                    "PyTorch module (a factory: path/to/file.py:make or package.module:make returning the model, "
                    "(model, example_inputs) or (model, example_inputs, loss_fn, optimizer_fn)), an ONNX model "
                    "rebuilt as a trainable module (an inference export: it says what it lost), or a Keras "
                    ".keras/.h5 model. cuDNN autotuning is on (tuned before timing; --no-autotune). Loss default: "
                    "mean(|y - 1|) (needs no labels). Each arm also runs alone from the same initial weights and "
                    "data for --steps steps (loss, skipped steps, peak memory, profile for the reasons).")
    p.add_argument("model", help="module factory FILE.py:FUNCTION or package.module:FUNCTION (PyTorch; imported "
                                 "and run as Python code, with your permissions: only name files you trust), "
                                 "ONNX file (PyTorch via onnx2torch) or Keras .keras/.h5 (TensorFlow)")
    p.add_argument("--precisions", default=None, metavar="BASE,CAND,…",
                   help="from fp32, tf32, amp-fp16, amp-bf16, and on a GPU NAME+graphed (the whole step in a CUDA "
                        "graph, e.g. amp-bf16+graphed); baseline first (default: fp32,tf32,amp-fp16,amp-bf16 on a GPU, "
                        "fp32,amp-bf16 on a CPU)")
    p.add_argument("--batch-sizes", default=None, metavar="B1,B2,…",
                   help="batch sizes, comma-separated (default: a factory's example batch, else 1)")
    _common.add_shape_arg(p)
    _common.add_autotune_arg(p)
    p.add_argument("--optimizer", default="adam", choices=("adam", "sgd"), help="default adam (lr 1e-3)")
    p.add_argument("--loss", default="mae-to-ones", choices=("mae-to-ones", "cross-entropy"),
                   help="mae-to-ones: mean(|y-1|) of the first output (default); cross-entropy: the first "
                        "output as logits [batch, classes] against seeded random labels")
    p.add_argument("--device", default="auto", choices=("auto", "cpu", "cuda"),
                   help="auto: cuda when torch sees a GPU (speed claims need a GPU; a CPU run checks correctness)")
    p.add_argument("--steps", type=steps, default=20, help="steps per arm for the loss comparison (default 20)")
    p.add_argument("--budget", "--time-budget-s", dest="time_budget_s", type=_common.seconds_in_a_day,
                   default=DEFAULT_TRAIN_BUDGET_S,
                   help=f"measuring time per batch size, warmup excluded (default {DEFAULT_TRAIN_BUDGET_S:g} s); "
                        f"at least {MIN_ROUNDS} rounds run regardless")
    p.add_argument("--target-ci", type=_common.fraction, default=DEFAULT_TARGET_CI,
                   help=f"stop when every median's 95%% CI half-width is within this fraction (default {DEFAULT_TARGET_CI})")
    p.add_argument("--round-iterations", type=_common.iteration_count, default=None, help="steps per arm per round (default ~0.2 s worth)")
    p.add_argument("--copies", action="store_true",
                   help="GPU: include the input upload in each step's time (default: data already on the GPU)")
    p.add_argument("--find-max-batch", action="store_true",
                   help="GPU: also search the largest batch whose step fits in memory, per arm")
    p.add_argument("--max-batch-limit", type=_common.batch_size, default=4096, help="stop the search there (default 4096)")
    p.add_argument("--no-reasons", action="store_true", help="skip the profiler passes behind the reasons")
    _common.add_inputs_arg(p, what="its first batch feeds the timed steps and the loss comparison")
    p.add_argument("--seed", type=_common.seed_value, default=0, help="seed of the inputs, labels and nothing else")
    p.add_argument("--out", type=Path, default=Path("train_compare.json"), help="JSON output")
    p.add_argument("--html", type=Path, default=None, help="also write an HTML report here")
    p.add_argument("--md", action="store_true", help="also print the Markdown summary")
    _common.add_common_debug(p)
    _common.add_force_arg(p)
    p.set_defaults(func=run)


def _plan(args: argparse.Namespace) -> RoundPlan:
    _common.check_round_args(args)
    return RoundPlan(target_ci=args.target_ci, time_budget_s=args.time_budget_s,
                         round_iterations=args.round_iterations, copies=args.copies, cuda_graph=False)


def print_summary(data: dict) -> None:
    from ..train.page import summary_lines

    for line in summary_lines(data):
        print(line)


def run(args: argparse.Namespace) -> int:
    from ..train.api import train_compare
    from ..train.run import TrainHooks, TrainOptions, write_json

    _common.check_output_file(args.out, "--out", kind=TRAIN_JSON, args=args)  # before any training step (issue 12)
    _common.check_output_file(args.html, "--html", ".html", kind=HTML_PAGE, args=args)
    _common.check_distinct_outputs(out=args.out, html=args.html)
    plan = _plan(args)
    sizes = parse_batch_sizes(args.batch_sizes) if args.batch_sizes is not None else None
    options = TrainOptions(optimizer=args.optimizer, loss=args.loss, steps=args.steps, seed=args.seed,
                           find_max_batch=args.find_max_batch, max_batch_limit=args.max_batch_limit,
                           reasons=not args.no_reasons, autotune=args.autotune, device=args.device)

    def on_arm(batch: int, arm: str, solo) -> None:
        last = solo.losses[-1] if solo.losses else float("nan")
        print(f"batch {batch}: {arm} alone: loss {solo.losses[0]:.4g} → {last:.4g} in {len(solo.losses)} steps",
              file=sys.stderr)

    def on_batch(batch: int, outcome: InterleavedOutcome) -> None:
        widths = ", ".join(f"{k} ±{v:.2%}" if v == v else f"{k}: no 95% interval (too few loads)"
                           for k, v in outcome.half_widths.items())
        print(f"batch {batch}: {outcome.rounds} rounds in {outcome.elapsed_s:.1f} s ({outcome.stop_reason}; {widths})",
              file=sys.stderr)

    options = replace(options, shapes=_common.shapes(args), data=_common.load_inputs(args))
    data = train_compare(args.model, args.precisions, sizes, plan, options, TrainHooks(on_batch=on_batch, on_arm=on_arm))
    write_json(data, args.out)
    print_summary(data)
    if args.html is not None:
        from ..train.page import write_html

        write_html(data, args.html)
        print(f"report: {args.html}")
    if args.md:
        from ..train.page import markdown

        print()
        print(markdown(data), end="")
    print(f"train-compare: {args.out}")
    return 0
