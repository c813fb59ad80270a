"""Issue 41, item 2: the compare result printed and the one saved are one value. ``CompareReport.to_json`` read
the clock (the budget spent) every time it was called, so the JSON the CLI printed from and the file it wrote a
moment later differed; once ``seal``ed it reads none."""
from __future__ import annotations

import json
import time
from pathlib import Path

from trtprof.compare import core as cmp
from trtprof.measure.interleave import RoundPlan
from trtprof.measure.budget import TimeBudget
from trtprof.util.clock import CommandClock


def report() -> cmp.CompareReport:
    now = time.perf_counter()
    budget = TimeBudget.for_command(5.0, CommandClock(started=now, imported=now), grows=False)
    return cmp.CompareReport(model="m", backend="onnxruntime", plan=RoundPlan(), comparisons=[], results=[],
                             environment={}, budget={"time_budget_s": 5.0}, time_budget=budget)


def test_unsealed_reports_read_the_clock_and_sealed_ones_do_not(tmp_path: Path):
    r = report()
    first = r.to_json()["budget"]["spent_s"]
    time.sleep(0.02)
    assert r.to_json()["budget"]["spent_s"] > first  # the defect the seal removes
    r.seal()
    sealed = r.to_json()
    time.sleep(0.02)
    assert r.to_json() == sealed
    r.write_json(tmp_path / "c.json")
    assert json.loads((tmp_path / "c.json").read_text()) == json.loads(json.dumps(sealed))


def test_seal_is_fixed_once():
    r = report().seal()
    spent = r.spent_s
    time.sleep(0.02)
    assert r.seal().spent_s == spent
