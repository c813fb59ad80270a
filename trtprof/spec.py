"""Frozen, hashable descriptions of what is built and measured.

Units live in names (``*_ms``, ``*_s``). ``BuildSpec`` holds everything that changes an artifact;
``CacheKey.derive`` adds the build environment (backend version, device), because an engine built by
another TensorRT version or on another GPU is not the same engine.
"""
from __future__ import annotations

import enum
import hashlib
import json
from dataclasses import asdict, dataclass, field
from typing import Any, Mapping, Sequence

CACHE_SCHEMA = 1


class Precision(str, enum.Enum):
    """Requested arithmetic. ``FP32`` means true FP32: TF32 tensor-core math switched off.

    ``INT8`` and ``FP8`` are quantized (explicit Q/DQ in the ONNX graph, ``trtprof.convert.quantize``);
    ``BF16`` has FP32's exponent range with fewer mantissa bits than FP16 (docs/precisions.md)."""

    FP32 = "fp32"
    TF32 = "tf32"
    FP16 = "fp16"
    BF16 = "bf16"
    INT8 = "int8"
    FP8 = "fp8"

    def __str__(self) -> str:  # argparse / f-strings print the plain name
        return self.value

    @staticmethod
    def rank(name: str) -> int:
        """Sort key of a precision name: fp32, tf32, fp16, bf16, int8, fp8 (the order of this enum), then any other."""
        order = [p.value for p in Precision]
        return order.index(name) if name in order else len(order)

    @classmethod
    def parse(cls, text: str) -> "Precision":
        try:
            return cls(text.strip().lower())
        except ValueError as err:
            names = ", ".join(p.value for p in cls)
            from .errors import BadInput

            raise BadInput(f"unknown precision {text!r} (choose from {names})") from err


def _positive_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value > 0


Dim = int | str | None  # an int, a symbolic name, or unknown


@dataclass(frozen=True)
class TensorSpec:
    """One model input or output as the model declares it (dims may be symbolic)."""

    name: str
    dtype: str  # numpy dtype name: "float32", "float16", "int64", ...
    shape: tuple[Dim, ...]

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "dtype": self.dtype, "shape": list(self.shape)}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> "TensorSpec":
        return cls(name=data["name"], dtype=data["dtype"], shape=tuple(data["shape"]))


@dataclass(frozen=True)
class BuildSpec:
    """Everything that changes the built artifact, apart from the environment.

    ``shapes`` are the ``--shape`` overrides (full shapes; the first dim is replaced by each batch
    size at run time). ``options`` are backend options that change the artifact, as sorted pairs.
    """

    model_sha256: str
    backend: str
    precision: Precision
    batch_sizes: tuple[int, ...]
    shapes: tuple[tuple[str, tuple[int, ...]], ...] = ()
    options: tuple[tuple[str, Any], ...] = ()

    @property
    def min_batch(self) -> int:
        return min(self.batch_sizes)

    @property
    def max_batch(self) -> int:
        return max(self.batch_sizes)

    @property
    def opt_batch(self) -> int:
        explicit = dict(self.options).get("opt_batch")
        if explicit:
            return int(explicit)
        return max(self.batch_sizes)

    def shape_overrides(self) -> dict[str, tuple[int, ...]]:
        return {name: tuple(dims) for name, dims in self.shapes}

    def option(self, name: str, default: Any = None) -> Any:
        return dict(self.options).get(name, default)

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["precision"] = self.precision.value
        data["batch_sizes"] = list(self.batch_sizes)
        data["shapes"] = {name: list(dims) for name, dims in self.shapes}
        data["options"] = {k: v for k, v in self.options}
        return data

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> "BuildSpec":
        """ValueError for a spec that cannot have been built (EngineRecord.read makes it CacheCorrupt):
        batch sizes and shape dims must be positive integers, the backend and sha256 strings."""
        sizes = data["batch_sizes"]
        dims = {k: v for k, v in data.get("shapes", {}).items()}
        if not isinstance(sizes, list) or not sizes or not all(_positive_int(b) for b in sizes):
            raise ValueError(f"batch_sizes {str(sizes)[:80]} must be a non-empty list of positive integers")
        if not all(isinstance(v, list) and v and all(_positive_int(d) for d in v) for v in dims.values()):
            raise ValueError("shapes must map names to lists of positive integers")
        if not isinstance(data["backend"], str) or not isinstance(data["model_sha256"], str):
            raise ValueError("backend and model_sha256 must be strings")
        return cls(
            model_sha256=data["model_sha256"],
            backend=data["backend"],
            precision=Precision(data["precision"]),
            batch_sizes=tuple(int(b) for b in sizes),
            shapes=tuple(sorted((k, tuple(int(d) for d in v)) for k, v in dims.items())),
            options=tuple(sorted(data.get("options", {}).items())),
        )

    @classmethod
    def make(
        cls,
        *,
        model_sha256: str,
        backend: str,
        precision: Precision,
        batch_sizes: Sequence[int],
        shapes: Mapping[str, tuple[int, ...]] | None = None,
        options: Mapping[str, Any] | None = None,
    ) -> "BuildSpec":
        """Normalise (sort, dedupe) so equal requests give equal specs and equal cache keys."""
        return cls(
            model_sha256=model_sha256,
            backend=backend,
            precision=precision,
            batch_sizes=tuple(sorted(set(int(b) for b in batch_sizes))),
            shapes=tuple(sorted((k, tuple(int(d) for d in v)) for k, v in (shapes or {}).items())),
            options=tuple(sorted((k, v) for k, v in (options or {}).items() if v is not None)),
        )


def canonical_json(data: Any) -> str:
    """JSON with sorted keys and no whitespace: equal data, equal text, equal hash."""
    return json.dumps(data, sort_keys=True, separators=(",", ":"), default=str)


@dataclass(frozen=True)
class CacheKey:
    """sha256 of the canonical JSON of the build spec plus the build environment."""

    hexdigest: str
    payload: Mapping[str, Any] = field(compare=False, hash=False, repr=False, default_factory=dict)

    @classmethod
    def derive(cls, spec: BuildSpec, environment: Mapping[str, Any]) -> "CacheKey":
        payload = {"schema": CACHE_SCHEMA, "spec": spec.to_json(), "environment": dict(environment)}
        digest = hashlib.sha256(canonical_json(payload).encode()).hexdigest()
        return cls(hexdigest=digest, payload=payload)

    @property
    def short(self) -> str:
        return self.hexdigest[:12]

    def __str__(self) -> str:
        return self.hexdigest
