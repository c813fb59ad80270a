"""Memory and size per engine: artifact bytes, and memory in use while it infers.

Why: an FP16 engine needs about half the weights and activations of an FP32 one, which decides how
many instances (or how large a batch) fit on a device; a latency figure does not show it. What can
be measured differs by backend, so each result says what it measured (``kind`` and ``method``):

* **torch** (``TorchRunner.memory_report``): the caching allocator's peak of allocated bytes over
  the measurement (weights, activations, cuDNN workspaces), and what it holds reserved from the
  driver. The timing loop's own input/output buffers are plain cudaMalloc, outside that allocator.
* **TensorRT** (``TensorRTRunner.memory_report``): the engine's activation memory per execution
  context (``ICudaEngine.device_memory_size_v2``, the STATIC allocation a context makes) times the
  contexts in use; the weights on the device are about the plan's bytes (``artifact_bytes``).
* **ONNX Runtime on the CPU**: the process's resident set (``/proc/self/statm``): how much it grew
  when the engine was loaded and how much more during the timed runs (the arena grows at the
  first runs). RSS is process-wide, so another thread allocating at the same time shows up too.
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Any

RSS_METHOD = ("resident set size (/proc/self/statm) before/after loading the engine and around its timed runs, "
              "the C heap's free pages handed back first (malloc_trim) so that the load order does not move it")
# What a negative RSS delta says about the engine's memory: nothing. RSS counts pages (4 KiB) of the
# whole process; another thread, the allocator or Python freeing memory meanwhile moves it by more.
RSS_RESOLUTION = ("RSS is process-wide (page-granular); a delta below zero means memory freed elsewhere in the "
                  "process outweighed the engine's: its own use was below what RSS resolves here")


def artifact_bytes(path: Any) -> int | None:
    """Bytes of an engine's artifact on disk (None when it is gone)."""
    try:
        return int(Path(path).stat().st_size)
    except OSError:
        return None


def rss_bytes() -> int | None:
    """This process's resident set in bytes (Linux ``/proc/self/statm``); None elsewhere."""
    try:
        with open("/proc/self/statm", encoding="utf-8", errors="replace") as f:
            resident_pages = int(f.read().split()[1])
    except (OSError, ValueError, IndexError):
        return None
    return resident_pages * os.sysconf("SC_PAGE_SIZE")


def settled_rss_bytes() -> int | None:
    """``rss_bytes`` after handing the C heap's free pages back to the kernel (glibc ``malloc_trim(0)``).

    Why: the engines bench loads and runs one after another in one process. Without it, pages one engine
    freed stay resident and the next engine's allocations reuse them, so its RSS delta depended on the
    load order (an int8 engine measured 0.09-0.45 MiB after fp32, below its own 0.39 MiB artifact, and
    2.0-2.4 MiB when loaded first; with the trim 1.2-1.3 against 1.4-1.8 MiB, issue 44). Elsewhere
    (no glibc): the plain RSS."""
    _malloc_trim()
    return rss_bytes()


def _malloc_trim() -> bool:
    """glibc's ``malloc_trim(0)``; False where there is no glibc (macOS, musl) or it cannot be loaded."""
    import ctypes
    import ctypes.util

    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        trim = libc.malloc_trim
    except (OSError, AttributeError):
        return False
    trim.argtypes, trim.restype = [ctypes.c_size_t], ctypes.c_int
    trim(0)
    return True


def proc_kib_field(path: str, key: str) -> int | None:
    """Bytes of a "Key:   123 kB" line of a /proc file (``/proc/meminfo``, ``/proc/self/status``), else None."""
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            for line in f:
                if line.startswith(key + ":"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return None


def peak_rss_bytes() -> int | None:
    """This process's high-water mark of resident memory (``VmHWM`` in ``/proc/self/status``)."""
    return proc_kib_field("/proc/self/status", "VmHWM")


def reset_peak_rss() -> bool:
    """Lower ``VmHWM`` to the resident set now (Linux >= 4.0: "5" into ``/proc/self/clear_refs``), so
    the next peak read covers only what runs after it. False where the kernel does not allow it."""
    try:
        with open("/proc/self/clear_refs", "w", encoding="utf-8") as f:
            f.write("5")
    except OSError:
        return False
    return True


def reset_peak(runner: Any) -> None:
    """Start a new peak window on runners that keep one (torch's allocator); others: nothing to do."""
    reset = getattr(runner, "reset_memory_peak", None)
    if reset is not None:
        reset()


def delta(after: int | None, before: int | None) -> int | None:
    return None if after is None or before is None else int(after) - int(before)


def inference_memory(runner: Any, *, rss_before_load: int | None, rss_after_load: int | None,
                     rss_before_run: int | None, rss_after_run: int | None) -> dict[str, Any]:
    """The ``memory`` entry of one result: the runner's own report (device memory) when it has one,
    else the host RSS deltas (CPU runners)."""
    report = getattr(runner, "memory_report", None)
    if report is not None:
        return dict(report())
    load, run = delta(rss_after_load, rss_before_load), delta(rss_after_run, rss_before_run)
    if load is None and run is None:
        return {"kind": "n/a", "reason": "no /proc/self/statm on this system: RSS unknown"}
    total = (load or 0) + (run or 0)
    entry = {"kind": "host_rss", "load_delta_bytes": load, "inference_delta_bytes": run,
             "in_use_bytes": total, "rss_bytes": rss_after_run, "method": RSS_METHOD}
    if total < 0:  # RSS is process-wide: it fell because something else was freed, not because the engine gave
        entry.update({"in_use_bytes": None, "measured_delta_bytes": total, "below_resolution": True,
                      "resolution": RSS_RESOLUTION})
    return entry


def in_use_bytes(memory: dict[str, Any]) -> int | None:
    """One number for tables: the bytes an engine holds while it infers, by what its backend measured."""
    for key in ("in_use_bytes", "allocated_peak_bytes"):
        if memory.get(key) is not None:
            return int(memory[key])
    return None


def fmt_in_use(memory: dict[str, Any]) -> str:
    """The memory-in-use cell: ``fmt_bytes``, or "below resolution (RSS fell 0.41 MiB)" where the
    measured delta was negative (never a negative size)."""
    if memory.get("below_resolution"):
        return f"below resolution (RSS fell {fmt_bytes(-int(memory.get('measured_delta_bytes') or 0))})"
    return fmt_bytes(in_use_bytes(memory))


def _digits(x: float) -> str:
    """3 significant digits, whole numbers with thousands separators from 100 up ("1,024", never the
    "1.02e+03" that ``:.3g`` prints from 999.5 up)."""
    return f"{x:,.0f}" if abs(x) >= 100 else f"{x:.3g}"


def fmt_bytes(value: Any) -> str:
    """MiB with 3 significant digits, or "n/a": one unit down a table's column."""
    if value is None:
        return "n/a"
    mib = float(value) / (1 << 20)
    return f"{_digits(mib)} MiB" if abs(mib) >= 0.01 else f"{int(value)} B"


def fmt_size(value: Any) -> str:
    """A size in a sentence (the max-batch lines, the out-of-memory errors): GiB from 1 GiB up, else
    ``fmt_bytes`` ("512 MiB", not "0.5 GiB")."""
    if value is not None and abs(float(value)) >= 1 << 30:
        return f"{_digits(float(value) / (1 << 30))} GiB"
    return fmt_bytes(value)


COMPARE_NOTE = "measured in the accuracy pass (one inference per arm in this process; the timing ran in its loads)"


def outputs_and_memory(runners: dict[str, Any], load_rss: dict[str, tuple[int | None, int | None]],
                       run: Any) -> tuple[dict[str, Any], dict[str, dict[str, Any]]]:
    """``compare``'s accuracy pass with memory: per arm, ``run(runner)`` (its outputs) and the
    memory in use around that inference (the allocator's peak on torch; RSS growth since the engine's
    load on the CPU). The timed runs happen in worker processes, where nothing is read."""
    outputs, used = {}, {}
    for name, runner in runners.items():
        before = rss_bytes()
        reset_peak(runner)
        outputs[name] = run(runner)
        used[name] = {**inference_memory(runner, rss_before_load=load_rss.get(name, (None, None))[0],
                                         rss_after_load=load_rss.get(name, (None, None))[1], rss_before_run=before,
                                         rss_after_run=rss_bytes()), "measured_during": COMPARE_NOTE}
    return outputs, used
