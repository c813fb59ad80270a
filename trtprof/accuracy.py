"""Accuracy beside speed: the same inputs through each precision, compared with the baseline.

A speedup is only worth having if the answers survive it. FP16's largest finite value is 65504, so
an activation that is harmless in FP32 can overflow to inf (and then NaN); that is reported loudly,
not folded into an error statistic.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Mapping

import numpy as np

# An element "mismatches" when |cand − ref| > ATOL + RTOL·|ref| (numpy.isclose's rule). FP16 keeps
# 11 significant bits (unit roundoff 2⁻¹¹ ≈ 4.9e-4); rounding through tens of layers typically
# leaves 1e-3–1e-2 relative error, so 1e-2 flags what is beyond ordinary FP16 rounding.
RTOL = 1e-2
# Absolute floor so elements near zero (where relative error is meaningless) are judged by size.
ATOL = 1e-3


@dataclass(frozen=True)
class OutputDelta:
    name: str
    elements: int
    max_abs_err: float
    max_rel_err: float
    mismatches: int
    nonfinite: int  # non-finite in the candidate where the baseline is finite (new overflow / NaN)
    nonfinite_baseline: int  # non-finite already in the baseline (the model's own, not FP16's)


@dataclass(frozen=True)
class AccuracyDelta:
    """Errors of a candidate's outputs against the baseline's, over every float output."""

    max_abs_err: float
    max_rel_err: float
    mismatch_fraction: float
    nonfinite: int
    elements: int
    rtol: float = RTOL
    atol: float = ATOL
    outputs: tuple[OutputDelta, ...] = field(default=())
    # fp16 candidates (trtprof.fp16range.annotate): the FP16 range analysis of the FP32 model (what
    # FP16 arithmetic is predicted to do), and why the observed error may not be FP16's
    predicted: dict[str, Any] | None = None
    caveat: str | None = None

    @property
    def flagged(self) -> bool:
        """True when the candidate produced inf/NaN that the baseline did not: an overflow."""
        return self.nonfinite > 0

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["outputs"] = [asdict(o) for o in self.outputs]
        data["nonfinite_flag"] = self.flagged
        return data


def compare_output(name: str, reference: np.ndarray, candidate: np.ndarray,
                   *, rtol: float = RTOL, atol: float = ATOL) -> OutputDelta:
    """Errors over elements finite in both; non-finite candidate values are counted, not averaged.

    Relative error is taken only where |ref| > ``atol``: near zero it is noise over noise.
    """
    ref = np.asarray(reference, dtype=np.float64)
    cand = np.asarray(candidate, dtype=np.float64)
    if ref.shape != cand.shape:
        raise ValueError(f"output {name!r}: shapes differ ({ref.shape} vs {cand.shape})")
    ref_ok = np.isfinite(ref)
    cand_ok = np.isfinite(cand)
    both = ref_ok & cand_ok
    diff = np.abs(cand - ref, where=both, out=np.zeros_like(ref))
    max_abs = float(diff.max()) if both.any() else 0.0
    rel_mask = both & (np.abs(ref) > atol)
    rel = np.divide(diff, np.abs(ref), where=rel_mask, out=np.zeros_like(ref))
    max_rel = float(rel.max()) if rel_mask.any() else 0.0
    new_nonfinite = int(np.count_nonzero(ref_ok & ~cand_ok))
    beyond = both & (diff > atol + rtol * np.abs(ref))
    mismatches = int(np.count_nonzero(beyond)) + new_nonfinite
    return OutputDelta(name=name, elements=int(ref.size), max_abs_err=max_abs, max_rel_err=max_rel,
                       mismatches=mismatches, nonfinite=new_nonfinite,
                       nonfinite_baseline=int(np.count_nonzero(~ref_ok)))


def compare_outputs(reference: Mapping[str, np.ndarray], candidate: Mapping[str, np.ndarray],
                    *, rtol: float = RTOL, atol: float = ATOL) -> AccuracyDelta:
    """Compare every floating output the two share (integer outputs, e.g. argmax, compared too)."""
    missing = set(reference) - set(candidate)
    if missing:
        raise ValueError(f"candidate lacks output(s) {sorted(missing)}")
    deltas = tuple(compare_output(n, reference[n], candidate[n], rtol=rtol, atol=atol) for n in reference)
    elements = sum(d.elements for d in deltas)
    return AccuracyDelta(
        max_abs_err=max((d.max_abs_err for d in deltas), default=0.0),
        max_rel_err=max((d.max_rel_err for d in deltas), default=0.0),
        mismatch_fraction=(sum(d.mismatches for d in deltas) / elements) if elements else 0.0,
        nonfinite=sum(d.nonfinite for d in deltas),
        elements=elements,
        rtol=rtol,
        atol=atol,
        outputs=deltas,
    )


def run_outputs(runner: Any, feeds: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Host-in/host-out inference (``Runner.infer``): the correctness path of every backend."""
    return {name: np.asarray(value) for name, value in runner.infer(feeds).items()}
