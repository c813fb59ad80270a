"""Keep-lists for FP16 builds: which nodes (``--layer-precisions NAME:fp32``) and which op types
(``--keep-fp32-ops Softmax,LayerNormalization``) stay in FP32.

They change the artifact, so they travel as BuildSpec options (``layer_precisions``,
``keep_fp32_ops``) and are part of the cache key. Every backend that converts the graph to FP16
types (ONNX Runtime, TensorRT ≥ 11, TensorRT-RTX) reads them through ``KeepFp32.from_spec``.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Mapping

from ..errors import BadInput

if TYPE_CHECKING:
    from ..spec import BuildSpec

LAYER_PRECISIONS = ("fp32", "fp16")


def parse_layer_precisions(value: Any) -> tuple[tuple[str, str], ...]:
    """trtexec's ``--layerPrecisions`` syntax: ``name:fp16,other:fp32,*:fp32`` (or a mapping)."""
    if value is None or value == "":
        return ()
    items: list[tuple[str, str]] = []
    if isinstance(value, Mapping):
        pairs = [(str(k), str(v)) for k, v in value.items()]
    else:
        pairs = []
        for part in str(value).split(","):
            name, sep, prec = part.strip().rpartition(":")
            if not sep or not name:
                raise BadInput(f"--layer-precisions {part.strip()!r}: expected LAYER:PRECISION (e.g. conv1:fp32)")
            pairs.append((name, prec))
    for name, prec in pairs:
        prec = prec.strip().lower()
        if prec not in LAYER_PRECISIONS:
            raise BadInput(f"--layer-precisions {name}:{prec}: precision must be one of {', '.join(LAYER_PRECISIONS)}")
        items.append((name.strip(), prec))
    return tuple(items)


def parse_op_types(value: Any) -> tuple[str, ...]:
    """``Softmax,LayerNormalization`` (or a sequence) → op types, order kept, duplicates dropped."""
    if value is None or value == "":
        return ()
    parts = value.split(",") if isinstance(value, str) else [str(v) for v in value]
    ops = [p.strip() for p in parts if p.strip()]
    bad = [op for op in ops if not op.replace("_", "").isalnum()]
    if bad:
        raise BadInput(f"--keep-fp32-ops {', '.join(bad)}: expected ONNX op types, e.g. Softmax,LayerNormalization")
    return tuple(dict.fromkeys(ops))


@dataclass(frozen=True)
class KeepFp32:
    """Node names and op types an FP16 graph conversion keeps in FP32."""

    nodes: tuple[str, ...] = ()
    ops: tuple[str, ...] = ()

    def __bool__(self) -> bool:
        return bool(self.nodes or self.ops)

    @classmethod
    def from_spec(cls, spec: "BuildSpec", *, backend: str, why: str = "converts the graph to FP16 types") -> "KeepFp32":
        """Read the spec's options; a graph conversion can only *keep nodes FP32*, so ``NAME:fp16``
        and wildcards (TensorRT < 11's weak typing) are refused here, naming ``backend`` and ``why``
        (e.g. "builds strongly typed networks" for TensorRT >= 11 / TensorRT-RTX)."""
        rules = parse_layer_precisions(spec.option("layer_precisions"))
        unsupported = [f"{n}:{p}" for n, p in rules if p != "fp32" or any(c in n for c in "*?[")]
        if unsupported:
            raise BadInput(f"{backend} {why}: --layer-precisions can only keep named nodes in fp32 through the "
                           f"FP16 conversion's keep-list (NAME:fp32); not supported: {', '.join(unsupported)}")
        return cls(nodes=tuple(dict.fromkeys(n for n, _ in rules)), ops=parse_op_types(spec.option("keep_fp32_ops")))

    def options_text(self) -> str:
        """The command-line options that reproduce this keep-list."""
        parts = []
        if self.nodes:
            parts.append("--layer-precisions " + ",".join(f"{n}:fp32" for n in self.nodes))
        if self.ops:
            parts.append("--keep-fp32-ops " + ",".join(self.ops))
        return " ".join(parts)
