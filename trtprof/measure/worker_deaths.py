"""How a dead measurement worker's one line is told (``measure.workers.Worker._died``): the end of what its last
capture block took in, its stderr without Python's warnings, and whether a signal from outside ended it.
"""
from __future__ import annotations

import os
import re
import signal

from ..util.thirdparty import clean_lines

STDERR_TAIL_CHARS = 2000  # of a dead worker's stderr, in the error message


def capture_tail(path: str) -> str:
    """The end of what a worker's last capture block took in (``util.thirdparty.SINK_ENV``), as one line;
    "" when there is none or it cannot be read."""
    try:
        with open(path, "rb") as f:
            f.seek(max(0, os.path.getsize(path) - STDERR_TAIL_CHARS))
            text = f.read().decode("utf-8", "replace")
    except OSError:
        return ""
    return " | ".join(clean_lines(text))[-STDERR_TAIL_CHARS:]


_WARNING_LINE = re.compile(r"^\S.*:\d+: \w*Warning: ")


def error_tail(stderr: str) -> str:
    """The end of a dead worker's stderr for its one line, without Python's warnings (``file:line:
    XWarning: …`` and the indented source line after it). A worker killed from outside gets no tail at all
    (``Worker._died``, ``killed_from_outside``): the signal is the cause, and on the H200 its stderr held
    only torch.export's "non-writable buffer" UserWarning, which the one line then carried as if it
    explained the death."""
    kept: list[str] = []
    in_warning = False
    for line in stderr.splitlines():
        if _WARNING_LINE.match(line):
            in_warning = True
            continue
        if in_warning and line.startswith((" ", "\t")):
            continue
        in_warning = False
        if line.strip():
            kept.append(line.strip())
    return " | ".join(kept)[-STDERR_TAIL_CHARS:]


# Signals a process raises on itself when it crashes (a C++ abort, a bad pointer): what its libraries wrote
# just before is the cause. Any other signal came from outside (kill -9, the OOM killer, Ctrl-C): the signal
# is the cause, and what a block wrote before it (warnings) would read as if it explained the death.
CRASH_SIGNALS = frozenset({signal.SIGABRT, signal.SIGSEGV, signal.SIGBUS, signal.SIGFPE, signal.SIGILL})


def killed_from_outside(returncode: int | None) -> bool:
    """Did a signal other than a crash's end the process (``CRASH_SIGNALS``)?"""
    if returncode is None or returncode >= 0:
        return False
    try:
        return signal.Signals(-returncode) not in CRASH_SIGNALS
    except ValueError:
        return True


def how_it_ended(returncode: int | None) -> str:
    """``was killed by SIGKILL`` / ``exited with code 3`` / ``closed its pipe``: the one line names the signal."""
    if returncode is None:
        return "closed its pipe (still running)"
    if returncode < 0:
        try:
            return f"was killed by {signal.Signals(-returncode).name}"
        except ValueError:
            return f"was killed by signal {-returncode}"
    return f"exited with code {returncode}"
