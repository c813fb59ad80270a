"""Which GPU is here, asked through the CUDA runtime API of cuda-python.

Why the runtime API: ``cudaGetDeviceCount`` returns an error code when there is no driver (the
driver API's ``cuInit`` raises instead), so ``available()`` can say "no CUDA GPU" on a CPU machine
without crashing. TensorRT is never imported here.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class DeviceInfo:
    name: str
    compute_capability: str  # "9.0"

    @property
    def cc_tuple(self) -> tuple[int, int]:
        major, _, minor = self.compute_capability.partition(".")
        return int(major), int(minor or 0)


def _cudart() -> Any:
    try:
        from cuda.bindings import runtime as cudart
    except ImportError:
        try:  # cuda-python < 12.6 layout
            from cuda import cudart
        except ImportError:
            return None
    return cudart


def device_count() -> tuple[int, str]:
    """(number of CUDA devices, why zero). Never raises."""
    cudart = _cudart()
    if cudart is None:
        return 0, "cuda-python is not installed"
    try:
        err, count = cudart.cudaGetDeviceCount()
    except Exception as exc:  # a broken install: report, don't crash availability checks
        return 0, f"CUDA runtime query failed ({exc})"
    if int(err) != 0:
        name = getattr(err, "name", str(err))
        return 0, f"no CUDA GPU ({name})"
    if count < 1:
        return 0, "no CUDA GPU"
    return int(count), ""


def query_device(index: int = 0) -> DeviceInfo | None:
    """Name and compute capability of device ``index`` (via trtprof.system.cuda), or None when there is none."""
    count, _ = device_count()
    if count <= index:
        return None
    from ...system import cuda
    from ...errors import CudaError

    try:
        major, minor = cuda.compute_capability(index)
        return DeviceInfo(name=cuda.device_name(index), compute_capability=f"{major}.{minor}")
    except CudaError:
        return None
