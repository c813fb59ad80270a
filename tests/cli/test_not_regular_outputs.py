"""Issue 45 item 1 (round 5): trtprof writes only regular files it created or its own earlier results.
An existing output that is not a regular file — a FIFO, a device, a socket, a symlink of any kind (to a
user's file, to an old trtprof result, dangling) — is refused before any work in one line (exit 2),
``--force`` included; nothing is written as a stream (the choice: refuse). And no option, ``--force``
included, writes over a file in a folder the command reads (an ``--inputs`` folder's files are inputs).

On 4b0e977 each of these exited 0 and left a regular file where the FIFO or link was (a user's FIFO,
``/dev/null`` as root), and `compare --inputs indir --out indir/input.npy --force` replaced the input
array with JSON. The special files here are made in tmp_path (os.mkfifo, symlinks, a socket, and as
root a character device node): never the machine's real /dev.
"""
from __future__ import annotations

import os
import socket
import stat
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from trtprof.cli import main

from .test_outputs import FAST, QUICK_COMPARE, engines  # noqa: F401  (engines: a pytest fixture)
from .test_user_errors import assert_one_line, run_main

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def results_file(engines, tmp_path, capsys) -> Path:
    out = tmp_path / "results.json"
    assert main(["bench", str(engines), *FAST, "--out", str(out)]) == 0
    capsys.readouterr()
    return out


def make_special(kind: str, path: Path, tmp_path: Path, results_file: Path | None = None) -> str:
    """Make ``path`` a special file of ``kind``; the words the refusal must say."""
    if kind == "fifo":
        os.mkfifo(path)
        return "is a FIFO"
    if kind == "symlink-to-users-file":
        (tmp_path / "notes.txt").write_text("mine\n")
        path.symlink_to(tmp_path / "notes.txt")
        return "is a symlink"
    if kind == "symlink-to-old-result":
        assert results_file is not None
        path.symlink_to(results_file)
        return "is a symlink"
    if kind == "dangling-symlink":
        path.symlink_to(tmp_path / "nowhere" / "gone.json")
        return "is a dangling symlink"
    if kind == "symlink-to-fifo":
        os.mkfifo(tmp_path / "pipe")
        path.symlink_to(tmp_path / "pipe")
        return "is a symlink"
    if kind == "socket":
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        cwd = os.getcwd()
        os.chdir(path.parent)  # a relative name: a socket's path is limited to ~107 bytes
        try:
            sock.bind(path.name)
        finally:
            os.chdir(cwd)
            sock.close()
        return "is a socket"
    if kind == "char-device":
        os.mknod(path, stat.S_IFCHR | 0o600, os.makedev(1, 3))  # a node like /dev/null, in tmp_path
        return "is a character device"
    raise AssertionError(kind)


def assert_left_alone(path: Path, kind: str) -> None:
    st = os.lstat(path)
    assert not stat.S_ISREG(st.st_mode), f"{path} ({kind}) was replaced by a regular file"


KINDS = ["fifo", "symlink-to-users-file", "symlink-to-old-result", "dangling-symlink", "symlink-to-fifo", "socket",
         pytest.param("char-device", marks=pytest.mark.skipif(os.geteuid() != 0, reason="mknod needs root"))]


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("option", ["--out", "--csv"])
def test_bench_outputs_that_are_not_regular_files(kind, option, engines, results_file, tmp_path, capsys):
    special = tmp_path / ("r.csv" if option == "--csv" else "r.json")
    says = make_special(kind, special, tmp_path, results_file)
    extra = ["--out", str(tmp_path / "other.json")] if option == "--csv" else []
    for force in ([], ["--force"]):
        code, out, err = run_main(capsys, "bench", str(engines), *FAST, *extra, option, str(special), *force)
        assert_one_line(code, err, option, says, "regular file")
        assert "median ms" not in out  # before any measurement
        assert_left_alone(special, kind)
    assert not (tmp_path / "other.json").exists()


@pytest.mark.parametrize("kind", KINDS)
def test_compare_out_that_is_not_a_regular_file_is_refused_before_any_build(kind, conv_model, results_file,
                                                                             tmp_path, capsys):
    special = tmp_path / "c.json"
    says = make_special(kind, special, tmp_path, results_file)
    code, _, err = run_main(capsys, "compare", str(conv_model), "--engines", str(tmp_path / "e2"), *QUICK_COMPARE,
                            "--out", str(special), "--force")
    assert_one_line(code, err, "--out", says)
    assert_left_alone(special, kind) and not (tmp_path / "e2").exists()


@pytest.mark.parametrize("command", ["report", "profile", "fix-fp16", "convert", "plot"])
def test_every_command_refuses_a_fifo_output(command, conv_model, results_file, tmp_path, capsys):
    fifo_name = {"plot": "plots/latency_vs_batch.png", "convert": "m.onnx"}.get(command, "o.out")
    fifo = tmp_path / fifo_name
    fifo.parent.mkdir(exist_ok=True)
    os.mkfifo(fifo)
    model = tmp_path / "saved.keras"
    model.write_bytes(b"not read: refused before TensorFlow")
    argv = {
        "report": ["report", str(results_file), "-o", str(fifo)],
        "profile": ["profile", str(conv_model), "--engines", str(tmp_path / "e2"), "--backend", "onnxruntime",
                    "--out", str(fifo)],
        "fix-fp16": ["fix-fp16", str(conv_model), "--engines", str(tmp_path / "e2"), "--backend", "onnxruntime",
                     "--out", str(fifo)],
        "convert": ["convert", str(model), "-o", str(fifo)],
        "plot": ["plot", str(results_file), "--out", str(fifo.parent)],
    }[command]
    code, _, err = run_main(capsys, *argv, "--force")
    assert_one_line(code, err, "is a FIFO", "regular file")
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode) and not (tmp_path / "e2").exists()


def test_a_fifo_named_like_a_trace_is_refused_not_read(conv_model, tmp_path):
    """compare --trace-dir: a FIFO where a trace would go used to be opened for reading (to see whether
    it is trtprof's) and the command hung; a subprocess, so that 4b0e977 times out instead of hanging."""
    traces = tmp_path / "traces"
    traces.mkdir()
    os.mkfifo(traces / "convnet.fp32.b1.trace.json")
    try:
        proc = subprocess.run([sys.executable, "-m", "trtprof", "compare", str(conv_model), "--engines",
                               str(tmp_path / "e2"), *QUICK_COMPARE, "--batch-sizes", "1", "--trace-dir", str(traces),
                               "--out", str(tmp_path / "c.json")], capture_output=True, text=True, timeout=60,
                              env={**os.environ, "PYTHONPATH": str(ROOT)})
    except subprocess.TimeoutExpired:
        pytest.fail("compare blocked on the FIFO in --trace-dir")
    assert_one_line(proc.returncode, proc.stderr, "--trace-dir", "is a FIFO")
    assert not (tmp_path / "e2").exists()


def test_an_output_in_a_symlinked_folder_is_a_regular_file_and_fine(results_file, tmp_path, capsys):
    """Just inside: only the output's own name is checked; a folder reached through a link is fine."""
    real = tmp_path / "real"
    real.mkdir()
    (tmp_path / "linked").symlink_to(real)
    code, _, err = run_main(capsys, "report", str(results_file), "-o", str(tmp_path / "linked" / "r.html"))
    assert code == 0, err
    assert stat.S_ISREG(os.lstat(real / "r.html").st_mode)


def test_force_never_writes_into_the_inputs_folder(conv_model, tmp_path, capsys):
    """`compare m.onnx --inputs indir --out indir/input.npy --force` replaced the input array with JSON."""
    indir = tmp_path / "indir"
    indir.mkdir()
    np.save(indir / "input.npy", np.zeros((2, 3, 16, 16), np.float32))
    (indir / "notes.json").write_text('{"mine": true}\n')
    before = {p.name: p.read_bytes() for p in indir.iterdir()}
    for name in ("input.npy", "notes.json"):
        code, _, err = run_main(capsys, "compare", str(conv_model), "--engines", str(tmp_path / "e2"),
                                *QUICK_COMPARE, "--inputs", str(indir), "--out", str(indir / name), "--force")
        assert_one_line(code, err, "--out", "a folder this command reads")
    assert {p.name: p.read_bytes() for p in indir.iterdir()} == before
    assert not (tmp_path / "e2").exists()
