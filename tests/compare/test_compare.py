"""The speedup statistics on synthetic blocks with known answers, and the loop on fakes.

Synthetic latencies are m·exp(σ·Z) with Z symmetric, so each block's true median is m and "the CI
holds the true ratio" is a check against a known answer. The loop runs on ``calibration``'s
simulated runners and clock (named as such): no backend, no real time.
"""
from __future__ import annotations

import math

import numpy as np
import pytest

from tests.fakes import simulate as cal
from trtprof.compare import core as cmp
from trtprof.measure import interleave
from trtprof.measure.budget import BatchWindow, batch_window, tail_reserve_s
from trtprof.stats import speedup
from trtprof.measure.interleave import Arm
from trtprof.stats.speedup import (
    EQUIVALENT,
    FASTER,
    INCONCLUSIVE,
    SLOWER,
    distribution_shape,
    engine_median_ci,
    inconclusive_hint,
    mean_median_note,
    speedup_ci,
    verdict,
)
from trtprof.stats.latency import median_ci_exact
from trtprof.measure.timing import Samples, TimingConfig


def blocks(median_ms: float, sigma: float, loads: int, rounds: int, n: int, seed: int,
           load_factors: list[float] | None = None) -> list[list[np.ndarray]]:
    rng = np.random.default_rng(seed)
    factors = load_factors or [1.0] * loads
    return [[median_ms * factors[i] * np.exp(sigma * rng.standard_normal(n)) for _ in range(rounds)]
            for i in range(loads)]


@pytest.mark.parametrize("low, high, expected", [
    (1.05, 1.20, FASTER),
    (0.80, 0.95, SLOWER),
    (0.995, 1.005, EQUIVALENT),  # wholly inside ±1 %
    (1.002, 1.008, EQUIVALENT),  # above 1.0 but inside the margin: not a speedup to act on
    (0.98, 1.03, INCONCLUSIVE),  # holds 1.0 and reaches past the margin both ways
    (1.005, 1.03, INCONCLUSIVE),  # could be a 0.5 % or a 3 % speedup: not decided
])
def test_four_verdicts_from_the_ci_and_the_margin(low, high, expected):
    assert verdict(low, high) == expected


def test_margin_is_configurable():
    assert verdict(1.02, 1.04, margin=0.01) == FASTER
    assert verdict(1.02, 1.04, margin=0.05) == EQUIVALENT


def test_ten_percent_apart_ci_holds_1_10_and_is_faster_both_ways():
    base = blocks(1.10, 0.1, loads=6, rounds=5, n=100, seed=1)
    cand = blocks(1.00, 0.1, loads=6, rounds=5, n=100, seed=2)
    s = speedup_ci(base, cand)
    assert s.ci_low <= 1.10 <= s.ci_high and s.ci_low < s.estimate < s.ci_high
    assert s.verdict == FASTER and s.loads == 6 and s.rounds == 30 and s.df == 5
    assert speedup_ci(cand, base).verdict == SLOWER


def test_a_slow_load_widens_the_ci_where_pooled_iterations_would_not():
    """A/A, but one of six loads of the baseline is 6 % slow throughout (the ORT observation): the
    i.i.d. view of every iteration calls that a speedup; the load-level CI does not."""
    factors = [1.0, 1.0, 1.06, 1.0, 1.0, 1.0]
    base = blocks(1.0, 0.02, loads=6, rounds=8, n=200, seed=3, load_factors=factors)
    cand = blocks(1.0, 0.02, loads=6, rounds=8, n=200, seed=4)
    s = speedup_ci(base, cand)
    pooled_b = np.concatenate([np.concatenate(x) for x in base])
    pooled_c = np.concatenate([np.concatenate(x) for x in cand])
    iid_lo, _ = median_ci_exact(pooled_b)
    _, iid_hi = median_ci_exact(pooled_c)
    assert iid_lo / iid_hi > 1.0  # the i.i.d. intervals do not even overlap: a false "faster"
    assert s.ci_low <= 1.0 <= s.ci_high and s.verdict != FASTER
    assert s.components["between"] > 0


def test_one_disturbed_round_does_not_move_the_estimate():
    base = blocks(1.0, 0.02, loads=6, rounds=7, n=200, seed=5)
    cand = blocks(1.0, 0.02, loads=6, rounds=7, n=200, seed=6)
    clean = speedup_ci(base, cand)
    base[2][3] = base[2][3] * 1.3  # one block of one engine 30 % slow
    hit = speedup_ci(base, cand)
    assert abs(math.log(hit.estimate / clean.estimate)) < 0.01
    assert hit.ci_low <= 1.0 <= hit.ci_high


def test_engine_median_ci_is_hierarchical_and_holds_the_median():
    b = blocks(5.0, 0.1, loads=6, rounds=5, n=100, seed=7, load_factors=[0.97, 1.03, 1.0, 0.98, 1.02, 1.0])
    low, high = engine_median_ci(b)
    pooled = np.concatenate([np.concatenate(x) for x in b])
    i_low, i_high = median_ci_exact(pooled)
    assert low <= 5.0 <= high and low <= float(np.median(pooled)) <= high
    assert high - low > 2 * (i_high - i_low)  # the load spread is in it; the i.i.d. interval misses it


def test_the_interval_is_the_textbook_t_interval_of_the_load_values():
    """Written out by hand: per load the mean over its A B rounds and its B A rounds of the log ratio of the
    medians pooled over those rounds, then mean ± t(L−1) · sd / √L."""
    rng = np.random.default_rng(8)
    base = blocks(1.0, 0.05, loads=7, rounds=6, n=60, seed=21, load_factors=list(1 + 0.02 * rng.standard_normal(7)))
    cand = blocks(1.0, 0.05, loads=7, rounds=6, n=60, seed=22)
    s = speedup_ci(base, cand)
    values = []
    for b_load, c_load in zip(base, cand):
        ab = math.log(np.median(np.concatenate(b_load[0::2])) / np.median(np.concatenate(c_load[0::2])))
        ba = math.log(np.median(np.concatenate(b_load[1::2])) / np.median(np.concatenate(c_load[1::2])))
        values.append((ab + ba) / 2)
    mean, sd = float(np.mean(values)), float(np.std(values, ddof=1))
    half = 2.4469118511 * sd / math.sqrt(7)  # t(6 df) at 97.5 %
    assert s.df == 6 and s.se_log == pytest.approx(sd / math.sqrt(7))
    assert (s.ci_low, s.estimate, s.ci_high) == pytest.approx((math.exp(mean - half), math.exp(mean), math.exp(mean + half)))
    assert s.load_values == pytest.approx(tuple(values))


def test_an_order_effect_cancels_inside_each_round_pair():
    """Equal engines, but whichever runs second in a round is 5 % faster: the rounds alternate A B /
    B A, so every pair of rounds cancels it and the estimate stays at 1.0, with a narrow CI."""
    rng = np.random.default_rng(23)
    base, cand = [], []
    for load in range(6):
        b_load, c_load = [], []
        for j in range(4):
            second = "cand" if (j + load) % 2 == 0 else "base"  # loads start with either arm
            b_load.append(np.exp(0.01 * rng.standard_normal(50)) * (0.95 if second == "base" else 1.0))
            c_load.append(np.exp(0.01 * rng.standard_normal(50)) * (0.95 if second == "cand" else 1.0))
        base.append(b_load)
        cand.append(c_load)
    s = speedup_ci(base, cand)
    assert abs(math.log(s.estimate)) < 0.005 and s.ci_low <= 1.0 <= s.ci_high and s.half_width < 0.01


def test_inconclusive_says_about_how_many_more_rounds():
    base = blocks(1.01, 0.3, loads=6, rounds=3, n=50, seed=9)  # a true 1 %: on the margin's edge
    cand = blocks(1.00, 0.3, loads=6, rounds=3, n=50, seed=10)
    s = speedup_ci(base, cand)
    assert s.verdict == INCONCLUSIVE
    more = speedup.rounds_to_decide(s)
    assert 0 < more < math.inf
    hint = inconclusive_hint(s, round_s=0.2)
    assert f"about {math.ceil(more)} more rounds" in hint and "--time-budget-s" in hint
    # and the estimate points the right way: with that many more rounds of the same data the CI narrows
    # (a true 1 % sits on the margin's edge, so no number of rounds decides it; the CI is what shrinks)
    base2 = blocks(1.01, 0.3, loads=6, rounds=3 + math.ceil(2 * more / 6), n=50, seed=11)
    cand2 = blocks(1.00, 0.3, loads=6, rounds=3 + math.ceil(2 * more / 6), n=50, seed=12)
    assert speedup_ci(base2, cand2).half_width < s.half_width


def test_bimodal_latency_is_detected_and_the_mean_ratio_reported():
    rng = np.random.default_rng(13)
    n = 4000
    bimodal = np.where(rng.random(n) < 0.55, 1.0, 1.3) * np.exp(0.02 * rng.standard_normal(n))
    steady = 1.15 * np.exp(0.02 * rng.standard_normal(n))
    shape = distribution_shape(bimodal)
    assert shape.multimodal and shape.modes == 2
    assert shape.mode_ms[0] == pytest.approx(1.0, abs=0.03) and shape.mode_ms[1] == pytest.approx(1.3, abs=0.03)
    assert not distribution_shape(steady).multimodal
    b = [list(np.array_split(bimodal, 20)[i * 5:(i + 1) * 5]) for i in range(4)]
    c = [list(np.array_split(steady, 20)[i * 5:(i + 1) * 5]) for i in range(4)]
    s = speedup_ci(b, c)
    assert s.median_ratio < 0.92 and abs(s.mean_ratio - 1.0) < 0.03  # "11 % slower" vs means 1 % apart
    note = mean_median_note(s)
    assert note is not None and f"{s.mean_ratio:.3f}" in note


def test_heavy_tail_is_flagged_and_a_lognormal_is_not():
    rng = np.random.default_rng(14)
    body = np.exp(0.02 * rng.standard_normal(5000))
    tail = np.where(rng.random(5000) < 0.03, body * 3, body)
    assert distribution_shape(tail).heavy_tail
    assert not distribution_shape(body).heavy_tail


# ---------------------------------------------------------------------------------------------
# The loop, on calibration's simulated runners and clock (fakes: no backend, no real time)
# ---------------------------------------------------------------------------------------------


class RecordingWorld(cal.SimWorld):
    """Fake: the simulated world, also recording which arm ran in which load, in order."""

    def __init__(self, case: cal.Case, seed: int) -> None:
        super().__init__(case, seed)
        self.order: list[tuple[int, str, int]] = []

    def measure(self, runner, feeds, config: TimingConfig) -> Samples:
        self.order.append((runner.load, runner.name, config.iterations))
        return super().measure(runner, feeds, config)


def run_sim(case: cal.Case, ratio: float, plan: interleave.RoundPlan, seed: int = 0, progress=None):
    world = RecordingWorld(case, seed)
    names = ("base", "cand")
    out = interleave.run_interleaved(names, lambda i: world.open_load(i, names, (ratio, 1.0)), plan,
                                     clock=world.clock, hooks=interleave.LoopHooks(on_progress=progress))
    return world, out


def test_rounds_alternate_inside_each_load_and_every_load_gets_the_minimum():
    plan = interleave.RoundPlan(round_iterations=50)
    world, out = run_sim(cal.case_named("stationary 2 %"), 1.2, plan)
    assert out.loads >= plan.min_loads
    per_load = [[name for load, name, n in world.order if load == i and n == 50] for i in range(out.loads)]
    starts = []
    for names in per_load:
        assert len(names) >= 2 * plan.min_rounds
        assert names[:4] in (["base", "cand", "cand", "base"], ["cand", "base", "base", "cand"])  # A B, B A, …
        starts.append(names[0])
    # balanced: of every two loads one starts with each arm; which one is drawn (seeded)
    assert all(sorted(starts[k:k + 2]) == ["base", "cand"] for k in range(0, len(starts) - 1, 2))
    first_arms = [interleave.load_order(["base", "cand"], i)[0] for i in range(20)]
    assert all(sorted(first_arms[k:k + 2]) == ["base", "cand"] for k in range(0, 20, 2))
    assert len({tuple(first_arms[k:k + 2]) for k in range(0, 20, 2)}) == 2  # drawn, not the same in every pair
    assert all(len(load) >= plan.min_rounds for load in out.arm("base").blocks)
    assert out.stop_reason == interleave.STOP_DECISIVE and out.speedups["cand"].verdict == FASTER


def test_a_budget_too_small_for_the_minimum_runs_the_floor_and_stops_within_it():
    plan = interleave.RoundPlan(time_budget_s=3.0)  # each simulated load costs 1 s to start: 6 do not fit
    seen = []
    _, out = run_sim(cal.case_named("stationary 30 %"), 1.0, plan, progress=seen.append)
    assert out.stop_reason == interleave.STOP_BUDGET
    assert interleave.FLOOR_LOADS <= out.loads < plan.min_loads
    assert all(len(load) >= interleave.FLOOR_ROUNDS for load in out.arm("base").blocks)
    assert out.speedups["cand"].verdict in (INCONCLUSIVE, EQUIVALENT)
    assert seen and seen[-1].stop_reason == interleave.STOP_BUDGET and seen[-1].rounds == out.rounds
    assert seen[-1].budget_s == 3.0 and seen[-1].elapsed_s <= 3.0 * 1.1


@pytest.mark.parametrize("budget", [3.0, 12.0, 30.0])
def test_the_budget_is_honoured_within_ten_percent(budget):
    """On the simulated clock (no machine speed in it): load starts, warm-ups and rounds all count."""
    for seed in range(3):
        _, out = run_sim(cal.case_named("stationary 30 %"), 1.0, interleave.RoundPlan(time_budget_s=budget), seed=seed)
        assert out.elapsed_s <= budget * 1.1 and out.budget_s == budget


def test_the_budget_counts_from_started_when_given():
    """compare passes the moment it began waiting for its workers: that time is spent already."""
    world = RecordingWorld(cal.case_named("stationary 30 %"), 0)
    world.clock.t = 5.0  # five simulated seconds went to starting workers before the loop
    names = ("base", "cand")
    out = interleave.run_interleaved(names, lambda i: world.open_load(i, names, (1.0, 1.0)),
                                     interleave.RoundPlan(time_budget_s=12.0), clock=world.clock,
                                     window=BatchWindow(started=0.0, budget_s=12.0))
    assert world.clock.t <= 12.0 * 1.1 and out.elapsed_s == pytest.approx(world.clock.t)


def test_loads_that_disagree_get_more_loads_not_more_rounds():
    plan = interleave.RoundPlan(time_budget_s=30.0)
    _, calm = run_sim(cal.case_named("stationary 10 %"), 1.0, plan, seed=3)
    _, offset = run_sim(cal.case_named("per-load offsets 3-8 %"), 1.0, plan, seed=3)
    assert offset.loads > calm.loads >= plan.min_loads
    assert calm.rounds / calm.loads > offset.rounds / offset.loads  # the calm one spent its time on rounds


def test_linear_drift_cancels_in_interleaved_rounds():
    """Equal engines on a device that slows 2 %/s: rounds alternate, so no verdict is faked."""
    plan = interleave.RoundPlan()
    verdicts = [run_sim(cal.case_named("linear drift +2 %/s"), 1.0, plan, seed=k)[1].speedups["cand"].verdict
                for k in range(5)]
    assert not any(v in (FASTER, SLOWER) for v in verdicts)


def test_target_ci_stops_when_the_ci_is_narrow_even_if_it_straddles_the_margin():
    """A true 1 % difference sits on the margin edge: never decisive; the target stops it."""
    plan = interleave.RoundPlan(target_ci=0.01, time_budget_s=60.0)
    _, out = run_sim(cal.case_named("stationary 2 %"), 1.01, plan)
    assert out.stop_reason == interleave.STOP_TARGET
    assert out.speedups["cand"].half_width <= 0.01


def test_arm_labels_repeat_a_precision_for_a_a():
    assert cmp.arm_labels(["fp32", "fp32"]) == ["fp32", "fp32#2"]
    assert cmp.arm_labels(["fp32", "fp16", "fp32"]) == ["fp32", "fp16", "fp32#2"]


class FakeRunner:
    """Fake: a cpu 'runner' whose blocks come from fake_measure (lognormal around its median)."""

    device = "cpu"

    def __init__(self, median_ms: float, seed: int) -> None:
        self.median_ms, self.rng = median_ms, np.random.default_rng(seed)


def fake_measure(runner: FakeRunner, feeds, config: TimingConfig) -> Samples:
    lat = runner.median_ms * np.exp(0.02 * runner.rng.standard_normal(config.iterations))
    return Samples(stages={"latency_ms": lat}, span_s=float(lat.sum()) / 1e3, warmup_done=config.warmup, warmup_s=0.0)


def test_run_one_load_measures_the_given_runners_as_one_load_and_says_so():
    """run_one_load(arms, plan) — for callers that cannot re-create runners per load."""
    arms = [Arm("fp32", FakeRunner(1.2, 1), {}), Arm("fp16", FakeRunner(1.0, 2), {})]
    out = interleave.run_one_load(arms, interleave.RoundPlan(round_iterations=50, time_budget_s=0.5),
                                  measure=fake_measure)
    assert out.loads == 1 and out.arms[0] is arms[0] and arms[1].n_blocks == out.rounds >= interleave.MIN_ROUNDS
    s = out.speedups["fp16"]
    assert "one load only" in s.method and s.ci_low <= 1.2 <= s.ci_high
    with pytest.raises(ValueError, match="blocks"):
        speedup_ci(arms[0].latency_ms, arms[1].latency_ms)


def mixture_values(gap: float, spread: float = 0.004) -> list[float]:
    """Five loads at 0 ± spread and one at -gap (log ratios)."""
    return [spread, -spread, 0.0, spread / 2, -spread / 2, -gap]


def test_a_minority_of_loads_far_from_the_rest_is_a_mixture_just_beyond_the_threshold():
    values = mixture_values(0.0)[:5]
    spread = 1.4826 * float(np.median(np.abs(np.array(values) - np.median(values))))
    within, pairs = 0.0, 2.0  # the rounds say nothing: the majority's own spread is the yardstick
    beyond = min(values) - speedup.MIXTURE_SEPARATION * spread * 1.05
    inside = min(values) - speedup.MIXTURE_SEPARATION * spread * 0.95
    assert inside < -math.log1p(0.01)  # the margin is not what decides here
    assert "1 of 6 loads" in speedup.load_mixture(values + [beyond], within, pairs, margin=0.01)
    assert speedup.load_mixture(values + [inside], within, pairs, margin=0.01) == ""


def test_a_mixture_needs_a_minority_and_a_gap_beyond_the_margin():
    values = mixture_values(0.0, spread=0.0002)[:5]
    assert speedup.load_mixture(values + [-0.0099], 0.0, 2.0, margin=0.01) == ""  # below the margin (log 1.01)
    assert speedup.load_mixture(values + [-0.0101], 0.0, 2.0, margin=0.01) != ""
    half = [0.0, 0.001, -0.001, -0.1, -0.101, -0.099]  # 3 of 6: two modes, but no minority
    assert speedup.load_mixture(half, 0.0, 2.0, margin=0.01) == ""
    assert speedup.load_mixture([0.0, 0.001, -0.2], 0.0, 2.0, margin=0.01) == ""  # < MIXTURE_MIN_LOADS
    # the rounds' own spread counts: a load 3 % away is no mode when one load value is ±1 % noisy
    assert speedup.load_mixture(values + [-0.03], within=2 * 0.01 ** 2, pairs_per_load=2.0, margin=0.01) == ""


def test_a_mixture_makes_the_verdict_inconclusive_with_the_reason():
    factors = [1.0, 1.0, 1.0, 1.0, 1.0, 1.25]  # the candidate 25 % slower in one load of six
    base = blocks(1.50, 0.01, loads=6, rounds=4, n=100, seed=31)
    cand = blocks(1.00, 0.01, loads=6, rounds=4, n=100, seed=32, load_factors=factors)
    s = speedup_ci(base, cand)
    assert s.mixture and "1 of 6 loads" in s.mixture and "slower" in s.mixture
    assert verdict(s.ci_low, s.ci_high) == FASTER and s.verdict == INCONCLUSIVE
    assert inconclusive_hint(s, 0.2).startswith(s.mixture)
    assert s.to_json()["mixture"] == s.mixture


def test_a_round_beyond_the_outlier_threshold_is_set_aside_and_one_inside_it_is_kept():
    rng = np.random.default_rng(41)
    loads = [0.01 * rng.standard_normal(8) for _ in range(6)]
    gaps = np.concatenate([[v[i] - np.median(np.delete(v, i)) for i in range(v.size)] for v in loads])
    sigma = 1.4826 * float(np.median(np.abs(gaps)))  # σ of a round against the median of the others
    others = np.median(np.delete(loads[2], 3))
    for factor, expected in ((1.2, 1), (0.8, 0)):
        moved = [v.copy() for v in loads]
        moved[2][3] = others + factor * speedup.ROUND_OUTLIER_Z * sigma  # one disturbed round
        kept, aside = speedup.set_aside(moved)
        assert aside == expected and np.isnan(kept[2][3]) == bool(expected)


class ScheduledRunner:
    """Fake: a cpu 'runner' whose round blocks are constant at a scheduled latency (the candidate's
    rounds follow ``pattern`` by round index; warm-up blocks sit at the median)."""

    device = "cpu"

    def __init__(self, median_ms: float, pattern: tuple[float, ...] = (0.0,)) -> None:
        self.median_ms, self.pattern, self.rounds = median_ms, pattern, 0


def scheduled_loop(a: float) -> interleave.InterleavedOutcome:
    """Six loads whose load values all equal log 1.05 exactly while their rounds spread by ±a
    (rounds θ+a, θ+a, θ−a, θ−a, …), on a fake clock."""
    clock = [0.0]

    def measure(runner: ScheduledRunner, feeds, config: TimingConfig) -> Samples:
        factor = 1.0
        if config.warmup == interleave.ROUND_WARMUP and config.warmup_ms is None:  # a round's block
            factor = math.exp(-runner.pattern[runner.rounds % len(runner.pattern)])
            runner.rounds += 1
        lat = np.full(config.iterations, runner.median_ms * factor)
        clock[0] += float(lat.sum()) / 1e3 + 0.001
        return Samples(stages={"latency_ms": lat}, span_s=float(lat.sum()) / 1e3, warmup_done=config.warmup,
                       warmup_s=0.0)

    def open_load(i: int) -> interleave.InProcessLoad:
        clock[0] += 0.1
        return interleave.InProcessLoad({"base": (ScheduledRunner(1.05), {}),
                                         "cand": (ScheduledRunner(1.0, (a, a, -a, -a)), {})}, measure)

    plan = interleave.RoundPlan(round_iterations=20, time_budget_s=3.0)
    return interleave.run_interleaved(["base", "cand"], open_load, plan, clock=lambda: clock[0])


def test_an_early_stop_needs_the_rounds_spread_not_only_load_values_that_agree():
    """Load values that agree more closely than their rounds allow do not stop the loop early: the
    stopping rule's SE is at least what the rounds' spread implies (speedup.within_floor_se)."""
    quiet = scheduled_loop(0.0)
    assert quiet.stop_reason == interleave.STOP_DECISIVE and quiet.loads == 6
    noisy = scheduled_loop(0.03)
    s = noisy.speedups["cand"]
    assert s.se_log == pytest.approx(0.0, abs=1e-12) and s.se_within > 0  # the 95 % CI alone says "decided"
    assert quiet.rounds == 6 * interleave.MIN_ROUNDS  # decided at the first look
    assert noisy.rounds > quiet.rounds and s.verdict == FASTER  # … here only once the rounds' spread allows


# ---------------------------------------------------------------------------------------------
# The budget on a fake clock: where the stop falls, the reserve for the end, the floor's overrun
# ---------------------------------------------------------------------------------------------


class FixedCostLoad:
    """Fake: every block (warm-up or round, per arm) moves a fake clock by exactly ``block_s``; the
    latencies are lognormal with a 30 % spread, so that no verdict stops the loop early."""

    def __init__(self, clock: cal.SimClock, names, block_s: float, seed: int) -> None:
        self.clock, self.names, self.block_s = clock, list(names), block_s
        self.rng = np.random.default_rng(seed)

    def block(self, config: TimingConfig) -> Samples:
        self.clock.t += self.block_s
        lat = np.exp(0.3 * self.rng.standard_normal(config.iterations))
        return Samples(stages={"latency_ms": lat}, span_s=self.block_s, warmup_done=config.warmup, warmup_s=0.0)

    def warm_up(self, config: TimingConfig) -> dict[str, Samples]:
        return {n: self.block(config) for n in self.names}

    def rounds(self, first, count, config, order):
        return [{n: self.block(config) for n in interleave.round_order(order, j)} for j in range(first, first + count)]

    def close(self) -> None:
        pass


def fixed_cost_run(start_s: float, *, budget_s: float = 12.0, reserve_s: float = 0.0, open_s: float = 0.5,
                   block_s: float = 0.1):
    """run_interleaved on FixedCostLoads: ``start_s`` fake seconds already spent (start-up) when it begins."""
    clock = cal.SimClock()
    clock.t = start_s
    names = ("base", "cand")

    def open_load(i: int) -> FixedCostLoad:
        clock.t += open_s
        return FixedCostLoad(clock, names, block_s, seed=i)

    plan = interleave.RoundPlan(time_budget_s=12.0, round_iterations=20)
    return clock, interleave.run_interleaved(names, open_load, plan, clock=clock,
                                             window=BatchWindow(started=0.0, budget_s=budget_s, reserve_s=reserve_s,
                                                                per_batch_s=plan.time_budget_s))


def loop_at(elapsed_s: float, *, reserve_s: float, rounds_done=(4, 4), round_s: float = 1.0):
    """A loop (the state of run_interleaved) on a fake clock ``elapsed_s`` after its start, with
    ``rounds_done`` per load, each round costing ``round_s``; budget 12 s per batch size."""
    clock = cal.SimClock()
    clock.t = elapsed_s
    loop = interleave.RoundLoop(["base", "cand"], lambda i: None, interleave.RoundPlan(time_budget_s=12.0), clock,
                            BatchWindow(started=0.0, budget_s=12.0, reserve_s=reserve_s, per_batch_s=12.0))
    loop.done, loop.round_s, loop.speedups = list(rounds_done), round_s, {}
    return loop


def test_the_last_round_pair_runs_just_inside_the_deadline_and_not_just_outside():
    """Deadline = budget − reserve − slack (BUDGET_PLAN_SHARE of the budget): 12 − 1 − 0.6 = 10.4 s.
    A round pair costs 2 s here, so at 8.39 s one still fits and at 8.41 s nothing does: time_budget."""
    slack = (1 - interleave.BUDGET_PLAN_SHARE) * 12.0
    deadline = 12.0 - 1.0 - slack
    inside = loop_at(deadline - 2.0 - 0.01, reserve_s=1.0)
    assert inside.next_sweep() == ([2, 0], False)
    outside = loop_at(deadline - 2.0 + 0.01, reserve_s=1.0)
    assert outside.next_sweep() == ([], False)


def test_the_reserve_for_the_end_comes_out_of_the_loop_s_time():
    """The same moment, with and without 0.2 s kept for what runs after measuring: the round pair that
    fits without the reserve does not fit with it."""
    slack = (1 - interleave.BUDGET_PLAN_SHARE) * 12.0
    at = 12.0 - slack - 2.0 - 0.1
    assert loop_at(at, reserve_s=0.0).next_sweep() == ([2, 0], False)
    assert loop_at(at, reserve_s=0.2).next_sweep() == ([], False)


def test_the_floor_that_ends_just_inside_the_deadline_says_nothing_and_just_outside_says_one_line():
    """The floor: 2 loads (0.5 s to open, 2 × 0.1 s warm-up each) and 2 rounds each (2 × 0.1 s per round):
    2.2 s after the start-up. Budget 12 s, 1 s kept for the end: the floor must end by 11 s."""
    _, inside = fixed_cost_run(8.7, reserve_s=1.0)
    assert inside.loads == interleave.FLOOR_LOADS and inside.rounds == interleave.FLOOR_LOADS * interleave.FLOOR_ROUNDS
    assert inside.elapsed_s == pytest.approx(10.9) and inside.floor_overrun == ""
    assert inside.stop_reason == interleave.STOP_BUDGET and inside.reserve_s == 1.0 and inside.budget_s == 12.0
    clock, outside = fixed_cost_run(8.9, reserve_s=1.0)
    assert outside.rounds == interleave.FLOOR_LOADS * interleave.FLOOR_ROUNDS and clock.t == pytest.approx(11.1)
    assert outside.floor_overrun == \
        "the floor of 2 loads × 2 rounds needed 12.1 s of a 12 s budget (1.0 s of it kept for the end)"
    assert interleave.floor_overrun_line(14.1, 12.0) == "the floor of 2 loads × 2 rounds needed 14.1 s of a 12 s budget"
    # the floor's rounds on every load opened: three loads (the budget seemed to fit them), or one (its two pairs)
    assert interleave.floor_overrun_line(9.0, 8.0, loads=3) == "the floor of 3 loads × 2 rounds needed 9.0 s of a 8 s budget"
    assert interleave.floor_overrun_line(9.0, 8.0, loads=1, rounds=4) == \
        "the floor of 1 load × 4 rounds needed 9.0 s of a 8 s budget"


class SlowingLoad(FixedCostLoad):
    """Fake: warm-ups cost ``block_s`` as before, every round block ``round_block_s`` (a machine that turned busy
    after the loads were opened: the plan fitted more loads than the floor's, then their floor overran)."""

    round_block_s = 2.0

    def rounds(self, first, count, config, order):
        self.block_s, cheap = self.round_block_s, self.block_s
        try:
            return super().rounds(first, count, config, order)
        finally:
            self.block_s = cheap


def test_a_floor_overrun_after_more_loads_than_the_floor_names_what_ran():
    """CI (load 2-5) saw it: the budget fitted more loads than the floor's two, the machine slowed, and the
    floor's rounds on every opened load ran past the budget. The line names the loads and rounds that ran
    (it said "2 loads × 2 rounds" whatever ran); nothing beyond the floor runs after it."""
    clock = cal.SimClock()
    names = ("base", "cand")
    plan = interleave.RoundPlan(time_budget_s=12.0, round_iterations=20)
    out = interleave.run_interleaved(names, lambda i: SlowingLoad(clock, names, 0.1, seed=i), plan, clock=clock,
                                     window=BatchWindow(started=0.0, budget_s=12.0, reserve_s=0.0, per_batch_s=12.0))
    assert out.loads > interleave.FLOOR_LOADS and out.rounds == out.loads * interleave.FLOOR_ROUNDS
    assert out.floor_overrun.startswith(f"the floor of {out.loads} loads × {interleave.FLOOR_ROUNDS} rounds needed ")


def test_with_time_left_the_loop_ends_inside_its_deadline():
    """Start-up 1 s of a 12 s budget with 0.5 s kept for the end: the loop plans to its deadline and the
    last sweep ends before it (the fake rounds cost exactly what they cost before)."""
    clock, out = fixed_cost_run(1.0, reserve_s=0.5)
    assert out.loads >= interleave.MIN_LOADS and out.stop_reason == interleave.STOP_BUDGET
    assert clock.t <= 12.0 - 0.5 and out.elapsed_s == pytest.approx(clock.t)


def test_each_batch_size_is_done_by_its_share_of_the_budget():
    """batch_window: budget 10 s per batch size, 3 batch sizes, 1.5 s kept for the end (0.5 s each)."""
    assert batch_window(0, 99.0, 10.0, 1.5, 3) == (10.0, 0.5)  # the first counts from the start: start-up is its
    assert batch_window(1, 4.0, 10.0, 1.5, 3) == (14.0, 0.5)  # the first stopped at 4 s: one budget from there
    budget, reserve = batch_window(2, 22.0, 10.0, 1.5, 3)  # the second ran over to 22 s: caught up by the third
    assert budget == 30.0 and budget - reserve == pytest.approx(30.0 - 1.5)  # its deadline leaves the whole reserve
    budget, reserve = batch_window(2, 19.0, 10.0, 1.5, 3)  # 1 s of slack: no more than all three budgets
    assert budget == 29.0 and budget - reserve == pytest.approx(28.5)


def test_process_start_agrees_with_ps_elapsed_time():
    """The process's age from /proc/self/stat (clock ticks since boot) against ps's own elapsed seconds
    for this process: a wrong field or tick rate is off by far more than a second."""
    import os
    import shutil
    import subprocess
    import time

    from trtprof.util import clock as process_clock

    if not os.path.exists("/proc/self/stat") or shutil.which("ps") is None:
        pytest.skip("no /proc or no ps here: the CLI falls back to the moment main() began")
    now = time.perf_counter()
    started = process_clock.process_start()
    etimes = int(subprocess.run(["ps", "-o", "etimes=", "-p", str(os.getpid())], capture_output=True, text=True,
                                check=True).stdout.strip())
    assert started is not None
    assert abs((now - started) - etimes) <= 1.5
    assert process_clock.process_start(clock=lambda: 1000.0) == pytest.approx(1000.0 - (now - started), abs=1.5)


@pytest.mark.parametrize("imports_s, batch_sizes, expected", [(0.5, 1, 1.0), (0.5, 2, 2.0), (-0.1, 2, 0.0)])
def test_the_end_reserve_is_twice_the_imports_per_batch_size(imports_s, batch_sizes, expected):
    """On the H200 the tail (closing workers, analysis, the interpreter's exit with its CUDA context) took
    1.5 s after imports of 0.44-0.67 s; the launch to the comparison (10-21 s there) is no longer the basis."""
    assert tail_reserve_s(imports_s, batch_sizes) == pytest.approx(expected)
