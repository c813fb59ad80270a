"""The TensorRT backend: ONNX → .plan (FP32 / TF32 / FP16), cached, loaded into a DeviceRunner.

A plan only runs on the TensorRT version and the GPU that built it; both go into the cache key
(``environment``) and are checked again on ``load``, so a user sees "rebuild" instead of TensorRT's
"version tag does not match".
"""
from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ...errors import BackendUnavailable, IncompatibleEngine, UnsupportedPrecision
from ...spec import BuildSpec, Precision
from ..base import Availability, BackendBase, BuildReport, Capabilities
from . import device as _device

if TYPE_CHECKING:
    from ...engines.cache import EngineRecord
    from .runner import TensorRTRunner

NOT_INSTALLED = "tensorrt not installed: pip install 'trtprof[tensorrt]'"
TF32_MIN_CC = (8, 0)  # TF32 tensor cores arrived with Ampere
INT8_MIN_CC = (6, 1)  # DP4A integer dot products
FP8_MIN_CC = (8, 9)  # FP8 tensor cores arrived with Ada (8.9) and Hopper (9.0)
FP16_MIN_CC = (5, 3)  # native FP16 arithmetic; TensorRT 10 itself needs 7.5+


def tensorrt_installed() -> bool:
    """True when a real ``tensorrt`` package is importable, without importing it.

    A spec without an origin is a namespace package — e.g. ``tensorrt-stubs`` installed into the
    environment leaves a ``tensorrt/`` folder of ``.pyi`` files — not TensorRT.
    """
    try:
        spec = importlib.util.find_spec("tensorrt")
    except (ImportError, ValueError):
        return False
    return spec is not None and spec.origin not in (None, "namespace")


class TensorRTBackend(BackendBase):
    name = "tensorrt"
    artifact_suffix = ".plan"
    capabilities = Capabilities(device="cuda", layer_profiler="tensorrt-profiler", timeline="tensorrt-sequence",
                                tensorrt_plan=True, extra="tensorrt")

    def available(self) -> Availability:
        if not tensorrt_installed():
            return Availability(False, NOT_INSTALLED)
        count, why = _device.device_count()
        if count < 1:
            return Availability(False, why or "no CUDA GPU")
        return Availability(True)

    def _device(self) -> _device.DeviceInfo:
        info = _device.query_device(0)
        if info is None:
            raise BackendUnavailable("backend 'tensorrt' cannot run here: no CUDA GPU")
        return info

    def check_precision(self, precision: Precision) -> None:
        info = _device.query_device(0)
        if info is None:
            return  # availability already says why; nothing to add here
        if precision is Precision.TF32 and info.cc_tuple < TF32_MIN_CC:
            raise UnsupportedPrecision(
                f"tf32 needs compute capability 8.0+; {info.name} is {info.compute_capability} (use fp32 or fp16)"
            )
        if precision is Precision.FP8 and info.cc_tuple < FP8_MIN_CC:
            raise UnsupportedPrecision(f"fp8 needs compute capability 8.9+ (Ada, Hopper); {info.name} is "
                                       f"{info.compute_capability} (use int8 or fp16)")
        if precision is Precision.INT8 and info.cc_tuple < INT8_MIN_CC:
            raise UnsupportedPrecision(f"int8 needs compute capability 6.1+; {info.name} is {info.compute_capability}")
        if precision is Precision.BF16:
            raise UnsupportedPrecision("bf16 is not built on the tensorrt backend yet (trtprof converts graphs to "
                                       "FP16 only); use --backend torch for bf16")
        if precision is Precision.FP16 and info.cc_tuple < FP16_MIN_CC:
            raise UnsupportedPrecision(f"fp16 needs compute capability 5.3+; {info.name} is {info.compute_capability}")

    def environment(self) -> dict[str, Any]:
        from .compat import require_tensorrt

        trt = require_tensorrt()
        info = self._device()
        return {
            "backend": self.name,
            "tensorrt_version": str(trt.__version__),
            "gpu_name": info.name,
            "compute_capability": info.compute_capability,
        }

    def build(self, model: Path, spec: BuildSpec, out: Path, *, calibration: Any = None) -> BuildReport:
        from .builder import build_engine

        report = build_engine(Path(model), spec, Path(out), calibration=calibration)
        env = self.environment()
        report.metadata.setdefault("gpu_name", env["gpu_name"])
        report.metadata.setdefault("compute_capability", env["compute_capability"])
        return report

    def check_compatible(self, record: "EngineRecord") -> None:
        """Refuse a plan built by another TensorRT version or on another GPU (IncompatibleEngine)."""
        now = self.environment()
        then = record.environment
        differences = [
            f"{label} {then.get(key)!r} → {now[key]!r}"
            for key, label in (
                ("tensorrt_version", "TensorRT"),
                ("gpu_name", "GPU"),
                ("compute_capability", "compute capability"),
            )
            if then.get(key) != now[key]
        ]
        if differences:
            raise IncompatibleEngine(
                "engine was built for another setup (" + "; ".join(differences) + "): "
                "rebuild it with `trtprof build --rebuild`",
                path=record.meta_path,
            )

    def load(self, artifact: Path, record: "EngineRecord") -> "TensorRTRunner":
        from .inspect import deserialize
        from .runner import TensorRTRunner
        from .tail_logger import LogTail

        self.check_compatible(record)
        tail = LogTail()
        runtime, engine = deserialize(Path(artifact).read_bytes(), tail)
        return TensorRTRunner(runtime, engine, tail)
