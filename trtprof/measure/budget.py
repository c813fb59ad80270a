"""The time budget (``compare --time-budget-s``) as one value: where it counts from, what the command's
imports took, the seconds per batch size, and the reserve kept for what runs after measuring.

Made once by the CLI (``TimeBudget.for_command``: from the process's start, engine builds left out)
or by a caller (``TimeBudget(per_batch_s)``: from when the comparison begins), handed down whole:
``compare.core`` asks it for each batch size's ``BatchWindow`` and the ``interleave`` loop plans to
that window. Before this type the budget lived in five forms across five files (issue 32).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, replace

from ..util.clock import CommandClock


# What runs after measuring (telling the workers to exit, the analysis, printing, writing the JSON, the
# interpreter's exit) is Python in this process, not the model's work, like the interpreter's start and
# trtprof's imports before the command began, and it runs on the same machine under the same load: its
# seconds are estimated as this multiple of those, per batch size, measured in the same run. Measured
# tails: the shared 2-core machine (load 1-10, benchmarks/budget_cpu.py, budget_cpu-2026-12-01-imports.txt)
# medians 0.32-1.04 s per setting (max 1.37) against reserves of median 0.41-0.94 s; the H200 (torch backend, benchmarks/compare_timeline.py) 1.5 s
# (closing the workers 0.4 s, the interpreter's exit with its CUDA context 1.15 s) where the imports took
# 0.44-0.67 s. The launch up to the comparison's start (the former basis) also holds the backend's
# imports, engine loads and a what-if's checks: 10-21 s on the H200, which reserved 10-41 s for a
# 1.5-s tail. The loop's slack (interleave.BUDGET_PLAN_SHARE) takes up what the estimate misses.
TAIL_PER_IMPORTS = 2.0  # per batch size

# Without --time-budget-s a batch size's budget grows to what the minimum loads need, measured from its
# first load, up to this (issue 33: a default run that answers — on the H200 a torch load cost 10-30 s
# and the 12-s default gave 2 loads, a t interval with 1 degree of freedom — but within a minute).
GROWN_BUDGET_CAP_S = 60.0
# … and only where a load is costly: a first load (opened and warmed up, a worker's start-up it waited for
# included; with workers the wait shows in the warm-up, so both count) of this or less keeps the default.
# Measured on the shared 2-core CPU at load 9-11 (the ONNX Runtime demo model, batch 1 and 8, workers and
# in-process): 1.02-1.08 s, ~1 s of it the first warm-up (FIRST_WARMUP_MS per arm, by design)
# (benchmarks/first_load_cpu.py, results/first_load_cpu-2026-12-01.txt): CPU runs, CI and the calibration
# keep their 12 s. A torch load on the H200 took 10-30 s before issue 33 #1.
COSTLY_LOAD_S = 3.0
# … or where less than this share of one batch size's budget was left when its first load began: the
# window went to one-offs before any load (on the H200, torch, 2026-12-02: six workers starting 14 s and
# load 0's accuracy pass 16 s, 36 s into a 12-s default, with first loads of 1.9-2.3 s, so the default
# never grew and batch 1 and 32 got 2 loads each) or to the batch sizes before it. On the CPU the launch
# before the first load takes 1-3 s of the 12 s (the demo model, benchmarks/first_load_cpu.py): unchanged.
LEFT_AT_FIRST_LOAD_SHARE = 0.5


def tail_reserve_s(imports_s: float, batch_sizes: int) -> float:
    """Seconds of the budget kept for what runs after measuring, from ``imports_s``, the seconds the
    interpreter's start and trtprof's imports took in this process (``TAIL_PER_IMPORTS`` per batch size)."""
    return TAIL_PER_IMPORTS * max(imports_s, 0.0) * batch_sizes


@dataclass(frozen=True)
class BatchWindow:
    """What one batch size's loop may spend, in seconds from ``started`` (a clock value): it must be done
    by ``budget_s`` less ``reserve_s`` (kept for what runs after it); ``per_batch_s`` is one batch size's
    budget, of which the loop keeps a share as slack."""

    started: float
    budget_s: float
    reserve_s: float = 0.0
    per_batch_s: float | None = None  # default: budget_s
    opened_s: float = 0.0  # seconds from ``started`` when this batch size began (its cap counts from there)
    grows: bool = False  # the default budget (no --time-budget-s): may grow to fit the loads (``fitted``)

    @property
    def deadline_s(self) -> float:
        return self.budget_s - self.reserve_s

    @property
    def slack_basis_s(self) -> float:
        return self.budget_s if self.per_batch_s is None else self.per_batch_s

    def spent_before_loads(self, first_load_began_s: float | None) -> bool:
        """Was less than ``LEFT_AT_FIRST_LOAD_SHARE`` of one batch size's budget left when its first load
        began (one-offs before measuring, or the batch sizes before it, took the window)?"""
        if first_load_began_s is None:
            return False
        return self.budget_s - first_load_began_s < LEFT_AT_FIRST_LOAD_SHARE * self.slack_basis_s

    def left_text(self, kind: str) -> str:
        """What is left of the budget for this batch size, in words: "the 12 s default budget", or, where
        the batch sizes before it overran the budget (it counts from the command's start), "what is left
        of the default budget: nothing (the batch sizes before this one used 6 s more than theirs)"."""
        left = self.budget_s - self.opened_s
        if left > 0:
            return f"the {left:.0f} s {kind}" if left >= 1 else f"the {left:.1f} s left of the {kind}"
        over = f"{-left:.0f} s more than theirs" if -left >= 1 else "all of it"
        return f"what is left of the {kind}: nothing (the batch sizes before this one used {over})"

    def fitted(self, needed_s: float, first_load_s: float, loads: int, rounds: int, *,
               least_s: float | None = None, first_load_began_s: float | None = None,
               which: str = "first", grown_before: bool = False) -> tuple[BatchWindow, str]:
        """This window for loads that need ``needed_s`` seconds from ``started`` (``loads`` loads ×
        ``rounds`` rounds of the designed blocks, estimated from the first load, which took
        ``first_load_s``; ``least_s``: with the blocks shrunk to their least, default ``needed_s``), and
        the line that says so before measuring ("" when they fit). The default budget grows to
        ``needed_s`` where a load is costly (``COSTLY_LOAD_S``), up to ``GROWN_BUDGET_CAP_S`` after the
        batch size began; otherwise it stays, and where not even ``least_s`` fits, the line says how long
        the loads would need. It grows too where less than ``LEFT_AT_FIRST_LOAD_SHARE`` of one batch
        size's budget was left when the first load began (``first_load_began_s``, from ``started``), and
        again after the second load (``which``) where the first fit grew it (``grown_before``)."""
        least_s = needed_s if least_s is None else least_s
        costly = self.grows and (grown_before or first_load_s > COSTLY_LOAD_S
                                 or self.spent_before_loads(first_load_began_s))
        if needed_s <= self.budget_s or (not costly and least_s <= self.budget_s):
            return self, ""
        target_s = needed_s if costly else least_s
        need = (f"the {which} load took {first_load_s:.1f} s: {loads} loads × {rounds} rounds need about "
                f"{target_s - self.opened_s:.0f} s here")
        fits = f"--time-budget-s {math.ceil(target_s - self.opened_s)} fits them"
        if not self.grows:
            return self, (f"{need}, more than {self.left_text('budget of --time-budget-s')}: "
                          f"fewer loads will run ({fits})")
        if not costly:  # the default stays where loads are cheap: say what that costs
            return self, (f"{need}, more than {self.left_text('default budget')}: fewer loads "
                          f"will run (it grows only where a load takes over {COSTLY_LOAD_S:g} s; {fits})")
        cap_s = self.opened_s + GROWN_BUDGET_CAP_S
        grown = replace(self, budget_s=min(target_s, max(cap_s, self.budget_s)))
        capped = f", capped at {GROWN_BUDGET_CAP_S:.0f} s: fewer loads will run" if target_s > cap_s else ""
        why = ("" if first_load_s > COSTLY_LOAD_S or grown_before else
               f"; less than {LEFT_AT_FIRST_LOAD_SHARE:.0%} of the default budget was left when the first load began "
               "(start-up, the accuracy pass or the batch sizes before this one took it)")
        return grown, (f"{need}{why}; the budget grows to {grown.budget_s - self.opened_s:.0f} s for them (the "
                       f"default without --time-budget-s{capped or f', at most {GROWN_BUDGET_CAP_S:.0f} s'})")


@dataclass(frozen=True)
class TimeBudget:
    """``per_batch_s`` seconds per batch size, counted from ``start`` (a ``time.perf_counter()`` value;
    None: when the comparison begins, which ``began`` fixes), ``imports_s`` the seconds the command's
    start and imports took (what the reserve for the end is a multiple of; None: the launch, from
    ``start`` to the comparison's start, is). ``launch_s`` is set by ``began``."""

    per_batch_s: float
    start: float | None = None
    imports_s: float | None = None
    launch_s: float | None = None
    counts_from: str = "compare start"
    grows: bool = False  # no --time-budget-s: each batch size's window may grow to fit its loads (BatchWindow.fitted)

    @classmethod
    def for_command(cls, per_batch_s: float, clock: CommandClock, *, grows: bool = False) -> TimeBudget:
        """The CLI's budget: from the command's start, its imports the reserve's basis; ``grows``: the
        default (no --time-budget-s), which may grow where loads are costly."""
        return cls(per_batch_s, start=clock.started, imports_s=clock.imports_s,
                   counts_from="command start (engine builds left out)", grows=grows)

    def leaving_out(self, seconds: float) -> TimeBudget:
        """The same budget with ``seconds`` (engine builds, a one-off) not counted: its start moves later."""
        if self.start is None or seconds <= 0:
            return self
        return replace(self, start=self.start + seconds)

    def began(self, now: float) -> TimeBudget:
        """Fixed at the comparison's start ``now``: the start (now, if none was given) and the launch."""
        start = now if self.start is None else self.start
        return replace(self, start=start, launch_s=now - start)

    @property
    def started(self) -> float:
        if self.start is None:
            raise ValueError("TimeBudget.began() was not called: the budget has no start yet")
        return self.start

    @property
    def reserve_basis(self) -> tuple[str, float]:
        """What the end's reserve is a multiple of, and its seconds."""
        if self.imports_s is not None:
            return "imports", self.imports_s
        return "launch", self.launch_s or 0.0

    def reserve_s(self, batch_sizes: int) -> float:
        return tail_reserve_s(self.reserve_basis[1], batch_sizes)

    def elapsed_s(self, now: float) -> float:
        return now - self.started

    def window(self, index: int, now: float, batch_sizes: int) -> BatchWindow:
        """Batch size ``index``'s (0-based) window, asked when it begins at ``now``: done by ``index+1``
        budgets and by one budget after it began (a batch size that stopped early hands nothing on; one
        that ran over is caught up by the next), each keeping its share of the reserve."""
        began_s = self.elapsed_s(now)
        budget_s, reserve_s = batch_window(index, began_s, self.per_batch_s, self.reserve_s(batch_sizes), batch_sizes)
        return BatchWindow(started=self.started, budget_s=budget_s, reserve_s=reserve_s,
                           per_batch_s=self.per_batch_s, opened_s=began_s if index else 0.0, grows=self.grows)


def batch_window(index: int, began_s: float, per_batch_s: float, reserve_s: float, batch_sizes: int) -> tuple[float, float]:
    """(budget, reserve) of batch size ``index`` (0-based), both in seconds from the budget's start:
    done by ``index+1`` budgets and by one budget after it began at ``began_s`` (a batch size that
    stopped early hands nothing on; one that ran over is caught up by the next), each keeping its
    share of ``reserve_s`` (the command's, for what runs after measuring)."""
    share_s = reserve_s / batch_sizes
    began_s = began_s if index else 0.0  # the first counts from the start: start-up is its
    budget_s = min((index + 1) * per_batch_s, began_s + per_batch_s)
    deadline_s = min((index + 1) * (per_batch_s - share_s), began_s + per_batch_s - share_s)
    return budget_s, budget_s - deadline_s
