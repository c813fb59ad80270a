"""TF conversions cached by content: one ONNX file (and its metadata JSON) per model content and
conversion options, served again without TensorFlow; the shape of ``EngineCache.get_or_build``."""
from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any, Mapping

from ...engines.cache import CacheNotWritable, entry_lock
from ...util.files import atomic_write_text, safe_stem
from ...model.onnx_model import sha256_file
from . import conversion  # conversion.convert_tf as a module attribute: tests replace it with a fake
from .args import content_sha256, detect_format
from .conversion import CONVERT_SCHEMA, ConversionResult


def _options_key(options: Mapping[str, Any]) -> str:
    """The options that change the ONNX file, canonically: part of the cache key."""
    relevant = {k: options.get(k) for k in ("opset", "inputs", "outputs", "signature")}
    return json.dumps(relevant, sort_keys=True, default=str)


def cache_entry(path: Path, cache_dir: Path, **options: Any) -> tuple[Path, Path, str]:
    """(onnx path, metadata path, source sha256) of ``path``'s entry in ``cache_dir``."""
    path = Path(path)
    sha = content_sha256(path)
    key = hashlib.sha256(f"{CONVERT_SCHEMA}\n{sha}\n{_options_key(options)}".encode()).hexdigest()
    stem_name = path.stem if path.is_file() else path.name
    base = f"{safe_stem(stem_name)}.tf.{key[:16]}"
    return Path(cache_dir) / f"{base}.onnx", Path(cache_dir) / f"{base}.json", sha


def convert_cached_result(path: Path, cache_dir: Path, *, check: bool = True, **options: Any) -> ConversionResult:
    """As ``convert_cached`` but returns the whole record (cached=True on a hit).

    A hit needs the ONNX file, its metadata and a matching sha256 of the ONNX; a hit that was made
    with ``--no-check`` is checked now when a check is asked for (that needs TensorFlow again)."""
    path, cache_dir = Path(path), Path(cache_dir)
    detect_format(path)
    onnx_path, meta_path, sha = cache_entry(path, cache_dir, **options)
    try:
        cache_dir.mkdir(parents=True, exist_ok=True)
    except OSError:
        pass  # a read-only engines dir: entry_lock below says so, after a read-only hit was tried

    def usable_hit() -> ConversionResult | None:
        hit = _read_hit(onnx_path, meta_path, sha)
        return hit if hit is not None and (hit.check is not None or not check) else None

    try:
        lock = entry_lock(cache_dir, onnx_path.stem)
        lock.__enter__()
    except CacheNotWritable:
        hit = usable_hit()  # read-only dir: a complete hit is still served
        if hit is not None:
            return hit
        raise
    try:  # the shape of EngineCache.get_or_build
        hit = usable_hit()
        if hit is not None:
            return hit
        result = conversion.convert_tf(path, onnx_path, conversion.TfConvertOptions(**options), check=check,
                                         source_sha256=sha)
        data = result.to_json()
        data["onnx_sha256"] = sha256_file(onnx_path)
        atomic_write_text(meta_path, json.dumps(data, indent=2, sort_keys=True) + "\n")
        return result
    finally:
        lock.__exit__(None, None, None)


def _read_hit(onnx_path: Path, meta_path: Path, source_sha256: str) -> ConversionResult | None:
    if not onnx_path.is_file() or not meta_path.is_file():
        return None
    try:
        data = json.loads(meta_path.read_text(encoding="utf-8"))
        if (
            data.get("schema") != CONVERT_SCHEMA
            or data.get("source_sha256") != source_sha256
            or data.get("onnx_sha256") != sha256_file(onnx_path)
        ):
            return None  # stale or damaged: convert again, replacing it
        return ConversionResult.from_json(data, onnx_path)
    except (OSError, ValueError, KeyError, TypeError):
        return None


def convert_cached(path: Path, cache_dir: Path, *, check: bool = True, **options: Any) -> Path:
    """The ONNX file for TF model ``path``, converted once per content (see ``convert_cached_result``).
    Used by ``trtprof build`` so a TF model can be built like an ONNX one."""
    return convert_cached_result(path, cache_dir, check=check, **options).onnx_path
