"""ONNX → serialized TensorRT plan, for FP32 (TF32 off), TF32 and FP16, on TensorRT 8.6, 10.x, 11.x
and TensorRT-RTX 1.x.

The steps mirror trtexec so a plan from here is comparable with one from trtexec: logger → builder →
network → ONNX parser → builder config (workspace, optimization level, precision flags, one
optimization profile over the requested batch sizes, timing cache or TensorRT-RTX compute-capability
targets, detailed profiling verbosity) → ``build_serialized_network``. Library and version differences
come from ``compat``; the library module is passed in, so one builder serves ``tensorrt`` and
``tensorrt_rtx``.
"""
from __future__ import annotations

import fnmatch
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any, Mapping

from ...util.files import atomic_write_bytes
from ...convert.keeplist import parse_layer_precisions, parse_op_types
from ...errors import BadInput, BuildFailed
from ...model.inputs import resolve_shapes
from ...spec import BuildSpec, Precision, TensorSpec
from ..base import BuildReport
from .compat import (TENSORRT, Library, TrtFeatures, builder_flag, dims_tuple, network_flags, parser_errors,
                     require_library, serialized_size)
from .targets import apply_compute_capabilities
from .tail_logger import LogTail, collector_paused, make_logger

if TYPE_CHECKING:
    import tensorrt as trt

QUANTIZED = (Precision.INT8, Precision.FP8)  # built from trtprof's QDQ model (explicit quantization)
TIMING_CACHE_NAME = "timing.cache"  # beside the engines: reused by every build on this machine
MAX_OPT_LEVEL = 5  # TensorRT's builder_optimization_level range is 0..5 (default 3)


@dataclass(frozen=True)
class BuildOptions:
    """The TensorRT options of a BuildSpec, validated (so a typo fails before a long build)."""

    workspace_mb: int | None = None
    builder_optimization_level: int | None = None
    precision_constraints: str | None = None  # "obey" | "prefer"
    layer_precisions: tuple[tuple[str, str], ...] = ()  # (layer name or "*", "fp16"|"fp32")
    keep_fp32_ops: tuple[str, ...] = ()  # parsed early to fail fast; refused on TensorRT < 11 (>= 11: KeepFp32)

    @classmethod
    def from_spec(cls, spec: BuildSpec) -> "BuildOptions":
        workspace = spec.option("workspace_mb")
        level = spec.option("builder_optimization_level")
        constraints = spec.option("precision_constraints")
        if constraints == "none":  # the CLI's explicit "no constraints"
            constraints = None
        layers = parse_layer_precisions(spec.option("layer_precisions"))
        if workspace is not None and (not _is_int(workspace) or int(workspace) <= 0):
            raise BadInput(f"--workspace-mb must be a positive integer, got {workspace!r}")
        if level is not None and (not _is_int(level) or not 0 <= int(level) <= MAX_OPT_LEVEL):
            raise BadInput(f"--builder-opt-level must be 0..{MAX_OPT_LEVEL}, got {level!r}")
        if constraints is not None and constraints not in ("obey", "prefer"):
            raise BadInput(f"--precision-constraints must be obey or prefer, got {constraints!r}")
        return cls(
            workspace_mb=None if workspace is None else int(workspace),
            builder_optimization_level=None if level is None else int(level),
            precision_constraints=constraints,
            layer_precisions=layers,
            keep_fp32_ops=parse_op_types(spec.option("keep_fp32_ops")),
        )


def _is_int(value: Any) -> bool:
    try:
        int(value)
    except (TypeError, ValueError):
        return False
    return not isinstance(value, bool) and float(value) == int(value)


def timing_cache_path(out: Path) -> Path:
    return Path(out).parent / TIMING_CACHE_NAME


def network_inputs(network: "trt.INetworkDefinition", trt: ModuleType) -> tuple[TensorSpec, ...]:
    """The network's inputs as TensorSpecs (-1 dims become None), names exactly as TensorRT has them."""
    specs = []
    for i in range(network.num_inputs):
        tensor = network.get_input(i)
        dims = tuple(None if d < 0 else d for d in dims_tuple(tensor.shape))
        try:
            dtype = str(trt.nptype(tensor.dtype).__name__)
        except TypeError:
            dtype = str(tensor.dtype)
        specs.append(TensorSpec(name=tensor.name, dtype=dtype, shape=dims))
    return tuple(specs)


def profile_shapes(
    inputs: tuple[TensorSpec, ...], spec: BuildSpec, model: Path
) -> dict[str, tuple[tuple[int, ...], tuple[int, ...], tuple[int, ...]]]:
    """(min, opt, max) per input from the batch sizes, ``opt_batch`` and ``--shape`` overrides."""
    opt = spec.opt_batch
    if not spec.min_batch <= opt <= spec.max_batch:
        raise BadInput(f"--opt-batch {opt} is outside the batch sizes {spec.min_batch}..{spec.max_batch}")
    overrides = spec.shape_overrides()
    low = resolve_shapes(inputs, spec.min_batch, overrides, model_path=str(model))
    mid = resolve_shapes(inputs, opt, overrides, model_path=str(model))
    high = resolve_shapes(inputs, spec.max_batch, overrides, model_path=str(model))
    return {t.name: (low[t.name], mid[t.name], high[t.name]) for t in inputs}


def _fp16_model_bytes(model: Path, spec: BuildSpec, product: str) -> tuple[bytes, dict[str, Any], list[str], Any]:
    """TensorRT ≥ 11 / TensorRT-RTX: the ONNX with FP16 types (strong typing), via the converter ORT also uses.

    ModelOpt AutoCast is NVIDIA's suggestion, but nvidia-modelopt requires torch (and its onnx
    extra onnxruntime-gpu/cupy), so the shared onnxconverter-common converter is used. Layers asked
    to stay FP32 (``--layer-precisions NAME:fp32``) go to its node block list, op types
    (``--keep-fp32-ops``) to its op block list; both are read (and ``NAME:fp16`` or wildcards refused)
    by ``KeepFp32.from_spec``, as for every backend that converts the graph.
    """
    from ...convert.fp16 import convert_fp16, count_precision
    from ...convert.keeplist import KeepFp32
    from ...model.onnx_model import load_onnx

    keep = KeepFp32.from_spec(spec, backend=product, why="builds strongly typed networks")
    proto = load_onnx(model)
    conversion = convert_fp16(proto, keep_io_types=True, keep_fp32_ops=keep.ops, keep_fp32_nodes=keep.nodes)
    converted = conversion.model
    meta = {"fp16_conversion": "onnxconverter-common", "fp16_weights": conversion.to_json(),
            "onnx_nodes_by_precision": count_precision(converted)}
    return converted.SerializeToString(), meta, list(conversion.notes), conversion


def quantized_model_bytes(model: Path, spec: BuildSpec, calibration: Any = None) -> tuple[bytes, dict[str, Any], list[str]]:
    """The QDQ model TensorRT parses for INT8/FP8: TensorRT takes quantization only as explicit Q/DQ
    nodes (TensorRT-RTX and TensorRT ≥ 11 have no INT8 calibrator). INT8: symmetric INT8 activations
    and float biases, as TensorRT requires; FP8: E4M3 Q/DQ on the GEMM/conv inputs."""
    from ...convert.quantize import calibration_feeds, calibration_note, count_quantized, quantize_fp8, quantize_int8
    from ...model.onnx_model import describe, load_onnx

    proto = load_onnx(model)
    feeds = calibration if calibration is not None else calibration_feeds(describe(proto, model).inputs, spec)
    if spec.precision is Precision.INT8:
        quantization = quantize_int8(proto, feeds, for_tensorrt=True)
    else:
        quantization = quantize_fp8(proto, feeds)
    settings = {**quantization.to_json(), "calibration_data": spec.option("calibration_data")}
    meta = {f"{spec.precision.value}_quantization": settings,
            "qdq_model_nodes": count_quantized(quantization.model)}
    return quantization.model.SerializeToString(), meta, [*quantization.notes, calibration_note(spec, feeds)]


def _graph_to_parse(model: Path, spec: BuildSpec, options: BuildOptions, features: TrtFeatures,
                    metadata: dict[str, Any], notes: list[str], calibration: Any = None) -> tuple[bytes | None, Any]:
    """(ONNX bytes the parser reads, FP16 conversion or None): trtprof's FP16 graph (strongly typed
    TensorRT), its QDQ model (int8/fp8), or None for the user's file as is. Adds what was done to
    ``metadata`` and ``notes``."""
    if spec.precision is Precision.FP16 and features.strongly_typed_only:
        onnx_bytes, conv_meta, conv_notes, conversion = _fp16_model_bytes(model, spec, features.product)
        metadata.update(conv_meta)
        notes.extend(conv_notes)
        if options.precision_constraints:
            notes.append(f"--precision-constraints ignored: {features.product} always obeys the graph's types")
        return onnx_bytes, conversion
    if spec.precision in QUANTIZED:
        onnx_bytes, quant_meta, quant_notes = quantized_model_bytes(model, spec, calibration)
        metadata.update(quant_meta)
        notes.extend(quant_notes)
        return onnx_bytes, None
    return None, None


def _parse_failure(errors: list[str], model: Path, spec: BuildSpec, features: TrtFeatures, converted: bool,
                   conversion: Any) -> BuildFailed:
    """The parser's refusal, blaming trtprof's graph (QDQ model, FP16 conversion) when it parsed one."""
    if spec.precision in QUANTIZED:
        return BuildFailed(f"{features.product}'s ONNX parser rejected trtprof's {spec.precision.value.upper()} QDQ "
                           f"model of this file: " + "; ".join(errors), path=model)
    if converted:
        from ...convert.fp16 import refusal_message

        return BuildFailed(refusal_message(conversion, f"{features.product}'s ONNX parser", "; ".join(errors),
                                           fp32_loads=False), path=model)
    return BuildFailed(f"{features.product}'s ONNX parser rejected the model ({len(errors)} error(s)): "
                       + "; ".join(errors), path=model)


def _apply_weak_precision(
    config: "trt.IBuilderConfig",
    network: "trt.INetworkDefinition",
    precision: Precision,
    options: BuildOptions,
    features: TrtFeatures,
    trt: ModuleType,
) -> tuple[list[str], list[str]]:
    """Set precision flags (TensorRT < 11, or FP32/TF32 on any version). Returns (flags, notes)."""
    flags: list[str] = []
    notes: list[str] = []
    tf32 = builder_flag(trt, "TF32")
    if precision is Precision.TF32:
        if tf32 is None:
            raise BadInput(f"{features.version_text} has no TF32 builder flag")
        config.set_flag(tf32)
        flags.append("TF32")
    elif tf32 is not None:
        # TF32 is on by default in TensorRT: an "fp32" engine is only FP32 with it cleared. FP16
        # engines clear it too, so any layer left in FP32 is true FP32 and the comparison is clean.
        config.clear_flag(tf32)
        flags.append("-TF32")
    if precision in QUANTIZED and features.fp16_builder_flag:
        # weakly typed TensorRT (< 11) runs Q/DQ networks only with the type's flag set (explicit quantization)
        for name in ("INT8", "FP8") if precision is Precision.FP8 else ("INT8",):
            flag = builder_flag(trt, name)
            if flag is not None:
                config.set_flag(flag)
                flags.append(name)
    if precision is not Precision.FP16 or not features.fp16_builder_flag:
        if options.layer_precisions and precision is not Precision.FP16:
            raise BadInput("--layer-precisions needs --fp16 (it chooses which layers may run in FP16)")
        return flags, notes
    fp16 = builder_flag(trt, "FP16")
    if fp16 is None:  # pragma: no cover - guarded by features.fp16_builder_flag
        raise BuildFailed("this TensorRT has no FP16 builder flag")
    if options.keep_fp32_ops:
        raise BadInput("--keep-fp32-ops needs TensorRT >= 11 (it edits the ONNX graph's types); on TensorRT < 11 "
                       "name the layers with --layer-precisions NAME:fp32")
    config.set_flag(fp16)
    flags.append("FP16")
    constraints = options.precision_constraints
    if options.layer_precisions and constraints is None:
        constraints = "prefer"
        notes.append("--layer-precisions given without --precision-constraints: using prefer")
    if constraints is not None:
        name = "OBEY_PRECISION_CONSTRAINTS" if constraints == "obey" else "PREFER_PRECISION_CONSTRAINTS"
        flag = builder_flag(trt, name)
        if flag is not None:
            config.set_flag(flag)
            flags.append(name)
    if options.layer_precisions:
        matched = set_layer_precisions(network, options.layer_precisions, trt)
        notes.append(f"layer precisions set on {matched} layer(s)")
    return flags, notes


def set_layer_precisions(
    network: "trt.INetworkDefinition", rules: tuple[tuple[str, str], ...], trt: ModuleType
) -> int:
    """Apply ``rules`` like trtexec: exact names win over "*"; only layers with float outputs.

    Weak typing only (``ILayer.precision`` does not exist on strongly typed libraries). Returns how
    many layers got a precision. An exact name that matches no layer is an error, since a silently
    ignored constraint gives an engine the user did not ask for.
    """
    types = {"fp32": trt.float32, "fp16": trt.float16}
    floats = {trt.float32, trt.float16}
    exact = {name: prec for name, prec in rules if not any(c in name for c in "*?[")}
    patterns = [(name, prec) for name, prec in rules if name not in exact]
    seen: set[str] = set()
    count = 0
    for i in range(network.num_layers):
        layer = network.get_layer(i)
        prec = exact.get(layer.name)
        if prec is not None:
            seen.add(layer.name)
        else:
            prec = next((p for pat, p in patterns if fnmatch.fnmatchcase(layer.name, pat)), None)
        if prec is None:
            continue
        if layer.num_outputs < 1 or layer.get_output(0).dtype not in floats:
            continue
        layer.precision = types[prec]
        count += 1
    missing = sorted(set(exact) - seen)
    if missing:
        raise BadInput(f"--layer-precisions names no layer of this network: {', '.join(missing)}")
    return count


# What TensorRT logs when it drops a timing cache it was given: ``create_timing_cache`` of foreign
# bytes returns an *empty* cache and ``set_timing_cache`` still returns True (seen with tensorrt_rtx
# 1.7.1, whose timing-cache code is TensorRT's), so neither return value says whether it was used.
_TIMING_CACHE_REJECTED = ("failed to deserialize timing cache", "timing cache will not be used")


def _load_timing_cache(
    config: "trt.IBuilderConfig", path: Path, tail: LogTail
) -> tuple["trt.ITimingCache", str]:
    """Reuse the engines dir's timing cache; a cache from another GPU/version is replaced, not fatal.

    Status comes from TensorRT's own answer, not from ``set_timing_cache``'s return value: the stored
    bytes count as "loaded" only when TensorRT logged no rejection and the cache it made from them
    serializes larger than an empty one (a rejected blob becomes an empty cache).
    """
    data = b""
    if path.is_file():
        try:
            data = path.read_bytes()
        except OSError:
            data = b""
    if not data:
        cache = config.create_timing_cache(b"")
        config.set_timing_cache(cache, False)
        return cache, "new"
    empty_size = serialized_size(config.create_timing_cache(b""))
    seen = len(tail.messages)
    cache = config.create_timing_cache(data)
    attached = config.set_timing_cache(cache, False)
    logged = " ".join(list(tail.messages)[seen:]).lower()
    rejected = any(text in logged for text in _TIMING_CACHE_REJECTED)
    if attached and not rejected and serialized_size(cache) > empty_size:
        return cache, "loaded"
    cache = config.create_timing_cache(b"")
    config.set_timing_cache(cache, False)
    return cache, "mismatched, replaced"


def build_engine(model: Path, spec: BuildSpec, out: Path, lib: Library = TENSORRT, *,
                 calibration: Any = None) -> BuildReport:
    """Build the plan for ``spec`` from ``model`` with ``lib`` (TensorRT or TensorRT-RTX), write it to
    ``out``. ``calibration``: int8/fp8 calibration batches (default: the spec's random ones)."""
    trt = require_library(lib)

    model, out = Path(model), Path(out)
    features = TrtFeatures.of(trt)
    options = BuildOptions.from_spec(spec)
    report = BuildReport(metadata={"tensorrt_version": trt.__version__, "library": lib.product,
                                   "precision": spec.precision.value})
    notes, metadata = report.notes, report.metadata  # filled in place by the steps below

    onnx_bytes, conversion = _graph_to_parse(model, spec, options, features, metadata, notes, calibration)

    parsed = parse_network(trt, features, model, spec, onnx_bytes, conversion)
    config, flags, shapes = configure_builder(trt, features, parsed, spec, options, model, report)
    cache_status, network_dtypes = build_plan(trt, features, parsed, config, out, model, notes)

    metadata.update(
        {
            "flags": flags,
            "network_flags": "explicit_batch" if features.explicit_batch_flag else "default",
            "strongly_typed": features.strongly_typed_only,
            "profile": {name: {"min": list(lo), "opt": list(mi), "max": list(hi)} for name, (lo, mi, hi) in shapes.items()},
            "workspace_mb": options.workspace_mb,
            "builder_optimization_level": options.builder_optimization_level,
            "precision_constraints": options.precision_constraints,
            "layer_precisions": [f"{n}:{p}" for n, p in options.layer_precisions],
            "timing_cache": cache_status,
            "network_layers_by_dtype": network_dtypes,
        }
    )
    metadata.update(_plan_summary(out, notes, lib))
    by_precision = metadata.get("layers_by_precision")
    if not by_precision and features.strongly_typed_only:
        # No engine inspector without a GPU (TensorRT-RTX builds anywhere): a strongly typed network
        # runs every layer in the type the parsed network gives it, so its layer types are the answer.
        by_precision = network_dtypes
    effective = effective_precision(spec.precision, by_precision)
    if effective is not None:
        metadata["effective_precision"] = effective
        if effective != spec.precision.value:
            notes.insert(0, f"NOT an {spec.precision.value.upper()} engine: TensorRT chose FP32 kernels for every "
                            f"layer (effective {effective})")
    if parsed.tail:
        metadata["builder_warnings"] = list(parsed.tail.messages)
    return report


@dataclass
class ParsedNetwork:
    """The parsed network with everything that must outlive the build: TensorRT's parser owns the
    weights the network points at, and the builder logs through ``logger`` into ``tail``."""

    tail: LogTail
    logger: Any
    builder: Any
    network: Any
    parser: Any


def parse_network(trt: ModuleType, features: TrtFeatures, model: Path, spec: BuildSpec, onnx_bytes: bytes | None,
                  conversion: Any) -> ParsedNetwork:
    """The ONNX model (or trtprof's FP16 conversion / QDQ model of it, ``onnx_bytes``) parsed into a
    network; a refusal names the parser's errors, and blames trtprof's graph when it parsed one."""
    tail = LogTail()
    logger = make_logger(tail, trt)
    builder = trt.Builder(logger)
    network = builder.create_network(network_flags(trt, features))
    parser = trt.OnnxParser(network, logger)
    with collector_paused():
        parsed = parser.parse(onnx_bytes, str(model)) if onnx_bytes is not None else parser.parse_from_file(str(model))
    if not parsed:
        errors = parser_errors(parser) or [tail.text(5) or "no error reported"]
        del parser, network, builder  # freed now, not by whatever later frees the exception's traceback
        raise _parse_failure(errors, model, spec, features, onnx_bytes is not None, conversion)
    return ParsedNetwork(tail=tail, logger=logger, builder=builder, network=network, parser=parser)


def configure_builder(trt: ModuleType, features: TrtFeatures, parsed: ParsedNetwork, spec: BuildSpec,
                      options: BuildOptions, model: Path, report: BuildReport) -> tuple[Any, list[str], dict[str, Any]]:
    """The builder config: memory and optimisation level, precision flags, compute-capability targets
    (TensorRT-RTX) and the optimization profile. Returns (config, flags, profile shapes); the build's
    ``report`` (its notes and metadata) gets what the precision and target settings say."""
    config = parsed.builder.create_builder_config()
    if options.workspace_mb is not None:
        config.set_memory_pool_limit(trt.MemoryPoolType.WORKSPACE, options.workspace_mb << 20)
    if options.builder_optimization_level is not None:
        config.builder_optimization_level = options.builder_optimization_level
    config.profiling_verbosity = trt.ProfilingVerbosity.DETAILED  # layer names/tactics for `inspect`
    flags, precision_notes = _apply_weak_precision(config, parsed.network, spec.precision, options, features, trt)
    report.notes.extend(precision_notes)
    if features.compute_capability_targets:
        report.metadata.update(apply_compute_capabilities(config, spec, trt))
    elif spec.option("compute_capability") is not None:
        raise BadInput(f"--compute-capability is a TensorRT-RTX option; {features.version_text} builds for this GPU")

    shapes = profile_shapes(network_inputs(parsed.network, trt), spec, model)
    profile = parsed.builder.create_optimization_profile()
    for name, (low, mid, high) in shapes.items():
        profile.set_shape(name, trt.Dims(list(low)), trt.Dims(list(mid)), trt.Dims(list(high)))
    config.add_optimization_profile(profile)
    return config, flags, shapes


def build_plan(trt: ModuleType, features: TrtFeatures, parsed: ParsedNetwork, config: Any, out: Path, model: Path,
               notes: list[str]) -> tuple[str, dict[str, int]]:
    """Build and write the serialized plan to ``out``, with the timing cache beside it (TensorRT).
    Returns (timing-cache status, the network's layers by output dtype, read before the build)."""
    cache_path = timing_cache_path(out)
    timing_cache: Any = None
    cache_status = "not used (TensorRT-RTX: timing-cache calls are no-ops)"
    if features.timing_cache:
        timing_cache, cache_status = _load_timing_cache(config, cache_path, parsed.tail)
    network_dtypes = layers_by_output_dtype(parsed.network, trt)

    with collector_paused():
        plan = parsed.builder.build_serialized_network(parsed.network, config)
    if plan is None:
        raise BuildFailed(
            f"{features.product} could not build the engine: " + (parsed.tail.text() or "the builder logged nothing"),
            path=model,
        )
    atomic_write_bytes(out, bytes(memoryview(plan)))
    if timing_cache is not None:
        try:
            atomic_write_bytes(cache_path, bytes(memoryview(config.get_timing_cache().serialize())))
        except OSError as err:  # the plan is fine; a read-only engines dir only loses the speed-up
            notes.append(f"timing cache not saved ({err})")
    del timing_cache
    return cache_status, network_dtypes


def effective_precision(requested: Precision, by_precision: Mapping[str, int] | None) -> str | None:
    """What an FP16 (INT8, FP8) request really gave: "fp16" when TensorRT ran at least one layer in FP16 (TensorRT
    keeps some layers FP32 in every FP16 engine; that is normal), "fp32" when it ran none. None when
    the inspector could not tell."""
    if requested is not Precision.FP16 and requested not in QUANTIZED:
        return requested.value
    if not by_precision:
        return None
    return requested.value if by_precision.get(requested.value, 0) > 0 else "fp32"


def layers_by_output_dtype(network: "trt.INetworkDefinition", trt: ModuleType) -> dict[str, int]:
    """Layers of the parsed network per output type ("fp16", "fp32", "int64", …), compute layers only.

    Constants, shape arithmetic and casts are left out for the same reason ``count_precision`` leaves
    them out of the ONNX census: they say nothing about the arithmetic.
    """
    from collections import Counter

    skip = {name for name in ("CONSTANT", "SHAPE", "CAST", "IDENTITY") if hasattr(trt.LayerType, name)}
    names = {trt.DataType.FLOAT: "fp32", trt.DataType.HALF: "fp16"}
    counts: Counter[str] = Counter()
    for i in range(network.num_layers):
        layer = network.get_layer(i)
        if getattr(layer.type, "name", str(layer.type)) in skip or layer.num_outputs < 1:
            continue
        dtype = layer.get_output(0).dtype
        counts[names.get(dtype, getattr(dtype, "name", str(dtype)).lower())] += 1
    return dict(sorted(counts.items()))


def _plan_summary(plan_path: Path, notes: list[str], lib: Library) -> dict[str, Any]:
    """Layer counts per precision from the engine inspector (best effort: the plan is already good).

    Deserializing (and so inspecting) needs a GPU; TensorRT-RTX builds without one, and then the counts
    come from the parsed network instead (see ``build_engine``).
    """
    from ...errors import TrtprofError
    from . import device as _device
    from .inspect import inspect_plan

    if _device.device_count()[0] < 1:
        return {}
    try:
        inspection = inspect_plan(plan_path.read_bytes(), lib)
    except TrtprofError as err:
        notes.append(f"engine inspector unavailable: {err}")
        return {}
    return {
        "num_layers": len(inspection.layers),
        "layers_by_precision": inspection.counts_by_precision(),
        "reformat_layers": len(inspection.reformat_layers()),
    }
