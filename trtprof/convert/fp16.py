"""ONNX FP32 → FP16 graph conversion, shared by every backend that needs FP16 *types* in the graph
(ONNX Runtime always; TensorRT ≥ 11, whose networks are strongly typed).

Uses onnxconverter-common's maintained converter with float32 graph inputs/outputs kept, so the
profiler feeds and reads the same buffers for every precision.
"""
from __future__ import annotations

import re
import warnings
from typing import TYPE_CHECKING, Any, Iterable

from ..errors import BuildFailed, MissingDependency

if TYPE_CHECKING:
    import onnx

# Ops left in FP32 by default: ops whose FP16 form commonly overflows or has no meaning.
DEFAULT_OP_BLOCK_LIST: tuple[str, ...] = ()


def convert_to_fp16(
    model: "onnx.ModelProto",
    *,
    keep_io_types: bool = True,
    op_block_list: Iterable[str] | None = None,
    node_block_list: Iterable[str] | None = None,
) -> tuple["onnx.ModelProto", list[str]]:
    """Return (FP16 model, converter warnings). IO stays float32 unless ``keep_io_types=False``."""
    try:
        from onnxconverter_common import float16
    except ImportError as err:
        raise MissingDependency("onnxconverter-common", None, why="needed for FP16 graph conversion") from err
    kwargs: dict[str, Any] = {"keep_io_types": keep_io_types}
    if op_block_list is not None:
        kwargs["op_block_list"] = list(op_block_list)
    if node_block_list is not None:
        kwargs["node_block_list"] = list(node_block_list)
    model = drop_initializer_inputs(model)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            converted = float16.convert_float_to_float16(model, **kwargs)
        except Exception as err:
            raise BuildFailed(f"FP16 graph conversion failed: {err}") from err
    return converted, summarize_warnings(str(w.message).splitlines()[0] for w in caught)


_TRUNCATED = re.compile(r"the float32 number (\S+) will be truncated to (\S+)")


def summarize_warnings(messages: Iterable[str]) -> list[str]:
    """The converter's warnings, one line each, with its per-value truncation warnings (one per weight
    outside FP16's range, often hundreds) folded into one counted line."""
    truncated: list[float] = []
    other: set[str] = set()
    for text in messages:
        match = _TRUNCATED.search(text)
        if match:
            truncated.append(abs(float(match.group(1))))
        else:
            other.add(text)
    lines = sorted(other)
    if truncated:
        lines.append(f"{len(truncated)} distinct weight values outside FP16's range were clamped "
                     f"(smallest |x| {min(truncated):.3g}, largest {max(truncated):.3g}); "
                     "tiny values become ±1e-07, huge ones ±65504")
    return lines


def drop_initializer_inputs(model: "onnx.ModelProto") -> "onnx.ModelProto":
    """A copy without graph inputs that are really initializers (weights).

    Models written for IR version < 4 (old model zoos, Caffe2 exports) must list every initializer
    as a graph input too. The FP16 converter turns those initializers into FP16 but, with
    ``keep_io_types``, keeps the matching *inputs* declared FP32, and the result no longer
    type-checks ("Tensor element type mismatch. 10 != 1"). From IR 4 on, initializers need not be
    inputs, so dropping them (and raising the IR version to 4) changes nothing else.
    """
    initializers = {init.name for init in model.graph.initializer}
    if not any(inp.name in initializers for inp in model.graph.input):
        return model
    import onnx

    copy = onnx.ModelProto()
    copy.CopyFrom(model)
    keep = [inp for inp in copy.graph.input if inp.name not in initializers]
    del copy.graph.input[:]
    copy.graph.input.extend(keep)
    copy.ir_version = max(copy.ir_version, 4)
    return copy


def tensor_elem_types(model: "onnx.ModelProto") -> dict[str, int]:
    """Element type of every named tensor, after ONNX type inference."""
    import onnx

    try:
        inferred = onnx.shape_inference.infer_shapes(model)
    except Exception:  # inference is best effort; fall back to what the file declares
        inferred = model
    graph = inferred.graph
    types = {vi.name: vi.type.tensor_type.elem_type for vi in [*graph.value_info, *graph.input, *graph.output]}
    types.update({init.name: init.data_type for init in graph.initializer})
    for node in graph.node:  # Constant nodes carry their type in the attribute
        if node.op_type == "Constant":
            for attr in node.attribute:
                if attr.name == "value":
                    types[node.output[0]] = attr.t.data_type
    return types


# Nodes that make or pass through tensors without arithmetic: counting them would let a graph whose
# weights come from ConstantOfShape look "mostly FP16" while every Conv runs in FP32.
NOT_COMPUTE = frozenset({"Cast", "Constant", "ConstantOfShape", "Shape", "Size", "Identity"})


def count_precision(model: "onnx.ModelProto") -> dict[str, dict[str, int]]:
    """Per op type, how many compute nodes run on FP16 tensors and how many on FP32 tensors.

    ``NOT_COMPUTE`` nodes (casts, constants, shapes) and nodes that touch no floating tensor are not
    counted. A node with any FP32 floating tensor counts as FP32 (it computes, or accumulates, in FP32).
    """
    import onnx

    fp16, fp32 = onnx.TensorProto.FLOAT16, onnx.TensorProto.FLOAT
    types = tensor_elem_types(model)
    counts: dict[str, dict[str, int]] = {"fp16": {}, "fp32": {}}
    for node in model.graph.node:
        if node.op_type in NOT_COMPUTE:
            continue
        seen = {types.get(name) for name in [*node.input, *node.output] if name}
        if fp32 in seen:
            bucket = "fp32"
        elif fp16 in seen:
            bucket = "fp16"
        else:
            continue
        counts[bucket][node.op_type] = counts[bucket].get(node.op_type, 0) + 1
    return counts
