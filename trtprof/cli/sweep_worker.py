"""``python -m trtprof.cli.sweep_worker [--cpus 0-7] -- COMMAND ARGS…``: one trtprof command, pinned.

Why a wrapper instead of ``taskset``: the pinning is done by the process itself
(``os.sched_setaffinity``), so it works wherever Python does without an extra tool, and it happens
before onnxruntime or torch size their thread pools (onnxruntime sizes its pool from the affinity
mask; torch and OpenMP read the ``OMP_NUM_THREADS`` the sweep sets beside it).
"""
from __future__ import annotations

import os
import sys


def parse_cpus(text: str) -> set[int]:
    """``0-3,8`` → {0, 1, 2, 3, 8}."""
    cpus: set[int] = set()
    for part in text.split(","):
        if "-" in part:
            low, high = part.split("-")
            cpus.update(range(int(low), int(high) + 1))
        elif part.strip():
            cpus.add(int(part))
    return cpus


def die_with_parent() -> None:
    """Linux: get SIGTERM when the sweep (or the Ray worker) that started this process dies, so a
    killed sweep leaves no cell running on a GPU. Elsewhere a no-op."""
    if not sys.platform.startswith("linux"):
        return
    try:
        import ctypes
        import signal

        libc = ctypes.CDLL("libc.so.6", use_errno=True)
        parent = os.getppid()
        libc.prctl(1, int(signal.SIGTERM))  # PR_SET_PDEATHSIG
        if os.getppid() != parent:  # the parent died before prctl took effect
            os.kill(os.getpid(), signal.SIGTERM)
    except (OSError, AttributeError):
        pass


def main(argv: list[str]) -> int:
    die_with_parent()
    if argv[:1] == ["--cpus"]:
        cpus = parse_cpus(argv[1])
        argv = argv[2:]
        if hasattr(os, "sched_setaffinity"):
            os.sched_setaffinity(0, cpus)
    if argv[:1] == ["--"]:
        argv = argv[1:]
    from . import main as trtprof_main

    return trtprof_main(argv)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
