"""TensorFlow → ONNX with tf2onnx, checked against TensorFlow, and cached by the model's content.

Three inputs, three tf2onnx routes (their tensor names differ, so nothing here hard-codes one):

- Keras file (``.keras``, ``.h5``/``.hdf5``): ``keras.models.load_model`` → ``tf2onnx.convert.from_keras``.
- SavedModel directory: ``tf2onnx.tf_loader.from_saved_model`` (one signature, ``serving_default``
  when present) → ``tf2onnx.convert.from_graph_def`` with the signature's names.
- Frozen GraphDef ``.pb``: needs ``--inputs``/``--outputs`` (a bare graph has no signature) →
  ``tf2onnx.tf_loader.from_graphdef`` → ``from_graph_def``.

Faithfulness: the converted graph and the *original* TensorFlow model (not tf2onnx's frozen copy) run
on the same seeded batch; the worst element decides pass / warn / fail. The ONNX file is written only
after the check passed, so a cache never holds an unfaithful conversion.

TensorFlow and tf2onnx are imported inside functions: ``import trtprof.convert.tf`` is cheap and works
without them.
"""
from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import re
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterator, Mapping, Sequence

import numpy as np

from ..cache import CacheNotWritable, atomic_write_bytes, atomic_write_text, entry_lock, safe_stem
from ..errors import BadInput, BadModel, BuildFailed, MissingDependency
from ..model import sha256_file

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
# Bumped when the conversion code changes what it writes: old cache entries are then not served.
CONVERT_SCHEMA = 2

KERAS_SUFFIXES = (".keras", ".h5", ".hdf5")
GRAPHDEF_SUFFIXES = (".pb",)

Shape = tuple[int | None, ...]


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


# ----------------------------------------------------------------------------- inputs and hashes


def detect_format(path: Path) -> str:
    """"keras", "savedmodel" or "graphdef"; a BadModel line for anything else."""
    path = Path(path)
    if not path.exists():
        raise BadModel("no such file or directory", path=path)
    if path.is_dir():
        if not any(path.iterdir()):
            raise BadModel("empty directory, not a TensorFlow SavedModel", path=path)
        if not (path / "saved_model.pb").is_file() and not (path / "saved_model.pbtxt").is_file():
            raise BadModel("directory has no saved_model.pb: not a TensorFlow SavedModel", path=path)
        return "savedmodel"
    suffix = path.suffix.lower()
    if suffix not in KERAS_SUFFIXES + GRAPHDEF_SUFFIXES:
        raise BadModel(
            "not a TensorFlow model (expected a SavedModel directory, a .keras/.h5 file or a frozen .pb)", path=path
        )
    if path.stat().st_size == 0:
        raise BadModel("file is empty", path=path)
    return "keras" if suffix in KERAS_SUFFIXES else "graphdef"


def content_sha256(path: Path) -> str:
    """sha256 of a file, or of a directory's files in sorted relative-path order (path + content hash),
    so a copied or re-timestamped SavedModel keeps its hash and any changed byte changes it."""
    path = Path(path)
    if path.is_file():
        return sha256_file(path)
    digest = hashlib.sha256()
    for file in sorted((p for p in path.rglob("*") if p.is_file()), key=lambda p: p.relative_to(path).as_posix()):
        digest.update(file.relative_to(path).as_posix().encode())
        digest.update(b"\0")
        digest.update(sha256_file(file).encode())
        digest.update(b"\n")
    return digest.hexdigest()


_SHAPE_RE = re.compile(r"^(\[[^\]]*\]|[0-9?Nn-]+(x[0-9?Nn-]+)+|\?)$")


def parse_tensor_arg(text: str) -> tuple[str, Shape | None]:
    """``NAME`` or ``NAME:SHAPE`` → (name, shape or None).

    TF tensor names end in ``:0``, so a trailing ``:…`` is a shape only when it looks like one:
    ``1x128x128x3``, ``?x128x128x3`` (``?``, ``N`` or ``-1`` = dynamic) or ``[?,128,128,3]``.
    """
    text = text.strip()
    name, sep, tail = text.rpartition(":")
    if not sep or not _SHAPE_RE.match(tail):
        if not text:
            raise BadInput("empty tensor name in --inputs/--outputs")
        return text, None
    if not name:
        raise BadInput(f"{text!r}: tensor name missing before the shape")
    parts = tail.strip("[]").replace(",", "x").split("x") if tail != "?" else ["?"]
    dims: list[int | None] = []
    for part in parts:
        part = part.strip()
        if part in ("?", "N", "n", "-1"):
            dims.append(None)
        elif part.isdigit() and int(part) > 0:
            dims.append(int(part))
        else:
            raise BadInput(f"{text!r}: shape dims must be positive integers or ? (dynamic)")
    return name, tuple(dims)


def parse_tensor_list(text: str | None) -> list[tuple[str, Shape | None]]:
    """Comma-separated tensor args; commas inside ``[...]`` belong to a shape."""
    if not text:
        return []
    items, depth, current = [], 0, ""
    for char in text:
        if char == "[":
            depth += 1
        elif char == "]":
            depth -= 1
        if char == "," and depth == 0:
            items.append(current)
            current = ""
        else:
            current += char
    items.append(current)
    return [parse_tensor_arg(item) for item in items if item.strip()]


def _tf_tensor_name(name: str) -> str:
    """TF graph tensors are ``op:index``; users often type the op name alone."""
    return name if re.search(r":\d+$", name) else f"{name}:0"


# ----------------------------------------------------------------------------- TensorFlow access


def _import_tf() -> tuple[Any, Any]:
    """(tensorflow, tf2onnx), or MissingDependency naming the ``tf`` extra."""
    # TF's C++ logging writes banners to stderr at import; trtprof's errors must stay one line.
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    try:
        import tensorflow as tf
    except ImportError as err:
        raise MissingDependency("tensorflow", "tf", why="needed to convert TensorFlow models") from err
    try:
        import tf2onnx
        import tf2onnx.tf_loader  # noqa: F401  (submodule used below)
        # Draws a name from tf2onnx's counter when first imported, which would shift every name in
        # the first conversion of a process (see the counter reset in convert_tf): import it first.
        import tf2onnx.rewriter.loop_rewriter_base  # noqa: F401
    except ImportError as err:
        raise MissingDependency("tf2onnx", "tf", why="needed to convert TensorFlow models") from err
    return tf, tf2onnx


@contextlib.contextmanager
def quiet_logs() -> Iterator[None]:
    """tf2onnx and TF log warnings and errors for normal events (and errors we report ourselves);
    silence them for the conversion, then restore the levels."""
    loggers = [logging.getLogger(name) for name in ("tf2onnx", "tensorflow", "absl")]
    levels = [lg.level for lg in loggers]
    for lg in loggers:
        lg.setLevel(logging.CRITICAL)
    try:
        yield
    finally:
        for lg, level in zip(loggers, levels):
            lg.setLevel(level)


def _first_line(err: BaseException) -> str:
    lines = [line.strip() for line in str(err).strip().splitlines() if line.strip()]
    return (lines[0][:300] if lines else type(err).__name__)


Reference = Callable[[Mapping[str, np.ndarray], Sequence[str], Sequence[str]], list[np.ndarray]]


def _convert_keras(tf: Any, tf2onnx: Any, path: Path, opset: int | None, **_: Any) -> tuple[Any, Reference, list[str]]:
    import keras

    try:
        model = keras.models.load_model(str(path), compile=False)
    except Exception as err:
        raise BadModel(f"not a loadable Keras model ({type(err).__name__}: {_first_line(err)})", path=path) from err
    proto, _ = tf2onnx.convert.from_keras(model, opset=opset)

    def reference(feeds: Mapping[str, np.ndarray], onnx_inputs: Sequence[str], onnx_outputs: Sequence[str]) -> list[np.ndarray]:
        # from_keras keeps model.inputs / model.outputs order; Keras names are not the ONNX names.
        args = [tf.constant(feeds[name]) for name in onnx_inputs]
        result = model(args[0] if len(args) == 1 else args, training=False)
        return [np.asarray(t) for t in tf.nest.flatten(result)]

    return proto, reference, []


def _convert_savedmodel(
    tf: Any, tf2onnx: Any, path: Path, opset: int | None, signature: str | None = None, **_: Any
) -> tuple[Any, Reference, list[str]]:
    try:
        imported = tf.saved_model.load(str(path))
    except Exception as err:
        raise BadModel(f"not a loadable SavedModel ({type(err).__name__}: {_first_line(err)})", path=path) from err
    names = [s for s in imported.signatures.keys() if not s.startswith("_")]
    if not names:
        raise BadModel("SavedModel has no serving signature (export it with model.export(dir))", path=path)
    if signature is None:
        signature = "serving_default" if "serving_default" in names else names[0]
    elif signature not in names:
        raise BadInput(f"signature {signature!r} not in the SavedModel (has: {', '.join(names)})", path=path)
    graph_def, inputs, outputs, renames = tf2onnx.tf_loader.from_saved_model(
        str(path), None, None, tag=["serve"], signatures=[signature], return_tensors_to_rename=True
    )
    proto, _ = tf2onnx.convert.from_graph_def(
        graph_def, name=path.name, input_names=inputs, output_names=outputs, opset=opset, tensors_to_rename=renames
    )
    func = imported.signatures[signature]

    def reference(feeds: Mapping[str, np.ndarray], onnx_inputs: Sequence[str], onnx_outputs: Sequence[str]) -> list[np.ndarray]:
        # The ONNX names are the signature's structured names: feed and read by name.
        result = func(**{name: tf.constant(feeds[name]) for name in onnx_inputs})
        return [np.asarray(result[name]) for name in onnx_outputs]

    return proto, reference, []


def _convert_graphdef(
    tf: Any,
    tf2onnx: Any,
    path: Path,
    opset: int | None,
    inputs: Sequence[tuple[str, Shape | None]] = (),
    outputs: Sequence[tuple[str, Shape | None]] = (),
    **_: Any,
) -> tuple[Any, Reference, list[str]]:
    if not inputs or not outputs:
        raise BadInput("a frozen graph (.pb) has no signature: name its tensors with --inputs and --outputs (trtprof build: --tf-inputs and --tf-outputs)", path=path)
    in_names = [_tf_tensor_name(n) for n, _ in inputs]
    out_names = [_tf_tensor_name(n) for n, _ in outputs]
    graph_def = tf.compat.v1.GraphDef()
    try:
        graph_def.ParseFromString(path.read_bytes())
    except Exception as err:
        raise BadModel(f"not a frozen TensorFlow GraphDef ({type(err).__name__})", path=path) from err
    if not graph_def.node:
        raise BadModel("not a frozen TensorFlow GraphDef (no nodes)", path=path)
    ops = {node.name for node in graph_def.node}
    missing = [n for n in in_names + out_names if n.rsplit(":", 1)[0] not in ops]
    if missing:
        placeholders = [node.name for node in graph_def.node if node.op == "Placeholder"]
        raise BadInput(
            f"tensor(s) {', '.join(missing)} not in the graph (its placeholders: {', '.join(placeholders) or 'none'})",
            path=path,
        )
    frozen, in_names, out_names = tf2onnx.tf_loader.from_graphdef(str(path), in_names, out_names)
    shape_override = {
        _tf_tensor_name(n): list(shape) for n, shape in inputs if shape is not None
    }
    proto, _ = tf2onnx.convert.from_graph_def(
        frozen,
        name=path.stem,
        input_names=in_names,
        output_names=out_names,
        opset=opset,
        shape_override=shape_override or None,
    )

    def _import() -> None:
        tf.compat.v1.import_graph_def(graph_def, name="")

    wrapped = tf.compat.v1.wrap_function(_import, [])
    pruned = wrapped.prune(
        [wrapped.graph.get_tensor_by_name(n) for n in in_names],
        [wrapped.graph.get_tensor_by_name(n) for n in out_names],
    )

    def reference(feeds: Mapping[str, np.ndarray], onnx_inputs: Sequence[str], onnx_outputs: Sequence[str]) -> list[np.ndarray]:
        # No renames on this route: ONNX names are the TF tensor names.
        result = pruned(*[tf.constant(feeds[name]) for name in in_names])
        by_name = dict(zip(out_names, tf.nest.flatten(result)))
        return [np.asarray(by_name[name]) for name in onnx_outputs]

    return proto, reference, []


_ROUTES = {"keras": _convert_keras, "savedmodel": _convert_savedmodel, "graphdef": _convert_graphdef}


# ----------------------------------------------------------------------------- ONNX validation


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


def _validate(model: "onnx.ModelProto", path: Path) -> None:
    import onnx

    bad = unsupported_ops(model)
    if bad:
        raise BadModel(f"tf2onnx cannot convert TensorFlow op(s): {', '.join(bad)}", path=path)
    try:
        onnx.checker.check_model(model, full_check=True)  # full_check runs strict shape inference
    except Exception as err:
        raise BuildFailed(f"tf2onnx wrote an invalid ONNX model: {_first_line(err)}", path=path) from err


def _io(model: "onnx.ModelProto") -> tuple[tuple[tuple[str, tuple[Any, ...]], ...], tuple[tuple[str, tuple[Any, ...]], ...]]:
    from ..model import describe

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
    batch_size: int = CHECK_BATCH_SIZE,
    seed: int = CHECK_SEED,
    shapes: Mapping[str, tuple[int, ...]] | None = None,
    path: Path | None = None,
) -> CheckResult:
    """Run ONNX Runtime (CPU) and TensorFlow on the same seeded batch and compare every output."""
    from ..inputs import make_inputs, resolve_shapes
    from ..model import describe

    try:
        import onnxruntime as ort
    except ImportError as err:  # pragma: no cover - core dependency
        raise MissingDependency("onnxruntime", "onnxruntime") from err
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


# ----------------------------------------------------------------------------- the entry points


def _versions(tf: Any, tf2onnx: Any) -> dict[str, str]:
    import onnx

    import onnxruntime

    return {
        "tensorflow": tf.__version__,
        "tf2onnx": tf2onnx.__version__,
        "onnx": onnx.__version__,
        "onnxruntime": onnxruntime.__version__,
    }


def convert_tf(
    model: Path,
    output: Path,
    *,
    opset: int | None = None,
    inputs: Sequence[tuple[str, Shape | None]] | str | None = None,
    outputs: Sequence[tuple[str, Shape | None]] | str | None = None,
    signature: str | None = None,
    check: bool = True,
    atol: float = DEFAULT_ATOL,
    rtol: float = DEFAULT_RTOL,
    source_sha256: str | None = None,
) -> ConversionResult:
    """Convert ``model`` to ONNX at ``output``, validate it and (unless ``check=False``) compare it
    with TensorFlow. Raises BuildFailed when the check fails; the file is then not written."""
    model, output = Path(model), Path(output)
    fmt = detect_format(model)
    input_args = parse_tensor_list(inputs) if isinstance(inputs, str) else list(inputs or [])
    output_args = parse_tensor_list(outputs) if isinstance(outputs, str) else list(outputs or [])
    if fmt != "graphdef" and (input_args or output_args):
        raise BadInput("--inputs/--outputs are for frozen graphs (.pb); Keras and SavedModel carry their own signature", path=model)
    if fmt != "savedmodel" and signature:
        raise BadInput("--signature is for SavedModel directories", path=model)
    if opset is not None and opset < 7:
        raise BadInput(f"--opset {opset}: tf2onnx supports opset 7 and newer")
    if atol <= 0 or rtol < 0:
        raise BadInput("--atol must be > 0 and --rtol >= 0")
    tf, tf2onnx = _import_tf()
    sha = source_sha256 or content_sha256(model)
    with quiet_logs():
        # tf2onnx names inserted nodes, constants and dims from a process-wide counter: reset it, so
        # a model converts to the same bytes whatever was converted before it in this process.
        tf2onnx.utils.INTERNAL_NAME = 1
        started = time.perf_counter()
        try:
            proto, reference, notes = _ROUTES[fmt](
                tf, tf2onnx, model, opset, inputs=input_args, outputs=output_args, signature=signature
            )
        except (BadModel, BadInput, MissingDependency):
            raise
        except Exception as err:  # tf2onnx raises anything from ValueError to its own assertion errors
            raise BuildFailed(f"tf2onnx failed ({type(err).__name__}: {_first_line(err)})", path=model) from err
        convert_s = time.perf_counter() - started
        _validate(proto, model)
        notes = list(notes)
        in_io, out_io = _io(proto)
        for name, shape in in_io:
            if shape and isinstance(shape[0], int):
                notes.append(f"input {name!r} has a static batch dim {shape[0]} (make it dynamic with --inputs {name}:?x…)")
        result_check = None
        if check:
            overrides = {
                _tf_tensor_name(n): tuple(CHECK_BATCH_SIZE if d is None else d for d in s)
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
        versions=_versions(tf, tf2onnx),
        notes=tuple(notes),
    )


def _options_key(options: Mapping[str, Any]) -> str:
    """The options that change the ONNX file, canonically: part of the cache key."""
    relevant = {k: options.get(k) for k in ("opset", "inputs", "outputs", "signature")}
    return json.dumps(relevant, sort_keys=True, default=str)


def cache_entry(path: Path, cache_dir: Path, **options: Any) -> tuple[Path, Path, str]:
    """(onnx path, metadata path, source sha256) of ``path``'s entry in ``cache_dir``."""
    path = Path(path)
    sha = content_sha256(path)
    key = hashlib.sha256(f"{CONVERT_SCHEMA}\n{sha}\n{_options_key(options)}".encode()).hexdigest()
    stem_name = path.stem if path.is_file() else path.name
    base = f"{safe_stem(stem_name)}.tf.{key[:16]}"
    return Path(cache_dir) / f"{base}.onnx", Path(cache_dir) / f"{base}.json", sha


def convert_cached_result(path: Path, cache_dir: Path, *, check: bool = True, **options: Any) -> ConversionResult:
    """As ``convert_cached`` but returns the whole record (cached=True on a hit).

    A hit needs the ONNX file, its metadata and a matching sha256 of the ONNX; a hit that was made
    with ``--no-check`` is checked now when a check is asked for (that needs TensorFlow again)."""
    path, cache_dir = Path(path), Path(cache_dir)
    detect_format(path)
    onnx_path, meta_path, sha = cache_entry(path, cache_dir, **options)
    try:
        cache_dir.mkdir(parents=True, exist_ok=True)
    except OSError:
        pass  # a read-only engines dir: entry_lock below says so, after a read-only hit was tried

    def usable_hit() -> ConversionResult | None:
        hit = _read_hit(onnx_path, meta_path, sha)
        return hit if hit is not None and (hit.check is not None or not check) else None

    try:
        lock = entry_lock(cache_dir, onnx_path.stem)
        lock.__enter__()
    except CacheNotWritable:
        hit = usable_hit()  # read-only dir: a complete hit is still served
        if hit is not None:
            return hit
        raise
    try:  # the shape of EngineCache.get_or_build
        hit = usable_hit()
        if hit is not None:
            return hit
        result = convert_tf(path, onnx_path, check=check, source_sha256=sha, **options)
        data = result.to_json()
        data["onnx_sha256"] = sha256_file(onnx_path)
        atomic_write_text(meta_path, json.dumps(data, indent=2, sort_keys=True) + "\n")
        return result
    finally:
        lock.__exit__(None, None, None)


def _read_hit(onnx_path: Path, meta_path: Path, source_sha256: str) -> ConversionResult | None:
    if not onnx_path.is_file() or not meta_path.is_file():
        return None
    try:
        data = json.loads(meta_path.read_text())
        if (
            data.get("schema") != CONVERT_SCHEMA
            or data.get("source_sha256") != source_sha256
            or data.get("onnx_sha256") != sha256_file(onnx_path)
        ):
            return None  # stale or damaged: convert again, replacing it
        return ConversionResult.from_json(data, onnx_path)
    except (OSError, ValueError, KeyError, TypeError):
        return None


def convert_cached(path: Path, cache_dir: Path, *, check: bool = True, **options: Any) -> Path:
    """The ONNX file for TF model ``path``, converted once per content (see ``convert_cached_result``).
    Used by ``trtprof build`` so a TF model can be built like an ONNX one."""
    return convert_cached_result(path, cache_dir, check=check, **options).onnx_path
