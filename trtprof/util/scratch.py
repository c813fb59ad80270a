"""trtprof's temp dirs in ``$TMPDIR``: named with the owner's pid, removed on exit, and those of killed
runs removed by the next run.

Why: a build or sweep killed with SIGKILL (the OOM killer, a scheduler) cannot clean up; ORT's
executed-graph dirs reach 100 MB each and nothing else would ever remove them. A dir is stale when
its owner process is gone *and* it is older than a day: the pid alone is not enough (another
container sharing ``/tmp`` may own the same pid), the age alone would cut a long sweep's cell.
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
_OWNED = re.compile(r"trtprof-[a-z]+(?:-[0-9a-f]+)?-p(?P<pid>\d+)-.+")


@contextmanager
def temp_dir(kind: str) -> Iterator[Path]:
    """A fresh temp dir ``trtprof-<kind>-p<pid>-XXXX``, removed when the block ends (also on Ctrl-C or
    SIGTERM, which the CLI turns into KeyboardInterrupt)."""
    with tempfile.TemporaryDirectory(prefix=f"{PREFIX}{kind}-p{os.getpid()}-") as tmp:
        yield Path(tmp)


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
    last change is more than STALE_AFTER_S ago; return them. Only dirs named by ``temp_dir`` are
    touched, never followed through a symlink; errors (another user's dir) are skipped."""
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
            if _alive(int(match.group("pid"))) or now - path.stat().st_mtime <= STALE_AFTER_S:
                continue
            shutil.rmtree(path)
            removed.append(path)
        except OSError:
            continue
    return removed
