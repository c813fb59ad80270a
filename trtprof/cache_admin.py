"""Looking after an engines dir: what is in it (``trtprof cache ls``) and removing what is not wanted
(``trtprof cache prune``). Kept apart from ``cache.py``, which only reads and writes entries.

Every file in the dir is one of:
- an entry: ``<stem>.json`` metadata + the artifact it names — ``ok``, or ``corrupt`` when the
  metadata is unreadable/wrongly shaped, the artifact is missing, or its sha256 does not match;
- an ``orphan``: an artifact whose metadata is gone (never served: ``bench`` would skip it);
- a ``temp`` file ``.<name>.<random>.tmp``: a write in progress, or debris of a killed one.
Removal happens under the entry's lock, so a build running now is never cut from under.
"""
from __future__ import annotations

import re
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable

from .cache import LOCK_DIR, META_SUFFIX, CacheCorrupt, EngineRecord, _file_lock, _unlink_quietly
from .errors import BadInput

OK, CORRUPT, ORPHAN, TEMP = "ok", "corrupt", "orphan", "temp"
_SHORT_KEY = re.compile(r"\.([0-9a-f]{12})(?:\.|$)")


@dataclass
class CacheItem:
    """One entry (or stray file) of an engines dir."""

    status: str  # ok | corrupt | orphan | temp
    files: list[Path]
    record: EngineRecord | None = None
    problem: str = ""
    size_bytes: int = 0
    modified_s: float = 0.0  # newest mtime of its files (epoch seconds)

    @property
    def name(self) -> str:
        return self.files[0].name if self.files else "?"

    @property
    def model(self) -> str:
        if self.record is not None:
            return self.record.model
        return self.name.lstrip(".").split(".", 1)[0]

    @property
    def short_key(self) -> str | None:
        if self.record is not None:
            return self.record.key[:12]
        match = _SHORT_KEY.search(self.name)
        return match.group(1) if match else None

    def age_s(self, now: float | None = None) -> float:
        return max(0.0, (time.time() if now is None else now) - self.modified_s)


@dataclass
class CacheScan:
    root: Path
    items: list[CacheItem] = field(default_factory=list)

    def problems(self) -> list[str]:
        """One line per orphan artifact and leftover temp file (corrupt entries are refused by
        ``bench`` with their own error)."""
        out = []
        for item in self.items:
            if item.status == ORPHAN:
                out.append(f"{item.files[0]}: orphan artifact without its metadata JSON, never served "
                           "(`trtprof cache prune --corrupt` removes it)")
            elif item.status == TEMP:
                out.append(f"{item.files[0]}: temp file of an interrupted or running write "
                           "(`trtprof cache prune --corrupt` removes it when no build holds its lock)")
        return out


def _stat(files: Iterable[Path]) -> tuple[int, float]:
    size, newest = 0, 0.0
    for f in files:
        try:
            st = f.stat()
        except OSError:
            continue
        size += st.st_size
        newest = max(newest, st.st_mtime)
    return size, newest


def scan_dir(root: Path, *, verify: bool = False) -> CacheScan:
    """Classify every file of ``root`` (see the module doc). ``verify`` also checks each artifact's
    sha256, which reads every artifact: ``cache ls`` does, ``bench``'s pre-scan does not."""
    root = Path(root)
    if not root.is_dir():
        raise BadInput("no such engines dir", path=root)
    scan = CacheScan(root)
    files = sorted(p for p in root.iterdir() if p.is_file())
    claimed: set[Path] = set()
    for meta in (p for p in files if p.suffix == META_SUFFIX and not p.name.startswith(".")):
        stem = meta.name[: -len(META_SUFFIX)]
        siblings = [p for p in files if p != meta and not p.name.startswith(".") and p.name.startswith(stem + ".")
                    and p.name[len(stem):].count(".") == 1]
        try:
            record = EngineRecord.read(meta)
        except CacheCorrupt as err:
            item_files = [meta, *siblings]
            claimed.update(item_files)
            scan.items.append(CacheItem(CORRUPT, item_files, None, str(err.message), *_stat(item_files)))
            continue
        artifact = meta.parent / record.artifact
        item_files = [meta, *([artifact] if artifact.is_file() else []),
                      *(s for s in siblings if s != artifact)]
        claimed.update(item_files)
        status, problem = OK, ""
        try:
            if verify:
                record.verify()
            elif not artifact.is_file():
                raise CacheCorrupt("artifact is missing", path=artifact)
        except CacheCorrupt as err:
            status, problem = CORRUPT, err.message
        scan.items.append(CacheItem(status, item_files, record, problem, *_stat(item_files)))
    for f in files:
        if f in claimed:
            continue
        if f.name.startswith(".") and f.name.endswith(".tmp"):
            scan.items.append(CacheItem(TEMP, [f], None, "temp file", *_stat([f])))
        elif not f.name.startswith("."):
            scan.items.append(CacheItem(ORPHAN, [f], None, "no metadata JSON", *_stat([f])))
    return scan


def parse_age(text: str) -> float:
    """'90s', '30m', '12h', '7d', '2w' (or plain days) → seconds."""
    match = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([smhdw]?)\s*", text)
    if not match:
        raise BadInput(f"--older-than {text!r}: expected a number with a unit s, m, h, d or w (e.g. 7d)")
    value, unit = float(match.group(1)), match.group(2) or "d"
    return value * {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}[unit]


def select(scan: CacheScan, *, older_than_s: float | None = None, corrupt: bool = False,
           model: str | None = None, now: float | None = None) -> list[CacheItem]:
    """Items matching every filter given: ``corrupt`` (corrupt entries, orphans and temp files),
    ``older_than_s`` (age of the newest file), ``model`` (the model stem)."""
    chosen = []
    for item in scan.items:
        if corrupt and item.status == OK:
            continue
        if older_than_s is not None and item.age_s(now) < older_than_s:
            continue
        if model is not None and item.model != model:
            continue
        chosen.append(item)
    return chosen


def _lock_paths(root: Path, item: CacheItem) -> list[Path]:
    locks = Path(root) / LOCK_DIR
    if item.record is not None:
        return [locks / f"{item.record.key}.lock"]
    short = item.short_key
    return sorted(locks.glob(f"{short}*.lock")) if short and locks.is_dir() else []


def remove(root: Path, item: CacheItem) -> bool:
    """Delete the item's files under its entry lock(s), taken without waiting: False (nothing
    removed) when a build holds one now."""
    from filelock import Timeout

    held = []
    try:
        for path in _lock_paths(root, item):
            lock = _file_lock(path, timeout=0)
            lock.acquire()
            held.append(lock)
        for f in item.files:
            _unlink_quietly(f)
        return True
    except Timeout:
        return False
    finally:
        for lock in held:
            lock.release()
