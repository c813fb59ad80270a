"""The TensorRT-RTX backend (``--backend tensorrt-rtx``, ``import tensorrt_rtx``).

TensorRT for RTX splits TensorRT's build in two: an ahead-of-time build that needs **no GPU** (any
machine, a CI or build server: this is where ``trtprof build`` runs) and a just-in-time compilation of
the kernels for the user's GPU when an execution context is created (and, for dynamic shapes, when a
new shape first runs). So:

- ``build`` works everywhere the package installs; the plan targets the library's portable default or
  the ``--compute-capability`` list, which is part of the cache key and the metadata.
- ``bench``/``compare`` need a GPU the plan targets; anywhere else they stop with one line naming this
  GPU's compute capability (or "no GPU") and the ones the engine runs on.
- The JIT is measured and reported on its own (``jit_ms`` for the context, a first inference per
  shape), before and outside the latency distribution; compiled kernels go to a runtime cache file in
  the engines dir, and whether it was a hit is recorded.

The runtime half has not run where this was written (no RTX-class GPU there; the H200 it could use is
compute capability 9.0, which TensorRT-RTX refuses): it follows NVIDIA's TensorRT-RTX 1.x API.
"""
from __future__ import annotations

import importlib.util
import time
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any, Mapping

from ...errors import IncompatibleEngine, UnsupportedPrecision
from ...spec import BuildSpec, Precision
from ..base import Availability, BackendBase, BuildReport, Capabilities
from . import device as _device
from . import targets
from .compat import TENSORRT_RTX, require_library, serialized_size
from .runner import TensorRTRunner
from .tail_logger import LogTail

if TYPE_CHECKING:
    import tensorrt as trt

    from ...engines.cache import EngineRecord

NOT_INSTALLED = "tensorrt_rtx not installed: pip install 'trtprof[tensorrt-rtx]'"
# GPUs the TensorRT-RTX 1.7 runtime runs on (its ComputeCapability targets SM75…SM121, and ">12.0"
# in its own refusal message); anything else (e.g. data-center 9.0) is refused by the library.
RUNTIME_CCS = ("7.5", "8.0", "8.6", "8.9", "12.0", "12.1")
RUNTIME_CACHE_SUFFIX = ".rtxcache"


def rtx_installed() -> bool:
    """True when a real ``tensorrt_rtx`` package is importable, without importing it."""
    try:
        spec = importlib.util.find_spec(TENSORRT_RTX.module_name)
    except (ImportError, ValueError):
        return False
    return spec is not None and spec.origin not in (None, "namespace")


def runtime_supports(gpu: _device.DeviceInfo) -> bool:
    return gpu.compute_capability in RUNTIME_CCS or targets.newer_than_default(gpu)


class TensorRTRTXBackend(BackendBase):
    name = "tensorrt-rtx"
    artifact_suffix = ".plan"
    # no per-layer profiler wired for its runtime here (it cannot run on these machines; never run)
    capabilities = Capabilities(device="cuda", tensorrt_plan=True, runtime_cache=True, extra="tensorrt-rtx")

    def installed(self) -> Availability:
        return Availability(True) if rtx_installed() else Availability(False, NOT_INSTALLED)

    def buildable(self) -> Availability:
        """Building needs only the package (ahead-of-time build, no GPU)."""
        return self.installed()

    def available(self) -> Availability:
        """Can *run* here: the package and a GPU the TensorRT-RTX runtime supports (what ``auto`` asks)."""
        if not rtx_installed():
            return Availability(False, NOT_INSTALLED)
        info = _device.query_device(0)
        if info is None:
            return Availability(False, _device.device_count()[1] or "no CUDA GPU")
        if not runtime_supports(info):
            return Availability(False, f"{info.name} has compute capability {info.compute_capability}, which the "
                                       f"TensorRT-RTX runtime does not run ({', '.join(RUNTIME_CCS)}, "
                                       f">{targets.DEFAULT_SUPPORTS_NEWER_THAN})")
        return Availability(True)

    def check_precision(self, precision: Precision) -> None:
        """Every precision but bf16 builds anywhere; whether the target GPU has TF32 is the runtime's
        business, FP8's targets are checked against the options (``check_targets``)."""
        if precision is Precision.BF16:
            raise UnsupportedPrecision("bf16 is not built on the tensorrt-rtx backend yet (trtprof converts graphs "
                                       "to FP16 only); use --backend torch for bf16")

    def check_targets(self, precision: Precision, options: Mapping[str, Any]) -> None:
        """FP8 needs every target GPU to have FP8 tensor cores (compute capability 8.9+): refuse a
        target list (or the library's default, which includes 8.0 and 8.6) with one line, before building."""
        if precision is not Precision.FP8:
            return
        ccs = targets.supported_ccs(options.get(targets.OPTION))
        lacking = [cc for cc in ccs if tuple(int(x) for x in cc.split(".")) < targets.FP8_MIN_CC]
        if lacking:
            value = options.get(targets.OPTION)
            given = f"--compute-capability {value}" if value else f"the default targets ({', '.join(ccs)})"
            raise UnsupportedPrecision(
                f"fp8 needs compute capability 8.9+ on every target; {given} include {', '.join(lacking)}: "
                "name FP8 targets, e.g. --compute-capability sm89 or sm89,sm120")

    def environment(self) -> dict[str, Any]:
        """Library version only: the plan is portable across the GPUs it targets (those are in the spec)."""
        trt = require_library(TENSORRT_RTX)
        return {"backend": self.name, "tensorrt_rtx_version": str(trt.__version__)}

    def normalize_options(self, options: Mapping[str, Any]) -> dict[str, Any]:
        """``--compute-capability`` in its cache-key form (``current`` → this GPU's ``smXY``)."""
        out = dict(options)
        value = out.get(targets.OPTION)
        if value is not None:
            gpu = _device.query_device(0) if targets.parse_targets(value) == targets.CURRENT else None
            out[targets.OPTION] = targets.normalize_option(value, gpu.compute_capability if gpu else None)
        return out

    def build(self, model: Path, spec: BuildSpec, out: Path, *, calibration: Any = None) -> BuildReport:
        from .builder import build_engine

        report = build_engine(Path(model), spec, Path(out), TENSORRT_RTX, calibration=calibration)
        gpu = _device.query_device(0)
        report.metadata["built_on"] = f"{gpu.name} ({gpu.compute_capability})" if gpu else "no GPU (ahead-of-time build)"
        return report

    def check_runnable(self, record: "EngineRecord") -> None:
        """Refuse, in one line, a machine whose GPU the engine does not target (or no GPU at all)."""
        value = record.spec.option(targets.OPTION)
        runs_on = targets.describe_supported(value)
        gpu = _device.query_device(0)
        if gpu is None:
            why = _device.device_count()[1].removeprefix("no CUDA GPU").strip(" ()")
            raise IncompatibleEngine(
                f"this TensorRT-RTX engine cannot run on this machine: no GPU{f' ({why})' if why else ''}; "
                f"it runs on compute capability {runs_on}",
                path=record.artifact_path,
            )
        if not targets.can_run(value, gpu):
            raise IncompatibleEngine(
                f"this TensorRT-RTX engine cannot run on this machine: {gpu.name} has compute capability "
                f"{gpu.compute_capability}; it runs on compute capability {runs_on} "
                "(rebuild with --compute-capability current on this machine)",
                path=record.artifact_path,
            )

    def check_compatible(self, record: "EngineRecord") -> None:
        now = self.environment()["tensorrt_rtx_version"]
        then = record.environment.get("tensorrt_rtx_version")
        if then != now:
            raise IncompatibleEngine(
                f"engine was built by TensorRT-RTX {then!r}, this is {now!r}: rebuild it with `trtprof build --rebuild`",
                path=record.meta_path,
            )

    def load(self, artifact: Path, record: "EngineRecord") -> "RtxRunner":
        from .inspect import deserialize

        self.check_runnable(record)
        self.check_compatible(record)
        trt = require_library(TENSORRT_RTX)
        plan = Path(artifact).read_bytes()
        tail = LogTail()
        refuse_invalid_plan(trt, plan, record, tail)
        runtime, engine = deserialize(plan, tail, TENSORRT_RTX)
        gpu = _device.query_device(0)
        cc = targets.cc_to_sm(gpu.compute_capability) if gpu else "nogpu"
        cache_path = Path(artifact).with_name(f"{Path(artifact).stem}.{cc}{RUNTIME_CACHE_SUFFIX}")
        return RtxRunner(runtime, engine, tail, trt, cache_path)


def refuse_invalid_plan(trt: ModuleType, plan: bytes, record: "EngineRecord", tail: LogTail) -> None:
    """Ask the library itself (``Runtime.get_engine_validity``) before deserializing: its diagnostics
    say *why* a plan cannot run here, where ``deserialize_cuda_engine`` only returns None."""
    from .tail_logger import make_logger

    runtime = trt.Runtime(make_logger(tail, trt))
    check = getattr(runtime, "get_engine_validity", None)
    if check is None:
        return
    validity, diagnostics = check(plan)
    if validity != trt.EngineValidity.INVALID:
        return
    reasons = [d.name.lower() for d in trt.EngineInvalidityDiagnostics.__members__.values() if int(diagnostics) & int(d)]
    gpu = _device.query_device(0)
    here = f"{gpu.name} has compute capability {gpu.compute_capability}" if gpu else "no GPU"
    raise IncompatibleEngine(
        f"TensorRT-RTX says this engine cannot run on this machine ({', '.join(reasons) or 'invalid'}): {here}; "
        f"it runs on compute capability {targets.describe_supported(record.spec.option(targets.OPTION))}"
        + (f" [{tail.text(2)}]" if tail else ""),
        path=record.artifact_path,
    )


class RtxRunner(TensorRTRunner):
    """A TensorRT-RTX engine: the JIT and the runtime cache handled and measured outside the timing loop.

    The execution context is created with a runtime configuration that carries the runtime cache (read
    from ``cache_path`` when present) and the EAGER dynamic-shape strategy: a new shape's specialized
    kernels are compiled, blocking, at its first inference, which ``prepare`` runs and times itself.
    With the library's default (LAZY) a fallback kernel would run while the specialized one compiles
    in the background, and the swap would land inside the measured distribution.
    """

    def __init__(
        self, runtime: "trt.Runtime", engine: "trt.ICudaEngine", tail: LogTail, trt: ModuleType, cache_path: Path
    ) -> None:
        self._cache_path = Path(cache_path)
        self._runtime_config: Any = None
        self._runtime_cache: Any = None
        self._cache_info: dict[str, Any] = {}
        self._jit_ms = 0.0
        self._first_ms: dict[str, float] = {}
        super().__init__(runtime, engine, tail, trt)

    def _create_context(self, engine: "trt.ICudaEngine") -> "trt.IExecutionContext | None":
        trt = self._trt
        config: Any = engine.create_runtime_config()  # TensorRT-RTX's IRuntimeConfig (not in the TensorRT stubs)
        strategy = getattr(trt, "DynamicShapesKernelSpecializationStrategy", None)
        if strategy is not None:
            config.dynamic_shapes_kernel_specialization_strategy = strategy.EAGER
        cache = config.create_runtime_cache()
        data = b""
        if self._cache_path.is_file():
            try:
                data = self._cache_path.read_bytes()
            except OSError:
                data = b""
        loaded = bool(data) and bool(cache.deserialize(data))
        config.set_runtime_cache(cache)
        self._runtime_config, self._runtime_cache = config, cache  # both must outlive the context
        self._cache_info = {"path": str(self._cache_path), "found": bool(data), "loaded": loaded,
                            "bytes_before": serialized_size(cache)}
        started = time.perf_counter()
        context = engine.create_execution_context(config)
        self._jit_ms = (time.perf_counter() - started) * 1e3
        return context

    def prepare(self, input_shapes: Mapping[str, tuple[int, ...]]) -> dict[str, tuple[int, ...]]:
        outputs = super().prepare(input_shapes)
        key = ";".join(f"{n}:{'x'.join(map(str, s))}" for n, s in sorted(self._shapes.items()))
        if key not in self._first_ms:
            self._first_ms[key] = self._first_inference(outputs)
            self._save_cache()
        return outputs

    def _first_inference(self, output_shapes: Mapping[str, tuple[int, ...]]) -> float:
        """One inference on zero-filled buffers, timed on the host around enqueue + sync (it includes the
        shape's JIT compilation, which is the point). Returns milliseconds."""
        from contextlib import ExitStack

        import numpy as np

        from ...system import cuda

        dtypes = {s.name: np.dtype(s.dtype) for s in (*self.inputs, *self.outputs)}
        shapes = {**self._shapes, **output_shapes}
        pointers: dict[str, int] = {}
        with ExitStack() as stack:
            stream = stack.enter_context(cuda.Stream())
            for name, shape in shapes.items():
                nbytes = max(1, int(np.prod(shape, dtype=np.int64)) * dtypes[name].itemsize)
                pointers[name] = stack.enter_context(cuda.DeviceBuffer(nbytes)).ptr
                if name in self._shapes:  # zeros: valid for every input, indices included
                    host = stack.enter_context(cuda.PinnedHostBuffer(nbytes)).array(shape, dtypes[name])
                    host[...] = 0
                    cuda.memcpy_htod_async(pointers[name], host, stream)
            stream.synchronize()
            started = time.perf_counter()
            try:
                self.enqueue(pointers, stream.handle)
                stream.synchronize()
            finally:
                self._addresses.clear()  # these buffers are freed below; the next enqueue rebinds
            return (time.perf_counter() - started) * 1e3

    def _save_cache(self) -> None:
        """Write the runtime cache back when the JIT added kernels (atomic; a failure only costs speed)."""
        from ...util.files import atomic_write_bytes

        if self._runtime_cache is None:
            return
        try:
            data = bytes(memoryview(self._runtime_cache.serialize()))
        except Exception as err:  # the measurement is fine without a cache
            self._cache_info["save_error"] = str(err)
            return
        self._cache_info["bytes_after"] = len(data)
        if data and (not self._cache_info["loaded"] or len(data) != self._cache_info["bytes_before"]):
            try:
                atomic_write_bytes(self._cache_path, data)
                self._cache_info["saved"] = True
            except OSError as err:
                self._cache_info["save_error"] = str(err)

    def runtime_report(self) -> dict[str, Any]:
        """JIT time, first-inference latency per shape, runtime-cache hit/miss: for the results file."""
        info = dict(self._cache_info)
        grew = info.get("bytes_after", info.get("bytes_before", 0)) != info.get("bytes_before", 0)
        if not info.get("loaded"):
            status = "miss (no cache file)" if not info.get("found") else "miss (cache rejected: other GPU, driver or version)"
        else:
            status = "partial hit (new kernels compiled)" if grew else "hit"
        info["status"] = status
        return {"library": "TensorRT-RTX", "jit_ms": round(self._jit_ms, 3),
                "first_inference_ms": {k: round(v, 3) for k, v in self._first_ms.items()},
                "dynamic_shapes_strategy": "eager", "runtime_cache": info}

    def close(self) -> None:
        super().close()
        self._runtime_config = None
        self._runtime_cache = None

