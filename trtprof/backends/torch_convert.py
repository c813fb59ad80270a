"""ONNX → torch module for the PyTorch backend: importing torch and onnx2torch (tolerating a broken
torchvision), the graph passes onnx2torch needs (identity initializers folded, CumSum's direction made
explicit, onnx2torch 1.5's opset-16 gaps mapped), the conversion itself, and the module moved to the
engine's precision (``follow_precision``). The backend (``backends.torch``) builds, exports and runs the
module; training (``train.step``) converts with the same functions.
"""
from __future__ import annotations

import importlib.util
import sys
import types
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, Iterator, Mapping

from .torch_fuse import fuse_module
from ..errors import BadModel, BuildFailed, MissingDependency, TrtprofError
from ..spec import Precision
from .torch_artifact import first_line

if TYPE_CHECKING:
    import onnx

# Module dtype of the low-precision modes: weights cast with .to(dtype), float inputs cast on the device.
LOW_DTYPES = {Precision.FP16: "float16", Precision.BF16: "bfloat16"}


def import_torch():
    try:
        import torch
    except ImportError as err:
        raise MissingDependency("torch", "torch") from err
    return torch


def import_onnx2torch():
    """Import onnx2torch, tolerating a missing or broken torchvision.

    onnx2torch imports torchvision at module load only for its NMS and RoiAlign converters. Next to
    a CPU-only torch, PyPI's torchvision fails to import (``operator torchvision::nms does not
    exist``). When that happens we import onnx2torch against a placeholder whose functions raise
    BadModel if a model really uses those two ops, then remove the placeholder so no other code
    sees it.
    """
    if "onnx2torch" in sys.modules:
        return sys.modules["onnx2torch"]
    if importlib.util.find_spec("onnx2torch") is None:
        raise MissingDependency("onnx2torch", "torch", why="converts the ONNX model to a torch module")
    import_torch()
    try:
        import torchvision  # noqa: F401
    except Exception:  # noqa: BLE001 - ImportError, or RuntimeError from a mismatched build
        for name in [n for n in sys.modules if n == "torchvision" or n.startswith("torchvision.")]:
            del sys.modules[name]
        with _torchvision_placeholder():
            import onnx2torch
        register_type_widened_versions()
        return onnx2torch
    import onnx2torch

    register_type_widened_versions()
    return onnx2torch


# ONNX ops whose newer version only widened the types they accept (opset 16 added bfloat16), mapped to
# the version onnx2torch 1.5 converts: the same function, so its converter serves both. Without this a
# transformers BERT exported at opset 17 stops at "Converter is not implemented (GreaterOrEqual, 16)".
TYPE_WIDENED_VERSIONS = {("GreaterOrEqual", 16): 12, ("LessOrEqual", 16): 12}


def register_type_widened_versions() -> list[str]:
    """Register onnx2torch's converter of each op in ``TYPE_WIDENED_VERSIONS`` for the newer version too
    (through its public ``add_converter``); returns what was added (nothing once done, or once a newer
    onnx2torch has its own)."""
    from onnx2torch.node_converters.registry import add_converter, get_converter

    added = []
    for (op, new), old in TYPE_WIDENED_VERSIONS.items():
        try:
            converter = get_converter(op, old)
            add_converter(operation_type=op, version=new)(converter)
        except (ValueError, NotImplementedError, KeyError):  # already registered, or no older one to reuse
            continue
        added.append(f"{op}-{new}")
    return added


@contextmanager
def _torchvision_placeholder() -> Iterator[None]:
    def unavailable(*_args: Any, **_kwargs: Any) -> Any:
        raise BadModel("the model uses NonMaxSuppression/RoiAlign, which needs a working torchvision")

    root = types.ModuleType("torchvision")
    ops = types.ModuleType("torchvision.ops")
    def lookup(name: str) -> Any:
        if name.startswith("__"):  # module protocol (inspect walks sys.modules): behave like a module
            raise AttributeError(name)
        return unavailable

    ops.__getattr__ = lookup  # type: ignore[method-assign]
    root.ops = ops  # type: ignore[attr-defined]
    sys.modules["torchvision"], sys.modules["torchvision.ops"] = root, ops
    try:
        yield
    finally:
        for name in ("torchvision", "torchvision.ops"):
            if sys.modules.get(name) in (root, ops):
                del sys.modules[name]


def flatten_like_onnx(x: Any, axis: int) -> Any:
    """ONNX Flatten: a 2-D tensor of (the product of the dims before ``axis``, the product of the rest),
    for every axis in [-rank, rank] — onnx2torch 1.5's OnnxFlatten flattens everything for axis 0 and
    then asks for dim 1 of a 1-D tensor (transformers' BERT-base, opset 17: "IndexError: Dimension out
    of range (expected to be in range of [-1, 0], but got 1)")."""
    import torch

    axis = axis + x.dim() if axis < 0 else axis
    if axis == 0:
        return x.reshape(1, -1)
    if axis == x.dim():
        return x.reshape(-1, 1)
    return torch.flatten(torch.flatten(x, start_dim=axis), end_dim=axis - 1)


def mend_flatten(module: Any) -> int:
    """Give onnx2torch's OnnxFlatten submodules ONNX's semantics (``flatten_like_onnx``); how many."""
    mended = 0
    for sub in module.modules():
        if type(sub).__name__ == "OnnxFlatten" and hasattr(sub, "axis"):
            sub.forward = lambda x, axis=sub.axis: flatten_like_onnx(x, axis)
            mended += 1
    return mended


def fold_identity_initializers(model: "onnx.ModelProto") -> int:
    """Replace ``Identity(initializer)`` nodes by initializers of the output name; return how many.

    ``torch.onnx.export`` de-duplicates equal weights behind Identity nodes, while onnx2torch looks
    Conv/Gemm weights up among initializers only (``KeyError: 'onnx::Conv_501'``); ResNet-50 has 47
    such nodes. The graph computes the same function afterwards.
    """
    graph = model.graph
    inits = {init.name: init for init in graph.initializer}
    keep, folded = [], 0
    for node in graph.node:
        if node.op_type == "Identity" and len(node.input) == 1 and node.input[0] in inits:
            copy = type(inits[node.input[0]])()
            copy.CopyFrom(inits[node.input[0]])
            copy.name = node.output[0]
            graph.initializer.append(copy)
            inits[copy.name] = copy
            folded += 1
        else:
            keep.append(node)
    if folded:
        del graph.node[:]
        graph.node.extend(keep)
    return folded


def explicit_cumsum_direction(model: "onnx.ModelProto") -> int:
    """Write ONNX's default ``reverse=0`` on every CumSum that leaves it out; returns how many.

    onnx2torch 1.5 reads a missing ``reverse`` as 1 and sums from the end, where ONNX sums from the
    start: transformers' RoBERTa (position ids from the cumulative sum of the mask, exported without the
    attribute) then computed other outputs than ONNX Runtime (max |difference| 3.4 on a small RoBERTa).
    The graph means the same with the default written out."""
    from onnx import helper

    from ..convert.fixed_shapes import all_nodes

    graph = getattr(model, "graph", None)
    if graph is None:  # not a model: the converter says so
        return 0
    mended = 0
    for node in all_nodes(graph):
        if node.op_type == "CumSum" and not any(a.name == "reverse" for a in node.attribute):
            node.attribute.append(helper.make_attribute("reverse", 0))
            mended += 1
    return mended


def to_torch_module(model: "onnx.ModelProto", *, fuse: bool = True) -> Any:
    """onnx2torch conversion (CPU, float32), with its failures as BuildFailed naming the op: any
    exception of the converter (NotImplementedError, KeyError, ValueError, AssertionError, ...) is a
    model it cannot convert, said in one line. CumSum's direction is written out first
    (``explicit_cumsum_direction``: the graph is changed in place, its meaning is not); the kernels the
    export took apart are put back (``torch_fuse``: Linear, GELU; ``fuse=False``: not, for training, which
    trains the initializers, and per-layer profiles, which need a submodule per node), counted in
    ``module.trtprof_fusions``."""
    onnx2torch = import_onnx2torch()
    explicit_cumsum_direction(model)
    try:
        module = onnx2torch.convert(model)
        mend_flatten(module)
        module.trtprof_fusions = fuse_module(module) if fuse else {}
        return module
    except TrtprofError:
        raise
    except NotImplementedError as err:
        raise BuildFailed(f"onnx2torch cannot convert this model: {first_line(err)}") from err
    except KeyError as err:
        raise BuildFailed(f"onnx2torch cannot convert this model (missing tensor {err})") from err
    except Exception as err:  # noqa: BLE001 - a converter failure is the model's, said in one line
        raise BuildFailed(f"onnx2torch cannot convert this model: {type(err).__name__}: {first_line(err)}") from err


def follow_precision(torch: Any, module: Any, dtype: Any) -> dict[str, int]:
    """Put every float tensor of a converted module in ``dtype`` (float16/bfloat16), not only its weights.

    ``module.to(dtype)`` casts parameters and buffers (onnx2torch keeps initializers and Constant
    values as buffers) but not what the graph computes itself: a ``Cast(to=FLOAT)`` keeps producing
    float32, and a float32 tensor of one or more dimensions promotes the half tensor it meets back to
    float32, so a later op sees mixed types (timm's ViT-B/16: the attention scale from
    ``Cast(Shape)`` → "expected scalar type Float but found Half" in MatMul). Here Cast targets
    float32/float64 become ``dtype``, as do float tensors held as plain attributes. Values beyond the
    dtype's finite range (float32's ``finfo.min`` as an attention-mask fill, in BERT) saturate to its
    largest finite value instead of becoming inf, so ``0 × fill`` stays 0 and not NaN; real infinities
    stay infinite. Nothing is kept float32 by design: LayerNormalization and Softmax run in ``dtype``
    with float32 accumulation inside PyTorch's kernels. Returns what changed, for the build's notes."""
    finfo = torch.finfo(dtype)
    counts = {"tensors": 0, "saturated": 0, "casts": 0}

    def lower(t: Any) -> Any:
        if not t.is_floating_point() or t.dtype == dtype:
            return t
        counts["tensors"] += 1
        big = t.isfinite() & (t.abs() > finfo.max)
        if bool(big.any()):
            counts["saturated"] += int(big.sum())
            t = torch.where(big, t.clamp(finfo.min, finfo.max), t)
        return t.to(dtype)

    for sub in module.modules():
        for name, p in sub._parameters.items():
            if p is not None:
                p.data = lower(p.data)
        for name, b in list(sub._buffers.items()):
            if b is not None:
                sub._buffers[name] = lower(b)
        for name, value in list(vars(sub).items()):
            if isinstance(value, torch.Tensor):
                setattr(sub, name, lower(value))
        if type(sub).__name__ == "OnnxCast" and getattr(sub, "torch_dtype", None) in (torch.float32, torch.float64):
            sub.torch_dtype = dtype
            counts["casts"] += 1
    return counts


def precision_note(precision: Precision, counts: Mapping[str, int]) -> str:
    """The build note saying what ``follow_precision`` changed."""
    low = LOW_DTYPES[precision]
    text = (f"{precision.value}: every float tensor of the module in {low} ({counts['tensors']} weights and constants), "
            f"{counts['casts']} Cast-to-float target(s) retargeted to {low}")
    if counts["saturated"]:
        text += f"; {counts['saturated']} constant value(s) beyond {low}'s range saturated to its largest finite value"
    return text
