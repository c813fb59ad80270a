"""What is inside a TensorRT engine: layers, their precision and tactic, reformat layers, and
per-layer times from a separate profiling run.

Why a separate run: attaching an ``IProfiler`` makes TensorRT time every layer and synchronize, which
slows inference; mixing that into the latency run would measure the profiler. ``profile_layers``
uses its own execution context and buffers and is never called by the timing loop.
"""
from __future__ import annotations

import json
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from types import ModuleType
from typing import TYPE_CHECKING, Any, Mapping

from ...errors import BadInput, CacheCorrupt, TrtprofError
from . import compat
from .tail_logger import LogTail, make_logger

if TYPE_CHECKING:
    import tensorrt as trt


@dataclass(frozen=True)
class LayerInfo:
    name: str
    type: str  # LayerType from the inspector ("CaskConvolution", "Reformat", ...); "" if unknown
    precision: str  # dtype of the first output ("fp16", "fp32", ...); "" if unknown
    tactic: str
    input_dtypes: tuple[str, ...] = ()
    output_dtypes: tuple[str, ...] = ()

    @property
    def is_reformat(self) -> bool:
        """Reformat/cast copies TensorRT inserted between layers of different formats or types."""
        return self.type.lower() in ("reformat", "reformatting") or self.name.startswith("Reformatting CopyNode")

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "type": self.type,
            "precision": self.precision,
            "tactic": self.tactic,
            "input_dtypes": list(self.input_dtypes),
            "output_dtypes": list(self.output_dtypes),
            "reformat": self.is_reformat,
        }


@dataclass(frozen=True)
class EngineInspection:
    layers: tuple[LayerInfo, ...]
    io_tensors: tuple[str, ...]
    raw: Mapping[str, Any] = field(default_factory=dict, compare=False, repr=False)

    def counts_by_precision(self) -> dict[str, int]:
        """Layers per precision (reformat layers included: they cost time too)."""
        counts = Counter(layer.precision or "unknown" for layer in self.layers)
        return dict(sorted(counts.items()))

    def reformat_layers(self) -> tuple[LayerInfo, ...]:
        return tuple(layer for layer in self.layers if layer.is_reformat)

    def to_json(self) -> dict[str, Any]:
        return {
            "io_tensors": list(self.io_tensors),
            "layers": [layer.to_json() for layer in self.layers],
            "counts_by_precision": self.counts_by_precision(),
            "reformat_layers": len(self.reformat_layers()),
        }


def parse_engine_information(text: str) -> EngineInspection:
    """Parse ``get_engine_information(JSON)`` output of TensorRT 8.6, 10.x or 11.x."""
    try:
        info = json.loads(text)
    except ValueError as err:
        raise CacheCorrupt(f"engine inspector returned no JSON ({err})") from err
    if not isinstance(info, dict):
        raise CacheCorrupt("engine inspector JSON is not an object")
    layers = []
    for entry in compat.layer_entries(info):
        if not isinstance(entry, Mapping):  # profiling verbosity below DETAILED: names only
            layers.append(LayerInfo(name=str(entry), type="", precision="", tactic=""))
            continue
        ins = tuple(compat.tensor_dtype(t) for t in entry.get("Inputs", []) if isinstance(t, Mapping))
        outs = tuple(compat.tensor_dtype(t) for t in entry.get("Outputs", []) if isinstance(t, Mapping))
        precision = next((d for d in outs if d), "") or next((d for d in ins if d), "")
        tactic = entry.get("TacticName") or entry.get("TacticValue") or ""
        layers.append(
            LayerInfo(
                name=str(entry.get("Name", "")),
                type=str(entry.get("LayerType", "")),
                precision=precision,
                tactic=str(tactic),
                input_dtypes=ins,
                output_dtypes=outs,
            )
        )
    return EngineInspection(layers=tuple(layers), io_tensors=tuple(compat.io_tensor_names(info)), raw=info)


def inspect_engine(
    engine: "trt.ICudaEngine", context: "trt.IExecutionContext | None" = None, module: ModuleType | None = None
) -> EngineInspection:
    """Inspector JSON of ``engine`` (shapes resolved when ``context`` has its input shapes set)."""
    mod = compat.tensorrt_module(module)
    inspector = engine.create_engine_inspector()
    if inspector is None:
        raise TrtprofError("TensorRT could not create an engine inspector for this engine")
    if context is not None:
        inspector.execution_context = context
    return parse_engine_information(inspector.get_engine_information(mod.LayerInformationFormat.JSON))


def deserialize(
    plan: bytes, tail: LogTail | None = None, lib: compat.Library = compat.TENSORRT
) -> tuple["trt.Runtime", "trt.ICudaEngine"]:
    """(runtime, engine); the runtime must outlive the engine, so both are returned.

    A None engine means the library refused the bytes: another version ("version tag does not
    match"), another GPU (TensorRT-RTX: "cannot run on this GPU"), no driver, or a damaged file; the
    log tail says which.
    """
    trt = compat.require_library(lib)
    tail = tail if tail is not None else LogTail()
    runtime = trt.Runtime(make_logger(tail, trt))
    engine = runtime.deserialize_cuda_engine(plan)
    if engine is None:
        raise CacheCorrupt(
            f"{lib.product} could not deserialize the engine ("
            + (tail.text(3) or "no message")
            + "); rebuild it with `trtprof build --rebuild`"
        )
    return runtime, engine


def inspect_plan(plan: bytes, lib: compat.Library = compat.TENSORRT) -> EngineInspection:
    runtime, engine = deserialize(plan, lib=lib)
    try:
        return inspect_engine(engine, module=compat.require_library(lib))
    finally:
        del engine, runtime


@dataclass(frozen=True)
class LayerTime:
    name: str
    median_ms: float
    mean_ms: float
    samples: int


@dataclass(frozen=True)
class LayerProfile:
    """Per-layer times from ``iterations`` profiled runs (TensorRT's own per-layer events)."""

    batch_size: int
    iterations: int
    layers: tuple[LayerTime, ...]

    @property
    def total_median_ms(self) -> float:
        return sum(layer.median_ms for layer in self.layers)

    def to_json(self) -> dict[str, Any]:
        return {
            "batch_size": self.batch_size,
            "iterations": self.iterations,
            "total_median_ms": self.total_median_ms,
            "layers": [
                {"name": t.name, "median_ms": t.median_ms, "mean_ms": t.mean_ms, "samples": t.samples} for t in self.layers
            ],
        }


def make_profiler(sink: dict[str, list[float]], module: ModuleType | None = None) -> "trt.IProfiler":
    """A ``trt.IProfiler`` that appends each layer's time to ``sink[layer_name]``."""
    mod = compat.tensorrt_module(module)

    def __init__(self: Any) -> None:
        mod.IProfiler.__init__(self)

    def report_layer_time(self: Any, layer_name: str, ms: float) -> None:
        sink[layer_name].append(float(ms))

    # type(): the base is the imported library's IProfiler (a value, not a name mypy can check)
    return type("RecordingProfiler", (mod.IProfiler,), {"__init__": __init__, "report_layer_time": report_layer_time})()


def summarize_layer_times(sink: Mapping[str, list[float]], order: list[str]) -> tuple[LayerTime, ...]:
    """Median and mean per layer, in engine order (layers TensorRT reported but did not list last)."""
    import numpy as np

    names = [n for n in order if n in sink] + [n for n in sink if n not in set(order)]
    return tuple(
        LayerTime(name=n, median_ms=float(np.median(sink[n])), mean_ms=float(np.mean(sink[n])), samples=len(sink[n]))
        for n in names
        if sink[n]
    )


def profile_layers(
    engine: "trt.ICudaEngine",
    input_shapes: Mapping[str, tuple[int, ...]],
    feeds: Mapping[str, Any],
    *,
    iterations: int,
    warmup: int = 3,
    module: ModuleType | None = None,
) -> LayerProfile:
    """Run ``iterations`` inferences on a fresh execution context with an IProfiler attached.

    Synchronous on purpose (the profiler reports at the end of each enqueue): these times are for
    finding the expensive layers, not for the latency numbers.
    """
    import numpy as np

    from ...system import cuda

    mod = compat.tensorrt_module(module)

    if iterations < 1:
        raise BadInput(f"--iterations must be at least 1, got {iterations}")
    from contextlib import ExitStack

    context = engine.create_execution_context()
    names = [engine.get_tensor_name(i) for i in range(engine.num_io_tensors)]
    inputs = [n for n in names if engine.get_tensor_mode(n) == mod.TensorIOMode.INPUT]
    for name in inputs:
        if not context.set_input_shape(name, tuple(input_shapes[name])):
            raise BadInput(f"input {name!r}: shape {tuple(input_shapes[name])} is outside the engine's profile")
    sink: dict[str, list[float]] = defaultdict(list)
    with ExitStack() as stack:
        stream = stack.enter_context(cuda.Stream())
        for name in names:
            shape = compat.dims_tuple(context.get_tensor_shape(name))
            dtype = np.dtype(mod.nptype(engine.get_tensor_dtype(name)))
            nbytes = max(1, int(np.prod(shape, dtype=np.int64)) * dtype.itemsize)
            buf = stack.enter_context(cuda.DeviceBuffer(nbytes))
            if name in feeds:
                host = stack.enter_context(cuda.PinnedHostBuffer(nbytes)).array(shape, dtype)
                host[...] = np.asarray(feeds[name], dtype=dtype)
                cuda.memcpy_htod_async(buf.ptr, host, stream)
            context.set_tensor_address(name, buf.ptr)
        stream.synchronize()
        for _ in range(warmup):
            context.execute_async_v3(stream.handle)
        stream.synchronize()
        context.profiler = make_profiler(sink, mod)
        for _ in range(iterations):
            if not context.execute_async_v3(stream.handle):
                raise TrtprofError("TensorRT execute_async_v3 failed during the layer profile run")
            stream.synchronize()
    order = [layer.name for layer in inspect_engine(engine, context, mod).layers]
    first = [shape for shape in input_shapes.values() if shape]
    batch = first[0][0] if first else 1
    del context
    return LayerProfile(batch_size=int(batch), iterations=iterations, layers=summarize_layer_times(sink, order))
