"""Errors trtprof raises on purpose.

The CLI turns every ``TrtprofError`` into exit code 2 and one line on stderr that names the file and
the cause; anything else is a bug and keeps its traceback.
"""
from __future__ import annotations

from pathlib import Path


def first_line(err: BaseException, limit: int = 300) -> str:
    """The first non-blank line of ``err``'s message, at most ``limit`` characters (its type's name when
    the message is empty): a library's multi-line error inside trtprof's one-line message."""
    lines = [line.strip() for line in str(err).strip().splitlines() if line.strip()]
    return lines[0][:limit] if lines else type(err).__name__


class TrtprofError(Exception):
    """Base class: a user-facing failure with a one-line message."""

    exit_code = 2

    def __init__(self, message: str, *, path: str | Path | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.path = None if path is None else str(path)

    def __str__(self) -> str:
        return f"{self.path}: {self.message}" if self.path else self.message


class MissingDependency(TrtprofError):
    """An optional package is not installed; the message names the extra that brings it."""

    def __init__(self, package: str, extra: str | None, *, why: str = "") -> None:
        # extra=None: a core dependency that went missing (broken install), so name the package
        hint = f"pip install 'trtprof[{extra}]'" if extra else f"pip install {package}"
        msg = f"{package} is not installed{(' (' + why + ')') if why else ''}; install it with: {hint}"
        super().__init__(msg)
        self.package = package
        self.extra = extra


class BadInput(TrtprofError):
    """A command-line value or an input file that cannot be used as given."""


class BadModel(TrtprofError):
    """The model file is missing, empty, truncated, not a model, or not runnable as asked."""


class StaticBatch(BadModel):
    """A model input fixes the batch size, and another was asked. The advice names the option of the
    command that asked (``--batch-sizes`` for most, ``--batch-size`` for ``profile``): a command with
    another option re-raises with ``for_option``."""

    def __init__(self, input_name: str, static: int, asked: int, *, path: str | Path | None = None,
                 option: str = "--batch-sizes") -> None:
        super().__init__(f"input {input_name!r} has a static batch of {static}; batch size {asked} cannot run "
                         f"(use {option} {static})", path=path)
        self.input_name, self.static, self.asked = input_name, static, asked

    def for_option(self, option: str) -> "StaticBatch":
        return StaticBatch(self.input_name, self.static, self.asked, path=self.path, option=option)


class UnsupportedPrecision(TrtprofError):
    """The backend cannot produce the asked precision on this device."""


class BuildFailed(TrtprofError):
    """The backend could not build an engine from a valid model."""


class CacheCorrupt(TrtprofError):
    """A cached artifact does not match its metadata (checksum, missing file, bad JSON)."""


class IncompatibleEngine(TrtprofError):
    """A cached engine was built for another backend version or device."""


class CudaError(TrtprofError):
    """A CUDA call failed; the message carries the CUDA error name."""


class BackendUnavailable(TrtprofError):
    """The backend asked for cannot run here (package or device missing)."""


class OutputNotWritten(TrtprofError):
    """A file trtprof writes could not be written (disk full, ``ulimit -f``, quota): the message names
    the path and the cause, never the model, and says where the finished measurements still are."""


WRITE_ERRNOS = frozenset({28, 27, 122})  # ENOSPC, EFBIG, EDQUOT: the disk or a limit, not the input


def write_failure(err: OSError, path: str | Path | None = None, *, kept: str = "") -> OutputNotWritten:
    """The one-line error for an OSError while writing ``path``."""
    where = path if path is not None else err.filename
    if where is not None:  # an atomic write's temp ``.name.XXXX.tmp`` stands for ``name``
        temp = Path(str(where))
        if temp.name.startswith(".") and temp.name.endswith(".tmp") and temp.name.count(".") >= 3:
            where = temp.parent / temp.name[1:].rsplit(".", 2)[0]
    what = err.strerror or str(err)
    return OutputNotWritten(f"cannot write ({what})" + (f"; {kept}" if kept else ""), path=where)


class OutOfMemory(TrtprofError):
    """A batch does not fit in memory; the message names the batch size, the bytes asked for and a
    smaller batch size to try."""
