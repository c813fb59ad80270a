"""The readahead of the CUDA libraries a process has mapped (``system.readahead``, issue 42): which files it asks
for, once each, and that it is off with ``TRTPROF_ORT_READAHEAD=0``. Real files in a temporary folder stand for the
libraries (no CUDA here); the advice itself is the OS's (``posix_fadvise``), recorded where a test needs to see it."""
from __future__ import annotations

import os

import pytest

from trtprof.system import readahead


def maps_line(path: str) -> str:
    return f"7f00-7f10 r-xp 00000000 08:01 1234                       {path}"


@pytest.fixture
def libs(tmp_path, monkeypatch):
    """A folder of files named as cuDNN's and cuBLAS's libraries; this process starts with none asked for."""
    monkeypatch.setattr(readahead, "_STARTED", set())
    folder = tmp_path / "lib"
    folder.mkdir()
    for name in ("libcudnn.so.9", "libcudnn_engines_precompiled.so.9", "libcudnn_heuristic.so.9",
                 "libcudnn_adv.so.9", "libcublasLt.so.13", "libcufft.so.12"):
        (folder / name).write_bytes(b"\0" * 4096)
    return folder


def test_it_reads_the_mapped_cuda_libraries_and_cudnns_siblings_but_adv(libs):
    maps = "\n".join([maps_line(str(libs / "libcudnn.so.9")), maps_line(str(libs / "libcudnn.so.9")),
                      maps_line(str(libs / "libcublasLt.so.13")), maps_line(str(libs / "libcufft.so.12")),
                      "7f20-7f30 rw-p 00000000 00:00 0", maps_line("[heap]")])
    assert readahead.mapped_libraries(maps) == [str(libs / "libcudnn.so.9"), str(libs / "libcublasLt.so.13")]
    assert readahead.libraries_to_read(maps) == [str(libs / n) for n in (
        "libcudnn.so.9", "libcublasLt.so.13", "libcudnn_engines_precompiled.so.9", "libcudnn_heuristic.so.9")]
    assert readahead.libraries_to_read(maps_line(str(libs / "libcufft.so.12"))) == []  # no cuDNN, no cuBLAS mapped


def test_each_file_is_asked_for_once_per_process_and_a_missing_one_is_skipped(libs):
    asked: list[int] = []
    files = [str(libs / "libcudnn.so.9"), str(libs / "gone.so"), str(libs / "libcudnn.so.9")]
    assert readahead.read_ahead(files, advise=lambda fd, size: asked.append(size)) == [str(libs / "libcudnn.so.9")]
    assert asked == [4096]
    assert readahead.read_ahead(files, advise=lambda fd, size: asked.append(size)) == [] and asked == [4096]


@pytest.mark.skipif(not hasattr(os, "posix_fadvise"), reason="no posix_fadvise on this OS")
@pytest.mark.parametrize("size", [0, 1, readahead.CHUNK, readahead.CHUNK + 1, 3 * readahead.CHUNK])
def test_the_whole_file_is_advised_chunk_by_chunk(size, tmp_path, monkeypatch):
    """Linux reads at most its readahead window of one WILLNEED call: each ``CHUNK`` is asked for, the last one
    included (sizes just inside and just outside a chunk)."""
    calls: list[tuple[int, int]] = []
    monkeypatch.setattr(os, "posix_fadvise", lambda fd, offset, length, advice: calls.append((offset, length)))
    readahead.advise_whole(3, size)
    assert calls == [(offset, readahead.CHUNK) for offset in range(0, size, readahead.CHUNK)]
    assert (calls[-1][0] + calls[-1][1] >= size) if size else calls == []


@pytest.mark.skipif(not hasattr(os, "posix_fadvise"), reason="no posix_fadvise on this OS")
def test_start_reads_in_a_thread_and_is_off_when_told(libs, tmp_path, monkeypatch):
    maps = tmp_path / "maps"
    maps.write_text(maps_line(str(libs / "libcudnn.so.9")) + "\n")
    monkeypatch.setenv(readahead.ENV, "0")
    assert readahead.start(str(maps)) is None and readahead._STARTED == set()
    monkeypatch.delenv(readahead.ENV)
    thread = readahead.start(str(maps))
    assert thread is not None
    thread.join(10)
    assert not thread.is_alive()
    assert readahead._STARTED == {str(libs / n) for n in (
        "libcudnn.so.9", "libcudnn_engines_precompiled.so.9", "libcudnn_heuristic.so.9")}
    assert readahead.start(str(maps)) is None  # asked for already: nothing more
    assert readahead.start(str(tmp_path / "no-maps")) is None


def test_what_start_meets_never_fails_the_load(libs, tmp_path, monkeypatch):
    """A folder it cannot list and a thread it cannot start: ``start`` gives up (None), raising nothing."""
    maps = tmp_path / "maps"
    maps.write_text(maps_line(str(libs / "libcudnn.so.9")) + "\n")

    def refuse(*args, **kwargs):
        raise PermissionError("listing refused")

    monkeypatch.setattr(readahead, "libraries_to_read", refuse)
    assert readahead.start(str(maps)) is None
    monkeypatch.undo()
    monkeypatch.setattr(readahead, "_STARTED", set())

    class NoThread:
        def __init__(self, *args, **kwargs):
            pass

        def start(self):
            raise RuntimeError("can't start new thread")

    monkeypatch.setattr(readahead.threading, "Thread", NoThread)
    assert readahead.start(str(maps)) is None
