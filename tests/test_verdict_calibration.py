"""Calibration in CI: the real loop (interleave → speedup) on simulated runners of known truth.

A reduced replicate count (the full 500-replicate table is benchmarks/verdict_calibration.py).
Each check is a one-sided binomial test against the issue's figure: it fails when the observed
rate is significantly worse (p < 0.01) than the figure, so with these counts it still fails for a
real defect (a 15 % A/A false-alarm rate, or 85 % coverage), without failing on sampling noise.
The seeds are fixed: the run is deterministic for a given code.
"""
from __future__ import annotations

import pytest

from trtprof import calibration as cal
from trtprof.speedup import FASTER

REPLICATES = 120  # ~20 s on the 2-core machine when it is quiet
P_FAIL = 0.01


def worse_than(successes: int, n: int, figure: float) -> float:
    """p-value of 'the true success rate is below ``figure``' given ``successes`` of ``n``."""
    from scipy import stats as sps

    return float(sps.binomtest(successes, n, figure, alternative="less").pvalue)


@pytest.fixture(scope="module")
def summaries():
    rows = {}
    for name, ratio in (("stationary 10 %", 1.0), ("stationary 10 %", 1.05), ("per-load offsets 3-8 %", 1.0),
                        ("per-load offsets 3-8 %", 1.05), ("one-engine burst, 2 rounds", 1.0),
                        ("1 % outliers 5x", 1.0), ("bimodal 55/45 vs steady", 1.0),
                        ("order effect: second arm 3 % faster", 1.0), ("order effect: second arm 3 % faster", 1.05),
                        ("lopsided: 20 % slow in 10 % of loads", 1.0)):
        rows[(name, ratio)] = cal.summarize_case(cal.case_named(name), ratio, REPLICATES, seed=7)
    return rows


@pytest.mark.slow
def test_a_a_is_rarely_decisive(summaries):
    for (name, ratio), s in summaries.items():
        if ratio == 1.0 and s.truth == 1.0:
            not_decisive = round((1 - s.decisive_rate) * s.replicates)
            assert worse_than(not_decisive, s.replicates, 0.95) > P_FAIL, (name, s.decisive_rate)


# Known shortfalls, measured in benchmarks/results/verdict_calibration-2026-12-01.txt and checked below
# by what can be promised instead: a bimodal engine's block medians are biased against the mixture's
# median (89 % coverage, never the wrong direction), and a slow mode that no load drew is invisible.
SHORTFALLS = ("bimodal 55/45 vs steady", "lopsided: 20 % slow in 10 % of loads")


@pytest.mark.slow
def test_coverage_of_the_true_ratio(summaries):
    for (name, ratio), s in summaries.items():
        if name in SHORTFALLS:
            continue
        covered = round(s.coverage * s.replicates)
        assert worse_than(covered, s.replicates, 0.94) > P_FAIL, (name, ratio, s.coverage)


@pytest.mark.slow
def test_a_mixture_the_loads_show_is_covered_or_inconclusive(summaries):
    """20 % slow in 10 % of loads: where some load drew the slow mode, the CI covers the truth or the
    verdict is inconclusive (the mixture named); where none did, no interval over those loads can know."""
    s = summaries[("lopsided: 20 % slow in 10 % of loads", 1.0)]
    drawn = s.extra["covered_or_inconclusive_when_drawn"]
    n_drawn = round((1 - s.extra["unseen"]) * s.replicates)
    assert n_drawn > 20 and worse_than(round(drawn * n_drawn), n_drawn, 0.94) > P_FAIL, s.extra


@pytest.mark.slow
def test_a_bimodal_engine_is_never_called_the_wrong_way(summaries):
    s = summaries[("bimodal 55/45 vs steady", 1.0)]  # truth 0.893: slower
    assert s.verdicts["faster"] == 0.0 and s.verdicts["equivalent"] == 0.0 and s.coverage >= 0.8, s.verdicts


@pytest.mark.slow
def test_a_true_five_percent_at_ten_percent_noise_is_called_faster(summaries):
    s = summaries[("stationary 10 %", 1.05)]
    faster = round(s.verdicts[FASTER] * s.replicates)
    assert worse_than(faster, s.replicates, 0.80) > P_FAIL, s.verdicts


def test_the_simulation_is_what_it_says():
    """The simulated truth and disturbances are as documented (the checks above rely on them)."""
    bimodal = cal.case_named("bimodal 55/45 vs steady")
    assert 0.88 < bimodal.true_ratio(1.0) < 0.90  # mixture median ≈ 1.027 over a steady 1.15
    rep = cal.run_replicate(cal.case_named("stationary 2 %"), 1.2, seed=1)
    assert rep.verdict == FASTER and rep.ci_low <= 1.2 <= rep.ci_high and rep.sim_s < 12.0 + 2
