"""ONNX Runtime backend on the CPU: the embedded default (its CUDA provider is ``onnxruntime-cuda``).

fp32 is the model itself; fp16 is the graph converted to FP16 types with float32 IO kept
(``trtprof.convert.fp16``). ORT's CPU provider has no FP16 kernel for Conv, MatMul, Gemm, Relu,
Add, pooling, Softmax, ...: it does not fail, it inserts casts and runs those nodes in FP32. The
build asks ORT which nodes ended up in FP32 (from the graph ORT actually runs) and records it, so a
CPU "fp16" number is never mistaken for an FP16 result.
"""
from __future__ import annotations

import importlib.util
import re
from pathlib import Path
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Mapping

from ..errors import BadModel, BuildFailed, MissingDependency, OutputNotWritten, UnsupportedPrecision
from ..spec import BuildSpec, Precision, TensorSpec
from ..convert.ort import import_ort, ort_cause  # noqa: F401  (re-exported: their home is convert.ort)
from ..util.thirdparty import third_party_warnings
from .base import Availability, BackendBase, BuildReport, Capabilities, DeviceKind, RunnerBase
from ..system.validity import unasked_fp32

if TYPE_CHECKING:
    import numpy as np

    from ..engines.cache import EngineRecord

CUDA_EP = "CUDAExecutionProvider"
CPU_EP = "CPUExecutionProvider"
# ORT log severity "warning" (ORT's own default): the build's session and every loaded engine log their
# warnings about the model, captured by util.thirdparty (kept in the JSON, not shown)
ORT_WARNING = 2


def cuda_ep_available() -> bool:
    """Whether the installed onnxruntime has the CUDA execution provider (onnxruntime-gpu)."""
    return CUDA_EP in import_ort().get_available_providers()


def provider_list(precision: Precision, device: DeviceKind, cuda_options: Mapping[str, str] | None = None
                  ) -> list[Any]:
    """Providers for a session: the CPU provider alone, or the CUDA provider (its options, TF32 set to
    match the precision: ORT's ``use_tf32``) with the CPU provider for what CUDA has no kernel for."""
    if device == "cpu":
        return [CPU_EP]
    options = {**(cuda_options or {}), "use_tf32": "1" if precision is Precision.TF32 else "0"}
    return [(CUDA_EP, options), CPU_EP]


_NO_KERNEL = re.compile(r"Could not find an implementation for (\S+)\((\d+)\) node with name '([^']*)'")


def _session_error(err: Exception, path: Path) -> Exception:
    text = str(err)
    match = _NO_KERNEL.search(text)
    if match:
        op, opset, node = match.groups()
        return BadModel(f"op {op} (opset {opset}, node {node!r}) is not supported by onnxruntime", path=path)
    return BadModel(f"onnxruntime cannot load the model: {ort_cause(text) or type(err).__name__}", path=path)


def fix_dims(dims: Mapping[str, int] | None) -> Callable[[Any], None] | None:
    """``SessionSettings.configure`` that fixes the named dynamic dims on ORT's SessionOptions
    (``add_free_dimension_override_by_name``, ORT's documented way); None when there are none."""
    fixed = dict(dims or {})
    if not fixed:
        return None

    def configure(options: Any) -> None:
        for name, value in fixed.items():
            options.add_free_dimension_override_by_name(name, int(value))
    return configure


@dataclass(frozen=True)
class SessionSettings:
    """How an ORT session is set up, beyond its provider (``ort_session``'s ``device``/``cuda_options``).

    ``log_severity`` 4, fatal only: ORT's warnings would flood the output, and its errors come back as
    exceptions that trtprof turns into one line; the build's session logs warnings (2) inside
    ``util.thirdparty.third_party_warnings``, which keeps them for the engine's metadata.
    ``threads``: intra-op threads (inter-op 1); ``profile_prefix``: ORT's per-node profile;
    ``optimized_out``: where ORT saves the graph it runs, ``keep_optimizations`` the fully optimized one;
    ``configure(options)`` sets further session options (the CUDA backend's graph and its what-ifs)."""

    threads: int | None = None
    log_severity: int = 4
    profile_prefix: str | None = None
    optimized_out: Path | None = None
    keep_optimizations: bool = False
    configure: Callable[[Any], None] | None = None


def ort_session(model: bytes | str | Path, precision: Precision, *, path: Path,
                settings: SessionSettings = SessionSettings(), device: DeviceKind = "cpu",
                cuda_options: Mapping[str, str] | None = None) -> Any:
    """An ORT inference session for ``model`` set up as ``settings`` say; ``device``/``cuda_options``:
    the provider (``provider_list``). A refusal is ``BadModel`` naming ``path``."""
    threads, profile_prefix, optimized_out = settings.threads, settings.profile_prefix, settings.optimized_out
    keep_optimizations, configure = settings.keep_optimizations, settings.configure
    ort = import_ort()
    options = ort.SessionOptions()
    options.log_severity_level = settings.log_severity
    if threads is not None:
        # intra-op: the threads one operator uses; inter-op 1 runs nodes one after another, so the
        # total is what the user asked for (ORT's default is one thread per core, often noisy).
        options.intra_op_num_threads = threads
        options.inter_op_num_threads = 1
    if profile_prefix is not None:  # trtprof profile: per-node times (a separate session, not the timed one)
        options.enable_profiling = True
        options.profile_file_prefix = profile_prefix
    if optimized_out is not None:
        # Basic level keeps node names; ORT's precision fallback (InsertCastTransformer) runs at
        # every level, so the saved graph shows which nodes really run in FP32.
        # keep_optimizations: save the graph that really runs (trtprof profile maps its fused nodes back)
        if precision is Precision.INT8 and not keep_optimizations:
            # the QDQ → QLinearConv/QGemm/MatMulInteger fusion runs at the extended level: the graph
            # saved there is the one whose integer kernels run (ALL only adds layout transforms)
            options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED
        elif not keep_optimizations:
            options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
        options.optimized_model_filepath = str(optimized_out)
    if configure is not None:
        configure(options)
    providers = provider_list(precision, device, cuda_options)
    source = str(model) if isinstance(model, Path) else model
    try:
        return ort.InferenceSession(source, options, providers=providers)
    except Exception as err:  # onnxruntime raises its own Fail/NotImplemented/InvalidGraph types
        raise _session_error(err, path) from err


def precision_census(model_bytes: bytes, precision: Precision, path: Path,
                     log_severity: int = 4, device: DeviceKind = "cpu") -> dict[str, dict[str, int]]:
    """Per op type, nodes that run in FP16 vs FP32 (int8: integer kernels vs FP32 vs Q/DQ
    conversions) in the graph ORT actually executes."""
    import onnx

    from ..convert.fp16 import count_precision
    from ..convert.quantize import count_quantized
    from ..util.scratch import temp_dir

    with temp_dir("ort") as tmp:
        out = tmp / "executed.onnx"
        try:
            ort_session(model_bytes, precision, path=path, device=device,
                        settings=SessionSettings(log_severity=log_severity, optimized_out=out))
        except BadModel as err:
            if not _loads_without_writing(model_bytes, precision, path, device):
                raise
            # ORT says "Protobuf serialization failed" when its file write fails (full disk, ulimit -f):
            # the model loads, so the temp dir is to blame, not the model (issue 21)
            ort_says = err.message.split(": ", 1)[-1].rstrip(".")
            raise OutputNotWritten(f"cannot write onnxruntime's executed graph ({ort_says}: {_write_limit(tmp)})",
                                   path=out) from err
        executed = onnx.load(str(out))
    return count_quantized(executed) if precision is Precision.INT8 else count_precision(executed)


def _write_limit(folder: Path) -> str:
    """What most likely stopped a write in ``folder``: the file size limit or the free space."""
    import resource
    import shutil

    soft, _ = resource.getrlimit(resource.RLIMIT_FSIZE)
    if soft != resource.RLIM_INFINITY:
        return f"File too large: the file size limit (ulimit -f) is {soft} bytes"
    free = shutil.disk_usage(folder).free
    return f"No space left on device? {free} bytes free in {folder}; set TMPDIR to a folder with room"


def _loads_without_writing(model_bytes: bytes, precision: Precision, path: Path, device: DeviceKind) -> bool:
    try:
        ort_session(model_bytes, precision, path=path, device=device)
    except BadModel:
        return False
    return True


def fp16_census_notes(census: Mapping[str, Mapping[str, int]], metadata: dict[str, Any], proto: Any, keep: Any,
                      eff: str) -> list[str]:
    """An fp16 build's census in its ``metadata`` (nodes per precision, what the keep-list ``keep`` kept FP32 per op
    type: ``kept_fp32``) and the note that goes first: FP32 nodes by request, or FP32 behind inserted casts."""
    n32 = sum(census["fp32"].values())
    n16 = sum(census["fp16"].values())
    metadata["fp16_nodes"], metadata["fp32_fallback_nodes"] = n16, n32
    kept = kept_op_counts(proto, keep) if keep else {}
    if kept:  # what the keep-list asked to stay FP32, per op type: FP32 by request, not a fallback
        metadata["kept_fp32"] = kept
    unasked = unasked_fp32(census["fp32"], kept)
    if n32 and not unasked:
        return [f"fp16 with {n32} of {n16 + n32} compute nodes in FP32, as its keep-list asks "
                f"({keep.options_text()}); effective precision {eff}"]
    if not n32:
        return []
    ops = ", ".join(f"{op}×{n}" for op, n in sorted(census["fp32"].items(), key=lambda kv: -kv[1]))
    return [f"NOT an FP16 result: {n32} of {n16 + n32} compute nodes have no FP16 kernel on "
            f"{metadata['provider']} and run in FP32 behind inserted casts ({ops}); effective precision {eff}"]


def kept_op_counts(proto: Any, keep: Any) -> dict[str, int]:
    """Per op type, the nodes of ``proto`` a keep-list (``convert.keeplist.KeepFp32``) keeps in FP32: named, or of a
    kept op type; compared with the census' FP32 nodes per op type, what ran FP32 by request."""
    counts: dict[str, int] = {}
    for node in proto.graph.node:
        if node.name in keep.nodes or node.op_type in keep.ops:
            counts[node.op_type] = counts.get(node.op_type, 0) + 1
    return counts


def effective_precision(requested: Precision, census: Mapping[str, Mapping[str, int]]) -> str:
    if requested is Precision.INT8:
        from ..convert.quantize import effective_int8

        return effective_int8(census)
    n16 = sum(census.get("fp16", {}).values())
    n32 = sum(census.get("fp32", {}).values())
    if requested is not Precision.FP16:
        return requested.value
    if n16 == 0:
        return "fp32+casts"
    if n32 == 0:
        return "fp16"
    return "mixed"


def _blame_conversion(conversion: Any, err: BadModel, original: Any, path: Path, device: DeviceKind) -> None:
    """Raise BuildFailed naming trtprof's FP16 conversion when ORT refuses the converted graph but
    loads the FP32 model; return (so the caller re-raises ``err``) when the model itself is refused."""
    from ..convert.fp16 import refusal_message

    try:
        ort_session(original.SerializeToString(), Precision.FP32, path=path, device=device)
    except BadModel:
        return
    raise BuildFailed(refusal_message(conversion, "onnxruntime", err.message), path=path) from err


def quantize_for_ort(model: Path, proto: Any, spec: BuildSpec, calibration: Any = None) -> Any:
    """The INT8 QDQ model ORT runs: U8S8 (uint8 asymmetric activations, int8 per-channel weights),
    the form its x86 integer kernels are written for, calibrated on ``calibration`` (default: the
    random batches the spec describes)."""
    from ..convert.quantize import calibration_feeds, calibration_note, quantize_int8
    from ..model.onnx_model import inspect_model

    feeds = calibration if calibration is not None else calibration_feeds(inspect_model(model).inputs, spec)
    result = quantize_int8(proto, feeds, for_tensorrt=False)
    return type(result)(model=result.model, notes=(*result.notes, calibration_note(spec, feeds)),
                        settings={**result.settings, "calibration_data": spec.option("calibration_data")})


def int8_census_notes(census: Mapping[str, Mapping[str, int]], effective: str, provider: str) -> list[str]:
    """One line saying which compute nodes got integer kernels and which stayed FP32 between Q/DQ."""
    def ops(bucket: str) -> str:
        items = sorted(census.get(bucket, {}).items(), key=lambda kv: -kv[1])
        return ", ".join(f"{op}×{n}" for op, n in items) or "none"

    n8, n32 = sum(census.get("int8", {}).values()), sum(census.get("fp32", {}).values())
    head = "NOT an INT8 result: " if effective == "fp32+qdq" else ""
    return [f"{head}{n8} of {n8 + n32} compute nodes run INT8 kernels on {provider} ({ops('int8')}); "
            f"FP32 between Q/DQ: {ops('fp32')}; effective precision {effective}"]


class OnnxRuntimeRunner(RunnerBase):
    device = "cpu"  # host-in/host-out session.run, timed with the host clock (also on CUDA EP)

    def __init__(self, session, inputs: tuple[TensorSpec, ...], outputs: tuple[TensorSpec, ...]) -> None:
        self._session = session
        self.inputs = inputs
        self.outputs = outputs
        self._output_names = [o.name for o in outputs]

    @property
    def session(self):
        """The underlying ``onnxruntime.InferenceSession`` (benchmarks compare against it bare)."""
        return self._session

    def infer(self, feeds: Mapping[str, "np.ndarray"]) -> dict[str, "np.ndarray"]:
        # no defensive copy of ``feeds``: this call is inside the host timing loop's timed region
        values = self._session.run(self._output_names, feeds if isinstance(feeds, dict) else dict(feeds))
        return dict(zip(self._output_names, values))

    def close(self) -> None:
        self._session = None


class OnnxRuntimeBackend(BackendBase):
    """ONNX Runtime's CPU execution provider, timed around ``session.run`` with the host clock."""

    name = "onnxruntime"
    artifact_suffix = ".onnx"
    device: DeviceKind = "cpu"
    provider = CPU_EP
    capabilities = Capabilities(
        device="cpu", batch_independent=True, layer_profiler="ort-session", timeline="ort-session",
        host_threads=True, session_warnings=True, ort_contrib_ops=True,
        fp16_fallback_cause="ONNX Runtime's CPU provider has no FP16 kernels for Conv/MatMul/Gemm and inserts "
                            "casts to FP32")

    def available(self) -> Availability:
        if importlib.util.find_spec("onnxruntime") is None:
            return Availability(False, "onnxruntime is not installed: pip install onnxruntime (or onnxruntime-gpu)")
        return Availability(True)

    def check_precision(self, precision: Precision) -> None:
        if precision is Precision.FP8:
            raise UnsupportedPrecision(
                "fp8 is not available on onnxruntime (no FP8 kernels in its CPU/CUDA providers); "
                "use --backend tensorrt-rtx or tensorrt (compute capability 8.9+), or torch for an MLP")
        if precision is Precision.BF16:
            # measured (onnxruntime 1.32): a BF16 MatMul/Add/Relu fails "Could not find an implementation",
            # a BF16 Conv is an invalid graph; unlike FP16, ORT inserts no casts to FP32 for BF16
            raise UnsupportedPrecision(
                "bf16 is not available on onnxruntime here: its CPU provider has no BF16 kernel for MatMul, Add, "
                "Relu, Conv and, unlike fp16, does not fall back to FP32 through casts; use --backend torch (GPU)")
        if precision is Precision.TF32 and self.device == "cpu":
            raise UnsupportedPrecision(
                "tf32 is not applicable on the CPU (TF32 is an NVIDIA tensor-core mode); "
                "use --fp32/--fp16 here, or a GPU backend"
            )

    def environment(self) -> dict[str, Any]:
        from ..system.environment import cpu_name

        ort = import_ort()
        env: dict[str, Any] = {"backend": self.name, "onnxruntime": ort.__version__, "provider": self.provider}
        if self.device == "cuda":
            from ..system.nvml import describe_gpus

            gpus = describe_gpus()
            env["device"] = gpus[0].get("name", "cuda") if gpus else "cuda"
        else:
            env["device"] = cpu_name()
        return env

    def build(self, model: Path, spec: BuildSpec, out: Path, *, calibration: Any = None) -> BuildReport:
        """``calibration``: int8 calibration batches (build_engines makes them from --inputs or random)."""
        from ..model.onnx_model import load_onnx

        proto = load_onnx(model)
        notes: list[str] = []
        metadata: dict[str, Any] = {}
        conversion, keep = None, None
        if spec.precision is Precision.FP16:
            from ..convert.fp16 import convert_fp16
            from ..convert.keeplist import KeepFp32

            keep = KeepFp32.from_spec(spec, backend=self.name)
            conversion = convert_fp16(proto, keep_fp32_ops=keep.ops, keep_fp32_nodes=keep.nodes)
            notes += list(conversion.notes)
            metadata["fp16_weights"] = conversion.to_json()
            data = conversion.model.SerializeToString()
        elif spec.precision is Precision.INT8:
            quantization = quantize_for_ort(model, proto, spec, calibration)
            notes += list(quantization.notes)
            metadata["int8_quantization"] = quantization.to_json()
            data = quantization.model.SerializeToString()
        else:
            data = proto.SerializeToString()
        try:
            with third_party_warnings() as caught:  # ORT's warnings about this model, for the metadata (issue 34)
                census = precision_census(data, spec.precision, model, log_severity=ORT_WARNING, device=self.device)
        except BadModel as err:
            if conversion is not None:
                _blame_conversion(conversion, err, proto, model, self.device)
            raise
        except OutputNotWritten:
            raise  # the temp dir, not the model
        except Exception as err:  # census is diagnostics; a failure there must not hide the model
            raise BuildFailed(f"onnxruntime could not analyse the built graph: {err}", path=model) from err
        eff = effective_precision(spec.precision, census)
        metadata.update({
            "provider": self.provider,
            "device": self.device,
            "effective_precision": eff,
            "node_precision": census,
            "tf32": spec.precision is Precision.TF32,
        })
        if spec.precision is Precision.FP16:
            notes[:0] = fp16_census_notes(census, metadata, proto, keep, eff)
        if spec.precision is Precision.INT8:
            notes[:0] = int8_census_notes(census, eff, metadata["provider"])
        if caught:
            metadata["warnings"] = list(caught)
        out.write_bytes(data)
        return BuildReport(metadata=metadata, notes=notes)

    def prime_runtime(self, threads: int | None = None) -> bool:
        """Import ONNX Runtime and run a one-node session once, so that the runtime's own start-up
        (its libraries, environment, default allocator: ~30 MiB) is not counted as the memory of the
        first engine a command loads (``bench`` records it apart: ``runtime_startup_bytes``)."""
        import numpy as np
        from onnx import TensorProto, helper

        x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1])
        y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1])
        graph = helper.make_graph([helper.make_node("Identity", ["x"], ["y"])], "prime", [x], [y])
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
        model.ir_version = min(model.ir_version, 8)
        session = ort_session(model.SerializeToString(), Precision.FP32, path=Path("<runtime start-up>"),
                              settings=SessionSettings(threads=threads), device=self.device)
        session.run(None, {"x": np.zeros(1, np.float32)})
        del session
        return True

    def load(self, artifact: Path, record: "EngineRecord", *, threads: int | None = None,
             log_warnings: bool = False) -> OnnxRuntimeRunner:
        """``log_warnings``: the session logs ORT's warnings about this engine, at load and at every run
        (as a default ORT session does), for a caller that captures them (``measure.bench.load_runner``,
        issue 34); otherwise fatal errors only."""
        session = ort_session(Path(artifact), record.spec.precision, path=Path(artifact),
                              settings=SessionSettings(threads=threads,
                                                       log_severity=ORT_WARNING if log_warnings else 4))
        return OnnxRuntimeRunner(session, record.inputs, record.outputs)
