"""Looking after an engines dir: what is in it (``trtprof cache ls``) and removing what is not wanted
(``trtprof cache prune``). Kept apart from ``cache.py``, which only reads and writes entries.

Every file in the dir is one of:
- an entry: ``<stem>.json`` metadata + the artifact it names — ``ok``, or ``corrupt`` when the
  metadata is unreadable/wrongly shaped, the artifact is missing, or its sha256 does not match;
- an ``orphan``: an artifact whose metadata is gone (never served: ``bench`` would skip it);
- a ``temp`` file ``.<name>.<random>.tmp``: a write in progress, or debris of a killed one.
Removal happens under the entry's lock, so a build running now is never cut from under.

Only trtprof's own files are ever classified, listed for removal or removed: a file counts as
trtprof's when its name follows the entry scheme ``<stem>.<precision>.<backend>.<12 hex>.<ext>``
(or the temp form ``.<that>.<random>.tmp``) *and* its content or the dir proves it: metadata that
reads as a record with that short key, or a lock of that key in ``.locks/`` (written by every
build). An entry's files are exactly its metadata, the artifact the metadata names and (TensorRT-RTX:
a backend whose capabilities say ``runtime_cache``, which the caller tells ``scan_dir``) its runtime caches: a user's ``<stem>.onnx.bak`` or ``<stem>.notes.txt`` beside it is not one of them
(issue 45: any ``<stem>.<a>.<b>`` counted). Anything else (a user's model, results, a symlink) is
``foreign``: counted, never touched. Symlinks are never followed: an artifact that is a symlink makes its
entry corrupt (``EngineRecord.check_artifact``, the check ``bench`` makes too), the link itself is left.
"""
from __future__ import annotations

import os
import re
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterable

from .cache import ARTIFACT_SUFFIXES, ENTRY_NAME, LOCK_DIR, META_SUFFIX, RUNTIME_CACHE, CacheCorrupt, EngineRecord
from ..util.files import file_lock, unlink_quietly
from ..errors import BadInput
from ..util.wording import plural

OK, CORRUPT, ORPHAN, TEMP = "ok", "corrupt", "orphan", "temp"
_SHORT_KEY = re.compile(r"\.([0-9a-f]{12})(?:\.|$)")
TEMP_NAME = re.compile(r"\.(?P<entry>.+)\.[A-Za-z0-9_]+\.tmp")
# backend name (an entry stem's third part) -> whether its engines keep runtime caches beside them
# (``cli._common.keeps_runtime_cache`` asks the backend's capabilities: engines/ sits below backends/)
RuntimeCaches = Callable[[str], bool]


def no_runtime_caches(backend: str) -> bool:
    """``scan_dir``'s default: no backend's runtime caches are counted (such a file is foreign, left alone)."""
    return False


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
    foreign: list[Path] = field(default_factory=list)  # not trtprof's: never listed for removal

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


def _entry_name(name: str) -> re.Match | None:
    """The entry-scheme match of a file name (plain or temp form), or None."""
    temp = TEMP_NAME.fullmatch(name)
    return ENTRY_NAME.fullmatch(temp.group("entry") if temp else name)


def _locked_keys(root: Path) -> set[str]:
    """Short keys with a lock in ``.locks/``: proof that a trtprof build wrote entries of that key."""
    locks = root / LOCK_DIR
    if not locks.is_dir() or locks.is_symlink():
        return set()
    return {p.name[:12] for p in locks.iterdir() if p.name.endswith(".lock") and re.fullmatch(r"[0-9a-f]{64}\.lock", p.name)}


def _read_entry(meta: Path, short: str, locked: set[str]) -> tuple[EngineRecord | None, str] | None:
    """(record or None, problem) for a metadata file of the entry scheme; None when neither its
    content nor a lock proves it trtprof's."""
    try:
        record = EngineRecord.read(meta)
    except CacheCorrupt as err:
        return (None, str(err.message)) if short in locked else None
    if record.key[:12] != short:
        return (None, f"metadata key {record.key[:12]} does not match its name") if short in locked else None
    return record, ""


def own_names(stem: str, record: EngineRecord | None) -> set[str]:
    """The names of the files a build of entry ``stem`` wrote besides its metadata: the artifact the
    metadata names (unreadable metadata, or one naming another file: the artifact name of each built-in
    backend) and, for
    TensorRT-RTX, its runtime caches (matched by ``is_own``). Nothing else beside an entry is its own."""
    if record is not None:
        match = ENTRY_NAME.fullmatch(record.artifact)
        if match and match["stem"] == stem and not record.artifact.endswith(META_SUFFIX):
            return {record.artifact}
    # unreadable metadata, or metadata naming a file not its own (a corrupt entry): what a build writes
    return {stem + suffix for suffix in ARTIFACT_SUFFIXES}


def is_own(name: str, stem: str, names: set[str], runtime_caches: RuntimeCaches = no_runtime_caches) -> bool:
    """Whether ``name`` is one of entry ``stem``'s files (``own_names``, or a runtime cache of a backend that
    ``runtime_caches`` says keeps them: TensorRT-RTX)."""
    if name in names:
        return True
    backend = stem.split(".")[2] if stem.count(".") == 3 else ""
    return (bool(backend) and name.startswith(stem) and bool(RUNTIME_CACHE.fullmatch(name[len(stem):]))
            and runtime_caches(backend))


def _entry_item(meta: Path, stem: str, read: tuple[EngineRecord | None, str], files: list[Path],
                claimed: set[Path], verify: bool, runtime_caches: RuntimeCaches) -> CacheItem:
    """The item of one metadata file: it and exactly its own files (regular files, never a symlink)."""
    record, problem = read
    names = own_names(stem, record)
    item_files = [meta, *(p for p in files if p not in claimed and is_own(p.name, stem, names, runtime_caches))]
    claimed.update(item_files)
    status = CORRUPT if record is None else OK
    if record is not None:
        try:
            record.verify() if verify else record.check_artifact()
        except CacheCorrupt as err:
            status, problem = CORRUPT, err.message
    return CacheItem(status, item_files, record, problem, *_stat(item_files))


def _stray(f: Path, locked: set[str], stems: set[str], runtime_caches: RuntimeCaches) -> str | None:
    """A file without metadata: TEMP (``.<own name>.<random>.tmp``), ORPHAN (an artifact or runtime cache
    name whose entry has no metadata), or None (foreign) — and only with its key's build lock as proof."""
    temp = TEMP_NAME.fullmatch(f.name)
    name = temp.group("entry") if temp else f.name
    match = ENTRY_NAME.fullmatch(name)
    if match is None or match.group("short") not in locked:
        return None
    stem = match["stem"]
    if temp is not None:
        return TEMP if is_own(name, stem, own_names(stem, None) | {stem + META_SUFFIX}, runtime_caches) else None
    if stem in stems or not is_own(name, stem, own_names(stem, None), runtime_caches):
        return None  # beside an entry's metadata and not named by it, or not a name a build writes
    return ORPHAN


def scan_dir(root: Path, *, verify: bool = False, runtime_caches: RuntimeCaches = no_runtime_caches) -> CacheScan:
    """Classify every file of ``root`` (see the module doc). ``verify`` also checks each artifact's
    sha256, which reads every artifact: ``cache ls`` does, ``bench``'s pre-scan does not. ``runtime_caches``
    says which backends' entries keep runtime caches beside them (the CLI passes ``cli._common.keeps_runtime_cache``);
    by default none do, and such a file is foreign."""
    root = Path(root)
    if not root.is_dir():
        raise BadInput("no such engines dir", path=root)
    scan = CacheScan(root)
    files = sorted(p for p in root.iterdir() if p.is_file() or p.is_symlink())
    locked = _locked_keys(root)
    claimed: set[Path] = {p for p in files if p.is_symlink()}
    scan.foreign.extend(sorted(claimed))
    stems: set[str] = set()
    for meta in (p for p in files if p.suffix == META_SUFFIX and p not in claimed):
        match = ENTRY_NAME.fullmatch(meta.name)
        read = _read_entry(meta, match.group("short"), locked) if match else None
        if read is None or match is None:
            continue
        stems.add(match["stem"])
        scan.items.append(_entry_item(meta, match["stem"], read, files, claimed, verify, runtime_caches))
    for f in files:
        if f in claimed:
            continue
        status = _stray(f, locked, stems, runtime_caches)
        if status is None:
            scan.foreign.append(f)
        else:
            scan.items.append(CacheItem(status, [f], None, "temp file" if status == TEMP else "no metadata JSON",
                                        *_stat([f])))
    return scan


def is_engines_dir(folder: Path) -> bool:
    """Whether ``folder`` is (or holds the start of) an engines dir: a ``.locks`` folder or metadata
    named by the entry scheme. Outputs are never written there (``prune`` would see user files)."""
    folder = Path(folder)
    if not folder.is_dir():
        return False
    if _locked_keys(folder):  # build locks (a converter's `<stem>.lock` is not one)
        return True
    return any(ENTRY_NAME.fullmatch(p.name) and p.suffix == META_SUFFIX for p in folder.glob(f"*{META_SUFFIX}"))


def check_cache_dir(root: Path, scan: CacheScan | None = None) -> None:
    """Refuse (exit 2) a filesystem root, a home dir, or a dir with files none of which is trtprof's:
    ``cache ls``/``prune`` are for engines dirs, and a typo must not list or remove a user's files."""
    resolved = Path(os.path.abspath(root)).resolve()
    if resolved == Path(resolved.anchor) or resolved == Path.home().resolve():
        raise BadInput("is a filesystem root or a home dir, not an engines dir (name the engines dir)", path=root)
    if scan is not None and not scan.items and scan.foreign:
        raise BadInput(f"holds no trtprof engine entry ({plural(len(scan.foreign), 'other file')}, left alone): "
                       "not an engines dir", path=root)


MAX_AGE_S = 36_500 * 86_400.0  # --older-than: 100 years


def parse_age(text: str) -> float:
    """'90s', '30m', '12h', '7d', '2w' (or plain days) → seconds."""
    match = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([smhdw]?)\s*", text)
    if not match:
        raise BadInput(f"--older-than {text!r}: expected a number with a unit s, m, h, d or w (e.g. 7d)")
    value, unit = float(match.group(1)), match.group(2) or "d"
    seconds = value * {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}[unit]
    if not seconds <= MAX_AGE_S:  # 400 digits would be inf; nothing in a cache is older than this anyway
        raise BadInput(f"--older-than {text[:40]!r}: at most {MAX_AGE_S // 86400:,.0f}d (100 years)")
    return seconds


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
            lock = file_lock(path, timeout=0)
            lock.acquire()
            held.append(lock)
        for f in item.files:
            unlink_quietly(f)
        return True
    except Timeout:
        return False
    except OSError as err:  # a read-only engines dir: the lock or the unlink is refused
        raise BadInput(f"cannot remove {item.name} ({err.strerror or err})", path=root) from err
    finally:
        for lock in held:
            lock.release()


def remove_unheld_locks(root: Path) -> None:
    """In an engines dir that holds nothing but its ``.locks/`` (a build that failed there), remove the lock
    files no process holds, then ``.locks/`` when empty: so the dir itself can go (issue 34). A lock another
    process holds is left as it is; a dir with anything else in it is not touched."""
    root = Path(root)
    lock_dir = root / LOCK_DIR
    if [p.name for p in root.iterdir()] != [LOCK_DIR] or not lock_dir.is_dir():
        return
    for path in lock_dir.iterdir():
        if not re.fullmatch(r"[0-9a-f]{64}\.lock", path.name):
            continue
        lock = file_lock(path, 0)
        try:
            lock.acquire()
        except Exception:  # noqa: BLE001 - held by another process (filelock.Timeout), or unreadable: keep it
            continue
        try:
            path.unlink()
        finally:
            lock.release()
    try:
        lock_dir.rmdir()
    except OSError:
        pass
