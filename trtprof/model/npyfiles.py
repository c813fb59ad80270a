"""The user's ``.npy`` / ``.npz`` files read as data, never trusted: every failure one line naming the file.

Why a module: ``np.load`` on a file from anywhere raised ``BadZipFile`` (truncated or bad-CRC npz),
``TypeError`` (a ``.npy`` renamed ``.npz``: not a context manager) and ``MemoryError`` (a header
declaring 10¹²×256 floats: 931 TiB allocated before a byte is read), each a traceback; a FIFO named
``x.npy`` in an inputs folder hung forever (issue 36). Here the header is read first and its declared
size checked against the bytes the file holds, only regular files inside the folder are opened, and
object arrays (pickles) are refused.
"""
from __future__ import annotations

import math
import os
import stat
import zipfile
import zlib
from pathlib import Path
from typing import IO

import numpy as np

from ..errors import BadInput

NPY_MAGIC = b"\x93NUMPY"
ZIP_MAGIC = b"PK"
READ_ERRORS = (OSError, ValueError, EOFError, MemoryError, zipfile.BadZipFile, zlib.error, KeyError)


def _checked_read(fh: IO[bytes], available: int, where: str) -> np.ndarray:
    """The array in ``fh`` (a .npy stream of ``available`` bytes), refused when its header declares
    more data than the stream holds or an object dtype."""
    fmt = np.lib.format
    version = fmt.read_magic(fh)
    header = fmt.read_array_header_1_0 if version == (1, 0) else fmt.read_array_header_2_0
    shape, fortran, dtype = header(fh)  # type: ignore[operator]
    if dtype.hasobject:
        raise BadInput(f"{where}: holds Python objects (a pickle), not numbers; refused")
    declared = math.prod(int(d) for d in shape) * dtype.itemsize
    left = available - fh.tell()
    if declared > left:
        raise BadInput(f"{where}: its header declares shape {tuple(shape)} of {dtype} ({declared:,} bytes) but "
                       f"the file holds {max(left, 0):,}: truncated or corrupt")
    buf = bytearray(declared)  # read into place: a writable array, as np.load gives, with no second copy
    view, got = memoryview(buf), 0
    while got < declared:
        n = fh.readinto(view[got:])  # type: ignore[attr-defined]
        if not n:
            raise BadInput(f"{where}: ends after {got:,} of the {declared:,} bytes its header declares: truncated")
        got += n
    data = np.frombuffer(buf, dtype=dtype, count=math.prod(int(d) for d in shape))
    return data.reshape(shape, order="F" if fortran else "C")


def regular_file(path: Path, folder: Path | None, where: str) -> None:
    """Refuse what is not a regular file (a FIFO would block the read forever, a device never ends) or,
    inside ``folder``, a link leading out of it."""
    try:
        mode = os.stat(path).st_mode
    except OSError as err:
        raise BadInput(f"{where}: cannot read ({err.strerror or err})") from err
    if not stat.S_ISREG(mode):
        raise BadInput(f"{where}: not a regular file (a FIFO, device or folder); refused")
    if folder is not None and Path(folder).resolve() not in Path(path).resolve().parents:
        raise BadInput(f"{where}: links outside the inputs folder; refused")


def load_npy(path: Path, where: str, folder: Path | None = None) -> np.ndarray:
    regular_file(path, folder, where)
    try:
        with open(path, "rb") as fh:
            if fh.read(len(NPY_MAGIC)) != NPY_MAGIC:
                raise BadInput(f"{where}: not a .npy file (no NUMPY magic)")
            fh.seek(0)
            return _checked_read(fh, os.fstat(fh.fileno()).st_size, where)
    except BadInput:
        raise
    except READ_ERRORS as err:
        raise BadInput(f"{where}: not a readable .npy ({type(err).__name__}: {err})") from err


def load_npz(path: Path, where: str) -> dict[str, np.ndarray]:
    """Arrays by name (``x.npy`` in the zip → ``x``), each header checked before its data is read; the
    zip's CRC is checked as each member is read to its end."""
    regular_file(path, None, where)
    with open(path, "rb") as fh:
        head = fh.read(len(NPY_MAGIC))
    if head.startswith(NPY_MAGIC):
        raise BadInput(f"{where}: is a single .npy array, not an .npz (np.savez): give a folder of NAME.npy or "
                       "save an .npz")
    if not head.startswith(ZIP_MAGIC):
        raise BadInput(f"{where}: not a readable .npz (not a zip of .npy arrays, as np.savez writes)")
    out: dict[str, np.ndarray] = {}
    try:
        with zipfile.ZipFile(path) as zf:
            for info in zf.infolist():
                name = info.filename[:-4] if info.filename.endswith(".npy") else info.filename
                with zf.open(info) as member:
                    out[name] = _checked_read(member, info.file_size, f"{where}: array {name!r}")  # type: ignore[arg-type]
                    member.read(1)  # to its end: the CRC check
    except BadInput:
        raise
    except READ_ERRORS as err:
        raise BadInput(f"{where}: not a readable .npz ({type(err).__name__}: {err})") from err
    return out
