from __future__ import annotations

import numpy as np
import pytest

from trtprof.stats.latency import MAD_TO_SIGMA, LatencyStats, median_ci_exact


def test_stats_match_numpy_on_random_samples():
    x = np.random.default_rng(3).lognormal(0.0, 0.3, size=997)
    s = LatencyStats.from_samples(x)
    assert s.n == 997
    assert s.p50 == pytest.approx(np.median(x))
    assert (s.p90, s.p95, s.p99) == pytest.approx(tuple(np.percentile(x, [90, 95, 99])))
    assert s.mean == pytest.approx(x.mean()) and s.std == pytest.approx(x.std(ddof=1))
    assert s.cv == pytest.approx(x.std(ddof=1) / x.mean())
    assert s.min == x.min() and s.max == x.max()
    assert s.iqr == pytest.approx(np.subtract(*np.percentile(x, [75, 25])))


def test_mad_outliers_find_injected_spikes_only():
    rng = np.random.default_rng(0)
    x = rng.normal(10.0, 0.1, size=1000)
    x[:7] = 50.0  # seven slow iterations (a GC pause, a clock dip)
    s = LatencyStats.from_samples(x)
    assert s.outliers == 7
    assert MAD_TO_SIGMA * s.mad == pytest.approx(0.1, rel=0.15)  # robust σ ignores the spikes
    assert s.std > 1.0  # while σ is inflated by them


def test_constant_samples():
    s = LatencyStats.from_samples([2.0] * 10)
    assert (s.std, s.cv, s.mad, s.outliers) == (0.0, 0.0, 0.0, 0)


def test_empty_samples_raise():
    with pytest.raises(ValueError):
        LatencyStats.from_samples([])


def test_json_roundtrip():
    s = LatencyStats.from_samples([1.0, 2.0, 3.0, 10.0])
    assert LatencyStats.from_json(s.to_json()) == s
    assert s.extra == {} and "extra" not in s.to_json()


def test_a_newer_writer_s_stats_keys_are_kept_and_written_back():
    """Issue 41 item 2: ``from_json`` dropped the keys it did not type; now they are kept in ``extra`` and
    ``to_json`` writes them back after the typed ones, as read."""
    data = {**LatencyStats.from_samples([1.0, 2.0, 3.0, 10.0]).to_json(), "p999": 9.9, "trimmed": {"mean": 2.0}}
    s = LatencyStats.from_json(data)
    assert s.extra == {"p999": 9.9, "trimmed": {"mean": 2.0}}
    assert s.to_json() == data and list(s.to_json()) == list(data)
    assert s.p50 == 2.5 and hash(s) == hash(LatencyStats.from_json(data))  # still hashable, the extra aside


def test_median_ci_covers_the_true_median():
    x = np.random.default_rng(5).normal(4.0, 0.5, size=400)
    low, high = median_ci_exact(x)
    assert low < 4.0 < high
    assert high - low < 0.3
