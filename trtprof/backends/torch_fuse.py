"""Two rewrites of onnx2torch's module that give back the kernels the ONNX export took apart (issue 43).

``torch.onnx.export`` writes ``nn.Linear`` on a 3-D input as ``MatMul`` then ``Add`` of the bias, and
``nn.GELU`` / ``F.gelu`` as ``Div(√2) → Erf → Add(1) → Mul(x) → Mul(0.5)``. onnx2torch converts node by node,
so the converted module runs one extra pass over the activation per Linear (the bias add) and five
elementwise kernels per GELU where the model's author ran one: on the H200 that cost the torch backend
+36 % to +85 % of FP16 time against timm's and transformers' own modules (ViT-B/16, BERT-base;
``benchmarks/results/fixed_shapes-H200-2026-12-02``), which is not the model being measured.

Here, on the ``torch.fx`` graph onnx2torch returns:
- ``MatMul(x, W)`` whose only user is ``Add`` of ``B`` (``W`` a 2-D constant, ``B`` a 1-D constant of
  ``W``'s output width) becomes ``F.linear(x, Wᵀ, B)``: one GEMM with the bias in its epilogue;
- the exact-erf GELU chain above (each intermediate used once, constants √2, 1 and 0.5 to 1e-6)
  becomes ``F.gelu(x)`` (``approximate="none"``: the same formula).
The arithmetic is the same; the rounding is that of the fused kernels (FP16: the bias is added in the
GEMM's float accumulator, before rounding, as in the model's own ``nn.Linear``). Anything that does not
match exactly (a MatMul of two activations, a bias of another shape, a value read twice) is left as it
is. ``PASSES`` names the rewrites: the torch backend's environment carries it, so engines built before
a change of the rewrites are other engines, not stale ones.
"""
from __future__ import annotations

from typing import Any, Callable

PASSES = "linear+gelu/1"  # what the rewrites are; in the torch engines' cache key (backends.torch.environment)
CONSTANT_TOLERANCE = 1e-6  # how close √2, 1 and 0.5 must be for a chain to count as GELU (float32 √2 is 2e-8 off)


def _module_type(gm: Any, node: Any) -> str:
    if node.op != "call_module":
        return ""
    return type(gm.get_submodule(node.target)).__name__


def _constant(gm: Any, node: Any) -> Any:
    """The tensor a node always yields (an initializer or an OnnxConstant), else None."""
    if not hasattr(node, "op"):
        return None
    if node.op == "get_attr":
        owner, _, name = str(node.target).rpartition(".")
        return getattr(gm.get_submodule(owner) if owner else gm, name)
    if _module_type(gm, node) == "OnnxConstant":
        return gm.get_submodule(node.target).value
    return None


def _binary(gm: Any, node: Any, function: Callable[..., Any]) -> bool:
    """Is ``node`` onnx2torch's binary op computing ``function`` (no old-style broadcast)?"""
    if _module_type(gm, node) != "OnnxBinaryMathOperation":
        return False
    sub = gm.get_submodule(node.target)
    return sub.math_op_function is function and sub.broadcast is None


def _scalar(gm: Any, node: Any, value: float) -> bool:
    t = _constant(gm, node)
    return t is not None and t.numel() == 1 and t.is_floating_point() and abs(float(t) - value) <= CONSTANT_TOLERANCE


def _only_user(node: Any) -> Any:
    users = list(node.users)
    return users[0] if len(users) == 1 else None


def _other(node: Any, one: Any) -> Any:
    a, b = node.args
    return b if a is one else a


def _linear_match(gm: Any, matmul: Any, torch: Any) -> tuple[Any, Any, Any, Any] | None:
    """(x, W, B, add node) where ``matmul`` is ``MatMul(x, W)`` followed only by ``Add(B)``, else None."""
    if _module_type(gm, matmul) != "OnnxMatMul" or len(matmul.args) != 2:
        return None
    x, w = matmul.args
    weight = _constant(gm, w)
    add = _only_user(matmul)
    if weight is None or weight.dim() != 2 or not weight.is_floating_point() or _constant(gm, x) is not None:
        return None
    if add is None or not _binary(gm, add, torch.add) or list(add.args).count(matmul) != 1:
        return None
    bias = _constant(gm, _other(add, matmul))
    if bias is None or bias.dim() != 1 or bias.shape[0] != weight.shape[1] or bias.dtype != weight.dtype:
        return None
    return x, weight, bias, add


def _gelu_match(gm: Any, erf: Any, torch: Any) -> tuple[Any, Any] | None:
    """(x, last node) where ``erf`` is the middle of ``Mul(Mul(x, Add(Erf(Div(x, √2)), 1)), 0.5)``."""
    if _module_type(gm, erf) != "OnnxErf":
        return None
    div = erf.args[0]
    if not hasattr(div, "op") or _only_user(div) is not erf or _module_type(gm, div) != "OnnxBinaryMathOperation":
        return None
    divide = gm.get_submodule(div.target)
    # a division (onnx2torch's private _onnx_div): 2 / 2 == 1, where add, mul and sub give 4, 4 and 0
    two = torch.tensor(2.0)
    if len(div.args) != 2 or divide.broadcast is not None or divide.math_op_function(two, two).item() != 1.0:
        return None
    x, root2 = div.args
    add = _only_user(erf)
    if not _scalar(gm, root2, 2.0 ** 0.5) or add is None or not _binary(gm, add, torch.add):
        return None
    mul = _only_user(add)
    if not _scalar(gm, _other(add, erf), 1.0) or mul is None or not _binary(gm, mul, torch.mul):
        return None
    half = _only_user(mul)
    if _other(mul, add) is not x or half is None or not _binary(gm, half, torch.mul):
        return None
    if not _scalar(gm, _other(half, mul), 0.5):
        return None
    return x, half


def _read_constants(gm: Any) -> set[str]:
    return {str(n.target) for n in gm.graph.nodes if n.op == "get_attr"}


def _drop_unused_constants(gm: Any, read_before: set[str]) -> None:
    """Remove the initializers graph nodes read before the rewrites and no node reads now (a fused weight
    is stored transposed beside them); a submodule's own weights (LayerNorm's) are not such nodes."""
    for name in sorted(read_before - _read_constants(gm)):
        owner, _, attr = name.rpartition(".")
        holder = gm.get_submodule(owner) if owner else gm
        if attr in holder._buffers or attr in holder._parameters:
            delattr(holder, attr)


def fuse_module(gm: Any) -> dict[str, int]:
    """Apply both rewrites to onnx2torch's GraphModule ``gm`` in place; how many of each."""
    import torch
    import torch.nn.functional as F

    counts = {"linear": 0, "gelu": 0}
    graph = gm.graph
    read_before = _read_constants(gm)
    for node in list(graph.nodes):
        if node.graph is not graph or node.op != "call_module":
            continue
        linear = _linear_match(gm, node, torch)
        if linear is not None:
            x, weight, bias, add = linear
            stem = f"fused_linear_{counts['linear']}"
            gm.register_buffer(f"{stem}_weight", weight.t().contiguous())
            gm.register_buffer(f"{stem}_bias", bias.clone())
            with graph.inserting_before(add):
                w_node, b_node = graph.get_attr(f"{stem}_weight"), graph.get_attr(f"{stem}_bias")
                fused = graph.call_function(F.linear, (x, w_node, b_node))
            add.replace_all_uses_with(fused)
            counts["linear"] += 1
            continue
        gelu = _gelu_match(gm, node, torch)
        if gelu is not None:
            x, last = gelu
            with graph.inserting_before(last):
                fused = graph.call_function(F.gelu, (x,))
            last.replace_all_uses_with(fused)
            counts["gelu"] += 1
    if counts["linear"] or counts["gelu"]:
        graph.eliminate_dead_code()
        graph.lint()
        _drop_unused_constants(gm, read_before)
        gm.delete_all_unused_submodules()
        gm.recompile()
    return counts


def fusion_note(counts: dict[str, int], lead: str = "") -> str:
    """The build note: what ``fuse_module`` rewrote (``lead`` before it), or "" where it rewrote nothing."""
    if not any(counts.values()):
        return ""
    return (f"{lead}kernels the export took apart put back ({PASSES}): {counts.get('linear', 0)} MatMul+Add → linear, "
            f"{counts.get('gelu', 0)} Erf-GELU → gelu")
