"""measure.budget.TimeBudget: one value for --time-budget-s (issue 32), on made-up clock values."""
from __future__ import annotations

import dataclasses
import re

import pytest

from trtprof.measure.budget import TAIL_PER_IMPORTS, BatchWindow, TimeBudget, batch_window
from trtprof.util.clock import CommandClock


def test_the_command_s_budget_counts_from_its_start_and_reserves_a_multiple_of_its_imports():
    budget = TimeBudget.for_command(10.0, CommandClock(started=100.0, imported=100.5)).began(103.0)
    assert budget.started == 100.0 and budget.launch_s == pytest.approx(3.0)
    assert budget.reserve_basis == ("imports", pytest.approx(0.5))
    assert budget.reserve_s(2) == pytest.approx(TAIL_PER_IMPORTS * 0.5 * 2)
    assert budget.counts_from == "command start (engine builds left out)"


def test_a_caller_s_budget_counts_from_when_the_comparison_began_and_reserves_on_the_launch():
    budget = TimeBudget(10.0).began(50.0)
    assert budget.started == 50.0 and budget.launch_s == 0.0 and budget.reserve_basis == ("launch", 0.0)
    assert budget.counts_from == "compare start" and budget.elapsed_s(52.5) == pytest.approx(2.5)


def test_engine_builds_are_left_out_by_moving_the_start():
    budget = TimeBudget.for_command(10.0, CommandClock(started=100.0, imported=100.5))
    later = budget.leaving_out(40.0).leaving_out(0.0)
    assert later.start == 140.0 and later.imports_s == budget.imports_s and budget.start == 100.0  # frozen
    assert TimeBudget(10.0).leaving_out(40.0).start is None  # no start yet: it begins after the builds anyway


def test_a_budget_that_never_began_has_no_start_to_count_from():
    with pytest.raises(ValueError, match="began"):
        TimeBudget(10.0).elapsed_s(1.0)


def test_the_budget_is_frozen():
    with pytest.raises(dataclasses.FrozenInstanceError):
        TimeBudget(10.0).per_batch_s = 5.0  # type: ignore[misc]


def test_each_batch_size_s_window_is_batch_window_of_its_start_and_reserve():
    """Imports 0.25 s, 3 batch sizes: reserve 1.5 s (0.5 s each); the second began 4 s in."""
    budget = TimeBudget.for_command(10.0, CommandClock(started=0.0, imported=0.25)).began(1.0)
    first = budget.window(0, 99.0, 3)
    assert first == BatchWindow(started=0.0, budget_s=10.0, reserve_s=0.5, per_batch_s=10.0)
    second = budget.window(1, 4.0, 3)
    assert (second.budget_s, second.reserve_s) == batch_window(1, 4.0, 10.0, 1.5, 3) == (14.0, 0.5)
    assert second.deadline_s == pytest.approx(13.5) and second.slack_basis_s == 10.0


def test_a_window_without_a_per_batch_budget_plans_its_slack_on_its_own_budget():
    assert BatchWindow(started=0.0, budget_s=12.0).slack_basis_s == 12.0


def test_compare_options_carry_the_budget_s_seconds_once_in_the_plan():
    """Issue 41 #3: the seconds live in ``plan.time_budget_s`` only; ``budget_start`` says where they count
    from (and whether they grow or refuse), so the two cannot disagree and nothing checks that they do."""
    from trtprof.compare.core import CompareOptions
    from trtprof.measure.budget import BudgetStart
    from trtprof.measure.interleave import RoundPlan

    assert "budget" not in {f.name for f in dataclasses.fields(CompareOptions)}
    assert not {f.name for f in dataclasses.fields(BudgetStart)} & {"per_batch_s", "time_budget_s"}
    start = BudgetStart.for_command(CommandClock(started=100.0, imported=100.5), refuses=True)
    options = CompareOptions(plan=RoundPlan(time_budget_s=4.0), budget_start=start)
    assert options.time_budget == TimeBudget(4.0, start=100.0, imports_s=0.5, counts_from=start.counts_from,
                                             refuses=True)
    assert dataclasses.replace(options, plan=RoundPlan(time_budget_s=7.0)).time_budget.per_batch_s == 7.0  # the plan's, always
    assert CompareOptions(plan=RoundPlan(time_budget_s=4.0)).time_budget == TimeBudget(4.0)
    assert TimeBudget.for_command(4.0, CommandClock(started=100.0, imported=100.5), refuses=True) == options.time_budget


def test_the_build_tally_leaves_out_only_engines_really_built_and_passes_each_on():
    """compare_model and the A/B leave engine builds (a one-off) out of the budget; a cache hit's
    lookup seconds stay in it."""
    from types import SimpleNamespace

    from trtprof.compare.core import BuildTally, CompareOptions
    from trtprof.measure.budget import BudgetStart
    from trtprof.measure.interleave import RoundPlan

    heard: list[object] = []
    tally = BuildTally(heard.append)
    built, hit = SimpleNamespace(built=True, seconds=40.0), SimpleNamespace(built=False, seconds=0.2)
    tally(built)
    tally(hit)
    assert tally.seconds == 40.0 and heard == [built, hit]
    options = CompareOptions(plan=RoundPlan(time_budget_s=10.0),
                             budget_start=BudgetStart.for_command(CommandClock(started=100.0, imported=100.5)))
    assert options.leaving_out(tally.seconds).time_budget.start == 140.0


# -- issue 33 #4, issue 42 #5: a default run that answers (the budget fitted to the loads, measured from the first) --

from trtprof.measure.budget import GROWN_BUDGET_CAP_S, BudgetTooSmall  # noqa: E402


def test_loads_that_fit_leave_the_window_as_it_is_and_say_nothing():
    window = BatchWindow(started=0.0, budget_s=12.0, grows=True)
    assert window.fitted(11.9, 10.0, 6, 4) == (window, "")


@pytest.mark.parametrize("first_load_s", [0.2, 4.0])
@pytest.mark.parametrize("needed_s, grows", [(12.0 - 0.01, False), (12.0 + 0.01, True)])
def test_the_default_budget_grows_whenever_the_minimum_needs_more_cheap_loads_too(needed_s, grows, first_load_s):
    """Issue 42 #5: just above the 12-s default the default budget grows to what the minimum needs (and says
    so), whatever the first load cost (a 0.2-s ONNX Runtime load as a 4-s torch one); just inside it stays."""
    window = BatchWindow(started=0.0, budget_s=12.0, per_batch_s=12.0, grows=True)
    fitted, line = window.fitted(needed_s, first_load_s, 6, 4, least_s=5.0)
    if grows:
        assert fitted.budget_s == needed_s and fitted.per_batch_s == 12.0
        assert f"the first load took {first_load_s:.1f} s: 6 loads × 4 rounds need about 12 s" in line
        assert "the budget grows to 12 s" in line and f"at most {GROWN_BUDGET_CAP_S:.0f} s" in line
    else:
        assert (fitted, line) == (window, "")


@pytest.mark.parametrize("over_s, capped", [(-0.01, False), (0.01, True)])
def test_the_grown_budget_is_capped_a_minute_after_its_batch_size_began_and_says_so(over_s, capped):
    """GROWN_BUDGET_CAP_S (60 s) after the batch size began: a need just inside it is granted whole, one just
    outside is cut to it, with the line saying so and what --time-budget-s fits the minimum."""
    assert GROWN_BUDGET_CAP_S == 60.0
    window = BatchWindow(started=0.0, budget_s=22.0, grows=True, opened_s=10.0)  # the second batch size, from 10 s
    fitted, line = window.fitted(10.0 + GROWN_BUDGET_CAP_S + over_s, 2.0, 6, 4)
    if capped:
        assert fitted.budget_s == 10.0 + GROWN_BUDGET_CAP_S
        assert f"capped at {GROWN_BUDGET_CAP_S:.0f} s: fewer loads will run (--time-budget-s 61 fits them)" in line
    else:
        assert fitted.budget_s == pytest.approx(10.0 + GROWN_BUDGET_CAP_S - 0.01)
        assert "capped" not in line and f"at most {GROWN_BUDGET_CAP_S:.0f} s" in line


def test_an_explicit_budget_stays_and_says_how_long_the_loads_would_need():
    window = BatchWindow(started=0.0, budget_s=12.0)
    fitted, line = window.fitted(30.2, 4.0, 6, 4)
    assert fitted == window
    assert "more than the 12 s budget of --time-budget-s" in line and "--time-budget-s 31 fits them" in line


@pytest.mark.parametrize("least_s, fits", [(12.0 - 0.01, True), (12.0 + 0.01, False)])
def test_a_refusing_budget_s_refusal_line_says_what_the_minimum_needs(least_s, fits):
    window = BatchWindow(started=0.0, budget_s=12.0, per_batch_s=12.0, refuses=True)
    assert window.minimum_fits(least_s) is fits
    line = window.refusal(13.2, 1.5, 6, 4)
    assert line.startswith("--time-budget-s 12 is too small here: the first load took 1.5 s")
    assert "need about 14 s per batch size; give --time-budget-s 14, or --allow-fewer-loads" in line
    assert "\n" not in line


def test_only_a_given_budget_refuses():
    clock = CommandClock(started=0.0, imported=0.1)
    assert TimeBudget.for_command(6.0, clock, refuses=True).began(1.0).window(0, 1.0, 1).refuses
    assert not TimeBudget.for_command(12.0, clock, grows=True, refuses=True).began(1.0).window(0, 1.0, 1).refuses
    assert not TimeBudget(6.0).began(1.0).window(0, 1.0, 1).refuses  # a library caller's: proceeds as before


@pytest.mark.parametrize("opened_s", [23.5, 24.0, 30.0])
def test_a_budget_the_earlier_batch_sizes_spent_says_nothing_is_left_never_a_negative_budget(opened_s):
    """The H200's ViT-B/16 run (2026-12-02) said "more than the -6 s default budget": batch 1 overran,
    and batch 64's share (24 s from the command's start) was gone before it began. (The default now grows
    whenever the loads need more, so this line is a given budget's.)"""
    window = BatchWindow(started=0.0, budget_s=24.0, per_batch_s=12.0, opened_s=opened_s)
    _fitted, line = window.fitted(opened_s + 40.0, 2.0, 6, 4)
    kind = "budget of --time-budget-s"
    if opened_s < 24.0:
        assert f"more than the 0.5 s left of the {kind}: fewer loads" in line
    elif opened_s == 24.0:
        assert f"more than what is left of the {kind}: nothing (the batch sizes before this one used all of it)" in line
    else:
        assert (f"more than what is left of the {kind}: nothing (the batch sizes before this one used "
                "6 s more than theirs)") in line
    assert not re.search(r" -\d", line)  # no negative number of seconds
    grown, said = replace_grows(window).fitted(opened_s + 40.0, 2.0, 6, 4)  # the default: grows from where it began
    assert grown.budget_s == opened_s + 40.0 and not re.search(r" -\d", said)


def replace_grows(window: BatchWindow) -> BatchWindow:
    return dataclasses.replace(window, grows=True)


class CostlyLoad:
    """Fake (named so): opening costs ``open_s`` on a fake clock, every block ``block_s``; lognormal
    latencies with a 30 % spread, so no verdict stops the loop early."""

    def __init__(self, clock, names, block_s: float, seed: int, log: list) -> None:
        import numpy as np

        self.clock, self.names, self.block_s, self.log = clock, list(names), block_s, log
        self.rng = np.random.default_rng(seed)

    def block(self, config):
        import numpy as np

        from trtprof.measure.timing import Samples

        self.clock.t += self.block_s
        return Samples(stages={"latency_ms": np.exp(0.3 * self.rng.standard_normal(config.iterations))},
                       span_s=self.block_s, warmup_done=config.warmup, warmup_s=0.0)

    def warm_up(self, config):
        return {n: self.block(config) for n in self.names}

    def rounds(self, first, count, config, order):
        from trtprof.measure import interleave

        self.log.append(("rounds", count))
        return [{n: self.block(config) for n in interleave.round_order(order, j)} for j in range(first, first + count)]

    def close(self) -> None:
        pass


def costly_run(open_s: float, *, grows: bool, budget_s: float = 12.0, refuses: bool = False):
    from trtprof.measure import interleave
    from tests.fakes import simulate as cal

    clock, names, log = cal.SimClock(), ("base", "cand"), []

    def open_load(i: int) -> CostlyLoad:
        clock.t += open_s
        return CostlyLoad(clock, names, 0.05, seed=i, log=log)

    plan = interleave.RoundPlan(time_budget_s=budget_s, round_iterations=20)
    window = BatchWindow(started=0.0, budget_s=budget_s, per_batch_s=budget_s, grows=grows, refuses=refuses)
    out = interleave.run_interleaved(names, open_load, plan, clock=clock, window=window,
                                     hooks=interleave.LoopHooks(on_note=lambda line: log.append(("note", line))))
    return clock, out, log


def test_a_default_run_with_costly_loads_gets_the_minimum_loads_announced_before_any_round():
    """Loads of 4 s (a torch load on the GPU costs 10-30 s): the 12-s default would give 2 loads; grown,
    the batch size runs the minimum 6, within what it announced, and the note came before the first round."""
    from trtprof.measure.interleave import MIN_LOADS

    clock, out, log = costly_run(4.0, grows=True)
    assert log[0][0] == "note" and "grows to" in log[0][1]
    assert out.loads >= MIN_LOADS and out.budget_s > 12.0 and out.budget_note == log[0][1]
    assert clock.t <= out.budget_s * 1.1 and out.budget_s <= GROWN_BUDGET_CAP_S


def test_an_explicit_budget_with_costly_loads_keeps_its_budget_and_says_so_first():
    from trtprof.measure.interleave import MIN_LOADS

    clock, out, log = costly_run(4.0, grows=False)
    assert log[0][0] == "note" and "--time-budget-s" in log[0][1] and "fits them" in log[0][1]
    assert out.loads < MIN_LOADS and out.budget_s == 12.0


def test_cheap_loads_keep_the_default_budget_and_print_nothing():
    clock, out, log = costly_run(0.2, grows=True)
    assert all(kind != "note" for kind, _ in log) and out.budget_s == 12.0 and out.budget_note == ""


def test_cheap_loads_whose_minimum_does_not_fit_the_default_grow_it_and_run_the_minimum():
    """Issue 42 #5 (ONNX Runtime on CUDA: 1-s loads, 2 loads and NOT VALID at batch 32): loads of 0.6 s, a
    3-s default (as a batch size whose share is small): grown before any round, the minimum runs."""
    from trtprof.measure.interleave import MIN_LOADS

    clock, out, log = costly_run(0.6, grows=True, budget_s=3.0)
    assert log[0][0] == "note" and "the first load took" in log[0][1] and "grows to" in log[0][1]
    assert out.loads >= MIN_LOADS and out.budget_s > 3.0
    assert clock.t <= out.budget_s * 1.1


@pytest.mark.parametrize("budget_s, refused", [(12.0, True), (60.0, False)])
def test_a_given_budget_too_small_for_the_minimum_stops_before_any_round(budget_s, refused):
    """Loads of 4 s: 6 of them do not fit 12 s (refused after the first load, before any round, with what they
    need) and fit 60 s (measured, no refusal)."""
    if refused:
        with pytest.raises(BudgetTooSmall, match=r"--time-budget-s 12 is too small here: .* give --time-budget-s \d+"):
            costly_run(4.0, grows=False, budget_s=budget_s, refuses=True)
        return
    clock, out, log = costly_run(4.0, grows=False, budget_s=budget_s, refuses=True)
    assert out.loads >= 6 and all(kind != "note" for kind, _ in log) and clock.t <= budget_s * 1.1


def test_a_refused_run_ran_no_round():
    log: list = []
    from trtprof.measure import interleave
    from tests.fakes import simulate as cal

    clock, names = cal.SimClock(), ("base", "cand")

    def open_load(i: int) -> CostlyLoad:
        clock.t += 4.0
        return CostlyLoad(clock, names, 0.05, seed=i, log=log)

    window = BatchWindow(started=0.0, budget_s=12.0, per_batch_s=12.0, refuses=True)
    with pytest.raises(BudgetTooSmall):
        interleave.run_interleaved(names, open_load, interleave.RoundPlan(time_budget_s=12.0, round_iterations=20),
                                   clock=clock, window=window)
    assert not any(kind == "rounds" for kind, _ in log)


def test_compare_announces_a_budget_too_small_before_measuring_and_says_when_loads_are_few(conv_model, tmp_path,
                                                                                          capsys, monkeypatch):
    """Through the CLI (real ONNX Runtime loads, in-process): 20 loads do not fit --time-budget-s 0.5,
    which the first budget line says before the first look; every printed verdict from < 3 loads says so
    beside its interval; the JSON keeps the line. Each load is made to take at least 50 ms (a sleep
    before the real load), so 20 of them cannot fit 0.5 s on any machine: on a quiet CI machine real
    loads were fast enough that they fitted, and the test failed without its note."""
    import json
    import time as _time

    from trtprof.backends.onnxruntime import OnnxRuntimeBackend
    from trtprof.cli import main
    from trtprof.stats.speedup import few_loads_words

    real_load = OnnxRuntimeBackend.load

    def slow_load(self, *args, **kwargs):
        _time.sleep(0.05)
        return real_load(self, *args, **kwargs)

    monkeypatch.setattr(OnnxRuntimeBackend, "load", slow_load)

    out = tmp_path / "c.json"
    assert main(["compare", str(conv_model), "--engines", str(tmp_path / "e"), "--out", str(out),
                 "--backend", "onnxruntime", "--in-process", "--time-budget-s", "0.5", "--min-loads", "20",
                 "--allow-fewer-loads"]) == 0
    captured = capsys.readouterr()
    data = json.loads(out.read_text())
    note = data["budget"]["per_batch"]["1"]["budget_note"]
    assert "--time-budget-s" in note and "fits them" in note
    # announced before the first look's progress line
    assert captured.err.index(f"  batch 1: budget: {note}") < captured.err.index(" s spent: ")
    [c] = data["comparisons"]
    few = few_loads_words(c["loads"])
    if c["loads"] < 3:
        assert few in captured.out and few in c["verdict_note"]
    else:
        assert "behind this interval" not in captured.out + c["verdict_note"]


def test_loads_that_fit_with_the_blocks_shrunk_say_nothing_where_the_budget_stays():
    """The loop shrinks its blocks to fit the minimum: only when not even the least blocks fit (just
    outside) does a given budget say 'fewer loads will run'; just inside it says nothing. (The default grows
    to the designed blocks instead: test_the_default_budget_grows_whenever_the_minimum_needs_more.)"""
    window = BatchWindow(started=0.0, budget_s=12.0)
    assert window.fitted(30.0, 1.0, 6, 4, least_s=11.99) == (window, "")
    fitted, line = window.fitted(30.0, 1.0, 6, 4, least_s=12.01)
    assert fitted == window and "fewer loads will run" in line and "--time-budget-s 13 fits them" in line


def pre_warmed_run(later_open_s: float, *, launch_s: float = 8.0):
    """The H200's default ResNet-50 run (2026-12-02), faked (named so): start-up took ``launch_s`` of the
    12-s default before load 0, which opened in 0.3 s (its first runs done by the accuracy pass); every
    later load takes ``later_open_s``."""
    from trtprof.measure import interleave
    from tests.fakes import simulate as cal

    clock, names, log = cal.SimClock(), ("base", "cand"), []
    clock.t = launch_s

    def open_load(i: int) -> CostlyLoad:
        clock.t += 0.3 if i == 0 else later_open_s
        return CostlyLoad(clock, names, 0.05, seed=i, log=log)

    plan = interleave.RoundPlan(time_budget_s=12.0, round_iterations=20)
    window = BatchWindow(started=0.0, budget_s=12.0, per_batch_s=12.0, grows=True)
    out = interleave.run_interleaved(names, open_load, plan, clock=clock, window=window,
                                     hooks=interleave.LoopHooks(on_note=lambda line: log.append(("note", line))))
    return clock, out, log


def test_a_window_fitted_to_a_pre_warmed_first_load_is_fitted_again_after_the_second():
    """Load 0 cheap (0.3 s), later loads 4 s: the window grown on the first load's cost is fitted again
    after the second, so the minimum loads run; a second line says so before the rounds."""
    from trtprof.measure.interleave import MIN_LOADS

    clock, out, log = pre_warmed_run(4.0)
    notes = [text for kind, text in log if kind == "note"]
    assert len(notes) == 2 and notes[1].startswith("the second load took 4.1 s") and "grows to" in notes[1]
    assert log.index(("note", notes[1])) < next(i for i, (kind, _) in enumerate(log) if kind == "rounds")
    assert out.loads >= MIN_LOADS and out.budget_note == f"{notes[0]}; {notes[1]}"
    assert clock.t <= out.budget_s * 1.1 and out.budget_s <= GROWN_BUDGET_CAP_S


def test_a_second_load_no_dearer_than_the_first_changes_nothing():
    clock, out, log = pre_warmed_run(0.3)
    notes = [text for kind, text in log if kind == "note"]
    assert len(notes) == 1 and not any("second load" in n for n in notes)


def test_without_the_refit_the_pre_warmed_run_gets_fewer_loads(monkeypatch):
    """The refit is what makes the minimum fit: switched off, the same run opens fewer loads."""
    from trtprof.measure import interleave
    from trtprof.measure.interleave import MIN_LOADS

    monkeypatch.setattr(interleave.RoundLoop, "refit_window", lambda self, round_s: None)
    _clock, out, _log = pre_warmed_run(4.0)
    assert out.loads < MIN_LOADS


@pytest.mark.parametrize("later_open_s, refits", [(0.39, False), (0.41, True)])
def test_the_refit_needs_a_second_load_dearer_than_the_ratio(later_open_s, refits, monkeypatch):
    """REFIT_LOAD_RATIO (1.25): the first load costs 0.4 s here (0.3 s + its warm-up blocks), so a second
    load of 0.49 s (1.225×) is not fitted again and one of 0.51 s (1.275×) is."""
    from trtprof.measure import interleave

    assert interleave.REFIT_LOAD_RATIO == 1.25
    asked = []
    real = BatchWindow.fitted

    def spy(self, *args, **kwargs):
        asked.append(kwargs.get("which", "first"))
        return real(self, *args, **kwargs)

    monkeypatch.setattr(BatchWindow, "fitted", spy)
    pre_warmed_run(later_open_s)
    assert asked == (["first", "second"] if refits else ["first"])


# -- issue 44 #2: the start-up said as it runs; a given budget kept or refused before measuring ----------------


def test_the_start_up_log_says_the_seconds_spent_of_the_budget_on_its_clock():
    """A fake clock (named so): the budget began at 100 s, the line is said at 101.26 s."""
    from trtprof.measure.budget import StartupLog

    said: list[str] = []
    budget = TimeBudget(6.0, start=100.0).began(100.5)
    StartupLog(said.append, budget, clock=lambda: 101.26)("waiting for load 0's worker")
    StartupLog(None, budget, clock=lambda: 1 / 0)("nothing read, nothing said")
    assert said == ["start-up, 1.3 s in: waiting for load 0's worker"]


def test_the_range_analysis_deadline_is_a_share_of_one_batch_size_s_budget():
    from trtprof.measure.budget import RANGE_ANALYSIS_SHARE

    assert TimeBudget(6.0).analysis_deadline(10.0) == pytest.approx(10.0 + RANGE_ANALYSIS_SHARE * 6.0)


def test_compare_s_first_line_names_the_budget_and_the_seconds_since_the_start_on_its_clock(capsys):
    """On a fake clock (named so): the command started at 100 s, the line is printed at 100.8 s."""
    import argparse

    from trtprof.cli.compare import first_line
    from trtprof.measure.interleave import RoundPlan

    args = argparse.Namespace(model=["m.onnx"], time_budget_s=6.0)
    first_line(args, RoundPlan(time_budget_s=6.0), CommandClock(started=100.0, imported=100.3), now=lambda: 100.8)
    default = argparse.Namespace(model=["m.onnx"], time_budget_s=None)
    first_line(default, RoundPlan(), None)
    err = capsys.readouterr().out.splitlines()  # stdout, as the build's lines: a bad input's stderr stays one line
    assert err[0] == ("start-up, 0.8 s in: compare m.onnx under --time-budget-s 6 per batch size; finding the "
                      "engines (a build is left out of the budget)")
    assert err[1].startswith("start-up: compare m.onnx under the default budget, 12 s per batch size, grown to what "
                             "6 loads need (at most 60 s)")


def test_compare_says_its_first_line_before_it_looks_for_an_engine(conv_model, tmp_path, capsys, monkeypatch):
    """The first line comes before the engines are found or built: what compare_model is asked to do begins
    after it (no clock read: the order is the claim)."""
    from trtprof.cli import main
    from trtprof.compare import core

    seen: list[str] = []

    def stop(*args, **kwargs):
        seen.append(capsys.readouterr().out)
        raise KeyboardInterrupt

    monkeypatch.setattr(core, "compare_model", stop)
    main(["compare", str(conv_model), "--engines", str(tmp_path / "e"), "--out", str(tmp_path / "c.json"),
          "--backend", "onnxruntime", "--time-budget-s", "3"])
    assert seen and seen[0].startswith("start-up, ") and "compare " in seen[0] and "--time-budget-s 3" in seen[0]


def slow_ort_loads(monkeypatch, seconds: float) -> None:
    """Every real ONNX Runtime load takes at least ``seconds`` more (a sleep before it): loads that cannot fit
    a small budget on any machine."""
    import time as _time

    from trtprof.backends.onnxruntime import OnnxRuntimeBackend

    real_load = OnnxRuntimeBackend.load

    def slow_load(self, *args, **kwargs):
        _time.sleep(seconds)
        return real_load(self, *args, **kwargs)

    monkeypatch.setattr(OnnxRuntimeBackend, "load", slow_load)


def test_a_given_budget_too_small_for_the_minimum_is_refused_in_one_line_before_any_round(conv_model, tmp_path,
                                                                                           capsys, monkeypatch):
    """Real ONNX Runtime loads (in-process), each made to take 0.3 s: 6 of them cannot fit --time-budget-s 1.
    Without --allow-fewer-loads (and its variable): exit 2, one line with the time the minimum needs, every
    start-up line before it, no round measured, no file written."""
    from trtprof.cli import main

    monkeypatch.delenv("TRTPROF_ALLOW_FEWER_LOADS", raising=False)
    slow_ort_loads(monkeypatch, 0.3)
    out = tmp_path / "c.json"
    code = main(["compare", str(conv_model), "--engines", str(tmp_path / "e"), "--out", str(out),
                 "--backend", "onnxruntime", "--in-process", "--time-budget-s", "1"])
    captured = capsys.readouterr()
    err = captured.err.splitlines()
    errors = [line for line in err if "error" in line]
    assert code == 2 and len(errors) == 1, err
    assert re.search(r"--time-budget-s 1 is too small here: the first load took \d+\.\d s and 6 loads × 4 rounds "
                     r"\(the minimum for a VALID result\) need about \d+ s per batch size; give --time-budget-s \d+, "
                     r"or --allow-fewer-loads", errors[0])
    assert err == errors and not out.exists()  # stderr: that one line (the start-up lines are on stdout)
    assert captured.out.startswith("start-up, ") and "the accuracy pass" in captured.out


def test_a_real_compare_prints_its_start_up_before_any_measurement(conv_model, tmp_path):
    """A real CLI run (its own process, worker processes, stdout and stderr in one pipe as a terminal shows
    them) with --allow-fewer-loads: rc 0; the first line is the start-up's, and every start-up line (the
    launch, the workers, the accuracy pass) comes before the first measurement line. No clock is read here:
    the order is the claim (the time of the first line is benchmarks/budget_explicit_cpu.py's)."""
    import os
    import subprocess
    import sys

    env = {k: v for k, v in os.environ.items() if k != "TRTPROF_ALLOW_FEWER_LOADS"}
    proc = subprocess.run([sys.executable, "-m", "trtprof", "compare", str(conv_model), "--engines",
                           str(tmp_path / "e"), "--out", str(tmp_path / "c.json"), "--backend", "onnxruntime",
                           "--time-budget-s", "2", "--allow-fewer-loads"],
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env, timeout=300)
    lines = proc.stdout.splitlines()
    assert proc.returncode == 0, proc.stdout[-3000:]
    first_measure = next(i for i, line in enumerate(lines) if " s spent: " in line)
    startup = [i for i, line in enumerate(lines) if line.startswith("start-up")]
    assert startup[0] == 0 and max(startup) < first_measure, lines[:first_measure + 1]
    said = "\n".join(lines[i] for i in startup)
    assert "worker processes starting" in said and "the accuracy pass" in said


def test_the_first_loads_wait_for_priming_is_not_what_later_loads_are_expected_to_cost():
    """Issue 42: the first load's warm-up waited for every worker's priming (``WorkerLoad.waited_s``); counted as
    its own cost, each later load looked as costly and the window grew for loads that never came (batch 1 grew to
    52 s for 30 s of need on the H200). Fake loads (named so) on a fake clock: a 5-s wait, loads of 0.3 s."""
    from trtprof.measure import interleave
    from tests.fakes import simulate as cal

    def run(waited_s: float):
        clock, names, log = cal.SimClock(), ("base", "cand"), []

        class WaitingLoad(CostlyLoad):
            def warm_up(self, config):
                self.waited_s = waited_s if self.first else 0.0
                self.clock.t += self.waited_s
                return super().warm_up(config)

        def open_load(i: int) -> CostlyLoad:
            clock.t += 0.3
            load = WaitingLoad(clock, names, 0.05, seed=i, log=log)
            load.first = i == 0
            return load

        plan = interleave.RoundPlan(time_budget_s=12.0, round_iterations=20)
        window = BatchWindow(started=0.0, budget_s=12.0, per_batch_s=12.0, grows=True)
        return interleave.run_interleaved(names, open_load, plan, clock=clock, window=window)

    waited, not_waited = run(5.0), run(0.0)
    assert waited.minimum is not None and not_waited.minimum is not None
    assert waited.minimum.first_load_s == pytest.approx(not_waited.minimum.first_load_s, abs=1e-6)
    assert waited.minimum.startup_s == pytest.approx(not_waited.minimum.startup_s + 5.0, abs=1e-6)
    # the window grows by the wait itself, not by six loads' worth of it
    assert waited.budget_s <= not_waited.budget_s + 5.0 / interleave.BUDGET_PLAN_SHARE + 1e-6


@pytest.mark.parametrize("fastest_ms, expected", [(9.99, 2), (10.0, 1), (29.99, 1), (30.0, 0), (40.0, 0)])
def test_blocks_of_long_calls_warm_up_with_one_call(fastest_ms, expected):
    """Every arm's call at least ``ROUND_WARMUP_ONE_CALL_MS`` (just inside and just outside it): one warm-up call
    per block instead of ``ROUND_WARMUP``; at least ``ROUND_WARMUP_NONE_MS`` (just inside and outside it): none. Used
    by the loop's blocks and recorded on the outcome."""
    import numpy as np

    from trtprof.measure import interleave
    from trtprof.measure.timing import Samples
    from tests.fakes import simulate as cal

    assert interleave.ROUND_WARMUP_ONE_CALL_MS == 10.0 and interleave.ROUND_WARMUP == 2
    assert interleave.ROUND_WARMUP_NONE_MS == 30.0
    assert interleave.round_warmup([fastest_ms, 70.0]) == expected
    clock, names, warmups = cal.SimClock(), ("base", "cand"), []

    class Load(CostlyLoad):
        def arm_block(self, arm, config):
            self.clock.t += self.block_s
            ms = {"base": 70.0, "cand": fastest_ms}[arm]
            return Samples(stages={"latency_ms": np.full(config.iterations, ms)}, span_s=self.block_s,
                           warmup_done=config.warmup, warmup_s=0.0)

        def warm_up(self, config):  # the load's own warm-up: not a round's block
            return {n: self.arm_block(n, config) for n in self.names}

        def rounds(self, first, count, config, order):
            warmups.append(config.warmup)
            return [{n: self.arm_block(n, config) for n in interleave.round_order(order, j)}
                    for j in range(first, first + count)]

    plan = interleave.RoundPlan(time_budget_s=30.0, round_iterations=5)
    window = BatchWindow(started=0.0, budget_s=30.0, per_batch_s=30.0, grows=False)
    out = interleave.run_interleaved(names, lambda i: Load(clock, names, 0.05, seed=i, log=[]), plan, clock=clock,
                                     window=window)
    assert out.round_warmup == expected and warmups and set(warmups) == {expected}


def long_call_load(fastest_ms, on_warm=None, on_rounds=None):
    """A FAKE two-arm load class on the simulated clock: the base arm's call takes 70 ms, the candidate's
    ``fastest_ms``; ``on_warm(load, config)`` and ``on_rounds(config)`` see its warm-ups and rounds. It holds a
    ``round_warmup`` as a ``WorkerLoad`` does (``ROUND_WARMUP`` until the loop tells it)."""
    import numpy as np

    from trtprof.measure import interleave
    from trtprof.measure.timing import Samples

    class Load(CostlyLoad):
        round_warmup = interleave.ROUND_WARMUP

        def arm_block(self, arm, config):
            ms = {"base": 70.0, "cand": fastest_ms}[arm]
            self.clock.t += (config.iterations + config.warmup) * ms / 1e3
            return Samples(stages={"latency_ms": np.full(config.iterations, ms)}, span_s=config.iterations * ms / 1e3,
                           warmup_done=config.warmup, warmup_s=0.0)

        def warm_up(self, config):
            if on_warm is not None:
                on_warm(self, config)
            return {n: self.arm_block(n, config) for n in self.names}

        def rounds(self, first, count, config, order):
            if on_rounds is not None:
                on_rounds(config)
            return [{n: self.arm_block(n, config) for n in interleave.round_order(order, j)}
                    for j in range(first, first + count)]

    return Load


@pytest.mark.parametrize("fastest_ms, expected", [(9.99, 2), (10.0, 1), (29.99, 1), (30.0, 0)])
def test_later_loads_are_told_the_rounds_warm_up_and_the_first_is_not(fastest_ms, expected):
    """A later load that takes it (``round_warmup``: a worker's, ``WorkerLoad``) is told the rounds' warm-up calls
    that the first load's calls set (just inside and just outside ``ROUND_WARMUP_ONE_CALL_MS`` and
    ``ROUND_WARMUP_NONE_MS``), before its warm-up; the first load keeps ``ROUND_WARMUP``, since nothing set it yet.
    FAKE loads on a simulated clock."""
    from trtprof.measure import interleave
    from tests.fakes import simulate as cal

    clock, names, told = cal.SimClock(), ("base", "cand"), []
    Load = long_call_load(fastest_ms, on_warm=lambda load, config: told.append(load.round_warmup))
    plan = interleave.RoundPlan(time_budget_s=60.0, round_iterations=5)
    window = BatchWindow(started=0.0, budget_s=60.0, per_batch_s=60.0, grows=False)
    out = interleave.run_interleaved(names, lambda i: Load(clock, names, 0.05, seed=i, log=[]), plan, clock=clock,
                                     window=window)
    assert out.loads >= 2 and out.round_warmup == expected
    assert told[0] == interleave.ROUND_WARMUP and told[1:] == [expected] * (len(told) - 1)


@pytest.mark.parametrize("fastest_ms, floor", [(9.99, 5), (10.0, 3), (40.0, 3)])
def test_blocks_of_long_calls_time_three_calls_at_least(fastest_ms, floor):
    """Every arm's call at least ``ROUND_WARMUP_ONE_CALL_MS`` (just inside and just outside it): a block times at
    least ``LONG_CALL_ITERATIONS`` calls instead of ``MIN_ROUND_ITERATIONS``; with a budget that shrinks the blocks to
    their floor, the loop's blocks time exactly that many. A later load's warm-up times one call, the first load's
    ``MIN_ROUND_ITERATIONS`` (they size the blocks)."""
    from trtprof.measure import interleave
    from tests.fakes import simulate as cal

    assert (interleave.MIN_ROUND_ITERATIONS, interleave.LONG_CALL_ITERATIONS) == (5, 3)
    assert interleave.block_floor([fastest_ms, 70.0]) == floor
    plan = interleave.RoundPlan(time_budget_s=3.0)
    assert plan.warmup_config(first_load=True).iterations == 5 and plan.warmup_config(first_load=False).iterations == 1
    clock, names, blocks, warm_ups = cal.SimClock(), ("base", "cand"), [], []
    Load = long_call_load(fastest_ms, on_warm=lambda load, config: warm_ups.append(config.iterations),
                          on_rounds=lambda config: blocks.append(config.iterations))
    window = BatchWindow(started=0.0, budget_s=3.0, per_batch_s=3.0, grows=False)
    interleave.run_interleaved(names, lambda i: Load(clock, names, 0.05, seed=i, log=[]), plan, clock=clock,
                               window=window)
    assert blocks and set(blocks) == {floor}  # 3 s cannot afford more than the floor's calls per block
    assert warm_ups[0] == 5 and set(warm_ups[1:]) == {1}


class SideBySideLoad:
    """FAKE load (named so): records ``warm_up_begin``/``warm_up_end``/``warm_up`` in a shared log; may fail."""

    def __init__(self, index, log, fail_in=None):
        self.index, self.log, self.fail_in = index, log, fail_in

    def _step(self, what):
        self.log.append((what, self.index))
        if self.fail_in == what:
            raise RuntimeError(f"load {self.index}: {what} failed")

    def warm_up_begin(self, config):
        self._step("begin")

    def warm_up_end(self):
        self._step("end")
        return {"base": self.index}

    def warm_up(self, config):
        self._step("warm_up")
        return {"base": self.index}


def test_warm_ups_side_by_side_are_all_asked_before_any_is_read_and_all_read_before_an_error():
    from trtprof.measure.loads import warm_up_side_by_side
    from trtprof.measure.timing import TimingConfig

    log = []
    loads = [SideBySideLoad(i, log) for i in range(3)]
    assert warm_up_side_by_side(loads, TimingConfig()) == [{"base": 0}, {"base": 1}, {"base": 2}]
    assert log == [("begin", 0), ("begin", 1), ("begin", 2), ("end", 0), ("end", 1), ("end", 2)]
    log.clear()
    failing = [SideBySideLoad(0, log), SideBySideLoad(1, log, fail_in="end"), SideBySideLoad(2, log, fail_in="end")]
    with pytest.raises(RuntimeError, match="load 1: end failed"):  # the first error, after every answer was read
        warm_up_side_by_side(failing, TimingConfig())
    assert [e for e in log if e[0] == "end"] == [("end", 0), ("end", 1), ("end", 2)]
    log.clear()
    broken = [SideBySideLoad(0, log), SideBySideLoad(1, log, fail_in="begin"), SideBySideLoad(2, log)]
    with pytest.raises(RuntimeError, match="load 1: begin failed"):  # load 0 asked: read; load 2 never asked
        warm_up_side_by_side(broken, TimingConfig())
    assert log == [("begin", 0), ("begin", 1), ("end", 0)]
    log.clear()

    class PlainLoad:  # FAKE: no side-by-side methods, warmed up after the others
        def warm_up(self, config):
            log.append(("warm_up", 9))
            return {"b": 9}

    assert warm_up_side_by_side([SideBySideLoad(0, log), PlainLoad()], TimingConfig()) == [{"base": 0}, {"b": 9}]
    assert log == [("begin", 0), ("end", 0), ("warm_up", 9)]


def test_the_minimum_loads_after_the_floor_warm_up_side_by_side():
    """The first two loads one after another (the first sizes the blocks, the second refits the window), the rest
    of the minimum side by side; every load then gets its rounds. Fake loads on a fake clock (named so)."""
    from trtprof.measure import interleave
    from tests.fakes import simulate as cal

    clock, names, log = cal.SimClock(), ("base", "cand"), []

    class Load(CostlyLoad):
        def warm_up(self, config):
            log.append(("warm_up", self.seed))
            return super().warm_up(config)

        def warm_up_begin(self, config):
            log.append(("begin", self.seed))
            self._config = config

        def warm_up_end(self):
            log.append(("end", self.seed))
            return super().warm_up(self._config)

    def open_load(i):
        load = Load(clock, names, 0.05, seed=i, log=[])
        load.seed = i
        return load

    plan = interleave.RoundPlan(time_budget_s=60.0, round_iterations=20)
    window = BatchWindow(started=0.0, budget_s=60.0, per_batch_s=60.0, grows=False)
    out = interleave.run_interleaved(names, open_load, plan, clock=clock, window=window)
    assert out.loads >= interleave.MIN_LOADS == 6
    assert log[:2] == [("warm_up", 0), ("warm_up", 1)]
    assert log[2:6] == [("begin", i) for i in range(2, 6)] and log[6:10] == [("end", i) for i in range(2, 6)]


def test_a_primed_plan_warms_up_shorter_and_never_longer():
    """``RoundPlan.primed`` (lone loads on a GPU, whose worker primed every arm at the shapes): 100 ms in a batch
    size's first load, 30 ms in a later one; a plan that already asks less keeps its own."""
    from trtprof.measure import interleave

    plan = interleave.RoundPlan()
    assert (plan.warmup_config(True).warmup_ms, plan.warmup_config(False).warmup_ms) == (500.0, 100.0)
    primed = plan.primed()
    assert (primed.warmup_config(True).warmup_ms, primed.warmup_config(False).warmup_ms) == (100.0, 30.0)
    assert (primed.first_warmup_ms, primed.later_warmup_ms) == (100.0, 30.0)
    short = interleave.RoundPlan(first_warmup_ms=20.0).primed()
    assert (short.warmup_config(True).warmup_ms, short.warmup_config(False).warmup_ms) == (20.0, 20.0)
    assert primed.primed() == primed


@pytest.mark.parametrize("first_ms, later_ms, first_warm_s, expected", [
    (500.0, 100.0, 2.0, 5.0 - 1.5 * 0.8),  # the time-bound part (3 arms × 500 ms) of a 2 s warm-up, 80 % skipped
    (500.0, 100.0, 1.0, 5.0 - 1.0 * 0.8),  # a warm-up shorter than by design: all of it is time-bound
    (100.0, 30.0, 2.0, 5.0 - 0.3 * 0.7),  # primed: 3 × 100 ms, 70 % of it skipped later
    (0.0, 0.0, 2.0, 5.0),  # no time-bound warm-up: a later load costs what the first did
])
def test_a_later_loads_cost_skips_the_plans_own_warm_up(first_ms, later_ms, first_warm_s, expected):
    from trtprof.measure import interleave

    plan = interleave.RoundPlan(first_warmup_ms=first_ms, load_warmup_ms=later_ms)
    assert interleave.later_load_s(5.0, first_warm_s, 3, plan) == pytest.approx(expected)
