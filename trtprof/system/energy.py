"""Energy per inference from NVML's total-energy counter, cross-checked against sampled power × time.

Why the counter: ``nvmlDeviceGetTotalEnergyConsumption`` (Volta and newer) integrates the board's
power in the driver, in millijoules, so the joules of a window are one subtraction, with nothing
missed between samples. Why the cross-check: the counter is the board's, not the process's (another
tenant's work lands in it too), and a counter that stalls or wraps would go unnoticed; power sampled
every ``SAMPLE_MS`` over the same window, times its length, must agree with it (``agreement`` near
1; ``AGREEMENT_TOLERANCE`` beyond it adds a note). Where there is no counter (the CPU, an old GPU, no
NVML) the answer is "n/a" with the reason, never a zero.
"""
from __future__ import annotations

import threading
import time
from typing import Any, Callable, Protocol

SAMPLE_MS = 100  # power sampling period of the cross-check (nvidia-smi -lms 100 reads at the same rate)
# |counter joules / (mean sampled power × seconds) − 1| beyond which the two disagree enough to say so:
# NVML's power reading is averaged over ~1 s on recent boards where no instantaneous reading exists,
# so short windows differ by several %.
AGREEMENT_TOLERANCE = 0.15
CPU_REASON = "CPU backend: NVML's energy counter measures GPUs (host energy, e.g. RAPL, is not read)"
METHOD = ("NVML total-energy counter (nvmlDeviceGetTotalEnergyConsumption) difference over the window; "
          f"cross-check: mean board power sampled every {SAMPLE_MS} ms × window length (power_source says which reading)")
# Which power reading the cross-check sampled. On Ampere and newer, nvmlDeviceGetPowerUsage (and
# nvidia-smi's power.draw) is a 1-s average: over a 0.5-s window that follows an idle gap it lags by most
# of the window (measured on an H200, 2026-12-01: counter / averaged power × time = 1.10–1.25 per arm).
INSTANT = "instantaneous (NVML_FI_DEV_POWER_INSTANT)"
AVERAGED = "nvmlDeviceGetPowerUsage (a 1-s average on Ampere and newer)"


def not_available(reason: str) -> dict[str, Any]:
    return {"status": "n/a", "reason": reason}


class Reader(Protocol):
    def energy_mj(self) -> int | None: ...

    def power_w(self) -> float | None: ...

    def close(self) -> None: ...


def power_source(reader: object) -> str | None:
    """What ``reader.power_w`` reads (``INSTANT`` or ``AVERAGED``), for readers that say; else None."""
    source = getattr(reader, "power_source", None)
    return source if isinstance(source, str) else None


class NvmlReader:
    """One GPU's energy counter and power through pynvml (nvidia-ml-py), NVML kept open until ``close``."""

    def __init__(self, nv: Any, handle: Any) -> None:
        self._nv, self._handle = nv, handle
        self._instant: bool | None = None  # None: not tried yet; then whether the driver has the field

    @property
    def power_source(self) -> str | None:
        return None if self._instant is None else INSTANT if self._instant else AVERAGED

    @classmethod
    def open(cls, pci_bus_id: str | None = None, index: int = 0) -> "NvmlReader | str":
        """A reader, or the reason there is none (no pynvml, no driver, no counter on this GPU)."""
        try:
            import pynvml
        except ImportError:
            return "nvidia-ml-py (pynvml) is not installed"
        try:
            pynvml.nvmlInit()
        except Exception as err:  # noqa: BLE001 - NVMLError_LibraryNotFound, DriverNotLoaded, ...
            return f"NVML is not usable here ({type(err).__name__})"
        try:
            from .nvml import gpu_handle

            reader = cls(pynvml, gpu_handle(pynvml, index, pci_bus_id))
            if reader.energy_mj() is None:
                reader.close()
                return "this GPU/driver has no total-energy counter (nvmlDeviceGetTotalEnergyConsumption: Volta+)"
            return reader
        except Exception as err:  # noqa: BLE001
            pynvml.nvmlShutdown()
            return f"NVML could not open the GPU ({type(err).__name__}: {err})"

    def energy_mj(self) -> int | None:
        try:
            return int(self._nv.nvmlDeviceGetTotalEnergyConsumption(self._handle))
        except Exception:  # noqa: BLE001 - NVMLError_NotSupported
            return None

    def power_w(self) -> float | None:
        """Instantaneous board power where the driver has the field, else the (averaged) power usage.
        The choice is made at the first reading and kept: once instantaneous, a failed reading is a
        missing sample, so that one window never mixes the two kinds."""
        if self._instant is not False:
            watts = self._instant_w()
            if self._instant is None:
                self._instant = watts is not None
            if self._instant:
                return watts
        try:
            return float(self._nv.nvmlDeviceGetPowerUsage(self._handle)) / 1000.0
        except Exception:  # noqa: BLE001
            return None

    def _instant_w(self) -> float | None:
        nv = self._nv
        try:
            (value,) = nv.nvmlDeviceGetFieldValues(self._handle, [nv.NVML_FI_DEV_POWER_INSTANT])
        except (AttributeError, getattr(nv, "NVMLError", AttributeError)):  # an old pynvml, no such call
            return None
        unsigned = getattr(nv, "NVML_VALUE_TYPE_UNSIGNED_INT", None)
        if value.nvmlReturn != 0 or (unsigned is not None and value.valueType != unsigned):
            return None  # NVML_ERROR_NOT_SUPPORTED and the like
        return float(value.value.uiVal) / 1000.0  # milliwatts

    def close(self) -> None:
        try:
            self._nv.nvmlShutdown()
        except Exception:  # noqa: BLE001
            pass


class EnergyMeter:
    """``start()`` … ``stop()`` around a measured window; ``stop`` returns the ``energy`` entry.

    A background thread samples power every ``sample_ms`` while the window runs (the cross-check).
    ``reader`` is injectable (tests pass a fake with a known counter); ``None`` opens NVML."""

    def __init__(self, reader: Reader | str | None = None, *, pci_bus_id: str | None = None,
                 sample_ms: float = SAMPLE_MS, clock: Callable[[], float] = time.perf_counter) -> None:
        self._reader = NvmlReader.open(pci_bus_id) if reader is None else reader
        self._sample_s = sample_ms / 1e3
        self._clock = clock
        self._samples: list[float] = []
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._e0: int | None = None
        self._t0 = 0.0

    @property
    def reason(self) -> str | None:
        return self._reader if isinstance(self._reader, str) else None

    def _sample(self) -> None:
        reader = self._reader
        assert not isinstance(reader, str)
        while not self._stop.wait(self._sample_s):
            watts = reader.power_w()
            if watts is not None:
                self._samples.append(watts)

    def start(self) -> None:
        if isinstance(self._reader, str):
            return
        self._samples.clear()
        self._stop.clear()
        first = self._reader.power_w()
        if first is not None:
            self._samples.append(first)
        self._e0, self._t0 = self._reader.energy_mj(), self._clock()
        self._thread = threading.Thread(target=self._sample, name="trtprof-power", daemon=True)
        self._thread.start()

    def stop(self, inferences: int | None = None) -> dict[str, Any]:
        """The window's joules, mean power and the cross-check; per inference when ``inferences`` given."""
        if isinstance(self._reader, str):
            return not_available(self._reader)
        e1, t1 = self._reader.energy_mj(), self._clock()
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        last = self._reader.power_w()
        if last is not None:
            self._samples.append(last)
        if self._e0 is None or e1 is None:
            return not_available("the energy counter could not be read at both ends of the window")
        out = summarize((e1 - self._e0) / 1e3, t1 - self._t0, self._samples, inferences)
        source = power_source(self._reader)
        if source is not None and out.get("status") == "ok":
            out["power_source"] = source
        return out

    def close(self) -> None:
        if not isinstance(self._reader, str):
            self._reader.close()


def summarize(joules: float, seconds: float, power_samples: list[float], inferences: int | None) -> dict[str, Any]:
    """The ``energy`` entry from a counter difference, the window length and the sampled powers."""
    if seconds <= 0:
        return not_available("empty window")
    out: dict[str, Any] = {"status": "ok", "joules": joules, "seconds": seconds, "avg_power_w": joules / seconds,
                           "power_samples": len(power_samples), "method": METHOD}
    if power_samples:
        sampled = sum(power_samples) / len(power_samples)
        out["sampled_power_w"] = sampled
        out["sampled_joules"] = sampled * seconds
        out["agreement"] = joules / out["sampled_joules"] if out["sampled_joules"] > 0 else None
        if out["agreement"] is not None and abs(out["agreement"] - 1) > AGREEMENT_TOLERANCE:
            out["note"] = (f"the energy counter ({joules:.3g} J) and sampled power × time ({out['sampled_joules']:.3g} J) "
                           f"differ by {out['agreement'] - 1:+.0%}: a short window, or power read too rarely")
    if inferences:
        out["inferences"] = int(inferences)
        out["joules_per_inference"] = joules / inferences
    return out


def per_inference(entry: dict[str, Any], inferences: int) -> dict[str, Any]:
    """``entry`` with joules per inference, once the window's inferences are counted."""
    if entry.get("status") != "ok" or not inferences:
        return dict(entry)
    return {**entry, "inferences": int(inferences), "joules_per_inference": entry["joules"] / inferences}


def combine(entries: list[dict[str, Any]]) -> dict[str, Any]:
    """Several windows' entries (a serving point's rounds) as one: joules and seconds added up."""
    ok = [e for e in entries if e.get("status") == "ok"]
    if not ok:
        return entries[0] if entries else not_available("no window measured")
    joules, seconds = sum(e["joules"] for e in ok), sum(e["seconds"] for e in ok)
    inferences = sum(e.get("inferences", 0) for e in ok)
    out: dict[str, Any] = {"status": "ok", "joules": joules, "seconds": seconds, "avg_power_w": joules / seconds,
                           "windows": len(ok), "method": METHOD}
    sources = {e["power_source"] for e in ok if "power_source" in e}
    if len(sources) == 1:
        out["power_source"] = sources.pop()
    sampled = [e["sampled_joules"] for e in ok if "sampled_joules" in e]
    if len(sampled) == len(ok):
        out["sampled_joules"] = sum(sampled)
        out["agreement"] = joules / out["sampled_joules"] if out["sampled_joules"] > 0 else None
    if inferences:
        out["inferences"] = inferences
        out["joules_per_inference"] = joules / inferences
    return out


def from_states(before: dict[str, Any], after: dict[str, Any], seconds: float, inferences: int) -> dict[str, Any]:
    """The single-stream timed loop's energy from the NVML states ``time_device`` reads around it
    (``total_energy_mj`` in ``nvml.gpu_state``); the cross-check is the mean of the two power readings."""
    e0, e1 = before.get("total_energy_mj"), after.get("total_energy_mj")
    if e0 is None or e1 is None:
        reason = "no NVML GPU state" if not before else "this GPU/driver has no total-energy counter"
        return not_available(reason)
    powers = [p for p in (before.get("power_w"), after.get("power_w")) if p is not None]
    out = summarize((e1 - e0) / 1e3, seconds, powers, inferences)
    out["method"] = ("NVML total-energy counter difference across the timed loop; cross-check: mean of the power "
                     "read before and after it × its span (two readings only)")
    return out


def of_timed_loop(device_kind: str, device: dict[str, Any], seconds: float, inferences: int) -> dict[str, Any]:
    """The ``energy`` entry of a single-stream result: "n/a" on the CPU, else ``from_states`` of the
    NVML states the GPU timing loop recorded (``device["before"]``/``["after"]``)."""
    if device_kind == "cpu":
        return not_available(CPU_REASON)
    return from_states(device.get("before", {}), device.get("after", {}), seconds, inferences)
