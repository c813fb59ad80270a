"""Calibration in CI: the real loop (interleave → speedup) on simulated runners of known truth.

A reduced replicate count (the full 500-replicate table is benchmarks/verdict_calibration.py).
The seeds are fixed: the run is deterministic for a given code.

One-sided checks (``worse_than``): the observed rate must not be significantly worse (p < 0.01)
than the issue's figure — with these counts that still fails for a real defect (a 15 % A/A
false-alarm rate, or 85 % coverage) without failing on sampling noise.

Two-sided checks (``test_ci_is_neither_too_narrow_nor_too_wide``). The standard error behind the
reported CI, ``estimate · exp(± t(df, c) · SE)`` at c = 50 % and 80 % (``Speedup.interval``), must
cover the truth in a share of replicates that is neither significantly below nor significantly above
what that SE predicts — a two-sided exact binomial test, p > 0.01, of the number of replicates covered
against ``expected_coverage`` (the mean over replicates of P(|T_df| ≤ k · t(df, c)), T Student's t
with the replicate's own df). ``k`` is the SE's excess: since issue 27 the interval is the one-sample
t interval of the load values (no double-counted round-to-round spread, no sign-flip hull), so k = 1
in every case checked (it was 1.6 for identical loads under the two-stage bootstrap).

With 120 replicates the two-sided acceptance region (p > 0.01) is 46–74 covered (38–62 %) for a
50 % interval and 85–107 (71–89 %) for an 80 % one; an SE 30 % too small or 40 % too large moves the
expected coverage out of both (``test_the_two_sided_check_has_power_both_ways``). The one-engine burst
and bimodal cases are not in the two-sided check: there the round medians jump (a slow block, a
block median flipping between modes), which the robust estimate ignores and the SE rightly counts.
"""
from __future__ import annotations


import numpy as np
import pytest
from scipy import stats as sps

from tests.fakes import simulate as cal
from trtprof.measure.interleave import RoundPlan, run_interleaved
from trtprof.stats.speedup import FASTER, SLOWER, Speedup, t_quantile

REPLICATES = 120  # ~20 s on the 2-core machine when it is quiet
SEED = 7
P_FAIL = 0.01
CASES = (("stationary 10 %", 1.0), ("stationary 10 %", 1.05), ("per-load offsets 3-8 %", 1.0),
         ("per-load offsets 3-8 %", 1.05), ("one-engine burst, 2 rounds", 1.0),
         ("1 % outliers 5x", 1.0), ("bimodal 55/45 vs steady", 1.0),
         ("order effect: second arm 3 % faster", 1.0), ("order effect: second arm 3 % faster", 1.05))
SE_EXCESS = {"stationary 10 %": 1.0, "1 % outliers 5x": 1.0, "per-load offsets 3-8 %": 1.0,
             "order effect: second arm 3 % faster": 1.0}
# Known shortfalls, checked below by what can be promised instead: a slow mode that no load drew is
# invisible (the lopsided cases). The bimodal case was one (88 % coverage: block medians that jumped
# modes were set aside as disturbed rounds); since the load value pools each parity's blocks and a
# far round is set aside only when its block moved as a whole, it is held to the coverage figure.
SHORTFALLS: tuple[str, ...] = ()
LEVELS = (0.5, 0.8)


def worse_than(successes: int, n: int, figure: float) -> float:
    """p-value of 'the true success rate is below ``figure``' given ``successes`` of ``n``."""
    return float(sps.binomtest(successes, n, figure, alternative="less").pvalue)


def two_sided(successes: int, n: int, expected: float) -> float:
    """p-value of 'the true success rate is ``expected``' (exact binomial, two-sided)."""
    return float(sps.binomtest(successes, n, expected, alternative="two-sided").pvalue)


def replicate_speedups(case: cal.Case, ratio: float, replicates: int, seed: int) -> list[Speedup]:
    """``calibration.run_replicate``'s loop, keeping the whole ``Speedup`` (its SE and df)."""
    out = []
    for k in range(replicates):
        world = cal.SimWorld(case, seed * 100_003 + k)
        plan, names = RoundPlan(), ("base", "cand")
        outcome = run_interleaved(names, lambda i: world.open_load(i, names, (ratio, 1.0), plan.min_loads), plan,
                                  clock=world.clock)
        out.append(outcome.speedups["cand"])
    return out


def expected_coverage(speedups: list[Speedup], level: float, excess: float) -> float:
    """Mean over replicates of P(|T_df| ≤ excess · t(df, level)): the coverage of the level-``level``
    interval when the SE is ``excess`` times the estimate's true standard deviation."""
    return float(np.mean([2 * sps.t.cdf(excess * t_quantile(s.df, level), max(s.df, 1)) - 1 for s in speedups]))


def covered(speedups: list[Speedup], truth: float, level: float | None = None) -> int:
    intervals = [(s.ci_low, s.ci_high) if level is None else s.interval(level) for s in speedups]
    return sum(low <= truth <= high for low, high in intervals)


@pytest.fixture(scope="module")
def runs() -> dict[tuple[str, float], tuple[float, list[Speedup]]]:
    return {(name, ratio): (cal.case_named(name).true_ratio(ratio),
                            replicate_speedups(cal.case_named(name), ratio, REPLICATES, SEED))
            for name, ratio in CASES}


@pytest.mark.slow
def test_a_a_is_rarely_decisive(runs):
    for (name, ratio), (truth, speedups) in runs.items():
        if ratio == 1.0 and truth == 1.0:
            not_decisive = sum(s.verdict not in (FASTER, SLOWER) for s in speedups)
            assert worse_than(not_decisive, REPLICATES, 0.95) > P_FAIL, (name, not_decisive)


@pytest.mark.slow
def test_coverage_of_the_true_ratio(runs):
    for (name, ratio), (truth, speedups) in runs.items():
        if name in SHORTFALLS:
            continue
        figure = 0.95 if name in cal.STATIONARY else 0.94
        assert worse_than(covered(speedups, truth), REPLICATES, figure) > P_FAIL, (name, ratio, covered(speedups, truth))


@pytest.mark.slow
def test_ci_is_neither_too_narrow_nor_too_wide(runs):
    for (name, ratio), (truth, speedups) in runs.items():
        if name not in SE_EXCESS:
            continue
        for level in LEVELS:
            expected = expected_coverage(speedups, level, SE_EXCESS[name])
            observed = covered(speedups, truth, level)
            assert two_sided(observed, REPLICATES, expected) > P_FAIL, (name, ratio, level, observed / REPLICATES, expected)


@pytest.mark.slow
def test_a_true_five_percent_at_ten_percent_noise_is_called_faster(runs):
    _, speedups = runs[("stationary 10 %", 1.05)]
    faster = sum(s.verdict == FASTER for s in speedups)
    assert worse_than(faster, REPLICATES, 0.80) > P_FAIL, faster


@pytest.mark.slow
def test_a_bimodal_engine_is_never_called_the_wrong_way(runs):
    truth, speedups = runs[("bimodal 55/45 vs steady", 1.0)]  # truth 0.893: slower
    assert truth < 0.9 and not any(s.verdict in (FASTER, "equivalent") for s in speedups)  # its coverage: above


@pytest.mark.slow
def test_a_mixture_the_loads_show_is_covered_or_inconclusive():
    """20 % slow in 10 % of loads: where some load drew the slow mode, the CI covers the truth or the
    verdict is inconclusive (the mixture named); where none did, no interval over those loads can know."""
    s = cal.summarize_case(cal.case_named("lopsided: 20 % slow in 10 % of loads"), 1.0, REPLICATES, seed=SEED)
    drawn = s.extra["covered_or_inconclusive_when_drawn"]
    n_drawn = round((1 - s.extra["unseen"]) * s.replicates)
    assert n_drawn > 20 and worse_than(round(drawn * n_drawn), n_drawn, 0.94) > P_FAIL, s.extra


def test_the_two_sided_check_has_power_both_ways():
    """What the bounds above can see, on the binomial alone: the acceptance regions are 46–74 of 120
    (50 % interval) and 85–107 (80 %), and an SE 30 % too small or 40 % too large moves the expected
    coverage outside both."""
    for level, (low, high) in ((0.5, (46, 74)), (0.8, (85, 107))):
        accepted = [n for n in range(REPLICATES + 1) if two_sided(n, REPLICATES, level) > P_FAIL]
        assert (accepted[0], accepted[-1]) == (low, high)
        s = Speedup(1.0, 0.9, 1.1, se_log=0.01, df=7)
        assert expected_coverage([s], level, 1.0) == pytest.approx(level)
        assert expected_coverage([s], level, 0.7) * REPLICATES < low
        assert expected_coverage([s], level, 1.4) * REPLICATES > high


def test_the_simulation_is_what_it_says():
    """The simulated truth and disturbances are as documented (the checks above rely on them)."""
    bimodal = cal.case_named("bimodal 55/45 vs steady")
    assert 0.88 < bimodal.true_ratio(1.0) < 0.90  # mixture median ≈ 1.027 over a steady 1.15
    rep = cal.run_replicate(cal.case_named("stationary 2 %"), 1.2, seed=1)
    assert rep.verdict == FASTER and rep.ci_low <= 1.2 <= rep.ci_high and rep.sim_s < 12.0 + 2
