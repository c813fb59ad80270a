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
                        ("1 % outliers 5x", 1.0), ("bimodal 55/45 vs steady", 1.0)):
        rows[(name, ratio)] = cal.summarize_case(cal.case_named(name), ratio, REPLICATES, seed=7)
    return rows


@pytest.mark.slow
def test_a_a_is_rarely_decisive(summaries):
    for (name, ratio), s in summaries.items():
        if ratio == 1.0 and s.truth == 1.0:
            not_decisive = round((1 - s.decisive_rate) * s.replicates)
            assert worse_than(not_decisive, s.replicates, 0.95) > P_FAIL, (name, s.decisive_rate)


@pytest.mark.slow
def test_coverage_of_the_true_ratio(summaries):
    for (name, ratio), s in summaries.items():
        figure = 0.95 if name in cal.STATIONARY else 0.94
        covered = round(s.coverage * s.replicates)
        assert worse_than(covered, s.replicates, figure) > P_FAIL, (name, ratio, s.coverage)


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
