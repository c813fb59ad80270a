"""The serving options bench and compare share (``--concurrency``, ``--slo-ms``, …) and their output:
a table per point and the throughput-at-target verdicts (``trtprof.serving.driver``, ``trtprof.stats.slo``)."""
from __future__ import annotations

import argparse
import sys
from typing import Any, Mapping

from ..serving.driver import (
    DEFAULT_MIN_REQUESTS,
    DEFAULT_ROUNDS,
    DEFAULT_WARMUP_S,
    DEFAULT_WINDOW_S,
    MAX_WINDOW_S,
    ServingConfig,
)
from . import _common
from ..util.bounds import Bound, shown
from ..system.validity import MIN_SERVING_ROUNDS, stamp_lines


# One thread (and on a GPU one stream, buffers and context) per request in flight: beyond this the
# driver measures Python's thread scheduling more than the engine.
MAX_CONCURRENCY = 64


def concurrency_levels(text: str) -> tuple[int, ...]:
    """``1,2,4,8`` → (1, 2, 4, 8); an argparse error (exit 2, one line) for anything else."""
    try:
        levels = tuple(int(t) for t in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"{shown(text)}: expected positive integers like 1,2,4,8") from None
    if not levels or any(n < 1 for n in levels):
        raise argparse.ArgumentTypeError(f"{shown(text)}: expected positive integers like 1,2,4,8")
    if any(n > MAX_CONCURRENCY for n in levels):
        raise argparse.ArgumentTypeError(f"{shown(text)}: at most {MAX_CONCURRENCY} requests in flight")
    return tuple(sorted(set(levels)))


# ``--window-s``: > 0 and at most ``MAX_WINDOW_S`` (1e12 would sleep past every clock's range)
window_seconds = Bound(float, 0, MAX_WINDOW_S, why="per window", unit=" s", low_open=True)
# ``--serving-rounds``: each round is one window per point (precision × batch × concurrency)
MAX_SERVING_ROUNDS = 1_000
serving_rounds = Bound(int, 1, MAX_SERVING_ROUNDS, why="each is a window per point")


def add_serving_args(parser: argparse.ArgumentParser) -> None:
    g = parser.add_argument_group("serving (throughput under concurrency; see docs/serving.md)")
    g.add_argument("--concurrency", type=concurrency_levels, default=None, metavar="N1,N2,…",
                   help="also measure N requests in flight (closed loop; N threads, on a GPU each with its own "
                        "stream and context): throughput and per-request latency per level")
    g.add_argument("--slo-ms", type=_common.ms_in_a_day, default=None, metavar="P99_MS",
                   help="with --concurrency: per precision the highest throughput whose p99 meets this target, "
                        "and the candidate-vs-baseline verdict on it")
    g.add_argument("--window-s", type=window_seconds, default=DEFAULT_WINDOW_S, metavar="S",
                   help=f"measured window per point and round (default {DEFAULT_WINDOW_S:g}, at most {MAX_WINDOW_S:g})")
    g.add_argument("--serving-rounds", type=serving_rounds, default=DEFAULT_ROUNDS, metavar="R",
                   help=f"windows per point, interleaved across precisions; the verdict's CI and a VALID stamp "
                        f"need >= {MIN_SERVING_ROUNDS} (default {DEFAULT_ROUNDS})")


def serving_config(args: argparse.Namespace, *, copies: bool = True) -> ServingConfig | None:
    """The sweep's settings, or None without ``--concurrency`` (``--slo-ms`` alone is refused)."""
    if args.concurrency is None:
        if args.slo_ms is not None:
            from ..errors import BadInput

            raise BadInput("--slo-ms needs --concurrency (e.g. --concurrency 1,2,4,8 --slo-ms 10)")
        return None
    return ServingConfig(concurrency=args.concurrency, window_s=args.window_s, warmup_s=DEFAULT_WARMUP_S,
                         min_requests=DEFAULT_MIN_REQUESTS, rounds=args.serving_rounds, copies=copies,
                         threads=getattr(args, "threads", None), slo_ms=args.slo_ms,
                         margin=getattr(args, "margin", None))  # compare's --margin reaches the serving verdicts too


def print_sweep(sweep: Mapping[str, Any]) -> None:
    from ..report.serving_page import fit_lines, point_rows, slo_lines

    print()
    for line in stamp_lines(sweep.get("validity")):  # first: VALID or NOT VALID and why (system.validity)
        print(("serving: " if not line.startswith(" ") else "") + line)
    print(_common.format_table(("precision", "batch", "in flight", "samples/s", "requests/s", "p50 ms", "p99 ms",
                                "memory in use", "energy/inference"), point_rows(sweep["points"], reasons=False)))
    for line in fit_lines(sweep.get("fits")) + slo_lines(sweep.get("slo")):
        print(line)


def progress(total: int):
    """A tqdm bar over the sweep's windows (on stderr, hidden when not a terminal)."""
    from tqdm import tqdm

    bar = tqdm(total=total, unit="window", desc="serving", file=sys.stderr, disable=None, leave=False,
               dynamic_ncols=True)

    def on_point(point: Any, round_index: int) -> None:
        bar.set_postfix_str(f"{point.arm} batch {point.batch_size} ×{point.concurrency} round {round_index + 1}")
        bar.update(1)

    return on_point, bar.close
