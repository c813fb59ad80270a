"""Concrete input shapes per batch size, and random input data per dtype."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping, Sequence

import numpy as np

from ..errors import BadInput, BadModel, StaticBatch
from ..spec import TensorSpec

DEFAULT_INT_RANGE = (0, 100)
INT_RANGE_MIN, INT_RANGE_MAX = -(2**63), 2**64 - 1  # int64's least, uint64's most: the widest integer inputs
MAX_BATCH_SIZE = 2**31 - 1  # TensorRT profiles and most runtimes hold dims as int32; no real batch is larger


@dataclass(frozen=True)
class FeedSettings:
    """What a run feeds an engine (``make_inputs``): seeded random inputs (``seed``, integers drawn from
    ``int_range``) or the first batch of the user's ``--inputs`` (``data``, user_inputs.InputData), at the
    input shapes ``shapes`` fixes beyond the engine's own (``--shape``)."""

    shapes: Mapping[str, tuple[int, ...]] | None = None
    seed: int = 0
    int_range: tuple[int, int] = DEFAULT_INT_RANGE
    data: Any = None


def parse_shape_arg(text: str) -> tuple[str, tuple[int, ...]]:
    """``NAME:D0xD1x…`` → (name, dims). The name may itself contain ':' (TF tensor names)."""
    name, sep, dims = text.rpartition(":")
    if not sep or not name:
        raise BadInput(f"--shape {text!r}: expected NAME:D0xD1x… (e.g. input:1x3x224x224)")
    try:
        shape = tuple(int(d) for d in dims.lower().split("x"))
    except ValueError as err:
        raise BadInput(f"--shape {text!r}: dims must be integers separated by 'x'") from err
    if not shape or any(d <= 0 for d in shape):
        raise BadInput(f"--shape {text!r}: dims must be positive")
    if any(d > MAX_BATCH_SIZE for d in shape):
        raise BadInput(f"--shape {text[:80]!r}: a dim must be at most {MAX_BATCH_SIZE} (dims are int32 in TensorRT "
                       "and most runtimes)")
    return name, shape


def parse_batch_sizes(text: str) -> tuple[int, ...]:
    items = [s.strip() for s in text.split(",")]
    if any(not s for s in items):
        raise BadInput(f"--batch-sizes {text!r}: empty item; expected integers like 1,8,32")
    try:
        sizes = tuple(int(s) for s in items)
    except ValueError as err:
        raise BadInput(f"--batch-sizes {text!r}: expected integers like 1,8,32") from err
    if any(s <= 0 for s in sizes):
        raise BadInput(f"--batch-sizes {text!r}: expected positive integers like 1,8,32")
    if any(s > MAX_BATCH_SIZE for s in sizes):
        raise BadInput(f"--batch-sizes {text!r}: a batch size must be at most {MAX_BATCH_SIZE}")
    return tuple(sorted(set(sizes)))


def parse_int_range(text: str) -> tuple[int, int]:
    try:
        low, high = (int(v) for v in text.split(","))
    except ValueError as err:
        raise BadInput(f"--int-range {text[:80]!r}: expected LOW,HIGH") from err
    if not (INT_RANGE_MIN <= low and high <= INT_RANGE_MAX):
        raise BadInput(f"--int-range {text[:80]!r}: LOW and HIGH must be from {INT_RANGE_MIN} to {INT_RANGE_MAX} "
                       "(int64's least, uint64's most)")
    if high <= low:
        raise BadInput(f"--int-range {text!r}: HIGH must be above LOW")
    return low, high


def fixed_batch(inputs: Sequence[TensorSpec]) -> int | None:
    """The batch size a model's inputs fix: every input with dims has the same integer dim 0. None when
    any input's dim 0 is dynamic, the inputs fix different ones, or none has dims (then batch 1 is the
    default). Commands default to it, so that a model exported at batch 4 runs without --batch-sizes 4."""
    firsts = {spec.shape[0] for spec in inputs if spec.shape}
    if len(firsts) != 1:
        return None
    (first,) = firsts
    return first if isinstance(first, int) else None


def resolve_shapes(
    inputs: Sequence[TensorSpec],
    batch_size: int,
    overrides: Mapping[str, tuple[int, ...]] | None = None,
    *,
    model_path: str | None = None,
) -> dict[str, tuple[int, ...]]:
    """The concrete shape of every input at ``batch_size``.

    Dim 0 is the batch dim. A static batch dim that differs from ``batch_size`` is an error (the
    model cannot run that batch). Any other unknown dim must come from ``--shape``; its first dim is
    replaced by the batch size.
    """
    overrides = dict(overrides or {})
    unknown = set(overrides) - {spec.name for spec in inputs}
    if unknown:
        names = ", ".join(spec.name for spec in inputs)
        raise BadInput(f"--shape names unknown input(s) {', '.join(sorted(unknown))} (inputs: {names})", path=model_path)
    shapes: dict[str, tuple[int, ...]] = {}
    for spec in inputs:
        if spec.name in overrides:
            dims = overrides[spec.name]
            if len(dims) != len(spec.shape):
                raise BadInput(
                    f"--shape {spec.name}: {len(dims)} dims given, model input has {len(spec.shape)} {list(spec.shape)}",
                    path=model_path,
                )
            for i, (given, declared) in enumerate(zip(dims, spec.shape)):
                if i and isinstance(declared, int) and declared != given:
                    raise BadInput(
                        f"--shape {spec.name}: dim {i} is {given}, model fixes it to {declared}", path=model_path
                    )
            if spec.shape and isinstance(spec.shape[0], int) and spec.shape[0] != batch_size:
                raise BadModel(
                    f"input {spec.name!r} has a static batch of {spec.shape[0]}; batch size {batch_size} cannot run",
                    path=model_path,
                )
            shapes[spec.name] = (batch_size, *dims[1:]) if dims else dims
            continue
        if not spec.shape:  # scalar input
            shapes[spec.name] = ()
            continue
        first = spec.shape[0]
        if isinstance(first, int) and first != batch_size:
            raise StaticBatch(spec.name, first, batch_size, path=model_path)
        rest = spec.shape[1:]
        if not all(isinstance(d, int) for d in rest):
            example = "x".join(str(d) if isinstance(d, int) else "N" for d in spec.shape)
            raise BadInput(
                f"input {spec.name!r} has dynamic dims {list(spec.shape)}; fix them with --shape {spec.name}:{example}",
                path=model_path,
            )
        shapes[spec.name] = (batch_size, *(int(d) for d in rest))  # type: ignore[arg-type]
    return shapes


def make_inputs(
    inputs: Sequence[TensorSpec],
    shapes: Mapping[str, tuple[int, ...]],
    *,
    seed: int = 0,
    int_range: tuple[int, int] = DEFAULT_INT_RANGE,
    data: Any = None,
) -> dict[str, np.ndarray]:
    """Random data with each input's dtype: floats ~ N(0, 1), integers uniform in [low, high), bools
    uniform. Seeded, so every precision and backend sees the same numbers. With ``data`` (the user's
    ``--inputs``, user_inputs.InputData) its first batch instead, cast to each input's dtype."""
    if data is not None:
        batch = next((s[0] for s in shapes.values() if s), 1)
        return data.batch(batch, dtypes={spec.name: np.dtype(spec.dtype) for spec in inputs})
    if not isinstance(seed, (int, np.integer)) or seed < 0:
        raise BadInput(f"--seed {seed}: must be a non-negative integer")
    rng = np.random.default_rng(seed)
    feeds: dict[str, np.ndarray] = {}
    for spec in inputs:
        shape = shapes[spec.name]
        try:
            dtype = np.dtype(spec.dtype)
        except TypeError as err:
            raise BadModel(f"input {spec.name!r} has dtype {spec.dtype}, which trtprof cannot generate") from err
        if dtype.kind == "f":
            feeds[spec.name] = rng.standard_normal(shape, dtype=np.float32).astype(dtype, copy=False)  # float32: no second copy (memory probes)
        elif dtype.kind in "iu":
            low, high = int_range
            info = np.iinfo(dtype)
            low, high = max(low, info.min), min(high, info.max)
            feeds[spec.name] = rng.integers(low, high, size=shape, dtype=dtype, endpoint=False)
        elif dtype.kind == "b":
            feeds[spec.name] = rng.integers(0, 2, size=shape).astype(bool)
        else:
            raise BadModel(f"input {spec.name!r} has dtype {spec.dtype}, which trtprof cannot generate")
    return feeds
