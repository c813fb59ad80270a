"""compare --serial-loads: loads whose worker processes never live at the same time (measure.serial_loads)."""
from __future__ import annotations

import numpy as np
import pytest
from scipy import stats as sps

from tests.fakes import simulate as cal
from trtprof.measure import interleave
from trtprof.measure.budget import BatchWindow
from trtprof.measure.serial_loads import LoneWorkers, run_serial
from trtprof.measure.timing import Samples, TimingConfig
from trtprof.stats.speedup import FASTER, SLOWER

NAMES = ("base", "cand")


class RecordingLoad:
    """Fake (named so): a load on a simulated clock that writes what is asked of it to ``log`` and refuses
    rounds once closed (the property the serial loop must keep)."""

    def __init__(self, index: int, clock: cal.SimClock, log: list, block_s: float, open_loads: set) -> None:
        self.index, self.clock, self.log, self.block_s, self.open_loads = index, clock, log, block_s, open_loads
        self.rng = np.random.default_rng(index)
        self.closed = False

    def block(self, config: TimingConfig) -> Samples:
        self.clock.t += self.block_s
        return Samples(stages={"latency_ms": np.exp(0.05 * self.rng.standard_normal(config.iterations))},
                       span_s=self.block_s, warmup_done=config.warmup, warmup_s=0.0)

    def warm_up(self, config: TimingConfig) -> dict[str, Samples]:
        return {n: self.block(config) for n in NAMES}

    def rounds(self, first: int, count: int, config: TimingConfig, order) -> list[dict[str, Samples]]:
        assert not self.closed, f"rounds asked of load {self.index} after it closed"
        self.log.append(("rounds", self.index, count))
        return [{n: self.block(config) for n in interleave.round_order(order, j)} for j in range(first, first + count)]

    def close(self) -> None:
        if not self.closed:
            self.log.append(("close", self.index))
            self.open_loads.discard(self.index)
        self.closed = True


def serial_run(budget_s: float, open_s: float = 0.5, grows: bool = False, refuses: bool = False):
    clock, log, open_loads = cal.SimClock(), [], set()

    def open_load(i: int) -> RecordingLoad:
        log.append(("open", i, sorted(open_loads)))  # which loads were still open when this one opened
        clock.t += open_s
        open_loads.add(i)
        return RecordingLoad(i, clock, log, 0.02, open_loads)

    plan = interleave.RoundPlan(time_budget_s=budget_s, round_iterations=20)
    window = BatchWindow(started=0.0, budget_s=budget_s, per_batch_s=budget_s, grows=grows, refuses=refuses)
    out = run_serial(NAMES, open_load, plan, clock=clock, window=window)
    return clock, out, log


def test_each_load_opens_only_after_every_earlier_one_closed_and_a_closed_load_gets_no_rounds():
    clock, out, log = serial_run(30.0)
    opens = [e for e in log if e[0] == "open"]
    assert len(opens) == out.loads >= interleave.MIN_LOADS
    assert all(still_open == [] for _, _, still_open in opens)  # nothing open beside a load being opened
    # per load: open, its rounds, close, and nothing of it after
    for i in range(out.loads):
        events = [k for k, e in enumerate(log) if e[1] == i]
        kinds = [log[k][0] for k in events]
        assert kinds[0] == "open" and kinds[-1] == "close" and set(kinds[1:-1]) == {"rounds"}
        assert events == list(range(events[0], events[-1] + 1))  # contiguous: no other load ran in between


def test_every_load_runs_the_minimum_rounds_where_the_budget_holds_them():
    clock, out, log = serial_run(30.0)
    per_load = {}
    for e in log:
        if e[0] == "rounds":
            per_load[e[1]] = per_load.get(e[1], 0) + e[2]
    assert set(per_load.values()) == {interleave.MIN_ROUNDS} and out.rounds == interleave.MIN_ROUNDS * out.loads
    assert clock.t <= 30.0 and not out.floor_overrun


def test_a_budget_below_the_floor_runs_two_loads_of_one_round_pair_and_says_it_overran():
    """Loads of 2 s in a 3-s budget: the floor (2 loads × 2 rounds) runs regardless, one load after the other,
    and the outcome says it ended past the budget; no third load."""
    clock, out, log = serial_run(3.0, open_s=2.0)
    assert out.loads == interleave.FLOOR_LOADS and out.rounds == interleave.FLOOR_LOADS * interleave.FLOOR_ROUNDS
    assert "the floor of 2 loads × 2 rounds needed" in out.floor_overrun and clock.t > 3.0


def test_a_given_budget_that_cannot_hold_the_minimum_is_refused_before_any_round():
    with pytest.raises(interleave.BudgetTooSmall):
        serial_run(5.0, open_s=2.0, refuses=True)


def test_a_default_budget_grows_to_the_minimum_s_loads_one_after_another():
    """The budget's growth (issue 42 #5) reckons the later loads one by one (``RoundLoop.minimum_needs_s``): with
    2-s loads a 5-s default grows, and the six loads run within what it grew to."""
    clock, out, log = serial_run(5.0, open_s=2.0, grows=True)
    assert out.budget_s > 5.0 and out.loads >= interleave.MIN_LOADS and clock.t <= out.budget_s * 1.1


# Runners of known truth through the serial loop (tests/fakes/simulate.py): its loads are not interleaved in
# time, so drift between loads falls into the load-to-load spread; the interval must still cover the truth and an
# A/A run must rarely be decisive.
SERIAL_REPLICATES = 120
SERIAL_CASES = ("stationary 10 %", "per-load offsets 3-8 %", "linear drift +2 %/s", "one-engine burst, 2 rounds")


def p_below(successes: int, n: int, figure: float) -> float:
    return float(sps.binomtest(successes, n, figure, alternative="less").pvalue)


@pytest.mark.slow
@pytest.mark.parametrize("name", SERIAL_CASES)
def test_serial_loads_a_a_is_rarely_decisive_and_the_interval_covers_the_truth(name):
    case = cal.case_named(name)
    for ratio in (1.0, 1.05):
        truth = case.true_ratio(ratio)
        reps = [cal.run_replicate(case, ratio, 11 * 100_003 + k, serial=True) for k in range(SERIAL_REPLICATES)]
        covered = sum(r.ci_low <= truth <= r.ci_high for r in reps)
        assert p_below(covered, SERIAL_REPLICATES, 0.94) > 0.01, (name, ratio, covered)
        if ratio == 1.0:
            quiet = sum(r.verdict not in (FASTER, SLOWER) for r in reps)
            assert p_below(quiet, SERIAL_REPLICATES, 0.95) > 0.01, (name, quiet)


def test_lone_workers_end_each_process_before_starting_the_next(fp32_record):
    """Real worker processes (ONNX Runtime on the CPU): when load 1 opens, load 0's process has exited cleanly
    (told to close and waited for, not killed); load 1's answers rounds; closing twice is harmless."""
    lone = LoneWorkers({"fp32": fp32_record, "fp32#2": fp32_record})
    try:
        first = lone.load(0, {"input": (1, 3, 16, 16)}, 0, (0, 100))
        assert first.worker.proc.poll() is None
        second = lone.load(1, {"input": (1, 3, 16, 16)}, 0, (0, 100))
        assert first.worker.proc.returncode == 0 and second.worker.proc.poll() is None
        second.warm_up(TimingConfig(warmup=1, iterations=2))
        rounds = second.rounds(0, 2, TimingConfig(warmup=0, iterations=3), ["fp32", "fp32#2"])
        assert [sorted(r) for r in rounds] == [["fp32", "fp32#2"]] * 2
        second.close()
        second.close()
        assert second.worker.proc.returncode == 0
    finally:
        lone.kill()
        lone.close()
