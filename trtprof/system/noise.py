"""CPU measurement noise: what the machine was doing (recorded), and a warning with advice that fits
when a host-timed result is too spread to trust (pyperf's system checks, in miniature)."""
from __future__ import annotations

import os
from pathlib import Path
from typing import Any

# Above this coefficient of variation (std/mean) a host-timed latency is dominated by scheduling
# noise rather than the model: medians of two runs can then differ by more than an FP16-vs-FP32 gap.
# 10 % is where pyperf calls a benchmark "unstable" (its default check uses std > 10 % of mean).
CPU_CV_WARN = 0.10

_CPUFREQ = Path("/sys/devices/system/cpu/cpu0/cpufreq")


def _read(path: Path) -> str | None:
    try:
        return path.read_text(encoding="utf-8", errors="replace").strip()
    except OSError:
        return None


def cpu_state() -> dict[str, Any]:
    """Governor and frequencies of cpu0 where sysfs exposes them, cores this process may use, load
    average. Missing items are left out (containers and VMs often hide cpufreq)."""
    state: dict[str, Any] = {}
    governor = _read(_CPUFREQ / "scaling_governor")
    if governor:
        state["governor"] = governor
    for key, name in (("cur_freq_mhz", "scaling_cur_freq"), ("max_freq_mhz", "cpuinfo_max_freq")):
        value = _read(_CPUFREQ / name)
        if value and value.isdigit():
            state[key] = int(value) // 1000
    try:
        state["usable_cores"] = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        state["usable_cores"] = os.cpu_count()
    try:
        state["load_average"] = [round(x, 2) for x in os.getloadavg()]
    except OSError:
        pass
    return state


def cpu_noise_warning(cv: float, *, threads: int | None, duration_s: float | None,
                      state: dict[str, Any] | None = None) -> str | None:
    """A warning for a host-timed result whose CV exceeds ``CPU_CV_WARN``, with the advice that
    applies here: fewer threads than cores, a quiet machine (load average), longer runs, governor."""
    if not cv > CPU_CV_WARN:
        return None
    state = cpu_state() if state is None else state
    cores = state.get("usable_cores") or os.cpu_count() or 1
    advice = []
    load = (state.get("load_average") or [None])[0]
    if load is not None and load > 0.5 * cores:
        advice.append(f"the machine is busy (load average {load:g} on {cores} cores): run on a quiet machine")
    if threads is None:
        advice.append(f"pin the thread count, e.g. --threads {max(1, cores // 2)}")
    if duration_s is None or duration_s < 10:
        advice.append("measure longer (--duration-s 10 or more) so bursts average out")
    if state.get("governor") not in (None, "performance"):
        advice.append(f"CPU governor is {state['governor']!r}: 'performance' keeps the clock steady")
    return (f"latency CV is {cv:.1%} (> {CPU_CV_WARN:.0%}): the CPU numbers are noisy"
            + ("; " + "; ".join(advice) if advice else ""))
