"""Shape arguments of a converted module made Python constants, once the graph's shapes are fixed.

Why: onnx2torch converts ``Reshape(x, shape)``, ``Slice(x, starts, ends, axes, steps)``, ``Expand``,
``Tile``, ``Split``, ``Pad``, ``CumSum``, dynamic-axes ``Squeeze``/``Unsqueeze`` and ``Gather(x, scalar
index)`` into modules
that take those arguments as tensors and read them on the host at every call (``torch.Size(shape)``,
``.numpy()``, ``.tolist()``, a 0-d index turned into an int). Folded at fixed shapes
(``trtprof.convert.fixed_shapes``), every such argument is an initializer, which onnx2torch keeps as a
buffer: on the GPU each call then copies it back to the host (a CUDA graph cannot be captured around
that copy), and ``torch.export`` sees a fake tensor it cannot read (".numpy() is not supported for
tensor subclasses", "Could not guard on data-dependent expression").

``bake_constant_arguments`` rewrites the converted ``torch.fx.GraphModule``: each such call whose shape
arguments are constant buffers gets a module holding them as Python ints, and the buffer arguments
leave the call. The values computed are the same (the same ATen op on the same data; ``Expand`` becomes
``Tensor.expand``, the broadcast view, where onnx2torch multiplies by a tensor of ones: equal values, one
kernel less). Calls whose arguments are computed at run time are left as they are, and counted by
``host_shape_modules``: what still reads shapes on the host.
"""
from __future__ import annotations

from collections import Counter
from typing import Any, Sequence

import torch
from torch import nn

# onnx2torch module → the argument positions holding shape-like values (after the data input 0)
SHAPE_ARGUMENTS: dict[str, tuple[int, ...]] = {
    "OnnxReshape": (1,),
    "OnnxSlice": (1, 2, 3, 4),
    "OnnxExpand": (1,),
    "OnnxTile": (1,),
    "OnnxSplit13": (1,),
    "OnnxUnsqueezeDynamicAxes": (1,),
    "OnnxSqueezeDynamicAxes": (1,),
    "OnnxGather": (1,),
    "OnnxPadDynamic": (1, 2, 3),  # pads, constant_value (a float), axes (opset 18: not baked)
    "OnnxCumSum": (1,),
}
# (module, position) whose constant is a float value, not a shape
FLOAT_ARGUMENTS = {("OnnxPadDynamic", 2)}
# modules that compute or read shapes on the host when they run (what ``host_shape_modules`` counts;
# a Gather of a tensor of indices runs on the device)
HOST_SHAPE_MODULES = frozenset(SHAPE_ARGUMENTS) - {"OnnxGather"} | {
    "OnnxShape", "OnnxConstantOfShape", "OnnxRange", "OnnxResize", "OnnxReduceSumDynamicAxes",
    "OnnxReduceDynamicAxes", "OnnxNonZero", "OnnxTopK",
}


class StaticReshape(nn.Module):
    """ONNX Reshape with a constant shape (0 copies the input's dim, -1 is inferred, as in ONNX)."""

    def __init__(self, shape: Sequence[int]) -> None:
        super().__init__()
        self.shape = tuple(int(d) for d in shape)

    def forward(self, x: Any) -> Any:
        return x.reshape([x.shape[i] if d == 0 else d for i, d in enumerate(self.shape)])


class StaticSlice(nn.Module):
    """ONNX Slice with constant starts/ends/axes/steps, as onnx2torch computes it: a negative step
    flips the axis and slices the flipped tensor from ``-start-1`` to ``-end-1``."""

    def __init__(self, starts: Sequence[int], ends: Sequence[int], axes: Sequence[int] | None,
                 steps: Sequence[int] | None) -> None:
        super().__init__()
        axes = list(range(len(starts))) if axes is None else list(axes)
        steps = [1] * len(starts) if steps is None else list(steps)
        self.flips: list[int] = []
        self.slices: list[tuple[int, slice]] = []
        for start, end, axis, step in zip(starts, ends, axes, steps):
            start, end, axis, step = int(start), int(end), int(axis), int(step)
            if step < 0:
                self.flips.append(axis)
                start, end, step = -start - 1, -end - 1, -step
            self.slices.append((axis, slice(start, end, step)))

    def forward(self, x: Any) -> Any:
        rank = x.dim()
        if self.flips:
            x = torch.flip(x, dims=[a % rank for a in self.flips])
        index: list[Any] = [slice(None)] * rank
        for axis, where in self.slices:
            index[axis % rank] = where
        return x[tuple(index)]


class StaticExpand(nn.Module):
    """ONNX Expand to a constant shape: the broadcast of the input's shape and ``shape``, as a view."""

    def __init__(self, shape: Sequence[int]) -> None:
        super().__init__()
        self.shape = tuple(int(d) for d in shape)

    def forward(self, x: Any) -> Any:
        return x.expand(torch.broadcast_shapes(tuple(x.shape), self.shape))


class StaticTile(nn.Module):
    """ONNX Tile with constant repeats."""

    def __init__(self, repeats: Sequence[int]) -> None:
        super().__init__()
        self.repeats = tuple(int(r) for r in repeats)

    def forward(self, x: Any) -> Any:
        return x.repeat(self.repeats)


class StaticSplit(nn.Module):
    """ONNX Split (13+) with constant split sizes."""

    def __init__(self, sizes: Sequence[int], axis: int) -> None:
        super().__init__()
        self.sizes = [int(s) for s in sizes]
        self.axis = int(axis)

    def forward(self, x: Any) -> Any:
        return torch.split(x, self.sizes, dim=self.axis)


class StaticAxes(nn.Module):
    """ONNX Squeeze/Unsqueeze with constant axes (sorted as onnx2torch applies them)."""

    def __init__(self, axes: Sequence[int], squeeze: bool) -> None:
        super().__init__()
        self.axes = sorted((int(a) for a in axes), reverse=squeeze)
        self.squeeze = squeeze

    def forward(self, x: Any) -> Any:
        if self.squeeze and not self.axes:
            return torch.squeeze(x)
        for axis in self.axes:
            x = torch.squeeze(x, dim=axis) if self.squeeze else torch.unsqueeze(x, dim=axis)
        return x


class StaticSelect(nn.Module):
    """ONNX Gather with a constant scalar index: ``select`` (onnx2torch indexes with a 0-d tensor,
    which PyTorch reads on the host)."""

    def __init__(self, axis: int, index: int) -> None:
        super().__init__()
        self.axis = int(axis)
        self.index = int(index)

    def forward(self, x: Any) -> Any:
        return x.select(self.axis, self.index)


class StaticPad(nn.Module):
    """ONNX Pad with constant pads and fill value, in onnx2torch's mode (constant, reflect, replicate)."""

    def __init__(self, pads: Sequence[int], mode: str, value: float) -> None:
        super().__init__()
        middle = len(pads) // 2
        begins, ends = list(pads[:middle])[::-1], list(pads[middle:])[::-1]
        torch_pads = [int(p) for pair in zip(begins, ends) for p in pair]  # last dim first, as F.pad takes them
        if mode in ("reflect", "replicate") and len(torch_pads) >= 4 and not any(torch_pads[-4:]):
            torch_pads = torch_pads[:-4]  # onnx2torch's rule: batch and channel dims unpadded
        self.pads = torch_pads
        self.mode = mode
        self.value = float(value)

    def forward(self, x: Any) -> Any:
        if self.mode == "constant":
            return torch.nn.functional.pad(x, self.pads, mode="constant", value=self.value)
        return torch.nn.functional.pad(x, self.pads, mode=self.mode)


class StaticCumSum(nn.Module):
    """ONNX CumSum on a constant axis, as onnx2torch computes it (its ``exclusive`` and ``reverse``)."""

    def __init__(self, axis: int, module: Any) -> None:
        super().__init__()
        self.axis = int(axis)
        self.exclusive = bool(module.exclusive)
        self.reverse = bool(module.reverse)
        self.inner = module

    def forward(self, x: Any) -> Any:
        if self.exclusive:  # onnx2torch's shift-and-insert: rare; its own code with the axis as a tensor on the host
            return self.inner(x, torch.tensor(self.axis))
        if self.reverse:
            x = torch.flip(x, dims=(self.axis,))
        x = torch.cumsum(x, dim=self.axis)
        if self.reverse:
            x = torch.flip(x, dims=(self.axis,))
        return x


def _static_module(kind: str, module: Any, values: dict[int, Any]) -> Any:
    """The static module for ``kind`` with its constant arguments (position → value as a list or int),
    or None when the constants do not allow one."""
    if kind == "OnnxReshape":
        return StaticReshape(values[1])
    if kind == "OnnxSlice":
        return StaticSlice(values[1], values[2], values.get(3), values.get(4))
    if kind == "OnnxExpand":
        return StaticExpand(values[1])
    if kind == "OnnxTile":
        return StaticTile(values[1])
    if kind == "OnnxSplit13":
        return StaticSplit(values[1], module.axis)
    if kind in ("OnnxUnsqueezeDynamicAxes", "OnnxSqueezeDynamicAxes"):
        axes = values[1]
        return StaticAxes([axes] if isinstance(axes, int) else axes, squeeze=kind == "OnnxSqueezeDynamicAxes")
    if kind == "OnnxGather" and isinstance(values[1], int):  # a tensor of indices is a device op: left alone
        return StaticSelect(module._axis, values[1])
    if kind == "OnnxPadDynamic" and 3 not in values:
        value = values.get(2, 0.0)
        return StaticPad(values[1], module.mode, value[0] if isinstance(value, list) else value)
    if kind == "OnnxCumSum" and isinstance(values[1], int):
        return StaticCumSum(values[1], module)
    return None


def _fetch(root: Any, target: str) -> Any:
    value = root
    for part in target.split("."):
        value = getattr(value, part)
    return value


def _replace_submodule(root: Any, target: str, module: Any) -> None:
    parent, _, name = target.rpartition(".")
    setattr(root.get_submodule(parent) if parent else root, name, module)


def bake_constant_arguments(module: Any) -> dict[str, int]:
    """Give every shape-reading call of onnx2torch's ``GraphModule`` whose shape arguments are constant
    buffers a static module (see the module's doc); returns how many calls of each kind changed.
    A module that is not a ``GraphModule`` is left alone (empty counts)."""
    graph = getattr(module, "graph", None)
    if graph is None or not isinstance(module, torch.fx.GraphModule):
        return {}
    changed: Counter[str] = Counter()
    for node in list(graph.nodes):
        if node.op != "call_module":
            continue
        sub = module.get_submodule(node.target)
        kind = type(sub).__name__
        positions = SHAPE_ARGUMENTS.get(kind)
        if positions is None or node.kwargs:
            continue
        values = _constant_values(module, node.args, positions, kind)
        if values is None:
            continue
        static = _static_module(kind, sub, values)
        if static is None:
            continue
        _replace_submodule(module, node.target, static)
        kept = [a for i, a in enumerate(node.args) if i not in positions]
        node.args = tuple(kept)
        changed[kind] += 1
    if changed:
        for node in list(graph.nodes):
            if node.op == "get_attr" and not node.users:
                graph.erase_node(node)
        module.recompile()
    return dict(changed)


def _constant_values(module: Any, args: Sequence[Any], positions: Sequence[int], kind: str) -> dict[int, Any] | None:
    """Position → Python value for each shape argument present, all of them integer constant buffers
    (a float one where ``FLOAT_ARGUMENTS`` says so); None when one is computed at run time (or is not
    of its kind)."""
    values: dict[int, Any] = {}
    for position in positions:
        if position >= len(args) or args[position] is None:
            continue
        arg = args[position]
        if not isinstance(arg, torch.fx.Node) or arg.op != "get_attr":
            return None
        tensor = _fetch(module, str(arg.target))
        if not isinstance(tensor, torch.Tensor) or tensor.is_complex():
            return None
        if tensor.is_floating_point() != ((kind, position) in FLOAT_ARGUMENTS):
            return None
        values[position] = tensor.tolist()
    return values


def host_shape_modules(module: Any) -> dict[str, int]:
    """How many calls of the converted module still compute or read shapes on the host, by module kind."""
    counts: Counter[str] = Counter()
    graph = getattr(module, "graph", None)
    if graph is None or not isinstance(module, torch.fx.GraphModule):
        return {}
    for node in graph.nodes:
        if node.op == "call_module":
            kind = type(module.get_submodule(node.target)).__name__
            if kind in HOST_SHAPE_MODULES:
                counts[kind] += 1
    return dict(counts)
