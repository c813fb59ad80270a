"""The Backend and Runner protocols every backend implements.

A backend builds an artifact from an ONNX file and loads it into a runner. Runners never time
themselves: ``trtprof.measure.timing`` owns warmup, stopping, buffers, streams and events, so every backend
is measured by the same loop (a backend that timed its own ``infer`` around copies and syncs is the
classic source of "Python is 3x slower than trtexec").
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, Mapping, Protocol, runtime_checkable

from ..spec import BuildSpec, Precision, TensorSpec

if TYPE_CHECKING:
    import numpy as np

    from ..engines.cache import EngineRecord

DeviceKind = Literal["cpu", "cuda"]


@dataclass(frozen=True)
class Availability:
    ok: bool
    reason: str = ""  # why not, and what to install

    def __bool__(self) -> bool:
        return self.ok


@dataclass
class BuildReport:
    """What a backend says about an artifact it just wrote.

    ``metadata`` lands in the engine's JSON (e.g. how many nodes really run in FP16); ``notes`` are
    printed after the build line, one per line, and kept in the metadata too.
    """

    metadata: dict[str, Any] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)


@runtime_checkable
class Runner(Protocol):
    """A loaded engine.

    ``device`` selects the timing loop: "cpu" runners are timed around ``infer`` with a host clock;
    "cuda" runners are timed with CUDA events around ``enqueue`` on the profiler's stream.
    """

    device: DeviceKind
    inputs: tuple[TensorSpec, ...]
    outputs: tuple[TensorSpec, ...]

    def infer(self, feeds: Mapping[str, "np.ndarray"]) -> dict[str, "np.ndarray"]:
        """Synchronous host-in/host-out inference (correctness path; host loop times this)."""
        ...

    def close(self) -> None: ...


class DeviceRunner(Runner, Protocol):
    """A runner whose work is enqueued on a CUDA stream and reads/writes profiler-owned buffers."""

    def prepare(self, input_shapes: Mapping[str, tuple[int, ...]]) -> dict[str, tuple[int, ...]]:
        """Fix input shapes for the coming runs; return every output's concrete shape."""
        ...

    def enqueue(self, buffers: Mapping[str, int], stream: int) -> None:
        """Enqueue one inference on ``stream`` (a cudaStream_t as int); never synchronize.

        ``buffers`` maps every input and output name to a device pointer owned by the profiler,
        sized for the shapes given to ``prepare``.
        """
        ...

    # Optional: ``bind(buffers, stream)`` — a context manager entered once per measurement that
    # yields a zero-argument launch equivalent to ``enqueue(buffers, stream)``. ``time_device`` uses
    # it when present: a runner whose per-call setup (stream/context managers) costs tens of µs of
    # host time would otherwise have that time measured as the model's, while the GPU waits.


def set_autotune(runner: Any, enabled: bool) -> bool | None:
    """Switch a runner's kernel autotuning (cuDNN benchmark mode on torch) and return what it now
    does; None for runners without the setting (ONNX Runtime CPU, TensorRT, which always times its
    tactics at build time). Callers record the returned value in their results' ``config``."""
    if not hasattr(runner, "autotune"):
        return None
    runner.autotune = bool(enabled)
    return bool(runner.autotune)


class Backend(Protocol):
    name: str
    artifact_suffix: str  # e.g. ".onnx", ".plan"

    def available(self) -> Availability:
        """Cheap check (importlib.util.find_spec, device count); never imports the heavy package."""
        ...

    def check_precision(self, precision: Precision) -> None:
        """Raise UnsupportedPrecision when this backend cannot honour ``precision`` here."""
        ...

    def environment(self) -> dict[str, Any]:
        """Backend version and device identity: part of every cache key."""
        ...

    def build(self, model: Path, spec: BuildSpec, out: Path) -> BuildReport:
        """Write the artifact for ``spec`` to ``out`` (a temp path the cache renames into place).
        Backends that take int8/fp8 also accept ``calibration=`` (a list of feed dicts, made by
        build_engines from --inputs or seeded random inputs as the spec's options say)."""
        ...

    def load(self, artifact: Path, record: "EngineRecord") -> Runner: ...
