"""trtprof's temp dirs in ``$TMPDIR``: named with the owner's pid, marked inside with the owner's pid
and start time, removed on exit, and those of killed runs removed by the next run.

Why: a build or sweep killed with SIGKILL (the OOM killer, a scheduler) cannot clean up; ORT's
executed-graph dirs reach 100 MB each and nothing else would ever remove them. A dir is stale when
it carries trtprof's marker (a regular file, naming the pid of the dir's name), its owner process is
gone *and* it is older than a day. The name alone is not enough: a user's
``trtprof-results-p999999-final/`` was deleted on it (issue 36). The pid alone is not enough either:
a live pid whose start time differs from the marker's is another process that reused the pid.

A measurement worker's log (what its libraries write, read by its parent when it dies) lives in a
marked dir of its own, ``trtprof-worker-p<parent pid>-*`` (``marked_dir``): a compare killed with
SIGKILL left three unmarked ``trtprof-worker-*.log`` files per run that nothing removed (issue 45).
Those dirs (``IMMEDIATE_KINDS``) go as soon as their owner is gone, without the day's wait: the marker's
start time tells a dead owner from a reused pid, and only the live parent ever reads the log.
"""
from __future__ import annotations

import os
import re
import shutil
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

PREFIX = "trtprof-"
STALE_AFTER_S = 86400  # a day: no single trtprof step holds a temp dir that long
MARKER = ".trtprof-scratch"  # inside each temp dir: "pid <pid> start <start id>", written at creation
MARKER_MAX_BYTES = 200  # a marker is one short line; anything larger is not ours
_OWNED = re.compile(r"trtprof-(?P<kind>[a-z]+)(?:-[0-9a-f]+)?-p(?P<pid>\d+)-.+")
IMMEDIATE_KINDS = frozenset({"worker"})  # removed once the owner is gone (its start time known), at any age


@contextmanager
def temp_dir(kind: str) -> Iterator[Path]:
    """A fresh temp dir ``trtprof-<kind>-p<pid>-XXXX``, removed when the block ends (also on Ctrl-C or
    SIGTERM, which the CLI turns into KeyboardInterrupt)."""
    with tempfile.TemporaryDirectory(prefix=f"{PREFIX}{kind}-p{os.getpid()}-") as tmp:
        (Path(tmp) / MARKER).write_text(marker_text(os.getpid(), process_start_id(os.getpid())), encoding="utf-8")
        yield Path(tmp)


def marked_dir(kind: str) -> Path:
    """A fresh marked temp dir ``trtprof-<kind>-p<pid>-XXXX`` that outlives the block that made it: its
    owner removes it (``shutil.rmtree``); if the owner is killed first, the next trtprof command does."""
    path = Path(tempfile.mkdtemp(prefix=f"{PREFIX}{kind}-p{os.getpid()}-"))
    (path / MARKER).write_text(marker_text(os.getpid(), process_start_id(os.getpid())), encoding="utf-8")
    return path


def process_start_id(pid: int) -> str | None:
    """When process ``pid`` started (Linux: field 22 of ``/proc/<pid>/stat``, ticks after boot), as text;
    None where it cannot be read (no /proc, the process is gone)."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as f:
            return f.read().rsplit(")", 1)[1].split()[19]
    except (OSError, IndexError):
        return None


def marker_text(pid: int, start: str | None) -> str:
    return f"pid {pid} start {start or '?'}\n"


def read_marker(path: Path) -> tuple[int, str] | None:
    """(pid, start id) from the marker inside ``path``, or None: no marker, a symlink, not ours."""
    marker = path / MARKER
    try:
        if marker.is_symlink() or not marker.is_file() or marker.stat().st_size > MARKER_MAX_BYTES:
            return None
        words = marker.read_text(encoding="ascii").split()
    except (OSError, UnicodeDecodeError):
        return None
    if len(words) != 4 or words[0] != "pid" or words[2] != "start" or not words[1].isdigit():
        return None
    return int(words[1]), words[3]


def owner_alive(pid: int, start: str) -> bool:
    """Is the process that made the dir still running? A live pid with another start time is not it."""
    if not _alive(pid):
        return False
    now_start = process_start_id(pid)
    return now_start is None or start == "?" or now_start == start


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's live process
        return True
    return True


def clean_stale(root: Path | None = None, *, now: float | None = None) -> list[Path]:
    """Remove trtprof temp dirs under ``root`` (default ``$TMPDIR``) whose owner pid is dead and whose
    last change is more than STALE_AFTER_S ago (``IMMEDIATE_KINDS``: at any age); return them. Only dirs named *and marked* by ``temp_dir``
    are touched, never followed through a symlink; errors (another user's dir) are skipped."""
    root = Path(tempfile.gettempdir() if root is None else root)
    now = time.time() if now is None else now
    removed: list[Path] = []
    try:
        candidates = [p for p in root.iterdir() if p.name.startswith(PREFIX)]
    except OSError:
        return removed
    for path in candidates:
        match = _OWNED.fullmatch(path.name)
        try:
            if match is None or path.is_symlink() or not path.is_dir():
                continue
            owner = read_marker(path)
            if owner is None or owner[0] != int(match.group("pid")):  # not trtprof's: a user's, left alone
                continue
            if owner_alive(*owner):
                continue
            immediate = match.group("kind") in IMMEDIATE_KINDS and owner[1] != "?"
            if not immediate and now - path.stat().st_mtime <= STALE_AFTER_S:
                continue
            shutil.rmtree(path)
            removed.append(path)
        except OSError:
            continue
    return removed
