"""The seeded inputs of a lone-loads run, made once and read by every life (issue 42).

Lone loads (``serial_loads.LifeWorkers``) start a process per life, six for compare's minimum design, and each made the
same seeded random inputs again for every batch size it serves (``model.inputs.make_inputs``): ResNet-50's batch 256
alone is 154 MB of normals, 0.55 s of each life's priming on the H200 (2026-12-04e, cProfile). The parent makes them
once, while life 0's process starts, into an anonymous memory file (``os.memfd_create``: nothing on any disk, gone
with the parent, a kill -9 included) and tells each life where they are: the file as the parent's open descriptor
(``/proc/<pid>/fd/<n>``) and, per batch size's feeds key, each input's name, dtype, shape and offset. A life maps them
read-only (``numpy.memmap``): the same arrays ``make_inputs`` would make, by construction (the parent made them with it,
from the same specs, shapes, seed and range), checked against its own specs before use. Where the file cannot be made
or read (no memfd, no /proc, over ``MAX_BYTES``, a spec that differs), each life makes its inputs itself, as before."""
from __future__ import annotations

import os
from typing import Any, Mapping, Sequence

import numpy as np

MAX_BYTES = 2 * 2**30  # more than this (every batch size's inputs together) stays made per life: the parent's memory
ALIGN = 4096  # each array starts on a page: mapped on its own

# feeds key (worker_loop.feeds_key) → [(input name, dtype, shape, offset)]
Index = dict[Any, list[tuple[str, str, tuple[int, ...], int]]]


class SharedInputs:
    """The parent's side: the memory file and what is where in it. ``locator()`` is what a life is told."""

    def __init__(self, fd: int, index: Index) -> None:
        self.fd: int | None = fd
        self.index = index

    @classmethod
    def make(cls, specs: Sequence[Any], batches: Sequence[tuple[Mapping[str, tuple[int, ...]], Any]], seed: int,
             int_range: tuple[int, int], max_bytes: int = MAX_BYTES) -> "SharedInputs | None":
        """Every batch's seeded inputs (``batches``: (shapes, feeds key)) written to a new memory file; None where
        there is no memfd here or they would take more than ``max_bytes``."""
        from ..model.inputs import make_inputs

        create = getattr(os, "memfd_create", None)
        if create is None or not batches:
            return None
        need = sum(int(np.prod(shapes[s.name], dtype=np.int64)) * np.dtype(s.dtype).itemsize
                   for shapes, _ in batches for s in specs if s.name in shapes)
        if need > max_bytes:
            return None
        fd = create("trtprof-inputs", getattr(os, "MFD_CLOEXEC", 0))
        index: Index = {}
        offset = 0
        try:
            for shapes, key in batches:
                entries = []
                for name, arr in make_inputs(specs, shapes, seed=seed, int_range=int_range).items():
                    data = np.ascontiguousarray(arr)
                    write_all(fd, data.reshape(-1).view(np.uint8).data, offset)
                    entries.append((name, data.dtype.str, tuple(int(d) for d in data.shape), offset))
                    offset += -(-max(data.nbytes, 1) // ALIGN) * ALIGN
                index[key] = entries
        except OSError:
            os.close(fd)
            return None
        return cls(fd, index)

    def locator(self) -> tuple[str, Index] | None:
        """(the file's path as any process of this user opens it, the index); None once closed."""
        if self.fd is None:
            return None
        return f"/proc/{os.getpid()}/fd/{self.fd}", self.index

    def close(self) -> None:
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None


def write_all(fd: int, data: memoryview, offset: int) -> None:
    """``data`` at ``offset`` of ``fd``, however many writes that takes (one write stops at 2 GiB on Linux)."""
    done = 0
    while done < len(data):
        done += os.pwrite(fd, data[done:], offset + done)


def read(locator: tuple[str, Index] | None, key: Any, specs: Sequence[Any],
         shapes: Mapping[str, tuple[int, ...]]) -> dict[str, np.ndarray] | None:
    """A life's side: the inputs of feeds key ``key`` mapped read-only from the parent's file, where it holds them
    for exactly these ``specs`` (every input, in order, with its dtype) at these ``shapes``; None otherwise (the
    caller makes them)."""
    if locator is None:
        return None
    path, index = locator
    entries = index.get(key)
    if entries is None or [e[0] for e in entries] != [s.name for s in specs]:
        return None
    for (name, dtype, shape, _), spec in zip(entries, specs):
        if np.dtype(dtype) != np.dtype(spec.dtype) or tuple(shape) != tuple(shapes.get(name, ())):
            return None
    try:
        return {name: np.memmap(path, dtype=np.dtype(dtype), mode="r", offset=offset, shape=tuple(shape))
                if int(np.prod(shape, dtype=np.int64)) else np.empty(shape, dtype)
                for name, dtype, shape, offset in entries}
    except (OSError, ValueError):  # the parent gone, /proc closed to this process: made here instead
        return None
