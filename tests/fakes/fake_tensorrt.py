"""FAKE ``tensorrt`` / ``tensorrt_rtx`` module for contract tests: records every call, builds nothing,
runs nothing.

This is not TensorRT and says nothing about TensorRT's numbers. It mirrors the *surface* trtprof uses
(names, argument shapes, return conventions such as None on failure) for TensorRT 8.6, 10.x and 11.x,
and, with ``flavour="rtx"``, TensorRT-RTX 1.x, so tests can check which calls the backend makes, with
which arguments, in which order, and how it handles each failure. It reads the real ONNX file it is
given (with the onnx package) so network inputs, layers and FP16 types come from the model, not from
the test.

It cannot drift silently: tests/backends/test_tensorrt_fake_surface.py checks every public class, method,
property and enum member of this fake against the real importable module of the same flavour (in CI:
tensorrt_rtx 1.7.1) and runs the same refusals against both. Where the real library was seen to
behave in a way the old fake did not, the fake now does the same (see the notes in the code: "real:").

Use ``make_fake_tensorrt(version)`` and put the result in ``sys.modules["tensorrt"]``, or
``make_fake_tensorrt("1.7.1.116", flavour="rtx")`` in ``sys.modules["tensorrt_rtx"]``.
"""
from __future__ import annotations

import enum
import importlib.machinery
import json
import types
from dataclasses import dataclass, field
from typing import Any

import numpy as np

PLAN_MAGIC = b"FAKE-TRT-PLAN\n"
FAKE_TIMING_CACHE = b"FAKE-TIMING-CACHE with entries"
FAKE_EMPTY_TIMING_CACHE = b"FAKE-TC"  # what an empty cache serializes to (real: a 172-byte header)
FAKE_RUNTIME_CACHE = b"FAKE-RTX-RUNTIME-CACHE"
FAKE_DEVICE_MEMORY_PER_LAYER = 4096  # what the fake engine's device_memory_size_v2 reports per layer
# Names the fake module carries that are not TensorRT's (the surface test skips them).
FAKE_ONLY_NAMES = frozenset({"calls", "behaviour", "state", "IS_FAKE", "FLAVOUR"})


@dataclass
class Behaviour:
    """Knobs a test flips to drive error paths."""

    parse_errors: list[tuple[str, str, int, str]] = field(default_factory=list)  # (node, op, index, desc)
    build_returns_none: bool = False
    build_error_log: str = "fake builder: no implementation satisfies the constraints"
    deserialize_returns_none: bool = False
    layer_ms: float = 0.25  # what the fake profiler reports per layer (fake data, not a measurement)
    # rtx: the GPU the fake runtime "sees" ("8.6"), None for no GPU/driver (real: deserialize → None)
    gpu_compute_capability: str | None = "8.6"


def make_fake_tensorrt(version: str = "10.13.0.35", flavour: str = "enterprise") -> types.ModuleType:
    if flavour not in ("enterprise", "rtx"):
        raise ValueError(f"flavour must be enterprise or rtx, not {flavour!r}")
    rtx = flavour == "rtx"
    major = int(version.split(".")[0])
    strongly_typed_only = rtx or major >= 11
    calls: list[tuple[str, tuple[Any, ...]]] = []
    behaviour = Behaviour()
    state: dict[str, Any] = {}

    def rec(name: str, *args: Any) -> None:
        calls.append((name, args))

    # ---- enums ------------------------------------------------------------------------------
    class Severity(enum.IntEnum):
        INTERNAL_ERROR = 0
        ERROR = 1
        WARNING = 2
        INFO = 3
        VERBOSE = 4

    class DataType(enum.IntEnum):
        FLOAT = 0
        HALF = 1
        INT8 = 2
        INT32 = 3
        BOOL = 4
        INT64 = 8

    flag_names = ["TF32", "DEBUG", "REFIT"]
    if not strongly_typed_only:
        flag_names += ["FP16", "INT8", "OBEY_PRECISION_CONSTRAINTS", "PREFER_PRECISION_CONSTRAINTS"]
    BuilderFlag = enum.IntEnum("BuilderFlag", flag_names)  # type: ignore[misc]
    # real (tensorrt_rtx 1.7.1): STRONGLY_TYPED is the only member, and create_network refuses other bits
    net_flags = ["STRONGLY_TYPED"] if rtx else ["EXPLICIT_BATCH"] + (["STRONGLY_TYPED"] if major >= 10 else [])
    NetworkDefinitionCreationFlag = enum.IntEnum(  # type: ignore[misc]
        "NetworkDefinitionCreationFlag", {n: i for i, n in enumerate(net_flags)}
    )
    MemoryPoolType = enum.IntEnum("MemoryPoolType", ["WORKSPACE", "DLA_MANAGED_SRAM"])  # type: ignore[misc]
    ProfilingVerbosity = enum.IntEnum("ProfilingVerbosity", ["LAYER_NAMES_ONLY", "NONE", "DETAILED"])  # type: ignore[misc]
    # real: ILayer.type is a LayerType and ParserError.code() an ErrorCode (enums, not strings/ints)
    LayerType = enum.IntEnum("LayerType", [  # type: ignore[misc]
        "CONVOLUTION", "ACTIVATION", "POOLING", "ELEMENTWISE", "REDUCE", "SHUFFLE", "MATRIX_MULTIPLY", "CONSTANT",
        "SHAPE", "CAST", "IDENTITY", "GATHER", "CONCATENATION", "SOFTMAX", "UNARY"])
    _op_layer = {"Conv": "CONVOLUTION", "Relu": "ACTIVATION", "MaxPool": "POOLING", "AveragePool": "POOLING",
                 "GlobalAveragePool": "REDUCE", "ReduceSum": "REDUCE", "ReduceMax": "REDUCE", "Flatten": "SHUFFLE",
                 "Reshape": "SHUFFLE", "Gemm": "MATRIX_MULTIPLY", "MatMul": "MATRIX_MULTIPLY", "Constant": "CONSTANT",
                 "Shape": "SHAPE", "Cast": "CAST", "Identity": "IDENTITY", "Gather": "GATHER", "Concat": "CONCATENATION",
                 "Softmax": "SOFTMAX"}
    ErrorCode = enum.IntEnum("ErrorCode", ["SUCCESS", "INTERNAL_ERROR", "INVALID_NODE", "UNSUPPORTED_NODE"])  # type: ignore[misc]
    LayerInformationFormat = enum.IntEnum("LayerInformationFormat", ["ONELINE", "JSON"])  # type: ignore[misc]
    TensorIOMode = enum.IntEnum("TensorIOMode", ["NONE", "INPUT", "OUTPUT"])  # type: ignore[misc]

    ComputeCapability = enum.IntEnum("ComputeCapability", {  # type: ignore[misc]
        "NONE": 0, "CURRENT": 1, "SM75": 75, "SM80": 80, "SM86": 86, "SM89": 89, "SM120": 120, "SM121": 121})
    EngineValidity = enum.IntEnum("EngineValidity", {"VALID": 0, "SUBOPTIMAL": 1, "INVALID": 2})  # type: ignore[misc]
    EngineInvalidityDiagnostics = enum.IntFlag("EngineInvalidityDiagnostics", {  # type: ignore[misc]
        "VERSION_MISMATCH": 1, "UNSUPPORTED_CC": 2, "MALFORMED_ENGINE": 32, "CUDA_ERROR": 64})
    DynamicShapesKernelSpecializationStrategy = enum.IntEnum(  # type: ignore[misc]
        "DynamicShapesKernelSpecializationStrategy", {"LAZY": 0, "EAGER": 1, "NONE": 2})
    # what a default (no targets) TensorRT-RTX 1.7 plan runs on, per the real library's own message
    default_targets = ["SM80", "SM86", "SM89", "SM120", "SM121"]

    np_of = {DataType.FLOAT: np.float32, DataType.HALF: np.float16, DataType.INT8: np.int8,
             DataType.INT32: np.int32, DataType.BOOL: np.bool_, DataType.INT64: np.int64}

    def nptype(dtype: Any) -> Any:
        try:
            return np_of[DataType(dtype)]
        except (KeyError, ValueError) as err:
            raise TypeError(f"fake: no numpy type for {dtype!r}") from err

    def onnx_to_dtype(elem: int) -> DataType:
        import onnx

        return {onnx.TensorProto.FLOAT: DataType.FLOAT, onnx.TensorProto.FLOAT16: DataType.HALF,
                onnx.TensorProto.INT64: DataType.INT64, onnx.TensorProto.INT32: DataType.INT32,
                onnx.TensorProto.BOOL: DataType.BOOL}.get(elem, DataType.FLOAT)

    class Dims(tuple):
        pass

    # ---- logger / profiler bases ------------------------------------------------------------
    class ILogger:
        def __init__(self) -> None:
            rec("ILogger.__init__")

        def log(self, severity: Any, msg: str) -> None:  # overridden by subclasses
            pass

    ILogger.Severity = Severity  # type: ignore[attr-defined]
    for member in Severity:
        setattr(ILogger, member.name, member)

    class Logger(ILogger):
        def __init__(self, min_severity: Any = Severity.WARNING) -> None:
            super().__init__()

    class IProfiler:
        def __init__(self) -> None:
            rec("IProfiler.__init__")

    # ---- network, parser --------------------------------------------------------------------
    class ITensor:
        def __init__(self, name: str, shape: tuple[int, ...], dtype: DataType) -> None:
            self.name, self.shape, self.dtype = name, Dims(shape), dtype

    class ILayer:
        __slots__ = ("name", "type", "_op", "_outputs", "_precision")

        def __init__(self, name: str, op: str, outputs: list[ITensor]) -> None:
            self.name, self._op, self._outputs = name, op, outputs
            self.type = getattr(LayerType, _op_layer.get(op, "ELEMENTWISE"))
            self._precision: Any = None

        @property
        def num_outputs(self) -> int:
            return len(self._outputs)

        def get_output(self, i: int) -> ITensor:
            return self._outputs[i]

    if not strongly_typed_only:  # real: TensorRT 11 and TensorRT-RTX have no ILayer.precision at all
        def _get_precision(self: Any) -> Any:
            return self._precision

        def _set_precision(self: Any, value: Any) -> None:
            rec("ILayer.precision", self.name, value)
            self._precision = value

        ILayer.precision = property(_get_precision, _set_precision)  # type: ignore[attr-defined]

    class INetworkDefinition:
        def __init__(self, flags: int) -> None:
            self.flags = flags
            self.inputs: list[ITensor] = []
            self.outputs: list[ITensor] = []
            self.layers: list[ILayer] = []

        @property
        def num_inputs(self) -> int:
            return len(self.inputs)

        def get_input(self, i: int) -> ITensor:
            return self.inputs[i]

        @property
        def num_layers(self) -> int:
            return len(self.layers)

        def get_layer(self, i: int) -> ILayer:
            return self.layers[i]

    class ParserError:
        def __init__(self, node: str, op: str, index: int, desc: str) -> None:
            self._node, self._op, self._index, self._desc = node, op, index, desc

        def desc(self) -> str:
            return self._desc

        def node(self) -> int:
            return self._index

        def code(self) -> Any:
            return ErrorCode.UNSUPPORTED_NODE

    if rtx or major >= 10:  # node_name/node_operator arrived with TensorRT 10 (TensorRT-RTX has them)
        ParserError.node_name = lambda self: self._node  # type: ignore[attr-defined]
        ParserError.node_operator = lambda self: self._op  # type: ignore[attr-defined]

    class OnnxParser:
        def __init__(self, network: INetworkDefinition, logger: ILogger) -> None:
            rec("OnnxParser", network, logger)
            self.network = network
            self._errors: list[ParserError] = []

        def _load(self, data: bytes) -> bool:
            import onnx

            model = onnx.load_from_string(data)
            state["parsed_model"] = model
            if behaviour.parse_errors:
                self._errors = [ParserError(*e) for e in behaviour.parse_errors]
                return False
            init = {i.name for i in model.graph.initializer}
            for vi in model.graph.input:
                if vi.name in init:
                    continue
                dims = tuple(d.dim_value if d.HasField("dim_value") else -1 for d in vi.type.tensor_type.shape.dim)
                self.network.inputs.append(ITensor(vi.name, dims, onnx_to_dtype(vi.type.tensor_type.elem_type)))
            for vi in model.graph.output:
                dims = tuple(d.dim_value if d.HasField("dim_value") else -1 for d in vi.type.tensor_type.shape.dim)
                self.network.outputs.append(ITensor(vi.name, dims, onnx_to_dtype(vi.type.tensor_type.elem_type)))
            from onnx import shape_inference

            types_ = {vi.name: vi.type.tensor_type.elem_type
                      for vi in [*shape_inference.infer_shapes(model).graph.value_info, *model.graph.output]}
            for node in model.graph.node:
                outs = [ITensor(o, (), onnx_to_dtype(types_.get(o, onnx.TensorProto.FLOAT))) for o in node.output]
                self.network.layers.append(ILayer(node.name or node.op_type, node.op_type, outs))
            return True

        def parse(self, model: bytes, path: str | None = None) -> bool:
            rec("OnnxParser.parse", len(model), path)
            return self._load(bytes(model))

        def parse_from_file(self, model: str) -> bool:
            rec("OnnxParser.parse_from_file", model)
            with open(model, "rb") as fh:
                return self._load(fh.read())

        @property
        def num_errors(self) -> int:
            return len(self._errors)

        def get_error(self, index: int) -> ParserError:
            return self._errors[index]

    # ---- builder ----------------------------------------------------------------------------
    class ITimingCache:
        def __init__(self, data: bytes) -> None:
            self.data = data

        def serialize(self) -> bytes:
            rec("ITimingCache.serialize")
            return self.data or FAKE_EMPTY_TIMING_CACHE

    class IOptimizationProfile:
        def __init__(self) -> None:
            self.shapes: dict[str, tuple[Dims, Dims, Dims]] = {}

        def set_shape(self, input: str, min: Any, opt: Any, max: Any) -> None:
            rec("IOptimizationProfile.set_shape", input, tuple(min), tuple(opt), tuple(max))
            self.shapes[input] = (Dims(min), Dims(opt), Dims(max))

    settable = {"builder_optimization_level", "profiling_verbosity"} | ({"num_compute_capabilities"} if rtx else set())

    class IBuilderConfig:
        def __init__(self, logger: ILogger) -> None:
            object.__setattr__(self, "flags_set", {BuilderFlag.TF32})  # TF32 on by default, like TensorRT
            object.__setattr__(self, "profiles", [])
            object.__setattr__(self, "cache", None)
            object.__setattr__(self, "logger", logger)
            object.__setattr__(self, "targets", [])

        def __setattr__(self, name: str, value: Any) -> None:
            if name not in settable:  # real: pybind objects refuse attributes they do not have
                raise AttributeError(f"'IBuilderConfig' object has no attribute '{name}'")
            rec(f"IBuilderConfig.{name}", value)
            if name == "num_compute_capabilities":  # a read-only property on the class: keep the list
                object.__setattr__(self, "targets", [ComputeCapability.NONE] * int(value))
                return
            object.__setattr__(self, name, value)

        def set_flag(self, flag: Any) -> None:
            rec("IBuilderConfig.set_flag", flag)
            self.flags_set.add(flag)

        def clear_flag(self, flag: Any) -> None:
            rec("IBuilderConfig.clear_flag", flag)
            self.flags_set.discard(flag)

        def get_flag(self, flag: Any) -> bool:
            return flag in self.flags_set

        def set_memory_pool_limit(self, pool: Any, size: int) -> None:
            rec("IBuilderConfig.set_memory_pool_limit", pool, size)

        def add_optimization_profile(self, profile: IOptimizationProfile) -> int:
            rec("IBuilderConfig.add_optimization_profile", profile)
            self.profiles.append(profile)
            return len(self.profiles) - 1

        def create_timing_cache(self, serialized_timing_cache: bytes) -> ITimingCache:
            data = bytes(serialized_timing_cache)
            rec("IBuilderConfig.create_timing_cache", data)
            if data not in (b"", FAKE_TIMING_CACHE, FAKE_EMPTY_TIMING_CACHE):
                # real: foreign bytes give an *empty* cache and a warning, never an error or a False
                self.logger.log(Severity.WARNING, "Failed to deserialize timing cache. Returning an empty timing cache.")
                data = b""
            return ITimingCache(data if data != FAKE_EMPTY_TIMING_CACHE else b"")

        def set_timing_cache(self, cache: ITimingCache, ignore_mismatch: bool) -> bool:
            rec("IBuilderConfig.set_timing_cache", cache.data, ignore_mismatch)
            object.__setattr__(self, "cache", cache)
            return True  # real: True whatever the cache held (tensorrt_rtx 1.7.1)

        def get_timing_cache(self) -> ITimingCache:
            return self.cache

    if rtx:
        def _num_ccs(self: Any) -> int:
            return len(self.targets)

        def set_compute_capability(self: Any, compute_capability: Any, index: int) -> bool:
            rec("IBuilderConfig.set_compute_capability", compute_capability, index)
            # real: False for an index outside num_compute_capabilities and for NONE
            if not 0 <= index < len(self.targets) or compute_capability == ComputeCapability.NONE:
                return False
            self.targets[index] = compute_capability
            return True

        def get_compute_capability(self: Any, index: int) -> Any:
            return self.targets[index]

        IBuilderConfig.set_compute_capability = set_compute_capability  # type: ignore[attr-defined]
        IBuilderConfig.get_compute_capability = get_compute_capability  # type: ignore[attr-defined]
        # a property on the class so reading works; writes go through __setattr__ (recorded)
        IBuilderConfig.num_compute_capabilities = property(_num_ccs)  # type: ignore[attr-defined]

    class Builder:
        def __init__(self, logger: ILogger) -> None:
            rec("Builder", logger)
            self.logger = logger

        def create_network(self, flags: int = 0) -> INetworkDefinition | None:
            rec("Builder.create_network", flags)
            if flags >= 1 << len(NetworkDefinitionCreationFlag):  # real: an error in the log, None back
                self.logger.log(Severity.ERROR, "IBuilder::createNetworkV2: Error Code 3: API Usage Error")
                return None
            return INetworkDefinition(flags)

        def create_builder_config(self) -> IBuilderConfig:
            rec("Builder.create_builder_config")
            return IBuilderConfig(self.logger)

        def create_optimization_profile(self) -> IOptimizationProfile:
            rec("Builder.create_optimization_profile")
            return IOptimizationProfile()

        def build_serialized_network(self, network: INetworkDefinition, config: IBuilderConfig) -> Any:
            rec("Builder.build_serialized_network", network, config)
            if behaviour.build_returns_none:
                self.logger.log(Severity.INFO, "fake builder: starting")  # dropped by a tail logger
                self.logger.log(Severity.ERROR, behaviour.build_error_log)
                return None
            fp16 = getattr(BuilderFlag, "FP16", None) in config.flags_set
            profile = config.profiles[0]
            layers = []
            for layer in network.layers:
                dtype = layer.get_output(0).dtype if layer.num_outputs else DataType.FLOAT
                if fp16 and dtype == DataType.FLOAT and layer._precision != DataType.FLOAT:
                    dtype = DataType.HALF  # weak typing: the fake "chooses" FP16 wherever allowed
                layers.append({"name": layer.name, "type": layer._op, "dtype": int(dtype)})
            if config.cache is not None:
                config.cache.data = FAKE_TIMING_CACHE  # the build "adds entries"
            targets = [t.name for t in getattr(config, "targets", [])]
            plan = {
                "version": version,
                "flavour": flavour,
                "targets": targets,
                "inputs": [{"name": t.name, "dtype": int(t.dtype), "shape": list(t.shape),
                            "profile": [list(d) for d in profile.shapes[t.name]]} for t in network.inputs],
                "outputs": [{"name": t.name, "dtype": int(t.dtype), "shape": list(t.shape)} for t in network.outputs],
                "layers": layers,
            }
            return IHostMemory(PLAN_MAGIC + json.dumps(plan).encode())

    if not rtx and major < 10:  # 8.x still has implicit batch (what compat probes for EXPLICIT_BATCH)
        Builder.max_batch_size = 1  # type: ignore[attr-defined]

    class IHostMemory(bytes):
        """real: build_serialized_network returns IHostMemory (buffer protocol, ``nbytes``), not bytes."""

        @property
        def nbytes(self) -> int:
            return len(self)

    # ---- runtime ----------------------------------------------------------------------------
    dtype_words = {DataType.FLOAT: ("FP32", "Float"), DataType.HALF: ("FP16", "Half"),
                   DataType.INT64: ("Int64", "Int64"), DataType.INT32: ("Int32", "Int32"),
                   DataType.BOOL: ("Bool", "Bool"), DataType.INT8: ("Int8", "Int8")}

    def tensor_entry(name: str, dtype: DataType) -> dict[str, Any]:
        short, long_ = dtype_words[dtype]
        if major >= 11:  # the split fields of TensorRT 11's inspector JSON
            return {"Name": name, "Location": "Device", "Format": "Row major linear", "DataType": long_}
        return {"Name": name, "Location": "Device", "Format/Datatype": f"Row major linear {short} format"}

    class EngineInspector:
        def __init__(self, engine: "ICudaEngine") -> None:
            self.engine = engine
            self.execution_context = None

        def get_engine_information(self, format: Any) -> str:
            rec("EngineInspector.get_engine_information", format, self.execution_context)
            plan = self.engine.plan
            layers = [{"Name": layer["name"], "LayerType": layer["type"],
                       "Inputs": [], "Outputs": [tensor_entry(layer["name"] + "_out", DataType(layer["dtype"]))],
                       "TacticName": f"fake_tactic_{i}", "TacticValue": hex(i)}
                      for i, layer in enumerate(plan["layers"])]
            if any(layer["dtype"] == DataType.HALF for layer in plan["layers"]):
                layers.insert(0, {"Name": "Reformatting CopyNode for Input Tensor 0", "LayerType": "Reformat",
                                  "Inputs": [tensor_entry("in", DataType.FLOAT)],
                                  "Outputs": [tensor_entry("out", DataType.HALF)], "TacticName": "", "TacticValue": "0x0"})
            io = [*plan["inputs"], *plan["outputs"]]
            info: dict[str, Any] = {"Layers": layers}
            if major >= 11:
                info["I/O Tensors"] = [{"Name": t["name"], "IOMode": "Input" if t in plan["inputs"] else "Output",
                                        "DataType": dtype_words[DataType(t["dtype"])][1]} for t in io]
            else:
                info["Bindings"] = [t["name"] for t in io]
            return json.dumps(info)

    class IRuntimeCache:
        """rtx: JIT-compiled kernels; ``deserialize`` validates against the GPU and says so (real docs)."""

        def __init__(self) -> None:
            self.kernels: set[str] = set()

        def serialize(self) -> IHostMemory:
            rec("IRuntimeCache.serialize")
            cc = behaviour.gpu_compute_capability or "none"
            return IHostMemory(FAKE_RUNTIME_CACHE + json.dumps({"cc": cc, "kernels": sorted(self.kernels)}).encode())

        def deserialize(self, blob: Any) -> bool:
            raw = bytes(blob)
            rec("IRuntimeCache.deserialize", len(raw))
            if not raw.startswith(FAKE_RUNTIME_CACHE):
                return False
            data = json.loads(raw[len(FAKE_RUNTIME_CACHE):])
            if data["cc"] != behaviour.gpu_compute_capability:
                return False
            self.kernels = set(data["kernels"])
            return True

        def reset(self) -> bool:
            self.kernels.clear()
            return True

    class IRuntimeConfig:
        def __init__(self) -> None:
            self.dynamic_shapes_kernel_specialization_strategy = DynamicShapesKernelSpecializationStrategy.LAZY
            self._cache: IRuntimeCache | None = None

        def create_runtime_cache(self) -> IRuntimeCache:
            rec("IRuntimeConfig.create_runtime_cache")
            return IRuntimeCache()

        def set_runtime_cache(self, cache: IRuntimeCache) -> bool:
            rec("IRuntimeConfig.set_runtime_cache", cache)
            self._cache = cache
            return True

        def get_runtime_cache(self) -> IRuntimeCache | None:
            return self._cache

    class IExecutionContext:
        def __init__(self, engine: "ICudaEngine", config: Any = None) -> None:
            self.engine = engine
            self.shapes: dict[str, tuple[int, ...]] = {}
            self.addresses: dict[str, int] = {}
            self.profiler: Any = None
            self._config = config
            if rtx:  # "JIT" of the shape-generic kernels at context creation
                self._compile("generic")

        def _compile(self, what: str) -> None:
            cache = self._config.get_runtime_cache() if self._config is not None else None
            if cache is not None:
                kernel = f"{self.engine.plan['layers'][0]['name'] if self.engine.plan['layers'] else 'net'}:{what}"
                if kernel not in cache.kernels:
                    state.setdefault("compiled", []).append(kernel)
                    cache.kernels.add(kernel)

        def set_input_shape(self, name: str, shape: Any) -> bool:
            rec("IExecutionContext.set_input_shape", name, tuple(shape))
            low, _, high = self.engine.get_tensor_profile_shape(name, 0)
            if len(shape) != len(low) or any(not lo <= s <= hi for s, lo, hi in zip(shape, low, high)):
                return False
            self.shapes[name] = tuple(shape)
            return True

        def get_tensor_shape(self, name: str) -> Dims:
            if name in self.shapes:
                return Dims(self.shapes[name])
            spec = self.engine.tensors[name]
            batch = next(iter(self.shapes.values()))[0] if self.shapes else -1
            return Dims(tuple(batch if d < 0 else d for d in spec["shape"]))

        def set_tensor_address(self, name: str, memory: int) -> bool:
            rec("IExecutionContext.set_tensor_address", name, memory)
            self.addresses[name] = memory
            return True

        def execute_async_v3(self, stream_handle: int) -> bool:
            rec("IExecutionContext.execute_async_v3", stream_handle)
            missing = set(self.engine.tensors) - set(self.addresses)
            if missing:
                return False
            if self.profiler is not None:
                for layer in self.engine.plan["layers"]:
                    self.profiler.report_layer_time(layer["name"], behaviour.layer_ms)
            strategy = getattr(self._config, "dynamic_shapes_kernel_specialization_strategy", None)
            if rtx and strategy == DynamicShapesKernelSpecializationStrategy.EAGER:
                self._compile("x".join(f"{n}={s}" for n, s in sorted(self.shapes.items())))
            return True

    class ICudaEngine:
        def __init__(self, plan: dict[str, Any]) -> None:
            self.plan = plan
            self.tensors = {t["name"]: t for t in [*plan["inputs"], *plan["outputs"]]}
            self._inputs = {t["name"] for t in plan["inputs"]}

        @property
        def num_io_tensors(self) -> int:
            return len(self.tensors)

        @property
        def num_layers(self) -> int:
            return len(self.plan["layers"])

        def get_tensor_name(self, index: int) -> str:
            return list(self.tensors)[index]

        def get_tensor_mode(self, name: str) -> Any:
            return TensorIOMode.INPUT if name in self._inputs else TensorIOMode.OUTPUT

        def get_tensor_dtype(self, name: str) -> DataType:
            return DataType(self.tensors[name]["dtype"])

        def get_tensor_shape(self, name: str) -> Dims:
            return Dims(self.tensors[name]["shape"])

        def get_tensor_profile_shape(self, name: str, profile_index: int) -> list[Dims]:
            return [Dims(d) for d in self.tensors[name]["profile"]]

        @property
        def device_memory_size_v2(self) -> int:
            # fake data, not a measurement: 4 KiB of "activations" per layer, so tests can check arithmetic
            rec("ICudaEngine.device_memory_size_v2")
            return FAKE_DEVICE_MEMORY_PER_LAYER * max(1, len(self.plan["layers"]))

        def create_execution_context(self, runtime_config: Any = None) -> IExecutionContext:
            rec("ICudaEngine.create_execution_context", runtime_config)
            return IExecutionContext(self, runtime_config)

        def create_engine_inspector(self) -> EngineInspector:
            return EngineInspector(self)

    if rtx:
        def create_runtime_config(self: Any) -> IRuntimeConfig:
            rec("ICudaEngine.create_runtime_config")
            return IRuntimeConfig()

        ICudaEngine.create_runtime_config = create_runtime_config  # type: ignore[attr-defined]

    def plan_runs_on(plan: dict[str, Any], cc: str) -> bool:
        targets = plan.get("targets") or default_targets
        return f"SM{cc.replace('.', '')}" in targets or float(cc) > 12.0

    class Runtime:
        def __init__(self, logger: ILogger) -> None:
            rec("Runtime", logger)
            self.logger = logger

        def deserialize_cuda_engine(self, data: bytes) -> ICudaEngine | None:
            rec("Runtime.deserialize_cuda_engine", len(data))
            raw = bytes(data)
            if behaviour.deserialize_returns_none or not raw.startswith(PLAN_MAGIC):
                self.logger.log(Severity.ERROR, "fake runtime: engine plan file is not compatible with this version")
                return None
            plan = json.loads(raw[len(PLAN_MAGIC):])
            if plan["version"] != version:
                self.logger.log(Severity.ERROR, "fake runtime: the version tag does not match")
                return None
            if rtx:
                cc = behaviour.gpu_compute_capability
                if cc is None:  # real: no driver → cudaError 35 in the log, None back
                    self.logger.log(Severity.ERROR, "fake runtime: cudaError 35: CUDA driver version is insufficient")
                    return None
                if not plan_runs_on(plan, cc):
                    self.logger.log(Severity.ERROR, f"fake runtime: The engine cannot run on this GPU, which has "
                                                    f"compute capability {cc}")
                    return None
            return ICudaEngine(plan)

    if rtx:
        def get_engine_validity(self: Any, buffer: Any) -> tuple[Any, int]:
            raw = bytes(buffer)
            rec("Runtime.get_engine_validity", len(raw))
            if not raw.startswith(PLAN_MAGIC):
                return EngineValidity.INVALID, int(EngineInvalidityDiagnostics.MALFORMED_ENGINE)
            plan = json.loads(raw[len(PLAN_MAGIC):])
            cc = behaviour.gpu_compute_capability
            if cc is None:  # real without a driver: INVALID with no diagnostic bit (1.7.1)
                return EngineValidity.INVALID, 0
            if plan["version"] != version:
                return EngineValidity.INVALID, int(EngineInvalidityDiagnostics.VERSION_MISMATCH)
            if not plan_runs_on(plan, cc):
                return EngineValidity.INVALID, int(EngineInvalidityDiagnostics.UNSUPPORTED_CC)
            return EngineValidity.VALID, 0

        Runtime.get_engine_validity = get_engine_validity  # type: ignore[attr-defined]

    module_name = "tensorrt_rtx" if rtx else "tensorrt"
    mod = types.ModuleType(module_name, f"FAKE {module_name} for trtprof contract tests (not TensorRT)")
    mod.__spec__ = importlib.machinery.ModuleSpec(module_name, None, origin=__file__)
    mod.__file__ = __file__
    members = dict(
        __version__=version, calls=calls, behaviour=behaviour, state=state, IS_FAKE=True, FLAVOUR=flavour,
        DataType=DataType, BuilderFlag=BuilderFlag, NetworkDefinitionCreationFlag=NetworkDefinitionCreationFlag,
        MemoryPoolType=MemoryPoolType, ProfilingVerbosity=ProfilingVerbosity, LayerType=LayerType, ErrorCode=ErrorCode,
        LayerInformationFormat=LayerInformationFormat, TensorIOMode=TensorIOMode, Dims=Dims,
        ILogger=ILogger, Logger=Logger, IProfiler=IProfiler, Builder=Builder, OnnxParser=OnnxParser,
        ParserError=ParserError, ILayer=ILayer, ITensor=ITensor, INetworkDefinition=INetworkDefinition,
        IBuilderConfig=IBuilderConfig, IOptimizationProfile=IOptimizationProfile, ITimingCache=ITimingCache,
        IHostMemory=IHostMemory, ICudaEngine=ICudaEngine, IExecutionContext=IExecutionContext,
        EngineInspector=EngineInspector,
        Runtime=Runtime, nptype=nptype, float32=DataType.FLOAT, float16=DataType.HALF,
        int32=DataType.INT32, int64=DataType.INT64, int8=DataType.INT8, bool=DataType.BOOL,
    )
    if rtx:
        members.update(ComputeCapability=ComputeCapability, EngineValidity=EngineValidity,
                       EngineInvalidityDiagnostics=EngineInvalidityDiagnostics,
                       DynamicShapesKernelSpecializationStrategy=DynamicShapesKernelSpecializationStrategy,
                       IRuntimeConfig=IRuntimeConfig, IRuntimeCache=IRuntimeCache)
    for name, value in members.items():
        setattr(mod, name, value)
    return mod


def call_names(trt: types.ModuleType) -> list[str]:
    """The recorded call names, in order (arguments dropped)."""
    return [name for name, _ in trt.calls]


def calls_named(trt: types.ModuleType, name: str) -> list[tuple[Any, ...]]:
    return [args for n, args in trt.calls if n == name]
