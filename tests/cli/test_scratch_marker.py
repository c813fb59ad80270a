"""Issue 36, deliverable 4: only temp dirs that carry trtprof's marker (owner pid and start time) are
ever removed. Was: any `$TMPDIR/trtprof-<word>-p<pid>-<x>` a day old with a dead pid was deleted on its
name alone, a user's `trtprof-results-p999999-final/` included, by any command (even `cache ls`)."""
from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def _dead_pid() -> int:
    return int(subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True,
                              text=True).stdout.strip())


def _old(d: Path, age_s: float) -> Path:
    now = time.time()
    os.utime(d, (now - age_s, now - age_s))
    return d


def test_a_users_folder_named_like_a_temp_dir_survives_every_command(tmp_path):
    mine = tmp_path / "trtprof-results-p999999-final"
    (mine / "sub").mkdir(parents=True)
    (mine / "sub" / "results.json").write_text("{}")
    _old(mine, 3 * 86400)
    proc = subprocess.run([sys.executable, "-m", "trtprof", "cache", "ls", str(tmp_path / "nothing")],
                          capture_output=True, text=True, env=dict(os.environ, TMPDIR=str(tmp_path), PYTHONPATH=str(REPO)))
    assert proc.returncode == 2, proc.stderr
    assert (mine / "sub" / "results.json").exists()


def test_only_marked_dirs_of_a_gone_owner_are_removed(tmp_path):
    from trtprof.util import scratch

    dead = _dead_pid()
    now = time.time()
    age = scratch.STALE_AFTER_S + 60

    def make(name: str, pid: int, start: str | None, age_s: float = age) -> Path:
        d = tmp_path / name
        d.mkdir()
        if start is not None:
            (d / scratch.MARKER).write_text(scratch.marker_text(pid, start))
        return _old(d, age_s)

    gone = make(f"trtprof-ort-p{dead}-abc", dead, "123")
    unmarked = make(f"trtprof-ort-p{dead}-def", dead, None)
    my_start = scratch.process_start_id(os.getpid())
    assert my_start is not None
    alive = make(f"trtprof-ort-p{os.getpid()}-mine", os.getpid(), my_start)
    reused = make(f"trtprof-ort-p{os.getpid()}-old", os.getpid(), my_start + "0")  # same pid, another process
    fresh = make(f"trtprof-ort-p{dead}-new", dead, "123", age_s=scratch.STALE_AFTER_S - 60)
    wrong_pid = make(f"trtprof-ort-p{dead}-x", dead + 1, "123")  # the marker names another pid than the name
    linked = tmp_path / f"trtprof-ort-p{dead}-lnk"
    linked.mkdir()
    (linked / scratch.MARKER).symlink_to(gone / scratch.MARKER)
    _old(linked, age)
    removed = scratch.clean_stale(tmp_path, now=now)
    assert sorted(removed) == sorted([gone, reused])
    for kept in (unmarked, alive, fresh, wrong_pid, linked):
        assert kept.exists(), kept


def test_temp_dir_writes_its_marker(tmp_path, monkeypatch):
    from trtprof.util import scratch

    monkeypatch.setenv("TMPDIR", str(tmp_path))
    monkeypatch.setattr(scratch.tempfile, "tempdir", None)
    with scratch.temp_dir("ort") as d:
        assert d.parent == tmp_path
        assert (d / scratch.MARKER).read_text() == scratch.marker_text(os.getpid(), scratch.process_start_id(os.getpid()))
    assert not d.exists()
