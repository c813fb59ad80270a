"""Per-node times from ONNX Runtime's own session profiling (``SessionOptions.enable_profiling``).

ORT writes a Chrome-trace JSON in which every executed node of every run is one ``cat: "Node"``
event named ``<node>_kernel_time`` with ``args.op_name`` and ``args.provider``; fused nodes carry
ORT's fused names (``conv0_nchwc``), layout changes appear as ``ReorderInput``/``ReorderOutput``
and precision fallbacks as inserted ``Cast`` nodes — each its own row. A separate session with
profiling on runs the asked iterations; the timed session is never profiled.
"""
from __future__ import annotations

import dataclasses
import json
import re
from collections import defaultdict
from pathlib import Path
from typing import Any, Callable, Mapping, NamedTuple, Sequence

import numpy as np

from ..util.scratch import temp_dir
from .graph import node_key
from .kernels import uses_tensor_cores
from .ort_kernels import Attribution, GpuWork, NodeSpan, demangle
from .table import COMPUTE, FP32_MARKS, KernelTime, LayerTiming, PrecisionProfile, kind_of

SOURCE = "onnxruntime session profiling (per-node wall time on the host)"
# Decorations ORT's graph transformers add to the names of the nodes they create: the NCHWc layout
# transformer names a convolution after the tensor it writes plus "_nchwc" ("fmap_nchwc"), and
# GenerateNodeName makes names unique with "_token_N" ("ReorderOutput_token_4").
NAME_DECORATIONS = re.compile(r"(_nchwc|_token_\d+)+$")
SUFFIX = "_kernel_time"
# ORT's InsertCastTransformer renames a node it runs in FP32 behind casts (no FP16 kernel on the CPU
# provider) "InsertedPrecisionFreeCast_<node>": the same layer, so its row joins the baseline's.
RENAMED_PREFIX = "InsertedPrecisionFreeCast_"
# What a kernel name of such a node carries ("Conv (CPUExecutionProvider, FP32 behind inserted casts)"),
# and of a node of an fp16/int8 engine that ORT's executed graph runs on FP32 tensors without renaming it
# ("Gemm (CPUExecutionProvider, runs FP32)"): both are the baseline's FP32 kernel (table.FP32_MARKS).
BEHIND_CASTS_MARK, RUNS_FP32_MARK = FP32_MARKS
# ORT's copies between a CUDA EP node and a CPU EP node (its MemcpyTransformer inserts them at every
# boundary between the two; the session copies graph inputs and outputs itself, without nodes)
MEMCPY_OPS = ("MemcpyToHost", "MemcpyFromHost")
# the provider a kernel name of this profile carries: "Shape (CPUExecutionProvider)",
# "Conv (CUDAExecutionProvider; ORT node conv0_token_3)"
PROVIDER_IN_KERNEL = re.compile(r"\((\w+ExecutionProvider)\b")


def kernel_provider(kernel_name: str) -> str | None:
    """The execution provider named in a kernel name ``parse_profile`` wrote, or None."""
    match = PROVIDER_IN_KERNEL.search(kernel_name)
    return match.group(1) if match else None


class SourceGraph(NamedTuple):
    """What ties ORT's executed nodes to the ONNX nodes they came from: the engine's ONNX graph
    (node key → op type, tensor → key of the node writing it; keys as ``graph.node_key``, so an
    unnamed node is ``OpType_INDEX`` as trtprof's FP16 conversion names it) and ORT's optimized graph
    (executed node name → the tensors it writes)."""

    ops: Mapping[str, str]
    producers: Mapping[str, str]
    inputs: Mapping[str, tuple[str, ...]]
    executed_outputs: Mapping[str, tuple[str, ...]]

    @classmethod
    def of(cls, source: Any, optimized: Any = None) -> "SourceGraph":
        """From the engine's ONNX ModelProto and ORT's optimized one (None when ORT saved none)."""
        ops, producers, inputs = {}, {}, {}
        for i, node in enumerate(source.graph.node):
            key = node_key(node, i)
            ops[key] = node.op_type
            inputs[key] = tuple(node.input)
            for out in node.output:
                producers[out] = key
        executed = {} if optimized is None else {n.name: tuple(n.output) for n in optimized.graph.node}
        return cls(ops, producers, inputs, executed)

    def origin(self, name: str, op: str) -> str | None:
        """The ONNX node an executed node named ``name`` (prefix already removed) computes, or None.

        Tried in order: its own name (ORT keeps the names of nodes it runs as they are); a graph
        tensor it writes (in ORT's optimized graph); its name less ORT's decorations, read as the tensor
        whose writer it replaced (a fused Conv+Relu is named after the Relu's output). When the node
        found is not of the executed op (the fused Relu), its chain of first inputs is followed up to
        the node that is (the Conv), so both precisions' rows land on the same ONNX node."""
        if name in self.ops and self.ops[name] == op:
            return name
        found = None
        for out in self.executed_outputs.get(name, ()):
            found = found or self.producers.get(strip_renamed(out))
        if found is None:
            bare = NAME_DECORATIONS.sub("", name)
            found = self.producers.get(bare) or (bare if bare in self.ops else None)
        if found is None:
            return None
        walk: str | None = found
        for _ in range(FUSED_CHAIN):
            if walk is None:
                break
            if self.ops.get(walk) == op:
                return walk
            first = self.inputs.get(walk, ())
            walk = self.producers.get(first[0]) if first else None
        return found


# how far up a fused node's chain of first inputs its op is looked for (Conv+Add+Relu: 2 steps)
FUSED_CHAIN = 3


def strip_renamed(name: str) -> str:
    return name[len(RENAMED_PREFIX):] if name.startswith(RENAMED_PREFIX) else name


def row_name(node: str, op: str, sources: SourceGraph | None, taken: set[str]) -> str:
    """The row an executed node goes to: its ONNX node's key for compute nodes, "ReorderOutput
    (Conv_0)" for a layout change or cast ORT added after an ONNX node; ORT's name when neither is
    found. A name another executed node already took gets "#2", "#3"."""
    origin = sources.origin(node, op) if sources is not None else None
    if origin is None:
        name = node
    elif origin == node or kind_of(op, node) == COMPUTE:
        name = origin
    else:
        name = f"{op} ({origin})"
    unique, n = name, 1
    while unique in taken:
        n += 1
        unique = f"{name} #{n}"
    taken.add(unique)
    return unique


def profiled_node_events(events: Sequence[Mapping[str, Any]], iterations: int) -> tuple[list[Mapping[str, Any]], list[tuple[float, float]]]:
    """The node events of the last ``iterations`` runs (each with its run's index under ``"_run"``; warm-up
    runs left out), and the runs' windows (µs)."""
    runs = [e for e in events if e.get("cat") == "Session" and e.get("name") == "model_run"]
    runs.sort(key=lambda e: e.get("ts", 0))
    runs = runs[-iterations:] if iterations else runs
    windows = [(float(e["ts"]), float(e["ts"]) + float(e.get("dur", 0))) for e in runs]
    out: list[Mapping[str, Any]] = []
    for e in sorted((e for e in events if e.get("cat") == "Node"), key=lambda e: e.get("ts", 0)):
        if not str(e.get("name", "")).endswith(SUFFIX):
            continue  # fence_before/fence_after markers
        ts = float(e.get("ts", 0))
        run = next((i for i, (a, b) in enumerate(windows) if a <= ts <= b), None)
        if windows and run is None:
            continue  # a warmup run
        out.append({**e, "_run": run if run is not None else 0})
    return out, windows


def node_spans(events: Sequence[Mapping[str, Any]], start_ns: int) -> list[NodeSpan]:
    """Every node event of ORT's profile as a host interval on ORT's clock (``start_ns``: the session's
    profiling start, ``get_profiling_start_time_ns``), keyed as ``parse_profile`` looks them up."""
    return [NodeSpan((str(e["name"]), float(e.get("ts", 0))), start_ns + int(float(e.get("ts", 0)) * 1000),
                     start_ns + int((float(e.get("ts", 0)) + float(e.get("dur", 0))) * 1000))
            for e in events if e.get("cat") == "Node" and str(e.get("name", "")).endswith(SUFFIX)]


def _gpu_kernels(works: Sequence[Sequence[GpuWork]], runs: int, provider: str) -> tuple[KernelTime, ...]:
    """A node's kernels from its GPU work in each run: per kernel name, the median over runs of its time in
    a run (a run without it counts 0), launches per run, tensor cores read from the name."""
    names: dict[str, list[float]] = defaultdict(lambda: [0.0] * max(1, len(works)))
    calls: dict[str, int] = defaultdict(int)
    for i, run in enumerate(works):
        for w in run:
            name = demangle(w.name)
            names[name][i] += w.duration_ns / 1e6
            calls[name] += 1
    return tuple(KernelTime(name=f"{name} ({provider})" if provider else name, median_ms=float(np.median(t)),
                            calls=max(1, round(calls[name] / max(1, runs))), tensor_core=uses_tensor_cores(name))
                 for name, t in sorted(names.items(), key=lambda kv: -float(np.median(kv[1]))))


def parse_profile(events: Sequence[Mapping[str, Any]], iterations: int,
                  sources: SourceGraph | None = None,
                  fp32_nodes: frozenset[str] = frozenset(),
                  gpu: Attribution | None = None) -> tuple[tuple[LayerTiming, ...], float | None]:
    """Per-node medians over the last ``iterations`` runs of an ORT profile; and the per-run total.
    With ``sources``, rows are named by the ONNX node each executed node came from (``row_name``),
    so the FP32 and FP16 engines' rows meet although ORT names their fused nodes differently.
    ``fp32_nodes``: executed nodes of an fp16/int8 engine that ran on FP32 tensors (``fp32_executed_nodes``);
    their kernels say so (``RUNS_FP32_MARK``). ``gpu``: CUPTI's GPU work per node event (``ort_kernels``):
    a node's time is then its kernels' GPU time and its kernels are theirs, not the host's launch time."""
    node_events, windows = profiled_node_events(events, iterations)
    per_node: dict[str, list[float]] = defaultdict(list)
    works: dict[str, list[Sequence[GpuWork]]] = defaultdict(list)
    per_run: dict[int, float] = defaultdict(float)
    ops: dict[str, tuple[str, str]] = {}
    for e in node_events:
        node = str(e["name"])[: -len(SUFFIX)]
        args = e.get("args", {}) or {}
        provider = str(args.get("provider", ""))
        if node.startswith(RENAMED_PREFIX):
            node = node[len(RENAMED_PREFIX):]
            provider += f", {BEHIND_CASTS_MARK}"
        elif node in fp32_nodes:
            provider += f", {RUNS_FP32_MARK}"
        ops.setdefault(node, (str(args.get("op_name", "")), provider))
        if gpu is None:
            ms = float(e.get("dur", 0)) / 1e3
        else:
            work = gpu.per_node.get((str(e["name"]), float(e.get("ts", 0))), ())
            works[node].append(work)
            ms = sum(w.duration_ns for w in work) / 1e6
        per_node[node].append(ms)
        per_run[e["_run"]] += ms
    layers = []
    taken: set[str] = set()
    runs = max(1, len(windows))
    for node in per_node:  # first-seen order: ORT's execution order
        op, provider = ops[node]
        name = row_name(node, op, sources, taken)
        median = float(np.median(per_node[node]))
        label = provider if name == node else f"{provider}; ORT node {node}"
        if gpu is None:
            kernels: tuple[KernelTime, ...] = (KernelTime(name=f"{op} ({label})", median_ms=median,
                                                          calls=max(1, round(len(per_node[node]) / runs)), tensor_core=None),)
        else:
            kernels = _gpu_kernels(works[node], runs, label)
        layers.append(LayerTiming(name=name, op_type=op, kind=kind_of(op, node), median_ms=median, kernels=kernels))
    total = float(np.median(list(per_run.values()))) if per_run else None
    return tuple(layers), total


def kernel_capture(device: str) -> tuple[Any, str | None]:
    """(the cupti module, None) where GPU kernel times per node can be captured; (None, why not) otherwise."""
    if device != "cuda":
        return None, None
    from .ort_kernels import import_cupti
    from ..errors import MissingDependency

    try:
        return import_cupti(), None
    except MissingDependency as err:
        return None, f"per-node times are host launch times: {err}"
    except Exception as err:  # noqa: BLE001 - cupti-python installed but its library would not load
        return None, f"per-node times are host launch times: cupti-python cannot load CUPTI ({type(err).__name__}: {err})"


class TimedSession(NamedTuple):
    """What a profiling session takes from the timed one, so that it runs its kernels: the CUDA EP's provider
    options, and the named dynamic dims the timed session fixed (``add_free_dimension_override_by_name``)."""

    cuda_options: Mapping[str, str] | None = None
    free_dims: Mapping[str, int] = {}

    def configure(self) -> Callable[[Any], None] | None:
        """``SessionSettings.configure``: fix the dims on ORT's SessionOptions; None when there are none."""
        from ..backends.onnxruntime import fix_dims

        return fix_dims(self.free_dims)


def profile_onnxruntime(record: Any, feeds: Mapping[str, np.ndarray], *, iterations: int, warmup: int,
                        batch_size: int, device: str = "cpu", timed: TimedSession = TimedSession()) -> PrecisionProfile:
    """Run ``warmup`` + ``iterations`` inferences of ``record``'s engine (engines.cache.EngineRecord: its
    artifact and precision) on a fresh profiling session (on ``device``'s provider, set as ``timed`` says: the
    timed session's provider options and fixed dims, so its kernels are the same) and parse its trace; the
    profile is labelled with the
    engine's backend. On CUDA with cupti-python, the profiled runs are captured by CUPTI and each node's time
    is its kernels' GPU time (``ort_kernels``); without it, or where too little of the GPU's work could be
    tied to nodes, the node times stay host launch times and a note says why."""
    from ..backends.onnxruntime import SessionSettings, ort_session
    from ..spec import Precision
    from . import ort_kernels

    artifact, precision, backend = Path(record.artifact_path), record.precision, record.backend
    cupti, why_not = kernel_capture(device)
    cuda_options, dims = timed.cuda_options, dict(timed.free_dims)
    with temp_dir("ortprof") as tmp:
        optimized = Path(tmp) / "optimized.onnx"
        session = ort_session(Path(artifact), Precision(precision), path=Path(artifact),
                              settings=SessionSettings(profile_prefix=str(Path(tmp) / "ort"), optimized_out=optimized,
                                                       keep_optimizations=True, configure=timed.configure()),
                              device="cuda" if device == "cuda" else "cpu", cuda_options=cuda_options)
        for _ in range(warmup):
            session.run(None, dict(feeds))
        log, refused = ort_kernels.run_captured(
            cupti, lambda: [session.run(None, dict(feeds)) for _ in range(iterations)])
        why_not = refused or why_not
        trace = Path(session.end_profiling())
        events = json.loads(trace.read_text(encoding="utf-8"))
        sources = source_graph(Path(artifact), optimized)
        fp32 = fp32_executed_nodes(optimized, precision) if precision in LOW_PRECISIONS else frozenset()
    config: dict[str, Any] = {"warmup": warmup, "provider": session.get_providers()[0],
                              **({"provider_options": dict(cuda_options)} if cuda_options else {}),
                              **({"free_dimension_overrides": dims} if dims else {})}
    notes = [why_not] if why_not else []
    gpu = None if log is None else _attribution(events, iterations, int(session.get_profiling_start_time_ns()), log,
                                                config, notes)
    layers, total = parse_profile(events, iterations, sources, fp32)
    host = PrecisionProfile(precision=precision, backend=backend, source=SOURCE, batch_size=batch_size,
                            iterations=iterations, layers=layers, iteration_total_ms=total, config=config,
                            notes=tuple(notes))
    if gpu is None:
        return host
    layers, total = parse_profile(events, iterations, sources, fp32, gpu)
    copies_ms = config["session_copies_ms_per_run"]
    copies = (f"the profiled session's own copies of its inputs and outputs ({copies_ms:.3g} ms a run: it takes host "
              "arrays) are left out of the layers; the timed loop makes its own pinned copies",) if copies_ms else ()
    return dataclasses.replace(host, source=ort_kernels.SOURCE, layers=layers, iteration_total_ms=total,
                               notes=host.notes + copies, kernel_times=True, host_fallback=host)


def _attribution(events: Sequence[Mapping[str, Any]], iterations: int, start_ns: int, log: Any,
                 config: dict[str, Any], notes: list[str]) -> Any:
    """CUPTI's GPU work of the profiled runs split among their nodes (``ort_kernels.attribute``), or None where
    too little of it could be tied to a node; what the fit found goes into ``config``, a refusal into ``notes``."""
    from . import ort_kernels

    node_events, windows = profiled_node_events(events, iterations)
    runs = [NodeSpan(("model_run", a), start_ns + int(a * 1000), start_ns + int(b * 1000)) for a, b in windows]
    nodes = node_spans(node_events, start_ns)
    ort_kernels.dump_inputs(nodes, runs, log)
    gpu = ort_kernels.attribute(nodes, log, runs=runs)
    copies_ms = sum(w.duration_ns for w in gpu.session_copies) / 1e6 / max(1, len(windows))
    config.update(kernel_clock=gpu.clock, attributed_share=round(gpu.attributed_share, 4),
                  clock_correction_us=round(gpu.correction_ns / 1e3, 2), gpu_work_records=len(log.work),
                  clock_drift_us=round(log.clock_drift_ns.get(gpu.clock, 0) / 1e3, 2),
                  session_copies_ms_per_run=round(copies_ms, 4))
    if gpu.attributed_share < ort_kernels.ATTRIBUTED_MIN:
        notes.append(f"per-node times are host launch times: only {gpu.attributed_share:.0%} of the GPU's work "
                     f"could be tied to a node (under {ort_kernels.ATTRIBUTED_MIN:.0%})")
        return None
    return gpu


# Engines whose executed nodes are checked for FP32 tensors: a node of one of them that runs FP32 runs the
# FP32 baseline's kernel, and no per-layer FP16 (INT8) claim may be made of it (issue 44).
LOW_PRECISIONS = ("fp16", "int8")


def fp32_executed_nodes(optimized: Path, precision: str) -> frozenset[str]:
    """Names of the compute nodes of ORT's executed graph (``optimized``) that run on FP32 tensors, by the
    rule of the build's census (fp16: ``convert.fp16.count_precision``, a node with any FP32 tensor; int8:
    ``convert.quantize.count_quantized``, a float node that is neither an integer kernel nor a Q/DQ).
    Empty when the graph cannot be read or typed (nothing is then marked)."""
    import onnx
    from google.protobuf.message import DecodeError

    from ..convert.fp16 import NOT_COMPUTE, tensor_elem_types
    from ..convert.quantize import INT8_COMPUTE_OPS, QDQ_OPS

    try:
        model = onnx.load(str(optimized), load_external_data=False)
    except (OSError, ValueError, DecodeError):
        return frozenset()
    t = onnx.TensorProto
    floats = {t.FLOAT, t.FLOAT16, t.BFLOAT16, t.DOUBLE}
    types = {k: v for k, v in tensor_elem_types(model).items() if v}
    out = set()
    for node in model.graph.node:  # ORT writes its graph in execution order: types flow forward
        known = [types[name] for name in node.input if name in types]
        for name in node.output:  # ONNX's inference stops at ORT's contrib ops (NCHWc): carry the type on
            if name and name not in types:
                if node.op_type == "Cast":
                    to = next((a.i for a in node.attribute if a.name == "to"), None)
                    if to:
                        types[name] = to
                elif any(k in floats for k in known):
                    types[name] = next(k for k in known if k in floats)
        if node.op_type in NOT_COMPUTE or not node.name:
            continue
        seen = {types.get(name) for name in [*node.input, *node.output] if name}
        if precision == "int8":
            fp32 = node.op_type not in QDQ_OPS and node.op_type not in INT8_COMPUTE_OPS and bool(seen & floats)
        else:
            fp32 = t.FLOAT in seen
        if fp32:
            out.add(node.name)
    return frozenset(out)


def source_graph(artifact: Path, optimized: Path) -> SourceGraph | None:
    """The engine's ONNX graph and ORT's optimized graph as a SourceGraph; None when the engine's
    graph cannot be read (rows keep ORT's names then); without the optimized graph, names alone."""
    import onnx
    from google.protobuf.message import DecodeError

    try:
        source = onnx.load(str(artifact), load_external_data=False)
    except (OSError, ValueError, DecodeError):
        return None
    try:
        executed = onnx.load(str(optimized), load_external_data=False) if optimized.is_file() else None
    except (OSError, ValueError, DecodeError):
        executed = None
    return SourceGraph.of(source, executed)
