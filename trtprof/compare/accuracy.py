"""Accuracy beside speed: the same inputs through each precision, compared with the baseline.

A speedup is only worth having if the answers survive it. FP16's largest finite value is 65504, so
an activation that is harmless in FP32 can overflow to inf (and then NaN); that is reported loudly,
not folded into an error statistic.
"""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Any, Mapping

import numpy as np

# An element "mismatches" when |cand − ref| > ATOL + RTOL·|ref| (numpy.isclose's rule). FP16 keeps
# 11 significant bits (unit roundoff 2⁻¹¹ ≈ 4.9e-4); rounding through tens of layers typically
# leaves 1e-3–1e-2 relative error, so 1e-2 flags what is beyond ordinary FP16 rounding.
RTOL = 1e-2
# Absolute floor so elements near zero (where relative error is meaningless) are judged by size.
ATOL = 1e-3


# What each accuracy field means, one line each: printed by the CLI (compare's legend), written in the
# JSON (``accuracy.field_docs``) and shown in the HTML, so a number is never without its rule.
FIELD_DOCS: dict[str, str] = {
    "cosine": "cosine similarity of candidate and reference over all values (1 = same direction; "
              "0.999 ≈ 4.5 % RMS error)",
    "snr_db": "signal-to-noise ratio: 10·log10(Σref² / Σ(cand−ref)²), in dB (higher is better; 40 dB ≈ 1 % RMS error)",
    "max_err_scaled": "max |cand − ref| / max |ref|: the worst error relative to the output's scale",
    "mean_err_scaled": "mean |cand − ref| / RMS(ref): the typical error relative to the output's scale",
    "top1": "share of samples whose top-1 class agrees ([N, classes] outputs only)",
    "top5": "share of samples whose reference top-1 class is in the candidate's top 5 ([N, classes], > 5 classes)",
    "max_abs_err": "max |cand − ref| over elements finite in both (in the output's units)",
    "max_rel_err": "max |cand − ref| / |ref| over elements with |ref| > atol (elementwise: explodes near zero)",
    "mismatch_fraction": "share of elements with |cand − ref| > atol + rtol·|ref| (numpy.isclose's rule), "
                         "new inf/NaN included",
    "nonfinite": "values inf/NaN in the candidate where the reference is finite (overflow): verdict BROKEN",
}
CLASSIFIER_MIN_CLASSES = 2  # an [N, C] output with C ≥ 2 is treated as class scores (top-1)
TOP5 = 5  # top-5 agreement needs more than 5 classes (otherwise it is always 1)


@dataclass(frozen=True)
class OutputDelta:
    name: str
    elements: int
    max_abs_err: float
    max_rel_err: float
    mismatches: int
    nonfinite: int  # non-finite in the candidate where the baseline is finite (new overflow / NaN)
    nonfinite_baseline: int  # non-finite already in the baseline (the model's own, not FP16's)
    mean_abs_err: float = 0.0
    ref_max_abs: float = 0.0  # the output's scale: max |ref| …
    ref_rms: float = 0.0  # … and RMS(ref)
    max_err_scaled: float = 0.0  # max_abs_err / ref_max_abs
    mean_err_scaled: float = 0.0  # mean_abs_err / ref_rms
    snr_db: float = math.inf
    cosine: float = 1.0
    top1: float | None = None  # [N, classes] outputs only
    top5: float | None = None
    samples: int | None = None  # N of an [N, classes] output
    constant: bool = False  # the candidate is one value throughout where the reference varies


@dataclass(frozen=True)
class AccuracyDelta:
    """Errors of a candidate's outputs against the baseline's, over every float output; the
    aggregate metrics are the worst output's."""

    max_abs_err: float
    max_rel_err: float
    mismatch_fraction: float
    nonfinite: int
    elements: int
    rtol: float = RTOL
    atol: float = ATOL
    outputs: tuple[OutputDelta, ...] = field(default=())
    # fp16 candidates (trtprof.convert.fp16range.annotate): the FP16 range analysis of the FP32 model (what
    # FP16 arithmetic is predicted to do), and why the observed error may not be FP16's
    predicted: dict[str, Any] | None = None
    caveat: str | None = None
    cosine: float = 1.0
    snr_db: float = math.inf
    max_err_scaled: float = 0.0
    mean_err_scaled: float = 0.0
    top1: float | None = None
    top5: float | None = None
    inputs: str = "random inputs"  # what the outputs were computed on (user data or random)
    verdict: dict[str, Any] | None = None  # trtprof.compare.accuracy.judge: OK / DEGRADED / BROKEN
    constant_outputs: tuple[str, ...] = ()  # outputs that are constant where the reference varies
    # the user's --inputs: how many samples the metrics rest on, of how many (compare.accuracy_pass: the pass
    # is bounded by the time budget); None on random inputs (and then left out of the JSON)
    samples: int | None = None
    samples_total: int | None = None

    @property
    def flagged(self) -> bool:
        """True when the candidate produced inf/NaN that the baseline did not: an overflow."""
        return self.nonfinite > 0

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["outputs"] = [asdict(o) for o in self.outputs]
        data["nonfinite_flag"] = self.flagged
        for key in ("samples", "samples_total"):
            if data[key] is None:  # random inputs: the JSON as before
                del data[key]
        data["field_docs"] = FIELD_DOCS
        return data


def _topk_agreement(ref: np.ndarray, cand: np.ndarray) -> tuple[float | None, float | None, int | None]:
    """Top-1 and top-5 agreement of an [N, classes] output (trailing size-1 dims allowed, e.g.
    [N, 1000, 1, 1]); (None, None, None) for any other shape or a non-finite candidate row."""
    if ref.ndim < 2 or any(d != 1 for d in ref.shape[2:]) or ref.shape[1] < CLASSIFIER_MIN_CLASSES or not ref.shape[0]:
        return None, None, None
    r = ref.reshape(ref.shape[0], ref.shape[1])
    c = cand.reshape(r.shape)
    sound = np.isfinite(c).all(axis=1)  # a sample with an inf/NaN score never counts as agreeing
    c = np.where(np.isfinite(c), c, 0.0)
    truth = np.argmax(r, axis=1)
    # the reference's class agrees when the candidate scores it at least as high as its k-th best
    # (ties count as agreement: a flat output has no ranking to disagree with)
    score = c[np.arange(c.shape[0]), truth]
    top1 = float(np.mean((score >= c.max(axis=1)) & sound))
    top5 = None
    if r.shape[1] > TOP5:
        fifth = -np.partition(-c, TOP5 - 1, axis=1)[:, TOP5 - 1]
        top5 = float(np.mean((score >= fifth) & sound))
    return top1, top5, int(r.shape[0])


def compare_output(name: str, reference: np.ndarray, candidate: np.ndarray,
                   *, rtol: float = RTOL, atol: float = ATOL) -> OutputDelta:
    """Errors over elements finite in both; non-finite candidate values are counted, not averaged.

    Relative error is taken only where |ref| > ``atol``: near zero it is noise over noise. The
    scale-relative metrics (error / max |ref|, error / RMS(ref)), SNR and cosine similarity divide by
    the whole output's size instead, so near-zero elements cannot blow them up.
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
    r, c, d = ref[both], cand[both], diff[both]
    ref_max = float(np.abs(r).max()) if r.size else 0.0
    ref_rms = float(np.sqrt(np.mean(r * r))) if r.size else 0.0
    mean_abs = float(d.mean()) if d.size else 0.0
    noise = float(np.sum(d * d))
    signal = float(np.sum(r * r))
    snr = math.inf if noise == 0 else (10 * math.log10(signal / noise) if signal > 0 else -math.inf)
    norms = float(np.linalg.norm(r) * np.linalg.norm(c))
    cosine = 1.0 if noise == 0 else float(np.dot(r, c) / norms) if norms > 0 else 0.0  # identical: exactly 1
    top1, top5, samples = _topk_agreement(ref, cand)
    # one value throughout (a dead output: all zeros, a saturated range) where the reference varies
    constant = bool(c.size > 1 and np.ptp(c) == 0 and np.ptp(r) > 0 and not new_nonfinite)
    return OutputDelta(name=name, elements=int(ref.size), max_abs_err=max_abs, max_rel_err=max_rel,
                       mismatches=mismatches, nonfinite=new_nonfinite,
                       nonfinite_baseline=int(np.count_nonzero(~ref_ok)), mean_abs_err=mean_abs,
                       ref_max_abs=ref_max, ref_rms=ref_rms,
                       max_err_scaled=max_abs / ref_max if ref_max > 0 else (0.0 if max_abs == 0 else math.inf),
                       mean_err_scaled=mean_abs / ref_rms if ref_rms > 0 else (0.0 if mean_abs == 0 else math.inf),
                       snr_db=snr, cosine=min(cosine, 1.0), top1=top1, top5=top5, samples=samples,
                       constant=constant)


def _worst(values: list[float | None], pick: Any) -> float | None:
    known = [v for v in values if v is not None]
    return pick(known) if known else None


def compare_outputs(reference: Mapping[str, np.ndarray], candidate: Mapping[str, np.ndarray],
                    *, rtol: float = RTOL, atol: float = ATOL, inputs: str = "random inputs") -> AccuracyDelta:
    """Compare every floating output the two share (integer outputs, e.g. argmax, compared too);
    ``inputs`` says what they were computed on."""
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
        cosine=min((d.cosine for d in deltas), default=1.0),
        snr_db=min((d.snr_db for d in deltas), default=math.inf),
        max_err_scaled=max((d.max_err_scaled for d in deltas), default=0.0),
        mean_err_scaled=max((d.mean_err_scaled for d in deltas), default=0.0),
        top1=_worst([d.top1 for d in deltas], min),
        top5=_worst([d.top5 for d in deltas], min),
        inputs=inputs,
        constant_outputs=tuple(d.name for d in deltas if d.constant),
    )


def summary_line(acc: Mapping[str, Any]) -> str:
    """One line of an accuracy JSON: the scale-aware metrics first, the elementwise ones after."""
    parts = [] if "cosine" not in acc else [  # a file written before these metrics existed has none
        f"cosine {acc['cosine']:.6f}", f"SNR {_db(acc.get('snr_db'))}",
        f"max err/max|ref| {acc.get('max_err_scaled', 0.0):.3g}", f"mean err/RMS(ref) {acc.get('mean_err_scaled', 0.0):.3g}"]
    if acc.get("top1") is not None:
        parts.append(f"top-1 {acc['top1']:.2%}")
    if acc.get("top5") is not None:
        parts.append(f"top-5 {acc['top5']:.2%}")
    parts.append(f"max abs {acc.get('max_abs_err', 0.0):.3g}, max rel {acc.get('max_rel_err', 0.0):.3g}, "
                 f"{acc.get('mismatch_fraction', 0.0):.2%} beyond rtol {acc.get('rtol', RTOL):g}/atol "
                 f"{acc.get('atol', ATOL):g}, non-finite {acc.get('nonfinite', 0)}")
    return ", ".join(parts) + (f" (on {acc['inputs']})" if acc.get("inputs") else "")


def _db(value: Any) -> str:
    if value is None:
        return "–"
    value = float(value)
    return "inf dB (exact)" if value == math.inf else f"{value:.1f} dB"


def run_outputs(runner: Any, feeds: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Host-in/host-out inference (``Runner.infer``): the correctness path of every backend."""
    return {name: np.asarray(value) for name, value in runner.infer(feeds).items()}


# ---------------------------------------------------------------------------------------------
# The accuracy verdict: OK / DEGRADED / BROKEN against a budget (``--accuracy``)
# ---------------------------------------------------------------------------------------------

OK, DEGRADED, BROKEN = "OK", "DEGRADED", "BROKEN"
# Metric → the comparison a threshold on it uses (a budget says how good is good enough).
BUDGET_METRICS = {"cosine": ">=", "snr_db": ">=", "top1": ">=", "top5": ">=", "max_err_scaled": "<=",
                  "mean_err_scaled": "<=", "mismatch_fraction": "<="}
# Defaults (docs/accuracy.md says why): cosine ≥ 0.999 allows about 4.5 % RMS error relative to the
# output (1 − cos ≈ ½·(err/‖ref‖)²), ~30× the ~1e-3 that FP16 rounding through tens of layers leaves,
# yet far below what an overflow or a lost small activation does; top-1 ≥ 0.99 lets at most one
# prediction in a hundred change — the scale at which published FP16/INT8 deployment checks
# (e.g. MLPerf's 99 % of FP32 accuracy) draw the line.
DEFAULT_BUDGET = "cosine>=0.999,top1>=0.99"
# The values each metric can take: a bound outside them can never pass (top1>=2, cosine>=1.5,
# mismatch_fraction<=-0.1), so it is refused when parsed rather than failing every candidate.
METRIC_RANGES = {"cosine": (-1.0, 1.0), "top1": (0.0, 1.0), "top5": (0.0, 1.0), "mismatch_fraction": (0.0, 1.0),
                 "max_err_scaled": (0.0, math.inf), "mean_err_scaled": (0.0, math.inf)}
# Below this cosine the candidate does not agree with the reference at all, whatever the budget: for
# outputs of equal norm ‖cand − ref‖² = 2·(1 − cos)·‖ref‖², so at 0.5 the error is as large as the
# output itself (0 is an unrelated, orthogonal output). That is BROKEN, not a degree of DEGRADED.
BROKEN_COSINE_FLOOR = 0.5


@dataclass(frozen=True)
class Threshold:
    metric: str
    op: str  # ">=" or "<="
    value: float

    @property
    def text(self) -> str:
        return f"{self.metric}{self.op}{self.value:g}"

    def holds(self, measured: float) -> bool:
        return measured >= self.value if self.op == ">=" else measured <= self.value


@dataclass(frozen=True)
class AccuracyBudget:
    """What a candidate's outputs must meet to be ``OK`` (``--accuracy cosine>=0.999,top1>=0.99``)."""

    thresholds: tuple[Threshold, ...]

    @classmethod
    def parse(cls, text: str | None) -> "AccuracyBudget":
        """``metric>=value,…``; each metric has one direction (cosine>=, max_err_scaled<=, …)."""
        from ..errors import BadInput

        text = DEFAULT_BUDGET if text is None else text
        items = []
        for part in (p.strip() for p in text.split(",")):
            op = ">=" if ">=" in part else "<=" if "<=" in part else None
            metric, _, value = part.partition(op) if op else (part, "", "")
            metric = metric.strip()
            if op is None or metric not in BUDGET_METRICS:
                allowed = ", ".join(f"{m}{o}V" for m, o in BUDGET_METRICS.items())
                raise BadInput(f"--accuracy {part!r}: expected METRIC>=VALUE or METRIC<=VALUE, one of {allowed}")
            if op != BUDGET_METRICS[metric]:
                raise BadInput(f"--accuracy {part!r}: {metric} is bounded with {BUDGET_METRICS[metric]} "
                               f"(higher is {'better' if BUDGET_METRICS[metric] == '>=' else 'worse'})")
            try:
                bound = float(value)
            except ValueError as err:
                raise BadInput(f"--accuracy {part!r}: {value.strip()!r} is not a number") from err
            if not math.isfinite(bound):
                raise BadInput(f"--accuracy {part!r}: the bound must be finite")
            low, high = METRIC_RANGES.get(metric, (-math.inf, math.inf))
            if (op == ">=" and bound > high) or (op == "<=" and bound < low):
                raise BadInput(f"--accuracy {part!r}: {metric} is {'at most' if op == '>=' else 'at least'} "
                               f"{high if op == '>=' else low:g}, so this can never pass")
            items.append(Threshold(metric, op, bound))
        return cls(tuple(items))

    @property
    def text(self) -> str:
        return ",".join(t.text for t in self.thresholds)


def judge(acc: AccuracyDelta, budget: AccuracyBudget) -> dict[str, Any]:
    """The verdict of one candidate: BROKEN when it produced inf/NaN the baseline did not, DEGRADED
    when a threshold of ``budget`` fails, OK otherwise; beside it what the FP16 range analysis
    predicts (BROKEN when a tensor not kept in FP32 overflows FP16), which matters where the
    candidate did not compute in FP16 (``acc.caveat``)."""
    failed, checked, skipped = [], [], []
    for t in budget.thresholds:
        measured = getattr(acc, t.metric)
        if measured is None:  # top-1 of a model without an [N, classes] output
            skipped.append(t.text)
            continue
        entry = {"threshold": t.text, "measured": measured, "holds": t.holds(float(measured))}
        checked.append(entry)
        if not entry["holds"]:
            failed.append(entry)
    unrelated = acc.cosine < BROKEN_COSINE_FLOOR
    broken = bool(acc.nonfinite or unrelated or acc.constant_outputs)
    observed = BROKEN if broken else DEGRADED if failed else OK
    predicted = None
    if acc.predicted and not acc.predicted.get("skipped"):
        open_overflow = [f for f in acc.predicted.get("findings", []) if f.get("kind") == "overflow" and not f.get("covered")]
        predicted = BROKEN if open_overflow else OK
    if observed == BROKEN:
        reason = "; ".join(why for why, hit in (
            (f"{acc.nonfinite} non-finite output value(s) where the baseline is finite", acc.nonfinite),
            (f"cosine {acc.cosine:.6f} < {BROKEN_COSINE_FLOOR}: the output does not agree with the baseline's "
             "at all", unrelated),
            (f"output(s) {', '.join(acc.constant_outputs)} are one constant value where the baseline's vary",
             acc.constant_outputs)) if hit)
    elif failed:
        reason = "; ".join(f"{e['threshold']} fails ({_measured(e['measured'])})" for e in failed)
    else:
        reason = "every threshold holds" if checked else "no threshold applies (only the inf/NaN check)"
    label = observed if predicted in (None, observed) else f"{observed} (predicted {predicted})"
    return {"verdict": observed, "predicted": predicted, "label": label, "budget": budget.text,
            "reason": reason, "checked": checked, "not_applicable": skipped, "inputs": acc.inputs,
            "observed_not_fp16": bool(acc.caveat),
            **({"samples": acc.samples, "samples_total": acc.samples_total} if acc.samples is not None else {})}


def _measured(value: float) -> str:
    return f"{value:.6g}"
