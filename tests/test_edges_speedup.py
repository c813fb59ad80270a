"""The speedup's thresholds tested just inside and just outside (``speedup.py``'s named constants,
the t quantile, the sign-flip switch, the shape rules): moving a constant by 10 %, or flipping a
``<`` to ``<=``, fails one of these."""
from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
from scipy import stats as sps

from trtprof import speedup as sp


def one_value_blocks(log_ratios_per_load: list[list[float]]) -> tuple[list, list]:
    """Blocks whose per-round log ratio is exactly the given value (one-sample blocks)."""
    base = [[np.array([math.exp(v)]) for v in load] for load in log_ratios_per_load]
    cand = [[np.array([1.0]) for _ in load] for load in log_ratios_per_load]
    return base, cand


# --- the verdict's margin edges ------------------------------------------------------------------

def test_faster_starts_just_above_one_plus_the_margin():
    assert sp.EQUIVALENCE_MARGIN == 0.01
    assert sp.verdict(1.0101, 1.05) == sp.FASTER
    assert sp.verdict(1.0099, 1.05) == sp.INCONCLUSIVE
    assert sp.verdict(1.01, 1.05) == sp.INCONCLUSIVE  # on the edge: not wholly above it


def test_slower_starts_just_below_the_reciprocal_edge():
    edge = 1 / 1.01
    assert sp.verdict(0.9, edge - 1e-4) == sp.SLOWER
    assert sp.verdict(0.9, edge + 1e-4) == sp.INCONCLUSIVE
    assert sp.verdict(0.9, edge) == sp.INCONCLUSIVE


def test_equivalent_holds_both_edges_inclusive_and_nothing_beyond():
    edge_low, edge_high = 1 / 1.01, 1.01
    assert sp.verdict(edge_low, edge_high) == sp.EQUIVALENT
    assert sp.verdict(edge_low + 1e-4, edge_high - 1e-4) == sp.EQUIVALENT
    assert sp.verdict(edge_low - 1e-4, 1.0) == sp.INCONCLUSIVE
    assert sp.verdict(1.0, edge_high + 1e-4) == sp.INCONCLUSIVE


# --- the t quantile and the CI that uses it -----------------------------------------------------

def test_t_quantile_is_the_two_sided_95_percent_one():
    assert sp.CONFIDENCE == 0.95
    assert sp.t_quantile(5) == pytest.approx(2.5706, abs=1e-4)  # t(0.975, 5 df), any t table
    assert sp.t_quantile(1) == pytest.approx(12.7062, abs=1e-4)
    assert sp.t_quantile(0) == sp.t_quantile(1)  # df below 1 is read as 1
    assert sp.t_quantile(9, 0.8) == pytest.approx(1.3830, abs=1e-4)  # t(0.90, 9 df)


def test_the_ci_is_the_estimate_times_exp_of_t_times_the_se_below_six_loads():
    rng = np.random.default_rng(3)
    loads = [list(0.05 + 0.01 * rng.standard_normal(4)) for _ in range(5)]
    s = sp.speedup_ci(*one_value_blocks(loads))
    theta = np.mean([np.median(v) for v in loads])
    se = sp.hierarchical_se([np.array(v) for v in loads])
    half = sps.t.ppf(0.975, 4) * se
    assert s.df == 4 and s.se_log == pytest.approx(se)
    assert s.estimate == pytest.approx(math.exp(theta))
    assert s.ci_low == pytest.approx(math.exp(theta - half)) and s.ci_high == pytest.approx(math.exp(theta + half))
    assert s.interval(0.95) == pytest.approx((s.ci_low, s.ci_high))


def test_one_load_uses_its_rounds_as_clusters_and_says_so():
    s = sp.speedup_ci(*one_value_blocks([[0.01, 0.02, 0.03, 0.05]]))
    assert s.loads == 1 and s.df == 3 and "one load only" in s.method
    assert math.log(s.ci_high / s.estimate) == pytest.approx(sps.t.ppf(0.975, 3) * s.se_log)
    single = sp.speedup_ci(*one_value_blocks([[0.02]]))
    assert single.se_log == math.inf and single.ci_low == 0.0 and single.ci_high == math.inf


def test_the_hierarchical_se_undoes_the_bootstraps_l_minus_one_over_l():
    loads = [np.array([v]) for v in (0.0, 0.01, 0.02, 0.03)]  # one round each: plain bootstrap of a mean
    se = sp.hierarchical_se(loads, n_resamples=20000)
    assert se == pytest.approx(np.std([0.0, 0.01, 0.02, 0.03], ddof=1) / 2, rel=0.03)  # s / √L


# --- the sign-flip hull from SIGN_FLIP_MIN_LOADS loads on -----------------------------------------

def _one_far_load(n_loads: int) -> list[list[float]]:
    """Loads agreeing on 1 % but one at 5 %: the t interval is narrower than the sign-flip interval."""
    return [[0.01, 0.01, 0.01]] * (n_loads - 1) + [[0.05, 0.05, 0.05]]


def test_six_loads_get_the_sign_flip_hull_and_five_do_not():
    assert sp.SIGN_FLIP_MIN_LOADS == 6
    six = sp.speedup_ci(*one_value_blocks(_one_far_load(6)))
    t_high = six.estimate * math.exp(sp.t_quantile(5) * six.se_log)
    assert six.ci_high > t_high * 1.001  # widened by the sign-flip interval (it reaches the 5 % load)
    assert six.ci_high == pytest.approx(math.exp(0.05), rel=1e-6)
    five = sp.speedup_ci(*one_value_blocks(_one_far_load(5)))
    assert five.ci_high == pytest.approx(five.estimate * math.exp(sp.t_quantile(4) * five.se_log))


def test_sign_flips_are_enumerated_up_to_twelve_values_and_drawn_beyond():
    assert sp.SIGN_FLIP_EXACT_LOADS == 12
    rng = np.random.default_rng(0)
    twelve, thirteen = rng.standard_normal(12), rng.standard_normal(13)
    # enumerated: no randomness, the seed does not matter
    assert sp.sign_flip_interval(twelve, seed=1) == sp.sign_flip_interval(twelve, seed=2)
    # drawn: a different seed draws different patterns
    assert sp.sign_flip_interval(thirteen, seed=1) != sp.sign_flip_interval(thirteen, seed=2)


def test_sign_flip_interval_of_six_values_is_their_range():
    """With 6 values, 2 of 64 patterns (3.1 %) are as extreme as all-one-sign: θ just outside the
    values' range is rejected at 5 %, just inside it is accepted."""
    x = np.array([0.0, 1.0, 2.0, 3.0, 4.0, 5.0])
    low, high = sp.sign_flip_interval(x)
    assert low == pytest.approx(0.0, abs=1e-6) and high == pytest.approx(5.0, abs=1e-6)


# --- what it would take to decide ---------------------------------------------------------------

def test_rounds_to_decide_is_zero_when_the_ci_is_already_narrow_enough():
    s = sp.Speedup(estimate=1.05, ci_low=1.04, ci_high=1.06, loads=6, rounds=30, se_log=0.001, df=5,
                   components={"between": 0.0})
    assert sp.rounds_to_decide(s) == 0.0
    wide = sp.Speedup(estimate=1.05, ci_low=1.0, ci_high=1.1, loads=6, rounds=30, se_log=0.03, df=5,
                      components={"between": 0.0})
    need = math.log(1.05) - math.log(1.01)
    assert sp.rounds_to_decide(wide) == pytest.approx(30 * ((sp.t_quantile(5) * 0.03 / need) ** 2 - 1))


def test_rounds_to_decide_is_infinite_when_the_loads_alone_are_too_far_apart():
    need = math.log(1.05) - math.log(1.01)
    t = sp.t_quantile(5)
    between_at_edge = (need / t) ** 2 * 6  # t·√(between / loads) == need
    common = dict(estimate=1.05, ci_low=1.0, ci_high=1.1, loads=6, rounds=30, se_log=0.03, df=5)
    assert sp.rounds_to_decide(sp.Speedup(**common, components={"between": between_at_edge * 1.01})) == math.inf
    assert math.isfinite(sp.rounds_to_decide(sp.Speedup(**common, components={"between": between_at_edge * 0.99})))


# --- distribution shape -------------------------------------------------------------------------

def test_heavy_tail_strictly_above_six_robust_sigma():
    assert sp.HEAVY_TAIL_RATIO == 6.0
    assert sp.Shape(1, (1.0,), 6.05).heavy_tail and "heavy tail" in sp.Shape(1, (1.0,), 6.05).describe()
    assert not sp.Shape(1, (1.0,), 5.95).heavy_tail
    assert not sp.Shape(1, (1.0,), 6.0).heavy_tail


def test_tail_ratio_is_p99_minus_median_over_the_normal_consistent_mad():
    x = np.random.default_rng(5).lognormal(0.0, 0.3, 1000)
    expected = (np.percentile(x, 99) - np.median(x)) / sps.median_abs_deviation(x, scale="normal")
    assert sp.distribution_shape(x).tail_ratio == pytest.approx(expected, rel=1e-4)


def _two_modes(minor_share: float, minor_sigma: float = 0.02, major_sigma: float = 0.02, n: int = 4000) -> np.ndarray:
    rng = np.random.default_rng(0)
    k = int(round(minor_share * n))
    return np.concatenate([1 + major_sigma * rng.standard_normal(n - k), 1.5 + minor_sigma * rng.standard_normal(k)])


def test_a_second_mode_counts_from_a_tenth_of_the_highest_peak():
    """Two equally wide modes: the minor peak's height is about its share of the samples over the
    major's, so the prominence rule switches between 9.2 % and 9.6 % of the samples."""
    assert sp.MODE_MIN_PROMINENCE == 0.1
    assert sp.distribution_shape(_two_modes(0.096)).modes == 2
    assert sp.distribution_shape(_two_modes(0.092)).modes == 1


def test_a_second_mode_needs_five_percent_of_the_samples():
    """A narrow minor mode is prominent at any share; the mass rule (share of the central 99 %
    nearest to it) switches between 5.2 % and 5.5 % of all samples (the top 0.5 % are cut first)."""
    assert sp.MODE_MIN_MASS == 0.05
    assert sp.distribution_shape(_two_modes(0.055, minor_sigma=0.002, major_sigma=0.05)).modes == 2
    assert sp.distribution_shape(_two_modes(0.052, minor_sigma=0.002, major_sigma=0.05)).modes == 1


def test_shape_needs_fifty_samples():
    x = _two_modes(0.5, n=50)
    assert sp.distribution_shape(x).modes == 2
    assert sp.distribution_shape(x[1:]).modes == 1  # 49 samples: too few to call modes


def test_mean_median_note_from_one_percent_apart():
    assert sp.MEAN_MEDIAN_DISAGREE == 0.01

    def note(mean_ratio: float) -> str | None:
        return sp.mean_median_note(sp.Speedup(1.0, 0.9, 1.1, median_ratio=1.0, mean_ratio=mean_ratio))

    assert note(1.0105) is not None and "1.010×" in note(1.0105)
    assert note(1.0095) is None and note(0.9905) is None
    assert note(0.9895) is not None
    assert sp.mean_median_note(sp.Speedup(1.0, 0.9, 1.1)) is None  # ratios not measured: nothing to say


def test_hierarchical_se_takes_each_resampled_loads_median_odd_and_even():
    """Loads of 7 and 6 rounds with skewed values, where any other order statistic than the median
    (the middle one; the mean of the middle two) gives another SE. The direct two-stage resample is
    vectorised here with 20 000 draws: its SE is good to ~1 %."""
    odd, even = np.array([0.0, 0.0, 0.0, 0.0, 10.0, 10.0, 10.0]), np.array([0.0, 0.0, 0.0, 10.0, 10.0, 10.0])
    n = 20000
    rng = np.random.default_rng(2)
    medians = np.stack([np.median(rng.choice(v, (n, 2, v.size)), axis=2) for v in (odd, even)])  # [load, draw, slot]
    picked = rng.integers(0, 2, (n, 2))
    stat = medians[picked, np.arange(n)[:, None], np.arange(2)[None, :]].mean(axis=1)
    direct = float(np.std(stat, ddof=1)) * math.sqrt(2)
    assert sp.hierarchical_se([odd, even], n_resamples=n, seed=1) == pytest.approx(direct, rel=0.03)


def test_half_width_is_relative_to_the_estimate():
    assert sp.Speedup(1.0, 0.9, 1.1).half_width == pytest.approx(0.1)
    assert sp.Speedup(0.5, 0.45, 0.55).half_width == pytest.approx(0.1)
    assert sp.Speedup(0.0, 0.0, 0.1).half_width == math.inf


def test_variance_components_of_one_load_and_of_two():
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # one load: no between-load variance to compute, and no numpy warning
        assert sp.variance_components([np.array([1.0, 2.0, 3.0])]) == {"within": 1.0, "between": 0.0}
    two = sp.variance_components([np.array([0.0, 2.0]), np.array([10.0, 12.0])])
    assert two["within"] == pytest.approx(2.0) and two["between"] == pytest.approx(50.0 - 2.0 / 2)


def test_one_load_of_two_rounds_has_a_finite_se_and_one_of_one_round_does_not():
    two = sp.speedup_ci(*one_value_blocks([[0.01, 0.03]]))
    assert math.isfinite(two.se_log) and two.se_log > 0 and two.df == 1
    assert sp.speedup_ci(*one_value_blocks([[0.01]])).se_log == math.inf


def _engine_blocks(per_load_medians: list[list[float]]) -> list[list[np.ndarray]]:
    return [[np.array([m]) for m in load] for load in per_load_medians]


def test_engine_median_ci_uses_loads_from_two_on_and_rounds_for_one():
    for loads in ([[1.0, 1.1, 1.2], [1.3, 1.4, 1.5]], [[1.0, 1.1, 1.2], [1.3, 1.4, 1.5], [0.9, 1.0, 1.6]]):
        low, high = sp.engine_median_ci(_engine_blocks(loads))
        se, t = sp.hierarchical_se([np.log(v) for v in loads]), sp.t_quantile(len(loads) - 1)  # df = loads − 1
        pooled = float(np.median(np.concatenate(loads)))
        assert (low, high) == pytest.approx((pooled * math.exp(-t * se), pooled * math.exp(t * se)))
    one_load = [[1.0, 1.1, 1.2, 1.4]]
    low, high = sp.engine_median_ci(_engine_blocks(one_load))
    pooled = float(np.median(one_load[0]))
    half = math.log(high / pooled)
    assert math.log(pooled / low) == pytest.approx(half)
    assert half / sp.t_quantile(3) == pytest.approx(sp.speedup_ci(*one_value_blocks([list(np.log(one_load[0]))])).se_log)
    assert sp.engine_median_ci(_engine_blocks([[2.0]])) == (2.0, 2.0)  # one block: no spread to show


def test_shape_of_constant_and_of_no_samples():
    constant = sp.distribution_shape(np.full(100, 2.0))
    assert (constant.modes, constant.mode_ms, constant.tail_ratio) == (1, (2.0,), 0.0)
    empty = sp.distribution_shape([])
    assert empty.modes == 1 and empty.tail_ratio == 0.0
