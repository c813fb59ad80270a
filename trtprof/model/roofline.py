"""Roofline numbers: FLOPs and bytes per inference from the ONNX graph, and the GPU's peak rates.

Why: "FP16 is only 1.3× faster" means little until you know whether the model was anywhere near the
FP32 peak to begin with. Achieved FLOP/s over the device's peak for that precision says whether the
math (which FP16 speeds up) or something else (memory, launches, copies) bounds the latency.

Counted ops (2 FLOPs per multiply-accumulate; bias adds, activations, pooling, normalisation and
other element-wise ops are NOT counted — they are memory-bound and small next to the MACs):
``Conv``, ``ConvTranspose``, ``MatMul``, ``Gemm``.

Bytes: every initializer (weights) once, plus every tensor a node writes (activations, graph outputs)
and the graph inputs once each: the DRAM traffic of an unfused execution, an upper-bound order of
magnitude (TensorRT fuses many of these away). Float tensors count 2 bytes for fp16, 4 otherwise.
"""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any, Mapping

if TYPE_CHECKING:
    import onnx

COUNTED_OPS = ("Conv", "ConvTranspose", "MatMul", "Gemm")


@dataclass(frozen=True)
class GraphCost:
    batch_size: int
    flops: int
    weight_bytes: int
    activation_bytes: int
    flops_by_op: dict[str, int] = field(default_factory=dict)
    uncounted: tuple[str, ...] = ()  # counted-op nodes whose shapes inference could not resolve
    counted_ops: tuple[str, ...] = COUNTED_OPS

    @property
    def bytes(self) -> int:
        return self.weight_bytes + self.activation_bytes

    @property
    def intensity_flop_per_byte(self) -> float:
        return self.flops / self.bytes if self.bytes else 0.0

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["bytes"] = self.bytes
        data["intensity_flop_per_byte"] = self.intensity_flop_per_byte
        data["uncounted"] = list(self.uncounted)
        data["counted_ops"] = list(self.counted_ops)
        return data


def _dims(vi) -> tuple[int, ...] | None:
    t = vi.type.tensor_type
    if not t.HasField("shape"):
        return None
    out = []
    for d in t.shape.dim:
        if not d.HasField("dim_value") or d.dim_value <= 0:
            return None
        out.append(int(d.dim_value))
    return tuple(out)


def node_attr(node, name: str, default: Any = None) -> Any:
    import onnx

    for a in node.attribute:
        if a.name == name:
            return onnx.helper.get_attribute_value(a)
    return default


def _elem_bytes(elem_type: int, float_bytes: int) -> int:
    import onnx

    if elem_type in (onnx.TensorProto.FLOAT, onnx.TensorProto.FLOAT16, onnx.TensorProto.DOUBLE,
                     onnx.TensorProto.BFLOAT16):
        return float_bytes
    try:
        return int(onnx.helper.tensor_dtype_to_np_dtype(elem_type).itemsize)
    except (KeyError, TypeError, ValueError):
        return 4


def _with_inputs_fixed(model: "onnx.ModelProto", input_shapes: Mapping[str, tuple[int, ...]]) -> "onnx.ModelProto":
    import onnx

    from .skeleton import skeleton

    # without the weights' values (all inference needs): copying and serialising ResNet-50's 100 MB took 0.45 s
    # per call, 5.4 s of a compare's analysis on the H200 (2026-12-03)
    fixed = skeleton(model)
    for vi in fixed.graph.input:
        if vi.name in input_shapes:
            dims = vi.type.tensor_type.shape.dim
            for d, value in zip(dims, input_shapes[vi.name]):
                d.Clear()
                d.dim_value = int(value)
    return onnx.shape_inference.infer_shapes(fixed, data_prop=True)


def inferred_shapes(model: "onnx.ModelProto", input_shapes: Mapping[str, tuple[int, ...]]) -> tuple[
        Any, dict[str, tuple[int, ...]], dict[str, tuple[int, ...] | None], dict[str, int]]:
    """Shape inference at these input shapes → (graph, initializer dims, static shape per tensor
    (None when unknown), element type per tensor). The graph is the inferred skeleton (``model.skeleton``:
    the weights' dims and types, not their values)."""
    graph = _with_inputs_fixed(model, input_shapes).graph
    consts = {init.name: tuple(int(d) for d in init.dims) for init in graph.initializer}
    shapes: dict[str, tuple[int, ...] | None] = {}
    types: dict[str, int] = {}
    for vi in [*graph.input, *graph.value_info, *graph.output]:
        shapes[vi.name] = _dims(vi)
        types[vi.name] = vi.type.tensor_type.elem_type
    return graph, consts, shapes, types


def node_flops(node, shapes: Mapping[str, tuple[int, ...] | None], consts: Mapping[str, tuple[int, ...]]) -> int | None:
    def shape(name: str) -> tuple[int, ...] | None:
        return consts.get(name) or shapes.get(name)

    op = node.op_type
    if op == "Conv":
        w, y = shape(node.input[1]), shape(node.output[0])
        if w is None or y is None:
            return None
        # y: N, Cout, *spatial; w: Cout, Cin/group, *kernel → MACs = N·Cout·∏spatial·(Cin/group)·∏kernel
        return 2 * math.prod(y) * math.prod(w[1:])
    if op == "ConvTranspose":
        x, w = shape(node.input[0]), shape(node.input[1])
        if x is None or w is None:
            return None
        # x: N, Cin, *spatial; w: Cin, Cout/group, *kernel → every input element scatters into a kernel
        return 2 * math.prod(x) * math.prod(w[1:])
    if op == "MatMul":
        a, y = shape(node.input[0]), shape(node.output[0])
        if a is None or y is None:
            return None
        k = a[-1]
        return 2 * math.prod(y) * k  # every output element is a K-long dot product
    if op == "Gemm":
        a, y = shape(node.input[0]), shape(node.output[0])
        if a is None or y is None or len(a) != 2:
            return None
        k = a[0] if node_attr(node, "transA", 0) else a[1]
        return 2 * math.prod(y) * k
    return 0


def graph_cost(model: "onnx.ModelProto", input_shapes: Mapping[str, tuple[int, ...]], *, float_bytes: int = 4) -> GraphCost:
    """FLOPs and bytes of one inference at the given input shapes (batch in dim 0)."""
    graph, consts, shapes, types = inferred_shapes(model, input_shapes)
    flops_by_op: dict[str, int] = {}
    uncounted = []
    for node in graph.node:
        if node.op_type not in COUNTED_OPS:
            continue
        f = node_flops(node, shapes, consts)
        if f is None:
            uncounted.append(node.name or node.op_type)
            continue
        flops_by_op[node.op_type] = flops_by_op.get(node.op_type, 0) + f
    weight_bytes = sum(math.prod(init.dims) * _elem_bytes(init.data_type, float_bytes) for init in graph.initializer)
    written = {out for node in graph.node for out in node.output if out}
    inputs = {vi.name for vi in graph.input} - set(consts)
    activation_bytes = 0
    for name in written | inputs:
        dims = shapes.get(name)
        if dims is not None and name in types:
            activation_bytes += math.prod(dims) * _elem_bytes(types[name], float_bytes)
    # the batch is dim 0 of the first input that has one (a rank-0 input, a scalar or an If's condition, has none)
    batch = next((shape[0] for shape in input_shapes.values() if len(shape)), 1)
    return GraphCost(batch_size=int(batch), flops=int(sum(flops_by_op.values())), weight_bytes=int(weight_bytes),
                     activation_bytes=int(activation_bytes), flops_by_op=flops_by_op, uncounted=tuple(uncounted))


# ---------------------------------------------------------------------------------------------
# Peak rates by compute capability: dense FLOP per clock per SM (2 FLOPs per FMA).
#
# CUDA-core figures: NVIDIA CUDA C++ Programming Guide, "Arithmetic Instructions" table
# ("Throughput of Native Arithmetic Instructions, results per clock cycle per multiprocessor"),
# rows "32-bit floating-point add, multiply, multiply-add" and "16-bit floating-point add,
# multiply, multiply-add", × 2 for FMA (results/clk/SM: FP32 64 on 6.0 and 7.x, 128 on 6.1/6.2 and
# 8.6+; FP16 128 on 6.0, 2 on 6.1, 256 on 6.2).
# FP32 on 9.0: H100 whitepaper 66.9 TFLOPS = 132 SMs × 128 FP32 lanes × 2 × 1980 MHz.
# Tensor-core figures: the architecture whitepapers' peak dense TFLOPS divided by (SM count × boost
# clock) of the flagship part:
#   7.0  Tesla V100 whitepaper (2017), Table 1: 125 TFLOPS FP16 TC, 80 SMs, 1530 MHz → 1024.
#   7.5  Turing whitepaper (2018), Tesla T4: 65 TFLOPS FP16 TC, 40 SMs, 1590 MHz → 1024.
#   8.0  A100 whitepaper (2020), Table 1: 312 FP16 / 156 TF32 TFLOPS, 108 SMs, 1410 MHz → 2048 / 1024.
#   8.6  GA102 whitepaper (2020), Appendix: RTX A6000 / A40 full-rate 1024 FP16 / 512 TF32;
#        GeForce parts halve FP32-accumulate tensor rates (the table keeps full rate; see note).
#   8.9  Ada whitepaper (2022), Appendix: RTX 6000 Ada / L40 → 1024 FP16 / 512 TF32 per SM·clock.
#   9.0  H100 whitepaper (2022), Table 2: 989.4 FP16 / 494.7 TF32 dense TFLOPS, 132 SMs, 1830 MHz
#        → 4096 / 2048.
# None: no tensor cores, FP16 runs on CUDA cores at the rate given.
# ---------------------------------------------------------------------------------------------

_CUDA_GUIDE = "CUDA C++ Programming Guide, Arithmetic Instructions throughput table"


@dataclass(frozen=True)
class PeakRates:
    compute_capability: str
    fp32_flop_per_clk_sm: int  # CUDA cores, FMA counted as 2
    fp16_flop_per_clk_sm: int  # tensor cores when present, else CUDA-core half/half2
    tf32_flop_per_clk_sm: int | None  # tensor cores (≥ 8.0) else None
    fp16_tensor_cores: bool
    source: str
    note: str = ""

    @property
    def fp16_over_fp32(self) -> float:
        return self.fp16_flop_per_clk_sm / self.fp32_flop_per_clk_sm

    @property
    def fp16_over_tf32(self) -> float | None:
        return None if not self.tf32_flop_per_clk_sm else self.fp16_flop_per_clk_sm / self.tf32_flop_per_clk_sm

    def per_clock(self, precision: str) -> int | None:
        return {"fp32": self.fp32_flop_per_clk_sm, "fp16": self.fp16_flop_per_clk_sm,
                "tf32": self.tf32_flop_per_clk_sm}.get(precision)

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["fp16_over_fp32"] = self.fp16_over_fp32
        data["fp16_over_tf32"] = self.fp16_over_tf32
        return data


PEAKS: dict[str, PeakRates] = {p.compute_capability: p for p in (
    PeakRates("6.0", 128, 256, None, False, _CUDA_GUIDE + " (sm_60: FP16 at 2× FP32; Tesla P100)"),
    PeakRates("6.1", 256, 4, None, False, _CUDA_GUIDE + " (sm_61: FP16 at 2 results/clk/SM, 1/64 of FP32; GeForce Pascal)"),
    PeakRates("6.2", 256, 512, None, False, _CUDA_GUIDE + " (sm_62: FP16 at 2× FP32; Jetson TX2)"),
    PeakRates("7.0", 128, 1024, None, True, "NVIDIA Tesla V100 GPU Architecture whitepaper (2017), Table 1; " + _CUDA_GUIDE),
    PeakRates("7.2", 128, 1024, None, True, "NVIDIA Tesla V100 GPU Architecture whitepaper (Volta tensor cores); " + _CUDA_GUIDE),
    PeakRates("7.5", 128, 1024, None, True, "NVIDIA Turing GPU Architecture whitepaper (2018), Tesla T4; " + _CUDA_GUIDE),
    PeakRates("8.0", 128, 2048, 1024, True, "NVIDIA A100 Tensor Core GPU Architecture whitepaper (2020), Table 1; " + _CUDA_GUIDE),
    PeakRates("8.6", 256, 1024, 512, True, "NVIDIA Ampere GA102 GPU Architecture whitepaper (2020), Appendix; " + _CUDA_GUIDE,
              note="GeForce GA10x halve FP32-accumulate tensor rates"),
    PeakRates("8.7", 256, 1024, 512, True, "NVIDIA Jetson AGX Orin series technical brief (GA10B, Ampere tensor cores); " + _CUDA_GUIDE),
    PeakRates("8.9", 256, 1024, 512, True, "NVIDIA Ada GPU Architecture whitepaper (2022), Appendix; " + _CUDA_GUIDE,
              note="GeForce AD10x halve FP32-accumulate tensor rates"),
    PeakRates("9.0", 256, 4096, 2048, True, "NVIDIA H100 Tensor Core GPU Architecture whitepaper (2022), Table 2; " + _CUDA_GUIDE),
)}


def peak_rates(compute_capability: str | None) -> PeakRates | None:
    """The table row for ``"8.0"``-style capability strings; None when unknown (never a guess)."""
    if not compute_capability:
        return None
    return PEAKS.get(str(compute_capability).strip())


@dataclass(frozen=True)
class DevicePeak:
    """Absolute peak FLOP/s of one GPU: per-SM rate × SM count × max SM clock (NVML).

    NVIDIA quotes some tensor-core peaks at a lower clock than the max SM clock (H100 SXM: tensor
    TFLOPS at 1830 MHz, FP32 at 1980 MHz), so a peak here can be up to ~8 % high: the share of peak
    errs low, never flattering the engine.
    """

    name: str
    compute_capability: str
    multiprocessors: int
    max_sm_clock_mhz: float
    rates: PeakRates

    def flops_per_s(self, precision: str) -> float | None:
        per = self.rates.per_clock(precision)
        return None if per is None else per * self.multiprocessors * self.max_sm_clock_mhz * 1e6

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "compute_capability": self.compute_capability,
                "multiprocessors": self.multiprocessors, "max_sm_clock_mhz": self.max_sm_clock_mhz,
                "peak_flops_per_s": {p: self.flops_per_s(p) for p in ("fp32", "tf32", "fp16")},
                "rates": self.rates.to_json()}


def query_device_peak(device_index: int = 0) -> DevicePeak | None:
    """Capability and SM count from the CUDA runtime, max SM clock from NVML; None without a GPU.

    Best effort by design: a missing driver or library means "no peak known", never a crash.
    """
    try:
        from cuda.bindings import runtime as cudart

        def attr(which) -> int:
            err, value = cudart.cudaDeviceGetAttribute(which, device_index)
            if int(err) != 0:
                raise RuntimeError(str(err))
            return int(value)

        A = cudart.cudaDeviceAttr
        major = attr(A.cudaDevAttrComputeCapabilityMajor)
        minor = attr(A.cudaDevAttrComputeCapabilityMinor)
        sms = attr(A.cudaDevAttrMultiProcessorCount)
    except Exception:
        return None
    cc = f"{major}.{minor}"
    rates = peak_rates(cc)
    if rates is None:
        return None
    clock_mhz = 0.0
    name = ""
    try:
        import pynvml

        pynvml.nvmlInit()
        try:
            handle = pynvml.nvmlDeviceGetHandleByIndex(device_index)
            clock_mhz = float(pynvml.nvmlDeviceGetMaxClockInfo(handle, pynvml.NVML_CLOCK_SM))
            raw = pynvml.nvmlDeviceGetName(handle)
            name = raw.decode() if isinstance(raw, bytes) else str(raw)
        finally:
            pynvml.nvmlShutdown()
    except Exception:
        try:
            clock_mhz = attr(A.cudaDevAttrClockRate) / 1e3  # kHz
        except Exception:
            return None
    if clock_mhz <= 0:
        return None
    return DevicePeak(name=name, compute_capability=cc, multiprocessors=sms, max_sm_clock_mhz=clock_mhz, rates=rates)


def achieved(cost: GraphCost, latency_ms: float, peak: DevicePeak | None, precision: str) -> dict[str, Any]:
    """Achieved FLOP/s and bytes/s at ``latency_ms``, and the share of the device's peak."""
    seconds = latency_ms / 1e3
    flops_s = cost.flops / seconds if seconds > 0 else float("nan")
    peak_s = peak.flops_per_s(precision) if peak is not None else None
    return {
        "flops": cost.flops,
        "bytes": cost.bytes,
        "intensity_flop_per_byte": cost.intensity_flop_per_byte,
        "achieved_flops_per_s": flops_s,
        "achieved_bytes_per_s": cost.bytes / seconds if seconds > 0 else float("nan"),
        "peak_flops_per_s": peak_s,
        "share_of_peak": (flops_s / peak_s) if peak_s else None,
    }
