"""Throughput from a robust statistic (issue 24): outliers cannot make the throughput figure and the
verdict disagree."""
from __future__ import annotations

import numpy as np
import pytest

from trtprof.stats import throughput as tp
from trtprof.measure.results import BenchResult
from trtprof.stats.speedup import speedup_ci


def _blocks(rng, n_blocks: int, per_block: int, median_ms: float, stalled: dict[int, float] | None = None):
    """Latency blocks around ``median_ms``; ``stalled`` block index → extra ms on 20 % of its samples."""
    out = []
    for i in range(n_blocks):
        x = median_ms * (1 + 0.01 * rng.standard_normal(per_block))
        if stalled and i in stalled:
            x[: per_block // 5] += stalled[i]
        out.append(x)
    return out


def test_one_stalled_block_moves_the_mean_rate_not_the_throughput():
    rng = np.random.default_rng(0)
    blocks = _blocks(rng, 9, 50, 1.0, stalled={3: 200.0})  # 10 requests of block 3 each stall 200 ms
    pooled = np.concatenate(blocks)
    spans = [(b.size, float(b.sum()) / 1e3) for b in blocks]
    rate = tp.throughput(4, pooled, sum(s for _, s in spans), spans)
    assert rate.method == tp.METHOD_BLOCKS and rate.blocks == 9
    assert rate.per_s == pytest.approx(4000.0, rel=0.02)  # 4 samples per ~1 ms
    assert rate.wall_per_s < 0.3 * rate.per_s  # 2 s of stalls in ~2.45 s of wall time
    assert rate.note is not None and "stalls" in rate.note


def test_single_block_uses_the_median_latency():
    x = np.array([1.0] * 95 + [100.0] * 5)  # 5 % of requests 100× slow
    rate = tp.throughput(2, x, float(x.sum()) / 1e3)
    assert rate.method == tp.METHOD_MEDIAN and rate.blocks == 1
    assert rate.per_s == pytest.approx(2000.0)
    assert rate.wall_per_s == pytest.approx(2 * 100 / (595 / 1e3))


@pytest.mark.parametrize("gap, noted", [(tp.WALL_DISAGREE * 0.9, False), (tp.WALL_DISAGREE * 1.1, True)])
def test_note_threshold(gap, noted):
    rate = tp.Throughput(per_s=1000.0, method=tp.METHOD_MEDIAN, wall_per_s=1000.0 * (1 - gap), blocks=1)
    assert (rate.note is not None) is noted


def test_throughput_ratio_agrees_with_the_verdict_despite_outliers():
    """The issue's case: equal engines, the baseline with a few stalled blocks. The old mean rate
    made the candidate look 3× faster; the robust rates agree with the speedup's CI."""
    rng = np.random.default_rng(1)
    base = _blocks(rng, 12, 40, 1.0, stalled={2: 150.0, 7: 150.0, 9: 150.0})
    cand = _blocks(rng, 12, 40, 1.0)
    results = {}
    for name, blocks in (("fp32", base), ("fp16", cand)):
        spans = [(b.size, float(b.sum()) / 1e3) for b in blocks]
        results[name] = BenchResult.from_samples(
            stages={"latency_ms": np.concatenate(blocks)}, span_s=sum(s for _, s in spans), blocks=spans,
            batch_size=1, model="m", precision=name, backend="fake", engine={}, config={})
    s = speedup_ci([[b for b in base[i::3]] for i in range(3)], [[b for b in cand[i::3]] for i in range(3)])
    ratio = results["fp16"].throughput_per_s / results["fp32"].throughput_per_s
    assert s.ci_low <= ratio <= s.ci_high
    old_ratio = results["fp16"].throughput["wall_per_s"] / results["fp32"].throughput["wall_per_s"]
    assert old_ratio > 2.0  # what the mean-based figure claimed
    assert any("stalls" in w for w in results["fp32"].warnings)


def test_results_json_round_trip_keeps_the_method():
    x = np.array([1.0, 1.1, 0.9, 1.0])
    r = BenchResult.from_samples(stages={"latency_ms": x}, span_s=0.004, batch_size=8, model="m", precision="fp32",
                                 backend="fake", engine={}, config={})
    back = BenchResult.from_json(r.to_json())
    assert back.throughput == r.throughput and back.throughput["method"] == tp.METHOD_MEDIAN
    assert back.throughput_per_s == pytest.approx(8000.0)
