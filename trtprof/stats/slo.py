"""Throughput at a latency target: per precision the highest measured throughput whose p99 meets it,
and a candidate-vs-baseline verdict on those throughputs with a CI.

Why this question: a deployer sizes a fleet by "samples/s per GPU at p99 ≤ target", and FP16 can win
little at batch 1 (launch-bound) but much at a larger batch or concurrency that FP32 cannot serve
within the target. So each precision is judged at *its own* best point (over batch sizes ×
concurrency), not at the same one.

The CI reuses ``trtprof.stats.speedup`` (no second statistics): each round of the sweep measured both
precisions' points back to back, so round ``r`` gives a paired ratio of their window throughputs.
They are passed to ``speedup_ci`` as blocks of one value, 1 / (samples/s), so its "baseline /
candidate latency" reads "candidate / baseline throughput": above 1, the candidate serves more. The
rounds run in one process (one load), which ``Speedup.method`` states. The best points are chosen
from the same rounds that give the CI (a small optimistic bias for both sides alike; stated in
``method``).
"""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from ..system.validity import MIN_SERVING_ROUNDS
from ..util.wording import plural

from .speedup import EQUIVALENCE_MARGIN, INCONCLUSIVE, speedup_ci

METHOD = ("candidate / baseline samples/s, each precision at its own best point (highest median samples/s "
          "whose pooled p99 meets the target, over batch sizes × concurrency), paired by round; CI from "
          "trtprof.stats.speedup on the per-round window throughputs (points chosen from the same rounds)")


def best_point(points: Sequence[Any], slo_ms: float) -> Any | None:
    """The point with the highest samples/s whose pooled p99 latency is within ``slo_ms``."""
    eligible = [p for p in points if p.windows and np.isfinite(p.latency.p99) and p.latency.p99 <= slo_ms]
    return max(eligible, key=lambda p: p.samples_per_s) if eligible else None


def _describe(point: Any) -> dict[str, Any]:
    return {"batch_size": point.batch_size, "concurrency": point.concurrency, "samples_per_s": point.samples_per_s,
            "requests_per_s": point.requests_per_s, "p99_ms": point.latency.p99, "p50_ms": point.latency.p50,
            "rounds_samples_per_s": point.round_samples_per_s, "memory": point.memory, "energy": point.energy}


def missed(points: Sequence[Any], slo_ms: float) -> str:
    """Why no point of a precision meets the target: its lowest p99 and where."""
    measured = [p for p in points if p.windows]
    if not measured:
        return "nothing measured"
    low = min(measured, key=lambda p: p.latency.p99)
    return (f"no measured point has p99 ≤ {slo_ms:g} ms; the lowest p99 is {low.latency.p99:.4g} ms "
            f"(batch {low.batch_size}, concurrency {low.concurrency})")


def throughput_ratio(baseline: Any, candidate: Any, margin: float = EQUIVALENCE_MARGIN) -> Any:
    """``Speedup`` of candidate over baseline samples/s from their windows, paired by round."""
    rounds = min(len(baseline.windows), len(candidate.windows))
    base = [[np.array([1.0 / v]) for v in baseline.round_samples_per_s[:rounds]]]
    cand = [[np.array([1.0 / v]) for v in candidate.round_samples_per_s[:rounds]]]
    return speedup_ci(base, cand, margin=margin)


def at_target(points: Sequence[Any], arms: Sequence[str], slo_ms: float,
              margin: float = EQUIVALENCE_MARGIN) -> dict[str, Any]:
    """The ``slo`` entry of a sweep: per arm its best point (or why none), per candidate its verdict."""
    by_arm = {arm: [p for p in points if p.arm == arm] for arm in arms}
    best = {arm: best_point(group, slo_ms) for arm, group in by_arm.items()}
    per_arm = {arm: (_describe(b) if b is not None else {"reason": missed(by_arm[arm], slo_ms)})
               for arm, b in best.items()}
    baseline = arms[0]
    verdicts = []
    for cand in arms[1:]:
        entry: dict[str, Any] = {"baseline": baseline, "candidate": cand}
        b, c = best[baseline], best[cand]
        if b is None or c is None:
            entry.update({"verdict": INCONCLUSIVE, "reason": "; ".join(
                f"{arm}: {per_arm[arm]['reason']}" for arm in (baseline, cand) if best[arm] is None)})
        elif min(b.round_samples_per_s + c.round_samples_per_s) <= 0:
            entry.update({"verdict": INCONCLUSIVE, "reason": "a round completed no request inside its window"})
        else:
            s = throughput_ratio(b, c, margin)
            if s.rounds < MIN_SERVING_ROUNDS:  # 2 rounds: 1 degree of freedom, an interval of [0.000, inf]
                entry.update({"verdict": INCONCLUSIVE, "estimate": s.estimate, "rounds": s.rounds,
                              "reason": f"{plural(s.rounds, 'round')}: no interval (it needs at least "
                                        f"{MIN_SERVING_ROUNDS}: --serving-rounds {MIN_SERVING_ROUNDS})"})
            else:
                entry.update({"ratio": s.to_json(), "verdict": s.verdict, "estimate": s.estimate, "ci_low": s.ci_low,
                              "ci_high": s.ci_high, "rounds": s.rounds})
        verdicts.append(entry)
    return {"slo_p99_ms": slo_ms, "method": METHOD, "margin": margin, "best": per_arm, "verdicts": verdicts}
