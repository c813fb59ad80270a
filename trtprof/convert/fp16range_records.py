"""The FP16 range analysis' records and arithmetic (``trtprof.convert.fp16range`` runs the analysis): the
float32 → float16 rounding limits, one tensor's range (``TensorRange``), the overflow and underflow risks
read from ranges (``RangeFinding``, ``findings_of``), one analysis (``RangeAnalysis``) and its text lines
(``predicted_lines``). No ONNX Runtime here: numpy on arrays already fetched, and JSON.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, field, replace
from typing import TYPE_CHECKING, Any, Mapping, Sequence

import numpy as np

from ..convert.fp16_weights import FP16_MIN_NORMAL
from ..util.wording import plural

if TYPE_CHECKING:
    from ..convert.keeplist import KeepFp32

OVERFLOW = "overflow"
UNDERFLOW = "underflow"
# Rounding boundaries of float32 → float16 (round to nearest, ties to even): from 65520 (halfway between
# 65504 and 65536, a tie that goes to the even 65536 = inf) a value becomes inf; up to 2⁻²⁵ (halfway
# between 0 and 2⁻²⁴, a tie that goes to the even 0) a value becomes 0.
FP16_INF_FROM = 65520.0
FP16_ZERO_UPTO = 2.0 ** -25
# A tensor is an underflow risk when at least this share of its non-zero values rounds to 0 (≤ 2⁻²⁵):
# one value in ten lost to zero is far beyond FP16 rounding (≈ 5e-4 relative), and normalisation or
# division downstream can turn the lost values into large errors.
UNDERFLOW_SHARE = 0.10
UNDERFLOW_MIN_VALUES = 16  # … and at least this many such values (a few stray tiny values are noise)
FINDINGS_SHOWN = 5  # findings printed per kind; all are in the JSON
LARGEST_KEPT = 10  # tensors with the largest max |x| kept in the JSON beside the findings
STATS_DTYPE = np.float32


@dataclass(frozen=True)
class TensorRange:
    name: str
    node: str
    op_type: str
    elements: int
    max_abs: float  # over finite values
    nonzero: int  # finite non-zero values
    below_normal_share: float  # of non-zero values: |x| < 2⁻¹⁴ (FP16 subnormal)
    to_zero_share: float  # of non-zero values: |x| ≤ 2⁻²⁵ (rounds to 0 in FP16: lost)
    nonfinite: int  # already inf/NaN in FP32: the model's own, not FP16's

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class RangeFinding:
    kind: str  # OVERFLOW | UNDERFLOW
    tensor: str
    node: str
    op_type: str
    value: float  # max |x| (overflow) or the share of non-zero values ≤ 2⁻²⁵ (underflow)
    keep_nodes: tuple[str, ...]  # producer and readers: keeping these FP32 keeps the tensor FP32
    covered: bool = False  # the build's keep-list already keeps all of keep_nodes in FP32
    built: bool | None = None  # the FP16 conversion with this keep-list was built and loaded (None: not tried)
    build_error: str = ""

    @property
    def option(self) -> str:
        return "--layer-precisions " + ",".join(f"{n}:fp32" for n in self.keep_nodes)

    @property
    def message(self) -> str:
        if self.kind == OVERFLOW:
            what = (f"overflow risk: tensor {self.tensor} (node {self.node}, {self.op_type}) reaches max |x| "
                    f"{self.value:.4g} ≥ 65520 → inf in FP16")
        else:
            what = (f"underflow risk: tensor {self.tensor} (node {self.node}, {self.op_type}) has {self.value:.1%} "
                    f"of its non-zero values at or below 2^-25 (2.98e-08) → 0 in FP16")
        if self.covered:
            return what + "; already kept in FP32 by this build's keep-list"
        if self.built is False:
            return what + f"; keeping its producer and readers in FP32 did not build here ({self.build_error})"
        return what + f"; keep it FP32 with {self.option}" + (" (built and loaded: checked)" if self.built else "")

    def to_json(self) -> dict[str, Any]:
        return {**asdict(self), "keep_nodes": list(self.keep_nodes), "option": self.option, "message": self.message}


@dataclass(frozen=True)
class RangeAnalysis:
    """The FP16 range check of one model on one batch (or why it was skipped)."""

    findings: tuple[RangeFinding, ...] = ()
    tensors: tuple[TensorRange, ...] = ()
    float_tensors: int = 0  # float intermediate tensors in the model
    analysed: int = 0  # of them, analysed (fewer when sampled)
    runs: int = 0
    input_shapes: Mapping[str, tuple[int, ...]] = field(default_factory=dict)
    seconds: float = 0.0
    skipped: str = ""  # why there is no analysis ("" when there is one)
    inputs: str = "random inputs"  # what the FP32 model ran on (the user's --inputs or random)
    samples: int = 0  # samples analysed (all batches)
    suggestion_error: str = ""  # the combined keep-list did not build: why (then none is suggested)
    stopped: str = ""  # cut short by compare's time budget (``Deadline``): what was left out ("" when whole)

    @property
    def sampled(self) -> bool:
        return self.analysed < self.float_tensors

    def of_kind(self, kind: str) -> list[RangeFinding]:
        return [f for f in self.findings if f.kind == kind]

    @property
    def suggested_option(self) -> str:
        """One option that keeps every risky tensor (not yet kept) in FP32."""
        if self.suggestion_error:
            return ""
        return option_text(self.open_nodes)

    @property
    def open_nodes(self) -> list[str]:
        """The nodes of every finding not yet kept in FP32: the combined keep-list."""
        return list(dict.fromkeys(n for f in self.findings if not f.covered for n in f.keep_nodes))

    def summary(self) -> str:
        if self.skipped:
            return f"FP16 range analysis skipped: {self.skipped}"
        scope = (f"{self.analysed} of {self.float_tensors} float tensors (sampled evenly to bound the cost)"
                 if self.sampled else f"all {self.analysed} float tensors")
        shapes = ", ".join(f"{k} {list(v)}" for k, v in self.input_shapes.items())
        counts = f"{plural(len(self.of_kind(OVERFLOW)), 'overflow risk')}, {plural(len(self.of_kind(UNDERFLOW)), 'underflow risk')}"
        peak = max(self.tensors, key=lambda t: t.max_abs, default=None)
        largest = f"; largest |x| {peak.max_abs:.4g} ({peak.name})" if peak is not None else ""
        on = f"{self.inputs} in batches of {shapes}" if self.samples else f"{self.inputs} {shapes}"
        stopped = f" (cut short by the time budget: {self.stopped})" if self.stopped else ""
        return f"FP16 range analysis of the FP32 model on {on}: {scope}: {counts}{largest}{stopped}"

    def lines(self, shown: int = FINDINGS_SHOWN) -> list[str]:
        """The summary and the findings, a few per kind (all are in the JSON): the build's notes."""
        return predicted_lines(self.to_json(), shown, where="fp16_range", advice=False)

    def to_json(self) -> dict[str, Any]:
        largest = sorted(self.tensors, key=lambda t: -t.max_abs)[:LARGEST_KEPT]
        return {"summary": self.summary(), "skipped": self.skipped or None,
                "findings": [f.to_json() for f in self.findings],
                "overflow_risks": len(self.of_kind(OVERFLOW)), "underflow_risks": len(self.of_kind(UNDERFLOW)),
                "suggested_option": self.suggested_option, "suggestion_error": self.suggestion_error or None,
                "float_tensors": self.float_tensors,
                "analysed_tensors": self.analysed, "sampled": self.sampled, "runs": self.runs,
                "input_shapes": {k: list(v) for k, v in self.input_shapes.items()}, "seconds": round(self.seconds, 3),
                "inputs": self.inputs, "samples": self.samples, "stopped": self.stopped or None,
                "thresholds": {"overflow_from": FP16_INF_FROM, "min_normal": FP16_MIN_NORMAL,
                               "zero_upto": FP16_ZERO_UPTO, "underflow_share": UNDERFLOW_SHARE,
                               "underflow_min_values": UNDERFLOW_MIN_VALUES},
                "largest_tensors": [t.to_json() for t in largest]}


def option_text(nodes: Sequence[str]) -> str:
    return "--layer-precisions " + ",".join(f"{n}:fp32" for n in nodes) if nodes else ""


def tensor_range(name: str, node: str, op_type: str, values: np.ndarray) -> TensorRange:
    a = np.abs(np.asarray(values, dtype=STATS_DTYPE).ravel())
    finite = np.isfinite(a)
    fin = a[finite] if not finite.all() else a
    nonzero = fin[fin > 0]
    n = int(nonzero.size)
    return TensorRange(
        name=name, node=node, op_type=op_type, elements=int(a.size),
        max_abs=float(fin.max()) if fin.size else 0.0, nonzero=n,
        below_normal_share=float(np.count_nonzero(nonzero < FP16_MIN_NORMAL)) / n if n else 0.0,
        to_zero_share=float(np.count_nonzero(nonzero <= FP16_ZERO_UPTO)) / n if n else 0.0,
        nonfinite=int(a.size - np.count_nonzero(finite)),
    )


def merge_ranges(parts: Sequence[TensorRange]) -> TensorRange:
    """One tensor's range over several batches: max of the maxima, shares weighted by the non-zero counts."""
    first = parts[0]
    nonzero = sum(p.nonzero for p in parts)

    def share(attr: str) -> float:
        return sum(getattr(p, attr) * p.nonzero for p in parts) / nonzero if nonzero else 0.0

    return replace(first, elements=sum(p.elements for p in parts), max_abs=max(p.max_abs for p in parts),
                   nonzero=nonzero, below_normal_share=share("below_normal_share"),
                   to_zero_share=share("to_zero_share"), nonfinite=sum(p.nonfinite for p in parts))


def findings_of(ranges: Sequence[TensorRange], readers: Mapping[str, Sequence[str]],
                keep: "KeepFp32 | None" = None, ops: Mapping[str, str] | None = None) -> tuple[RangeFinding, ...]:
    """Overflow and underflow risks among ``ranges``; ``readers`` maps a tensor to the nodes reading it."""
    kept_nodes = set(keep.nodes) if keep else set()
    kept_ops = set(keep.ops) if keep else set()
    ops = ops or {}

    def make(kind: str, t: TensorRange, value: float) -> RangeFinding:
        nodes = tuple(dict.fromkeys([t.node, *readers.get(t.name, ())]))
        covered = bool(keep) and all(n in kept_nodes or ops.get(n) in kept_ops for n in nodes)
        return RangeFinding(kind, t.name, t.node, t.op_type, value, nodes, covered)

    over = [make(OVERFLOW, t, t.max_abs) for t in sorted(ranges, key=lambda t: -t.max_abs) if t.max_abs >= FP16_INF_FROM]
    under = [make(UNDERFLOW, t, t.to_zero_share)
             for t in sorted(ranges, key=lambda t: -t.to_zero_share)
             if t.to_zero_share >= UNDERFLOW_SHARE
             and t.to_zero_share * t.nonzero >= UNDERFLOW_MIN_VALUES]
    return tuple(over + under)


def predicted_lines(predicted: Mapping[str, Any] | None, shown: int = FINDINGS_SHOWN, *,
                    where: str = "accuracy.predicted", advice: bool = True) -> list[str]:
    """Text lines of an analysis' JSON, for compare's accuracy block and the report (``where``: the
    JSON path of the full list; ``advice``: how to apply a keep-list, which a build's notes need not say)."""
    if not predicted:
        return []
    if predicted.get("skipped"):
        return [str(predicted.get("summary"))]
    lines = [str(predicted.get("summary"))]
    for kind in (OVERFLOW, UNDERFLOW):
        found = [f for f in predicted.get("findings", []) if f.get("kind") == kind]
        lines += [str(f.get("message")) for f in found[:shown]]
        if len(found) > shown:
            lines.append(f"… and {plural(len(found) - shown, f'more {kind} risk')} (JSON: {where})")
    open_findings = [f for f in predicted.get("findings", []) if not f.get("covered")]
    if len(open_findings) > 1 and predicted.get("suggested_option"):
        lines.append(f"to keep all of them FP32: {predicted['suggested_option']}")
    if open_findings and advice:
        lines.append("keep-lists are build options: trtprof build MODEL --fp16 --layer-precisions …, then compare "
                     "the engines dir (the newest fp16 engine is used)")
    return lines
