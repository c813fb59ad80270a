"""What the FP16 conversion did to the weights, value by value, and the build note worded from it.

onnxconverter-common's converter (``convert_np_to_float16``) treats each FP32 weight tensor so:

* ``|x| > max_finite_val`` (finite) → ``±max_finite_val``: **clamped**. trtprof passes 65504, FP16's
  largest finite value, so only values that do not exist in FP16 change (its default 1e4 turned an
  exact 30000 into 10000).
* ``0 < |x| < min_positive_val`` → ``±min_positive_val``: **raised**, not flushed to zero. trtprof
  passes 2⁻²⁴ ≈ 5.96e-8, FP16's smallest subnormal, so exactly the non-zero values that FP16 would
  flush to 0 are raised to it instead (sign and non-zero-ness kept).
* everything else is rounded to the nearest FP16; values with ``|x| < 2⁻¹⁴ ≈ 6.1e-5`` (FP16's smallest
  normal) become **subnormals** with fewer than 11 significant bits. 0, inf and NaN are unchanged.

The converter's own warnings name one value per tensor; the counts here come from comparing every
converted tensor with its FP32 original, so they say exactly which weights changed and to what.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any, Iterator, Sequence

import numpy as np

from ..util.wording import plural

if TYPE_CHECKING:
    import onnx

FP16_MAX = 65504.0  # largest finite FP16
FP16_MIN_NORMAL = 2.0 ** -14  # ≈ 6.10e-5
FP16_MIN_SUBNORMAL = 2.0 ** -24  # ≈ 5.96e-8
NOTE_TENSORS = 3  # tensors named per note line; every one is in the engine JSON

CLAMPED = "clamped"
RAISED = "raised"


@dataclass(frozen=True)
class WeightChange:
    """Values of one weight tensor the conversion moved beyond FP16 rounding."""

    name: str  # initializer name, Constant output, or NODE.ATTRIBUTE for other node attributes
    kind: str  # CLAMPED (|x| > 65504) or RAISED (0 < |x| < 2⁻²⁴)
    count: int
    elements: int
    original_min_abs: float
    original_max_abs: float
    new_abs: float  # the magnitude they all have now (read back from the converted tensor)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class WeightReport:
    tensors: int  # float tensors converted to FP16
    values: int
    changes: tuple[WeightChange, ...]
    subnormal_values: int  # values now FP16 subnormals (reduced precision, not changed in kind)
    subnormal_tensors: int
    max_abs: float  # largest finite |weight| converted

    def count(self, kind: str) -> int:
        return sum(c.count for c in self.changes if c.kind == kind)

    def to_json(self) -> dict[str, Any]:
        return {"tensors": self.tensors, "values": self.values, "clamped_values": self.count(CLAMPED),
                "raised_values": self.count(RAISED), "subnormal_values": self.subnormal_values,
                "subnormal_tensors": self.subnormal_tensors, "max_abs": self.max_abs,
                "limits": {"max_finite_val": FP16_MAX, "min_positive_val": FP16_MIN_SUBNORMAL},
                "changes": [c.to_json() for c in self.changes]}

    def notes(self) -> list[str]:
        """Build-note lines worded from the counts (nothing about a kind that did not happen)."""
        lines = []
        clamped = [c for c in self.changes if c.kind == CLAMPED]
        raised = [c for c in self.changes if c.kind == RAISED]
        if clamped:
            one = self.count(CLAMPED) == 1
            lines.append(f"fp16 weights: {plural(self.count(CLAMPED), 'value')} in {plural(len(clamped), 'tensor')} "
                         f"{'exceeds' if one else 'exceed'} FP16's max 65504 and {'was' if one else 'were'} clamped "
                         f"to ±65504: {_name_changes(clamped)}")
        if raised:
            one = self.count(RAISED) == 1
            lines.append(f"fp16 weights: {plural(self.count(RAISED), 'non-zero value')} in {plural(len(raised), 'tensor')} "
                         f"{'is' if one else 'are'} below FP16's smallest subnormal 2^-24 (5.96e-08) and "
                         f"{'was' if one else 'were'} raised to ±5.96e-08 instead of flushed to 0: {_name_changes(raised)}")
        if self.subnormal_values:
            be = "is" if self.subnormal_values == 1 else "are"
            lines.append(f"fp16 weights: {plural(self.subnormal_values, 'value')} in {plural(self.subnormal_tensors, 'tensor')} "
                         f"{be} below FP16's smallest normal 6.1e-05 and {be} stored as subnormals (fewer significant bits)")
        return lines


def _name_changes(changes: Sequence[WeightChange]) -> str:
    shown = sorted(changes, key=lambda c: -c.count)[:NOTE_TENSORS]
    def span(c: WeightChange) -> str:
        if c.original_min_abs == c.original_max_abs:
            return f"{c.original_max_abs:.4g}"
        return f"{c.original_min_abs:.3g}..{c.original_max_abs:.3g}"

    text = "; ".join(f"{c.name} ({c.count} of {c.elements}, |x| {span(c)} → {c.new_abs:.6g})" for c in shown)
    if len(changes) > len(shown):
        text += f"; and {len(changes) - len(shown)} more (engine JSON: fp16_weights)"
    return text


def _float_tensors(model: "onnx.ModelProto", data_type: int) -> Iterator[tuple[str, "onnx.TensorProto"]]:
    """(name, tensor) of every top-level initializer and node-attribute tensor of ``data_type``."""
    graph = model.graph
    for init in graph.initializer:
        if init.data_type == data_type:
            yield init.name, init
    for node in graph.node:
        for attr in node.attribute:
            tensors = ([attr.t] if attr.HasField("t") else []) + list(attr.tensors)
            for i, tensor in enumerate(tensors):
                if tensor.data_type != data_type:
                    continue
                if node.op_type == "Constant" and node.output:
                    name = node.output[0]
                else:
                    name = f"{node.name or node.output[0]}.{attr.name}" + (f"[{i}]" if len(tensors) > 1 else "")
                yield name, tensor


def weight_report(original: "onnx.ModelProto", converted: "onnx.ModelProto") -> WeightReport:
    """Compare every tensor that became FP16 with its FP32 original (matched by name)."""
    from onnx import TensorProto, numpy_helper

    before = dict(_float_tensors(original, TensorProto.FLOAT))
    changes: list[WeightChange] = []
    tensors = values = subnormal = subnormal_tensors = 0
    max_abs = 0.0
    for name, tensor in _float_tensors(converted, TensorProto.FLOAT16):
        source = before.get(name)
        if source is None:
            continue  # FP16 already in the original model
        old = numpy_helper.to_array(source).astype(np.float64).ravel()
        new = numpy_helper.to_array(tensor).astype(np.float64).ravel()
        if old.shape != new.shape:
            continue
        tensors += 1
        values += old.size
        mag = np.abs(old)
        finite = np.isfinite(mag)
        if finite.any():
            max_abs = max(max_abs, float(mag[finite].max()))
        for kind, mask in ((CLAMPED, finite & (mag > FP16_MAX)), (RAISED, (mag > 0) & (mag < FP16_MIN_SUBNORMAL))):
            count = int(np.count_nonzero(mask))
            if count:
                changes.append(WeightChange(
                    name=name, kind=kind, count=count, elements=int(old.size),
                    original_min_abs=float(mag[mask].min()), original_max_abs=float(mag[mask].max()),
                    new_abs=float(np.abs(new[mask]).max())))
        sub = int(np.count_nonzero((mag >= FP16_MIN_SUBNORMAL) & (mag < FP16_MIN_NORMAL)))
        subnormal += sub
        subnormal_tensors += bool(sub)
    return WeightReport(tensors=tensors, values=values, changes=tuple(changes), subnormal_values=subnormal,
                        subnormal_tensors=subnormal_tensors, max_abs=max_abs)
