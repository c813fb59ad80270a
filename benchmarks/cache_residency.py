"""How much of each file is in the OS page cache now, and how large the CUDA driver's JIT cache is (issue 42).

A diagnostic for the first compare on a fresh GPU machine, which was 3-9 s slower than the next one in every pair
of 2026-12-04f (life 0's accuracy pass, where each arm's first runs load cuDNN's engine libraries and build its
plans: 5.6 s against 3.4 s). Two causes fit and call for different remedies: the libraries read from disk the first
time (page cache), or kernels compiled just in time and kept by the driver for later processes (its compute cache,
``~/.nv/ComputeCache`` or ``$CUDA_CACHE_PATH``). Run before and after the first compare (stage ``caches`` of
``ort_cuda_fidelity.sh``): residency that rises from low to full says disk; a compute cache that grows says JIT.

    python3 benchmarks/cache_residency.py [--evict] FILE_OR_GLOB...

Prints one line per file (size, MB resident, share) and the compute cache's size. ``--evict`` first asks the OS to
drop each file's clean pages from the page cache (``POSIX_FADV_DONTNEED``; no root needed; pages a running process
maps stay), so that the next process reads them from disk as on a fresh machine (stage ``coldstart``). Linux only
(mincore(2)).
"""
from __future__ import annotations

import ctypes
import glob
import mmap
import os
import sys
from pathlib import Path


def resident_bytes(path: str) -> int:
    """Bytes of ``path`` in the page cache (mincore over a read-only mapping; maps nothing for an empty file)."""
    size = os.path.getsize(path)
    if size == 0:
        return 0
    page = mmap.PAGESIZE
    libc = ctypes.CDLL(None, use_errno=True)
    libc.mmap.restype = ctypes.c_void_p
    libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]
    libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
    libc.mincore.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.POINTER(ctypes.c_ubyte)]
    fd = os.open(path, os.O_RDONLY)
    try:
        address = libc.mmap(None, size, mmap.PROT_READ, mmap.MAP_SHARED, fd, 0)
        if address in (None, ctypes.c_void_p(-1).value):
            raise OSError(ctypes.get_errno(), f"mmap {path}")
        try:
            pages = (size + page - 1) // page
            vec = (ctypes.c_ubyte * pages)()
            if libc.mincore(ctypes.c_void_p(address), size, vec) != 0:
                raise OSError(ctypes.get_errno(), f"mincore {path}")
            return min(size, sum(1 for v in vec if v & 1) * page)  # the last page counts its bytes only
        finally:
            libc.munmap(ctypes.c_void_p(address), size)
    finally:
        os.close(fd)


def folder_bytes(folder: Path) -> int:
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file()) if folder.is_dir() else 0


def evict(path: str) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)


def main(argv: list[str]) -> int:
    dropping = argv[:1] == ["--evict"]
    argv = argv[1:] if dropping else argv
    if not argv:
        print(__doc__)
        return 2
    paths = sorted({os.path.realpath(p) for pattern in argv for p in (glob.glob(pattern) or [pattern])})
    total = cached = files = 0
    for path in paths:
        if not os.path.isfile(path):
            print(f"cache-residency: {path}: not a file")
            continue
        files += 1
        if dropping:
            evict(path)
        size, here = os.path.getsize(path), resident_bytes(path)
        total, cached = total + size, cached + here
        print(f"cache-residency: {path}: {size / 1e6:.1f} MB, {here / 1e6:.1f} MB in the page cache "
              f"({100 * here / max(size, 1):.0f} %)")
    print(f"cache-residency: all {files} files: {total / 1e6:.1f} MB, {cached / 1e6:.1f} MB in the page cache")
    jit = Path(os.environ.get("CUDA_CACHE_PATH") or Path.home() / ".nv" / "ComputeCache")
    print(f"cache-residency: the CUDA driver's compute cache {jit}: {folder_bytes(jit) / 1e6:.1f} MB")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
