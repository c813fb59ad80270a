"""Fault injection for tests/cli/test_faults.py: a test tool, never installed with trtprof.

A test puts this folder first on ``PYTHONPATH`` and names a fault in ``TRTPROF_TEST_FAULT``; Python
imports ``sitecustomize`` at start-up, before the real ``trtprof`` CLI runs, and this module patches
the library call where the fault would surface. The failures are the real exception types with the
real messages, raised where the real library would raise them, so the CLI's handling is tested end to
end without depending on one library version's allocation behaviour or on a full disk being at hand.

Faults (``name:argument``):
- ``ort_oom:N``: ``onnxruntime.InferenceSession.run`` raises ORT's own ``RuntimeException`` "Failed to
  allocate memory for requested buffer of size ..." when an input's leading dimension is >= N.
- ``enospc:TEXT`` / ``efbig:TEXT``: a file opened for writing whose path contains TEXT fails its first
  write with ``OSError(ENOSPC)`` / ``OSError(EFBIG)``, as a full disk or ``ulimit -f`` would.
"""
from __future__ import annotations

import builtins
import errno
import io
import os

FAULT = os.environ.get("TRTPROF_TEST_FAULT", "")


def _inject_ort_oom(min_batch: int) -> None:
    import onnxruntime
    from onnxruntime.capi.onnxruntime_pybind11_state import RuntimeException

    real_run = onnxruntime.InferenceSession.run

    def run(self, output_names, input_feed, run_options=None):
        for value in input_feed.values():
            shape = getattr(value, "shape", ())
            if shape and shape[0] >= min_batch:
                asked = int(value.nbytes) * 4
                raise RuntimeException(
                    "[ONNXRuntimeError] : 6 : RUNTIME_EXCEPTION : Non-zero status code returned while running "
                    f"Conv node. Name:'conv1' Status Message: Failed to allocate memory for requested buffer "
                    f"of size {asked}")
        return real_run(self, output_names, input_feed, run_options)

    onnxruntime.InferenceSession.run = run


class _FailingWriter:
    """Wraps a file object: the first write raises the injected OSError, like a full disk."""

    def __init__(self, raw, code: int, path: str) -> None:
        self._raw, self._code, self._path = raw, code, path

    def write(self, data):
        raise OSError(self._code, os.strerror(self._code), self._path)

    def __getattr__(self, name):
        return getattr(self._raw, name)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self._raw.close()
        return False

    def __iter__(self):
        return iter(self._raw)


def _inject_write_error(code: int, needle: str) -> None:
    real_open, real_fdopen = builtins.open, os.fdopen

    def failing(raw, path):
        return _FailingWriter(raw, code, str(path)) if needle in str(path) else raw

    def open_(file, mode="r", *args, **kwargs):
        raw = real_open(file, mode, *args, **kwargs)
        return failing(raw, file) if isinstance(file, (str, os.PathLike)) and set(mode) & set("wax+") else raw

    def fdopen(fd, mode="r", *args, **kwargs):
        raw = real_fdopen(fd, mode, *args, **kwargs)
        path = os.readlink(f"/proc/self/fd/{fd}") if os.path.exists(f"/proc/self/fd/{fd}") else ""
        return failing(raw, path) if set(mode) & set("wax+") else raw

    builtins.open = io.open = open_  # type: ignore[assignment]
    os.fdopen = fdopen  # type: ignore[assignment]


if FAULT:
    _name, _, _arg = FAULT.partition(":")
    if _name == "ort_oom":
        _inject_ort_oom(int(_arg))
    elif _name in ("enospc", "efbig"):
        _inject_write_error(errno.ENOSPC if _name == "enospc" else errno.EFBIG, _arg)
    else:
        raise SystemExit(f"TRTPROF_TEST_FAULT: unknown fault {FAULT!r}")
