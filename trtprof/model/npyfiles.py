"""The user's ``.npy`` / ``.npz`` files read as data, never trusted: every failure one line naming the file.

Why a module: ``np.load`` on a file from anywhere raised ``BadZipFile`` (truncated or bad-CRC npz),
``TypeError`` (a ``.npy`` renamed ``.npz``: not a context manager) and ``MemoryError`` (a header
declaring 10¹²×256 floats: 931 TiB allocated before a byte is read), each a traceback; a FIFO named
``x.npy`` in an inputs folder hung forever (issue 36). Here the header is read first and its declared
size checked against the bytes the file holds, only regular files inside the folder are opened, and
object arrays (pickles) are refused.

Bounded before anything is decompressed or read (issue 45: a 35 MB ``.npz`` whose member inflated to
8 GB drove ``bench`` to 23.5 GB and ``compare`` to the OOM killer): an ``.npz``'s archive directory
(the uncompressed sizes it declares) and a folder's file sizes are summed first, then each array's
header is read for its sample count, against ``InputCap``: at most ``MAX_SAMPLES`` samples and half the
memory available now (the memory preflight's ``available_memory_bytes``). A member never inflates past
the size the directory declares (``zipfile`` stops there and checks the CRC), so the check holds.
"""
from __future__ import annotations

import math
import os
import stat
import zipfile
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import IO

import numpy as np

from ..errors import BadInput
from ..system import preflight
from ..system.memory import fmt_size

NPY_MAGIC = b"\x93NUMPY"
ZIP_MAGIC = b"PK"
READ_ERRORS = (OSError, ValueError, EOFError, MemoryError, zipfile.BadZipFile, zlib.error, KeyError)
MAX_SAMPLES = 1_000_000  # --inputs samples: accuracy runs each through every engine; a million is hours on a CPU
UNKNOWN_MEMORY_BYTES = 4 << 30  # the byte cap where the memory available cannot be read (no /proc/meminfo)


@dataclass(frozen=True)
class InputCap:
    """How much ``--inputs`` may hold: ``samples`` and ``nbytes`` (all arrays together, uncompressed);
    ``why`` says where the byte cap comes from, for the error line."""

    nbytes: int
    why: str
    samples: int = MAX_SAMPLES

    @classmethod
    def now(cls) -> "InputCap":
        """Half the memory available now (the other half for the engines, outputs and activations)."""
        available = preflight.available_memory_bytes()
        if available is None:
            return cls(UNKNOWN_MEMORY_BYTES, "the memory available is unknown here")
        return cls(available // 2, f"half the {fmt_size(available)} of memory available now")

    def describe(self) -> str:
        return f"--inputs are capped at {self.samples:,} samples and {fmt_size(self.nbytes)} ({self.why})"

    def check_bytes(self, nbytes: int, where: str, what: str) -> None:
        if nbytes > self.nbytes:
            raise BadInput(f"{where}: {what} {fmt_size(nbytes)} ({nbytes:,} bytes); {self.describe()}: "
                           "give fewer samples")

    def check_samples(self, samples: int, where: str, what: str = "holds") -> None:
        if samples > self.samples:
            raise BadInput(f"{where}: {what} {samples:,} samples; {self.describe()}: give fewer samples")


def _checked_read(fh: IO[bytes], available: int, where: str, cap: InputCap | None = None) -> np.ndarray:
    """The array in ``fh`` (a .npy stream of ``available`` bytes), refused when its header declares
    more data than the stream holds, more samples than ``cap`` allows, or an object dtype."""
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
    if cap is not None and shape:
        cap.check_samples(int(shape[0]), where, f"its header declares shape {tuple(shape)}:")
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


def load_npy(path: Path, where: str, folder: Path | None = None, cap: InputCap | None = None) -> np.ndarray:
    regular_file(path, folder, where)
    try:
        with open(path, "rb") as fh:
            if fh.read(len(NPY_MAGIC)) != NPY_MAGIC:
                raise BadInput(f"{where}: not a .npy file (no NUMPY magic)")
            fh.seek(0)
            return _checked_read(fh, os.fstat(fh.fileno()).st_size, where, cap)
    except BadInput:
        raise
    except READ_ERRORS as err:
        raise BadInput(f"{where}: not a readable .npy ({type(err).__name__}: {err})") from err


def load_folder(folder: Path, where: str, cap: InputCap) -> dict[str, np.ndarray]:
    """``NAME.npy`` files of ``folder`` by name: their sizes summed against ``cap`` before any is read."""
    paths = sorted(Path(folder).glob("*.npy"))
    for p in paths:  # regular files inside the folder only: a FIFO named x.npy would block forever
        regular_file(p, folder, f"{where}: {p.name}")
    cap.check_bytes(sum(p.stat().st_size for p in paths), where, f"its {len(paths)} .npy file(s) hold")
    return {p.stem: load_npy(p, f"{where}: {p.name}", folder=folder, cap=cap) for p in paths}


def load_npz(path: Path, where: str, cap: InputCap | None = None) -> dict[str, np.ndarray]:
    """Arrays by name (``x.npy`` in the zip → ``x``), each header checked before its data is read; the
    zip's CRC is checked as each member is read to its end. With ``cap``, the uncompressed sizes the
    archive directory declares are checked against it before any member is decompressed."""
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
            members = zf.infolist()
            if cap is not None:
                cap.check_bytes(sum(i.file_size for i in members), where,
                                f"its archive directory declares {len(members)} member(s) uncompressing to")
            for info in members:
                name = info.filename[:-4] if info.filename.endswith(".npy") else info.filename
                with zf.open(info) as member:
                    out[name] = _checked_read(member, info.file_size, f"{where}: array {name!r}", cap)  # type: ignore[arg-type]
                    member.read(1)  # to its end: the CRC check
    except BadInput:
        raise
    except READ_ERRORS as err:
        raise BadInput(f"{where}: not a readable .npz ({type(err).__name__}: {err})") from err
    return out
