"""Diagnosis rules that need the per-layer table or the graph: each finding carries its evidence.

Silent without evidence: no table → no layer rule; a node whose shapes are unknown → no eligibility
claim. Thresholds are named constants with their reasons.
"""
from __future__ import annotations

from typing import Any, Mapping

from .. import backends
from .findings import Finding
from ..util.wording import plural
from ..layers.graph import tensor_core_ineligible_nodes
from ..layers.table import CAST, FP32_PRECISIONS, REFORMAT, SLOWER_MARGIN, LayerTable

# A finding about a group of layers is worth reading when the group holds this much of the time:
# smaller groups cannot explain a verdict (and profiler jitter is ~1 % of a layer table's total).
MIN_SHARE = 0.05
# GPU idle gaps: the GPU ran kernels for less than this share of the measured compute time (events
# around the enqueue), so the rest was waiting for the host (launch latency, Python).
KERNEL_BUSY_SHARE = 0.5
TOP = 5
# SDPA NaN guards (``layers.graph.nan_guards``) in the graph before the finding speaks: one is enough, since
# each is an IsNaN and a Where over a whole [batch, heads, seq, seq] score tensor that the eager attention
# does not run (BERT-base's 12, fp16 batch 64 on the H200: +777 µs of a ~5.6 ms pass).
NAN_GUARD_MIN = 1
# The precisions whose comparisons the guard finding speaks to: the half-precision candidates, where the
# memory passes weigh most against the GEMMs they sit between.
HALF_PRECISIONS = ("fp16", "bf16")
NAN_GUARD_MEASURED = ("measured: BERT-base fp16 13 % slower on an H200 "
                      "(benchmarks/results/torch_transformers-H200-2026-12-02b)")


def fp16_slower_layers(table: LayerTable, candidate: str) -> Finding | None:
    base = table.baseline
    if candidate not in table.profiles or base not in table.profiles:
        return None
    total_c = table.profiles[candidate].total_ms
    base_fp32 = str(table.profiles[base].precision).split("#")[0] in FP32_PRECISIONS
    slower: list[dict[str, Any]] = []
    same_fp32: list[str] = []  # layers that ran the same FP32 kernels in both arms: no FP16 claim (issue 44)
    for r in table.rows:
        if r.runs_fp32(candidate) and (base_fp32 or r.runs_fp32(base)):
            same_fp32.append(r.name)
            continue
        ratio = r.ratio(candidate, base)
        if ratio is None or ratio <= 1 + SLOWER_MARGIN:
            continue
        slower.append({"name": r.name, "op_type": r.op_type, "kind": r.kind, f"{base}_ms": r.time_ms[base],
                       f"{candidate}_ms": r.time_ms[candidate], "ratio": ratio,
                       "share": r.share.get(candidate), "tensor_core": r.tensor_core(candidate)})
    if not slower:
        return None
    slower.sort(key=lambda x: -(x[f"{candidate}_ms"] - x[f"{base}_ms"]))
    extra = sum(x[f"{candidate}_ms"] - x[f"{base}_ms"] for x in slower)
    share = sum(x["share"] or 0.0 for x in slower)
    if share < MIN_SHARE:
        return None
    names = ", ".join(f"{x['name']} ({x['ratio']:.2f}×)" for x in slower[:TOP])
    return Finding(
        "fp16_slower_layers",
        f"{plural(len(slower), 'layer')} {'is' if len(slower) == 1 else 'are'} slower in {candidate} than in {base} at batch {table.batch_size} "
        f"(+{extra:.3g} ms, {share:.0%} of {candidate}'s profiled time): {names}"
        + (f"; {plural(len(same_fp32), 'layer')} that ran the same FP32 kernels in both left out" if same_fp32 else ""),
        {"candidate": candidate, "baseline": base, "batch_size": table.batch_size, "layers": slower[:20],
         "extra_ms": extra, "share_of_candidate": share, "candidate_total_ms": total_c, "margin": SLOWER_MARGIN,
         "left_out_fp32_in_both": same_fp32[:20]},
    )


def cast_reformat_share(table: LayerTable, candidate: str) -> Finding | None:
    if candidate not in table.profiles:
        return None
    rows = [r for r in table.rows if r.kind in (CAST, REFORMAT) and r.time_ms.get(candidate)]
    share = table.share_of_kind(candidate, (CAST, REFORMAT))
    if not rows or share < MIN_SHARE:
        return None
    ms = sum(r.time_ms[candidate] or 0.0 for r in rows)
    return Finding(
        "cast_reformat",
        f"{candidate} at batch {table.batch_size}: casts/reformats take {ms:.3g} ms, {share:.0%} of the profiled "
        f"time ({plural(len(rows), 'layer')}, e.g. {', '.join(r.name for r in rows[:3])}): time FP16 adds, not saves",
        {"candidate": candidate, "share": share, "ms": ms,
         "layers": [{"name": r.name, "op_type": r.op_type, "kind": r.kind, "ms": r.time_ms[candidate]} for r in rows[:20]]},
    )


def tensor_core_ineligible(graph: Mapping[str, Mapping[str, Any]], candidate: str,
                           table: LayerTable | None = None, *, kernels: LayerTable | None = None) -> Finding | None:
    """FP16 (or TF32) layers whose channels/GEMM dims are not multiples of 8, with their time share
    (from the profile ``table``) or, without one, their FLOP share of the counted ops; where ``kernels`` (default
    ``table``; a table on the host's clock whose time shares are not used) has their GPU kernels
    (``LayerTable.gpu_kernels``), which of them ran no tensor-core kernel (``kernel_evidence``)."""
    if candidate not in ("fp16", "tf32") or not graph:
        return None
    bad = tensor_core_ineligible_nodes(graph)
    if not bad:
        return None
    evidence_rows = []
    if table is not None and candidate in table.profiles and table.profiles[candidate].total_ms > 0:
        by_name = {r.name: r for r in table.rows}
        share = 0.0
        for name, f in bad.items():
            row = by_name.get(name)
            s = row.share.get(candidate) if row is not None else None
            share += s or 0.0
            evidence_rows.append({"name": name, "op_type": f["op_type"], "reasons": f["tensor_core"]["reasons"],
                                  "share": s, "ms": row.time_ms.get(candidate) if row else None,
                                  "tensor_core_kernels": row.tensor_core(candidate) if row else None})
        basis = "profiled time"
    else:
        total = sum(int(f.get("flops") or 0) for f in graph.values())
        share = sum(int(f.get("flops") or 0) for f in bad.values()) / total if total else 0.0
        for name, f in bad.items():
            evidence_rows.append({"name": name, "op_type": f["op_type"], "reasons": f["tensor_core"]["reasons"],
                                  "flops": f.get("flops")})
        basis = "counted FLOPs (no per-layer profile: run with --layers for time shares)"
    if share < MIN_SHARE:
        return None
    evidence_rows.sort(key=lambda x: -(x.get("share") or x.get("flops") or 0))
    example = evidence_rows[0]
    kernels_table = kernels if kernels is not None else table
    evidence = kernel_evidence(kernels_table, candidate, list(bad)) if kernels_table is not None else None
    return Finding(
        "tensor_core_ineligible",
        f"{plural(len(bad), candidate.upper() + ' layer')} cannot fill tensor cores — channel counts / GEMM dims are not "
        f"multiples of 8 (e.g. {example['name']}: {', '.join(example['reasons'])}) — and they hold {share:.0%} of the "
        f"{basis}; {candidate.upper()}'s tensor-core peak does not apply to them"
        + (f"; {evidence['text']}" if evidence else "")
        + " (pad channels to multiples of 8, `--what-if pad-channels`, or keep these layers in FP32, "
          "`--what-if keep-fp32`: each measures its answer)",
        {"candidate": candidate, "share": share, "basis": basis, "layers": evidence_rows[:20],
         "multiple": 8, "guidance": "NVIDIA Deep Learning Performance Guide: Tensor Core Requirements",
         **({"kernels": {k: v for k, v in evidence.items() if k != "text"}} if evidence else {})},
    )


def short_kernel(name: str, width: int = 48) -> str:
    """A kernel's name as a reader scans it: no ``void``, template arguments and parameters elided, the label
    trtprof appends (`` (CUDAExecutionProvider)``) dropped; at most ``width`` characters."""
    text = name.removeprefix("void ").strip()
    cut = min((i for i in (text.find("<"), text.find("(")) if i > 0), default=len(text))
    base = text[:cut] + ("<…>" if text[cut:cut + 1] == "<" else "")
    return base if len(base) <= width else base[:width - 1] + "…"


def kernel_evidence(table: LayerTable, candidate: str, names: list[str]) -> dict[str, Any] | None:
    """Which of the layers ``names`` ran no tensor-core kernel in ``candidate``'s profile, from their GPU kernels'
    names (``layers.kernels.uses_tensor_cores``; also where the table compares host times, ``gpu_kernels``), with
    their GPU time and its share of the candidate's; None when no such layer's kernels are known, or where one
    of them did use tensor cores (then the dims are not what decided its kernel). A layer counts by its main kernel
    (the most time): a CUDA-core one, with no tensor-core kernel beside it; small kernels whose names do not tell
    (cuDNN's ``op_generic_tensor_kernel`` adding a bias) do not decide it."""
    kernels = table.gpu_kernels(candidate)
    with_kernels = {n: kernels[n] for n in names if kernels.get(n)}
    if any(any(k.tensor_core for k in ks) for ks in with_kernels.values()):
        return None
    known = {n: ks for n, ks in with_kernels.items() if max(ks, key=lambda k: k.median_ms).tensor_core is False}
    if not known:
        return None
    ms = {n: sum(k.median_ms for k in ks) for n, ks in known.items()}
    total = table.gpu_total_ms(candidate) or 0.0
    top = max(known, key=lambda n: ms[n])
    main = max(known[top], key=lambda k: k.median_ms)
    share = sum(ms.values()) / total if total > 0 else None
    text = (f"their {candidate} kernels use no tensor cores: {plural(len(known), 'layer')} ran on CUDA-core kernels, none on a "
            f"tensor-core one (e.g. {top}: {short_kernel(main.name)}), {sum(ms.values()):.3g} ms"
            + (f", {share:.0%} of {candidate}'s kernel time" if share is not None else ""))
    return {"text": text, "cuda_core_layers": {n: [k.name for k in ks][:3] for n, ks in known.items()},
            "cuda_core_ms": sum(ms.values()), "share_of_kernel_time": share}


def sdpa_nan_guard(graph: Mapping[str, Mapping[str, Any]] | None, candidate: str,
                   backend: str = "") -> Finding | None:
    """The NaN guard ``torch.onnx.export`` writes after each decomposed SDPA Softmax, counted from the graph
    facts (``nan_guard`` on a Where, ``layers.graph.nan_guards``). The count rides on the compare's graph facts
    (``PairEvidence.graph``) rather than an engine's backend metadata: those facts already carry the source
    graph to ``diagnose`` for every backend, and the guard is a property of that graph, the same for every
    arm (backend metadata would need each backend's build to census it). So it speaks where the graph facts
    exist: a GPU compare whose model shape inference reads. ``backend``: the candidate's, for the advice
    (the ``--what-if ort-fusions`` line where its capabilities run ONNX Runtime's contrib ops). trtprof
    measures the graph as given and does not remove the guard (that would change the outputs of fully
    masked rows)."""
    if candidate not in HALF_PRECISIONS or not graph:
        return None
    guards = {name: str(f["nan_guard"]) for name, f in graph.items() if f.get("nan_guard")}
    if len(guards) < NAN_GUARD_MIN:
        return None
    where, softmax = next(iter(guards.items()))
    advice = ("export with eager attention (transformers: attn_implementation=\"eager\"; timm: fused attention "
              "off)")
    if backends.capabilities(backend).ort_contrib_ops:  # the backends ``--what-if ort-fusions`` runs on
        advice += ("; `--what-if ort-fusions` measures ONNX Runtime's attention fusion of a copy (onnxruntime "
                   "1.32's BERT pattern has no Where after the Softmax: guarded layers may stay unfused)")
    return Finding(
        "sdpa_nan_guard",
        f"the export's SDPA NaN guard: {plural(len(guards), 'Softmax output')} "
        f"{'passes' if len(guards) == 1 else 'pass'} through IsNaN + Where (e.g. {softmax} → {where}): two "
        "extra passes over the attention scores per layer, which the model's own eager attention does not run; "
        f"{advice} ({NAN_GUARD_MEASURED})",
        {"candidate": candidate, "guards": len(guards), "where_to_softmax": dict(list(guards.items())[:20]),
         "threshold": NAN_GUARD_MIN, "measured": "benchmarks/results/torch_transformers-H200-2026-12-02b"},
    )


def kernel_clock(prof: Any) -> bool:
    """Whether a profile's layer times are GPU kernel times: as the profile says (ONNX Runtime's CUDA EP where
    CUPTI captured its kernels), else as its backend's capabilities say."""
    own = getattr(prof, "kernel_times", None)
    return bool(own) if own is not None else backends.capabilities(prof.backend).kernel_times


def gpu_idle_gaps(table: LayerTable, precision: str, compute_ms: float | None) -> Finding | None:
    """Host/launch-bound from the kernels: measured GPU compute time (events around the enqueue)
    minus the profiled kernel time is time the GPU waited for the host."""
    prof = table.profiles.get(precision)
    if prof is None or compute_ms is None or compute_ms <= 0 or not kernel_clock(prof):
        return None
    kernels = prof.iteration_total_ms if prof.iteration_total_ms is not None else prof.total_ms
    busy = kernels / compute_ms
    if busy >= KERNEL_BUSY_SHARE:
        return None
    return Finding(
        "host_bound",
        f"{precision} at batch {table.batch_size}: the GPU ran kernels for {kernels:.3g} ms of the {compute_ms:.3g} ms "
        f"measured compute time ({busy:.0%}); the rest ({compute_ms - kernels:.3g} ms) it waited for the host "
        "(launches, Python): FP16 shortens kernels, not that wait (CUDA graphs remove most of it)",
        {"precision": precision, "kernel_ms": kernels, "compute_ms": compute_ms, "busy_share": busy,
         "threshold": KERNEL_BUSY_SHARE, "source": prof.source},
    )


def on_gpu(table: LayerTable | None, candidate: str) -> bool:
    """Tensor cores only matter for GPU engines (their backend's device is CUDA: torch, TensorRT, ONNX
    Runtime's CUDA provider)."""
    prof = table.profiles.get(candidate) if table is not None else None
    if prof is None:
        return False
    return (backends.capabilities(prof.backend).device == "cuda"
            or str(prof.config.get("provider", "")).startswith("CUDA"))


def host_clock(table: LayerTable | None, candidate: str) -> Finding | None:
    """A GPU engine profiled on the host's clock (``Capabilities.kernel_times`` False: ONNX Runtime's session
    profiler on its CUDA EP times each node's launch, not its kernels, in release builds without CUPTI):
    its layer times cannot carry a claim about where the GPU's time goes, so the time-share rules are off
    and this finding says why (on the H200 the report net's fp32 batch-10 nodes summed to 0.21 ms of a
    9.8 ms GPU iteration)."""
    prof = table.profiles.get(candidate) if table is not None else None
    if prof is None:
        return None
    if not backends.capabilities(prof.backend).host_clock_on_gpu or kernel_clock(prof):
        return None
    # why there are no GPU times: CUPTI captured them but another precision of this table could not be tied to
    # nodes (``layers.profile.one_clock`` set them aside, keeping them as the twin), or its own capture could not be
    # (``attributed_share`` under the minimum), or CUPTI is not installed
    aside = prof.gpu_twin is not None
    tied = prof.config.get("attributed_share")
    if aside:
        remedy = ("GPU kernel times per layer were captured but set aside (another precision's GPU work could not be "
                  "tied to nodes, and one table compares one clock)")
    elif isinstance(tied, (int, float)):
        remedy = (f"GPU kernel times per layer were captured (CUPTI) but only {tied:.0%} of the GPU's work could be "
                  "tied to a node, too little to use")
    else:
        remedy = "GPU kernel times per layer: pip install 'trtprof[cupti]' (CUPTI), or --backend torch"
    return Finding(
        "layer_times_host_clock",
        f"{candidate}'s per-layer times on {prof.backend} are host times ({prof.source}): each is the launch of a "
        "node's kernels, not their run on the GPU, so no layer-time share is claimed here (tensor-core shares "
        f"use counted FLOPs); {remedy}",
        {"candidate": candidate, "backend": prof.backend, "source": prof.source, "gpu_times_set_aside": aside})


def layer_findings(table: LayerTable | None, graph: Mapping[str, Mapping[str, Any]] | None, candidate: str,
                   compute_ms: Mapping[str, float | None] | None = None, *, gpu: bool | None = None) -> list[Finding]:
    """Every layer/graph rule with evidence for one candidate (and the gap rule for both sides).
    ``gpu``: whether the engines run on a GPU (default: read from the table's profiles). A GPU table on the
    host's clock (``host_clock``) gives the structural rules only."""
    out: list[Finding | None] = []
    graph = graph if graph is not None else (table.graph if table is not None else {})
    hosted = host_clock(table, candidate)
    if hosted is not None:
        # shares from counted FLOPs, not host times; the kernels CUPTI tied to the layers (their names) still hold
        return [f for f in (hosted, tensor_core_ineligible(graph or {}, candidate, None, kernels=table)) if f is not None]
    if gpu if gpu is not None else on_gpu(table, candidate):
        out.append(tensor_core_ineligible(graph or {}, candidate, table))
    if table is not None:
        out.append(fp16_slower_layers(table, candidate))
        out.append(cast_reformat_share(table, candidate))
        for precision, ms in (compute_ms or {}).items():
            out.append(gpu_idle_gaps(table, precision, ms))
    return [f for f in out if f is not None]
