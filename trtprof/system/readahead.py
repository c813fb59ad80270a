"""Ask the OS to read the CUDA math libraries a process has begun to load into the page cache, in the background
(issue 42): host I/O only, no CUDA call, no library loaded.

On a fresh GPU machine the first compare was 3-9 s slower than the next one in every pair measured (H200,
2026-12-04f): life 0's accuracy pass, where each arm's first runs are made, took 5.6 s against 3.4 s. cuDNN 9
loads its engine libraries (``libcudnn_engines_precompiled.so.9`` and its siblings, about a gigabyte) at a first
convolution, not when ORT's CUDA provider loads ``libcudnn.so.9``, and cuBLASLt loads its kernels at a first GEMM;
read from a cold disk, that is page faults scattered over those files. If that is the cause, a readahead of the
whole files, asked as soon as the provider has loaded (``libcudnn.so.9`` mapped), overlaps those reads with the
engines' loading and the parent's own start. If the cause is kernels compiled just in time (the driver's compute
cache), this changes nothing. ``benchmarks/cache_residency.py`` (stage ``caches``) tells the two apart; stage
``coldstart`` measures a compare with and without this after the files were evicted from the page cache.

**Built 2026-12-05 without a GPU; not yet run on one.** ``TRTPROF_ORT_READAHEAD=0`` turns it off.
"""
from __future__ import annotations

import os
import threading
from pathlib import Path
from typing import Callable, Iterable

ENV = "TRTPROF_ORT_READAHEAD"  # "0": no readahead (for the A/B of stage coldstart)
# the libraries a CUDA process maps that load their kernels late (cuDNN's engines, cuBLAS(Lt)'s kernels)
MAPPED = ("libcudnn", "libcublas")
# cuDNN's sub-libraries loaded on first use, next to the libcudnn.so.9 that was mapped; "adv" (RNNs, attention) is
# not what a convolution needs
SIBLINGS = "libcudnn_*.so*"
SKIP = ("libcudnn_adv",)
# the window of one POSIX_FADV_WILLNEED: Linux reads at most max(io_pages, ra_pages) of one call (a whole-file call
# on this workplace's 6.18 kernel brought 8.4 of a 36.6 MB file in; calls of 2 MB brought all of it, in 17 ms)
CHUNK = 2 << 20
_STARTED: set[str] = set()  # the files this process asked for already
_LOCK = threading.Lock()


def enabled() -> bool:
    return os.environ.get(ENV, "1") != "0"


def mapped_libraries(maps: str) -> list[str]:
    """The files in ``/proc/self/maps``' text whose names start with one of ``MAPPED``."""
    found = []
    for line in maps.splitlines():
        parts = line.split(None, 5)
        path = parts[5].strip() if len(parts) == 6 else ""
        if path.startswith("/") and os.path.basename(path).startswith(MAPPED) and path not in found:
            found.append(path)
    return found


def libraries_to_read(maps: str) -> list[str]:
    """The mapped ``MAPPED`` libraries and, next to each mapped ``libcudnn``, its ``SIBLINGS`` but ``SKIP``."""
    mapped = mapped_libraries(maps)
    files = list(mapped)
    for folder in sorted({os.path.dirname(p) for p in mapped if os.path.basename(p).startswith("libcudnn")}):
        for sibling in sorted(Path(folder).glob(SIBLINGS)):
            name = str(sibling)
            if sibling.is_file() and not sibling.name.startswith(SKIP) and name not in files:
                files.append(name)
    return files


def advise_whole(fd: int, size: int) -> None:
    """``POSIX_FADV_WILLNEED`` over the whole file, ``CHUNK`` by ``CHUNK`` (the OS reads them in the background)."""
    for offset in range(0, size, CHUNK):
        os.posix_fadvise(fd, offset, CHUNK, os.POSIX_FADV_WILLNEED)


def read_ahead(paths: Iterable[str], advise: Callable[[int, int], None] = advise_whole) -> list[str]:
    """``advise`` (the file, its size: ``advise_whole``) for each file not asked for before in this process; returns
    those asked. A file that cannot be opened is skipped (a readahead only saves time)."""
    asked = []
    for path in paths:
        with _LOCK:
            if path in _STARTED:
                continue
            _STARTED.add(path)
        try:
            fd = os.open(path, os.O_RDONLY)
        except OSError:
            continue
        try:
            advise(fd, os.fstat(fd).st_size)
            asked.append(path)
        except OSError:
            pass
        finally:
            os.close(fd)
    return asked


def start(maps_path: str = "/proc/self/maps") -> threading.Thread | None:
    """The readahead of ``libraries_to_read`` in a daemon thread (None where it is off, where there is no
    ``posix_fadvise`` or no maps file): called once a CUDA provider has loaded. It only saves time, so nothing it
    meets fails the load that called it (a folder it cannot list, a thread it cannot start): it is then skipped."""
    if not enabled() or not hasattr(os, "posix_fadvise"):
        return None
    try:
        maps = os.fsdecode(Path(maps_path).read_bytes())  # paths as the OS spells them, whatever the locale
        files = [p for p in libraries_to_read(maps) if p not in _STARTED]
        if not files:
            return None
        thread = threading.Thread(target=read_ahead, args=(files,), name="trtprof-readahead", daemon=True)
        thread.start()
    except (OSError, RuntimeError):
        return None
    return thread
