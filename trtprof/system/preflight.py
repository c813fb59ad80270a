"""Checks made before any timing starts, so a request that cannot run fails in a second with one
line instead of after minutes of work or with a traceback halfway through.

- integer inputs that index an embedding (``Gather`` on a weight) must stay inside its rows;
- the inputs of the largest batch must fit in the memory that is free now;
- an allocation failure while running (numpy's MemoryError, ORT's "Failed to allocate") becomes
  ``OutOfMemory`` naming the batch size and the bytes asked for.
"""
from __future__ import annotations

import math
import re
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator, Mapping, Sequence

import numpy as np

from ..errors import BadInput, OutOfMemory
from .memory import fmt_size, proc_kib_field
from ..spec import TensorSpec


def embedding_limits(onnx_path: Path | None, proto: Any = None) -> dict[str, tuple[int, str]]:
    """{graph input name: (rows, description)} for every graph input that is used directly as the
    indices of a ``Gather`` whose data is a weight (initializer or Constant) — an embedding lookup.
    The number of rows is the size of the data along the gather axis. Weights are not loaded. With
    ``proto`` (the model already read, ``OnnxModel.proto``) the file is not read again."""
    if proto is None:
        import onnx

        if onnx_path is None or not Path(onnx_path).is_file():
            return {}
        try:
            proto = onnx.load(str(onnx_path), load_external_data=False)
        except Exception:  # the artifact was verified already; a model we cannot parse here is not our check
            return {}
    graph = proto.graph
    weights: dict[str, tuple[int, ...]] = {t.name: tuple(t.dims) for t in graph.initializer}
    for node in graph.node:
        if node.op_type == "Constant":
            for attr in node.attribute:
                if attr.name == "value" and attr.t is not None:
                    weights[node.output[0]] = tuple(attr.t.dims)
    inputs = {i.name for i in graph.input} - set(weights)
    limits: dict[str, tuple[int, str]] = {}
    for node in graph.node:
        if node.op_type != "Gather" or len(node.input) < 2:
            continue
        data, indices = node.input[0], node.input[1]
        if indices not in inputs or data not in weights:
            continue
        axis = next((a.i for a in node.attribute if a.name == "axis"), 0)
        dims = weights[data]
        if not dims:
            continue
        rows = int(dims[axis % len(dims)])
        if indices not in limits or rows < limits[indices][0]:
            limits[indices] = (rows, f"Gather node {node.name or '?'!r} on {data!r} ({rows} rows)")
    return limits


def check_int_range(onnx_path: Path | None, inputs: Sequence[TensorSpec], int_range: tuple[int, int],
                    proto: Any = None) -> None:
    """Refuse an ``--int-range`` that would index past an embedding's rows (ONNX Runtime fails with
    an index error mid-run, TensorRT reads out of bounds)."""
    integer_inputs = {t.name for t in inputs if np.dtype(t.dtype).kind in "iu"} if inputs else set()
    low, high = int_range
    for name, (rows, what) in sorted(embedding_limits(onnx_path, proto).items()):
        if name not in integer_inputs:
            continue
        if high > rows or low < -rows:
            raise BadInput(f"--int-range {low},{high}: input {name!r} indexes {what}; random indices must lie in "
                           f"[0, {rows}): use --int-range 0,{rows}", path=onnx_path)


def check_integer_feeds(onnx_path: Path | None, inputs: Sequence[TensorSpec], int_range: tuple[int, int],
                        data: Any = None, proto: Any = None) -> None:
    """What a command will feed stays inside every embedding: the user's ``--inputs`` when given, else
    the random integers of ``--int-range`` (every command that runs a model calls this first). ``proto``:
    the model already read (then the file is not read again)."""
    if data is not None:
        check_data_indices(onnx_path, data, proto)
    else:
        check_int_range(onnx_path, inputs, int_range, proto)


def check_data_indices(onnx_path: Path | None, data: Any, proto: Any = None) -> None:
    """Refuse the user's ``--inputs`` whose integer values index past an embedding's rows (ONNX Runtime
    fails mid-run with an index error, TensorRT reads out of bounds), naming the file and the input.
    Valid Gather indices lie in [-rows, rows); any integer dtype (uint64 beyond 2**63 too)."""
    if data is None:
        return
    arrays = getattr(data, "arrays", {})
    for name, (rows, what) in sorted(embedding_limits(onnx_path, proto).items()):
        values = arrays.get(name)
        if values is None or np.asarray(values).dtype.kind not in "iu" or np.asarray(values).size == 0:
            continue
        low, high = int(np.min(values)), int(np.max(values))  # Python ints: no uint64 → int64 wrap
        if high >= rows or low < -rows:
            bad = high if high >= rows else low
            raise BadInput(f"--inputs {getattr(data, 'source', '?')}: input {name!r} holds {bad}, which indexes past "
                           f"{what}; its values must lie in [-{rows}, {rows})", path=onnx_path)


def input_bytes(inputs: Sequence[TensorSpec], shapes: Mapping[str, tuple[int, ...]]) -> int:
    total = 0
    for spec in inputs:
        try:
            itemsize = np.dtype(spec.dtype).itemsize
        except TypeError:
            itemsize = 8
        total += itemsize * math.prod(shapes.get(spec.name, ()))
    return total


def available_memory_bytes() -> int | None:
    """MemAvailable from /proc/meminfo (what can be allocated without swapping), else None."""
    return proc_kib_field("/proc/meminfo", "MemAvailable")


def largest_fitting_batch(batch_size: int, needed_bytes: int, available: int) -> int:
    """A batch size whose inputs use at most half of ``available`` (room for outputs and
    activations), as a power of two: the smaller batch size to suggest."""
    per_sample = max(needed_bytes / batch_size, 1.0)
    fit = int(available / 2 / per_sample)
    return max(1, 2 ** int(math.log2(fit))) if fit >= 1 else 1


def check_memory(batch_size: int, needed_bytes: int, *, available: int | None = None) -> None:
    """Refuse a batch whose input buffers alone exceed the memory available now."""
    available = available_memory_bytes() if available is None else available
    if available is None or needed_bytes <= available:
        return
    smaller = largest_fitting_batch(batch_size, needed_bytes, available)
    raise OutOfMemory(
        f"batch size {batch_size} needs {fmt_size(needed_bytes)} for its inputs alone, "
        f"{fmt_size(available)} of memory is available: {smaller_hint(batch_size, smaller)}"
    )


def smaller_hint(batch_size: int, smaller: int) -> str:
    """What to try instead: a smaller batch, or — at batch 1, where no smaller batch exists — less data
    per sample or more free memory (\"try --batch-sizes 1 or smaller\" at batch 1 was no advice)."""
    if batch_size <= 1 or smaller >= batch_size:
        return "even one sample does not fit; free memory, or give smaller input shapes (--shape)"
    return f"try --batch-sizes {smaller} or smaller"


def check_batch_memory(runner: Any, batch_size: int, shapes: Mapping[str, tuple[int, ...]]) -> int:
    """``check_memory`` for one runner at one batch size, before anything is allocated: a host runner
    (its inputs live in host memory) is refused when its inputs alone exceed what is available.
    Returns the inputs' bytes (for ``allocation_guard``). ``bench`` and ``compare`` both call it."""
    needed = input_bytes(runner.inputs, shapes)
    if runner.device == "cpu":
        check_memory(batch_size, needed)
    return needed


@contextmanager
def allocation_guard(batch_size: int, needed_bytes: int) -> Iterator[None]:
    """Inside the block, an allocation failure (``is_out_of_memory``, or numpy's "array is too big")
    becomes ``OutOfMemory`` naming the batch; anything else passes."""
    try:
        yield
    except Exception as err:
        if is_out_of_memory(err) or (isinstance(err, ValueError) and "too big" in str(err)):
            raise out_of_memory(err, batch_size, needed_bytes) from err
        raise


# ONNX Runtime ("Failed to allocate memory", std::bad_alloc), CUDA and torch ("CUDA out of memory",
# CUDA_ERROR_OUT_OF_MEMORY, cudaErrorMemoryAllocation), cuDNN/cuBLAS (CUDNN_STATUS_ALLOC_FAILED,
# CUBLAS_STATUS_ALLOC_FAILED: a workspace that could not be allocated is out of memory too).
_OOM_MESSAGE = re.compile(r"Failed to allocate memory|bad_alloc|out of memory|CUDA_ERROR_OUT_OF_MEMORY|"
                          r"cudaErrorMemoryAllocation|ALLOC_FAILED", re.IGNORECASE)
_ASKED = re.compile(r"(?:size|requested)[^0-9]{0,20}(\d{4,})", re.IGNORECASE)


def is_out_of_memory(err: BaseException) -> bool:
    """The one out-of-memory classifier (bench, compare, serving, max-batch searches, train-compare):
    Python's MemoryError, a type named ``OutOfMemoryError`` (torch's, matched by name so that torch is
    not imported to classify an error), or a message of the libraries above, whatever its type."""
    return (isinstance(err, MemoryError) or any(t.__name__ == "OutOfMemoryError" for t in type(err).__mro__)
            or bool(_OOM_MESSAGE.search(str(err))))


def out_of_memory(err: BaseException, batch_size: int, needed_bytes: int) -> OutOfMemory:
    """The one-line error for an allocation that failed while running ``batch_size``."""
    asked = _ASKED.search(str(err))
    what = (f"an allocation of {fmt_size(int(asked.group(1)))} failed" if asked
            else f"{type(err).__name__}")
    available = available_memory_bytes()
    smaller = max(1, batch_size // 4)
    if available:
        smaller = min(smaller, largest_fitting_batch(batch_size, needed_bytes, available))
    return OutOfMemory(f"out of memory at batch size {batch_size} ({what}; its inputs alone take "
                       f"{fmt_size(needed_bytes)}): {smaller_hint(batch_size, smaller)}")
