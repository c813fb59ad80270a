"""Issue 45, item 10: after a ``kill -9`` of compare, its workers' logs in ``$TMPDIR`` are marked (a
``trtprof-worker-p<compare's pid>-*`` dir holding the scratch marker with that pid and its start time)
and the next trtprof command removes them; a user's file or dir named like one, without the marker, or
one whose owner is alive, stays. Was: three unmarked ``trtprof-worker-*.log`` per run, never removed.
Real CLI, ONNX Runtime on the CPU."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from trtprof.util import scratch

REPO = Path(__file__).resolve().parents[2]


def _env(tmpdir: Path) -> dict[str, str]:
    return dict(os.environ, TMPDIR=str(tmpdir), PYTHONPATH=os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]))


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_worker_logs_of_a_killed_compare_are_marked_and_removed_by_the_next_run(conv_model, tmp_path):
    tmpdir = tmp_path / "tmp"
    tmpdir.mkdir()
    users = [tmpdir / "trtprof-worker-p999999-abc.log", tmpdir / "trtprof-worker-p999999-mine"]
    users[0].write_text("a user's file named like an old worker log")
    users[1].mkdir()
    compare = subprocess.Popen(
        [sys.executable, "-m", "trtprof", "compare", str(conv_model), "--backend", "onnxruntime", "--engines",
         str(tmp_path / "e"), "--round-iterations", "1000000", "--time-budget-s", "600", "--min-loads", "2",
         "--out", str(tmp_path / "c.json")],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=_env(tmpdir), start_new_session=True)
    started = scratch.process_start_id(compare.pid)  # fork time: the same after its exec
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and len(list(tmpdir.glob(f"trtprof-worker-p{compare.pid}-*"))) < 2:
            time.sleep(0.1)
    finally:
        compare.send_signal(signal.SIGKILL)
        compare.wait(30)
    logs = sorted(tmpdir.glob(f"trtprof-worker-p{compare.pid}-*"))
    assert len(logs) >= 2, sorted(p.name for p in tmpdir.iterdir())
    assert started is not None and all(scratch.read_marker(log) == (compare.pid, started) for log in logs)
    assert [p for p in tmpdir.glob("trtprof-worker-*.log") if p not in users] == []  # no unmarked log file
    time.sleep(1)  # the workers die with their parent (PR_SET_PDEATHSIG)
    proc = subprocess.run([sys.executable, "-m", "trtprof", "cache", "ls", str(tmp_path / "e")],
                          capture_output=True, text=True, env=_env(tmpdir), timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert not list(tmpdir.glob(f"trtprof-worker-p{compare.pid}-*"))  # removed by the next command
    assert all(p.exists() for p in users)  # not marked: never removed


def test_a_worker_dir_of_a_live_owner_or_unknown_start_is_kept(tmp_path):
    """Just inside and outside the rule: owner dead with its start time known → removed at any age; owner
    alive, or a marker without a start time (the day's wait then applies) → kept."""
    dead = 2**22 + 12345  # above pid_max's default: no such process
    for name, pid, start in [("dead", dead, "777"), ("alive", os.getpid(), scratch.process_start_id(os.getpid())),
                             ("nostart", dead, None)]:
        path = tmp_path / f"trtprof-worker-p{pid}-{name}"
        path.mkdir()
        (path / scratch.MARKER).write_text(scratch.marker_text(pid, start))
        (path / "capture.log").write_text("a library's words")
    removed = scratch.clean_stale(tmp_path)
    assert [p.name for p in removed] == [f"trtprof-worker-p{dead}-dead"]
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([f"trtprof-worker-p{dead}-nostart",
                                                                 f"trtprof-worker-p{os.getpid()}-alive"])


def test_a_worker_removes_its_own_log_dir_when_closed():
    from trtprof.measure.workers import Worker

    worker = Worker(0, None)
    try:
        assert scratch.read_marker(worker.log_dir) == (os.getpid(), scratch.process_start_id(os.getpid()))
        assert Path(worker.capture_path).parent == worker.log_dir
    finally:
        worker.close()
    assert not worker.log_dir.exists()
