"""Nothing trtprof starts runs beside a timed round (issue 33, deliverable 2), and the compare JSON
says what ran when (``concurrent_with_timing``)."""
from __future__ import annotations

import pytest

from trtprof.measure import concurrent, interleave, workers
from trtprof.measure.concurrent import Span


def test_an_overlap_is_counted_only_inside_timed_spans():
    timed = [Span("r0", 10.0, 11.0), Span("r1", 12.0, 13.0)]
    assert concurrent.overlap_s(Span("before", 0.0, 10.0), timed, until=20.0) == 0.0  # ends as the round begins
    assert concurrent.overlap_s(Span("across", 10.5, 12.5), timed, until=20.0) == pytest.approx(1.0)
    assert concurrent.overlap_s(Span("still starting", 12.9, None), timed, until=20.0) == pytest.approx(0.1)
    rec = concurrent.record([Span("a", 1.0, 2.0), Span("b", 10.9, 11.5)], timed, origin=1.0, until=20.0)
    assert rec["overlapping"] == ["b"] and rec["timed_calls"] == 2 and rec["first_timed_s"] == 9.0
    assert [r["overlap_s"] for r in rec["work"]] == [0.0, pytest.approx(0.1)]


def test_a_worker_spawned_ahead_has_loaded_its_engines_before_the_next_timed_round(fp32_record, monkeypatch):
    """With one worker spawned ahead (SPAWN_AHEAD 1, 4 loads planned) and a budget that stops at the floor
    of 2 loads, opening load 1 starts worker 2, and the floor's rounds follow at once: before
    ``WorkerPool.settle`` they ran while worker 2 was still importing and loading. Now every timed round
    begins after every started worker said ready (by its own clock), and the JSON shows it."""
    from trtprof.compare.core import CompareOptions, compare_records

    monkeypatch.setattr(workers, "SPAWN_AHEAD", 1)
    plan = interleave.RoundPlan(time_budget_s=0.0, round_iterations=200, min_loads=4, min_rounds=2)
    report = compare_records({"a": fp32_record, "b": fp32_record}, [1], CompareOptions(plan=plan)).to_json()
    rec = report["concurrent_with_timing"]
    starts = {r["what"]: r for r in rec["work"] if r["what"].endswith("start-up")}
    assert set(starts) == {"worker 0 start-up", "worker 1 start-up", "worker 2 start-up"}
    assert rec["timed_calls"] >= 2 and rec["overlapping"] == []
    assert all(r["end_s"] is not None and r["end_s"] <= rec["first_timed_s"] for r in starts.values())
    accuracy = next(r for r in rec["work"] if r["what"].startswith("the accuracy pass"))
    assert accuracy["end_s"] <= rec["first_timed_s"] and accuracy["overlap_s"] == 0


def test_in_process_has_no_concurrency_record(fp32_record):
    from trtprof.compare.core import ISOLATION_IN_PROCESS, CompareOptions, compare_records

    plan = interleave.RoundPlan(time_budget_s=0.0, round_iterations=5, min_loads=2, min_rounds=2)
    report = compare_records({"a": fp32_record, "b": fp32_record}, [1],
                             CompareOptions(plan=plan, isolation=ISOLATION_IN_PROCESS)).to_json()
    assert report["concurrent_with_timing"] is None  # one thread: the loads take turns with everything else
