"""The time budget (``compare --time-budget-s``) as one value: where it counts from, what the command's
imports took, the seconds per batch size, and the reserve kept for what runs after measuring.

Made once by the CLI (``TimeBudget.for_command``: from the process's start, engine builds left out)
or by a caller (``TimeBudget(per_batch_s)``: from when the comparison begins), handed down whole:
``compare.core`` asks it for each batch size's ``BatchWindow`` and the ``interleave`` loop plans to
that window. Before this type the budget lived in five forms across five files (issue 32).
"""
from __future__ import annotations

import math
import time
from dataclasses import dataclass, replace
from typing import Callable, Mapping

from ..errors import BadInput
from ..util.clock import CommandClock

# The flag that lets a run with --time-budget-s too small for the minimum design measure anyway (fewer loads,
# NOT VALID, the floor of 2 loads × 2 rounds possibly past the budget); without it such a run stops before
# its first round with exit 2 and the time the minimum needs (issue 44 #2).
FEWER_LOADS_FLAG = "--allow-fewer-loads"
# … the same for every compare of a session (a script of quick runs, the test suite's tiny budgets): "1"
FEWER_LOADS_ENV = "TRTPROF_ALLOW_FEWER_LOADS"


def fewer_loads_allowed(flag: bool, environ: Mapping[str, str] | None = None) -> bool:
    """May a given budget too small for the minimum measure anyway: ``FEWER_LOADS_FLAG`` or ``FEWER_LOADS_ENV``=1."""
    import os

    return flag or (os.environ if environ is None else environ).get(FEWER_LOADS_ENV, "") == "1"


@dataclass(frozen=True)
class MinimumCost:
    """What the minimum design was reckoned to need once a batch size's first load was open: ``least_s``
    seconds from the budget's start (the loads, the minimum rounds at their least blocks, the reserve and the
    slack), what that load took (``first_load_s``), and when it was open (``startup_s`` from the budget's
    start: the start-up before it included). ``measure.budget_memo`` keeps it for the next run."""

    least_s: float
    first_load_s: float
    startup_s: float


class BudgetTooSmall(BadInput):
    """A given --time-budget-s cannot hold the minimum design: said before the first round (exit 2);
    ``cost``: what the minimum was reckoned to need (None: not reckoned here)."""

    def __init__(self, message: str, *, cost: MinimumCost | None = None) -> None:
        super().__init__(message)
        self.cost = cost


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

# Without --time-budget-s a batch size's budget grows to what the minimum design (interleave.MIN_LOADS loads ×
# MIN_ROUNDS rounds of the designed blocks) needs, measured from its first load, whenever that is more than the
# default (issue 42 #5: before, only where a load took over 3 s or half the window was gone before the first
# load, so an ONNX Runtime-on-CUDA batch size with 1-s loads got 2 loads and NOT VALID). The cap: this many
# seconds after the batch size began. Why a minute: a default run answers in about a minute per batch size or
# says why not; loads of up to ~8 s each (6 of them, plus their rounds) fit in it: every ONNX Runtime load
# (CPU ~1 s, CUDA EP ~1 s) and a torch load that hit its cuDNN cache; a torch load that autotunes afresh
# (10-30 s on the H200) does not, and the line then names the --time-budget-s that fits (issue 33 set 60 s).
GROWN_BUDGET_CAP_S = 60.0


# compare's FP16 range analysis (advisory: it predicts overflow a GPU's FP16 would meet) starts no run of the
# model and no keep-list check after this share of one batch size's budget from when it began (issue 44 #2:
# 7.1 s of a 6-s budget, 5.4 s of it keep-lists the build had checked). Start-up must leave the minimum design
# most of the budget; the first run always happens, and the analysis says what it left out. The accuracy pass on
# the user's --inputs has the same share at each batch size (compare.accuracy_pass: its first batch always runs).
RANGE_ANALYSIS_SHARE = 0.15


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
    refuses: bool = False  # a given budget (the CLI's, without FEWER_LOADS_FLAG): too small → ``BudgetTooSmall``

    @property
    def deadline_s(self) -> float:
        return self.budget_s - self.reserve_s

    @property
    def slack_basis_s(self) -> float:
        return self.budget_s if self.per_batch_s is None else self.per_batch_s

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
               least_s: float | None = None, which: str = "first") -> tuple[BatchWindow, str]:
        """This window for loads that need ``needed_s`` seconds from ``started`` (``loads`` loads ×
        ``rounds`` rounds of the designed blocks, estimated from the ``which`` load, which took
        ``first_load_s``; ``least_s``: with the blocks shrunk to their least, default ``needed_s``), and
        the line that says so before measuring ("" when they fit). The default budget (``grows``) grows to
        ``needed_s`` whenever that is more than it, cheap loads or costly, up to ``GROWN_BUDGET_CAP_S``
        after the batch size began. A given budget stays; where not even ``least_s`` fits it, the line
        says what the minimum needs (``minimum_fits``: whether it does)."""
        least_s = needed_s if least_s is None else least_s
        if needed_s <= self.budget_s or (not self.grows and least_s <= self.budget_s):
            return self, ""
        target_s = needed_s if self.grows else least_s
        need = (f"the {which} load took {first_load_s:.1f} s: {loads} loads × {rounds} rounds need about "
                f"{target_s - self.opened_s:.0f} s here")
        fits = f"--time-budget-s {math.ceil(target_s - self.opened_s)} fits them"
        if not self.grows:
            return self, (f"{need}, more than {self.left_text('budget of --time-budget-s')}: "
                          f"fewer loads will run ({fits})")
        cap_s = self.opened_s + GROWN_BUDGET_CAP_S
        grown = replace(self, budget_s=min(target_s, max(cap_s, self.budget_s)))
        capped = (f", capped at {GROWN_BUDGET_CAP_S:.0f} s: fewer loads will run ({fits})"
                  if target_s > cap_s else f", at most {GROWN_BUDGET_CAP_S:.0f} s")
        return grown, (f"{need}; the budget grows to {grown.budget_s - self.opened_s:.0f} s for them (the "
                       f"default without --time-budget-s{capped})")

    def minimum_fits(self, least_s: float) -> bool:
        """Does the minimum design, its blocks shrunk to their least (``least_s`` from ``started``), fit
        this window's budget?"""
        return least_s <= self.budget_s

    def refusal(self, least_s: float, first_load_s: float, loads: int, rounds: int) -> str:
        """The one line a given budget too small for the minimum design stops with, before any round:
        what the minimum needs here (``least_s``: from ``started``, its blocks at their least) and how to
        ask for it."""
        need_s = math.ceil(least_s - self.opened_s)
        return (f"--time-budget-s {self.per_batch_s if self.per_batch_s is not None else self.budget_s:g} is too "
                f"small here: the first load took {first_load_s:.1f} s and {loads} loads × {rounds} rounds (the "
                f"minimum for a VALID result) need about {need_s} s per batch size; give --time-budget-s {need_s}, "
                f"or {FEWER_LOADS_FLAG} to measure fewer loads (NOT VALID)")


@dataclass(frozen=True)
class BudgetStart:
    """Where a time budget counts from and how it behaves, without its seconds: those are carried once, by
    the plan (``RoundPlan.time_budget_s``), and ``budget`` joins the two (issue 41 #3: ``CompareOptions``
    carried the seconds twice, kept equal by a ``ValueError``). ``start``: a ``time.perf_counter()`` value
    (None: when the comparison begins); ``imports_s``: what the end's reserve is a multiple of (None: the
    launch); ``grows``: the default budget (no --time-budget-s); ``refuses``: a given one too small for the
    minimum stops before measuring."""

    start: float | None = None
    imports_s: float | None = None
    counts_from: str = "compare start"
    grows: bool = False
    refuses: bool = False

    @classmethod
    def for_command(cls, clock: CommandClock, *, grows: bool = False, refuses: bool = False) -> BudgetStart:
        """The CLI's: from the command's start, its imports the reserve's basis; ``grows``: the default (no
        --time-budget-s); ``refuses``: a given one (without ``FEWER_LOADS_FLAG``)."""
        return cls(start=clock.started, imports_s=clock.imports_s, counts_from="command start (engine builds left out)",
                   grows=grows, refuses=refuses and not grows)

    def leaving_out(self, seconds: float) -> BudgetStart:
        """The same start with ``seconds`` (engine builds, a one-off) not counted: it moves later."""
        if self.start is None or seconds <= 0:
            return self
        return replace(self, start=self.start + seconds)

    def budget(self, per_batch_s: float) -> TimeBudget:
        """The budget of ``per_batch_s`` seconds per batch size from this start."""
        return TimeBudget(per_batch_s, start=self.start, imports_s=self.imports_s, counts_from=self.counts_from,
                          grows=self.grows, refuses=self.refuses)


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
    refuses: bool = False  # a given budget too small for the minimum stops before measuring (BudgetTooSmall)

    @classmethod
    def for_command(cls, per_batch_s: float, clock: CommandClock, *, grows: bool = False,
                    refuses: bool = False) -> TimeBudget:
        """The CLI's budget: from the command's start, its imports the reserve's basis; ``grows``: the
        default (no --time-budget-s), which grows to what the minimum loads need (``BatchWindow.fitted``);
        ``refuses``: a given one (without ``FEWER_LOADS_FLAG``), which stops when the minimum does not fit."""
        return BudgetStart.for_command(clock, grows=grows, refuses=refuses).budget(per_batch_s)

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

    def analysis_deadline(self, now: float) -> float:
        """The clock value past which compare's FP16 range analysis, or its accuracy pass on the user's inputs at
        one batch size, starts nothing more (``RANGE_ANALYSIS_SHARE``)."""
        return now + RANGE_ANALYSIS_SHARE * self.per_batch_s

    def window(self, index: int, now: float, batch_sizes: int) -> BatchWindow:
        """Batch size ``index``'s (0-based) window, asked when it begins at ``now``: done by ``index+1``
        budgets and by one budget after it began (a batch size that stopped early hands nothing on; one
        that ran over is caught up by the next), each keeping its share of the reserve."""
        began_s = self.elapsed_s(now)
        budget_s, reserve_s = batch_window(index, began_s, self.per_batch_s, self.reserve_s(batch_sizes), batch_sizes)
        return BatchWindow(started=self.started, budget_s=budget_s, reserve_s=reserve_s,
                           per_batch_s=self.per_batch_s, opened_s=began_s if index else 0.0, grows=self.grows,
                           refuses=self.refuses)


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


class StartupLog:
    """compare's start-up said as it runs (issue 44 #2: nothing was printed for the first 20-40 s): each part
    as it begins, with the seconds spent of the budget so far, to ``say`` (the CLI: stderr)."""

    def __init__(self, say: Callable[[str], None] | None, budget: TimeBudget,
                 clock: Callable[[], float] = time.perf_counter) -> None:
        self.say, self.budget, self.clock = say, budget, clock

    def __call__(self, what: str) -> None:
        if self.say is not None:
            self.say(f"start-up, {self.budget.elapsed_s(self.clock()):.1f} s in: {what}")


def preload_analysis(say: Callable[[str], None]) -> None:
    """Import what the analysis after measuring needs (scipy.stats and scipy.signal: 0.75 s on the idle
    2-core machine, 2–6 s loaded) before measuring, while the workers start: the budget's clock then
    counts it and the loop plans around it, instead of it running after the budget is spent. Said and
    done once (a second call finds them imported)."""
    import sys

    if "scipy.stats" in sys.modules and "scipy.signal" in sys.modules:
        return
    say("importing the statistics the analysis after measuring needs (scipy)")
    from scipy import signal, stats  # noqa: F401


FLOOR_LOADS = 2  # below the minimum, what runs even when the budget is spent: no interval without it
FLOOR_ROUNDS = 2  # … one round pair per load (two for a single load: its pairs are the interval's units)


def floor_overrun_line(needed_s: float, budget_s: float, reserve_s: float = 0.0, *, loads: int = FLOOR_LOADS,
                       rounds: int = FLOOR_ROUNDS) -> str:
    """The one line a run says when the floor (which runs regardless) ended past its budget:
    ``needed_s`` counts from the budget's start and includes the ``reserve_s`` kept for the end; ``loads``
    × ``rounds`` is what ran: the floor's rounds on every load opened (more than ``FLOOR_LOADS`` when the
    budget seemed to fit them and a slower machine then overran it)."""
    kept = f" ({reserve_s:.1f} s of it kept for the end)" if reserve_s > 0 else ""
    return (f"the floor of {loads} load{'s' if loads != 1 else ''} × {rounds} rounds needed {needed_s:.1f} s of a "
            f"{round(budget_s, 1):g} s budget{kept}")
