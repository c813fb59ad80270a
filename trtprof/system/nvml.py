"""GPU identity and state from NVML (nvidia-ml-py, imported as ``pynvml``).

Why NVML: clocks, temperature, power and throttle reasons are what explain a latency that moved
between two runs; CUDA cannot see them. Every function here degrades to an empty answer when NVML is
missing or fails (no driver, a container without the library): a result file without GPU state is
still a result, and ``trtprof`` must run on CPU-only machines.
"""
from __future__ import annotations

from contextlib import contextmanager
from typing import Any, Iterator, Mapping

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


# What does not change while a ``held`` session lasts (a GPU's handle, name, top clock, slowdown temperature), read
# once in it: each NVML query costs about half a millisecond on the H200 (``gpu_state`` with a held session 5 ms,
# 2026-12-03, ``benchmarks/results/ort_cuda-H200-2026-12-03/block-costs.json.gz``), and every timing block made
# about 28 of them, 8 of these (a default ResNet-50 compare: 174 blocks). Emptied when the outermost session ends.
_HELD: dict[str, Any] = {"depth": 0, "static": {}}


def _static(key: tuple[Any, ...], read: Any) -> Any:
    """``read()``, kept for ``key`` while a ``held`` session lasts (read each time outside one)."""
    if _HELD["depth"] == 0:
        return read()
    static = _HELD["static"]
    if key not in static:
        static[key] = read()
    return static[key]


@contextmanager
def held() -> Iterator[bool]:
    """Keep one NVML session open through a block (a measurement worker's life): every ``_session`` inside
    is then NVML's reference count, not a fresh initialisation per timing block, and what cannot change meanwhile is
    read once (``_static``). Yields whether NVML is usable."""
    with _session() as nv:
        if nv is None:
            yield False
            return
        _HELD["depth"] += 1
        try:
            yield True
        finally:
            _HELD["depth"] -= 1
            if _HELD["depth"] == 0:
                _HELD["static"] = {}


def _try(fn: Any, *args: Any) -> Any:
    """One NVML query, or None when this GPU/driver does not support it."""
    try:
        return fn(*args)
    except Exception:  # noqa: BLE001 - NVMLError_NotSupported and friends
        return None


def gpu_handle(nv: Any, index: int, pci_bus_id: str | None) -> Any:
    """NVML handle of the GPU CUDA uses (by PCI bus id when given, else NVML's own index); looked up once while a
    ``held`` session lasts."""
    return _static(("handle", index, pci_bus_id), lambda: _find_handle(nv, index, pci_bus_id))


def _find_handle(nv: Any, index: int, pci_bus_id: str | None) -> Any:
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
            return _read_state(nv, gpu_handle(nv, index, pci_bus_id), ("gpu", index, pci_bus_id))
        except Exception:  # noqa: BLE001
            return {}


def _reasons_fn(nv: Any) -> Any:
    return getattr(nv, "nvmlDeviceGetCurrentClocksEventReasons", None) or getattr(
        nv, "nvmlDeviceGetCurrentClocksThrottleReasons")


def _read_state(nv: Any, h: Any, gpu: tuple[Any, ...]) -> dict[str, Any]:
    """``gpu_state``'s reads of the GPU ``h`` (``gpu``: its key for what a ``held`` session reads once)."""
    mask = _try(_reasons_fn(nv), h)
    util = _try(nv.nvmlDeviceGetUtilizationRates, h)
    return {
        "name": _static((*gpu, "name"), lambda: _text(nv.nvmlDeviceGetName(h))),
        "sm_clock_mhz": _try(nv.nvmlDeviceGetClockInfo, h, nv.NVML_CLOCK_SM),
        "mem_clock_mhz": _try(nv.nvmlDeviceGetClockInfo, h, nv.NVML_CLOCK_MEM),
        "max_sm_clock_mhz": _static((*gpu, "max_sm"), lambda: _try(nv.nvmlDeviceGetMaxClockInfo, h, nv.NVML_CLOCK_SM)),
        "temperature_c": _try(nv.nvmlDeviceGetTemperature, h, nv.NVML_TEMPERATURE_GPU),
        "power_w": _watts(_try(nv.nvmlDeviceGetPowerUsage, h)),
        # millijoules since the driver loaded (Volta+): energy across a timed loop (trtprof.system.energy)
        "total_energy_mj": _try(nv.nvmlDeviceGetTotalEnergyConsumption, h),
        "utilization_pct": None if util is None else int(util.gpu),
        "throttle_reasons": None if mask is None else decode_reasons(int(mask)),
    }


# --------------------------------------------------------------------------------------------------
# Watching a GPU while it is measured: throttle reasons, clocks, temperature and other processes
# sampled through the timed loop, not read once at its end (a throttle that comes and goes between
# two reads, or a job that starts and stops mid-run, is invisible to a before/after pair).
# --------------------------------------------------------------------------------------------------
# Seconds between samples: 10 per second sees a power-cap episode (NVML's own power average is
# over 1 s) while costing the timed loop little (each sample is a few NVML calls in a thread that
# releases the GIL inside them). A block shorter than this still gets its first and last sample.
WATCH_INTERVAL_S = 0.1
BENIGN_REASONS = frozenset({"gpu_idle", "applications_clocks_setting"})
THERMAL_REASONS = frozenset({"sw_thermal_slowdown", "hw_thermal_slowdown"})


def _ppid(pid: int) -> int | None:
    """The parent of ``pid`` from /proc (None when it is not visible here: gone, or another pid namespace)."""
    try:
        stat = open(f"/proc/{pid}/stat", encoding="utf-8", errors="replace").read()
    except OSError:
        return None
    try:  # "pid (comm) state ppid ...": comm may hold spaces and parentheses
        return int(stat.rsplit(")", 1)[1].split()[1])
    except (IndexError, ValueError):
        return None


def family_heads(pid: int | None = None) -> set[int]:
    """This process and its parent (when not init): a process on the GPU whose pid or parent is one
    of them is trtprof's own (compare's worker processes each hold a CUDA context beside the parent's)."""
    import os

    me = os.getpid() if pid is None else pid
    parent = _ppid(me)
    return {me} | ({parent} if parent and parent > 1 else set())


def family_size(heads: set[int]) -> int:
    """How many processes here are in the family of ``heads`` (them and their children): a scan of
    /proc, made only when NVML's pids cannot be matched to ours."""
    import os

    try:
        entries = [int(e) for e in os.listdir("/proc") if e.isdigit()]
    except OSError:
        return len(heads)
    return len(heads | {p for p in entries if _ppid(p) in heads})


def gpu_pids(nv: Any, handle: Any) -> list[int] | None:
    """Pids of the compute and graphics processes NVML lists on the GPU, None when it cannot say."""
    found = None
    for name in ("nvmlDeviceGetComputeRunningProcesses", "nvmlDeviceGetGraphicsRunningProcesses"):
        fn = getattr(nv, name, None)
        procs = None if fn is None else _try(fn, handle)
        if procs is not None:
            found = (found or []) + [int(p.pid) for p in procs]
    return None if found is None else sorted(set(found))


def other_processes(pids: list[int], heads: set[int], me: int, family: Any = family_size) -> tuple[list[int], bool]:
    """(pids on the GPU that are not trtprof's, whether pids are comparable here). NVML in a container
    may list the host's pids: our own pid is then missing from its list, and only a count beyond our
    whole family proves another tenant (listed as negative placeholders, one per extra process)."""
    if me in pids:
        return [p for p in pids if p not in heads and _ppid(p) not in heads], True
    extra = len(pids) - family(heads)
    return [-(i + 1) for i in range(max(extra, 0))], False


class GpuWatch:
    """Samples one GPU every ``interval_s`` from a thread between ``start`` and ``stop`` (and once at
    each, synchronously); ``summary()`` is JSON. ``sample`` is the function that reads one sample
    (tests pass a fake); ``watch_gpu`` builds the NVML one."""

    def __init__(self, sample: Any, interval_s: float = WATCH_INTERVAL_S, fixed: dict[str, Any] | None = None,
                 ends: Any = None) -> None:
        """``ends``: the function that reads the first and the last sample instead of ``sample`` (a fuller one:
        ``watch_gpu(states=True)``)."""
        import threading

        self._sample, self.interval_s, self._ends = sample, interval_s, ends or sample
        self.samples: list[dict[str, Any]] = []
        self.fixed = dict(fixed or {})
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="trtprof-gpu-watch", daemon=True)

    def _take(self, read: Any = None) -> None:
        try:
            value = (read or self._sample)()
        except Exception:  # noqa: BLE001 - a sample that fails is a sample missing, not a failed run
            return
        if value:
            self.samples.append(value)

    def _run(self) -> None:
        while not self._stop.wait(self.interval_s):
            self._take()

    def start(self) -> "GpuWatch":
        self._take(self._ends)
        self._thread.start()
        return self

    def stop(self) -> dict[str, Any]:
        """The last sample, read as soon as the thread is told to stop (the end of what it watched), then the
        thread joined; the summary."""
        self._stop.set()
        self._take(self._ends)
        self._thread.join()
        return self.summary()

    def summary(self) -> dict[str, Any]:
        return summarize_watch(self.samples, self.interval_s, self.fixed)


def summarize_watch(samples: list[dict[str, Any]], interval_s: float, fixed: dict[str, Any] | None = None) -> dict[str, Any]:
    """What the samples say, as JSON: how many, the SM clock's range, the hottest reading, how many
    samples carried each non-benign throttle reason, and the other processes seen."""
    clocks = [s["sm_clock_mhz"] for s in samples if s.get("sm_clock_mhz")]
    temps = [s["temperature_c"] for s in samples if s.get("temperature_c") is not None]
    throttle: dict[str, int] = {}
    for s in samples:
        for r in s.get("throttle_reasons") or []:
            if r not in BENIGN_REASONS:
                throttle[r] = throttle.get(r, 0) + 1
    seen = [s for s in samples if s.get("other_pids") is not None]
    others = sorted({p for s in seen for p in s["other_pids"]})
    return {"samples": len(samples), "interval_s": interval_s,
            "sm_clock_mhz": {"min": min(clocks), "max": max(clocks)} if clocks else None,
            "temperature_c_max": max(temps) if temps else None,
            "slowdown_temp_c": (fixed or {}).get("slowdown_temp_c"),
            "throttle_samples": throttle,
            "other_pids": others if seen else None,
            "pids_comparable": all(s.get("pids_comparable", True) for s in seen) if seen else None}


def merge_watches(a: Mapping[str, Any] | None, b: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """Two summaries as one (the blocks of an arm, the arms of a comparison)."""
    if not a or not b:
        one = a or b
        return dict(one) if one else None
    def pick(key: str, fn: Any) -> Any:
        vals = [x[key] for x in (a, b) if x.get(key) is not None]
        return fn(vals) if vals else None
    ca, cb = a.get("sm_clock_mhz"), b.get("sm_clock_mhz")
    clocks = [c for c in (ca, cb) if c]
    throttle = dict(a.get("throttle_samples") or {})
    for k, v in (b.get("throttle_samples") or {}).items():
        throttle[k] = throttle.get(k, 0) + v
    others = [x["other_pids"] for x in (a, b) if x.get("other_pids") is not None]
    comparable = [x["pids_comparable"] for x in (a, b) if x.get("pids_comparable") is not None]
    return {"samples": a.get("samples", 0) + b.get("samples", 0), "interval_s": a.get("interval_s") or b.get("interval_s"),
            "sm_clock_mhz": {"min": min(c["min"] for c in clocks), "max": max(c["max"] for c in clocks)} if clocks else None,
            "temperature_c_max": pick("temperature_c_max", max),
            "slowdown_temp_c": pick("slowdown_temp_c", min),
            "throttle_samples": throttle,
            "other_pids": sorted(set().union(*others)) if others else None,
            "pids_comparable": all(comparable) if comparable else None}


@contextmanager
def watch_gpu(index: int = 0, pci_bus_id: str | None = None, interval_s: float = WATCH_INTERVAL_S, *,
              states: bool = False) -> Iterator[dict[str, Any]]:
    """``with watch_gpu(...) as summary:`` samples the GPU through the block; ``summary`` (a dict) is
    filled when the block ends. Without NVML it stays empty: the run is not judged on what was not seen.
    ``states``: the first and the last sample are full ``gpu_state`` reads too, left in ``summary["states"]``
    as (first, last) for the caller to take (``pop_states``): a timing block's before and after, read once
    with the watch's own first and last samples instead of beside them (3 of their queries are the same)."""
    import os

    summary: dict[str, Any] = {}
    with _session() as nv:
        watch = None
        if nv is not None:
            try:
                h = gpu_handle(nv, index, pci_bus_id)
                reasons_fn = _reasons_fn(nv)
                threshold = getattr(nv, "NVML_TEMPERATURE_THRESHOLD_SLOWDOWN", None)
                slowdown = None if threshold is None else _static(
                    ("gpu", index, pci_bus_id, "slowdown"),
                    lambda: _try(nv.nvmlDeviceGetTemperatureThreshold, h, threshold))
                heads, me = family_heads(), os.getpid()
                sizes: dict[int, int] = {}  # the /proc scan once per watch, not per sample

                def family(group: set[int]) -> int:
                    if 0 not in sizes:
                        sizes[0] = family_size(group)
                    return sizes[0]

                def processes() -> dict[str, Any]:
                    pids = gpu_pids(nv, h)
                    others, comparable = (None, None) if pids is None else other_processes(pids, heads, me, family)
                    return {"other_pids": others, "pids_comparable": comparable}

                def sample() -> dict[str, Any]:
                    mask = _try(reasons_fn, h)
                    return {"sm_clock_mhz": _try(nv.nvmlDeviceGetClockInfo, h, nv.NVML_CLOCK_SM),
                            "temperature_c": _try(nv.nvmlDeviceGetTemperature, h, nv.NVML_TEMPERATURE_GPU),
                            "throttle_reasons": None if mask is None else decode_reasons(int(mask)), **processes()}

                def full() -> dict[str, Any]:  # a gpu_state read and the processes: the same sample's keys, and more
                    try:
                        state = _read_state(nv, h, ("gpu", index, pci_bus_id))
                    except Exception:  # noqa: BLE001 - unread, as gpu_state gives it ({}): the watch's own sample
                        state = {}
                    ends.append(state)
                    return {**state, **processes()} if state else sample()

                ends: list[dict[str, Any]] = []  # the gpu_state reads of the first and the last sample

                watch = GpuWatch(sample, interval_s, {"slowdown_temp_c": slowdown}, full if states else None).start()
            except Exception:  # noqa: BLE001 - a broken NVML must not break a benchmark
                watch = None
        try:
            yield summary
        finally:
            if watch is not None:
                summary.update(watch.stop())
                if states:
                    summary["states"] = (ends[0] if ends else {}, ends[-1] if len(ends) > 1 else {})


def pop_states(summary: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """The (first, last) ``gpu_state`` reads a ``watch_gpu(states=True)`` left in its summary, taken out of it; ({},
    {}) without NVML (as ``gpu_state`` gives)."""
    first, last = summary.pop("states", ({}, {}))
    return dict(first), dict(last)
