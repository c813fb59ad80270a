"""TensorRT layers in the common table: ``IProfiler`` times joined with the engine inspector.

TensorRT reports fused layers (``conv1 + relu1``) and the reformat layers it inserted between
precisions/formats; the inspector gives each layer's type and tactic (the kernel). The tactic name
stands in for the kernel list (one kernel per layer), flagged for tensor cores like any kernel name.
Contract-tested with fakes here: no TensorRT runtime on these machines can run a plan (FACTS.md).
"""
from __future__ import annotations

from typing import Any, Mapping

from .kernels import uses_tensor_cores
from .table import REFORMAT, KernelTime, LayerTiming, PrecisionProfile, kind_of

SOURCE = "TensorRT IProfiler (per-layer times, synchronous run) + engine inspector (types, tactics)"


def from_tensorrt(layer_profile: Any, inspection: Any, precision: str, *, backend: str) -> PrecisionProfile:
    """``backends.tensorrt.inspect.LayerProfile`` + ``EngineInspection`` → a PrecisionProfile labelled ``backend``
    (the engine record's)."""
    info: Mapping[str, Any] = {layer.name: layer for layer in getattr(inspection, "layers", ())}
    layers = []
    for t in layer_profile.layers:
        li = info.get(t.name)
        op = str(getattr(li, "type", "") or "")
        tactic = str(getattr(li, "tactic", "") or "")
        kind = REFORMAT if li is not None and li.is_reformat else kind_of(op, t.name)
        kernels = (KernelTime(name=tactic, median_ms=float(t.median_ms), calls=1,
                              tensor_core=uses_tensor_cores(tactic)),) if tactic else ()
        layers.append(LayerTiming(name=t.name, op_type=op, kind=kind, median_ms=float(t.median_ms), kernels=kernels))
    return PrecisionProfile(precision=precision, backend=backend, source=SOURCE,
                            batch_size=int(layer_profile.batch_size), iterations=int(layer_profile.iterations),
                            layers=tuple(layers), iteration_total_ms=None)


def profile_tensorrt(runner: Any, input_shapes: Mapping[str, tuple[int, ...]], feeds: Mapping[str, Any],
                     precision: str, *, iterations: int, backend: str) -> PrecisionProfile:
    runner.prepare(input_shapes)
    layer_profile = runner.profile_layers(input_shapes, feeds, iterations)
    return from_tensorrt(layer_profile, runner.inspect(), precision, backend=backend)
