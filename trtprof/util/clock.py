"""The command's clock: ``time.perf_counter``'s value when this process was created, where compare's
``--time-budget-s`` starts counting. Apart from ``trtprof.measure.interleave`` so that every ``trtprof``
command (``--version`` too) reads it without importing numpy and the statistics (~0.13 s).
"""
from __future__ import annotations

import os
import time
from dataclasses import dataclass
from typing import Callable


def process_start(clock: Callable[[], float] = time.perf_counter) -> float | None:
    """``clock()``'s value when this process was created (Linux: ``/proc/self/stat``, 10 ms ticks), or
    None where that cannot be read. A user's "``--time-budget-s 12``" is the command's wall time, and the
    interpreter's start and trtprof's imports are part of it (0.3–0.7 s on the shared 2-core machine at
    load 3–10, with the cache lookup: benchmarks/budget_cpu.py)."""
    try:
        with open("/proc/self/stat", encoding="ascii") as f:
            start_ticks = int(f.read().rsplit(")", 1)[1].split()[19])  # field 22: starttime, in ticks after boot
        with open("/proc/uptime", encoding="ascii") as f:
            uptime_s = float(f.read().split()[0])
        age_s = uptime_s - start_ticks / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError, AttributeError):
        return None
    return clock() - age_s if age_s >= 0 else None


@dataclass(frozen=True)
class CommandClock:
    """When the command started (a ``time.perf_counter()`` value: the process's start when it is the
    command, else the moment ``cli.main`` began) and when its imports were done (after the parse)."""

    started: float
    imported: float

    @property
    def imports_s(self) -> float:
        return self.imported - self.started
