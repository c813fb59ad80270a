"""Issue 36, deliverable 7: the user's --inputs files are data, read without trusting them. Each bad
file is exit 2 and one line naming the file (and the array), never a traceback, a 931 TiB allocation
or a hang; a loader's sys.exit is an error, not trtprof's exit 0."""
from __future__ import annotations

import os
import struct
import subprocess
import sys
import zipfile
from pathlib import Path

import numpy as np
import pytest

REPO = Path(__file__).resolve().parents[2]
HUGE_HEADER = "{'descr': '<f4', 'fortran_order': False, 'shape': (1000000000000, 256), }"


def _npy_bytes(header: str, payload: bytes = b"\0" * 64) -> bytes:
    header = header + " " * (118 - len(header)) + "\n"
    return b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)) + header.encode() + payload


def _good(tmp_path: Path) -> bytes:
    np.savez(tmp_path / "good.npz", input=np.zeros((4, 3, 16, 16), np.float32))
    return (tmp_path / "good.npz").read_bytes()


def _case(name: str, tmp_path: Path) -> tuple[Path, list[str]]:
    good = _good(tmp_path)
    if name == "truncated":
        (tmp_path / "t.npz").write_bytes(good[: len(good) // 2])
        return tmp_path / "t.npz", ["t.npz", "not a readable .npz"]
    if name == "bad_crc":
        flipped = bytearray(good)
        flipped[200] ^= 0xFF
        (tmp_path / "c.npz").write_bytes(bytes(flipped))
        return tmp_path / "c.npz", ["c.npz", "CRC"]
    if name == "npy_renamed":
        np.save(tmp_path / "a.npy", np.zeros((4, 3, 16, 16), np.float32))
        os.replace(tmp_path / "a.npy", tmp_path / "a.npz")
        return tmp_path / "a.npz", ["a.npz", "single .npy array, not an .npz"]
    if name == "huge_header_npz":
        with zipfile.ZipFile(tmp_path / "h.npz", "w") as z:
            z.writestr("input.npy", _npy_bytes(HUGE_HEADER))
        return tmp_path / "h.npz", ["h.npz", "'input'", "(1000000000000, 256)", "holds 64"]
    if name == "huge_header_folder":
        (tmp_path / "d").mkdir()
        (tmp_path / "d" / "input.npy").write_bytes(_npy_bytes(HUGE_HEADER))
        return tmp_path / "d", ["input.npy", "(1000000000000, 256)"]
    if name == "object_array":
        (tmp_path / "o").mkdir()
        (tmp_path / "o" / "input.npy").write_bytes(_npy_bytes("{'descr': '|O', 'fortran_order': False, 'shape': (4,), }"))
        return tmp_path / "o", ["input.npy", "pickle"]
    if name == "fifo":
        (tmp_path / "f").mkdir()
        np.save(tmp_path / "f" / "input.npy", np.zeros((4, 3, 16, 16), np.float32))
        os.mkfifo(tmp_path / "f" / "x.npy")
        return tmp_path / "f", ["x.npy", "not a regular file"]
    if name == "link_outside":
        (tmp_path / "l").mkdir()
        np.save(tmp_path / "elsewhere.npy", np.zeros((4, 3, 16, 16), np.float32))
        (tmp_path / "l" / "input.npy").symlink_to(tmp_path / "elsewhere.npy")
        return tmp_path / "l", ["input.npy", "outside the inputs folder"]
    if name == "loader_exits":
        (tmp_path / "loader.py").write_text("import sys\ndef feeds():\n    sys.exit(0)\n")
        return Path(f"{tmp_path / 'loader.py'}:feeds"), ["loader.py", "sys.exit(0)"]
    raise AssertionError(name)


CASES = ["truncated", "bad_crc", "npy_renamed", "huge_header_npz", "huge_header_folder", "object_array", "fifo",
         "link_outside", "loader_exits"]


@pytest.mark.parametrize("name", CASES)
def test_a_bad_inputs_file_is_one_line(name, conv_model, tmp_path):
    data, needles = _case(name, tmp_path)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]))
    try:
        proc = subprocess.run([sys.executable, "-m", "trtprof", "compare", str(conv_model), "--engines",
                               str(tmp_path / "e"), "--backend", "onnxruntime", "--in-process", "--time-budget-s", "1",
                               "--inputs", str(data), "--out", str(tmp_path / "c.json")],
                              capture_output=True, text=True, env=env, timeout=60)
    except subprocess.TimeoutExpired:
        pytest.fail(f"{name}: hung reading --inputs")
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert proc.returncode == 2 and len(lines) == 1 and "Traceback" not in proc.stderr, proc.stderr
    for needle in needles:
        assert needle in lines[0], lines[0]
    assert not (tmp_path / "c.json").exists() and not (tmp_path / "e").exists()  # refused before any build


def test_a_good_npz_and_folder_still_read_the_same(tmp_path):
    """Just inside: what np.load reads, the checked reader reads identically (C and Fortran order)."""
    from trtprof.model.user_inputs import load_inputs

    a = np.arange(4 * 3 * 2, dtype=np.float32).reshape(4, 3, 2)
    b = np.asfortranarray(np.arange(4 * 5, dtype=">i8").reshape(4, 5))
    np.savez_compressed(tmp_path / "x.npz", a=a, b=b)
    (tmp_path / "d").mkdir()
    np.save(tmp_path / "d" / "a.npy", a)
    np.save(tmp_path / "d" / "b.npy", b)
    for source in (tmp_path / "x.npz", tmp_path / "d"):
        got = load_inputs(source).arrays
        assert np.array_equal(got["a"], a) and np.array_equal(got["b"], b) and got["b"].dtype == b.dtype
        got["a"][0, 0, 0] = 7  # writable, as np.load's arrays are
