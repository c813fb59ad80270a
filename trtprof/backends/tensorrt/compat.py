"""Every difference between TensorRT 8.6, 10.x and 11.x that trtprof cares about, in one place.

Why one module: the three lines differ in a handful of spots (network creation flags, how FP16 is
asked for, parser error fields, the engine-inspector JSON), and scattered ``if major >= 11`` tests
are how version bugs hide. Everything here is a plain function of the version or of the data
TensorRT returned, so the contract tests can drive each branch with a fake module.

Sources: NVIDIA's "Migrating from TensorRT 10.x to 11.x" pages (Python API, removed APIs,
IEngineInspector JSON output) and the 8.x → 10.x appendix.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from types import ModuleType
from typing import Any, Mapping, Sequence

from ...errors import MissingDependency

# TensorRT 8.6 is the oldest line with everything used here: execute_async_v3 / set_input_shape /
# set_tensor_address (8.5), builder_optimization_level and the engine inspector (8.6).
MIN_VERSION = (8, 6)
EXTRA = "tensorrt"


def require_tensorrt() -> ModuleType:
    """Import tensorrt or raise MissingDependency naming the extra (never a bare ImportError)."""
    try:
        import tensorrt
    except ImportError as err:
        raise MissingDependency("tensorrt", EXTRA, why="needed for the TensorRT backend") from err
    if not hasattr(tensorrt, "__version__"):  # e.g. tensorrt-stubs installed into the environment
        raise MissingDependency(
            "tensorrt", EXTRA, why=f"the importable 'tensorrt' ({getattr(tensorrt, '__path__', '?')}) is not TensorRT"
        )
    version = parse_version(tensorrt.__version__)
    if version[:2] < MIN_VERSION:
        raise MissingDependency(
            "tensorrt>=8.6", EXTRA, why=f"found TensorRT {tensorrt.__version__}, too old"
        )
    return tensorrt


def parse_version(text: str) -> tuple[int, ...]:
    """``"10.13.0.35"`` → (10, 13, 0, 35); non-numeric tails (``"11.0.0b1"``) are dropped."""
    parts = []
    for piece in str(text).split("."):
        match = re.match(r"\d+", piece)
        if not match:
            break
        parts.append(int(match.group()))
    return tuple(parts) or (0,)


@dataclass(frozen=True)
class TrtFeatures:
    """What the installed TensorRT line supports, derived from its version alone."""

    version: tuple[int, ...]

    @classmethod
    def of(cls, trt: ModuleType) -> "TrtFeatures":
        return cls(parse_version(getattr(trt, "__version__", "0")))

    @property
    def major(self) -> int:
        return self.version[0]

    @property
    def fp16_builder_flag(self) -> bool:
        """TensorRT < 11 enables FP16 kernels with BuilderFlag.FP16 (weak typing)."""
        return self.major < 11

    @property
    def strongly_typed_only(self) -> bool:
        """TensorRT ≥ 11 removed weak typing: precision comes from the graph's types."""
        return self.major >= 11

    @property
    def explicit_batch_flag(self) -> bool:
        """8.x must ask for explicit batch; 10.x made it the only mode and 0 is the flag value."""
        return self.major < 10

    @property
    def precision_constraint_flags(self) -> bool:
        """OBEY/PREFER_PRECISION_CONSTRAINTS exist only with weak typing (< 11)."""
        return self.major < 11


def network_flags(trt: ModuleType, features: TrtFeatures) -> int:
    """Flags for ``builder.create_network``.

    8.6: 1 << EXPLICIT_BATCH (implicit batch is the default there and cannot carry a batch profile).
    10.x: 0 (explicit batch is the only mode; the flag is deprecated).
    11.x: 0 (every network is strongly typed; STRONGLY_TYPED is accepted but ignored).
    """
    if features.explicit_batch_flag:
        return 1 << int(trt.NetworkDefinitionCreationFlag.EXPLICIT_BATCH)
    return 0


def dims_tuple(dims: Any) -> tuple[int, ...]:
    """A ``trt.Dims`` as a tuple of ints (-1 = dynamic). Indexing works on every version."""
    return tuple(int(dims[i]) for i in range(len(dims)))


def builder_flag(trt: ModuleType, name: str) -> Any | None:
    """``trt.BuilderFlag.<name>`` or None where this version removed it (FP16 etc. on 11)."""
    return getattr(trt.BuilderFlag, name, None)


def parser_errors(parser: Any) -> list[str]:
    """Every ONNX parser error as one line: node name (or index), operator, description.

    ``node_name``/``node_operator`` exist from TensorRT 10; 8.6 only has the node index.
    """
    lines = []
    for i in range(int(parser.num_errors)):
        err = parser.get_error(i)
        desc = str(err.desc()).strip()
        node = _call_or_none(err, "node_name")
        op = _call_or_none(err, "node_operator")
        if not node:
            index = _call_or_none(err, "node")
            node = f"node #{index}" if index is not None and int(index) >= 0 else ""
        where = f"{node} ({op})" if node and op else (node or op or "")
        lines.append(f"{where}: {desc}" if where else desc)
    return lines


def _call_or_none(obj: Any, name: str) -> Any:
    method = getattr(obj, name, None)
    if method is None:
        return None
    try:
        return method()
    except Exception:  # an accessor missing in this version's binding: treat as absent
        return None


# ---- engine inspector JSON -------------------------------------------------------------------
# TensorRT 8.6/10.x: top-level "Bindings": ["in", "out"]; every layer input/output has one field
# "Format/Datatype": "Row major linear FP16 format". TensorRT 11: "I/O Tensors": [{"Name", "IOMode",
# "DataType", ...}] and the field split into "Format" and "DataType".

_DTYPE_NAMES = {
    "float": "fp32",
    "fp32": "fp32",
    "half": "fp16",
    "fp16": "fp16",
    "bfloat16": "bf16",
    "bf16": "bf16",
    "int8": "int8",
    "fp8": "fp8",
    "int32": "int32",
    "int64": "int64",
    "bool": "bool",
    "uint8": "uint8",
    "int4": "int4",
    "fp4": "fp4",
    "tf32": "tf32",
}
_FORMAT_TOKENS = re.compile(r"\b(FP32|FP16|BF16|BFloat16|Int8|INT8|FP8|Int32|INT32|Int64|INT64|Bool|BOOL|UInt8|UINT8|Half|Float)\b")


def io_tensor_names(info: Mapping[str, Any]) -> list[str]:
    """Names of the engine's I/O tensors from ``get_engine_information`` JSON, either schema."""
    if "I/O Tensors" in info:
        return [str(t.get("Name", "")) for t in info["I/O Tensors"] if isinstance(t, Mapping)]
    return [str(name) for name in info.get("Bindings", [])]


def tensor_dtype(entry: Mapping[str, Any]) -> str:
    """Short dtype name ("fp16", "fp32", "int8", …) of one layer input/output entry, or "" unknown."""
    if "DataType" in entry:  # TensorRT 11 split field
        return _DTYPE_NAMES.get(str(entry["DataType"]).strip().lower(), str(entry["DataType"]).lower())
    text = str(entry.get("Format/Datatype", ""))
    match = _FORMAT_TOKENS.search(text)
    if not match:
        return ""
    return _DTYPE_NAMES.get(match.group(1).lower(), match.group(1).lower())


def tensor_format(entry: Mapping[str, Any]) -> str:
    """The memory-format part of an entry ("Row major linear FP16 format" on 10.x)."""
    return str(entry.get("Format", entry.get("Format/Datatype", "")))


def layer_entries(info: Mapping[str, Any]) -> Sequence[Any]:
    """The "Layers" list; entries are dicts with DETAILED verbosity, bare names otherwise."""
    layers = info.get("Layers", [])
    return layers if isinstance(layers, list) else []
