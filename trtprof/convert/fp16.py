"""ONNX FP32 → FP16 graph conversion, shared by every backend that needs FP16 *types* in the graph
(ONNX Runtime always; TensorRT ≥ 11 and TensorRT-RTX, whose networks are strongly typed).

Uses onnxconverter-common's maintained converter with float32 graph inputs/outputs kept, so the
profiler feeds and reads the same buffers for every precision, and with FP16's real limits
(``max_finite_val=65504``, ``min_positive_val=2⁻²⁴``; its defaults 1e4/1e-7 silently changed exact
weights). What it did to each weight is counted in ``fp16_weights``; the graphs it mishandles are
repaired around it in ``fp16_fixes``.
"""
from __future__ import annotations

import re
import warnings
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Iterable

from ..errors import BuildFailed, MissingDependency
from ..util.wording import plural
from . import fp16_fixes
from .fp16_weights import FP16_MAX, FP16_MIN_SUBNORMAL, WeightReport, weight_report
from .fp16_linear import linear_conversion

if TYPE_CHECKING:
    import onnx

# Ops trtprof itself keeps in FP32, on top of the converter's own block list (which holds ops with
# no FP16 form or meaning: Resize, TopK, Range, CumSum, Min, Max, …, and the ai.onnx.ml ops). The
# converter retypes tensors, not sequences: a sequence op's FP16 inputs make an FP16 sequence where the
# graph still declares an FP32 one ("Type (seq(tensor(float))) of output arg … does not match expected
# type (seq(tensor(float16)))", onnx's simple/test_sequence_model*). Kept FP32, they stay consistent.
DEFAULT_OP_BLOCK_LIST: tuple[str, ...] = (
    "SequenceConstruct", "SequenceInsert", "SequenceAt", "SequenceErase", "SequenceEmpty", "SequenceLength",
    "SplitToSequence", "ConcatFromSequence", "SequenceMap",
)


@dataclass(frozen=True)
class Fp16Conversion:
    """The FP16 model and everything trtprof knows about how it was made."""

    model: "onnx.ModelProto"
    notes: tuple[str, ...]
    weights: WeightReport
    fixes: tuple[str, ...] = ()  # repairs applied around the converter, one line each
    kept_fp32_nodes: tuple[str, ...] = ()
    kept_fp32_ops: tuple[str, ...] = ()  # the caller's (--keep-fp32-ops), beyond the two default lists
    original_nodes: frozenset[str] = field(default_factory=frozenset)  # node names before conversion

    def to_json(self) -> dict[str, Any]:
        return {**self.weights.to_json(), "fixes": list(self.fixes), "kept_fp32_nodes": list(self.kept_fp32_nodes),
                "kept_fp32_ops": list(self.kept_fp32_ops)}


def prepare_for_fp16(model: "onnx.ModelProto") -> tuple["onnx.ModelProto", list[str]]:
    """A copy of ``model`` with the repairs the converter needs (see ``fp16_fixes``), and one line per
    repair made. The copy computes the same function; the range analysis names nodes from it too."""
    import onnx

    copy = onnx.ModelProto()
    copy.CopyFrom(model)
    fixes = []
    if fp16_fixes.drop_initializer_inputs(copy):
        fixes.append("weights listed as graph inputs (IR < 4) dropped from the inputs")
    named = fp16_fixes.name_unnamed_nodes(copy)
    if named:
        fixes.append(f"{plural(named, 'unnamed node')} named OpType_INDEX (so the converter's casts and "
                     "--layer-precisions can tell them apart)")
    detached = fp16_fixes.detach_graph_outputs(copy)
    if detached:
        fixes.append(f"graph {'output' if len(detached) == 1 else 'outputs'} also read inside the graph given their own FP32 cast: {', '.join(detached)}")
    return copy, fixes


def convert_fp16(
    model: "onnx.ModelProto",
    *,
    keep_io_types: bool = True,
    keep_fp32_ops: Iterable[str] = (),
    keep_fp32_nodes: Iterable[str] = (),
) -> Fp16Conversion:
    """FP16 conversion with exact accounting. ``keep_fp32_ops`` are added to the converter's own op
    block list (not replacing it); ``keep_fp32_nodes`` are node names (as ``prepare_for_fp16`` names
    them). A node name that matches no node is an error: a silently ignored keep-list gives an
    artifact the user did not ask for."""
    try:
        from onnxconverter_common import float16
    except ImportError as err:
        raise MissingDependency("onnxconverter-common", None, why="needed for FP16 graph conversion") from err
    from ..errors import BadInput

    prepared, fixes = prepare_for_fp16(model)
    names = {node.name for node in prepared.graph.node}
    ops = list(dict.fromkeys(keep_fp32_ops))
    nodes = list(dict.fromkeys(keep_fp32_nodes))
    unknown = [n for n in nodes if n not in names]
    if unknown:
        raise BadInput(f"--layer-precisions names no node of this model: {', '.join(unknown)} "
                       "(see `trtprof inspect` or the range analysis for node names)")
    op_block_list = sorted(set(float16.DEFAULT_OP_BLOCK_LIST) | set(DEFAULT_OP_BLOCK_LIST) | set(ops))
    split = fp16_fixes.split_shared_initializers(prepared, nodes, op_block_list)
    if split:
        fixes.append(f"{len(split)} weight(s) shared by nodes kept in FP32 and FP16 nodes given an FP32 copy for the "
                     f"kept ones: {', '.join(split[:5])}" + (" …" if len(split) > 5 else ""))
    with warnings.catch_warnings(record=True) as caught, linear_conversion():
        warnings.simplefilter("always")
        try:
            converted = float16.convert_float_to_float16(
                prepared, min_positive_val=FP16_MIN_SUBNORMAL, max_finite_val=FP16_MAX, keep_io_types=keep_io_types,
                op_block_list=op_block_list, node_block_list=nodes)
        except Exception as err:
            raise BuildFailed(f"FP16 graph conversion failed: {err}") from err
    retyped = fp16_fixes.retype_float_outputs(converted, names)
    if retyped:
        fixes.append(f"{plural(len(retyped), 'Cast(to=FLOAT)/dtype=FLOAT node')} made to produce FP16 as the converter "
                     f"declared: {', '.join(retyped[:5])}" + (" …" if len(retyped) > 5 else ""))
    filled = fp16_fixes.fill_constant_of_shape(converted, names)
    if filled:
        fixes.append(f"{plural(len(filled), 'ConstantOfShape node')} without a value given an FP16 zero: {', '.join(filled[:5])}")
    if keep_io_types:
        restored = fp16_fixes.restore_output_types(
            converted, [o.name for o in prepared.graph.output if o.type.tensor_type.elem_type == 1])
        if restored:
            fixes.append(f"{plural(len(restored), 'graph output')} produced by a node kept in FP32 cast back to FP32 "
                         "(the converter left them FP16)")
    inserted = {node.name for node in converted.graph.node} - names
    rewired = fp16_fixes.fold_cast_round_trips(converted, inserted)
    if rewired:
        fixes.append(f"{plural(rewired, 'FP16 round trip')} between nodes kept in FP32 removed (the tensor stays FP32)")
    weights = weight_report(prepared, converted)
    notes = [*weights.notes(), *(f"fp16 conversion: {f}" for f in fixes),
             *summarize_warnings(str(w.message).splitlines()[0] for w in caught)]
    return Fp16Conversion(model=converted, notes=tuple(notes), weights=weights, fixes=tuple(fixes),
                          kept_fp32_nodes=tuple(nodes), kept_fp32_ops=tuple(ops), original_nodes=frozenset(names))


_TRUNCATED = re.compile(r"the float32 number (\S+) will be truncated to (\S+)")


def summarize_warnings(messages: Iterable[str]) -> list[str]:
    """The converter's warnings other than its per-tensor truncation ones (one line each): those name
    one value per tensor and are replaced by the exact counts of ``fp16_weights``."""
    return sorted({text for text in messages if not _TRUNCATED.search(text)})


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


_NODE_PATTERNS = (
    re.compile(r"node with name '([^']+)'"),
    re.compile(r"\bnode \(([^)]+)\)"),
    re.compile(r"\bNode \(([^)]+)\)"),
    re.compile(r"\bnode:? '?([^\s',()]+)'?"),
    re.compile(r"(?:^|; )([^\s;:()]+) \([A-Za-z0-9_]+\): "),  # TensorRT parser lines: "NAME (OP): desc"
)
_TENSOR_PATTERNS = (re.compile(r"\b(?:output|input) arg \(([^)]+)\)"), re.compile(r"\btensor '([^']+)'"))


def blame_node(conversion: Fp16Conversion, cause: str) -> tuple[str, str] | None:
    """(node name, op type) of the model's node that a backend's error about the converted graph
    points at: named directly, through a cast the converter inserted for it, or through a tensor it
    produces. None when the message names nothing recognisable."""
    graph = conversion.model.graph
    ops = {node.name: node.op_type for node in graph.node}
    original = set(conversion.original_nodes)
    candidates = [m.group(1) for pattern in _NODE_PATTERNS for m in pattern.finditer(cause)]
    producers = {out: node.name for node in graph.node for out in node.output}
    for pattern in _TENSOR_PATTERNS:
        for match in pattern.finditer(cause):
            tensor = match.group(1)
            for name in (tensor, tensor.removesuffix(fp16_fixes.DETACHED_SUFFIX)):
                if name in producers:
                    candidates.append(producers[name])
    for name in candidates:
        origin = fp16_fixes.origin_node(name, original)
        if origin is not None:
            return origin, ops.get(origin, "?")
    return None


def refusal_message(conversion: Fp16Conversion, backend: str, cause: str, *, fp32_loads: bool = True) -> str:
    """The error for a converted graph a backend refuses: the graph is trtprof's FP16 conversion's,
    not the model's (``fp32_loads``: the backend was seen to accept the FP32 model); name the node and
    the option that keeps it FP32."""
    blamed = blame_node(conversion, cause)
    loads = " (the FP32 model itself loads)" if fp32_loads else ""
    head = f"{backend} refused the FP16 graph that trtprof's FP16 conversion produced{loads}: {cause}"
    if blamed is None:
        return head + "; keep the node it names in FP32 with --layer-precisions NODE:fp32 (or --keep-fp32-ops OP)"
    name, op = blamed
    return head + f"; node {name} ({op}): keep it in FP32 with --layer-precisions {name}:fp32"
