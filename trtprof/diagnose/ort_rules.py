"""Why rules for ONNX Runtime on a GPU: causes of its own, each from what the session recorded.

- ``ort_cpu_nodes``: nodes the session placed on the CPU EP and the Memcpy nodes ORT put around them,
  from the per-layer profile (ORT's profiler names each executed node's provider; ``layers.ort`` keeps
  it in the kernel names). Shape nodes of a dynamic-shape export land there (torch.onnx.export), each
  one a wait for the GPU stream, and while any node is off the CUDA EP ORT refuses its CUDA graph.
- ``ort_nchw``: an fp16 candidate whose recorded provider options leave the backend's layout option
  (``Capabilities.layout_option``: ORT's ``prefer_nhwc``) at "0" on a graph with Convs: cuDNN's FP16
  tensor-core convolutions want NHWC (on the H200, ResNet-50 fp16 vs fp32: 2.64× NCHW, 3.84× with
  prefer_nhwc=1); ``--what-if nhwc`` measures it.
- ``ort_graph_refused``: the runtime that captures its own graph (``graph_capture == "runner"``)
  refused it, with the runtime's reason from the launch record.
- ``ort_cudnn_search``: the cuDNN search mode recorded (``cudnn_conv_algo_search``) is DEFAULT, one fixed
  algorithm for every Conv (ORT#22705). The mode, whatever it is, is in every finding's evidence here.

Gated on capabilities and on what was recorded, never on a backend's name: a GPU backend (device
"cuda") profiled by ORT's session profiler, naming a layout option, capturing its own graph; and
provider options present in the result (the launch record, or a bench result's ``config.runtime``).
"""
from __future__ import annotations

from typing import Any, Mapping

from .. import backends
from ..layers.ort import MEMCPY_OPS, kernel_provider
from ..layers.table import LayerTable
from ..measure.results import BenchResult
from ..measure.timing import capture_failure, launch_record
from ..util.wording import plural
from .findings import Finding

CPU_PROVIDER = "CPUExecutionProvider"  # the name ORT's profiler gives its CPU execution provider
# One node off the CUDA EP is enough to name: each costs a wait for the stream (and a Memcpy each way),
# and ORT captures no CUDA graph while any node is off the CUDA EP, whatever that node's own time.
MIN_OFF_GPU_NODES = 1
# The NCHW finding needs a Conv to be about (prefer_nhwc changes Conv, BatchNorm and pooling kernels;
# without a Conv FP16's tensor cores are not what the layout holds back).
MIN_CONVS = 1
SEARCH_OPTION = "cudnn_conv_algo_search"
# ORT's cudnn_conv_algo_search values: EXHAUSTIVE (cudnnFind…; on ORT >= 1.20 with cuDNN 9 answered from
# cuDNN's heuristics), HEURISTIC (cudnnGet…_v7), DEFAULT (no search: IMPLICIT_PRECOMP_GEMM for every Conv)
UNSEARCHED = "DEFAULT"
NCHW = "0"  # the layout option's value that leaves Convs in NCHW (ORT's default)


def provider_options(result: BenchResult) -> dict[str, Any] | None:
    """The provider options a result recorded as the runtime reports them (the launch record's, else a
    bench result's ``config.runtime``), or None where none were recorded."""
    options = launch_record(getattr(result, "device", None)).get("provider_options")
    if not isinstance(options, Mapping):
        runtime = (result.config or {}).get("runtime")
        options = runtime.get("provider_options") if isinstance(runtime, Mapping) else None
    return dict(options) if isinstance(options, Mapping) else None


def search_mode(result: BenchResult) -> str | None:
    options = provider_options(result)
    value = options.get(SEARCH_OPTION) if options else None
    return None if value is None else str(value)


def conv_count(result: BenchResult, graph: Mapping[str, Mapping[str, Any]] | None) -> tuple[int, str]:
    """How many Convs the engine runs, and from where: the ONNX graph's facts, else the backend's census of
    the graph it executes (``node_precision``); (0, "") where neither says."""
    if graph:
        return sum(1 for f in graph.values() if f.get("op_type") == "Conv"), "graph"
    census = (result.engine.get("backend_metadata") or {}).get("node_precision")
    if isinstance(census, Mapping):
        n = sum(int(ops.get("Conv", 0)) for ops in census.values() if isinstance(ops, Mapping))
        return n, "node_precision"
    return 0, ""


def on_ort_gpu(backend: str) -> bool:
    """A GPU backend whose per-layer profile is ORT's session profiler (its nodes name their provider)."""
    caps = backends.capabilities(backend)
    return caps.device == "cuda" and caps.layer_profiler == "ort-session"


def _ops(layers: list[Any]) -> str:
    counts: dict[str, int] = {}
    for layer in layers:
        counts[layer.op_type] = counts.get(layer.op_type, 0) + 1
    return ", ".join(f"{op}×{n}" for op, n in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])))


def cpu_ep_nodes(table: LayerTable, candidate: str) -> Finding | None:
    """Nodes on the CPU EP and Memcpy nodes in the candidate's executed graph, with their time share."""
    prof = table.profiles.get(candidate)
    if prof is None or not on_ort_gpu(prof.backend):
        return None
    on_cpu = [layer for layer in prof.layers
              if any(kernel_provider(k.name) == CPU_PROVIDER for k in layer.kernels)]
    copies = [layer for layer in prof.layers if layer.op_type in MEMCPY_OPS]
    if len(on_cpu) + len(copies) < MIN_OFF_GPU_NODES:
        return None
    total = prof.total_ms
    cpu_ms = sum(layer.median_ms for layer in on_cpu)
    copy_ms = sum(layer.median_ms for layer in copies)
    share = (cpu_ms + copy_ms) / total if total > 0 else None
    where = f", {share:.0%} of the profiled time" if share is not None else ""
    return Finding(
        "ort_cpu_nodes",
        f"{candidate} at batch {table.batch_size}: {plural(len(on_cpu), 'node')} "
        f"{'runs' if len(on_cpu) == 1 else 'run'} on ONNX Runtime's CPU EP" + (f" ({_ops(on_cpu)})" if on_cpu else "")
        + f" and {plural(len(copies), 'Memcpy node')}" + (f" ({_ops(copies)})" if copies else "")
        + f" {'copies' if len(copies) == 1 else 'copy'} between the CPU and the GPU: {cpu_ms + copy_ms:.3g} ms{where}; "
        "each waits for the GPU stream, and ORT "
        "captures no CUDA graph while any node is off the CUDA EP. Shape nodes of a dynamic-shape export "
        "(torch.onnx.export) land there: export with static shapes and a fixed batch, or fold them with onnxsim "
        "(python -m onnxsim in.onnx out.onnx), so that every node runs on the CUDA EP",
        {"candidate": candidate, "batch_size": table.batch_size, "cpu_nodes": len(on_cpu),
         "cpu_ops": _ops(on_cpu), "cpu_ms": cpu_ms, "memcpy_nodes": len(copies), "memcpy_ops": _ops(copies),
         "memcpy_ms": copy_ms, "share": share, "profiled_ms": total, "threshold_nodes": MIN_OFF_GPU_NODES,
         "layers": [{"name": layer.name, "op_type": layer.op_type, "ms": layer.median_ms}
                    for layer in (on_cpu + copies)[:20]],
         "source": prof.source},
    )


def nchw_convs(candidate: BenchResult, graph: Mapping[str, Mapping[str, Any]] | None,
               speedup: float | None = None) -> Finding | None:
    """An fp16 candidate that ran its Convs in NCHW on a backend with an NHWC layout option."""
    if candidate.precision != "fp16":
        return None
    caps = backends.capabilities(candidate.backend)
    option = caps.layout_option
    options = provider_options(candidate)
    if caps.device != "cuda" or option is None or options is None or str(options.get(option)) != NCHW:
        return None
    convs, source = conv_count(candidate, graph)
    if convs < MIN_CONVS:
        return None
    measured = f"; measured here fp16 {speedup:.2f}× the baseline" if speedup is not None else ""
    return Finding(
        "ort_nchw",
        f"fp16 at batch {candidate.batch_size} ran its {plural(convs, 'Conv')} in NCHW ({option} {NCHW}): cuDNN's FP16 "
        "tensor-core convolutions want NHWC, so NCHW FP16 convolutions run slower kernels or transposes around "
        f"them (ResNet-50 on an H200: fp16 2.64× fp32 in NCHW, 3.84× with {option}=1){measured}; "
        "`--what-if nhwc` measures it on this model",
        {"precision": candidate.precision, "batch_size": candidate.batch_size, option: NCHW, "convs": convs,
         "convs_from": source, "threshold_convs": MIN_CONVS, "speedup": speedup, "what_if": "nhwc"},
    )


def graph_refused(baseline: BenchResult, candidate: BenchResult) -> Finding | None:
    """Arms whose runtime refused its own CUDA graph (the launch record's reason), so they ran eager."""
    refused: dict[str, str] = {}
    by = ""
    for result in (baseline, candidate):
        if backends.capabilities(result.backend).graph_capture != "runner":
            continue
        launch = launch_record(getattr(result, "device", None))
        reason = capture_failure(getattr(result, "device", None))
        if launch.get("graph_by") and reason:
            refused[result.precision] = reason
            by = str(launch["graph_by"])
    if not refused:
        return None
    arms = " and ".join(refused)
    reasons = "; ".join(dict.fromkeys(refused.values()))
    return Finding(
        "ort_graph_refused",
        f"{arms} at batch {candidate.batch_size} ran eager: {by} refused its CUDA graph ({reasons}). It captures "
        "one only when every node runs on the CUDA EP with static shapes; eager, each node's launch is host time "
        "the graph would remove (most at small batches). Export with static shapes and a fixed batch, or fold "
        "the shape nodes with onnxsim, so that every node runs on the CUDA EP",
        {"refused": refused, "graph_by": by, "batch_size": candidate.batch_size},
    )


def unsearched_convs(candidate: BenchResult, graph: Mapping[str, Mapping[str, Any]] | None) -> Finding | None:
    """The recorded cuDNN search mode is DEFAULT: one fixed algorithm for every Conv."""
    mode = search_mode(candidate)
    if mode is None or mode.upper() != UNSEARCHED or backends.capabilities(candidate.backend).device != "cuda":
        return None
    convs, source = conv_count(candidate, graph)
    if convs < MIN_CONVS:
        return None
    return Finding(
        "ort_cudnn_search",
        f"{candidate.precision} at batch {candidate.batch_size}: {SEARCH_OPTION} {mode}: ORT runs every one of the "
        f"{plural(convs, 'Conv')} with one fixed cuDNN algorithm (IMPLICIT_PRECOMP_GEMM), not the fastest for its "
        "shape and precision (onnxruntime#22705); EXHAUSTIVE (trtprof's choice) or HEURISTIC picks per Conv",
        {"precision": candidate.precision, "convs": convs, "convs_from": source},
    )


def ort_findings(baseline: BenchResult, candidate: BenchResult, *, table: LayerTable | None = None,
                 graph: Mapping[str, Mapping[str, Any]] | None = None,
                 speedup: float | None = None) -> list[Finding]:
    """Every ORT-on-GPU rule with evidence for one baseline/candidate pair; each finding's evidence names
    the cuDNN search mode the candidate recorded (``cudnn_conv_algo_search``; None where not recorded)."""
    found = [cpu_ep_nodes(table, candidate.precision) if table is not None else None,
             nchw_convs(candidate, graph, speedup), graph_refused(baseline, candidate),
             unsearched_convs(candidate, graph)]
    mode = search_mode(candidate)
    return [Finding(f.rule, f.message, {**f.evidence, SEARCH_OPTION: mode}) for f in found if f is not None]
