"""Loading and describing ONNX models: content hash, IO specs, and clear errors for bad files."""
from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from ..errors import BadModel, MissingDependency, first_line
from ..spec import TensorSpec

if TYPE_CHECKING:
    import onnx

_CHUNK = 1 << 20


def sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(_CHUNK), b""):
            digest.update(chunk)
    return digest.hexdigest()


def _import_onnx():
    try:
        import onnx
    except ImportError as err:  # pragma: no cover - onnx is a core dependency
        raise MissingDependency("onnx", None) from err
    return onnx


def _onnx_dtype_name(elem_type: int) -> str:
    onnx = _import_onnx()
    try:
        return str(onnx.helper.tensor_dtype_to_np_dtype(elem_type).name)
    except (KeyError, ValueError, TypeError):
        return f"onnx:{elem_type}"


def _value_info_spec(vi) -> TensorSpec:
    ttype = vi.type.tensor_type
    dims: list[int | str | None] = []
    for d in ttype.shape.dim:
        if d.HasField("dim_value") and d.dim_value > 0:
            dims.append(int(d.dim_value))
        elif d.HasField("dim_param") and d.dim_param:
            dims.append(d.dim_param)
        else:
            dims.append(None)
    return TensorSpec(name=vi.name, dtype=_onnx_dtype_name(ttype.elem_type), shape=tuple(dims))


@dataclass(frozen=True)
class ModelInfo:
    path: Path
    sha256: str
    inputs: tuple[TensorSpec, ...]
    outputs: tuple[TensorSpec, ...]

    @property
    def stem(self) -> str:
        return self.path.stem if self.path.is_file() else self.path.name


def load_onnx(path: Path, content: bytes | None = None, *, weights: bool = True) -> "onnx.ModelProto":
    """Parse ``path`` as ONNX (``content``: its bytes, already read), turning every way it can be wrong
    into one ``BadModel`` line. ``weights=False``: the graph only, not the external-data files beside it
    (a sweep checks every model before its first cell without holding their weights)."""
    path = Path(path)
    if not path.exists():
        raise BadModel("no such file", path=path)
    if path.is_dir():
        raise BadModel("is a directory, not an ONNX file (TensorFlow SavedModel? see `trtprof convert`)", path=path)
    if (path.stat().st_size if content is None else len(content)) == 0:
        raise BadModel("file is empty", path=path)
    onnx = _import_onnx()
    try:
        if content is None:
            model = onnx.load(str(path), load_external_data=weights)
        else:  # what onnx.load does with the file's bytes: parse, then the weights stored beside it
            model = onnx.load_model_from_string(content)
            if weights:
                onnx.external_data_helper.load_external_data_for_model(model, str(path.parent))
    except Exception as err:  # onnx raises DecodeError, ValueError, OSError... depending on the damage
        raise BadModel(f"not a readable ONNX model: truncated, damaged or another format ({type(err).__name__}: "
                       f"{first_line(err)})", path=path) from err
    if not model.graph.node and not model.graph.output:
        raise BadModel("not an ONNX model (no graph: empty, truncated or another format)", path=path)
    try:
        onnx.checker.check_model(model)
    except Exception as err:
        raise BadModel(f"invalid ONNX model: {first_line(err)}", path=path) from err
    return model


def describe(model: "onnx.ModelProto", path: Path, sha256: str | None = None) -> ModelInfo:
    initializers = {init.name for init in model.graph.initializer}
    inputs = tuple(_value_info_spec(vi) for vi in model.graph.input if vi.name not in initializers)
    outputs = tuple(_value_info_spec(vi) for vi in model.graph.output)
    return ModelInfo(path=Path(path), sha256=sha256 or sha256_file(Path(path)), inputs=inputs, outputs=outputs)


def inspect_model(path: Path) -> ModelInfo:
    """Load, check and describe an ONNX file."""
    model = load_onnx(Path(path))
    return describe(model, Path(path))


def model_fixed_batch(path: "Path | OnnxModel") -> int | None:
    """The batch size an ONNX file's inputs fix (``inputs.fixed_batch``), read without its weights; None for
    a dynamic batch and for anything that is not a readable ONNX file (the command's own checks then say
    what is wrong with it, in its words). An ``OnnxModel`` already read: its inputs', not read again (None
    for a TensorFlow model's conversion, as for that model's file)."""
    from .inputs import fixed_batch

    if isinstance(path, OnnxModel):
        onnx_file = path.origin is None and path.path.suffix.lower() == ".onnx"
        return fixed_batch(path.inputs) if onnx_file else None
    path = Path(path)
    if path.suffix.lower() != ".onnx" or not path.is_file():
        return None
    try:
        model = _import_onnx().load(str(path), load_external_data=False)
    except Exception:  # noqa: BLE001 - unreadable: the build's load says why, in one line
        return None
    initializers = {init.name for init in model.graph.initializer}
    return fixed_batch([_value_info_spec(vi) for vi in model.graph.input if vi.name not in initializers])


@dataclass(frozen=True, eq=False)
class OnnxModel:
    """One ONNX model read once: its path, content hash, parsed graph and input/output specs, handed to
    the build, the accuracy pass, the FP16 range analysis and the per-layer graph facts so that none of
    them reads the file again (issue 32: compare read it four times, the graph facts once per batch size).
    Treat ``proto`` as read-only: a consumer that changes a graph copies it first.

    The one type a model travels as through build, compare, profile and fix-fp16, under the parameter
    name ``model`` (issue 41): the user's path becomes one once, at the edge (``builder.pipeline.open_model``
    before a build, ``load_model`` beneath it, which converts a TensorFlow model first, or ``as_model``); a
    changed copy becomes one as it is written (``save``); a parameter named ``path`` is the user's file."""

    path: Path
    sha256: str
    proto: "onnx.ModelProto"
    info: ModelInfo
    origin: Path | None = None  # the user's file it was converted from (TensorFlow); None: ``path`` itself

    @classmethod
    def load(cls, path: Path) -> "OnnxModel":
        """Read, check, hash and describe ``path`` (one ``BadModel`` line for every way it is wrong)."""
        path = Path(path)
        try:
            content = path.read_bytes() if path.is_file() else None  # load_onnx names what else it is
        except OSError as err:  # /proc/self/mem is a "regular file" whose read fails (EIO)
            raise BadModel(f"cannot read the model ({err.strerror or err})", path=path) from err
        proto = load_onnx(path, content)
        info = describe(proto, path, sha256=hashlib.sha256(content or b"").hexdigest())
        return cls(path=path, sha256=info.sha256, proto=proto, info=info)

    @classmethod
    def save(cls, proto: "onnx.ModelProto", path: Path) -> "OnnxModel":
        """Write ``proto`` to ``path`` (the bytes ``onnx.save`` writes) and return it as the ``OnnxModel``
        ``load`` would read back, hashed and described from memory: a changed copy (a what-if's) is built
        from the graph that made it, not read again. ``proto`` is the copy's from then on (read-only)."""
        path = Path(path)
        content = proto.SerializeToString()
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(content)
        info = describe(proto, path, sha256=hashlib.sha256(content).hexdigest())
        return cls(path=path, sha256=info.sha256, proto=proto, info=info)

    def copy_proto(self) -> "onnx.ModelProto":
        """A copy of the graph for a consumer that changes it (``proto`` itself stays as read)."""
        proto = type(self.proto)()
        proto.CopyFrom(self.proto)
        return proto

    @property
    def user_path(self) -> Path:
        """The file the user named: the TensorFlow model it was converted from, else the ONNX file."""
        return self.origin if self.origin is not None else self.path

    @property
    def inputs(self) -> tuple[TensorSpec, ...]:
        return self.info.inputs

    @property
    def outputs(self) -> tuple[TensorSpec, ...]:
        return self.info.outputs


def as_model(model: "OnnxModel | Path | str | None") -> "OnnxModel | None":
    """``model`` when it is already loaded, else the file at that path read once (None stays None)."""
    if model is None or isinstance(model, OnnxModel):
        return model
    return OnnxModel.load(Path(model))
