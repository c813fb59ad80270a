"""FP8 on the torch backend: an MLP whose matmuls run through ``torch._scaled_mm`` (E4M3 inputs).

Why only MLPs: PyTorch has no FP8 convolution, attention or general op; its one FP8 kernel is the
scaled matmul (cuBLASLt, compute capability 8.9+). A model is run in FP8 here only when every op is
a matmul (MatMul/Gemm with a constant weight) or cheap elementwise work around one, in a single chain;
anything else is refused with the op that is not covered, rather than timing a model of which FP8
touches a fraction and calling it "fp8".

Scales: weights per tensor (amax/448, fixed at load); activations per tensor and per call (the amax of
the batch at hand, "dynamic" scaling as torchao does), so no calibration is needed. Between the
matmuls the chain computes in BF16 (``_scaled_mm``'s output type), and the result is cast to FP32.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable

import numpy as np

from ..errors import UnsupportedPrecision

if TYPE_CHECKING:
    import onnx

FP8_E4M3_MAX = 448.0
FP8_MIN_CC = (8, 9)  # cuBLASLt FP8 GEMMs: Ada (8.9), Hopper (9.0) and later
MATMUL_ALIGN = 16  # _scaled_mm needs K and N (weight dims) divisible by 16
ELEMENTWISE = {"Relu": "relu", "Gelu": "gelu", "Tanh": "tanh", "Sigmoid": "sigmoid"}
CONSTANT_BINARY = {"Add": "add", "Mul": "mul", "Sub": "sub"}


@dataclass(frozen=True)
class Step:
    """One op of the chain: ``kind`` is "matmul" (``value`` the (K, N) weight, ``bias`` Gemm's C),
    "add"/"mul"/"sub" (``value`` the constant operand) or an elementwise function name."""

    kind: str
    node: str
    value: np.ndarray | None = None
    bias: np.ndarray | None = None


def mlp_chain(model: "onnx.ModelProto") -> list[Step]:
    """The model as a chain of ``Step``, or UnsupportedPrecision naming what ``_scaled_mm`` cannot cover."""
    from onnx import numpy_helper

    graph = model.graph
    inits = {t.name: numpy_helper.to_array(t) for t in graph.initializer}
    inputs = [i.name for i in graph.input if i.name not in inits]
    if len(inputs) != 1 or len(graph.output) != 1:
        raise UnsupportedPrecision("fp8 on torch covers single-input, single-output MLPs (torch._scaled_mm); "
                                   f"this model has {len(inputs)} inputs and {len(graph.output)} outputs")
    current = inputs[0]
    steps: list[Step] = []
    for node in graph.node:
        operands = [name for name in node.input if name and name != current]
        if current not in node.input or any(name not in inits for name in operands):
            raise UnsupportedPrecision(f"fp8 on torch needs a single chain of ops on one tensor; node {node.name} "
                                       f"({node.op_type}) is not one: only MLPs run through torch._scaled_mm")
        steps.append(_step(node, current, [inits[name] for name in operands]))
        current = node.output[0]
    if not any(s.kind == "matmul" for s in steps):
        raise UnsupportedPrecision("fp8 on torch needs a MatMul/Gemm to run through torch._scaled_mm; this model has none")
    return steps


def _step(node: Any, current: str, consts: list[np.ndarray]) -> Step:
    from onnx import helper

    attrs = {a.name: helper.get_attribute_value(a) for a in node.attribute}
    if node.op_type in ("MatMul", "Gemm"):
        if node.op_type == "Gemm" and (attrs.get("transA", 0) or attrs.get("alpha", 1.0) != 1.0
                                       or attrs.get("beta", 1.0) != 1.0 or node.input[0] != current):
            raise UnsupportedPrecision(f"fp8 on torch: Gemm {node.name} uses transA/alpha/beta, not covered")
        weight = consts[0]
        if node.op_type == "Gemm" and attrs.get("transB", 0):
            weight = weight.T
        if weight.ndim != 2 or node.input[0] != current:
            raise UnsupportedPrecision(f"fp8 on torch: {node.op_type} {node.name} is not activation × 2-D weight")
        bad = [d for d in weight.shape if d % MATMUL_ALIGN]
        if bad:
            raise UnsupportedPrecision(f"fp8 on torch: {node.op_type} {node.name} has weight {weight.shape[0]}×"
                                       f"{weight.shape[1]}; torch._scaled_mm needs both dims divisible by {MATMUL_ALIGN}")
        bias = consts[1].astype(np.float32) if node.op_type == "Gemm" and len(consts) > 1 else None
        return Step("matmul", node.name, np.ascontiguousarray(weight, dtype=np.float32), bias)
    if node.op_type in CONSTANT_BINARY and len(consts) == 1:
        return Step(CONSTANT_BINARY[node.op_type], node.name, consts[0].astype(np.float32))
    if node.op_type in ELEMENTWISE and not consts:
        return Step(ELEMENTWISE[node.op_type], node.name)
    raise UnsupportedPrecision(f"fp8 on torch covers MatMul/Gemm, Add/Mul/Sub of a constant and "
                               f"{'/'.join(ELEMENTWISE)}; node {node.name} is {node.op_type}")


def fp8_module(steps: list[Step], torch: Any, *, matmul: Callable[..., Any] | None = None) -> Any:
    """A torch module running ``steps``: matmuls through ``torch._scaled_mm`` on E4M3 inputs (default;
    weights quantized once here, on the module's device after ``.to``), or through ``matmul(x, weight)``
    when given (the CPU check of the chain walking passes a float one)."""
    nn = torch.nn

    class Fp8Mlp(nn.Module):  # type: ignore[name-defined]  # torch is imported by the caller
        def __init__(self) -> None:
            super().__init__()
            self.kinds = [step.kind for step in steps]
            for i, step in enumerate(steps):
                if step.value is not None:
                    self.register_buffer(f"v{i}", torch.from_numpy(np.array(step.value, dtype=np.float32)))
                if step.bias is not None:
                    self.register_buffer(f"b{i}", torch.from_numpy(np.array(step.bias, dtype=np.float32)))

        def forward(self, x: Any) -> Any:
            for i, kind in enumerate(self.kinds):
                v = getattr(self, f"v{i}", None)
                if kind == "matmul":
                    x = matmul(x, v) if matmul is not None else scaled_matmul(torch, x, *self.quantized(i))
                    bias = getattr(self, f"b{i}", None)
                    if bias is not None:
                        x = x + bias.to(x.dtype)
                elif kind in CONSTANT_BINARY.values():
                    x = getattr(torch, kind)(x, v.to(x.dtype))  # type: ignore[union-attr]  # constants have a value
                elif kind in ("relu", "gelu"):
                    x = getattr(torch.nn.functional, kind)(x)
                else:
                    x = getattr(torch, kind)(x)
            return x.float()

        def quantized(self, i: int) -> tuple[Any, Any]:
            """(E4M3 weight in the column-major layout _scaled_mm wants, its scale): made on first use,
            i.e. in ``prepare`` on the GPU, never inside the timed iterations."""
            cache = self.__dict__.setdefault("_fp8", {})
            if i not in cache:
                w = getattr(self, f"v{i}")
                scale = (w.abs().amax().float() / FP8_E4M3_MAX).clamp(min=1e-12)
                cache[i] = ((w / scale).to(torch.float8_e4m3fn).t().contiguous().t(), scale)
            return cache[i]

    return Fp8Mlp()


def scaled_matmul(torch: Any, x: Any, wq: Any, w_scale: Any) -> Any:
    """x @ w with x quantized to float8_e4m3fn per tensor (amax/448 of this call) and ``wq`` already
    E4M3 (column-major (K, N)); output BF16."""
    shape = x.shape
    x2 = x.reshape(-1, shape[-1])
    xs = (x2.abs().amax().float() / FP8_E4M3_MAX).clamp(min=1e-12)
    xq = (x2.float() / xs).to(torch.float8_e4m3fn)
    out = torch._scaled_mm(xq, wq, scale_a=xs, scale_b=w_scale, out_dtype=torch.bfloat16)
    out = out[0] if isinstance(out, tuple) else out  # torch < 2.5 returned (out, amax)
    return out.reshape(*shape[:-1], wq.shape[1])
