"""What the user names: the TF model's format, its content hash, and the ``--inputs``/``--outputs``
tensor arguments (``NAME`` or ``NAME:SHAPE``)."""
from __future__ import annotations

import hashlib
import re
from pathlib import Path

from ...errors import BadInput, BadModel
from ...model.onnx_model import sha256_file

KERAS_SUFFIXES = (".keras", ".h5", ".hdf5")
GRAPHDEF_SUFFIXES = (".pb",)

Shape = tuple[int | None, ...]


def detect_format(path: Path) -> str:
    """"keras", "savedmodel" or "graphdef"; a BadModel line for anything else."""
    path = Path(path)
    if not path.exists():
        raise BadModel("no such file or directory", path=path)
    if path.is_dir():
        if not any(path.iterdir()):
            raise BadModel("empty directory, not a TensorFlow SavedModel", path=path)
        if not (path / "saved_model.pb").is_file() and not (path / "saved_model.pbtxt").is_file():
            raise BadModel("directory has no saved_model.pb: not a TensorFlow SavedModel", path=path)
        return "savedmodel"
    suffix = path.suffix.lower()
    if suffix not in KERAS_SUFFIXES + GRAPHDEF_SUFFIXES:
        raise BadModel(
            "not a TensorFlow model (expected a SavedModel directory, a .keras/.h5 file or a frozen .pb)", path=path
        )
    if path.stat().st_size == 0:
        raise BadModel("file is empty", path=path)
    return "keras" if suffix in KERAS_SUFFIXES else "graphdef"


def content_sha256(path: Path) -> str:
    """sha256 of a file, or of a directory's files in sorted relative-path order (path + content hash),
    so a copied or re-timestamped SavedModel keeps its hash and any changed byte changes it."""
    path = Path(path)
    if path.is_file():
        return sha256_file(path)
    digest = hashlib.sha256()
    for file in sorted((p for p in path.rglob("*") if p.is_file()), key=lambda p: p.relative_to(path).as_posix()):
        digest.update(file.relative_to(path).as_posix().encode())
        digest.update(b"\0")
        digest.update(sha256_file(file).encode())
        digest.update(b"\n")
    return digest.hexdigest()


_SHAPE_RE = re.compile(r"^(\[[^\]]*\]|[0-9?Nn-]+(x[0-9?Nn-]+)+|\?)$")


def parse_tensor_arg(text: str) -> tuple[str, Shape | None]:
    """``NAME`` or ``NAME:SHAPE`` → (name, shape or None).

    TF tensor names end in ``:0``, so a trailing ``:…`` is a shape only when it looks like one:
    ``1x128x128x3``, ``?x128x128x3`` (``?``, ``N`` or ``-1`` = dynamic) or ``[?,128,128,3]``.
    """
    text = text.strip()
    name, sep, tail = text.rpartition(":")
    if not sep or not _SHAPE_RE.match(tail):
        if not text:
            raise BadInput("empty tensor name in --inputs/--outputs")
        return text, None
    if not name:
        raise BadInput(f"{text!r}: tensor name missing before the shape")
    parts = tail.strip("[]").replace(",", "x").split("x") if tail != "?" else ["?"]
    dims: list[int | None] = []
    for part in parts:
        part = part.strip()
        if part in ("?", "N", "n", "-1"):
            dims.append(None)
        elif part.isdigit() and int(part) > 0:
            dims.append(int(part))
        else:
            raise BadInput(f"{text!r}: shape dims must be positive integers or ? (dynamic)")
    return name, tuple(dims)


def parse_tensor_list(text: str | None) -> list[tuple[str, Shape | None]]:
    """Comma-separated tensor args; commas inside ``[...]`` belong to a shape."""
    if not text:
        return []
    items, depth, current = [], 0, ""
    for char in text:
        if char == "[":
            depth += 1
        elif char == "]":
            depth -= 1
        if char == "," and depth == 0:
            items.append(current)
            current = ""
        else:
            current += char
    items.append(current)
    return [parse_tensor_arg(item) for item in items if item.strip()]


def tf_tensor_name(name: str) -> str:
    """TF graph tensors are ``op:index``; users often type the op name alone."""
    return name if re.search(r":\d+$", name) else f"{name}:0"
