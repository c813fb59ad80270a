"""Graph facts per ONNX node: shapes, FLOPs and whether FP16 tensor cores can be used at all.

Why: NVIDIA's guidance for FP16 tensor cores (cuDNN/cuBLAS, "Deep Learning Performance" guide,
"Tensor Core Requirements") is that channel counts (convolutions) and the GEMM dimensions K and N
(matrix products) be multiples of 8; otherwise the libraries fall back to CUDA-core kernels or pad.
A 3-channel convolution (the report's network) is ineligible on both sides. This is read from the
graph, not guessed from timings, and reported with the time share the profiled layers hold.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Mapping

from ..model.roofline import node_attr

if TYPE_CHECKING:
    import onnx

# FP16 tensor-core alignment in elements (16 bytes of FP16): NVIDIA Deep Learning Performance
# Guide, "Tensor Core Requirements" (cuDNN ≥ 7.6.3 pads channels, but with a cost; below that the
# kernels run on CUDA cores).
TC_MULTIPLE_FP16 = 8


def node_key(node: Any, index: int) -> str:
    """The name a layer row uses: the node's name, else ``OpType_index`` (unnamed nodes)."""
    return node.name or f"{node.op_type}_{index}"


def tensor_core_dims(node: Any, shape: Any) -> dict[str, Any] | None:
    """The dims that decide FP16 tensor-core eligibility of a Conv/ConvTranspose/MatMul/Gemm node.

    ``shape(name)`` returns a tensor's static shape or None. Returns None for other ops or when the
    shapes are unknown (then nothing is claimed)."""
    op = node.op_type
    if op in ("Conv", "ConvTranspose"):
        w = shape(node.input[1]) if len(node.input) > 1 else None
        if w is None or len(w) < 3:
            return None
        group = int(node_attr(node, "group", 1) or 1)
        if op == "Conv":
            cout, cin_g = int(w[0]), int(w[1])
        else:
            cin_g, cout = int(w[0]) // group, int(w[1]) * group
        cin = cin_g * group
        dims = {"input_channels": cin, "output_channels": cout, "group": group, "kernel": [int(d) for d in w[2:]]}
        if group > 1 and cin_g == 1:
            dims["depthwise"] = True
        bad = [f"{k} {v}" for k, v in (("input channels", cin_g), ("output channels", cout // group if group > 1 else cout))
               if v % TC_MULTIPLE_FP16]
        if group > 1 and cin_g == 1:
            bad.append("depthwise convolution (one channel per group)")
        dims["eligible"] = not bad
        dims["reasons"] = bad
        return dims
    if op in ("MatMul", "Gemm"):
        a = shape(node.input[0])
        b = shape(node.input[1]) if len(node.input) > 1 else None
        if a is None or b is None or len(a) < 2 or len(b) < 2:
            return None
        if op == "Gemm":
            k = a[0] if node_attr(node, "transA", 0) else a[1]
            n = b[0] if node_attr(node, "transB", 0) else b[1]
        else:
            k, n = a[-1], b[-1]
        bad = [f"{name} {v}" for name, v in (("K", int(k)), ("N", int(n))) if v % TC_MULTIPLE_FP16]
        return {"k": int(k), "n": int(n), "eligible": not bad, "reasons": bad}
    return None


def node_facts(model: "onnx.ModelProto", input_shapes: Mapping[str, tuple[int, ...]]) -> dict[str, dict[str, Any]]:
    """node key → {op_type, output_shape, flops, tensor_core: {...} or None} at these input shapes."""
    from ..model.roofline import inferred_shapes, node_flops

    graph, consts, shapes, _ = inferred_shapes(model, input_shapes)

    def shape(name: str) -> tuple[int, ...] | None:
        return consts.get(name) or shapes.get(name)

    out: dict[str, dict[str, Any]] = {}
    for i, node in enumerate(graph.node):
        y = shape(node.output[0]) if node.output else None
        flops = node_flops(node, shapes, consts)
        out[node_key(node, i)] = {
            "op_type": node.op_type,
            "output_shape": list(y) if y else None,
            "flops": flops,
            "tensor_core": tensor_core_dims(node, shape),
        }
    return out
