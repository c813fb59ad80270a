"""Every difference between the TensorRT libraries trtprof drives, in one place.

Two products share one Python API shape: enterprise **TensorRT** (``import tensorrt``; 8.6, 10.x, 11.x)
and **TensorRT for RTX** (``import tensorrt_rtx``; 1.x: ahead-of-time build on any machine, kernels
compiled just in time on the user's RTX GPU). Their version numbers are unrelated (TensorRT-RTX 1.7 is
newer than TensorRT 10), so behaviour is chosen by *library* and by *feature probing* on the imported
module (``hasattr``), never by comparing versions across the two lines. Everything here is a plain
function of the module or of the data TensorRT returned, so contract tests can drive each branch with
a fake module.

Sources: NVIDIA's "Migrating from TensorRT 10.x to 11.x" pages, the 8.x → 10.x appendix, the
TensorRT-RTX 1.x API reference, and what ``tensorrt_rtx`` 1.7.1 really did on a CPU-only machine
(FACTS.md).
"""
from __future__ import annotations

import importlib
import re
from dataclasses import dataclass
from types import ModuleType
from typing import Any, Mapping, Sequence

from ...errors import MissingDependency


@dataclass(frozen=True)
class Library:
    """One TensorRT product: its import name, what users call it, its extra, its oldest usable version."""

    module_name: str
    product: str
    extra: str
    min_version: tuple[int, ...]
    # (class, attribute) pairs that must exist: the version gate alone cannot see a stripped build
    required: tuple[tuple[str, str], ...] = ()

    def version_text(self, version: str) -> str:
        return f"{self.product} {version}"


# TensorRT 8.6 is the oldest line with everything used here: execute_async_v3 / set_input_shape /
# set_tensor_address (8.5), builder_optimization_level and the engine inspector (8.6).
TENSORRT = Library("tensorrt", "TensorRT", "tensorrt", (8, 6))
# TensorRT-RTX: what trtprof uses exists in 1.x (checked against 1.7.1 for real); the probes name a
# missing piece instead of failing later with an AttributeError.
TENSORRT_RTX = Library(
    "tensorrt_rtx", "TensorRT-RTX", "tensorrt-rtx", (1, 0),
    required=(("IBuilderConfig", "set_compute_capability"), ("ICudaEngine", "create_runtime_config"),
              ("IRuntimeConfig", "create_runtime_cache"), ("ComputeCapability", "SM86")),
)


def library_of(trt: ModuleType) -> Library:
    """Which product an imported module is (by its name, which the fake sets too)."""
    return TENSORRT_RTX if getattr(trt, "__name__", "") == TENSORRT_RTX.module_name else TENSORRT


def require_library(lib: Library = TENSORRT) -> ModuleType:
    """Import ``lib`` or raise MissingDependency naming its extra (never a bare ImportError)."""
    try:
        module = importlib.import_module(lib.module_name)
    except ImportError as err:
        raise MissingDependency(lib.module_name, lib.extra, why=f"needed for the {lib.product} backend") from err
    if not hasattr(module, "__version__"):  # e.g. tensorrt-stubs installed into the environment
        raise MissingDependency(
            lib.module_name, lib.extra,
            why=f"the importable '{lib.module_name}' ({getattr(module, '__path__', '?')}) is not {lib.product}",
        )
    version = parse_version(module.__version__)
    wanted = ".".join(map(str, lib.min_version))
    if version[: len(lib.min_version)] < lib.min_version:
        raise MissingDependency(
            f"{lib.product} >= {wanted}", lib.extra,
            why=f"found {lib.version_text(module.__version__)}, older than {lib.product} {wanted}",
        )
    missing = [f"{cls}.{attr}" for cls, attr in lib.required if not hasattr(getattr(module, cls, None), attr)]
    if missing:
        raise MissingDependency(
            f"a newer {lib.product}", lib.extra,
            why=f"{lib.version_text(module.__version__)} lacks {', '.join(missing)}",
        )
    return module


def tensorrt_module(module: ModuleType | None) -> Any:
    """``module`` (``tensorrt`` or ``tensorrt_rtx``, as the caller loaded it), else ``tensorrt``.

    Typed ``Any`` on purpose: the two libraries are two modules with one API shape, and a variable can
    not be annotated as "the tensorrt module"."""
    return module if module is not None else importlib.import_module(TENSORRT.module_name)


def require_tensorrt() -> ModuleType:
    """Import enterprise TensorRT (see ``require_library``)."""
    return require_library(TENSORRT)


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
    """What the imported library supports, probed on the module itself (not read from its version)."""

    version: tuple[int, ...]
    product: str = TENSORRT.product
    fp16_builder_flag: bool = False  # BuilderFlag.FP16 exists: weak typing (TensorRT < 11)
    explicit_batch_flag: bool = False  # implicit batch still exists (8.x): ask for explicit batch
    compute_capability_targets: bool = False  # IBuilderConfig.set_compute_capability (TensorRT-RTX)
    timing_cache: bool = True  # TensorRT-RTX: deprecated no-ops, so never used
    runtime_cache: bool = False  # IRuntimeConfig.create_runtime_cache: JIT kernels cached (TensorRT-RTX)

    @classmethod
    def of(cls, trt: ModuleType) -> "TrtFeatures":
        lib = library_of(trt)
        version = parse_version(getattr(trt, "__version__", "0"))
        flags = getattr(trt, "NetworkDefinitionCreationFlag", None)
        # 8.x: implicit batch is the default (Builder.max_batch_size still exists) and cannot carry a
        # batch profile; 10.x removed both, and passing EXPLICIT_BATCH there is a deprecated no-op. The
        # version test stays inside enterprise TensorRT's own line, as a second guard on the probe.
        implicit_batch = hasattr(getattr(trt, "Builder", None), "max_batch_size") or (lib is TENSORRT and version[0] < 10)
        return cls(
            version=version,
            product=lib.product,
            fp16_builder_flag=hasattr(getattr(trt, "BuilderFlag", None), "FP16"),
            explicit_batch_flag=hasattr(flags, "EXPLICIT_BATCH") and implicit_batch,
            compute_capability_targets=hasattr(getattr(trt, "IBuilderConfig", None), "set_compute_capability"),
            timing_cache=lib is not TENSORRT_RTX,
            runtime_cache=hasattr(getattr(trt, "IRuntimeConfig", None), "create_runtime_cache"),
        )

    @property
    def strongly_typed_only(self) -> bool:
        """No BuilderFlag.FP16 (TensorRT ≥ 11, TensorRT-RTX): precision comes from the graph's types."""
        return not self.fp16_builder_flag

    @property
    def version_text(self) -> str:
        return f"{self.product} {'.'.join(map(str, self.version))}"


def network_flags(trt: ModuleType, features: TrtFeatures) -> int:
    """Flags for ``builder.create_network``.

    8.6: 1 << EXPLICIT_BATCH (implicit batch is the default there and cannot carry a batch profile).
    10.x / 11.x / TensorRT-RTX: 0 (explicit batch is the only mode; TensorRT-RTX has no EXPLICIT_BATCH
    member at all and refuses unknown bits, and every network there is strongly typed).
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


def serialized_size(cache: Any) -> int:
    """Bytes of a timing cache's or runtime cache's ``serialize()``; 0 when it will not serialize (a
    cache TensorRT would not serialize is as good as none)."""
    try:
        return len(memoryview(cache.serialize()))
    except Exception:
        return 0


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
    for key in ("DataType", "Datatype"):  # TensorRT 11 split field; TensorRT-RTX 1.7 spells it "Datatype"
        if key in entry:  # (in its builder's layer log; its inspector JSON could not be run here)
            return _DTYPE_NAMES.get(str(entry[key]).strip().lower(), str(entry[key]).lower())
    text = str(entry.get("Format/Datatype", ""))
    match = _FORMAT_TOKENS.search(text)
    if not match:
        return ""
    return _DTYPE_NAMES.get(match.group(1).lower(), match.group(1).lower())


def layer_entries(info: Mapping[str, Any]) -> Sequence[Any]:
    """The "Layers" list; entries are dicts with DETAILED verbosity, bare names otherwise."""
    layers = info.get("Layers", [])
    return layers if isinstance(layers, list) else []
