"""Fold the shape arithmetic of an ONNX graph once every input dimension is fixed (issue 43).

``torch.onnx.export`` writes a transformer's reshapes as arithmetic on the input's shape (``Shape →
Gather → Unsqueeze → Concat → Reshape``, ``Range`` over a size, ``ConstantOfShape``, ``Expand``, ``If``
on a size). A runtime that takes the graph as written evaluates it at every call: onnx2torch on the host
(the torch backend then cannot be captured by ``torch.export`` or in a CUDA graph), ONNX Runtime on its
CPU execution provider (Memcpy nodes around them, its CUDA graph refused). With every input dimension
fixed — a compare at one batch size has that — the arithmetic is constant, and ``fold_shapes`` folds it.

How: the graph inputs' dims are set to the given shape (the outputs' symbolic dims cleared), onnx's
shape inference runs (with data propagation), then ONNX Runtime's offline optimisation at the basic
level on its CPU provider (``ORT_ENABLE_BASIC``, ``optimized_model_filepath``) writes the graph back
with its constant folding (a ``Shape`` of a tensor whose shape is known is a constant; ``If`` on a
constant condition is inlined), its eliminations (Identity, Dropout, no-op Slice/Expand/Cast) and its
shape fusion (a Reshape whose shape is computed gets a constant shape). Every ORT rewrite that changes
*what is computed* is switched off (``NOT_A_FOLD``: MatMul+Add → Gemm, Conv+BatchNorm, Div→Mul, Gelu and
LayerNorm fusions, the transpose optimiser, the QDQ passes): the folded graph runs the same float ops on
the same values, only the integer shape arithmetic is gone (checked after: a folded graph that holds
more nodes of any op type than the original, or a node outside the ONNX domain, is not kept).

Why ONNX Runtime and not onnx-simplifier (measured on small generated graphs and on transformers'
BertModel and ViTModel exported at opset 17, ``benchmarks/fold_shapes_cpu.py``): both fold every shape
op and both give outputs equal to the original's (``np.array_equal``, fp32, in ONNX Runtime); onnxsim
additionally fuses MatMul+Add into Gemm (a different kernel in PyTorch) unless told not to, and is not a
dependency of trtprof, while onnxruntime is (its basic level is portable: only ONNX ops).

A graph whose shapes stay dynamic once the inputs are fixed — a data-dependent op (``NonZero``,
``Unique``, ``Compress``, ``NonMaxSuppression``, ``Loop``), a shape op the optimiser could not fold,
an input left without a shape — is left alone: ``FoldResult`` returns the original graph with a note
saying why. (An output whose dims onnx's own inference cannot fix, with no shape op left, is folded
all the same, with a note: ONNX Runtime's inference went further.)
"""
from __future__ import annotations

import os
import tempfile
from collections import Counter
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Iterator, Mapping, Sequence

from ..errors import BadInput, MissingDependency
from ..model.skeleton import skeleton

if TYPE_CHECKING:
    import onnx

# Ops whose outputs are shapes or are computed from a shape: none of them is left in a folded graph.
SHAPE_OPS = ("Shape", "Size", "ConstantOfShape", "Range")
# Ops whose output shape depends on the input's values: their graph's shapes stay dynamic.
DATA_DEPENDENT_OPS = ("NonZero", "Unique", "Compress", "NonMaxSuppression", "StringSplit", "Loop")
# ONNX Runtime's basic-level rewrites that change what is computed (fusions, layout and quantisation
# passes), switched off by name (``disabled_optimizers``): what stays is constant folding, the
# eliminations, common-subexpression elimination and the Reshape shape fusion.
NOT_A_FOLD = (
    "DivMulFusion", "FuseReluClip", "GemmSumFusion", "GemmTransposeFusion", "NotWhereFusion", "ConvAddFusion",
    "ConvMulFusion", "ConvBNFusion", "PadFusion", "MatmulBNFusion", "LabelEncoderFusion", "MatMulAddFusion",
    "GeluFusion", "GeluFusionL1", "LayerNormFusion", "LayerNormFusionL1", "SliceConcatToSpaceToDepthFusion",
    "TransposeOptimizer", "QDQPropagationTransformer", "WeightBiasQuantization", "DoubleQDQPairsRemover",
    "WhereDummyDq", "EnsureUniqueDQForNodeUnit",
)
ONNX_DOMAINS = ("", "ai.onnx")


@dataclass
class FoldResult:
    """What ``fold_shapes`` did: the graph to use (``model``: folded, or the original when left alone),
    the shapes it was fixed at, the nodes removed by op type, the shape ops still in ``model``, and
    ``dynamic``: why the graph was left alone ('' when it was folded, or had nothing to fold)."""

    model: "onnx.ModelProto"
    input_shapes: dict[str, tuple[int, ...]]
    folded: bool  # the graph changed
    tool: str
    nodes_before: int
    nodes_after: int
    removed: dict[str, int] = field(default_factory=dict)
    remaining_shape_ops: dict[str, int] = field(default_factory=dict)
    dynamic: str = ""
    notes: list[str] = field(default_factory=list)

    @property
    def static(self) -> bool:
        """Every shape in the returned graph is fixed (nothing left to compute on the host)."""
        return not self.dynamic and not self.remaining_shape_ops

    def to_json(self) -> dict[str, Any]:
        return {"folded": self.folded, "tool": self.tool, "input_shapes": {k: list(v) for k, v in self.input_shapes.items()},
                "nodes_before": self.nodes_before, "nodes_after": self.nodes_after, "removed": dict(self.removed),
                "remaining_shape_ops": dict(self.remaining_shape_ops), "dynamic": self.dynamic, "notes": list(self.notes)}

    def line(self) -> str:
        """One line for a build's notes."""
        shapes = ", ".join(f"{k} {'x'.join(map(str, v))}" for k, v in self.input_shapes.items())
        if self.dynamic:
            return f"shapes not folded at {shapes}: {self.dynamic}"
        if not self.folded:
            return f"shapes fixed at {shapes}: nothing to fold"
        top = ", ".join(f"{op} {n}" for op, n in sorted(self.removed.items(), key=lambda kv: (-kv[1], kv[0]))[:6])
        return (f"shapes fixed at {shapes} and folded ({self.tool}): {self.nodes_before} → {self.nodes_after} nodes "
                f"({top}{', …' if len(self.removed) > 6 else ''} removed)" + "".join(f"; {n}" for n in self.notes))


def _onnx() -> Any:
    try:
        import onnx
    except ImportError as err:  # pragma: no cover - onnx is a core dependency
        raise MissingDependency("onnx", None) from err
    return onnx


def all_nodes(graph: Any) -> Iterator[Any]:
    """Every node of ``graph`` and of the subgraphs of its If/Loop/Scan nodes."""
    for node in graph.node:
        yield node
        for attr in node.attribute:
            if attr.g.node or attr.g.output:
                yield from all_nodes(attr.g)
            for sub in attr.graphs:
                yield from all_nodes(sub)


def op_counts(graph: Any) -> Counter[str]:
    """Nodes by op type, subgraphs included."""
    return Counter(n.op_type for n in all_nodes(graph))


def dynamic_inputs(model: Any) -> list[str]:
    """Graph inputs (not initializers) with a dim that is not a positive integer."""
    inits = {i.name for i in model.graph.initializer}
    out = []
    for value in model.graph.input:
        if value.name in inits:
            continue
        dims = value.type.tensor_type.shape.dim
        if not value.type.tensor_type.HasField("shape") or any(not (d.HasField("dim_value") and d.dim_value > 0)
                                                                 for d in dims):
            out.append(value.name)
    return out


def has_shape_arithmetic(model: Any) -> bool:
    """Would fixing the input shapes change this graph? True when an input has a dynamic dim and a node
    computes on shapes (``SHAPE_OPS``): what ``fold_shapes`` folds. Cheap (no inference): the build's
    cache key reads it (``builder.pipeline.key_spec``)."""
    if not dynamic_inputs(model):
        return False
    return any(n.op_type in SHAPE_OPS for n in all_nodes(model.graph))


def fix_input_shapes(model: Any, input_shapes: Mapping[str, Sequence[int]], *, weights: bool = True) -> Any:
    """A copy of ``model`` with each named input's dims set to ``input_shapes`` (a static dim must match),
    the outputs' and intermediate values' symbolic dims cleared, and onnx's shape inference rerun (on
    ``skeleton(model)``: the weights' values are not needed, and copying them through inference took
    seconds on BERT-base). ``weights=False``: the inferred skeleton itself (for checks that read shapes)."""
    onnx = _onnx()
    inferred = set_input_dims(skeleton(model), input_shapes)
    try:
        inferred = onnx.shape_inference.infer_shapes(inferred, strict_mode=False, data_prop=True)
    except Exception:  # noqa: BLE001 - inference is an aid: ONNX Runtime infers shapes itself
        pass
    if not weights:
        return inferred
    fixed = type(model)()
    fixed.CopyFrom(model)
    set_input_dims(fixed, input_shapes)
    fixed.graph.value_info.extend(inferred.graph.value_info)
    return fixed


def set_input_dims(model: Any, input_shapes: Mapping[str, Sequence[int]]) -> Any:
    """In place: each named input's dims set (checked against its static ones), the outputs' symbolic
    dims and every value_info cleared (stale once the inputs change); returns ``model``."""
    inputs = {v.name: v for v in model.graph.input}
    unknown = sorted(set(input_shapes) - set(inputs))
    if unknown:
        raise BadInput(f"no graph input named {', '.join(unknown)}")
    for name, shape in input_shapes.items():
        tensor = inputs[name].type.tensor_type
        dims = tensor.shape.dim
        if tensor.HasField("shape") and len(dims) != len(shape):
            raise BadInput(f"input {name!r} has rank {len(dims)}, not {len(shape)} ({tuple(shape)})")
        for i, (dim, size) in enumerate(zip(dims, shape)):
            if dim.HasField("dim_value") and dim.dim_value > 0 and dim.dim_value != int(size):
                raise BadInput(f"input {name!r} fixes dim {i} to {dim.dim_value}, not {size}")
        tensor.shape.ClearField("dim")
        for size in shape:
            tensor.shape.dim.add().dim_value = int(size)
    for value in model.graph.output:
        for dim in value.type.tensor_type.shape.dim:
            if not dim.HasField("dim_value"):
                dim.Clear()
    del model.graph.value_info[:]
    return model


def unknown_output_dims(model: Any) -> list[str]:
    """Graph outputs whose shape inference left a dim that is not a number."""
    out = []
    for value in model.graph.output:
        tensor = value.type.tensor_type
        if not tensor.HasField("shape") or any(not d.HasField("dim_value") for d in tensor.shape.dim):
            out.append(value.name)
    return out


def ort_version() -> str:
    try:
        import onnxruntime
    except ImportError as err:
        raise MissingDependency("onnxruntime", None, why="folds the graph's shape arithmetic") from err
    return str(onnxruntime.__version__)


class TooLarge(Exception):
    """The model does not serialise in one piece (over protobuf's 2 GiB)."""


def ort_basic_fold(model: Any) -> Any:
    """ONNX Runtime's basic-level offline optimisation (CPU provider) of ``model`` with the rewrites
    that are not folds switched off (``NOT_A_FOLD``); the optimised graph as written by ORT, with its
    unused opset imports dropped."""
    onnx = _onnx()
    ort_version()
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_BASIC
    options.log_severity_level = 3  # errors only: its warnings are about the graph we hand it, said by us
    try:
        data = model.SerializeToString()
    except ValueError as err:  # protobuf's 2 GiB limit
        raise TooLarge(str(err)) from err
    with tempfile.TemporaryDirectory(prefix="trtprof-fold-") as tmp:
        path = os.path.join(tmp, "folded.onnx")
        options.optimized_model_filepath = path
        ort.InferenceSession(data, options, providers=["CPUExecutionProvider"], disabled_optimizers=list(NOT_A_FOLD))
        folded = onnx.load(path)
    used = {n.domain for n in all_nodes(folded.graph)} | {""}
    keep = [o for o in folded.opset_import if o.domain in used or o.domain == "ai.onnx"]
    del folded.opset_import[:]
    folded.opset_import.extend(keep)
    return folded


def fold_shapes(model: "onnx.ModelProto", input_shapes: Mapping[str, Sequence[int]]) -> FoldResult:
    """Fix every graph input of ``model`` at ``input_shapes`` (name → concrete shape) and fold what that
    makes constant (see the module's doc). ``model`` itself is not changed. Inputs missing from
    ``input_shapes`` keep their dims: a dynamic one leaves the graph alone, with a note."""
    shapes = {str(k): tuple(int(d) for d in v) for k, v in input_shapes.items()}
    tool = f"onnxruntime {ort_version()} basic level, fusions off"
    before = op_counts(model.graph)
    n_before = len(model.graph.node)

    def alone(why: str, notes: Sequence[str] = ()) -> FoldResult:
        remaining = {op: before[op] for op in SHAPE_OPS if before[op]}
        return FoldResult(model=model, input_shapes=shapes, folded=False, tool=tool, nodes_before=n_before,
                          nodes_after=n_before, remaining_shape_ops=remaining, dynamic=why, notes=list(notes))

    bad = [s for s in shapes.values() if any(d <= 0 for d in s)]
    if bad:
        raise BadInput(f"shapes to fold at must be positive: {bad[0]}")
    fixed = fix_input_shapes(model, shapes)
    still = dynamic_inputs(fixed)
    if still:
        return alone(f"input(s) {', '.join(still)} not fixed (no shape given)")
    data_dependent = sorted({n.op_type for n in all_nodes(model.graph) if n.op_type in DATA_DEPENDENT_OPS})
    if not any(n.op_type in SHAPE_OPS for n in all_nodes(model.graph)) and not data_dependent:
        return FoldResult(model=model, input_shapes=shapes, folded=False, tool=tool, nodes_before=n_before,
                          nodes_after=n_before)
    try:
        folded = ort_basic_fold(fixed)
    except TooLarge:
        return alone("the model is over protobuf's 2 GiB, which ONNX Runtime's optimiser takes in one piece")
    except Exception as err:  # noqa: BLE001 - the optimiser refusing the graph: used as written, said
        return alone(f"ONNX Runtime could not load the fixed-shape graph ({type(err).__name__}: "
                     f"{(str(err).strip().splitlines() or [''])[0][:200]})")
    after = op_counts(folded.graph)
    added = after - before
    foreign = sorted({n.domain for n in all_nodes(folded.graph) if n.domain not in ONNX_DOMAINS})
    if added or foreign:
        what = ", ".join(f"{op} +{n}" for op, n in sorted(added.items())) or ", ".join(foreign)
        return alone(f"ONNX Runtime {ort_version()} rewrote more than shapes ({what}): left as written")
    remaining = {op: after[op] for op in SHAPE_OPS if after[op]}
    reasons = []
    if data_dependent:
        reasons.append(f"data-dependent op(s) {', '.join(data_dependent)}")
    if remaining:
        reasons.append("shape op(s) left after folding: " + ", ".join(f"{op} {n}" for op, n in remaining.items()))
    if reasons:
        return alone("its shapes stay dynamic: " + "; ".join(reasons))
    notes = []
    unknown = unknown_output_dims(fix_input_shapes(folded, shapes, weights=False))
    if unknown:  # no shape op is left: only onnx's inference is weaker than ONNX Runtime's here
        notes.append(f"output(s) {', '.join(unknown[:3])} keep a dim onnx's shape inference cannot fix "
                     "(folded all the same: no shape op is left)")
    removed = before - after
    return FoldResult(model=folded, input_shapes=shapes, folded=True, tool=tool, nodes_before=n_before,
                      nodes_after=len(folded.graph.node), removed=dict(sorted(removed.items())),
                      remaining_shape_ops={}, notes=notes)

