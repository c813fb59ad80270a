"""A TensorRT logger that keeps the last messages, so a failed build can say why.

``build_serialized_network`` returns None on failure and puts the reason only in the log; without a
tail the user sees "build failed" and nothing else. The logger never raises (an exception thrown
from inside TensorRT's callback is lost or aborts the process).
"""
from __future__ import annotations

import gc
from collections import deque
from contextlib import contextmanager
from types import ModuleType
from typing import TYPE_CHECKING, Any, Iterator

if TYPE_CHECKING:
    import tensorrt as trt

TAIL_MESSAGES = 20  # enough for the error and the warnings that led to it


@contextmanager
def collector_paused() -> Iterator[None]:
    """Python's cycle collector off while TensorRT runs native code that calls back into Python (this
    logger). A collection inside such a callback can free TensorRT objects of an earlier build (kept
    alive by an exception's traceback until then), and their destructor waits for the library lock the
    running call holds: TensorRT-RTX's ``parse_from_file`` hung that way in CI on 2026-12-01 (gdb: a
    ``pybind11 … IBuilder`` dealloc from ``tb_dealloc`` under the parse, in ``pthread_mutex_lock``)."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


class LogTail:
    """The last ``keep`` warning/error messages, oldest first."""

    def __init__(self, keep: int = TAIL_MESSAGES) -> None:
        self.messages: deque[str] = deque(maxlen=keep)

    def add(self, severity: str, message: str) -> None:
        self.messages.append(f"[{severity}] {message.strip()}")

    def text(self, last: int | None = None) -> str:
        items = list(self.messages)[-last:] if last else list(self.messages)
        return " | ".join(items)

    def __bool__(self) -> bool:
        return bool(self.messages)


def make_logger(tail: LogTail, module: ModuleType | None = None) -> "trt.ILogger":
    """A ``trt.ILogger`` subclass instance feeding ``tail`` with warnings and errors.

    Defined inside a function because the base class exists only once the library (``trt``:
    ``tensorrt`` or ``tensorrt_rtx``; default ``tensorrt``) is imported. VERBOSE and INFO messages are
    dropped early: a build emits thousands of them.
    """
    from .compat import tensorrt_module

    mod = tensorrt_module(module)

    keep = {
        mod.ILogger.Severity.INTERNAL_ERROR: "internal error",
        mod.ILogger.Severity.ERROR: "error",
        mod.ILogger.Severity.WARNING: "warning",
    }

    def __init__(self: Any) -> None:
        mod.ILogger.__init__(self)

    def log(self: Any, severity: Any, msg: str) -> None:
        label = keep.get(severity)
        if label is not None:
            try:
                tail.add(label, str(msg))
            except Exception:  # never raise into TensorRT
                pass

    # type(): the base is the imported library's ILogger (a value, not a name mypy can check)
    return type("TailLogger", (mod.ILogger,), {"__init__": __init__, "log": log})()
