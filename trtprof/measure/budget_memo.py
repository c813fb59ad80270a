"""What the minimum design needed in an earlier compare of the same engines, kept so that the next run with a
given ``--time-budget-s`` too small for it is refused before anything is loaded (issue 44 #2: the refusal came
only after the first engine load, 28-66 s into a 6-s budget on the loaded 2-core machine).

After a batch size's first load the loop reckons what the minimum design (``interleave.MIN_LOADS`` loads ×
``MIN_ROUNDS`` rounds, its blocks at their least, the reserve and the slack) needs from the budget's start
(``budget.MinimumCost``); the first batch size's reckoning is written here, one small JSON file per set of
engines, batch size and isolation, in ``<engines dir>/.budget/``. A later run looks it up before its workers
start: where the memo's need is over ``PRIOR_MARGIN`` × the given budget, the run stops there (exit 2) with
the line ``prior_refusal`` makes; otherwise (or with no memo: the first run of these engines) its first load
is the probe, and the refusal, if any, comes after that load and before any round, as before.
"""
from __future__ import annotations

import hashlib
import json
import math
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping, Sequence

from .budget import FEWER_LOADS_FLAG, BatchWindow, BudgetTooSmall, MinimumCost, StartupLog, TimeBudget

MEMO_DIR = ".budget"  # inside the engines dir: not an entry (cache ls/prune read only entries' metadata)
# An earlier run's need refuses only when it is this much over the budget: the machine's load moves a load's
# seconds (the same light_squeezenet needed 26 s at load 2 and 76 s at load 9), and a budget that may fit
# now gets its probe (the first load) rather than a refusal from another hour's load.
PRIOR_MARGIN = 1.25
# … and only while the machine is about as busy as it was then: at a 1-min load average under this share of
# the memo's, the first load is the probe again (and its reckoning replaces the memo).
QUIETER_SHARE = 0.5


@dataclass(frozen=True)
class PriorMinimum:
    """An earlier run's ``MinimumCost`` with when (``recorded``, UTC) and under which load (1-min average)."""

    cost: MinimumCost
    recorded: str
    load: float

    def to_json(self) -> dict[str, Any]:
        return {"least_s": round(self.cost.least_s, 3), "first_load_s": round(self.cost.first_load_s, 3),
                "startup_s": round(self.cost.startup_s, 3), "recorded": self.recorded, "load": round(self.load, 2)}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> PriorMinimum:
        cost = MinimumCost(float(data["least_s"]), float(data["first_load_s"]), float(data["startup_s"]))
        if not all(math.isfinite(v) and v >= 0 for v in (cost.least_s, cost.first_load_s, cost.startup_s)):
            raise ValueError("not a finite, non-negative number of seconds")
        return cls(cost, str(data["recorded"]), float(data["load"]))


def memo_path(records: Mapping[str, Any], batch: int, isolation: str) -> Path | None:
    """Where the memo of these engines (arm → ``EngineRecord``; the order is the arms') at ``batch`` lives,
    or None for records not read from an engines dir."""
    first = next(iter(records.values()))
    if getattr(first, "meta_path", None) is None:
        return None
    key = json.dumps([[name, r.artifact_sha256, r.backend] for name, r in records.items()] + [batch, isolation])
    return Path(first.meta_path).parent / MEMO_DIR / f"{hashlib.sha256(key.encode()).hexdigest()[:16]}.json"


def recall(path: Path | None) -> PriorMinimum | None:
    """The memo at ``path``; None where there is none or it cannot be read (a memo is advice, never an error)."""
    if path is None:
        return None
    try:
        return PriorMinimum.from_json(json.loads(path.read_text(encoding="utf-8")))
    except (OSError, ValueError, KeyError, TypeError):
        return None


def remember(path: Path | None, cost: MinimumCost | None) -> None:
    """Keep ``cost`` at ``path`` for the next run; an engines dir that cannot be written keeps nothing."""
    if path is None or cost is None:
        return
    from ..util.files import atomic_write_text

    prior = PriorMinimum(cost, time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), os.getloadavg()[0])
    try:
        path.parent.mkdir(exist_ok=True)
        atomic_write_text(path, json.dumps(prior.to_json()) + "\n")
    except OSError:
        pass


def prior_refusal(prior: PriorMinimum | None, window: BatchWindow, load_now: float) -> str:
    """The line a given budget stops with before anything is loaded, where ``prior`` (an earlier run of
    these engines) needed over ``PRIOR_MARGIN`` × ``window``'s budget for the minimum design and the machine
    (its 1-min load average ``load_now``) is not much quieter than then (``QUIETER_SHARE``); "" otherwise (no
    memo, a budget that grows or may proceed, one that may fit, or a quieter machine)."""
    if prior is None or not window.refuses or prior.cost.least_s <= PRIOR_MARGIN * window.budget_s \
            or load_now < QUIETER_SHARE * prior.load:
        return ""
    need_s = math.ceil(prior.cost.least_s)
    cost = prior.cost
    return (f"--time-budget-s {window.slack_basis_s:g} is too small here: in an earlier run of these engines "
            f"({prior.recorded}, load {prior.load:.1f}) the first load was open {cost.startup_s:.1f} s after the "
            f"start, took {cost.first_load_s:.1f} s, and the minimum for a VALID result needed about {need_s} s per "
            f"batch size; give --time-budget-s {need_s}, or {FEWER_LOADS_FLAG} to measure fewer loads (NOT VALID); "
            "nothing was loaded")


def before_loading_line(prior: PriorMinimum | None, window: BatchWindow) -> str:
    """What the start-up says of the minimum before the workers start, for a given budget that refuses and was
    not refused by ``prior_refusal`` ("" for one that grows or proceeds): an earlier run's need, or that the
    first load is the probe."""
    if not window.refuses:
        return ""
    if prior is None:
        return ("nothing known yet of these engines' loads here: the first load is the probe of what the minimum "
                "needs (a budget too small is refused after it, before any round)")
    return (f"an earlier run of these engines ({prior.recorded}, load {prior.load:.1f}) needed about "
            f"{math.ceil(prior.cost.least_s)} s for the minimum: within reach of this budget or on a quieter "
            "machine, the first load tells")


def checked_before_loading(records: Mapping[str, Any], batch_sizes: Sequence[int], isolation: str, budget: TimeBudget,
                           say: StartupLog) -> StartupLog:
    """Before the workers start: raise ``BudgetTooSmall`` where an earlier run of these engines at the first
    batch size says the given budget cannot hold the minimum (``prior_refusal``), else say what is known of it
    (``before_loading_line``) on ``say``, which is returned (the start-up's log from here on)."""
    window = budget.window(0, say.clock(), len(batch_sizes))
    prior = recall(memo_path(records, batch_sizes[0], isolation))
    refusal = prior_refusal(prior, window, os.getloadavg()[0])
    if refusal:
        raise BudgetTooSmall(refusal if len(batch_sizes) == 1 else f"batch {batch_sizes[0]}: {refusal}")
    line = before_loading_line(prior, window)
    if line:
        say(line)
    return say
