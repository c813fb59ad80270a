"""Is the converted ONNX model valid, and faithful to TensorFlow? The op and schema validation, and
the check that runs ONNX Runtime and TensorFlow on one seeded batch and compares every output."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Mapping

import numpy as np

from ...errors import BadModel, BuildFailed, MissingDependency, first_line
from ...model.inputs import make_inputs, resolve_shapes
from ...model.onnx_model import describe
from .routes import Reference

if TYPE_CHECKING:
    import onnx

# Tolerances of the faithfulness check, numpy.allclose style: an element passes when
# |onnx - tf| <= ATOL + RTOL * |tf|. 1e-4 absolute is the bar ("within 1e-4 of TensorFlow");
# the relative part keeps large logits of random-weight nets (|y| ~ 1e2) from failing on float32
# rounding alone. Measured FP32 conversions use far less than this (max abs error ≤ 1e-6).
DEFAULT_ATOL = 1e-4
DEFAULT_RTOL = 1e-3
# Besides numpy's elementwise rule, max |onnx - tf| must stay within RTOL of the output's scale
# (max |tf|): random-weight MobileNetV2 logits are ~1e-11, so ATOL alone would pass even an all-zero
# ONNX output. A faithful FP32 conversion differs by ~1e-6 of the scale.
# Warn when the worst element uses more than this share of its allowance: a conversion that is
# correct differs from TF by float32 reordering only, orders of magnitude below the tolerance.
WARN_FRACTION = 0.1
# Batch of the check: 2, not 1, so a batch dim that came out static (or wrongly broadcast) shows up.
CHECK_BATCH_SIZE = 2
CHECK_SEED = 0


@dataclass(frozen=True)
class CheckResult:
    """How close the ONNX model's outputs are to TensorFlow's on one random batch."""

    status: str  # "ok", "warn" (close to the tolerance) or "fail"
    max_abs_err: float
    max_rel_err: float  # max |onnx - tf| / max |tf| per output: error relative to the output's scale
    atol: float
    rtol: float
    batch_size: int
    seed: int
    worst_output: str
    allowance_used: float  # share of the tolerance the worst output uses: above 1.0 fails
    min_output_scale: float = 0.0  # smallest max |tf| over the outputs: tiny means atol alone judged nothing

    def summary(self) -> str:
        return (
            f"check {self.status}: max abs err {self.max_abs_err:.3g}, max rel err {self.max_rel_err:.3g} "
            f"(atol {self.atol:g}, rtol {self.rtol:g}, batch {self.batch_size}, worst output {self.worst_output!r})"
        )


def unsupported_ops(model: "onnx.ModelProto") -> list[str]:
    """Op types in ``model`` that no ONNX schema defines: what tf2onnx leaves behind (it converts with
    ``continue_on_error``) when it has no mapping for a TensorFlow op."""
    import onnx

    opsets = {entry.domain: entry.version for entry in model.opset_import}
    bad = set()
    for node in model.graph.node:
        domain = node.domain if node.domain != "ai.onnx" else ""
        try:
            onnx.defs.get_schema(node.op_type, opsets.get(domain, 1), domain)
        except Exception:  # SchemaError: no such op in that domain / version
            bad.add(node.op_type)
    return sorted(bad)


def validate_onnx(model: "onnx.ModelProto", path: Path) -> None:
    import onnx

    bad = unsupported_ops(model)
    if bad:
        raise BadModel(f"tf2onnx cannot convert TensorFlow op(s): {', '.join(bad)}", path=path)
    try:
        onnx.checker.check_model(model, full_check=True)  # full_check runs strict shape inference
    except Exception as err:
        raise BuildFailed(f"tf2onnx wrote an invalid ONNX model: {first_line(err)}", path=path) from err


def onnx_io(model: "onnx.ModelProto") -> tuple[tuple[tuple[str, tuple[Any, ...]], ...], tuple[tuple[str, tuple[Any, ...]], ...]]:
    info = describe(model, Path("converted.onnx"), sha256="-")
    return (
        tuple((t.name, tuple(t.shape)) for t in info.inputs),
        tuple((t.name, tuple(t.shape)) for t in info.outputs),
    )


def check_against_tf(
    model: "onnx.ModelProto",
    reference: Reference,
    *,
    atol: float = DEFAULT_ATOL,
    rtol: float = DEFAULT_RTOL,
    shapes: Mapping[str, tuple[int, ...]] | None = None,
    path: Path | None = None,
) -> CheckResult:
    """Run ONNX Runtime (CPU) and TensorFlow on the same seeded batch (``CHECK_SEED``; dynamic dims at
    ``CHECK_BATCH_SIZE``, the batch size and seed every conversion is checked at) and compare every output."""
    batch_size, seed = CHECK_BATCH_SIZE, CHECK_SEED
    try:
        import onnxruntime as ort
    except ImportError as err:  # pragma: no cover - core dependency
        raise MissingDependency("onnxruntime", None) from err
    info = describe(model, Path(path or "converted.onnx"), sha256="-")
    concrete = resolve_shapes(info.inputs, batch_size, shapes, model_path=None if path is None else str(path))
    feeds = make_inputs(info.inputs, concrete, seed=seed)
    options = ort.SessionOptions()
    options.log_severity_level = 3
    session = ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])
    out_names = [t.name for t in info.outputs]
    got = session.run(out_names, feeds)
    want = reference(feeds, [t.name for t in info.inputs], out_names)
    if len(want) != len(got):
        raise BuildFailed(f"TensorFlow gave {len(want)} outputs, the ONNX model {len(got)}", path=path)
    max_abs, max_rel, used, worst = 0.0, 0.0, 0.0, out_names[0] if out_names else ""
    min_scale: float | None = None
    for name, onnx_out, tf_out in zip(out_names, got, want):
        onnx_out = np.asarray(onnx_out, dtype=np.float64)
        tf_out = np.asarray(tf_out, dtype=np.float64)
        if onnx_out.shape != tf_out.shape:
            raise BuildFailed(
                f"output {name!r}: ONNX shape {onnx_out.shape} differs from TensorFlow's {tf_out.shape}", path=path
            )
        if onnx_out.size == 0:
            continue
        diff = np.abs(onnx_out - tf_out)
        if not np.all(np.isfinite(diff)):
            same_nonfinite = np.array_equal(np.isnan(onnx_out), np.isnan(tf_out)) and np.array_equal(
                onnx_out[np.isinf(onnx_out)], tf_out[np.isinf(onnx_out)]
            )
            if not same_nonfinite:
                return CheckResult("fail", float("inf"), float("inf"), atol, rtol, batch_size, seed, name, float("inf"))
            diff = np.where(np.isfinite(diff), diff, 0.0)
        scale = float(np.max(np.abs(tf_out)))
        scale_err = float(diff.max()) / scale if scale > 0 else (0.0 if diff.max() == 0 else float("inf"))
        out_used = float(np.max(diff / (atol + rtol * np.abs(tf_out))))
        if rtol > 0:
            out_used = max(out_used, scale_err / rtol)
        max_abs = max(max_abs, float(diff.max()))
        max_rel = max(max_rel, scale_err)
        min_scale = scale if min_scale is None else min(min_scale, scale)
        if out_used >= used:
            used, worst = out_used, name
    status = "fail" if used > 1.0 else "warn" if used > WARN_FRACTION else "ok"
    return CheckResult(status, max_abs, max_rel, atol, rtol, batch_size, seed, worst, used, min_scale or 0.0)
