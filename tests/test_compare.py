"""The speedup statistics on synthetic blocks with known answers, and the loop on fakes.

Synthetic latencies are m·exp(σ·Z) with Z symmetric, so each block's true median is m and "the CI
holds the true ratio" is a check against a known answer. The loop runs on ``calibration``'s
simulated runners and clock (named as such): no backend, no real time.
"""
from __future__ import annotations

import math

import numpy as np
import pytest

from trtprof import calibration as cal
from trtprof import compare as cmp
from trtprof import interleave, speedup
from trtprof.interleave import Arm, run_interleaved
from trtprof.speedup import (
    EQUIVALENT, FASTER, INCONCLUSIVE, SLOWER, distribution_shape, engine_median_ci, inconclusive_hint,
    mean_median_note, speedup_ci, verdict,
)
from trtprof.stats import median_ci_exact
from trtprof.timing import Samples, TimingConfig


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


def test_hierarchical_se_matches_a_direct_two_stage_resample():
    rng = np.random.default_rng(8)
    loads = [rng.normal(0, 0.01, size=r) for r in (5, 8, 3, 6)]
    fast = speedup.hierarchical_se(loads, n_resamples=4000, seed=1)
    draws = []
    for _ in range(4000):  # the definition, written out: loads with replacement, then rounds within
        picked = rng.integers(0, len(loads), len(loads))
        draws.append(np.mean([np.median(rng.choice(loads[i], len(loads[i]))) for i in picked]))
    direct = float(np.std(draws, ddof=1)) * math.sqrt(len(loads) / (len(loads) - 1))
    assert fast == pytest.approx(direct, rel=0.1)


def test_inconclusive_says_about_how_many_more_rounds():
    base = blocks(1.03, 0.3, loads=6, rounds=3, n=50, seed=9)
    cand = blocks(1.00, 0.3, loads=6, rounds=3, n=50, seed=10)
    s = speedup_ci(base, cand)
    assert s.verdict == INCONCLUSIVE
    more = speedup.rounds_to_decide(s)
    assert 0 < more < math.inf
    hint = inconclusive_hint(s, round_s=0.2)
    assert f"about {math.ceil(more)} more rounds" in hint and "--time-budget-s" in hint
    # and the estimate is roughly right: with that many more rounds of the same data it decides
    base2 = blocks(1.03, 0.3, loads=6, rounds=3 + math.ceil(2 * more / 6), n=50, seed=11)
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
                                     clock=world.clock, on_progress=progress)
    return world, out


def test_rounds_alternate_inside_each_load_and_every_load_gets_the_minimum():
    plan = interleave.RoundPlan(round_iterations=50)
    world, out = run_sim(cal.case_named("stationary 2 %"), 1.2, plan)
    assert out.loads >= plan.min_loads
    per_load = [[name for load, name, n in world.order if load == i and n == 50] for i in range(out.loads)]
    for names in per_load:
        assert len(names) >= 2 * plan.min_rounds
        assert names[:4] == ["base", "cand", "cand", "base"]  # A B, B A, …
    assert all(len(load) >= plan.min_rounds for load in out.arm("base").blocks)
    assert out.stop_reason == interleave.STOP_DECISIVE and out.speedups["cand"].verdict == FASTER


def test_budget_stops_a_noisy_a_a_after_the_minimum_and_says_inconclusive_or_equivalent():
    plan = interleave.RoundPlan(time_budget_s=3.0)
    seen = []
    _, out = run_sim(cal.case_named("stationary 30 %"), 1.0, plan, progress=seen.append)
    assert out.stop_reason == interleave.STOP_BUDGET
    assert out.rounds >= plan.min_loads * plan.min_rounds
    assert out.speedups["cand"].verdict in (INCONCLUSIVE, EQUIVALENT)
    assert seen and seen[-1].stop_reason == interleave.STOP_BUDGET and seen[-1].rounds == out.rounds
    assert all(p.loads >= plan.min_loads for p in seen)


def test_budget_is_respected_beyond_the_minimum():
    plan = interleave.RoundPlan(time_budget_s=12.0)
    world, out = run_sim(cal.case_named("stationary 30 %"), 1.0, plan)
    assert out.elapsed_s <= plan.time_budget_s + 3 * out.round_s + cal.SIM_LOAD_START_S


def test_loads_that_disagree_get_more_loads_not_more_rounds():
    plan = interleave.RoundPlan(time_budget_s=30.0)
    _, calm = run_sim(cal.case_named("stationary 10 %"), 1.0, plan, seed=3)
    _, offset = run_sim(cal.case_named("per-load offsets 3-8 %"), 1.0, plan, seed=3)
    assert calm.loads == plan.min_loads
    assert offset.loads > plan.min_loads


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


def test_the_schema_1_call_runs_one_load_of_the_given_runners_and_says_so():
    """run_interleaved(arms, plan) — kept for callers that cannot re-create runners per load."""
    arms = [Arm("fp32", FakeRunner(1.2, 1), {}), Arm("fp16", FakeRunner(1.0, 2), {})]
    out = run_interleaved(arms, interleave.RoundPlan(round_iterations=50, time_budget_s=0.5), measure=fake_measure)
    assert out.loads == 1 and out.arms[0] is arms[0] and arms[1].n_blocks == out.rounds >= interleave.MIN_ROUNDS
    s = out.speedups["fp16"]
    assert "one load only" in s.method and s.ci_low <= 1.2 <= s.ci_high
    legacy = speedup_ci(arms[0].latency_ms, arms[1].latency_ms,
                            rounds=(arms[0].stages["latency_ms"], arms[1].stages["latency_ms"]))
    assert legacy.estimate == pytest.approx(s.estimate)
    with pytest.raises(ValueError, match="blocks"):
        speedup_ci(arms[0].latency_ms, arms[1].latency_ms)


def test_sign_flip_interval_covers_non_normal_load_effects_where_t_falls_short():
    """Load effects of ±3-8 % per arm (trimodal differences): the randomization interval is exact
    under symmetry; it is part of the reported CI (hull with the t interval)."""
    rng = np.random.default_rng(15)

    def effects(n):
        return rng.choice((-1.0, 1.0), n) * rng.uniform(0.03, 0.08, n)

    covered = []
    for _ in range(400):
        x = effects(8) - effects(8) + rng.normal(0, 0.005, 8)
        low, high = speedup.sign_flip_interval(x)
        assert low <= float(np.mean(x)) <= high
        covered.append(low <= 0.0 <= high)
    assert np.mean(covered) >= 0.93
    base = blocks(1.0, 0.02, loads=6, rounds=4, n=100, seed=16)
    cand = blocks(1.0, 0.02, loads=6, rounds=4, n=100, seed=17)
    s = speedup_ci(base, cand)
    assert "sign-flip" in s.method
    t_half = speedup.t_quantile(s.df) * s.se_log
    assert math.log(s.ci_high / s.estimate) >= t_half - 1e-12  # the hull is never narrower than the t interval
