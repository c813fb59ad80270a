"""One conversion: TF model → tf2onnx (its route) → validated ONNX → checked against TensorFlow →
written. The file is written only after the check passed."""
from __future__ import annotations

import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Mapping, Sequence

from ...util.files import atomic_write_bytes
from ...errors import BadInput, BadModel, BuildFailed, MissingDependency, first_line
from .args import Shape, content_sha256, detect_format, parse_tensor_list, tf_tensor_name
from .check import (
    CHECK_BATCH_SIZE, DEFAULT_ATOL, DEFAULT_RTOL, CheckResult, check_against_tf, onnx_io, validate_onnx,
)
from .routes import ROUTES, Reference, import_tf, quiet_logs, versions

# Bumped when the conversion code changes what it writes: old cache entries are then not served.
CONVERT_SCHEMA = 2


@dataclass(frozen=True)
class ConversionResult:
    """What one conversion produced; written as JSON beside a cached ONNX file."""

    onnx_path: Path
    source: str  # the TF model path as given
    source_format: str  # "keras", "savedmodel" or "graphdef"
    source_sha256: str  # content hash (every file of a SavedModel dir)
    convert_s: float  # tf2onnx's work only, not TF's import
    opset: int
    inputs: tuple[tuple[str, tuple[Any, ...]], ...]
    outputs: tuple[tuple[str, tuple[Any, ...]], ...]
    check: CheckResult | None  # None: --no-check
    versions: dict[str, str] = field(default_factory=dict)
    notes: tuple[str, ...] = ()
    cached: bool = False  # True: served from the conversion cache

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["onnx_path"] = str(self.onnx_path)
        data["schema"] = CONVERT_SCHEMA
        if self.check is not None:
            data["check"] = asdict(self.check)
        data.pop("cached")
        return data

    @classmethod
    def from_json(cls, data: Mapping[str, Any], onnx_path: Path) -> "ConversionResult":
        check = data.get("check")
        return cls(
            onnx_path=Path(onnx_path),
            source=data["source"],
            source_format=data["source_format"],
            source_sha256=data["source_sha256"],
            convert_s=float(data["convert_s"]),
            opset=int(data["opset"]),
            inputs=tuple((n, tuple(s)) for n, s in data["inputs"]),
            outputs=tuple((n, tuple(s)) for n, s in data["outputs"]),
            check=None if check is None else CheckResult(**check),
            versions=dict(data.get("versions", {})),
            notes=tuple(data.get("notes", ())),
            cached=True,
        )


@dataclass(frozen=True)
class TfConvertOptions:
    """The conversion options that change the ONNX file (``cache`` keys its entries on the same four):
    the opset (None: tf2onnx's default), the graph's input/output tensors with optional shapes (a list,
    or the ``--inputs``/``--outputs`` text) and the SavedModel signature."""

    opset: int | None = None
    inputs: Sequence[tuple[str, Shape | None]] | str | None = None
    outputs: Sequence[tuple[str, Shape | None]] | str | None = None
    signature: str | None = None


def convert_tf(
    model: Path,
    output: Path,
    options: TfConvertOptions = TfConvertOptions(),
    *,
    check: bool = True,
    atol: float = DEFAULT_ATOL,
    rtol: float = DEFAULT_RTOL,
    source_sha256: str | None = None,
) -> ConversionResult:
    """Convert ``model`` to ONNX at ``output`` as ``options`` say, validate it and (unless ``check=False``)
    compare it with TensorFlow. Raises BuildFailed when the check fails; the file is then not written."""
    opset, inputs, outputs, signature = options.opset, options.inputs, options.outputs, options.signature
    model, output = Path(model), Path(output)
    fmt = detect_format(model)
    input_args = parse_tensor_list(inputs) if isinstance(inputs, str) else list(inputs or [])
    output_args = parse_tensor_list(outputs) if isinstance(outputs, str) else list(outputs or [])
    _check_options(model, fmt, bool(input_args or output_args), signature, opset, (atol, rtol))
    tf, tf2onnx = import_tf()
    sha = source_sha256 or content_sha256(model)
    with quiet_logs():
        # tf2onnx names inserted nodes, constants and dims from a process-wide counter: reset it, so
        # a model converts to the same bytes whatever was converted before it in this process.
        tf2onnx.utils.INTERNAL_NAME = 1
        started = time.perf_counter()
        try:
            proto, reference, notes = ROUTES[fmt](
                tf, tf2onnx, model, opset, inputs=input_args, outputs=output_args, signature=signature
            )
        except (BadModel, BadInput, MissingDependency):
            raise
        except Exception as err:  # tf2onnx raises anything from ValueError to its own assertion errors
            raise BuildFailed(f"tf2onnx failed ({type(err).__name__}: {first_line(err)})", path=model) from err
        convert_s = time.perf_counter() - started
        validate_onnx(proto, model)
        in_io, out_io = onnx_io(proto)
        notes = list(notes) + static_batch_notes(in_io)
        result_check = None
        if check:
            result_check = faithfulness(proto, reference, input_args, in_io, (atol, rtol), model, notes)
    output.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_bytes(output, proto.SerializeToString())
    opset_used = next((e.version for e in proto.opset_import if e.domain in ("", "ai.onnx")), 0)
    return ConversionResult(
        onnx_path=output,
        source=str(model),
        source_format=fmt,
        source_sha256=sha,
        convert_s=round(convert_s, 3),
        opset=int(opset_used),
        inputs=in_io,
        outputs=out_io,
        check=result_check,
        versions=versions(tf, tf2onnx),
        notes=tuple(notes),
    )


def _check_options(model: Path, fmt: str, tensor_lists: bool, signature: str | None, opset: int | None,
                   tolerances: tuple[float, float]) -> None:
    """Refuse options that do not fit the model's format (``tensor_lists``: --inputs/--outputs given) and
    numbers out of range, before TensorFlow is imported."""
    atol, rtol = tolerances
    if fmt != "graphdef" and tensor_lists:
        raise BadInput("--inputs/--outputs are for frozen graphs (.pb); Keras and SavedModel carry their own signature", path=model)
    if fmt != "savedmodel" and signature:
        raise BadInput("--signature is for SavedModel directories", path=model)
    if opset is not None and opset < 7:
        raise BadInput(f"--opset {opset}: tf2onnx supports opset 7 and newer")
    if atol <= 0 or rtol < 0:
        raise BadInput("--atol must be > 0 and --rtol >= 0")


def static_batch_notes(in_io: Sequence[tuple[str, tuple[Any, ...]]]) -> list[str]:
    """A note for each converted input whose batch dim is a number: the engines could only run that batch."""
    return [f"input {name!r} has a static batch dim {shape[0]} (make it dynamic with --inputs {name}:?x…)"
            for name, shape in in_io if shape and isinstance(shape[0], int)]


def faithfulness(proto: Any, reference: Reference, input_args: Sequence[tuple[str, Shape | None]],
                 in_io: Sequence[tuple[str, tuple[Any, ...]]], tolerances: tuple[float, float], model: Path,
                 notes: list[str]) -> CheckResult:
    """The converted graph against TensorFlow on one batch (shapes from ``--inputs``, dynamic dims at
    the check's batch size) within ``tolerances`` (atol, rtol); a failure raises BuildFailed, tiny outputs
    add a note."""
    atol, rtol = tolerances
    overrides = {
        tf_tensor_name(n): tuple(CHECK_BATCH_SIZE if d is None else d for d in s)
        for n, s in input_args
        if s is not None
    }
    overrides = {k: v for k, v in overrides.items() if k in {n for n, _ in in_io}}
    result_check = check_against_tf(proto, reference, atol=atol, rtol=rtol, shapes=overrides or None, path=model)
    if result_check.min_output_scale < atol:
        notes.append(
            f"outputs are tiny (max |y| = {result_check.min_output_scale:.2g} < atol): judged by the error "
            f"relative to their scale ({result_check.max_rel_err:.2g})"
        )
    if result_check.status == "fail":
        raise BuildFailed(f"ONNX differs from TensorFlow: {result_check.summary()}", path=model)
    return result_check
