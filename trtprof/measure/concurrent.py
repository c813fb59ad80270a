"""What ran beside the timing: spans of work trtprof itself started, set against the timed rounds.

Why: a worker importing torch, loading its engines or computing the accuracy outputs takes CPU time,
memory bandwidth and (on a GPU host) the PCIe link and the GPU from the load being measured; two
such processes on the 2-core machine made a block 2.3x slower. The loop is built so that nothing of
its own runs during a timed round (``WorkerPool.settle``); this record is the evidence, per run, in the
compare JSON (``concurrent_with_timing``), and shows it if that ever stops being true.

Every span is in ``time.monotonic()`` seconds: CLOCK_MONOTONIC on Linux, one clock for every process
of the host, so a worker's own timestamp (when its engines were loaded) and the parent's compare.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

CLOCK = "time.monotonic (CLOCK_MONOTONIC: one clock for every process of the host)"


@dataclass(frozen=True)
class Span:
    """One piece of work (``what``) from ``start`` to ``end``; ``end`` None: not known to have ended
    before ``until`` (a worker still starting when the pool closed)."""

    what: str
    start: float
    end: float | None


def overlap_s(span: Span, timed: Sequence[Span], until: float) -> float:
    """Seconds of ``span`` that fall inside any of the ``timed`` spans (which do not overlap each other:
    loads take turns), an open span counted up to ``until``."""
    end = span.end if span.end is not None else until
    total = 0.0
    for t in timed:
        t_end = t.end if t.end is not None else until
        total += max(0.0, min(end, t_end) - max(span.start, t.start))
    return total


def record(busy: Sequence[Span], timed: Sequence[Span], origin: float, until: float) -> dict[str, Any]:
    """The JSON record: every span of work beside the timing (seconds from ``origin``, the pool's start)
    with how much of it overlapped a timed round, and the names of those that did."""
    rows: list[dict[str, Any]] = []
    for span in busy:
        rows.append({"what": span.what, "start_s": round(span.start - origin, 4),
                     "end_s": None if span.end is None else round(span.end - origin, 4),
                     "overlap_s": round(overlap_s(span, timed, until), 4)})
    first = min((t.start for t in timed), default=None)
    return {"clock": CLOCK, "timed_calls": len(timed),
            "timed_s": round(sum((t.end if t.end is not None else until) - t.start for t in timed), 4),
            "first_timed_s": None if first is None else round(first - origin, 4),
            "work": rows, "overlapping": [str(r["what"]) for r in rows if float(r["overlap_s"]) > 0]}
