"""Content-addressed engine store: artifact + metadata JSON side by side, atomic and locked.

Layout in the engines dir, for model ``resnet50.onnx`` built fp16 by TensorRT with key ``3f2a…``::

    resnet50.fp16.tensorrt.3f2a9c01d4e7.plan     the artifact
    resnet50.fp16.tensorrt.3f2a9c01d4e7.json     its metadata (spec, environment, sha256, notes)
    .locks/3f2a9c01d4e7….lock                    a filelock per key
    .budget/5e1c….json                           compare's memo of what the minimum needed (measure.budget_memo)

The metadata file is written last and marks a complete entry; an artifact without it is debris from
an interrupted build and is never served. Both files are written to a temp name in the same folder
and renamed into place, so a reader sees the old entry or the new one, never half of one.
"""
from __future__ import annotations

import json
import os
import re
import tempfile
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator, Mapping

from ..errors import WRITE_ERRNOS, BadInput, CacheCorrupt, TrtprofError, first_line
from ..model.onnx_model import sha256_file
from ..util.datafile import check_bounded
from ..util.files import atomic_write_text, file_lock, safe_stem, temp_prefix, unlink_quietly, user_mode
from ..spec import CACHE_SCHEMA, BuildSpec, CacheKey, Precision, TensorSpec

META_SUFFIX = ".json"
# the names EngineCache.entry_stem + an extension give: ``cache prune`` and ``bench DIR`` know entries by it
ENTRY_NAME = re.compile(r"(?P<stem>[\w-]+\.[a-z0-9]+\.[a-z0-9_-]+\.(?P<short>[0-9a-f]{12}))(?:\.[A-Za-z0-9_]+){1,2}")
LOCK_DIR = ".locks"
# What a build writes beside an entry's metadata: the artifact, ``<stem><suffix>`` with the suffix of the
# backend that built it (tests/engines/test_prune_own_files.py checks every registered backend's is here),
# and TensorRT-RTX's runtime cache per GPU, ``<stem>.<smXY>.rtxcache`` (backends/tensorrt/rtx.py; a backend whose
# capabilities say ``runtime_cache``: which one is the caller's to say, cache_admin.scan_dir). Only
# these names are ever an entry's files: a user's ``<stem>.onnx.bak`` beside it is not.
ARTIFACT_SUFFIXES = (".onnx", ".plan", ".torch.zip")
RUNTIME_CACHE = re.compile(r"\.(?:sm\d+|nogpu)\.rtxcache")
MAX_META_BYTES = 16 << 20  # a record with the FP16 range analysis of a large model is ~1 MB
LOCK_TIMEOUT_S = 3600  # a TensorRT build of a large model can take many minutes


@dataclass
class EngineRecord:
    """The metadata of one cached engine (the JSON beside the artifact)."""

    key: str
    model: str  # model stem, for names and tables
    model_path: str
    spec: BuildSpec
    environment: dict[str, Any]
    artifact: str  # file name, relative to the metadata file's folder
    artifact_sha256: str
    inputs: tuple[TensorSpec, ...]
    outputs: tuple[TensorSpec, ...]
    build_seconds: float
    created: str
    backend_metadata: dict[str, Any] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    meta_path: Path | None = None  # where it was read from; not serialized

    @property
    def backend(self) -> str:
        return self.spec.backend

    @property
    def precision(self) -> str:
        return self.spec.precision.value

    @property
    def artifact_path(self) -> Path:
        if self.meta_path is None:
            raise ValueError("record was not read from disk")
        return self.meta_path.parent / self.artifact

    def to_json(self) -> dict[str, Any]:
        return {
            "schema": CACHE_SCHEMA,
            "key": self.key,
            "model": self.model,
            "model_path": self.model_path,
            "spec": self.spec.to_json(),
            "environment": self.environment,
            "artifact": self.artifact,
            "artifact_sha256": self.artifact_sha256,
            "inputs": [t.to_json() for t in self.inputs],
            "outputs": [t.to_json() for t in self.outputs],
            "build_seconds": self.build_seconds,
            "created": self.created,
            "backend_metadata": self.backend_metadata,
            "notes": self.notes,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any], meta_path: Path | None = None) -> "EngineRecord":
        return cls(
            key=data["key"],
            model=data["model"],
            model_path=data.get("model_path", ""),
            spec=BuildSpec.from_json(data["spec"]),
            environment=dict(data.get("environment", {})),
            artifact=data["artifact"],
            artifact_sha256=data["artifact_sha256"],
            inputs=tuple(TensorSpec.from_json(t) for t in data["inputs"]),
            outputs=tuple(TensorSpec.from_json(t) for t in data["outputs"]),
            build_seconds=float(data.get("build_seconds", 0.0)),
            created=data.get("created", ""),
            backend_metadata=dict(data.get("backend_metadata", {})),
            notes=list(data.get("notes", [])),
            meta_path=meta_path,
        )

    @classmethod
    def read(cls, meta_path: Path) -> "EngineRecord":
        """The record in ``meta_path``; CacheCorrupt for anything that is not one (bad JSON, a JSON
        list, missing or wrongly typed fields), so ``build`` replaces it and ``bench`` refuses it."""
        try:
            size = Path(meta_path).stat().st_size
            if size > MAX_META_BYTES:
                raise ValueError(f"{size:,} bytes, more than the {MAX_META_BYTES:,} metadata ever takes")
            data = json.loads(Path(meta_path).read_text(encoding="utf-8"))
            check_bounded(data, "engine metadata")  # walked by from_json and json.dumps: no deeper than 64
        except BadInput as err:
            raise CacheCorrupt(first_line(err), path=meta_path) from err
        except (OSError, ValueError) as err:
            raise CacheCorrupt(f"unreadable engine metadata ({type(err).__name__}: {first_line(err)})",
                               path=meta_path) from err
        except RecursionError as err:  # 100,000 nested lists: the parser's own recursion limit
            raise CacheCorrupt("unreadable engine metadata (nested too deeply)", path=meta_path) from err
        if not isinstance(data, dict):
            raise CacheCorrupt(f"engine metadata is a JSON {type(data).__name__}, not an object "
                               "(rebuild with `trtprof build --rebuild`)", path=meta_path)
        if data.get("schema") != CACHE_SCHEMA:
            raise CacheCorrupt(f"engine metadata schema {data.get('schema')!r}, expected {CACHE_SCHEMA}", path=meta_path)
        try:
            record = cls.from_json(data, meta_path=Path(meta_path))
            if not (isinstance(record.key, str) and isinstance(record.artifact, str) and record.artifact
                    and "/" not in record.artifact and isinstance(record.artifact_sha256, str)):
                raise ValueError("key, artifact and artifact_sha256 must be non-empty strings")
            return record
        except (ValueError, KeyError, TypeError, AttributeError) as err:
            raise CacheCorrupt(f"engine metadata has the wrong shape ({type(err).__name__}: {err}); "
                               "rebuild with `trtprof build --rebuild`", path=meta_path) from err

    def check_artifact(self) -> Path:
        """The artifact's path; CacheCorrupt when it is not the entry's own regular file: missing, a
        symlink (trtprof writes none and follows none: a link could serve any file as this engine), or
        a name that is not ``<this entry's stem>.<ext>``. ``bench`` (through ``verify``) and ``cache
        ls``/``prune`` ask this same question, so they agree on what is corrupt."""
        path = self.artifact_path
        if path.is_symlink():
            raise CacheCorrupt("artifact is a symlink; trtprof writes none and never follows one "
                               "(rebuild with `trtprof build --rebuild`)", path=path)
        own, meta = ENTRY_NAME.fullmatch(self.artifact), ENTRY_NAME.fullmatch(Path(self.meta_path or "").name)
        if own is None or self.artifact.endswith(META_SUFFIX) or (meta is not None and own["stem"] != meta["stem"]):
            raise CacheCorrupt("artifact is not the entry's own file (its metadata names another)", path=path)
        if not path.is_file():
            raise CacheCorrupt("artifact is missing (rebuild with `trtprof build --rebuild`)", path=path)
        return path

    def verify(self) -> None:
        """Raise CacheCorrupt unless the artifact is the entry's own file and matches its recorded sha256."""
        path = self.check_artifact()
        actual = sha256_file(path)
        if actual != self.artifact_sha256:
            raise CacheCorrupt(
                f"artifact sha256 {actual[:12]}… does not match its metadata ({self.artifact_sha256[:12]}…); "
                "the file was changed or truncated: rebuild with `trtprof build --rebuild`",
                path=path,
            )


class CacheNotWritable(TrtprofError):
    """The engines dir (or its lock folder) cannot be written: read-only, no permission."""


@contextmanager
def entry_lock(root: Path, name: str) -> Iterator[None]:
    """An inter-process lock for one cache entry: ``root/.locks/<name>.lock`` (filelock).

    A lock that cannot be created (read-only engines dir) raises ``CacheNotWritable`` before the
    block runs, so a caller can fall back to read-only use; errors inside the block pass through."""
    lock_dir = Path(root) / LOCK_DIR
    try:
        lock_dir.mkdir(parents=True, exist_ok=True)
        lock = file_lock(lock_dir / f"{name}.lock", LOCK_TIMEOUT_S)
        lock.acquire()
    except OSError as err:
        raise CacheNotWritable(f"cannot create a lock in the engines dir ({err.strerror or err})", path=lock_dir) from err
    try:
        yield
    finally:
        lock.release()


class EngineCache:
    """The engines dir. ``get_or_build`` is the only way entries are written."""

    def __init__(self, root: Path) -> None:
        self.root = Path(root)

    def entry_stem(self, model_stem: str, spec: BuildSpec, key: CacheKey) -> str:
        return f"{safe_stem(model_stem)}.{spec.precision.value}.{spec.backend}.{key.short}"

    def lock(self, key: CacheKey):
        return entry_lock(self.root, key.hexdigest)

    def find(self, key: CacheKey) -> EngineRecord | None:
        """The complete entry for ``key``, or None. Does not verify the artifact."""
        if not self.root.is_dir():
            return None
        for meta in self.root.glob(f"*.{key.short}{META_SUFFIX}"):
            try:
                record = EngineRecord.read(meta)
            except CacheCorrupt:
                continue
            if record.key == key.hexdigest:
                return record
        return None

    def get_or_build(
        self,
        key: CacheKey,
        stem: str,
        suffix: str,
        build: Callable[[Path], EngineRecord],
        *,
        rebuild: bool = False,
    ) -> tuple[EngineRecord, bool]:
        """Return (record, built). Under the key's lock: remove temp files a killed build of this key
        left, serve a verified hit, else call ``build(tmp_artifact_path)`` — which writes the
        artifact and returns its record — and move both files into place. A hit leaves the disk
        untouched. A read-only engines dir still serves verified hits (without the lock: nothing is
        written, and the metadata file is only ever replaced atomically)."""
        try:
            self.root.mkdir(parents=True, exist_ok=True)
            lock = self.lock(key)
            lock.__enter__()
        except (OSError, CacheNotWritable) as err:
            return self._read_only_hit(key, stem, rebuild, err), False
        try:
            for debris in self.root.glob(f".{stem}*.tmp"):  # under the lock: no live writer owns it
                unlink_quietly(debris)
            existing = self.find(key)
            if existing is not None and not rebuild:
                try:
                    existing.verify()
                    return existing, False
                except CacheCorrupt:
                    pass  # rebuild below, replacing the damaged entry
            artifact_name = f"{stem}{suffix}"
            fd, tmp_name = tempfile.mkstemp(prefix=temp_prefix(artifact_name), suffix=".tmp", dir=self.root)
            os.fchmod(fd, user_mode())
            os.close(fd)
            tmp = Path(tmp_name)
            try:
                try:
                    record = build(tmp)
                except OSError as err:  # a backend's write to the temp artifact: a full disk names no file
                    if err.filename is not None or err.errno not in WRITE_ERRNOS:
                        raise
                    raise OSError(err.errno, err.strerror, str(self.root / artifact_name)) from err
                if not tmp.is_file() or tmp.stat().st_size == 0:
                    raise CacheCorrupt("backend wrote no artifact", path=self.root / artifact_name)
                record.artifact = artifact_name
                record.artifact_sha256 = sha256_file(tmp)
                meta_path = self.root / f"{stem}{META_SUFFIX}"
                os.replace(tmp, self.root / artifact_name)
                record.meta_path = meta_path
                atomic_write_text(meta_path, json.dumps(record.to_json(), indent=2, sort_keys=True) + "\n")
            except BaseException:
                unlink_quietly(tmp)
                raise
            return record, True
        finally:
            lock.__exit__(None, None, None)

    def _read_only_hit(self, key: CacheKey, stem: str, rebuild: bool, err: BaseException) -> EngineRecord:
        existing = None if rebuild else self.find(key)
        if existing is not None:
            try:
                existing.verify()
                return existing
            except CacheCorrupt:
                pass
        root_cause = err.__cause__ if isinstance(err, TrtprofError) and err.__cause__ is not None else err
        cause = getattr(root_cause, "strerror", None) or str(root_cause)
        raise CacheNotWritable(f"engines dir is not writable ({cause}) and has no usable {stem}: "
                               "build into a writable --engines dir", path=self.root) from err

    def find_covering(self, spec: BuildSpec, environment: Mapping[str, Any]) -> EngineRecord | None:
        """A complete, verified entry built for the same model, backend, precision, shapes, options
        and environment whose batch profile covers ``spec``'s batch sizes (TensorRT: one engine with
        profile 1–32 serves a request for 1,8). The narrowest such profile wins."""
        if not self.root.is_dir():
            return None
        want = spec.to_json()
        found = []
        for meta in self.root.glob(f"*.{spec.precision.value}.{spec.backend}.*{META_SUFFIX}"):
            try:
                record = EngineRecord.read(meta)
            except CacheCorrupt:
                continue
            have = record.spec.to_json()
            if {k: v for k, v in have.items() if k != "batch_sizes"} != {k: v for k, v in want.items() if k != "batch_sizes"}:
                continue
            if record.environment != dict(environment):
                continue
            if not record.spec.min_batch <= spec.min_batch or not spec.max_batch <= record.spec.max_batch:
                continue
            found.append(record)
        for record in sorted(found, key=lambda r: r.spec.max_batch - r.spec.min_batch):
            try:
                record.verify()
                return record
            except CacheCorrupt:
                continue
        return None


def list_engines(path: Path) -> list[EngineRecord]:
    """Engines under ``path``: an engines dir, a metadata JSON, or an artifact with its JSON beside."""
    path = Path(path)
    if not path.exists():
        raise BadInput("no such file or directory", path=path)
    if path.is_dir():
        # entry metadata only: a results.json or notes.json beside the engines is not an engine
        metas = sorted(p for p in path.glob(f"*{META_SUFFIX}") if ENTRY_NAME.fullmatch(p.name))
        if not metas:
            raise BadInput("no engines here (build some with `trtprof build MODEL --engines DIR`)", path=path)
        # by model, then precision as a reader compares them (fp32, tf32, fp16), not by file name
        records = [EngineRecord.read(m) for m in metas]
        return sorted(records, key=lambda r: (r.model, Precision.rank(r.precision), r.backend))
    if path.suffix == META_SUFFIX:
        return [EngineRecord.read(path)]
    meta = path.parent / (path.name[: -len(path.suffix)] + META_SUFFIX) if path.suffix else None
    if meta is None or not meta.is_file():
        raise BadInput("not a trtprof engine (no metadata JSON beside it)", path=path)
    return [EngineRecord.read(meta)]
