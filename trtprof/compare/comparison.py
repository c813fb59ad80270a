"""One candidate against the baseline at one batch size: the ``Comparison`` the analysis makes (raw
samples, the Speedup, both arms' BenchResults) and its typed result (``compare.result``)."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .accuracy import AccuracyDelta
from .result import ArmLatency, ComparisonResult, SpeedupSummary
from ..diagnose.findings import Finding
from ..measure.interleave import LOADS_LIMIT
from ..measure.results import BenchResult
from ..stats.latency import median_ci_exact
from ..stats.speedup import (
    INCONCLUSIVE,
    LatencyShape,
    Speedup,
    distribution_shape,
    few_loads_words,
    inconclusive_hint,
    mean_median_note,
    unseen_mode_note,
)


@dataclass
class Comparison:
    """One candidate precision against the baseline at one batch size (one JSON ``comparisons`` entry)."""

    batch_size: int
    baseline: str
    candidate: str
    speedup: Speedup
    accuracy: AccuracyDelta | None
    diagnosis: list[Finding]
    baseline_result: BenchResult
    candidate_result: BenchResult
    rounds: int
    stop_reason: str
    round_ratios: list[float]
    half_widths: dict[str, float]
    roofline: dict[str, Any] = field(default_factory=dict)
    loads: int = 1
    median_cis_ms: dict[str, tuple[float, float]] = field(default_factory=dict)  # side → hierarchical CI
    round_s: float = 0.0  # seconds per round, for the "about N more rounds" estimate
    validity: Any = None  # system.validity.Validity, set by compare.stamp once the comparison is made
    min_loads: int | None = None  # the minimum it was stamped against (compare.stamp): below it, provisional

    @property
    def verdict(self) -> str:
        return self.speedup.verdict

    @property
    def verdict_note(self) -> str:
        """What an inconclusive verdict would need, and what the distributions look like."""
        notes = [few_loads_words(self.loads)] if few_loads_words(self.loads) else []
        if self.verdict == INCONCLUSIVE:
            notes.append(inconclusive_hint(self.speedup, self.round_s))
        if self.baseline == self.candidate.split("#")[0]:
            notes.append(f"A/A (same engine loaded independently): the noise floor here is "
                         f"[{self.speedup.ci_low:.3f}, {self.speedup.ci_high:.3f}]; no difference inside it is claimed")
        unseen = unseen_mode_note(self.speedup, max_loads=LOADS_LIMIT)  # --min-loads can ask up to it
        if unseen:
            notes.append(unseen)
        mm = mean_median_note(self.speedup)
        if mm:
            notes.append(mm)
        for side, result in (("baseline", self.baseline_result), ("candidate", self.candidate_result)):
            text = self.shapes.get(side, LatencyShape(1, (), 0.0)).describe()
            if text:
                notes.append(f"{result.precision if side == 'baseline' else self.candidate}: {text}")
        return "; ".join(notes)

    @property
    def shapes(self) -> dict[str, LatencyShape]:
        cached = self.__dict__.get("_shapes")
        if cached is None:
            cached = {side: distribution_shape(r.samples_ms["latency_ms"])
                      for side, r in (("baseline", self.baseline_result), ("candidate", self.candidate_result))}
            self.__dict__["_shapes"] = cached
        return cached

    def result(self) -> ComparisonResult:
        """The typed result the CLI prints and the pages show; its ``to_json`` is this entry's JSON."""
        def side(name: str, r: Any) -> ArmLatency:
            lat = r.stats["latency_ms"]
            low, high = self.median_cis_ms.get(name) or median_ci_exact(r.samples_ms["latency_ms"])
            return ArmLatency(precision=r.precision, effective_precision=r.engine.get("effective_precision", r.precision),
                              median_ms=lat.p50, ci_low_ms=low, ci_high_ms=high, n=lat.n, cv=lat.cv,
                              stage_medians_ms={k: s.p50 for k, s in r.stats.items()},
                              engine=r.engine.get("artifact", ""))

        return ComparisonResult(
            batch_size=self.batch_size, baseline=self.baseline, candidate=self.candidate,
            speedup=SpeedupSummary.from_json(self.speedup.to_json()), verdict=self.verdict,
            validity=self.validity.to_json() if self.validity is not None else None,
            accuracy=self.accuracy.to_json() if self.accuracy is not None else None,
            diagnosis=tuple(self.diagnosis), verdict_note=self.verdict_note,
            shape={k: v.to_json() for k, v in self.shapes.items()},
            latency={"baseline": side("baseline", self.baseline_result),
                     "candidate": side("candidate", self.candidate_result)},
            loads=self.loads, rounds=self.rounds, stop_reason=self.stop_reason,
            round_ratios=tuple(self.round_ratios), median_ci_half_width=dict(self.half_widths),
            roofline=dict(self.roofline), min_loads=self.min_loads)

    def to_json(self) -> dict[str, Any]:
        return self.result().to_json()
