"""Graph facts per ONNX node: shapes, FLOPs and whether FP16 tensor cores can be used at all.

Why: NVIDIA's guidance for FP16 tensor cores (cuDNN/cuBLAS, "Deep Learning Performance" guide,
"Tensor Core Requirements") is that channel counts (convolutions) and the GEMM dimensions K and N
(matrix products) be multiples of 8; otherwise the libraries fall back to CUDA-core kernels or pad.
A 3-channel convolution (the report's network) is ineligible on both sides. This is read from the
graph, not guessed from timings, and reported with the time share the profiled layers hold.

Also marked here: the NaN guard ``torch.onnx.export`` writes after the Softmax of a decomposed
``scaled_dot_product_attention`` (``nan_guards``), two extra passes over the attention scores per layer.
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


def tensor_core_ineligible_nodes(facts: Mapping[str, Mapping[str, Any]]) -> dict[str, Mapping[str, Any]]:
    """The nodes of ``node_facts`` whose dims cannot fill FP16 tensor cores (``tensor_core_dims``' ``eligible``
    False), in graph order: what ``diagnose.layer_rules.tensor_core_ineligible`` names and ``--what-if keep-fp32``
    keeps in FP32."""
    return {name: f for name, f in facts.items() if f.get("tensor_core") and not f["tensor_core"].get("eligible", True)}


def _is_zero_constant(name: str, producers: Mapping[str, Any], initializers: Mapping[str, Any]) -> bool:
    """Whether tensor ``name`` is the constant 0 of one element (a Constant node's ``value`` or ``value_float``,
    or an initializer once constant folding has run): any other tensor is not the guard's 0."""
    from onnx import numpy_helper

    if name in initializers:
        if any(int(d) != 1 for d in initializers[name].dims):  # not one element (a shape-inference skeleton holds
            return False                                           # only the dims of large initializers)
        values = numpy_helper.to_array(initializers[name])
    else:
        node = producers.get(name)
        if node is None or node.op_type != "Constant" or len(node.attribute) != 1:
            return False
        attr = node.attribute[0]
        if attr.name == "value":
            values = numpy_helper.to_array(attr.t)
        elif attr.name == "value_float":
            return attr.f == 0.0
        else:
            return False
    return values.size == 1 and float(values.reshape(-1)[0]) == 0.0


def nan_guards(graph: Any) -> dict[str, str]:
    """Where node key → Softmax node key, for each NaN guard in ``graph`` (an ONNX GraphProto; its top level,
    not the bodies of If/Loop). The pattern, exactly as ``torch.onnx.export`` writes it after the Softmax of a
    decomposed ``scaled_dot_product_attention`` with a boolean mask (``symbolic_opset14``: a fully masked row's
    softmax is 0/0)::

        p = Softmax(scores);  y = Where(IsNaN(p), 0, p)

    — the Where's condition is the output of an IsNaN whose input ``p`` is a Softmax's output, its true
    branch is the constant 0 of one element (``_is_zero_constant``), its false branch that same ``p``. Nothing
    between them is looked through (a Cast, a second guard), and no other Where counts: each guard is an
    IsNaN and a Where over the whole [batch, heads, seq, seq] score tensor, passes the eager attention does
    not run."""
    producers: dict[str, Any] = {}
    keys: dict[int, str] = {}
    for i, node in enumerate(graph.node):
        keys[id(node)] = node_key(node, i)
        for out in node.output:
            producers[out] = node
    initializers = {init.name: init for init in graph.initializer}
    found: dict[str, str] = {}
    for node in graph.node:
        if node.op_type != "Where" or len(node.input) != 3:
            continue
        cond, zero, p = node.input
        isnan = producers.get(cond)
        softmax = producers.get(p)
        if (isnan is None or isnan.op_type != "IsNaN" or list(isnan.input) != [p]
                or softmax is None or softmax.op_type != "Softmax"
                or not _is_zero_constant(zero, producers, initializers)):
            continue
        found[keys[id(node)]] = keys[id(softmax)]
    return found


def node_facts(model: "onnx.ModelProto", input_shapes: Mapping[str, tuple[int, ...]]) -> dict[str, dict[str, Any]]:
    """node key → {op_type, output_shape, flops, tensor_core: {...} or None} at these input shapes; a Where
    that is an SDPA NaN guard (``nan_guards``) also carries ``nan_guard``: the key of its Softmax."""
    from ..model.roofline import inferred_shapes, node_flops

    graph, consts, shapes, _ = inferred_shapes(model, input_shapes)

    def shape(name: str) -> tuple[int, ...] | None:
        return consts.get(name) or shapes.get(name)

    guards = nan_guards(graph)
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
        if node_key(node, i) in guards:
            out[node_key(node, i)]["nan_guard"] = guards[node_key(node, i)]
    return out
