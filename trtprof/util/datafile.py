"""Reading files whose content is data, not trusted: sweep specs (TOML/YAML) and result JSON.

A gzip file (by its magic bytes, or a ``.gz`` name) is read through the stdlib ``gzip`` module, so
``results.json.gz`` works wherever ``results.json`` does (report, plot, import, resume, the pages);
the size limit bounds the decompressed text too, so a gzip bomb is one line as well.

Why a module: a spec or a result file may come from anywhere (a colleague, a CI artifact, a fuzzer).
Each is read with a size limit, parsed without executing anything, and its structure is bounded
before any code walks it, so a YAML alias bomb, a 100 MB file or 100 000 nested lists is one line
naming the file, not a hang, a MemoryError or a RecursionError.
"""
from __future__ import annotations

import io
import json
import math
import re
import sys
from pathlib import Path
from typing import Any

from ..errors import BadInput, first_line

MAX_FILE_BYTES = 64 * 1024**2  # results of a long sweep with raw samples reach a few MB; 64 MB is far above
MAX_SPEC_BYTES = 1024**2  # a spec of hundreds of models is ~100 KB
MAX_NODES = 5_000_000  # values in one file after YAML aliases are expanded (a 64 MB JSON holds fewer)
MAX_DEPTH = 64  # nesting; trtprof's own files nest less than 10 levels
MAX_SPEC_NODES = 100_000  # values in a sweep spec after aliases: hundreds of models × ~10 keys is ~5 000
# names that become file or folder names: ids, backends, gpu types
SAFE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")
GZIP_MAGIC = b"\x1f\x8b"


def is_gzip(path: Path) -> bool:
    """Whether ``path`` is to be read as gzip: its first two bytes are gzip's magic, or its name ends in .gz."""
    path = Path(path)
    if path.suffix == ".gz":
        return True
    with path.open("rb") as fh:
        return fh.read(2) == GZIP_MAGIC


def read_gzip_text(path: Path, limit: int, what: str) -> str:
    """The decompressed text of a gzip file, refused (exit 2) when it is not valid gzip or decompresses
    to more than ``limit`` bytes (read up to the limit, never further)."""
    import gzip  # here, not at the top: every command imports this module, few read a .gz
    import zlib

    try:
        with Path(path).open("rb") as fh:
            if fh.read(2) != GZIP_MAGIC:  # gzip reads an empty file as empty data: refused here too
                raise gzip.BadGzipFile("no gzip header")
        with gzip.open(path, "rb") as fh:
            raw = fh.read(limit + 1)
    except (gzip.BadGzipFile, EOFError, zlib.error) as err:
        raise BadInput(f"{what} is not valid gzip data ({first_line(err)})", path=path) from err
    if len(raw) > limit:
        raise BadInput(f"{what} decompresses to more than the {limit}-byte limit", path=path)
    return io.TextIOWrapper(io.BytesIO(raw), encoding="utf-8").read()  # newlines as Path.read_text gives them


def read_text(path: Path, limit: int, what: str) -> str:
    """The file's text (decompressed when it is gzip), refused (exit 2) when larger than ``limit``
    bytes or not UTF-8."""
    path = Path(path)
    try:
        size = path.stat().st_size
        if size > limit:
            raise BadInput(f"{what} is {size} bytes, more than the {limit}-byte limit", path=path)
        if is_gzip(path):
            return read_gzip_text(path, limit, what)
        return path.read_text(encoding="utf-8")
    except UnicodeDecodeError as err:
        raise BadInput(f"{what} is not UTF-8 text", path=path) from err
    except OSError as err:
        raise BadInput(f"cannot read the {what} ({err.strerror or err})", path=path) from err


def check_bounded(data: Any, where: str, *, max_nodes: int = MAX_NODES, max_depth: int = MAX_DEPTH) -> None:
    """Refuse data with more than ``max_nodes`` values (aliases counted each time they are reached)
    or nested deeper than ``max_depth``. Iterative and stops at the limit: cheap on a bomb."""
    stack: list[tuple[Any, int]] = [(data, 0)]
    count = 0
    while stack:
        value, depth = stack.pop()
        count += 1
        if count > max_nodes:
            raise BadInput(f"{where}: more than {max_nodes} values (a YAML alias bomb?); refused")
        if depth > max_depth:
            raise BadInput(f"{where}: nested deeper than {max_depth} levels; refused")
        if isinstance(value, dict):
            stack.extend((v, depth + 1) for v in value.values())
        elif isinstance(value, (list, tuple)):
            stack.extend((v, depth + 1) for v in value)


class _Refused(ValueError):
    """A value ``strict_json`` refuses while parsing (its message is the one line)."""


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """An object's pairs as a dict, refusing a key given twice: ``json`` keeps the last silently, so a
    second ``"environment": "x"`` turned a file's environment into a string (issue 45). trtprof never
    writes one."""
    out = dict(pairs)
    if len(out) != len(pairs):
        seen: set[str] = set()
        twice = next(k for k, _ in pairs if k in seen or seen.add(k))  # type: ignore[func-returns-value]
        raise _Refused(f"key {twice[:60]!r} appears twice in one object (a damaged or edited file)")
    return out


def _float_range_int(text: str) -> int:
    """An integer literal, refused beyond a float's range (``10**400`` was an OverflowError wherever a
    page or a statistic took it as a number)."""
    value = int(text)
    if abs(value) > sys.float_info.max:
        raise _Refused(f"integer of {len(text.lstrip('-'))} digits is too large: beyond the range of a float")
    return value


def strict_json(text: str) -> Any:
    """``json.loads`` refusing duplicate keys and integers beyond a float's range (``_Refused``)."""
    return json.loads(text, object_pairs_hook=_unique_keys, parse_int=_float_range_int)


def load_json(path: Path, what: str, limit: int = MAX_FILE_BYTES) -> Any:
    """JSON from ``path`` (or gzip-compressed JSON: ``.json.gz``) within the size and structure bounds;
    BadInput naming the file otherwise (also for a key given twice in one object and an integer beyond a
    float's range: ``strict_json``).
    NaN/Infinity literals parse (trtprof writes them for undefined statistics); callers that need
    finite numbers check with ``finite_samples``."""
    text = read_text(path, limit, what)
    try:
        data = strict_json(text)
    except RecursionError as err:
        raise BadInput(f"{what}: nested too deeply", path=path) from err
    except _Refused as err:
        raise BadInput(f"{what}: {err}", path=path) from err
    except ValueError as err:
        raise BadInput(f"{what} is not valid JSON ({first_line(err)})", path=path) from err
    check_bounded(data, str(path))
    return data


def load_yaml(text: str, path: Path) -> Any:
    """YAML with PyYAML's safe loader, bounded after loading (aliases share objects, so the load
    itself is small; walking the result is what would explode, and ``check_bounded`` stops that)."""
    import yaml  # type: ignore[import-untyped]

    try:
        data = yaml.safe_load(text)
    except RecursionError as err:
        raise BadInput("YAML nested too deeply", path=path) from err
    except yaml.YAMLError as err:
        raise BadInput(f"not valid YAML ({err})".replace("\n", " "), path=path) from err
    check_bounded(data, str(path), max_nodes=MAX_SPEC_NODES)
    return data


def safe_name(value: Any, field: str) -> str:
    """``value`` when it is a plain name (letters, digits, '.', '_', '-'; no '/', no leading dot), so
    it can become part of a file name without leaving its folder; BadInput naming ``field`` otherwise."""
    if not isinstance(value, str) or not SAFE_NAME.fullmatch(value) or ".." in value:
        raise BadInput(f"{field}: {str(value)[:80]!r} is not a plain name (letters, digits, . _ -)")
    return value


def finite_samples(values: Any, field: str) -> list[float]:
    """A non-empty list of finite numbers, or BadInput naming ``field`` and the first bad value."""
    if not isinstance(values, list) or not values:
        raise BadInput(f"{field}: expected a non-empty list of numbers")
    for i, v in enumerate(values):
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
            raise BadInput(f"{field}[{i}]: {str(v)[:40]!r} is not a finite number")
    return [float(v) for v in values]
