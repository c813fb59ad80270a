"""GPU identity and state from NVML (nvidia-ml-py, imported as ``pynvml``).

Why NVML: clocks, temperature, power and throttle reasons are what explain a latency that moved
between two runs; CUDA cannot see them. Every function here degrades to an empty answer when NVML is
missing or fails (no driver, a container without the library): a result file without GPU state is
still a result, and ``trtprof`` must run on CPU-only machines.
"""
from __future__ import annotations

from contextlib import contextmanager
from typing import Any, Iterator

# Throttle / "clocks event" reason bits (nvml.h). Named here so a result says *why* clocks dropped.
_REASON_NAMES = {
    0x1: "gpu_idle",
    0x2: "applications_clocks_setting",
    0x4: "sw_power_cap",
    0x8: "hw_slowdown",
    0x10: "sync_boost",
    0x20: "sw_thermal_slowdown",
    0x40: "hw_thermal_slowdown",
    0x80: "hw_power_brake_slowdown",
    0x100: "display_clock_setting",
}


def decode_reasons(mask: int) -> list[str]:
    """Names of the set reason bits (unknown bits as hex)."""
    names = [name for bit, name in _REASON_NAMES.items() if mask & bit]
    rest = mask & ~sum(_REASON_NAMES)
    if rest:
        names.append(hex(rest))
    return names


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


@contextmanager
def _session() -> Iterator[Any]:
    """nvmlInit/nvmlShutdown around a block; yields the module, or None when NVML is unusable."""
    try:
        import pynvml
    except ImportError:
        yield None
        return
    try:
        pynvml.nvmlInit()
    except Exception:  # noqa: BLE001 - NVMLError_LibraryNotFound, DriverNotLoaded, ...: "no GPU info"
        yield None
        return
    try:
        yield pynvml
    finally:
        try:
            pynvml.nvmlShutdown()
        except Exception:  # noqa: BLE001
            pass


def _try(fn: Any, *args: Any) -> Any:
    """One NVML query, or None when this GPU/driver does not support it."""
    try:
        return fn(*args)
    except Exception:  # noqa: BLE001 - NVMLError_NotSupported and friends
        return None


def gpu_handle(nv: Any, index: int, pci_bus_id: str | None) -> Any:
    """NVML handle of the GPU CUDA uses (by PCI bus id when given, else NVML's own index)."""
    if pci_bus_id:
        # CUDA writes a 4-digit PCI domain ("0000:1A:00.0"), NVML an 8-digit one; try both spellings.
        domain, _, rest = pci_bus_id.partition(":")
        for text in (pci_bus_id, f"{int(domain, 16):08X}:{rest}" if rest else pci_bus_id):
            for name in ("nvmlDeviceGetHandleByPciBusId_v2", "nvmlDeviceGetHandleByPciBusId"):
                fn = getattr(nv, name, None)
                handle = None if fn is None else _try(fn, text)
                if handle is not None:
                    return handle
    return nv.nvmlDeviceGetHandleByIndex(index)


def describe_gpus() -> list[dict[str, Any]]:
    """Every GPU NVML sees: name, driver, memory, compute capability, max clocks; [] without NVML."""
    with _session() as nv:
        if nv is None:
            return []
        try:
            count = nv.nvmlDeviceGetCount()
            driver = _text(_try(nv.nvmlSystemGetDriverVersion) or "")
            gpus = []
            for index in range(count):
                h = nv.nvmlDeviceGetHandleByIndex(index)
                mem = _try(nv.nvmlDeviceGetMemoryInfo, h)
                cc = _try(nv.nvmlDeviceGetCudaComputeCapability, h)
                gpus.append({
                    "index": index,
                    "name": _text(nv.nvmlDeviceGetName(h)),
                    "uuid": _text(_try(nv.nvmlDeviceGetUUID, h) or ""),
                    "pci_bus_id": _text(getattr(_try(nv.nvmlDeviceGetPciInfo, h), "busId", b"") or ""),
                    "driver": driver,
                    "memory_total_mib": None if mem is None else int(mem.total) // (1 << 20),
                    "compute_capability": None if cc is None else f"{cc[0]}.{cc[1]}",
                    "max_sm_clock_mhz": _try(nv.nvmlDeviceGetMaxClockInfo, h, nv.NVML_CLOCK_SM),
                    "max_mem_clock_mhz": _try(nv.nvmlDeviceGetMaxClockInfo, h, nv.NVML_CLOCK_MEM),
                    "power_limit_w": _watts(_try(nv.nvmlDeviceGetEnforcedPowerLimit, h)),
                })
            return gpus
        except Exception:  # noqa: BLE001 - a broken NVML must not break a benchmark
            return []


def _watts(milliwatts: Any) -> float | None:
    return None if milliwatts is None else round(milliwatts / 1000.0, 1)


def gpu_state(index: int = 0, pci_bus_id: str | None = None) -> dict[str, Any]:
    """Clocks, temperature, power and throttle reasons of one GPU now; {} without NVML.

    ``pci_bus_id`` (from ``trtprof.system.cuda.pci_bus_id``) picks the GPU CUDA is using even when
    CUDA_VISIBLE_DEVICES reorders devices; otherwise ``index`` is NVML's own index.
    """
    with _session() as nv:
        if nv is None:
            return {}
        try:
            h = gpu_handle(nv, index, pci_bus_id)
            reasons_fn = getattr(nv, "nvmlDeviceGetCurrentClocksEventReasons", None) or getattr(
                nv, "nvmlDeviceGetCurrentClocksThrottleReasons")
            mask = _try(reasons_fn, h)
            util = _try(nv.nvmlDeviceGetUtilizationRates, h)
            return {
                "name": _text(nv.nvmlDeviceGetName(h)),
                "sm_clock_mhz": _try(nv.nvmlDeviceGetClockInfo, h, nv.NVML_CLOCK_SM),
                "mem_clock_mhz": _try(nv.nvmlDeviceGetClockInfo, h, nv.NVML_CLOCK_MEM),
                "max_sm_clock_mhz": _try(nv.nvmlDeviceGetMaxClockInfo, h, nv.NVML_CLOCK_SM),
                "temperature_c": _try(nv.nvmlDeviceGetTemperature, h, nv.NVML_TEMPERATURE_GPU),
                "power_w": _watts(_try(nv.nvmlDeviceGetPowerUsage, h)),
                # millijoules since the driver loaded (Volta+): energy across a timed loop (trtprof.system.energy)
                "total_energy_mj": _try(nv.nvmlDeviceGetTotalEnergyConsumption, h),
                "utilization_pct": None if util is None else int(util.gpu),
                "throttle_reasons": None if mask is None else decode_reasons(int(mask)),
            }
        except Exception:  # noqa: BLE001
            return {}
