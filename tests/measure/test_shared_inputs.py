"""The seeded inputs of a lone-loads run made once by the parent and read by every life (``measure.shared_inputs``):
the same arrays ``make_inputs`` makes, read in another process through the parent's memory file, refused (None: the
life makes its own) wherever anything differs or cannot be read; the worker's ``seeded`` and the LifeWorkers protocol
with real ONNX Runtime worker processes on the CPU."""
from __future__ import annotations

import os
import pickle
import subprocess
import sys
from types import SimpleNamespace

import numpy as np
import pytest

from trtprof.measure import shared_inputs
from trtprof.measure.shared_inputs import SharedInputs, read
from trtprof.measure.timing import TimingConfig
from trtprof.measure.worker_loop import _WorkerState, feeds_key
from trtprof.model.inputs import make_inputs
from trtprof.spec import TensorSpec

needs_memfd = pytest.mark.skipif(not hasattr(os, "memfd_create") or not os.path.isdir("/proc/self/fd"),
                                 reason="no memfd_create or /proc here: every life makes its inputs, as before")

SPECS = (TensorSpec("x", "float32", ("N", 3, 4)), TensorSpec("ids", "int64", ("N", 5)),
         TensorSpec("mask", "bool", ("N", 2)))


def shapes_at(batch):
    return {"x": (batch, 3, 4), "ids": (batch, 5), "mask": (batch, 2)}


def made(batches=(1, 8), seed=3, int_range=(0, 7), **kw):
    return SharedInputs.make(SPECS, [(shapes_at(b), feeds_key(shapes_at(b), seed, int_range)) for b in batches],
                             seed, int_range, **kw)


@needs_memfd
def test_each_batch_reads_back_as_make_inputs_makes_it_in_this_process_and_another():
    shared = made()
    try:
        where = shared.locator()
        assert where[0] == f"/proc/{os.getpid()}/fd/{shared.fd}"
        for batch in (1, 8):
            got = read(where, feeds_key(shapes_at(batch), 3, (0, 7)), SPECS, shapes_at(batch))
            want = make_inputs(SPECS, shapes_at(batch), seed=3, int_range=(0, 7))
            assert list(got) == list(want)
            for name in want:
                assert got[name].dtype == want[name].dtype and np.array_equal(got[name], want[name])
                assert not got[name].flags.writeable  # mapped read-only
        code = ("import pickle, sys, numpy as np\n"
                "from trtprof.measure.shared_inputs import read\n"
                "where, key, specs, shapes = pickle.loads(bytes.fromhex(sys.argv[1]))\n"
                "got = read(where, key, specs, shapes)\n"
                "print(repr(float(got['x'].sum())), int(got['ids'].sum()), int(got['mask'].sum()))")
        arg = pickle.dumps((where, feeds_key(shapes_at(8), 3, (0, 7)), SPECS, shapes_at(8))).hex()
        out = subprocess.run([sys.executable, "-c", code, arg], capture_output=True, text=True, check=True).stdout.split()
        want = make_inputs(SPECS, shapes_at(8), seed=3, int_range=(0, 7))
        assert out == [repr(float(want["x"].sum())), str(int(want["ids"].sum())), str(int(want["mask"].sum()))]
    finally:
        shared.close()
    assert shared.locator() is None and shared.fd is None


@needs_memfd
def test_anything_that_differs_or_cannot_be_read_is_refused():
    shared = made()
    try:
        where = shared.locator()
        key = feeds_key(shapes_at(8), 3, (0, 7))
        assert read(where, key, SPECS, shapes_at(8)) is not None
        assert read(None, key, SPECS, shapes_at(8)) is None  # not told
        assert read(where, feeds_key(shapes_at(8), 4, (0, 7)), SPECS, shapes_at(8)) is None  # another seed
        assert read(where, key, SPECS[::-1], shapes_at(8)) is None  # the inputs in another order
        assert read(where, key, SPECS[:2], shapes_at(8)) is None  # fewer inputs
        other = (TensorSpec("x", "float16", ("N", 3, 4)), *SPECS[1:])
        assert read(where, key, other, shapes_at(8)) is None  # another dtype
        assert read(where, key, SPECS, {**shapes_at(8), "x": (8, 4, 3)}) is None  # another shape
        assert read((f"/proc/{os.getpid()}/fd/999999", where[1]), key, SPECS, shapes_at(8)) is None  # unreadable
    finally:
        shared.close()


@needs_memfd
def test_at_most_max_bytes_are_shared():
    need = sum(int(np.prod(shapes_at(b)[s.name])) * np.dtype(s.dtype).itemsize for b in (1, 8) for s in SPECS)
    at_edge = made(max_bytes=need)
    assert at_edge is not None
    at_edge.close()
    assert made(max_bytes=need - 1) is None


def test_without_memfd_nothing_is_shared(monkeypatch):
    monkeypatch.delattr(os, "memfd_create", raising=False)
    assert made() is None


class ArmWithInputs:
    """FAKE runner: only its input specs (the worker's ``seeded`` reads them)."""

    inputs = SPECS


@needs_memfd
def test_a_worker_takes_what_it_made_first_then_the_parents_then_makes_them():
    shared = made(batches=(8,))
    try:
        state = _WorkerState(None)
        state.runners = {"fp32": ArmWithInputs()}
        mine = state.seeded(shapes_at(8), 3, (0, 7))  # not told: made here
        assert not isinstance(mine["x"], np.memmap)
        assert state.share(shared.locator()) == ("ok", None)
        theirs = state.seeded(shapes_at(8), 3, (0, 7))
        assert isinstance(theirs["x"], np.memmap) and all(np.array_equal(theirs[k], mine[k]) for k in mine)
        state.made[feeds_key(shapes_at(8), 3, (0, 7))] = mine  # made by priming or the accuracy pass: kept first
        assert state.seeded(shapes_at(8), 3, (0, 7)) is mine
        state.set_feeds(shapes_at(8), 3, (0, 7), None)
        assert state.feeds is mine and not state.made  # used once, then dropped
        state.set_feeds(shapes_at(8), 3, (0, 7), None)
        assert isinstance(state.feeds["x"], np.memmap)
        state.set_feeds(shapes_at(1), 3, (0, 7), None)  # a batch the parent did not make: made here
        assert not isinstance(state.feeds["x"], np.memmap)
    finally:
        shared.close()


def mapped(pid: int) -> bool:
    """Does process ``pid`` map the parent's memory file of inputs (its name in /proc/PID/maps)?"""
    with open(f"/proc/{pid}/maps") as maps:
        return "memfd:trtprof-inputs" in maps.read()


@needs_memfd
def test_life_workers_make_the_inputs_once_and_tell_every_life(fp32_record, monkeypatch):
    """Real worker processes (ONNX Runtime on the CPU): the parent makes the seeded inputs while life 0 runs the
    accuracy pass, tells life 0 once it answered and every later life when it starts, and each maps it for its feeds
    (/proc/PID/maps); each life's record says so; the memory file is closed with the run."""
    from trtprof.measure.serial_loads import LifeWorkers

    seen = []
    real = shared_inputs.SharedInputs.make

    def counted(*args, **kwargs):
        seen.append(args[1])
        return real(*args, **kwargs)

    monkeypatch.setattr(shared_inputs.SharedInputs, "make", staticmethod(counted))
    shapes = {"input": (2, 3, 16, 16)}
    lives = LifeWorkers({"fp32": fp32_record, "fp32#2": fp32_record})
    try:
        outputs = lives.outputs([(2, shapes, 2 * 3 * 16 * 16 * 4)], 0, (0, 100))
        assert set(outputs) == {2} and len(seen) == 1 and lives.shared is not None
        first = lives.load(0, shapes, 0, (0, 100))
        first.warm_up(TimingConfig(warmup=1, iterations=2))
        assert mapped(first.worker.proc.pid)  # its feeds are the parent's file, mapped
        second = lives.load(1, shapes, 0, (0, 100))
        second.warm_up(TimingConfig(warmup=1, iterations=2))
        assert mapped(second.worker.proc.pid)
        rounds = second.rounds(0, 1, TimingConfig(warmup=0, iterations=2), ["fp32", "fp32#2"])
        assert [sorted(r) for r in rounds] == [["fp32", "fp32#2"]]
        fd = lives.shared.fd
    finally:
        lives.kill()
        lives.close()
    assert len(seen) == 1 and lives.shared.fd is None
    assert [life["inputs_shared"] for life in lives.lives] == [True, True]
    assert lives.lives[0]["shared_inputs_made_s"] >= 0 and "shared_inputs_made_s" not in lives.lives[1]
    with pytest.raises(OSError):
        os.fstat(fd)  # closed


def test_inputs_that_cannot_be_made_here_leave_each_life_to_make_its_own(monkeypatch):
    """Sharing is a saving only: where the parent cannot make the inputs (a dtype trtprof cannot generate, memory),
    nothing is shared and nothing fails here; each life meets the failure, if any, in its own accuracy pass."""
    from trtprof.measure.serial_loads import LifeWorkers

    def fails(*args, **kwargs):
        raise MemoryError("no room for the inputs")

    monkeypatch.setattr(shared_inputs.SharedInputs, "make", staticmethod(fails))
    lives = LifeWorkers({"fp32": SimpleNamespace(inputs=SPECS, backend="onnxruntime")})
    lives.make_shared([shapes_at(1)], 0, (0, 7))
    assert lives.shared is None and lives.shared_s is not None
    lives.tell_shared(None)  # nothing to tell: no worker is asked anything
