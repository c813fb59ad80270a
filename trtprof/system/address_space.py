"""A virtual-memory limit (``ulimit -v``) too small for the libraries a measurement maps.

Why: under ``ulimit -v 400000`` a compare died in scipy's import ("failed to map segment from shared
object", a traceback; on the issue's machine it spun there ignoring SIGTERM). numpy, scipy, onnxruntime
and their thread pools map more address space than they use: on the 2-core CPU machine a compare of a
small model failed at 600,000 KiB and ran at 800,000 KiB (2026-12-02). Refused before any work instead,
in one line that names the limit.
"""
from __future__ import annotations

from ..errors import BadInput

# Below this a model-running command cannot even import its libraries (600,000 KiB failed, 800,000 ran):
# 1 GiB leaves room for a model's own weights above the libraries' mappings.
MIN_ADDRESS_SPACE_BYTES = 1 << 30
# The commands that load numpy/scipy/a backend and run models (report, plot, cache, inspect do less).
MODEL_COMMANDS = frozenset({"build", "bench", "compare", "profile", "fix-fp16", "train-compare", "sweep", "demo"})


def address_space_limit() -> int | None:
    """The soft RLIMIT_AS in bytes, None when unlimited or not known (not a POSIX system)."""
    try:
        import resource
    except ImportError:
        return None
    soft, _hard = resource.getrlimit(resource.RLIMIT_AS)
    return None if soft == resource.RLIM_INFINITY or soft < 0 else int(soft)


def check_address_space(command: str) -> None:
    limit = address_space_limit()
    if command not in MODEL_COMMANDS or limit is None or limit >= MIN_ADDRESS_SPACE_BYTES:
        return
    raise BadInput(f"the virtual memory limit (ulimit -v {limit // 1024}) is below the {MIN_ADDRESS_SPACE_BYTES >> 20} "
                   f"MiB that numpy, scipy and the backends map: raise it (ulimit -v unlimited, or at least "
                   f"{MIN_ADDRESS_SPACE_BYTES // 1024})")


def is_mapping_failure(err: BaseException) -> bool:
    """An ImportError/OSError of a shared library that could not be mapped (the address space ran out)."""
    return isinstance(err, (ImportError, OSError)) and "failed to map segment" in str(err)
