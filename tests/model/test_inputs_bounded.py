"""Issue 45, deliverable 2: ``--inputs`` bounded before it is read. An ``.npz`` whose archive directory
declares more than the cap, a folder of ``.npy`` files too large, a header declaring more than 1,000,000
samples, a data loader that yields past the cap (or forever) — each refused in one line stating the cap
(tied to the memory preflight's ``available_memory_bytes``), before a member is decompressed. The memory
available is faked (64 MiB: a cap of 32 MiB), so no test allocates more than a few MiB; every bound is
tried just inside and just outside."""
from __future__ import annotations

import struct
import zipfile
from pathlib import Path

import numpy as np
import pytest

from trtprof.errors import BadInput
from trtprof.model.npyfiles import MAX_SAMPLES, InputCap
from trtprof.model.user_inputs import InputData

from ..cli.test_user_errors import assert_one_line, run_main

MIB = 1 << 20
FAKE_AVAILABLE = 64 * MIB  # the cap is half of it: 32 MiB


@pytest.fixture
def little_memory(monkeypatch):
    """The memory preflight reports 64 MiB available (the cap: 32 MiB)."""
    import trtprof.system.preflight as preflight

    monkeypatch.setattr(preflight, "available_memory_bytes", lambda: FAKE_AVAILABLE)


@pytest.fixture
def opened_members(monkeypatch):
    """Counts the zip members opened for reading (decompressed)."""
    opened: list[str] = []
    real = zipfile.ZipFile.open

    def counting(self, name, mode="r", *args, **kwargs):
        if mode == "r":
            opened.append(getattr(name, "filename", name))
        return real(self, name, mode, *args, **kwargs)

    monkeypatch.setattr(zipfile.ZipFile, "open", counting)
    return opened


def _npy_header(shape: tuple[int, ...], descr: str = "|u1") -> bytes:
    header = f"{{'descr': '{descr}', 'fortran_order': False, 'shape': {shape}, }}"
    header += " " * (118 - len(header)) + "\n"
    return b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)) + header.encode()


def _compressible_bomb(path: Path, nbytes: int) -> Path:
    """An .npz whose one member is ``nbytes`` of zeros (uint8), deflated to a few KiB per MiB."""
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf, zf.open("input.npy", "w") as member:
        member.write(_npy_header((nbytes,)))
        chunk = bytes(MIB)
        for _ in range(nbytes // MIB):
            member.write(chunk)
    return path


def _lying_directory(path: Path, declared: int) -> Path:
    """An .npz with a tiny member whose sizes (local header and central directory) are patched to claim
    ``declared`` uncompressed bytes (< 4 GiB, no zip64): nothing behind it inflates that far."""
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("input.npy", _npy_header((16,)) + bytes(16))
    raw = bytearray(path.read_bytes())
    size = struct.pack("<I", declared)
    local = raw.index(b"PK\x03\x04")
    raw[local + 22: local + 26] = size  # uncompressed size in the local file header
    central = raw.index(b"PK\x01\x02")
    raw[central + 24: central + 28] = size  # ... and in the central directory, which zipfile reads
    path.write_bytes(bytes(raw))
    return path


# --- .npz: the archive directory is checked before anything is decompressed --------------------------

def test_a_compressible_bomb_is_refused_before_its_member_is_inflated(tmp_path, little_memory, opened_members):
    bomb = _compressible_bomb(tmp_path / "bomb.npz", 48 * MIB)  # 48 MiB of zeros > the 32 MiB cap
    assert bomb.stat().st_size < MIB
    with pytest.raises(BadInput) as err:
        InputData.load(bomb)
    message = str(err.value)
    for needle in ("bomb.npz", "archive directory declares", "48 MiB", "capped at 1,000,000 samples and 32 MiB",
                   "half the 64 MiB of memory available now"):
        assert needle in message, message
    assert opened_members == []  # not a byte decompressed


def test_a_directory_that_lies_about_a_huge_member_is_refused_from_the_directory(tmp_path, little_memory,
                                                                                  opened_members):
    bomb = _lying_directory(tmp_path / "liar.npz", 3 << 30)  # declares 3 GiB
    with pytest.raises(BadInput, match=r"archive directory declares 1 member\(s\) uncompressing to 3 GiB"):
        InputData.load(bomb)
    assert opened_members == []


def test_the_npz_byte_cap_just_inside_and_just_outside(tmp_path):
    np.savez(tmp_path / "x.npz", input=np.zeros((4, 8), np.uint8))
    with zipfile.ZipFile(tmp_path / "x.npz") as zf:
        declared = sum(i.file_size for i in zf.infolist())
    assert InputData.load(tmp_path / "x.npz", cap=InputCap(declared, "test")).samples == 4
    with pytest.raises(BadInput, match="capped at"):
        InputData.load(tmp_path / "x.npz", cap=InputCap(declared - 1, "test"))


def test_a_bomb_through_the_cli_is_one_line_before_any_build(tmp_path, little_memory, capsys, conv_model):
    bomb = _compressible_bomb(tmp_path / "bomb.npz", 40 * MIB)
    engines = tmp_path / "e"
    for argv in (["build", str(conv_model), "--fp32", "--backend", "onnxruntime", "--engines", str(engines)],
                 ["compare", str(conv_model), "--backend", "onnxruntime", "--engines", str(engines),
                  "--time-budget-s", "1", "--out", str(tmp_path / "c.json")]):
        code, _, err = run_main(capsys, *argv, "--inputs", str(bomb))
        assert_one_line(code, err, "bomb.npz", "40 MiB", "capped at", "memory available now")
    assert not engines.exists() and not (tmp_path / "c.json").exists()


# --- a folder of .npy: the files' sizes summed first ------------------------------------------------

def test_a_folder_larger_than_the_cap_is_refused_before_a_file_is_read(tmp_path, little_memory, monkeypatch):
    import trtprof.model.npyfiles as npyfiles

    folder = tmp_path / "d"
    folder.mkdir()
    for name in ("a", "b", "c"):  # 3 sparse files of 12 MiB: 36 MiB on the directory listing, no disk used
        with open(folder / f"{name}.npy", "wb") as fh:
            fh.write(_npy_header((12 * MIB,)))
            fh.truncate(12 * MIB + 128)
    read: list[Path] = []
    monkeypatch.setattr(npyfiles, "load_npy", lambda p, *a, **k: read.append(p))
    with pytest.raises(BadInput, match=r"its 3 \.npy file\(s\) hold 36 MiB .*capped at 1,000,000 samples and 32 MiB"):
        InputData.load(folder)
    assert read == []


# --- samples: from the header, before the data ------------------------------------------------------

@pytest.mark.parametrize("samples,refused", [(MAX_SAMPLES, False), (MAX_SAMPLES + 1, True)])
def test_the_sample_cap_from_the_header_just_inside_and_outside(samples, refused, tmp_path):
    folder = tmp_path / "d"
    folder.mkdir()
    np.save(folder / "input.npy", np.zeros(samples, np.uint8))  # 1 MB
    cap = InputCap(64 * MIB, "test")
    if refused:
        with pytest.raises(BadInput, match=r"input.npy: its header declares shape \(1000001,\): 1,000,001 samples"):
            InputData.load(folder, cap=cap)
    else:
        assert InputData.load(folder, cap=cap).samples == MAX_SAMPLES


# --- data loaders: stopped at the cap, never iterated to their end ----------------------------------

def _loader(tmp_path: Path, body: str) -> str:
    (tmp_path / "loader.py").write_text("import itertools\nimport numpy as np\n" + body)
    return f"{tmp_path / 'loader.py'}:feeds"


def test_a_loader_that_yields_forever_is_stopped_at_the_sample_cap(tmp_path):
    closed = tmp_path / "closed"
    source = _loader(tmp_path, f"""
def feeds():
    try:
        while True:
            yield {{"input": np.zeros((1000, 1), np.uint8)}}
    finally:
        open({str(closed)!r}, "w").close()
""")
    with pytest.raises(BadInput) as err:
        InputData.load(source, cap=InputCap(64 * MIB, "test"))
    assert "stopped after yielding 1,001,000 samples" in str(err.value) and "capped at 1,000,000" in str(err.value)
    assert closed.exists()  # the generator was closed, not abandoned mid-yield


def test_a_loader_of_large_feeds_is_stopped_at_the_byte_cap(tmp_path, little_memory):
    source = _loader(tmp_path, """
def feeds():
    for _ in range(64):  # 64 MiB in all; the cap stops it after 33
        yield {"input": np.zeros((16, 65536), np.uint8)}
""")
    with pytest.raises(BadInput, match=r"stopped after yielding 33 MiB .*capped at 1,000,000 samples and 32 MiB"):
        InputData.load(source)


@pytest.mark.parametrize("feeds,refused", [(1000, False), (1001, True)])
def test_the_loader_sample_cap_just_inside_and_outside(feeds, refused, tmp_path):
    source = _loader(tmp_path, f"""
def feeds():
    return [{{"input": np.zeros((1000, 1), np.uint8)}} for _ in range({feeds})]
""")
    if refused:
        with pytest.raises(BadInput, match="capped at 1,000,000 samples"):
            InputData.load(source, cap=InputCap(64 * MIB, "test"))
    else:
        assert InputData.load(source, cap=InputCap(64 * MIB, "test")).samples == MAX_SAMPLES


@pytest.mark.parametrize("body", [
    "def feeds():\n    raise GeneratorExit('done early')\n",
    "def feeds():\n    yield {'input': np.zeros((2, 3, 16, 16), np.float32)}\n    raise GeneratorExit('done early')\n",
])
def test_a_loader_raising_generator_exit_is_one_line(body, tmp_path, capsys, conv_model):
    """Round 4's leftover: GeneratorExit is a BaseException, so `except Exception` let it through as a
    traceback."""
    source = _loader(tmp_path, body)
    code, _, err = run_main(capsys, "build", str(conv_model), "--fp32", "--backend", "onnxruntime",
                            "--engines", str(tmp_path / "e"), "--inputs", source)
    assert_one_line(code, err, "loader.py", "the data loader failed: GeneratorExit: done early")
