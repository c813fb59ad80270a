"""Per-node GPU kernel times of the torch backend from torch.profiler (CUPTI).

Every onnx2torch submodule is one ONNX node; forward hooks open a ``record_function`` range named
after the node around it, so each CUDA kernel (linked by CUPTI's correlation id to the aten op that
launched it) is attributed to the innermost node range above that op. The FP16 runner's input cast
and the output copy (a cast to float32 in FP16) get ranges of their own. Kernels outside every range
are one "(unattributed)" row. Each iteration runs inside an ``iteration`` range, so per-node times
are medians over iterations of that node's summed kernel time.

Eager only: a replayed CUDA graph has no per-op launches to attribute. Autotuning (cudnn.benchmark)
follows the runner's setting, and the warmup runs before the profiler starts, so the profiled
kernels are the ones the timing loop runs.
"""
from __future__ import annotations

from builtins import id as builtins_id
from collections import defaultdict
from typing import Any, Callable, Iterable, Mapping, Sequence

import numpy as np

from ..backends.torch import cudnn_mode, import_onnx2torch
from .graph import node_key
from .kernels import uses_tensor_cores
from .table import KernelTime, LayerTiming, PrecisionProfile, kind_of

SOURCE = "torch.profiler (CUPTI kernel times, attributed to ONNX nodes by record_function ranges)"
PREFIX = "trtprof::"
ITERATION = PREFIX + "iteration"
INPUT_CAST = PREFIX + "(input cast)"
OUTPUT_COPY = PREFIX + "(output copy)"
UNATTRIBUTED = "(unattributed)"
# Kernel time may exceed the elapsed time of the profiled iterations by a little (event placement,
# the last iteration's tail); 5 % more means double counting or concurrency, which the notes say.
OVERCOUNT = 0.05


def attribute_kernels(events: Iterable[Any]) -> tuple[dict[str, dict[int, dict[str, list[float]]]], dict[int, float]]:
    """{range label: {iteration key: {kernel name: [µs per launch]}}} and {iteration key: Σ kernel µs};
    the key of an iteration is the identity of its ``trtprof::iteration`` event object.

    ``events`` are torch.autograd FunctionEvents (or fakes with ``name``, ``id``, ``cpu_parent`` and
    ``kernels`` of ``name``/``duration`` µs). Kernels hang on the op that launched them; the label is
    the innermost ``trtprof::`` range above that op, the iteration the ``trtprof::iteration`` above it.
    """
    out: dict[str, dict[int, dict[str, list[float]]]] = defaultdict(lambda: defaultdict(lambda: defaultdict(list)))
    totals: dict[int, float] = defaultdict(float)
    for ev in events:
        kernels = getattr(ev, "kernels", None)
        if not kernels:
            continue
        label, iteration = None, None
        node = ev
        while node is not None:
            name = str(getattr(node, "name", ""))
            if name == ITERATION:
                # the event object itself, not its ``id`` (torch sets it to kineto's correlation id,
                # which need not be unique). On the H200 the ids were distinct (the profile records
                # ``iteration_event_ids_distinct``); the doubled large-batch ResNet-50 sums came from
                # this op tree hanging kernels twice, which is why the launch attribution is preferred
                iteration = builtins_id(node)
                break
            if label is None and name.startswith(PREFIX):
                label = name[len(PREFIX):]
            node = getattr(node, "cpu_parent", None)
        if iteration is None:
            continue  # outside the profiled iterations
        for k in kernels:
            if str(k.name).startswith(PREFIX):
                continue  # a range's span on the GPU timeline, not a kernel (see attribute_by_launch)
            us = float(k.duration)
            out[label or UNATTRIBUTED][iteration][str(k.name)].append(us)
            totals[iteration] += us
    return out, totals


def attribute_by_launch(raw: Iterable[Any], cpu: Any, gpu_types: tuple[Any, ...]) -> tuple[
        dict[str, dict[int, dict[str, list[float]]]], dict[int, float], dict[str, Any]]:
    """The same result as ``attribute_kernels`` from torch's raw kineto events, by time.

    Each GPU activity (kernel, memcpy, memset) has the CUPTI correlation id of the runtime call that
    launched it (``cudaLaunchKernel``…, a CPU event); the launch's host timestamp falls inside the
    ``trtprof::`` ranges that were open then, on that thread. Where no runtime call was recorded
    (libraries launching through the driver API, which kineto may not trace), the activity's linked
    correlation id names the CPU op that was running when it was launched, and that op's start time
    stands in for the launch. A sweep over range starts/ends and launches gives the innermost node
    range and the iteration. Every GPU activity is counted once, whatever the op tree looks like.
    Returns (attributed, per-iteration totals µs, counts and checks)."""
    raw = list(raw)
    launches, ops, ranges = host_side(raw, cpu)
    # kineto also puts every record_function range on the GPU timeline (a "gpu_user_annotation"
    # spanning that range's kernels, named like the range): a span, not work; counted, it doubles the
    # range's time. On the H200 these were a third of the GPU records and none has a launch.
    every = [k for k in raw if k.device_type() in gpu_types]
    gpu = [k for k in every if not k.name().startswith(PREFIX)]
    # (time, order, index): at equal times starts (0) sort before launches (1) before ends (2), so a
    # launch at a range's first or last nanosecond is inside it
    points: list[tuple[int, int, int]] = []
    for i, (a, b, _name, _tid) in enumerate(ranges):
        points.append((a, 0, i))
        points.append((b, 2, i))
    matched = linked = 0
    unmatched: dict[str, float] = defaultdict(float)
    seen: set[tuple[int, int, str]] = set()
    duplicates = 0
    for j, k in enumerate(gpu):
        key = (k.correlation_id(), k.start_ns(), k.name())
        if key in seen:
            duplicates += 1  # one activity reported twice: counted once
            continue
        seen.add(key)
        launch = launches.get(k.correlation_id())
        if launch is None:
            link = getattr(k, "linked_correlation_id", None)
            launch = ops.get(link()) if link is not None and link() > 0 else None
            if launch is not None:
                linked += 1
        else:
            matched += 1
        if launch is None:
            unmatched[k.name()] += k.duration_ns() / 1e3
            continue
        points.append((launch, 1, j))
    out, totals, outside_us = sweep(sorted(points), ranges, gpu)
    counts: dict[str, Any] = {"gpu_activities": len(gpu), "gpu_range_spans_skipped": len(every) - len(gpu),
                              "matched_to_launch": matched, "matched_by_linked_op": linked,
                              "duplicate_records": duplicates, "outside_iterations_us": outside_us,
                              "iterations": sum(1 for r in ranges if r[2] == ITERATION)}
    if unmatched:
        counts["unmatched_us_by_name"] = dict(sorted(unmatched.items(), key=lambda kv: -kv[1])[:5])
    return out, totals, counts


def host_side(raw: Sequence[Any], cpu: Any) -> tuple[dict[int, int], dict[int, int], list[tuple[int, int, str, int]]]:
    """From the CPU events: launch time per correlation id (runtime calls), start time per op's
    correlation id (what a GPU activity's linked id refers to), and the ``trtprof::`` ranges
    (start ns, end ns, name, thread)."""
    launches: dict[int, int] = {}
    ops: dict[int, int] = {}
    ranges: list[tuple[int, int, str, int]] = []
    for k in raw:
        if k.device_type() != cpu:
            continue
        name = k.name()
        if name.startswith(PREFIX):
            ranges.append((k.start_ns(), k.end_ns(), name, k.start_thread_id()))
        if name.startswith(("cuda", "cu")) and k.correlation_id() > 0:
            launches[k.correlation_id()] = k.start_ns()
        else:  # an op or a range: the id a GPU activity's linked correlation id refers to
            ops.setdefault(k.correlation_id(), k.start_ns())
    return launches, ops, ranges


def sweep(points: Sequence[tuple[int, int, int]], ranges: Sequence[tuple[int, int, str, int]],
          gpu: Sequence[Any]) -> tuple[dict[str, dict[int, dict[str, list[float]]]], dict[int, float], float]:
    """Walk the sorted (time, start 0 / launch 1 / end 2, index) points: each launch goes to the
    innermost open node range of the open iteration. Returns (label → iteration → kernel → µs list,
    per-iteration totals µs, µs launched outside any iteration)."""
    out: dict[str, dict[int, dict[str, list[float]]]] = defaultdict(lambda: defaultdict(lambda: defaultdict(list)))
    totals: dict[int, float] = defaultdict(float)
    open_nodes: list[int] = []
    iteration: int | None = None
    outside_us = 0.0
    for _t, kind, i in points:
        if kind == 0:
            if ranges[i][2] == ITERATION:
                iteration = i
            else:
                open_nodes.append(i)
        elif kind == 2:
            if ranges[i][2] == ITERATION:
                iteration = None
            elif i in open_nodes:
                open_nodes.remove(i)
        elif iteration is not None:
            k = gpu[i]
            label = ranges[open_nodes[-1]][2][len(PREFIX):] if open_nodes else UNATTRIBUTED
            us = k.duration_ns() / 1e3
            out[label][iteration][k.name()].append(us)
            totals[iteration] += us
        else:
            outside_us += gpu[i].duration_ns() / 1e3
    return out, totals, outside_us


def summarize(attributed: Mapping[str, Mapping[int, Mapping[str, list[float]]]], iterations: list[int],
              op_types: Mapping[str, str], order: list[str], *, half: bool = False) -> tuple[LayerTiming, ...]:
    """Per label: median over iterations of its summed kernel time (an iteration without its kernels
    counts 0), and per kernel name the median per-iteration time and launches. The output copy is a
    cast row when ``half`` (FP16 outputs copied into float32 buffers), a plain copy otherwise."""
    labels = [n for n in order if n in attributed] + [n for n in attributed if n not in order]
    layers = []
    for label in labels:
        per_iter = attributed[label]
        sums = [sum(sum(v) for v in per_iter.get(i, {}).values()) for i in iterations]
        names: list[str] = []
        for i in iterations:
            for k in per_iter.get(i, {}):
                if k not in names:
                    names.append(k)
        kernels = []
        for k in names:
            times = [sum(per_iter.get(i, {}).get(k, [])) for i in iterations]
            calls = [len(per_iter.get(i, {}).get(k, [])) for i in iterations]
            kernels.append(KernelTime(name=k, median_ms=float(np.median(times)) / 1e3,
                                      calls=int(np.median(calls)), tensor_core=uses_tensor_cores(k)))
        op = op_types.get(label, "Cast" if label == "(input cast)" else "Copy" if label == "(output copy)" else "")
        kind = kind_of(op, label)
        if label == "(output copy)":
            kind = "cast" if half else "other"
        layers.append(LayerTiming(name=label, op_type=op, kind=kind, median_ms=float(np.median(sums)) / 1e3,
                                  kernels=tuple(sorted(kernels, key=lambda k: -k.median_ms))))
    return tuple(layers)


def profile_torch(runner: Any, feeds: Mapping[str, np.ndarray], *, iterations: int, warmup: int,
                  batch_size: int, backend: str, onnx_model: Any = None) -> PrecisionProfile:
    """Profile a loaded ``TorchRunner`` eagerly: ``warmup`` unprofiled calls, then ``iterations``; the profile is
    labelled ``backend`` (the engine record's)."""
    import torch
    from torch.profiler import record_function

    label_of, op_types, order = onnx_node_labels(onnx_model)
    handles = install_layer_ranges(per_node_module(runner), label_of)
    input_shapes = {name: tuple(int(d) for d in arr.shape) for name, arr in feeds.items()}
    runner.prepare(input_shapes)
    xs = [torch.from_numpy(np.ascontiguousarray(feeds[t.name])).to("cuda") for t in runner.inputs]
    half = runner.precision.value == "fp16"
    dsts: list[Any] = []

    def one() -> None:
        # the runner's own input cast and forward (what the timing loop runs): the cast inside the
        # input-cast range; ``_run``'s own cast of these already-cast tensors then launches nothing
        with record_function(INPUT_CAST):
            args = [runner.cast_in(x, t.name) for x, t in zip(xs, runner.inputs)]
        outs = runner._run(args)
        if not dsts:  # the runner copies into float32 (fp16: a cast) buffers the profiler owns: same here
            dsts.extend(torch.empty(tuple(o.shape), dtype=getattr(torch, spec.dtype), device="cuda")
                        for spec, o in zip(runner.outputs, outs))
        with record_function(OUTPUT_COPY):
            for dst, o in zip(dsts, outs):
                dst.copy_(o)

    try:
        prof, elapsed_ms, unprofiled_ms = run_profiled(torch, runner, one, iterations, warmup)
    finally:
        for h in handles:
            h.remove()
    attributed, totals, iteration_ids, attribution = attribute_profile(prof)
    layers = summarize(attributed, iteration_ids, op_types, order, half=half)
    total = float(np.median([totals.get(i, 0.0) for i in iteration_ids])) / 1e3 if iteration_ids else None
    return PrecisionProfile(precision=runner.precision.value, backend=backend, source=SOURCE, batch_size=batch_size,
                            iterations=iterations, layers=layers, iteration_total_ms=total,
                            config={"warmup": warmup, "autotune": runner.autotune, "tf32": runner.tf32,
                                    "attribution": attribution, "profiled_elapsed_ms_per_iteration": elapsed_ms,
                                    "unprofiled_elapsed_ms_per_iteration": unprofiled_ms},
                            notes=profile_notes(total, elapsed_ms, unprofiled_ms))


def onnx_node_labels(onnx_model: Any) -> tuple[dict[str, str], dict[str, str], list[str]]:
    """(onnx2torch submodule name → node label, node label → op type, labels in node order).

    onnx2torch names each submodule after its node (OnnxGraph's unique names, in node order); without
    the ONNX model the submodule names are the labels."""
    op_types: dict[str, str] = {}
    label_of: dict[str, str] = {}
    order: list[str] = []
    if onnx_model is not None:
        import_onnx2torch()  # tolerates a broken torchvision (see there)
        from onnx2torch.onnx_graph import OnnxGraph

        graph = OnnxGraph(onnx_model.graph)
        for i, (unique, onode) in enumerate(graph.nodes.items()):
            key = node_key(onode.proto, i)
            label_of[unique] = key
            op_types[key] = onode.proto.op_type
            order.append(key)
    return label_of, op_types, order


def per_node_module(runner: Any) -> Any:
    """The runner's module as onnx2torch converts it, one submodule per ONNX node: a runner loaded from
    a saved ``torch.export`` program (one flat graph of ATen ops) swaps to the conversion first."""
    swap = getattr(runner, "use_per_node_module", None)
    if swap is not None:
        swap("per-layer ranges need one submodule per ONNX node")
    return runner.module


def install_layer_ranges(module: Any, label_of: Mapping[str, str]) -> list[Any]:
    """A profiler range (``PREFIX`` + node label) around each top-level submodule's forward, through
    forward pre/post hooks; returns the hook handles to remove afterwards."""
    from torch.profiler import record_function

    stack: list[Any] = []
    handles = []
    for name, child in module.named_children():
        if name == "initializers":
            continue
        label = PREFIX + label_of.get(name, name)

        def pre(_m: Any, _args: Any, label: str = label) -> None:
            rf = record_function(label)
            rf.__enter__()
            stack.append(rf)

        def post(_m: Any, _args: Any, _out: Any) -> None:
            if stack:
                stack.pop().__exit__(None, None, None)

        handles.append(child.register_forward_pre_hook(pre))
        handles.append(child.register_forward_hook(post))
    return handles


def run_profiled(torch: Any, runner: Any, one: Callable[[], None], iterations: int,
                 warmup: int) -> tuple[Any, float, float]:
    """``warmup`` calls, ``iterations`` profiled calls (each in an ``ITERATION`` range), then the same
    iterations unprofiled. Returns (profiler, profiled ms per iteration, unprofiled ms per iteration)."""
    from torch.profiler import ProfilerActivity, profile, record_function

    with torch.inference_mode(), cudnn_mode(torch, runner.tf32, runner.autotune):
        for _ in range(warmup):
            one()
        torch.cuda.synchronize()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
            start.record()
            for _ in range(iterations):
                with record_function(ITERATION):
                    one()
            end.record()
            torch.cuda.synchronize()
        # the profiled iterations' own elapsed GPU time: kernel sums above it mean kernels were
        # counted twice; sums near it but above the latency run's compute time mean the profiled
        # run itself was slower (profiling perturbation)
        elapsed_ms = float(start.elapsed_time(end)) / iterations
        # the same iterations again without the profiler: the sums' own reference (profiling
        # perturbation shows as profiled > unprofiled elapsed; double counting as sums > profiled)
        start.record()
        for _ in range(iterations):
            one()
        end.record()
        torch.cuda.synchronize()
        unprofiled_ms = float(start.elapsed_time(end)) / iterations
    return prof, elapsed_ms, unprofiled_ms


def attribute_profile(prof: Any) -> tuple[Any, dict[Any, float], list[Any], dict[str, Any]]:
    """Kernel time per layer and per iteration: by launch time (kineto's runtime correlation) when it
    places at least 95 % of the GPU activities, else by the op tree. Returns (per-layer kernels,
    per-iteration totals, iteration ids, how it was attributed)."""
    events = list(prof.events())
    attributed, totals = attribute_kernels(events)
    iteration_ids = [builtins_id(e) for e in events if e.name == ITERATION]
    attribution: dict[str, Any] = {"method": "op tree (FunctionEvent.kernels)", "iteration_events": len(iteration_ids),
                                   "iteration_event_ids_distinct": len({int(e.id) for e in events if e.name == ITERATION})}
    try:  # prefer the launch-time attribution: one count per GPU activity (see attribute_by_launch)
        from torch.autograd import DeviceType

        raw = prof.profiler.kineto_results.events()
        by_launch, launch_totals, counts = attribute_by_launch(raw, DeviceType.CPU, (DeviceType.CUDA,))
        attribution.update(counts)
        placed = counts["matched_to_launch"] + counts["matched_by_linked_op"] + counts["duplicate_records"]
        if counts["gpu_activities"] and placed >= 0.95 * counts["gpu_activities"]:
            attribution["method"] = "launch time (kineto runtime correlation)"
            attribution["op_tree_total_us"] = float(np.median([totals.get(i, 0.0) for i in iteration_ids])) \
                if iteration_ids else None
            attributed, totals = by_launch, launch_totals
            iteration_ids = sorted(launch_totals)
    except Exception as err:  # noqa: BLE001 - an older/newer torch without these accessors
        attribution["launch_attribution_error"] = f"{type(err).__name__}: {err}"
    return attributed, totals, iteration_ids, attribution


def profile_notes(total: float | None, elapsed_ms: float, unprofiled_ms: float) -> tuple[str, ...]:
    """What a reader must know about the per-layer times: eager execution, kernels counted twice,
    and the profiler's own slow-down."""
    notes: tuple[str, ...] = ("eager execution (no CUDA graph) so that every kernel has a launching op to attribute",)
    if total is not None and total > elapsed_ms * (1 + OVERCOUNT):
        notes += (f"summed kernel time {total:.4g} ms per iteration exceeds the profiled iterations' elapsed "
                  f"{elapsed_ms:.4g} ms: some kernels were attributed more than once (or ran concurrently)",)
    if elapsed_ms > unprofiled_ms * (1 + OVERCOUNT) and total is not None and total > unprofiled_ms * (1 + OVERCOUNT):
        notes += (f"the profiled iterations took {elapsed_ms:.4g} ms each against {unprofiled_ms:.4g} ms unprofiled "
                  f"(same process, same inputs): the profiler slowed the GPU work, so the per-layer times overstate "
                  f"it by about {elapsed_ms / unprofiled_ms - 1:.0%}",)
    return notes
