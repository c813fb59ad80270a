"""Speedup statistics on synthetic samples with known answers, and the interleaving loop on fakes.

The synthetic samples are built so the true medians are known exactly (e.g. m·exp(σ·Z) with Z
symmetric has median m), so "the CI holds the true ratio" is a check against a known answer.
"""
from __future__ import annotations

import numpy as np
import pytest

from trtprof import compare as cmp
from trtprof.timing import Samples, TimingConfig

N = 3000


def lognormal(median_ms: float, sigma: float, n: int, seed: int) -> np.ndarray:
    return median_ms * np.exp(sigma * np.random.default_rng(seed).standard_normal(n))


def heavy_tailed(median_ms: float, n: int, seed: int) -> np.ndarray:
    """m·exp(0.05·Cauchy): the median is exactly m, the mean does not exist (wild outliers both ways)."""
    return median_ms * np.exp(0.05 * np.random.default_rng(seed).standard_cauchy(n))


def test_ten_percent_apart_ci_holds_1_10_and_verdict_faster():
    baseline = lognormal(1.10, 0.1, N, seed=1)
    candidate = lognormal(1.00, 0.1, N, seed=2)
    s = cmp.speedup_ci(baseline, candidate)
    assert s.ci_low <= 1.10 <= s.ci_high
    assert s.ci_low < s.estimate < s.ci_high
    assert s.verdict == cmp.FASTER
    assert cmp.speedup_ci(candidate, baseline).verdict == cmp.SLOWER


def test_identical_distributions_give_no_measurable_difference():
    s = cmp.speedup_ci(lognormal(2.0, 0.2, N, seed=3), lognormal(2.0, 0.2, N, seed=4))
    assert s.ci_low <= 1.0 <= s.ci_high
    assert s.verdict == cmp.NO_DIFFERENCE


def test_heavy_tailed_noise_still_right():
    baseline, candidate = heavy_tailed(1.10, N, seed=5), heavy_tailed(1.00, N, seed=6)
    s = cmp.speedup_ci(baseline, candidate)
    assert s.ci_low <= 1.10 <= s.ci_high
    assert s.verdict == cmp.FASTER
    assert cmp.speedup_ci(heavy_tailed(1.0, N, 7), heavy_tailed(1.0, N, 8)).verdict == cmp.NO_DIFFERENCE


def test_one_disturbed_round_widens_the_ci_through_the_round_cluster_bootstrap():
    """Same distribution on both sides, but one baseline block ran 6 % slow (a noisy neighbour).
    Pooled i.i.d. resampling calls that 'faster'; resampling whole rounds does not."""
    rng = np.random.default_rng(21)
    base = [1.0 * np.exp(0.01 * rng.standard_normal(400)) for _ in range(7)]
    cand = [1.0 * np.exp(0.01 * rng.standard_normal(400)) for _ in range(7)]
    for disturbed in (1, 3, 5):
        base[disturbed] = base[disturbed] * 1.06
    pooled_only = cmp.speedup_ci(np.concatenate(base), np.concatenate(cand))
    assert pooled_only.verdict == cmp.FASTER  # the failure mode: disturbed blocks read as a speedup
    with_rounds = cmp.speedup_ci(np.concatenate(base), np.concatenate(cand), rounds=(base, cand))
    assert with_rounds.estimate == pooled_only.estimate
    assert with_rounds.ci_low <= pooled_only.ci_low and with_rounds.ci_high >= pooled_only.ci_high
    assert with_rounds.ci_low < 1.0 + cmp.EQUIVALENCE_MARGIN
    assert with_rounds.verdict == cmp.NO_DIFFERENCE and "cluster" in with_rounds.method
    # a real 10 % difference survives the round-level check
    fast = [c / 1.10 for c in cand]
    real = cmp.speedup_ci(np.concatenate(cand), np.concatenate(fast), rounds=(cand, fast))
    assert real.ci_low <= 1.10 <= real.ci_high and real.verdict == cmp.FASTER


def test_median_ci_exact_holds_the_true_median_and_narrows_with_n():
    few, many = lognormal(5.0, 0.3, 200, seed=9), lognormal(5.0, 0.3, 20000, seed=10)
    lo_few, hi_few = cmp.median_ci_exact(few)
    lo_many, hi_many = cmp.median_ci_exact(many)
    assert lo_few <= 5.0 <= hi_few and lo_many <= 5.0 <= hi_many
    assert hi_many - lo_many < hi_few - lo_few
    assert cmp.relative_half_width(many) < cmp.relative_half_width(few)


@pytest.mark.parametrize("low, high, expected", [
    (1.05, 1.20, cmp.FASTER),
    (0.80, 0.95, cmp.SLOWER),
    (0.98, 1.03, cmp.NO_DIFFERENCE),  # holds 1.0
    (1.002, 1.008, cmp.NO_DIFFERENCE),  # above 1.0 but inside the equivalence margin
])
def test_verdict_uses_the_equivalence_margin(low, high, expected):
    assert cmp.verdict(low, high) == expected


def test_subsampled_bootstrap_keeps_the_full_estimate():
    b = lognormal(1.2, 0.1, cmp.MAX_BOOTSTRAP_SAMPLES * 3, seed=11)
    c = lognormal(1.0, 0.1, cmp.MAX_BOOTSTRAP_SAMPLES * 3, seed=12)
    s = cmp.speedup_ci(b, c)
    assert s.estimate == pytest.approx(np.median(b) / np.median(c))
    assert s.ci_low <= 1.2 <= s.ci_high


# ---------------------------------------------------------------------------------------------
# run_interleaved with a fake measure (a contract test: no backend, no clock)
# ---------------------------------------------------------------------------------------------


class FakeDriftingDevice:
    """Fake: every block it runs is slower than the last (thermal drift), whatever precision asks."""

    def __init__(self, drift_per_block: float) -> None:
        self.blocks = 0
        self.drift = drift_per_block
        self.order: list[str] = []


class FakeArmRunner:
    device = "cpu"

    def __init__(self, name: str, median_ms: float, sigma: float, shared: FakeDriftingDevice) -> None:
        self.name, self.median_ms, self.sigma, self.shared = name, median_ms, sigma, shared
        self.rng = np.random.default_rng(sum(name.encode()))  # str hash() is salted per process


def fake_measure(runner: FakeArmRunner, feeds, config: TimingConfig) -> Samples:
    dev = runner.shared
    factor = 1.0 + dev.drift * dev.blocks
    dev.blocks += 1
    dev.order.append(runner.name)
    n = config.iterations
    lat = runner.median_ms * factor * np.exp(runner.sigma * runner.rng.standard_normal(n))
    return Samples(stages={"latency_ms": lat}, span_s=float(lat.sum()) / 1e3, warmup_done=config.warmup, warmup_s=0.0)


def _arms(shared, a_ms=1.0, b_ms=1.0, sigma=0.01):
    return [cmp.Arm("fp32", FakeArmRunner("fp32", a_ms, sigma, shared), {}),
            cmp.Arm("fp16", FakeArmRunner("fp16", b_ms, sigma, shared), {})]


def test_rounds_alternate_order_and_stop_at_target():
    shared = FakeDriftingDevice(0.0)
    plan = cmp.RoundPlan(target_ci=0.01, time_budget_s=60, round_iterations=200)
    out = cmp.run_interleaved(_arms(shared), plan, measure=fake_measure)
    assert out.stop_reason == "target"
    assert out.rounds == cmp.MIN_ROUNDS  # σ = 1 %: 200 samples pin each median well inside ±1 %
    rounds = shared.order[2:]  # after one warmup block per arm
    assert rounds[:4] == ["fp32", "fp16", "fp16", "fp32"]
    assert all(h <= 0.01 for h in out.half_widths.values())
    assert all(a.latency_ms.size == 200 * out.rounds for a in out.arms)


def test_budget_stops_a_noisy_comparison_after_at_least_min_rounds():
    shared = FakeDriftingDevice(0.0)
    plan = cmp.RoundPlan(target_ci=1e-6, time_budget_s=1e-3, round_iterations=5)
    out = cmp.run_interleaved(_arms(shared, sigma=0.5), plan, measure=fake_measure)
    assert out.stop_reason == "time_budget"
    assert out.rounds >= cmp.MIN_ROUNDS


def test_interleaving_cancels_drift_that_sequential_runs_mistake_for_a_speedup():
    """Equal engines on a device that slows down 2 % per block: interleaved → no difference."""
    shared = FakeDriftingDevice(0.02)
    plan = cmp.RoundPlan(target_ci=1e-6, time_budget_s=1e9, round_iterations=100, min_rounds=8)
    budgeted = cmp.RoundPlan(**{**plan.__dict__, "time_budget_s": 0.0})  # exactly min_rounds rounds
    out = cmp.run_interleaved(_arms(shared), budgeted, measure=fake_measure)
    s = cmp.speedup_ci(out.arm("fp32").latency_ms, out.arm("fp16").latency_ms)
    assert s.verdict == cmp.NO_DIFFERENCE

    # The same engines measured one after the other: the later one looks slower.
    seq = FakeDriftingDevice(0.02)
    first, second = FakeArmRunner("fp32", 1.0, 0.01, seq), FakeArmRunner("fp16", 1.0, 0.01, seq)
    cfg = TimingConfig(warmup=0, iterations=100)
    a = np.concatenate([fake_measure(first, {}, cfg).latency_ms for _ in range(8)])
    b = np.concatenate([fake_measure(second, {}, cfg).latency_ms for _ in range(8)])
    assert cmp.speedup_ci(a, b).verdict == cmp.SLOWER  # a false "slowdown" from drift alone


def test_round_ratios_pair_blocks_of_the_same_round():
    shared = FakeDriftingDevice(0.0)
    plan = cmp.RoundPlan(target_ci=0.01, time_budget_s=60, round_iterations=200)
    out = cmp.run_interleaved(_arms(shared, a_ms=1.2, b_ms=1.0), plan, measure=fake_measure)
    ratios = out.round_ratios("fp32", "fp16")
    assert len(ratios) == out.rounds
    assert min(ratios) <= 1.2 <= max(ratios) or all(abs(r - 1.2) < 0.01 for r in ratios)
