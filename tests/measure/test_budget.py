"""measure.budget.TimeBudget: one value for --time-budget-s (issue 32), on made-up clock values."""
from __future__ import annotations

import dataclasses

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


def test_compare_options_refuse_a_budget_that_disagrees_with_the_plan():
    from trtprof.compare.core import CompareOptions
    from trtprof.measure.interleave import RoundPlan

    assert CompareOptions(plan=RoundPlan(time_budget_s=4.0), budget=TimeBudget(4.0)).time_budget.per_batch_s == 4.0
    assert CompareOptions(plan=RoundPlan(time_budget_s=4.0)).time_budget == TimeBudget(4.0)
    with pytest.raises(ValueError, match="plan"):
        CompareOptions(plan=RoundPlan(time_budget_s=4.0), budget=TimeBudget(5.0))


def test_the_build_tally_leaves_out_only_engines_really_built_and_passes_each_on():
    """compare_model and the A/B leave engine builds (a one-off) out of the budget; a cache hit's
    lookup seconds stay in it."""
    from types import SimpleNamespace

    from trtprof.compare.core import BuildTally, CompareOptions
    from trtprof.measure.interleave import RoundPlan

    heard: list[object] = []
    tally = BuildTally(heard.append)
    built, hit = SimpleNamespace(built=True, seconds=40.0), SimpleNamespace(built=False, seconds=0.2)
    tally(built)
    tally(hit)
    assert tally.seconds == 40.0 and heard == [built, hit]
    options = CompareOptions(plan=RoundPlan(time_budget_s=10.0),
                             budget=TimeBudget.for_command(10.0, CommandClock(started=100.0, imported=100.5)))
    assert options.leaving_out(tally.seconds).time_budget.start == 140.0
