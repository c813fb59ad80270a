"""Argument helpers shared by subcommands."""
from __future__ import annotations

import argparse
from typing import Sequence

from . import add_common_debug
from ..inputs import parse_batch_sizes, parse_int_range, parse_shape_arg
from ..spec import Precision
from ..timing import DEFAULT_ITERATIONS, DEFAULT_WARMUP, TimingConfig


def add_shape_args(parser: argparse.ArgumentParser, *, batch_default: str | None) -> None:
    parser.add_argument(
        "--batch-sizes", default=batch_default, metavar="B1,B2,…",
        help="batch sizes, comma-separated" + (f" (default {batch_default})" if batch_default else
                                               " (default: the sizes each engine was built for)"),
    )
    parser.add_argument(
        "--shape", action="append", default=[], metavar="NAME:D0xD1x…",
        help="full shape of an input with dynamic dims other than batch; the first dim is replaced by "
             "each batch size (repeatable)",
    )


def add_timing_args(parser: argparse.ArgumentParser) -> None:
    add_common_debug(parser)
    g = parser.add_argument_group("timing")
    g.add_argument("--warmup", type=int, default=DEFAULT_WARMUP, help=f"warmup runs (default {DEFAULT_WARMUP})")
    g.add_argument("--warmup-ms", type=float, default=None, help="also warm up for at least this many ms")
    g.add_argument("--iterations", type=int, default=DEFAULT_ITERATIONS,
                   help=f"timed runs per engine and batch size (default {DEFAULT_ITERATIONS})")
    g.add_argument("--duration-s", type=float, default=None,
                   help="also keep measuring until this many seconds have passed")
    g.add_argument("--no-copies", action="store_true", help="GPU: time compute only, without H2D/D2H copies")
    g.add_argument("--cuda-graph", action="store_true", help="GPU: capture the enqueue in a CUDA graph and replay it")
    g.add_argument("--spin-wait", action="store_true", help="GPU: busy-wait for completion instead of blocking sync")
    g.add_argument("--int-range", default="0,100", metavar="LOW,HIGH", help="range of random integer inputs")
    g.add_argument("--seed", type=int, default=0, help="seed of the random inputs")


def add_autotune_arg(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--no-autotune", dest="autotune", action="store_false",
                        help="torch: let cuDNN pick kernels by heuristics instead of timing them "
                             "(cudnn.benchmark off); default: autotuned, as TensorRT always is")


def timing_config(args: argparse.Namespace) -> TimingConfig:
    return TimingConfig(
        warmup=args.warmup,
        warmup_ms=args.warmup_ms,
        iterations=args.iterations,
        duration_s=args.duration_s,
        copies=not args.no_copies,
        cuda_graph=args.cuda_graph,
        spin_wait=args.spin_wait,
    )


def batch_sizes(args: argparse.Namespace) -> tuple[int, ...] | None:
    return parse_batch_sizes(args.batch_sizes) if args.batch_sizes else None


def shapes(args: argparse.Namespace) -> dict[str, tuple[int, ...]]:
    return dict(parse_shape_arg(s) for s in args.shape)


def int_range(args: argparse.Namespace) -> tuple[int, int]:
    return parse_int_range(args.int_range)


def precisions_from_flags(args: argparse.Namespace) -> list[Precision]:
    chosen = [p for p in (Precision.FP32, Precision.TF32, Precision.FP16) if getattr(args, p.value)]
    return chosen or [Precision.FP32]


def format_table(headers: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    cells = [[str(h) for h in headers]] + [[str(c) for c in row] for row in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(headers))]
    lines = ["  ".join(c.rjust(w) if i else c.ljust(w) for i, (c, w) in enumerate(zip(row, widths))) for row in cells]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)
