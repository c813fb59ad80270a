"""Fault injection for tests/cli/test_faults.py: a test tool, never installed with trtprof.

A test puts this folder first on ``PYTHONPATH`` and names a fault in ``TRTPROF_TEST_FAULT``; Python
imports ``sitecustomize`` at start-up, before the real ``trtprof`` CLI runs, and this module patches
the library call where the fault would surface. The failures are the real exception types with the
real messages, raised where the real library would raise them, so the CLI's handling is tested end to
end without depending on one library version's allocation behaviour or on a full disk being at hand.

Faults (``name:argument``):
- ``ort_oom:N``: ``onnxruntime.InferenceSession.run`` raises ORT's own ``RuntimeException`` "Failed to
  allocate memory for requested buffer of size ..." when an input's leading dimension is >= N.
- ``enospc:PATH`` / ``efbig:PATH``: a file opened for writing whose destination *is* PATH fails its first
  write with ``OSError(ENOSPC)`` / ``OSError(EFBIG)``, as a full disk or ``ulimit -f`` would. PATH is
  absolute and compared as a path (``Path ==`` after ``realpath``), never as a substring: ``enospc:/t/c.json``
  does not hit ``/t/e/convnet.fp32.onnxruntime.0123456789ac.json``. A file's destination is its own path,
  or, for trtprof's atomic-write temp ``DIR/.NAME.XXXX.tmp`` (util/files.py), ``DIR/NAME``. A PATH ending
  in ``/`` names a folder: every file whose destination lies directly in it fails.
"""
from __future__ import annotations

import builtins
import errno
import io
import os
import re
from pathlib import Path

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


_ATOMIC_TEMP = re.compile(r"\.(?P<name>.+)\.[A-Za-z0-9_]+\.tmp")  # util/files.py's mkstemp(prefix=.NAME., suffix=.tmp)


def destination(path: str | os.PathLike) -> Path:
    """The file a write to ``path`` is for: ``path`` itself, or ``DIR/NAME`` for an atomic temp
    ``DIR/.NAME.XXXX.tmp``."""
    real = Path(os.path.realpath(path))
    temp = _ATOMIC_TEMP.fullmatch(real.name)
    return real.parent / temp["name"] if temp else real


def hits(target: str, path: str | os.PathLike) -> bool:
    """Whether a write to ``path`` is the one ``target`` names: the same file, or, for ``DIR/``, a file in DIR."""
    if not os.fspath(path):
        return False
    dest = destination(path)
    if target.endswith("/"):
        return dest.parent == Path(os.path.realpath(target))
    return dest == Path(os.path.realpath(target))


def _inject_write_error(code: int, target: str) -> None:
    if not os.path.isabs(target):
        raise SystemExit(f"TRTPROF_TEST_FAULT: {target!r} is not an absolute path (faults match exact paths)")
    real_open, real_fdopen = builtins.open, os.fdopen

    def failing(raw, path):
        return _FailingWriter(raw, code, str(path)) if hits(target, path) else raw

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
