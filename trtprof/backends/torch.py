"""PyTorch-CUDA backend: the ONNX model rebuilt as a torch module (onnx2torch), run eagerly on the GPU.

Why it exists: "how much faster is my engine than plain PyTorch?" is the question users ask most,
and their own timing loops are the usual reason their numbers disagree with trtexec. Here PyTorch is
timed by the same loop as every other GPU backend (``trtprof.measure.timing.time_device``). The ONNX →
torch conversion itself (onnx2torch, its graph passes, ``follow_precision``) is ``backends.torch_convert``.

The artifact (``torch_artifact``) holds the module converted once at build (onnx2torch, then the
engine's precision: fp16 with every float tensor of the module in half, ``follow_precision``: weights,
constants and Cast targets) and captured with ``torch.export``, plus the pre-passed ONNX graph it came
from; a load reads the program without converting (or converts the graph when export was not
possible, said at build). fp32 runs with TF32 switched off (PyTorch's cuDNN default is TF32 on, which
is not FP32), tf32 with it on; fp16's float IO is cast on the device inside ``enqueue``. The build runs
the converted module once (``check_and_export``), so a module that converts but cannot run fails there, in
one line.

The runner (``TorchRunner``, re-exported here) lives in ``backends.torch_runner``, whose docstring says
how it runs: cuDNN autotuning on unless ``--no-autotune``, the profiler's device buffers wrapped as
tensors without a copy.

Fixed shapes (issue 43): ``torch.onnx.export`` writes a transformer's reshapes as arithmetic on the
input's shape, which onnx2torch evaluates on the host at every call — ``torch.export`` cannot capture
that module, nor can a CUDA graph (host-to-device copies), and the timing measures the host. When the
graph has such arithmetic on a dynamic input (``convert.fixed_shapes.has_shape_arithmetic``), the build
fixes every input shape at each of the engine's batch sizes, folds what that makes constant
(``fold_shapes``: ONNX Runtime's basic-level folding, fusions off, outputs unchanged), converts the
folded graph, gives the shape arguments that are now constant to the converted calls as Python ints
(``torch_static.bake_constant_arguments``) and exports each module with every dim static. One engine
then holds one module per batch size (``torch_artifact``: ``fixed/b<N>/``), so its cache key keeps
the batch sizes (``Capabilities.fixed_shapes``, ``builder.pipeline.key_spec``); the runner loads the
module of the shapes it is prepared for, and converts the unfolded graph for any other shapes (said in
``loaded_by``). The engine JSON lists each batch size's fold (``fixed_shapes``: ``fixed_batch``, the
nodes removed by op type, the shape ops and host-side shape modules left). A graph whose shapes stay
dynamic (``NonZero``…) is built as written, with the fold's note.

Memory format (the build option ``memory_format``, ``--what-if channels-last``): ``channels_last``
loads the module with ``module.to(memory_format=torch.channels_last)`` and converts the 4-D inputs
that feed a Conv directly (``conv_fed_inputs``) with ``.to(memory_format=torch.channels_last)`` inside
``enqueue`` (with the fp16 cast, one kernel), so cuDNN runs its NHWC convolution kernels. Other 4-D
inputs are left alone: an NHWC graph input that reaches its first Conv through Transpose(0,3,1,2)
(models from TensorFlow) already hands that Conv channels-last memory, and converting it as if it
were NCHW would scramble its strides and add copies. The artifact is the same ONNX; the option is in
the build spec, so the cache key, the engine JSON and every result that reads it say which layout
ran. The input conversion and the output copy back into the profiler's NCHW buffer are timed: they
are what the change costs a caller whose tensors are NCHW.
"""
from __future__ import annotations

import importlib.util
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import TYPE_CHECKING, Any, Mapping

import numpy as np

from ..errors import BadModel, UnsupportedPrecision
from ..spec import BuildSpec, Precision, TensorSpec
from .base import Availability, BackendBase, BuildReport, Capabilities
from . import torch_artifact
from .torch_artifact import first_line
from .torch_fuse import PASSES as MODULE_PASSES, fusion_note
from .torch_module import (CHANNELS_LAST, CONTIGUOUS, MEMORY_FORMAT_OPTION, MEMORY_FORMATS,  # noqa: F401 - re-exported
                           channels_last_weights, check_memory_format, conv_fed_inputs, module_from_proto,
                           onnx_proto)
from .torch_convert import LOW_DTYPES, follow_precision, import_torch, precision_note, to_torch_module
from .torch_convert import (  # noqa: F401 - the conversion's other names callers take from backends.torch
    fold_identity_initializers, import_onnx2torch, register_type_widened_versions)
from .torch_runner import TorchRunner, TorchRunnerSettings
from .torch_runner import (  # noqa: F401 - the runner's other names callers take from backends.torch
    DeviceArray, cudnn_mode)

if TYPE_CHECKING:
    import onnx

    from ..engines.cache import EngineRecord

SUPPORTED = (Precision.FP32, Precision.TF32, Precision.FP16, Precision.BF16)


# issue 43 item 4: on the H200 a ResNet-50 load at three batch sizes cost 13.6 s, nearly all cuDNN's autotuning
COSTLY_LOADS = ("each torch load runs cuDNN's autotuning again for every shape (no PyTorch API keeps its picks; "
                "--no-autotune skips it and times cuDNN's heuristic kernels); where loads must be cheap, "
                "--backend onnxruntime-cuda opens a session in about a second")

class TorchBackend(BackendBase):
    name = "torch"
    artifact_suffix = ".torch.zip"  # torch_artifact: the exported program and the ONNX graph it came from
    capabilities = Capabilities(device="cuda", batch_independent=True, fixed_shapes=True,
                                layer_profiler="torch-profiler", timeline="torch-profiler", kernel_times=True,
                                memory_format_option=True, extra="torch", costly_loads=COSTLY_LOADS)

    def available(self) -> Availability:
        from ..system import cuda

        if cuda.device_count() == 0:
            return Availability(False, "no CUDA GPU (the torch backend runs PyTorch on CUDA only)")
        for package in ("torch", "onnx2torch"):
            if importlib.util.find_spec(package) is None:
                return Availability(False, f"{package} is not installed: pip install 'trtprof[torch]'")
        return Availability(True)

    def preload(self) -> None:
        """What a measurement worker can do before it knows its engines (``workers.spares``): import
        torch, torch.export's loader and onnx — most of a torch worker's start-up on the H200. Not
        onnx2torch (5 s there): an engine with a saved program loads without it (``torch_artifact``);
        one without imports it at load. No CUDA context: an idle spare would hold device memory while
        the engines build."""
        import_torch()
        import torch._export.serde.serialize  # noqa: F401 - torch.export.load's deserializer
        import onnx  # noqa: F401

    def check_precision(self, precision: Precision) -> None:
        if precision is Precision.INT8:
            raise UnsupportedPrecision("int8 is not run on the torch backend (PyTorch's INT8 kernels are CPU-only "
                                       "eager quantization); use --backend onnxruntime, tensorrt or tensorrt-rtx")
        if precision is Precision.FP8:
            return  # checked against the model and the GPU at build (torch_fp8: MLPs through torch._scaled_mm)
        if precision not in SUPPORTED:
            raise UnsupportedPrecision(f"the torch backend supports {', '.join(p.value for p in SUPPORTED)}, "
                                       f"not {precision.value}")

    def environment(self) -> dict[str, Any]:
        """torch, its CUDA, onnx2torch and the GPU: a module rebuilt elsewhere is another engine."""
        torch = import_torch()
        major, minor = torch.cuda.get_device_capability(0)
        return {
            "backend": self.name,
            "torch": torch.__version__,
            "cuda": torch.version.cuda,
            "cudnn": torch.backends.cudnn.version(),
            "onnx2torch": _version("onnx2torch"),
            "artifact": torch_artifact.FORMAT,  # engines of another format are other engines (rebuilt)
            "module_passes": MODULE_PASSES,  # … and so are modules rewritten otherwise (torch_fuse)
            "gpu": torch.cuda.get_device_name(0),
            "compute_capability": f"{major}.{minor}",
        }

    def build(self, model: Path, spec: BuildSpec, out: Path, *, calibration: Any = None) -> BuildReport:
        """Check the model converts, then store the (pre-passed) ONNX as the artifact with the module's
        ``torch.export`` program; a graph with shape arithmetic gets one folded module per batch size
        (``build_fixed``). ``calibration`` is not used: fp8 here scales activations per call (torch_fp8)."""
        from ..model.onnx_model import describe, load_onnx

        proto = load_onnx(Path(model))
        info = describe(proto, Path(model))
        keep = None
        if spec.precision == Precision.FP16:
            from ..convert.keeplist import KeepFp32

            keep = KeepFp32.from_spec(spec, backend=self.name)
        folds, fold_note = fixed_shape_folds(proto, spec, Path(model), info)  # before the graph is changed below
        proto, notes, extra = graph_in_precision(proto, spec, keep)
        folded = fold_identity_initializers(proto)
        if folds:
            return build_fixed(proto, folds, BuildSource(spec, Path(model), info, keep), Path(out), notes, extra,
                               folded)
        if fold_note:
            notes.append(fold_note)
            extra["fixed_shapes_note"] = fold_note
        if spec.precision is Precision.FP8:
            module = self._check_fp8(proto, notes)
        else:
            module = to_torch_module(proto)  # fail at build time, not at bench time
            fused_note(module, notes, extra)
        if spec.precision in LOW_DTYPES and not keep:
            counts = follow_precision(import_torch(), module, getattr(import_torch(), LOW_DTYPES[spec.precision]))
            notes[notes.index(LOW_PRECISION_PENDING)] = precision_note(spec.precision, counts)
            extra["low_precision_tensors"] = counts
        exported, export_note = check_and_export(module, spec, Path(model), converted=bool(keep), info=info)
        memory_format, nhwc = memory_format_notes(spec, module, proto, notes)
        notes.append(export_note)
        loaded_by = torch_artifact.LOADED_EXPORTED if exported is not None else torch_artifact.LOADED_CONVERTED
        torch_artifact.write_artifact(Path(out), proto.SerializeToString(), exported,
                                      {"loaded_by": loaded_by, "torch": import_torch().__version__, "note": export_note})
        n_params = sum(int(p.numel()) for p in module.parameters())
        return BuildReport(metadata=build_metadata(spec, proto, (memory_format, nhwc), folded, loaded_by, n_params, extra),
                           notes=notes)

    def _check_fp8(self, proto: Any, notes: list[str]) -> Any:
        """FP8 needs an FP8 GPU and an MLP that ``torch._scaled_mm`` covers (``torch_fp8``): refuse otherwise."""
        from .torch_fp8 import FP8_MIN_CC, fp8_module, mlp_chain

        torch = import_torch()
        cc = torch.cuda.get_device_capability(0)
        if tuple(cc) < FP8_MIN_CC:
            raise UnsupportedPrecision(f"fp8 needs compute capability 8.9+ (torch._scaled_mm); "
                                       f"{torch.cuda.get_device_name(0)} is {cc[0]}.{cc[1]}")
        steps = mlp_chain(proto)
        notes.append(f"fp8: {sum(s.kind == 'matmul' for s in steps)} matmuls through torch._scaled_mm (E4M3, per-tensor "
                     "scales: weights fixed, activations per call), BF16 between them, FP32 output")
        return fp8_module(steps, torch)

    def load(self, artifact: Path, record: "EngineRecord") -> TorchRunner:
        return runner_from_artifact(Path(artifact), record)


LOW_PRECISION_PENDING = "<low precision note>"  # replaced by precision_note once the module's tensors are counted


def graph_in_precision(proto: Any, spec: BuildSpec, keep: Any) -> tuple[Any, list[str], dict[str, Any]]:
    """The graph the module is converted from, for the engine's precision: with an FP16 keep-list,
    trtprof's FP16 ONNX graph (FP32 islands, float32 IO: loaded without .half()); otherwise ``proto``
    itself. Also the build's notes and metadata for it (``LOW_PRECISION_PENDING`` stands for the fp16/bf16
    note until ``follow_precision`` has counted)."""
    if keep:
        from ..convert.fp16 import convert_fp16

        conversion = convert_fp16(proto, keep_fp32_ops=keep.ops, keep_fp32_nodes=keep.nodes)
        notes = list(conversion.notes)
        notes.append(f"fp16 with keep-list ({keep.options_text()}): the module is built from trtprof's FP16 ONNX "
                     "graph (FP16 weights, casts around the kept nodes, float32 IO)")
        return conversion.model, notes, {"fp16_graph": "converted", "fp16_weights": conversion.to_json()}
    if spec.precision in LOW_DTYPES:
        return proto, [LOW_PRECISION_PENDING], {}
    return proto, [], {}


def fixed_shape_folds(proto: Any, spec: BuildSpec, model: Path, info: Any) -> tuple[dict[int, Any], str]:
    """The graph folded at the input shapes of each of the spec's batch sizes (``convert.fixed_shapes``),
    when it has shape arithmetic on a dynamic input; ({}, why not) when a fold leaves it alone (its
    shapes stay dynamic: the same at every batch size), ({}, '') when there is nothing to fold or the
    precision is fp8 (torch_fp8 rebuilds its own MLP chain)."""
    from ..convert.fixed_shapes import fold_shapes, has_shape_arithmetic
    from ..model.inputs import resolve_shapes

    if spec.precision is Precision.FP8 or not has_shape_arithmetic(proto):
        return {}, ""
    folds = {}
    for batch in spec.batch_sizes:
        shapes = resolve_shapes(info.inputs, batch, spec.shape_overrides(), model_path=str(model))
        result = fold_shapes(proto, shapes)
        if not result.folded:
            return {}, result.line()
        folds[batch] = result
    return folds, ""


@dataclass(frozen=True)
class BuildSource:
    """What a torch build works from: its spec, the model file (named in errors; the check's inputs are
    resolved against it), the model's description (``model.onnx_model.describe``: its inputs and outputs)
    and the FP16 keep-list (``convert.keeplist.KeepFp32``; None or empty: the module is cast to the
    precision, not converted from trtprof's FP16 graph)."""

    spec: BuildSpec
    model: Path
    info: Any
    keep: Any = None


def build_fixed(base: Any, folds: Mapping[int, Any], source: BuildSource, out: Path, notes: list[str],
                extra: dict[str, Any], identity_folded: int) -> BuildReport:
    """The engine of a graph folded at each batch size (``fixed_shape_folds``): per batch size, the folded
    graph in the engine's precision, converted, its constant shape arguments baked
    (``torch_static``), run once and exported with every dim static; stored beside ``base`` (the
    unfolded graph, which loads convert for other shapes). The metadata's ``fixed_shapes`` says, per
    batch size, what was folded and what still reads shapes on the host."""
    from .torch_static import bake_constant_arguments, host_shape_modules

    spec, model, info, keep = source.spec, source.model, source.info, source.keep
    torch = import_torch()
    stored: list[torch_artifact.FixedModule] = []
    per_batch: list[dict[str, Any]] = []
    first: Any = None
    for batch, result in folds.items():
        graph, graph_notes, _ = graph_in_precision(result.model, spec, keep)
        fold_identity_initializers(graph)
        module = to_torch_module(graph)
        baked, fused = bake_constant_arguments(module), module.trtprof_fusions
        counts = None
        if spec.precision in LOW_DTYPES and not keep:
            counts = follow_precision(torch, module, getattr(torch, LOW_DTYPES[spec.precision]))
        exported, export_note = check_and_export(module, spec, model, converted=bool(keep), info=info, fixed_batch=batch)
        host = host_shape_modules(module)
        stripped, shared = torch_artifact.strip_shared(graph, base)
        entry = torch_artifact.FixedEntry(
            batch=batch, input_shapes=result.input_shapes,
            onnx_member=torch_artifact.fixed_member(batch, torch_artifact.ONNX_MEMBER),
            exported_member=torch_artifact.fixed_member(batch, torch_artifact.EXPORTED_MEMBER) if exported else None,
            shared=shared, note=export_note)
        stored.append(torch_artifact.FixedModule(entry, stripped.SerializeToString(), exported))
        loaded_by = torch_artifact.LOADED_EXPORTED if exported is not None else torch_artifact.LOADED_CONVERTED
        per_batch.append({"fixed_batch": batch, "input_shapes": {k: list(v) for k, v in result.input_shapes.items()},
                          "folded": dict(result.removed), "nodes_before": result.nodes_before,
                          "nodes_after": result.nodes_after, "remaining_shape_ops": dict(result.remaining_shape_ops),
                          "static_arguments": baked, "host_shape_modules": host, "module_loaded_by": loaded_by, "fused": fused,
                          **({"low_precision_tensors": counts} if counts is not None else {})})
        host_text = ("; still on the host: " + ", ".join(f"{k} {v}" for k, v in sorted(host.items()))) if host else ""
        notes.append(f"batch {batch}: {result.line()}{host_text}{fusion_note(fused, lead='; ')}; {export_note}")
        if first is None:
            first = (module, counts)
    module, counts = first
    if LOW_PRECISION_PENDING in notes:
        notes[notes.index(LOW_PRECISION_PENDING)] = precision_note(spec.precision, counts)
    memory_format, nhwc = memory_format_notes(spec, module, base, notes)
    base_note = "the unfolded graph: loads convert it for shapes other than the fixed ones"
    torch_artifact.write_artifact(out, base.SerializeToString(), None,
                                  {"loaded_by": torch_artifact.LOADED_CONVERTED, "torch": torch.__version__,
                                   "note": base_note}, fixed=stored)
    everywhere = all(p["module_loaded_by"] == torch_artifact.LOADED_EXPORTED for p in per_batch)
    loaded_by = torch_artifact.LOADED_EXPORTED if everywhere else torch_artifact.LOADED_CONVERTED
    n_params = sum(int(p.numel()) for p in module.parameters())
    extra = {**extra, **({"low_precision_tensors": counts} if counts is not None else {}),
             "fixed_shapes": per_batch, "fixed_batches": [p["fixed_batch"] for p in per_batch]}
    return BuildReport(metadata=build_metadata(spec, base, (memory_format, nhwc), identity_folded, loaded_by,
                                               n_params, extra), notes=notes)


def fused_note(module: Any, notes: list[str], extra: dict[str, Any]) -> None:
    """Say what ``torch_fuse`` put back in the converted module (a note, and ``fused`` in the metadata)."""
    extra["fused"] = module.trtprof_fusions
    if any(module.trtprof_fusions.values()):
        notes.append(fusion_note(module.trtprof_fusions))


def memory_format_notes(spec: BuildSpec, module: Any, proto: Any, notes: list[str]) -> tuple[str, tuple[str, ...]]:
    """The build's memory format (checked against the module) and the inputs a channels-last runner
    converts, with its note."""
    memory_format = check_memory_format(spec.option(MEMORY_FORMAT_OPTION, CONTIGUOUS), module, spec.precision)
    nhwc: tuple[str, ...] = ()
    if memory_format == CHANNELS_LAST:
        nhwc = conv_fed_inputs(proto)
        notes.append("channels_last: module in NHWC memory (cuDNN's NHWC kernels), inputs converted: "
                     + (", ".join(nhwc) + " (inside the timed compute)" if nhwc else
                        "none (no 4-D input feeds a Conv directly)")
                     + "; the output copy back is timed too")
    return memory_format, nhwc


def build_metadata(spec: BuildSpec, proto: Any, layout: tuple[str, tuple[str, ...]], identity_folded: int,
                   loaded_by: str, n_params: int, extra: Mapping[str, Any]) -> dict[str, Any]:
    """The engine JSON's backend metadata (``layout``: memory_format_notes's format and converted inputs)."""
    import onnx

    return {
        "effective_precision": spec.precision.value,
        "tf32": spec.precision == Precision.TF32,
        "memory_format": layout[0],
        **({"channels_last_inputs": list(layout[1])} if layout[0] == CHANNELS_LAST else {}),
        "identity_initializers_folded": identity_folded,
        "module_loaded_by": loaded_by,
        "parameters": n_params,
        "onnx_opset": max((o.version for o in proto.opset_import if o.domain in ("", "ai.onnx")), default=None),
        "onnx_ir_version": proto.ir_version,
        "onnx_nodes": len(proto.graph.node),
        "onnx_version": onnx.__version__,
        **extra,
    }


def runner_from_artifact(artifact: Path, record: "EngineRecord", device: str = "cuda") -> TorchRunner:
    """The saved ``torch.export`` program when the engine has one (no conversion), else the ONNX
    graph converted by onnx2torch (``torch_artifact``), on ``device``."""
    saved = torch_artifact.read_artifact(artifact)
    precision = Precision(record.precision)
    converted = record.backend_metadata.get("fp16_graph") == "converted"
    memory_format = record.spec.option(MEMORY_FORMAT_OPTION, CONTIGUOUS)

    def from_onnx() -> TorchRunner:
        return runner_from_proto(onnx_proto(saved.onnx_bytes, artifact), precision, tuple(record.inputs),
                                 tuple(record.outputs), converted=converted, memory_format=memory_format, device=device)

    if saved.fixed and precision is not Precision.FP8:
        from .torch_fixed import FixedShapeModules

        fixed = FixedShapeModules(Path(artifact), saved, precision, converted=converted, memory_format=memory_format,
                                  device=device)
        settings = TorchRunnerSettings(device=device, cast_io=not converted, memory_format=memory_format,
                                       nhwc_inputs=fixed.nhwc_inputs)
        return TorchRunner(None, precision, tuple(record.inputs), tuple(record.outputs), settings=settings, fixed=fixed)

    def per_node() -> Any:  # per-layer ranges need one submodule per ONNX node: torch_fuse's rewrites left out
        return module_from_proto(onnx_proto(saved.onnx_bytes, artifact), precision, converted=converted,
                                 memory_format=memory_format, device=device, fuse=False)

    if saved.exported is None or precision is Precision.FP8:
        runner = from_onnx()
        runner.per_node = per_node if precision is not Precision.FP8 else None
        return runner
    torch = import_torch()
    try:
        module = torch_artifact.exported_module(torch, saved.exported, artifact).to(device)
    except BadModel:
        raise
    except Exception as err:  # noqa: BLE001 - a program this torch cannot read: convert instead, said
        runner = from_onnx()
        runner.loaded_by = f"{torch_artifact.LOADED_CONVERTED} (the saved program did not load: {first_line(err)})"
        runner.per_node = per_node
        return runner
    nhwc: frozenset[str] = frozenset()
    if memory_format == CHANNELS_LAST:
        module = module.to(memory_format=torch.channels_last)
        nhwc = frozenset(conv_fed_inputs(onnx_proto(saved.onnx_bytes, artifact)))
    if device == "cuda":
        torch.cuda.synchronize()
    runner = TorchRunner(module, precision, tuple(record.inputs), tuple(record.outputs),
                         settings=TorchRunnerSettings(device=device, cast_io=not converted,
                                                      memory_format=memory_format, nhwc_inputs=nhwc))
    runner.loaded_by = torch_artifact.LOADED_EXPORTED
    runner.reconvert = lambda: from_onnx().module
    runner.per_node = per_node
    return runner


def engine_onnx(path: Path) -> Any:
    """The ONNX graph of a torch engine file (per-layer profiling and node labels read it)."""
    return onnx_proto(torch_artifact.read_artifact(Path(path)).onnx_bytes, Path(path))


def check_and_export(module: Any, spec: BuildSpec, model: Path, *, converted: bool = False, info: Any = None,
                     fixed_batch: int | None = None) -> tuple[bytes | None, str]:
    """Run the converted module once, in the engine's precision, on the build's random inputs at its
    smallest batch: a module onnx2torch converts but that cannot run (mixed dtypes, a shape it
    computes wrong) fails the build with one line (BadModel) instead of a traceback at bench time.
    Then ``torch.export`` it for the loads, at a batch of at least 2 (export fixes a dim it sees as 1)
    with dim 0 dynamic for inputs whose batch is symbolic in the model, checked against the module's
    own outputs there (``torch_artifact``): (program bytes or None, the build's note). A module folded
    at ``fixed_batch`` (``build_fixed``) runs and is exported at that batch, every dim static. On the GPU
    when there is one (where it will run), else on the CPU; the model is read (unless ``info`` describes
    it) and the module moved once."""
    if spec.precision is Precision.FP8:  # torch_fp8's module is checked against its own chain
        return None, "fp8: loads rebuild the _scaled_mm chain from the ONNX graph (no torch.export)"
    from ..model.inputs import make_inputs, resolve_shapes
    from ..model.onnx_model import inspect_model

    torch = import_torch()
    info = info if info is not None else inspect_model(model)

    def feeds(batch: int) -> dict[str, np.ndarray]:
        return make_inputs(info.inputs, resolve_shapes(info.inputs, batch, spec.shape_overrides(), model_path=str(model)))

    if fixed_batch is not None:
        dynamic, first, batch = [False] * len(info.inputs), fixed_batch, fixed_batch
    else:
        dynamic = [not (isinstance(t.shape[0], int) and t.shape[0] > 0) if t.shape else False for t in info.inputs]
        first = spec.min_batch
        batch = max(2, spec.min_batch) if any(dynamic) else spec.min_batch
    device = "cuda" if torch.cuda.is_available() else "cpu"
    runner = TorchRunner(module.eval().to(device), spec.precision, tuple(info.inputs), tuple(info.outputs),
                         settings=TorchRunnerSettings(device=device, cast_io=not converted))
    try:
        try:
            runner.infer(feeds(first))
        except BadModel as err:
            raise BadModel(err.message, path=model) from err
        at = feeds(batch)
        try:
            example = [runner.cast_in(torch.from_numpy(np.ascontiguousarray(at[t.name])).to(device), t.name)
                       for t in info.inputs]
            with torch.no_grad():
                reference = runner._run(example)
        except (BadModel, RuntimeError) as err:
            return None, f"torch.export not tried: the module failed at batch {batch} ({first_line(err)})"
        low = LOW_DTYPES.get(spec.precision, "float32") if not converted else "float16"
        return torch_artifact.export_module(torch, runner.module, example, dynamic, reference, low)
    finally:
        runner.close()
        module.to("cpu")


def runner_from_proto(proto: Any, precision: Precision, inputs: tuple[TensorSpec, ...],
                      outputs: tuple[TensorSpec, ...], *, converted: bool = False, memory_format: str = CONTIGUOUS,
                      device: str = "cuda") -> TorchRunner:
    """The torch artifact (pre-passed ONNX) → a runner: the module rebuilt, in the precision's dtype
    (unless ``converted``: FP16 types already in the graph) and the memory format, on ``device``."""
    module = module_from_proto(proto, precision, converted=converted, memory_format=memory_format, device=device)
    nhwc = frozenset(conv_fed_inputs(proto)) if memory_format == CHANNELS_LAST else frozenset()
    return TorchRunner(module, precision, inputs, outputs,
                       settings=TorchRunnerSettings(device=device, cast_io=not converted, memory_format=memory_format,
                                                    nhwc_inputs=nhwc))


def _version(package: str) -> str | None:
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return None
