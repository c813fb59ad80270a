"""Issue 44 #2: an explicit --time-budget-s refused before anything is loaded where an earlier run of the same
engines needed more (measure.budget_memo), and compare's first line before its modules are imported. Fake
clocks (named so) for the seconds; real CLI runs for the order of the lines (no timing threshold)."""
from __future__ import annotations

import json
import math
import os
import re
import subprocess
import sys
from types import SimpleNamespace

import pytest

from trtprof.measure import budget_memo
from trtprof.measure.budget import BatchWindow, BudgetTooSmall, MinimumCost, StartupLog, TimeBudget
from trtprof.measure.budget_memo import PRIOR_MARGIN, QUIETER_SHARE, PriorMinimum


def records(folder, shas=("a" * 64, "b" * 64)):
    """Two arms' records as compare hands them over (only what the memo reads)."""
    meta = folder / "m.fp32.onnxruntime.0123.json"
    return {name: SimpleNamespace(meta_path=meta, artifact_sha256=sha, backend="onnxruntime")
            for name, sha in zip(("fp32", "fp16"), shas)}


def prior(least_s: float) -> PriorMinimum:
    return PriorMinimum(MinimumCost(least_s, 1.0, 8.5), "2026-12-02 16:18 UTC", 7.6)


REFUSING = BatchWindow(started=0.0, budget_s=6.0, per_batch_s=6.0, refuses=True)


@pytest.mark.parametrize("least_s, refused", [(PRIOR_MARGIN * 6.0, False), (PRIOR_MARGIN * 6.0 + 0.01, True)])
def test_an_earlier_need_just_over_the_margin_refuses_and_one_just_inside_gets_its_probe(least_s, refused):
    line = budget_memo.prior_refusal(prior(least_s), REFUSING, load_now=7.6)
    assert bool(line) is refused
    if refused:
        need = math.ceil(least_s)
        assert line.startswith("--time-budget-s 6 is too small here: in an earlier run of these engines "
                               "(2026-12-02 16:18 UTC, load 7.6) the first load was open 8.5 s after the start")
        assert f"needed about {need} s per batch size; give --time-budget-s {need}, or --allow-fewer-loads" in line
        assert line.endswith("nothing was loaded") and "\n" not in line
    else:
        assert "within reach" in budget_memo.before_loading_line(prior(least_s), REFUSING)


@pytest.mark.parametrize("load_now, refused", [(QUIETER_SHARE * 7.6, True), (QUIETER_SHARE * 7.6 - 0.01, False)])
def test_a_much_quieter_machine_gets_its_probe_rather_than_an_earlier_hour_s_refusal(load_now, refused):
    """The memo was made at load 7.6; at under half of that the first load is the probe again."""
    assert bool(budget_memo.prior_refusal(prior(60.0), REFUSING, load_now)) is refused


def test_only_a_refusing_budget_is_refused_or_told_before_loading():
    for window in (BatchWindow(started=0.0, budget_s=6.0, grows=True),  # the default: grows to fit
                   BatchWindow(started=0.0, budget_s=6.0)):  # --allow-fewer-loads: measures anyway
        assert budget_memo.prior_refusal(prior(600.0), window, load_now=7.6) == ""
        assert budget_memo.before_loading_line(prior(600.0), window) == ""
    assert budget_memo.prior_refusal(None, REFUSING, load_now=7.6) == ""
    assert "the first load is the probe" in budget_memo.before_loading_line(None, REFUSING)


def test_the_memo_round_trips_and_a_bad_one_is_no_memo(tmp_path):
    path = budget_memo.memo_path(records(tmp_path), 1, "process")
    assert path is not None and path.parent == tmp_path / budget_memo.MEMO_DIR
    assert budget_memo.recall(path) is None  # none yet
    budget_memo.remember(path, MinimumCost(26.04, 1.02, 8.51))
    kept = budget_memo.recall(path)
    assert kept is not None and kept.cost == MinimumCost(26.04, 1.02, 8.51) and kept.recorded.endswith("UTC")
    for bad in ("{", '{"least_s": "nan", "first_load_s": 1, "startup_s": 1, "recorded": "x", "load": 1}',
                '{"least_s": 1}', "[]"):
        path.write_text(bad, encoding="utf-8")
        assert budget_memo.recall(path) is None
    budget_memo.remember(None, MinimumCost(1.0, 1.0, 1.0))  # no engines dir: nothing kept, nothing raised
    budget_memo.remember(tmp_path / "no" / "such" / "dir" / "x.json", MinimumCost(1.0, 1.0, 1.0))  # unwritable


def test_the_memo_is_per_engine_set_batch_size_and_isolation(tmp_path):
    one = budget_memo.memo_path(records(tmp_path), 1, "process")
    assert len({one, budget_memo.memo_path(records(tmp_path), 8, "process"),
                budget_memo.memo_path(records(tmp_path), 1, "in-process"),
                budget_memo.memo_path(records(tmp_path, shas=("a" * 64, "c" * 64)), 1, "process")}) == 4
    assert budget_memo.memo_path({"a": SimpleNamespace(meta_path=None)}, 1, "process") is None


def test_check_before_loading_refuses_on_its_fake_clock_or_says_what_is_known(tmp_path, monkeypatch):
    monkeypatch.setattr(budget_memo.os, "getloadavg", lambda: (4.0, 4.0, 4.0))  # then and now
    recs = records(tmp_path)
    budget = TimeBudget(6.0, start=100.0, refuses=True).began(101.0)
    said: list[str] = []
    say = StartupLog(said.append, budget, clock=lambda: 101.5)
    assert budget_memo.checked_before_loading(recs, [1], "process", budget, say) is say
    assert said == ["start-up, 1.5 s in: nothing known yet of these engines' loads here: the first load is the probe "
                    "of what the minimum needs (a budget too small is refused after it, before any round)"]
    budget_memo.remember(budget_memo.memo_path(recs, 1, "process"), MinimumCost(26.0, 1.0, 8.5))
    with pytest.raises(BudgetTooSmall, match=r"^batch 1: --time-budget-s 6 is too small here: .*give --time-budget-s 26"):
        budget_memo.checked_before_loading(recs, [1, 8], "process", budget, say)
    with pytest.raises(BudgetTooSmall, match=r"^--time-budget-s 6 is too small here"):
        budget_memo.checked_before_loading(recs, [1], "process", budget, say)
    grown = TimeBudget(6.0, start=100.0, grows=True).began(101.0)
    budget_memo.checked_before_loading(recs, [1], "process", grown, StartupLog(said.append, grown, clock=lambda: 101.5))
    assert len(said) == 1  # the default grows: no refusal, nothing said of the memo


def test_a_probe_s_refusal_carries_the_need_its_line_names(monkeypatch):
    """The loop's fake clock (tests.fakes.simulate): 4-s loads, a 12-s refusing budget. The refusal after the
    first load carries what it reckoned (``MinimumCost``), the seconds its line asks for are those, and the
    memo made of it refuses the next run before its first load."""
    from tests.measure.test_budget import costly_run

    with pytest.raises(BudgetTooSmall) as refused:
        costly_run(4.0, grows=False, budget_s=12.0, refuses=True)
    cost = refused.value.cost
    assert cost is not None and cost.first_load_s == pytest.approx(4.0, abs=0.5) and cost.least_s > 12.0
    assert f"give --time-budget-s {math.ceil(cost.least_s)}," in str(refused.value)
    line = budget_memo.prior_refusal(PriorMinimum(cost, "then", 1.0),
                                     BatchWindow(started=0.0, budget_s=12.0, per_batch_s=12.0, refuses=True), 1.0)
    assert f"give --time-budget-s {math.ceil(cost.least_s)}," in line
    _, out, _ = costly_run(4.0, grows=False, budget_s=60.0, refuses=True)  # measured: the outcome carries it too
    assert out.minimum is not None and out.minimum.least_s <= 60.0


# -- the first line, before the subcommands' modules are imported ---------------------------------------------


def test_the_early_line_says_the_seconds_on_its_fake_clock_and_only_for_compare():
    from trtprof.cli import early_line

    assert early_line(["compare", "m.onnx", "--time-budget-s", "6"], 100.0, 101.94) == (
        "start-up, 1.9 s in: trtprof compare: loading its modules (a --time-budget-s counts from the command's start)")
    assert early_line(["compare", "m.onnx"], 100.0, 99.0).startswith("start-up, 0.0 s in")  # never negative
    for argv in (["build", "m.onnx"], ["compare", "--help"], ["compare", "-h"], ["--version"], []):
        assert early_line(argv, 100.0, 100.1) == ""


def test_compare_says_its_early_line_before_any_subcommand_module_is_imported(monkeypatch, capsys):
    """On a fake clock (named so): main entered at 100.0 s, the line said at 100.3 s, before the parser (which
    imports every subcommand's module: 0.8 s idle, 2-3 s loaded) is made."""
    import trtprof.cli as cli

    ticks = [100.0, 100.3]
    monkeypatch.setattr(cli.time, "perf_counter", lambda: ticks.pop(0) if len(ticks) > 1 else ticks[0])
    seen: list[str] = []

    class Stop(Exception):
        pass

    def make_parser():
        seen.append(capsys.readouterr().out)
        raise Stop

    monkeypatch.setattr(cli, "make_parser", make_parser)
    with pytest.raises(Stop):
        cli.main(["compare", "m.onnx", "--time-budget-s", "6"])
    assert seen == ["start-up, 0.3 s in: trtprof compare: loading its modules (a --time-budget-s counts from the "
                    "command's start)\n"]


def compare_cli(model, engines, out, budget: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "TRTPROF_ALLOW_FEWER_LOADS"}
    return subprocess.run([sys.executable, "-m", "trtprof", "compare", str(model), "--engines", str(engines),
                           "--out", str(out), "--backend", "onnxruntime", "--time-budget-s", budget],
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env, timeout=600)


def test_a_real_cli_run_probes_then_the_next_is_refused_before_loading(conv_model, tmp_path):
    """Real CLI runs (their own processes, worker processes, stdout and stderr in one pipe): --time-budget-s 1
    cannot hold 6 loads × 4 rounds anywhere (the workers' start-up alone takes longer). The first run: the early
    line first, then the start-up's, the probe said, the refusal with the seconds the minimum needs, no round.
    The second run of the same engines: refused before any worker starts, with an earlier run's need (its memo's
    load set to 0, so that a machine quieter than then cannot make it probe again). No clock is read here: the
    order and the words are the claim."""
    engines, out = tmp_path / "e", tmp_path / "c.json"
    first = compare_cli(conv_model, engines, out, "1")
    lines = first.stdout.splitlines()
    assert first.returncode == 2 and not out.exists(), first.stdout[-3000:]
    assert lines[0].startswith("start-up, ") and "loading its modules" in lines[0]
    probe = next(i for i, line in enumerate(lines) if "the first load is the probe" in line)
    workers = next(i for i, line in enumerate(lines) if "worker processes starting" in line)
    refusal = [i for i, line in enumerate(lines) if "error:" in line]
    assert probe < workers < refusal[0] and len(refusal) == 1 and refusal[0] == len(lines) - 1
    assert not any(" s spent: " in line for line in lines)  # no round
    match = re.search(r"--time-budget-s 1 is too small here: the first load took \d+\.\d s .* need about (\d+) s per "
                      r"batch size; give --time-budget-s (\d+),", lines[-1])
    assert match and match[1] == match[2] and int(match[1]) > 1
    (memo,) = (engines / budget_memo.MEMO_DIR).iterdir()  # made at load 0: the machine is never quieter now
    memo.write_text(json.dumps({**json.loads(memo.read_text(encoding="utf-8")), "load": 0.0}), encoding="utf-8")
    second = compare_cli(conv_model, engines, out, "1")
    lines = second.stdout.splitlines()
    assert second.returncode == 2 and not out.exists(), second.stdout[-3000:]
    assert "in an earlier run of these engines" in lines[-1] and lines[-1].endswith("nothing was loaded")
    assert f"give --time-budget-s {match[1]}," in lines[-1]  # the need the first run found
    assert not any("worker processes starting" in line or "the accuracy pass" in line for line in lines)
