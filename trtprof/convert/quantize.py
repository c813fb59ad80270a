"""ONNX FP32 → QDQ (QuantizeLinear/DequantizeLinear) models for the INT8 and FP8 precisions.

Why QDQ: it is the one quantized form every backend here takes. ONNX Runtime fuses QDQ around Conv /
MatMul / Gemm into real integer kernels (QLinearConv, QGemm, MatMulInteger, …) — the one low
precision its CPU provider really runs faster — and TensorRT / TensorRT-RTX (always strongly typed)
accept quantization only as explicit Q/DQ nodes. INT8 uses ONNX Runtime's maintained static
quantizer (``quantize_static``, per-channel weights, MinMax calibration). FP8 (E4M3) Q/DQ pairs are
inserted here: ORT's quantizer calibrates float8 only with its "Distribution" method and needs its
own kernels; TensorRT needs nothing but per-tensor scales.

The calibration data are random unless the caller passes real samples, and every artifact records
which (``calibration_*`` options are part of the build spec and so of the cache key): an INT8 model
calibrated on noise is a different — usually worse — model than one calibrated on data.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Mapping, Sequence

from ..errors import BuildFailed, MissingDependency
from ..spec import Precision

if TYPE_CHECKING:
    import numpy as np
    import onnx

    from ..spec import BuildSpec, TensorSpec

# Calibration batches (of the smallest built batch size): MinMax converges in a few batches of
# N(0, 1) inputs; more only costs build time with random data. With the user's --inputs every sample
# is used, up to MAX_CALIBRATION_BATCHES batches (a build should not run a whole dataset).
CALIBRATION_SAMPLES = 8
MAX_CALIBRATION_BATCHES = 64
CALIBRATION_METHOD = "minmax"
RANDOM_CALIBRATION = "random N(0,1), seed {seed}"
FP8_E4M3_MAX = 448.0  # largest finite float8e4m3fn value: scale = amax / 448
FP8_MIN_OPSET = 19  # QuantizeLinear with a float8 zero point is opset 19+
# Ops whose inputs the FP8 path quantizes: the GEMM-like ops TensorRT-RTX runs in FP8.
FP8_OPS = ("MatMul", "Gemm", "Conv")

# Ops that compute on 8-bit integers in the graph ONNX Runtime executes (after its QDQ fusion).
INT8_COMPUTE_OPS = frozenset({
    "QLinearConv", "QLinearMatMul", "ConvInteger", "MatMulInteger", "MatMulIntegerToFloat", "QGemm",
    "DynamicQuantizeMatMul", "QLinearAdd", "QLinearMul", "QLinearGlobalAveragePool", "QLinearAveragePool",
    "QLinearConcat", "QLinearSigmoid", "QLinearLeakyRelu", "QLinearSoftmax", "QLinearReduceMean",
    "QLinearWhere", "QAttention", "QEmbedLayerNormalization", "QLinearConvTranspose",
})
QDQ_OPS = frozenset({"QuantizeLinear", "DequantizeLinear", "DynamicQuantizeLinear"})
NOT_COMPUTE = frozenset({"Cast", "Constant", "ConstantOfShape", "Shape", "Size", "Identity"})


def quantization_options(precision: Precision, *, batch: int = 1, data: Any = None, seed: int = 0) -> dict[str, Any]:
    """Build-spec options of a quantized precision (empty for the others): they change the artifact,
    so they are part of the cache key, and they say how the scales were found. ``data``: the user's
    inputs (user_inputs.InputData), named by source and content hash; else seeded random inputs."""
    if precision not in (Precision.INT8, Precision.FP8):
        return {}
    options: dict[str, Any] = {"calibration": CALIBRATION_METHOD, "calibration_batch": int(batch)}
    if data is None:
        return {**options, "calibration_samples": CALIBRATION_SAMPLES * int(batch),
                "calibration_data": RANDOM_CALIBRATION.format(seed=seed), "calibration_seed": seed}
    batches = min(-(-data.samples // int(batch)), MAX_CALIBRATION_BATCHES)
    return {**options, "calibration_samples": batches * int(batch),
            "calibration_data": f"{data.describe()}, sha256 {inputs_digest(data)[:16]}"}


def inputs_digest(data: Any) -> str:
    """sha256 over the user's arrays (names, dtypes, shapes, bytes): the same path holding other
    samples must not serve a cached INT8 model calibrated on the old ones."""
    import hashlib

    import numpy as np

    digest = hashlib.sha256()
    for name in sorted(data.arrays):
        array = np.ascontiguousarray(data.arrays[name])
        digest.update(f"{name}|{array.dtype.str}|{array.shape}|".encode())
        digest.update(array.tobytes())
    return digest.hexdigest()


@dataclass(frozen=True)
class Quantization:
    """The QDQ model and how it was made (``settings`` goes into the engine metadata)."""

    model: "onnx.ModelProto"
    settings: Mapping[str, Any]
    notes: tuple[str, ...]

    def to_json(self) -> dict[str, Any]:
        return dict(self.settings)


def calibration_feeds(inputs: Sequence["TensorSpec"], spec: "BuildSpec", data: Any = None) -> list[dict[str, "np.ndarray"]]:
    """The calibration batches the spec's options describe: the user's samples (``data``) in batches of
    ``calibration_batch``, or seeded random inputs (``CALIBRATION_SAMPLES`` batches)."""
    import itertools

    import numpy as np

    from ..model.inputs import make_inputs, resolve_shapes

    batch = int(spec.option("calibration_batch", spec.min_batch))
    if data is not None:
        dtypes = {t.name: np.dtype(t.dtype) for t in inputs}
        return list(itertools.islice(data.batches(batch, dtypes), MAX_CALIBRATION_BATCHES))
    shapes = resolve_shapes(inputs, batch, spec.shape_overrides())
    seed = int(spec.option("calibration_seed", 0))
    count = int(spec.option("calibration_samples", CALIBRATION_SAMPLES * batch)) // batch
    return [make_inputs(inputs, shapes, seed=seed + i) for i in range(count)]


def random_inputs_text(feeds: Sequence[Mapping[str, "np.ndarray"]]) -> str:
    """Each input of the random calibration batches as it was drawn: floats N(0,1), integers uniform
    in the range they span, booleans uniform."""
    import numpy as np

    parts = []
    for name in feeds[0]:
        values = [np.asarray(f[name]) for f in feeds]
        kind = values[0].dtype.kind
        if kind == "f":
            parts.append(f"{name} N(0,1)")
        elif kind in "iu":
            low, high = min(int(v.min()) for v in values), max(int(v.max()) for v in values)
            parts.append(f"{name} {values[0].dtype} uniform integers {low}..{high}")
        else:
            parts.append(f"{name} {values[0].dtype} uniform")
    return ", ".join(parts)


def calibration_note(spec: "BuildSpec", feeds: Sequence[Mapping[str, "np.ndarray"]]) -> str:
    """One line saying what the scales were calibrated on (random data is said to be random)."""
    batch = spec.option("calibration_batch", spec.min_batch)
    data = str(spec.option("calibration_data", RANDOM_CALIBRATION.format(seed=0)))
    warn = " — not your data: pass --inputs to calibrate on real samples" if data.startswith("random") else ""
    if data.startswith("random") and feeds:  # each input by what it really held ("N(0,1)" of an int64 is wrong)
        seed = data.rsplit("seed ", 1)[-1] if "seed " in data else "0"
        data = f"random inputs (seed {seed}: {random_inputs_text(feeds)})"
    return (f"{spec.precision.value} calibration ({spec.option('calibration', CALIBRATION_METHOD)}): {len(feeds)} "
            f"batches of {batch} from {data}{warn}")


def _ort_quantization():
    try:
        from onnxruntime import quantization
    except ImportError as err:
        raise MissingDependency("onnxruntime", None, why="its quantizer makes the INT8 QDQ model") from err
    return quantization


class _Feeds:
    """onnxruntime.quantization's CalibrationDataReader over a list of feeds (duck-typed: its base
    class only declares ``get_next``)."""

    def __init__(self, feeds: Sequence[Mapping[str, "np.ndarray"]]) -> None:
        self._it = iter([dict(feed) for feed in feeds])

    def get_next(self) -> dict[str, "np.ndarray"] | None:
        return next(self._it, None)


ORT_ERROR, ORT_DEFAULT_SEVERITY = 3, 2  # onnxruntime's severities: 2 warning (its default), 3 error


def ort_logger_severity(severity: int) -> None:
    """Set onnxruntime's default logger severity (the one sessions without their own level log at)."""
    import onnxruntime

    onnxruntime.set_default_logger_severity(severity)


def quantize_int8(model: "onnx.ModelProto", feeds: Sequence[Mapping[str, "np.ndarray"]], *,
                  for_tensorrt: bool) -> Quantization:
    """Static INT8 QDQ quantization: per-channel symmetric INT8 weights, activations calibrated with
    MinMax on ``feeds``. ``for_tensorrt``: INT8 activations with zero point 0 and float biases (TensorRT
    dequantizes only 8-bit tensors: an INT32 bias fails its parser); otherwise UINT8 activations with
    a zero point and INT32 biases, the U8S8 form ONNX Runtime's x86 integer kernels are written for."""
    symmetric_activations = for_tensorrt
    import onnx

    from ..util.scratch import temp_dir

    q = _ort_quantization()
    act = q.QuantType.QInt8 if symmetric_activations else q.QuantType.QUInt8
    settings = {"format": "QDQ", "quantizer": "onnxruntime.quantization.quantize_static",
                "weights": "int8 per-channel symmetric",
                "activations": "int8 symmetric" if symmetric_activations else "uint8 asymmetric",
                "bias": "float" if for_tensorrt else "int32",
                "calibration": CALIBRATION_METHOD, "calibration_batches": len(feeds)}
    root = logging.getLogger()
    level = root.level
    root.setLevel(logging.ERROR)  # its "consider pre-processing" warnings are advice to library users
    # its calibration sessions log at ORT's default severity, straight to stderr in ANSI colour (an unused
    # initializer, …): the FP32 build records those warnings in its metadata; errors still come back raised
    ort_logger_severity(ORT_ERROR)
    try:
        with temp_dir("quantize") as tmp:
            out = tmp / "int8.onnx"
            q.quantize_static(model, str(out), _Feeds(feeds), quant_format=q.QuantFormat.QDQ, per_channel=True,
                              activation_type=act, weight_type=q.QuantType.QInt8,
                              calibrate_method=q.CalibrationMethod.MinMax,
                              extra_options={"ActivationSymmetric": symmetric_activations, "WeightSymmetric": True,
                                             "QuantizeBias": not for_tensorrt})
            quantized = onnx.load(str(out))
    except MissingDependency:
        raise
    except Exception as err:
        raise BuildFailed(f"INT8 quantization (onnxruntime quantize_static) failed: {err}") from err
    finally:
        root.setLevel(level)
        ort_logger_severity(ORT_DEFAULT_SEVERITY)
    pairs = sum(1 for n in quantized.graph.node if n.op_type == "QuantizeLinear")
    notes = (f"int8: QDQ model from onnxruntime's static quantizer ({settings['weights']} weights, "
             f"{settings['activations']} activations, {pairs} activation Q/DQ pairs)",)
    return Quantization(model=quantized, settings=settings, notes=notes)


def tensor_types(model: "onnx.ModelProto") -> dict[str, int]:
    from .fp16 import tensor_elem_types

    return tensor_elem_types(model)


def count_quantized(model: "onnx.ModelProto") -> dict[str, dict[str, int]]:
    """Per op type, compute nodes of an executed graph in three buckets: ``int8`` (integer kernels:
    ``INT8_COMPUTE_OPS``, or a node on 8-bit tensors only), ``fp32`` (a node on float tensors: a
    Conv left between DequantizeLinear and QuantizeLinear computes in FP32) and ``qdq`` (the
    (de)quantize nodes themselves: conversions, not arithmetic)."""
    import onnx

    t = onnx.TensorProto
    eight_bit = {t.INT8, t.UINT8}
    floats = {t.FLOAT, t.FLOAT16, t.BFLOAT16, t.DOUBLE}
    types = tensor_types(model)
    counts: dict[str, dict[str, int]] = {"int8": {}, "fp32": {}, "qdq": {}}
    for node in model.graph.node:
        if node.op_type in NOT_COMPUTE:
            continue
        seen = {types.get(name) for name in [*node.input, *node.output] if name}
        if node.op_type in QDQ_OPS:
            bucket = "qdq"
        elif node.op_type in INT8_COMPUTE_OPS:
            bucket = "int8"
        elif seen & floats:
            bucket = "fp32"
        elif seen & eight_bit:
            bucket = "int8"
        else:
            continue
        counts[bucket][node.op_type] = counts[bucket].get(node.op_type, 0) + 1
    return counts


def effective_int8(census: Mapping[str, Mapping[str, int]]) -> str:
    """"int8" when no compute node is left in float, "mixed" when some are, "fp32+qdq" when none of
    them got an integer kernel (the Q/DQ nodes then only add rounding and time)."""
    n8 = sum(census.get("int8", {}).values())
    n32 = sum(census.get("fp32", {}).values())
    if n8 == 0:
        return "fp32+qdq"
    return "int8" if n32 == 0 else "mixed"


def _activation_amax(model: "onnx.ModelProto", names: Sequence[str],
                     feeds: Sequence[Mapping[str, "np.ndarray"]]) -> dict[str, float]:
    """max |x| of each named float tensor over the calibration feeds (the FP32 model run by ORT with
    those tensors added as outputs): FP8's MinMax calibration."""
    import numpy as np
    import onnx

    probe = onnx.ModelProto()
    probe.CopyFrom(model)
    declared = {o.name for o in probe.graph.output}
    for name in names:
        if name not in declared:
            probe.graph.output.append(onnx.helper.make_tensor_value_info(name, onnx.TensorProto.FLOAT, None))
    try:
        import onnxruntime as ort
    except ImportError as err:
        raise MissingDependency("onnxruntime", None, why="FP8 calibration runs the FP32 model") from err
    try:
        session = ort.InferenceSession(probe.SerializeToString(), providers=["CPUExecutionProvider"])
        amax = {name: 0.0 for name in names}
        for feed in feeds:
            values = session.run(list(names), dict(feed))
            for name, value in zip(names, values):
                amax[name] = max(amax[name], float(np.max(np.abs(value))) if value.size else 0.0)
    except Exception as err:
        raise BuildFailed(f"FP8 calibration could not run the FP32 model: {err}") from err
    return amax


def _qdq_pair(name: str, scale: float, tag: str) -> tuple[list["onnx.NodeProto"], list["onnx.TensorProto"], str]:
    """QuantizeLinear → DequantizeLinear of ``name`` in float8e4m3fn with one (per-tensor) scale."""
    import numpy as np
    from onnx import TensorProto, helper, numpy_helper

    s = numpy_helper.from_array(np.array(scale, dtype=np.float32), f"{tag}_scale")
    zp = helper.make_tensor(f"{tag}_zero_point", TensorProto.FLOAT8E4M3FN, [], [0.0])
    nodes = [helper.make_node("QuantizeLinear", [name, s.name, zp.name], [f"{tag}_q"], name=f"{tag}_QuantizeLinear"),
             helper.make_node("DequantizeLinear", [f"{tag}_q", s.name, zp.name], [f"{tag}_dq"],
                              name=f"{tag}_DequantizeLinear")]
    return nodes, [s, zp], f"{tag}_dq"


def quantize_fp8(model: "onnx.ModelProto", feeds: Sequence[Mapping[str, "np.ndarray"]]) -> Quantization:
    """FP8 (E4M3) QDQ around the inputs (activation and weight) of every ``FP8_OPS`` node: per-tensor
    scales amax/448 (MinMax over the calibration feeds for activations, over the tensor for
    weights). The model is moved to opset 19 first (float8 Q/DQ exists from there)."""
    import numpy as np
    import onnx
    from onnx import numpy_helper

    work = onnx.ModelProto()
    work.CopyFrom(model)
    opset = max((o.version for o in work.opset_import if o.domain in ("", "ai.onnx")), default=0)
    if opset < FP8_MIN_OPSET:
        try:
            work = onnx.version_converter.convert_version(work, FP8_MIN_OPSET)
        except Exception as err:
            raise BuildFailed(f"FP8 needs opset {FP8_MIN_OPSET}+ and the model (opset {opset}) could not be "
                              f"converted: {err}") from err
    inits = {t.name: t for t in work.graph.initializer}
    targets = [n for n in work.graph.node if n.op_type in FP8_OPS]
    if not targets:
        raise BuildFailed(f"fp8: the model has no {'/'.join(FP8_OPS)} node to quantize")
    activations = sorted({n.input[0] for n in targets if n.input[0] not in inits})
    amax = _activation_amax(work, activations, feeds)
    new_nodes: list[onnx.NodeProto] = []
    new_inits: list[onnx.TensorProto] = []
    made: dict[str, str] = {}
    for node in work.graph.node:
        if node.op_type in FP8_OPS:
            for slot in (0, 1):
                name = node.input[slot]
                if name not in made:
                    peak = (float(np.max(np.abs(numpy_helper.to_array(inits[name])))) if name in inits
                            else amax[name])
                    tag = f"fp8_{len(made)}"
                    pair, consts, made[name] = _qdq_pair(name, max(peak, 1e-12) / FP8_E4M3_MAX, tag)
                    new_nodes += pair
                    new_inits += consts
                node.input[slot] = made[name]
        new_nodes.append(node)
    del work.graph.node[:]
    work.graph.node.extend(new_nodes)
    work.graph.initializer.extend(new_inits)
    settings = {"format": "QDQ", "quantizer": "trtprof.convert.quantize.quantize_fp8", "type": "float8e4m3fn",
                "weights": "fp8 per-tensor", "activations": "fp8 per-tensor", "calibration": CALIBRATION_METHOD,
                "calibration_batches": len(feeds), "quantized_ops": list(FP8_OPS), "opset": max(opset, FP8_MIN_OPSET)}
    notes = (f"fp8: E4M3 Q/DQ on the inputs of {len(targets)} {'/'.join(FP8_OPS)} nodes "
             f"({len(made)} tensors, per-tensor scales amax/{FP8_E4M3_MAX:g})",)
    return Quantization(model=work, settings=settings, notes=notes)
