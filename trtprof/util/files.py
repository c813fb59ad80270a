"""Files trtprof writes: atomic writes (temp file + rename), file locks, safe names, timestamps.

Out of ``engines/cache.py``, where they began: every wing writes results, pages and engines the same way,
and none of them should need the engine store to do it."""

from __future__ import annotations

import contextlib
import os
import tempfile
import time
from pathlib import Path
from typing import Callable, Iterator

from ..errors import MissingDependency
from .console import unescaped


def file_lock(path: Path, timeout: float):
    try:
        from filelock import FileLock
    except ImportError as err:  # pragma: no cover - core dependency
        raise MissingDependency("filelock", None) from err
    return FileLock(str(path), timeout=timeout)


def user_mode() -> int:
    """0o666 minus the process umask: the mode ``open()`` would give a new file (mkstemp gives 0600)."""
    mask = os.umask(0)
    os.umask(mask)
    return 0o666 & ~mask


def atomic_write_bytes(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` via a temp file in the same folder and an atomic rename."""
    path = Path(path)
    fd, tmp = tempfile.mkstemp(prefix=temp_prefix(path.name), suffix=".tmp", dir=path.parent)
    try:
        os.fchmod(fd, user_mode())  # results and engines are shared files, not secrets
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except OSError as err:
        unlink_quietly(Path(tmp))
        if err.filename is None:  # write()/fsync() of a full disk name no file: the message must (safety.md)
            err.filename = str(path)
        raise
    except BaseException:
        unlink_quietly(Path(tmp))
        raise


def atomic_write_text(path: Path, text: str) -> None:
    """``text`` as UTF-8 (whatever the locale), a file name's surrogate escapes as the characters they stand for."""
    try:
        data = text.encode("utf-8")
    except UnicodeEncodeError:  # a non-ASCII model name under LC_ALL=C
        data = unescaped(text).encode("utf-8")
    atomic_write_bytes(path, data)


def unlink_quietly(path: Path) -> None:
    try:
        path.unlink()
    except FileNotFoundError:
        pass


# the longest stem trtprof puts in a file name it derives (an engine entry, a trace): a 245-character model
# name once made its engine entry's name (stem + precision + backend + key + suffix) pass the 255 bytes a file
# name may have, after the build (issue 45)
STEM_MAX = 96
# the longest part of an output's own name kept in its temp file's name (``.NAME.XXXXXXXX.tmp``), so that any
# name the file system takes can be written atomically
TEMP_NAME_PART_MAX = 120


def safe_stem(text: str) -> str:
    """A file-name-safe stem: letters, digits, '-' and '_' kept, anything else '_'; longer than ``STEM_MAX``,
    its first characters and a hash of the whole (distinct long names stay distinct)."""
    stem = "".join(c if c.isalnum() or c in "-_" else "_" for c in text) or "model"
    if len(stem) <= STEM_MAX:
        return stem
    import hashlib

    return f"{stem[:STEM_MAX - 9]}-{hashlib.sha256(text.encode('utf-8', 'surrogateescape')).hexdigest()[:8]}"


def temp_prefix(name: str) -> str:
    """The prefix of an atomic write's temp file for the file ``name``: ``.name.``, the name cut to
    ``TEMP_NAME_PART_MAX`` characters (a 250-character output name must still leave room for the temp's)."""
    return f".{name[:TEMP_NAME_PART_MAX]}."


def now_iso() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S%z")


@contextlib.contextmanager
def dirs_kept_only_if_used(path: Path, tidy: Callable[[Path], None] | None = None) -> Iterator[Path]:
    """Make ``path`` (and missing parents) for the block; afterwards remove again, innermost first, each dir
    this call made that is still empty: a failed build leaves no empty ``<model>-<backend>-<hash>/`` behind
    (issue 34). A dir that existed before, or that holds anything, is never touched (``os.rmdir`` removes
    empty dirs only). ``tidy(dir)`` runs first on each made dir: it may remove what the block itself left
    there and no one needs (a failed build's lock files)."""
    path = Path(path)
    made = []
    for d in [path, *path.parents]:
        if d.exists():
            break
        made.append(d)
    path.mkdir(parents=True, exist_ok=True)
    try:
        yield path
    finally:
        for d in made:  # innermost first
            try:
                if tidy is not None and d.is_dir():
                    tidy(d)
                d.rmdir()
            except OSError:  # not empty (the build wrote its engines: kept), or already gone
                break
