"""One steady-state iteration per precision as a timeline: what ran where, when, and where the device idled.

Why: a table of per-layer medians says *which* layer got slower; a timeline says *why* the whole
iteration did — a host-bound FP16 engine shows as short kernels with long gaps between them, an FP16
engine that casts shows its casts as extra bars. Nsight Systems shows one run at a time in a separate
tool; here every precision's iteration sits on one time axis (same scale: the shorter one looks
shorter), on the page and as a PNG, and each is also written as a Chrome trace-event file that
ui.perfetto.dev and chrome://tracing open.

Sources (each a separate run after any timing, never inside a timed round):
- ONNX Runtime: its session profiler (``SessionOptions.enable_profiling``); lanes are ORT's threads,
  spans its executed nodes (host wall time: the CPU is the device there).
- PyTorch: ``torch.profiler`` with CUPTI; lanes are CUDA streams, spans the kernels, copies and memsets
  of one iteration (under CUDA graph replay too: CUPTI records a graph's kernels), labelled with the
  ONNX node that launched them where a profiler range says so (eager runs).
- TensorRT: its ``IProfiler`` gives per-layer times without start instants; laid end to end they are a
  sequence, not a timeline (``from_layer_times``, contract-tested on the recording fake only).
"""
from __future__ import annotations

import dataclasses
import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterable, Mapping, Sequence

from .. import backends
from ..util.console import unescape_figure_text

from .timeline_model import COLOURS, KINDS, Span, Timeline, kernel_kind

if TYPE_CHECKING:
    from ..model.inputs import FeedSettings

# An iteration whose device is idle for at least this share of it is launch- or host-bound: more than a
# third of the time nothing runs, so a faster kernel (FP16) cannot shorten the iteration by much.
HOST_BOUND_IDLE_SHARE = 0.30
PNG_PRODUCER = "trtprof timeline"  # the PNG's Software text chunk: a later run replaces only its own
TRACE_SCHEMA_PHASES = {"X", "M", "i", "B", "E"}  # the trace-event phases this module writes or accepts
TRACE_METADATA_NAMES = {"process_name", "thread_name"}  # the metadata ("M") events it writes


def added_of_kind(baseline: Timeline, candidate: Timeline, kind: str) -> tuple[int, float]:
    """Spans of ``kind`` the candidate runs beyond the baseline's: (count, µs of its longest that many)."""
    extra = len(candidate.of_kind(kind)) - len(baseline.of_kind(kind))
    if extra <= 0:
        return 0, 0.0
    durations = sorted((s.dur_us for s in candidate.of_kind(kind)), reverse=True)
    return extra, sum(durations[:extra])


def added_casts(baseline: Timeline, candidate: Timeline) -> tuple[int, float]:
    """Casts the candidate runs beyond the baseline's: (count, µs)."""
    return added_of_kind(baseline, candidate, "cast")


@dataclass(frozen=True)
class TimelineFinding:
    """One thing the timelines say: ``rule`` names it, ``precision`` is the timeline it is about."""

    rule: str
    precision: str
    message: str
    evidence: Mapping[str, Any] = field(default_factory=dict)


def graph_gaps_finding(t: Timeline) -> TimelineFinding:
    """Idle inside a CUDA-graph replay is not host-bound: a replay launches nothing from the host. On the
    H200 ResNet-50 at batch 1 replayed its graph with the GPU idle 15 % (fp32) and 36 % (fp16) between 176
    and 233 kernels of a few µs each (eager: 63 % and 87 %, host-bound): the gaps are the GPU's own
    kernel-to-kernel start-up, which only fewer, larger kernels or a larger batch fill."""
    return TimelineFinding(
        "timeline_kernel_gaps", t.precision,
        f"{t.precision}: the GPU is idle {t.idle_share:.0%} of the replayed CUDA graph ({t.window_us / 1e3:.3g} ms, "
        f"of which {t.busy_us() / 1e3:.3g} ms busy, {len(t.spans)} kernels and copies): gaps between short "
        f"kernels, not host launches (a graph replay launches nothing from the host; at least "
        f"{HOST_BOUND_IDLE_SHARE:.0%} idle is named); a larger batch or fewer, larger kernels (fusion) fill them",
        {"idle_share": round(t.idle_share, 4), "window_us": round(t.window_us, 3), "spans": len(t.spans),
         "threshold": HOST_BOUND_IDLE_SHARE})


def host_clock(t: Timeline) -> bool:
    """A GPU backend's timeline whose spans are host times (``Capabilities.kernel_times`` False): ONNX
    Runtime's session profiler on its CUDA EP times each node's compute function on the host, which only
    launches the node's kernels (release builds of onnxruntime-gpu have no CUPTI kernel records)."""
    return backends.capabilities(t.backend).host_clock_on_gpu and not t.settings.get("kernel_times")


def host_clock_finding(t: Timeline) -> TimelineFinding:
    """What such a timeline cannot say: on the H200 the report net's fp32 iteration at batch 10 took 9.8 ms
    on the GPU while ORT's profiler showed 0.21 ms of node time (98 % "idle"): the nodes' launches, not the GPU."""
    return TimelineFinding(
        "timeline_host_clock", t.precision,
        f"{t.precision}: this timeline is {t.source}: on {t.backend} a node's time is its launch on the host, "
        f"not its run on the GPU, so its {t.window_us / 1e3:.3g} ms window and idle share "
        f"({t.idle_share:.0%}) say nothing about the GPU; the measured compute time does "
        "(GPU kernel times per node: pip install 'trtprof[cupti]', or --backend torch)",
        {"idle_share": round(t.idle_share, 4), "window_us": round(t.window_us, 3), "source": t.source})


def finding_items(timelines: Sequence[Timeline]) -> list[TimelineFinding]:
    """The host-bound warning (eager) or the kernel-gaps one (a CUDA-graph replay), FP16's added casts and
    layout changes, and the top kernels per precision (the first timeline is the baseline)."""
    out: list[TimelineFinding] = []
    if not timelines:
        return out
    base = timelines[0]
    for t in timelines:
        caps = backends.capabilities(t.backend)
        where = "GPU" if caps.device == "cuda" else "CPU"
        if host_clock(t):
            out.append(host_clock_finding(t))  # its spans say when the host launched each node, not GPU time
        elif t.idle_share >= HOST_BOUND_IDLE_SHARE and where == "GPU" and t.settings.get("cuda_graph") is True:
            out.append(graph_gaps_finding(t))
        elif t.idle_share >= HOST_BOUND_IDLE_SHARE:
            out.append(TimelineFinding(
                "timeline_host_bound", t.precision,
                f"{t.precision}: the {where} is idle {t.idle_share:.0%} of the iteration "
                f"({t.window_us / 1e3:.3g} ms, of which {t.busy_us() / 1e3:.3g} ms busy): launch- or host-bound "
                f"(at least {HOST_BOUND_IDLE_SHARE:.0%}); faster kernels cannot shorten it much — "
                + ("time it with CUDA graphs (the default; --eager turns them off) or a larger batch"
                   if where == "GPU" else "a larger batch amortises the per-node overhead"),
                {"idle_share": round(t.idle_share, 4), "window_us": round(t.window_us, 3), "threshold": HOST_BOUND_IDLE_SHARE}))
    for t in timelines[1:]:
        for kind, one, many in (("cast", "cast", "casts"), ("reformat", "layout change (reformat)",
                                                         "layout changes (reformats)")):
            count, us = added_of_kind(base, t, kind)
            if count:
                share = us / t.window_us if t.window_us > 0 else 0.0
                out.append(TimelineFinding(
                    f"timeline_added_{kind}", t.precision,
                    f"{t.precision} added {count} {one if count == 1 else many} over {base.precision}, "
                    f"taking {share:.1%} of its iteration ({us:.1f} µs)",
                    {"count": count, "us": round(us, 3), "share": round(share, 4), "over": base.precision}))
    for t in timelines:
        top = t.top(3)
        text = ", ".join(f"{name[:60]} {total:.1f} µs" + (f" ×{calls}" if calls > 1 else "")
                         for name, _kind, total, calls in top)
        what = "kernels by time" if not host_clock(t) else "nodes by host launch time"
        out.append(TimelineFinding("timeline_top_kernels", t.precision, f"{t.precision}: top {what}: {text}",
                                   {"top": [[name, kind, round(total, 3), calls] for name, kind, total, calls in top]}))
    return out


def findings(timelines: Sequence[Timeline]) -> list[str]:
    """The host-bound warning, FP16's added casts and the top kernels per precision, as sentences."""
    return [f.message for f in finding_items(timelines)]


# ---------------------------------------------------------------------------------------------------
# Chrome trace-event format (what Perfetto and chrome://tracing open)
# ---------------------------------------------------------------------------------------------------

def trace_document(timeline: Timeline, model: str) -> dict[str, Any]:
    """One timeline as a Chrome trace-event JSON object: one process, a named thread per lane,
    one complete ("X") event per span, times in µs."""
    lanes = {lane: i + 1 for i, lane in enumerate(timeline.lanes)}
    # metadata events carry ts 0 too: the format lets them omit it, but every event with ph/ts/pid/tid/name
    # is what the strictest readers (and the schema test) expect
    events: list[dict[str, Any]] = [
        {"name": "process_name", "ph": "M", "ts": 0, "pid": 1, "tid": 0,
         "args": {"name": f"{model} {timeline.precision} batch {timeline.batch_size} ({timeline.backend})"}}]
    events += [{"name": "thread_name", "ph": "M", "ts": 0, "pid": 1, "tid": tid, "args": {"name": lane}}
               for lane, tid in lanes.items()]
    for s in timeline.spans:
        events.append({"name": s.name, "cat": s.kind, "ph": "X", "ts": round(s.start_us, 3),
                       "dur": round(s.dur_us, 3), "pid": 1, "tid": lanes[s.lane],
                       "args": {"onnx_node": s.node} if s.node else {}})
    return {"traceEvents": events, "displayTimeUnit": "ms",
            "otherData": {"producer": "trtprof", "source": timeline.source, "window_us": timeline.window_us,
                          "idle_share": round(timeline.idle_share, 4), "settings": dict(timeline.settings)}}


def check_trace(doc: Any) -> None:
    """Raise ValueError unless ``doc`` follows the trace-event format (JSON object form) as far as the
    viewers need: a ``traceEvents`` list whose events have a string name, a known phase, integer
    pid/tid and a non-negative numeric ts; complete events a non-negative dur; metadata events a
    process or thread name."""
    if not isinstance(doc, Mapping) or not isinstance(doc.get("traceEvents"), list):
        raise ValueError("not a trace: no traceEvents list")
    for i, e in enumerate(doc["traceEvents"]):
        if not isinstance(e, Mapping):
            raise ValueError(f"event {i} is not an object")
        if not isinstance(e.get("name"), str) or e.get("ph") not in TRACE_SCHEMA_PHASES:
            raise ValueError(f"event {i}: needs a string name and a phase in {sorted(TRACE_SCHEMA_PHASES)}")
        if not all(isinstance(e.get(k), int) and not isinstance(e.get(k), bool) for k in ("pid", "tid")):
            raise ValueError(f"event {i}: pid and tid must be integers")
        for k in ("ts", "dur") if e["ph"] == "X" else ("ts",):
            v = e.get(k)
            if not isinstance(v, (int, float)) or isinstance(v, bool) or not v >= 0:
                raise ValueError(f"event {i}: {k} must be a number >= 0, got {v!r}")
        if e["ph"] == "M" and (e["name"] not in TRACE_METADATA_NAMES or not isinstance((e.get("args") or {}).get("name"), str)):
            raise ValueError(f"event {i}: a metadata event names a process or thread ({sorted(TRACE_METADATA_NAMES)}) "
                             "with a string args.name")
    unit = doc.get("displayTimeUnit", "ms")
    if unit not in ("ms", "ns"):
        raise ValueError(f"displayTimeUnit must be 'ms' or 'ns', got {unit!r}")


def trace_name(model: str, precision: str, batch_size: int) -> str:
    from ..util.files import safe_stem

    return f"{safe_stem(model)}.{safe_stem(precision)}.b{batch_size}.trace.json"


def write_traces(timelines: Sequence[Timeline], model: str, folder: Path,
                 check: Callable[[Path], None] | None = None) -> list[Path]:
    """One trace file per timeline in ``folder`` (made if missing); ``check`` vets each path first."""
    from ..util.files import atomic_write_text

    folder.mkdir(parents=True, exist_ok=True)
    paths = [folder / trace_name(model, t.precision, t.batch_size) for t in timelines]
    for path in paths:
        if check is not None:
            check(path)
    for t, path in zip(timelines, paths):
        doc = trace_document(t, model)
        check_trace(doc)
        atomic_write_text(path, json.dumps(doc) + "\n")
    return paths


# ---------------------------------------------------------------------------------------------------
# Sources
# ---------------------------------------------------------------------------------------------------

def from_ort_events(events: Sequence[Mapping[str, Any]], precision: str, batch_size: int, backend: str,
                    ops: Mapping[str, str] | None = None, settings: Mapping[str, Any] | None = None) -> Timeline:
    """The last ``model_run`` of an ORT session profile: every executed node inside it, on its thread."""
    from .ort import RENAMED_PREFIX, SUFFIX

    runs = sorted((e for e in events if e.get("cat") == "Session" and e.get("name") == "model_run"),
                  key=lambda e: float(e.get("ts", 0)))
    if not runs:
        raise ValueError("the ONNX Runtime profile holds no model_run")
    start = float(runs[-1]["ts"])
    end = start + float(runs[-1].get("dur", 0))
    spans = []
    for e in events:
        name = str(e.get("name", ""))
        if e.get("cat") != "Node" or not name.endswith(SUFFIX):
            continue
        ts = float(e.get("ts", 0))
        if not start <= ts <= end:
            continue
        node = name[: -len(SUFFIX)]
        if node.startswith(RENAMED_PREFIX):
            node = node[len(RENAMED_PREFIX):]
        op = str((e.get("args") or {}).get("op_name", ""))
        spans.append(Span(name=node, kind=kernel_kind(node, op), lane=f"thread {e.get('tid', 0)}",
                          start_us=ts - start, dur_us=float(e.get("dur", 0)),
                          node=node if ops is None or node in ops else None))
    return Timeline(precision, batch_size, backend, "onnxruntime session profiling (host wall time per node)",
                    tuple(sorted(spans, key=lambda s: s.start_us)), end - start, dict(settings or {}))


def timeline_onnxruntime(record: Any, feeds: Mapping[str, Any], *, warmup: int, batch_size: int,
                         device: str = "cpu", timed: Any = None) -> Timeline:
    """``warmup`` unrecorded-for-the-timeline runs of ``record``'s engine (engines.cache.EngineRecord: its
    artifact, precision and backend), then one more; the timeline is that last run. On CUDA with
    cupti-python that run is captured by CUPTI and the timeline is its GPU work (``from_ort_kernels``);
    otherwise, or where too little of it could be tied to nodes, its nodes on the host's clock."""
    from ..backends.onnxruntime import SessionSettings, ort_session
    from ..spec import Precision
    from ..util.scratch import temp_dir
    from . import ort_kernels
    from .ort import TimedSession, kernel_capture

    artifact, precision, backend = Path(record.artifact_path), record.precision, record.backend
    cupti, _ = kernel_capture(device)
    timed = timed if timed is not None else TimedSession()
    cuda_options, dims = timed.cuda_options, dict(timed.free_dims)
    with temp_dir("orttl") as tmp:
        session = ort_session(Path(artifact), Precision(precision), path=Path(artifact),
                              settings=SessionSettings(profile_prefix=str(Path(tmp) / "ort"),
                                                       configure=timed.configure()),
                              device="cuda" if device == "cuda" else "cpu", cuda_options=cuda_options)
        for _ in range(warmup):
            session.run(None, dict(feeds))
        log, _ = ort_kernels.run_captured(cupti, lambda: session.run(None, dict(feeds)))
        events = json.loads(Path(session.end_profiling()).read_text(encoding="utf-8"))
    options = session.get_session_options()
    settings = {"provider": session.get_providers()[0], "intra_op_threads": options.intra_op_num_threads,
                "warmup": warmup, **({"provider_options": dict(cuda_options)} if cuda_options else {}),
                **({"free_dimension_overrides": dims} if dims else {})}
    if log is not None:
        gpu = from_ort_kernels(events, log, int(session.get_profiling_start_time_ns()), precision, batch_size,
                               backend, settings)
        if gpu is not None:
            return gpu
    return from_ort_events(events, precision, batch_size, backend, settings=settings)


def from_ort_kernels(events: Sequence[Mapping[str, Any]], log: Any, start_ns: int, precision: str, batch_size: int,
                     backend: str, settings: Mapping[str, Any]) -> Timeline | None:
    """The last ``model_run`` of an ORT session profile as the GPU ran it: every kernel, copy and memset CUPTI
    recorded (``log``), from the run's start on the GPU's clock, each labelled with the node that launched it
    (``ort_kernels.attribute``); None where less than ``ATTRIBUTED_MIN`` of the GPU's work is tied to a node."""
    from .ort import SUFFIX, profiled_node_events, node_spans
    from .ort_kernels import ATTRIBUTED_MIN, NodeSpan, attribute, demangle

    node_events, windows = profiled_node_events(events, 1)
    if not windows:
        return None
    a, b = windows[-1]
    run = NodeSpan(("model_run", a), start_ns + int(a * 1000), start_ns + int(b * 1000))
    ops = {(str(e["name"]), float(e.get("ts", 0))): str((e.get("args") or {}).get("op_name", "")) for e in node_events}
    gpu = attribute(node_spans(node_events, start_ns), log, runs=[run])
    if gpu.attributed_share < ATTRIBUTED_MIN:
        return None
    t0 = run.start_ns + gpu.offset_ns  # the run's start on CUPTI's clock
    spans = [Span(name=demangle(w.name), kind=kernel_kind(demangle(w.name), ops.get(key, "")), lane="GPU",
                  start_us=(w.start_ns - t0) / 1e3, dur_us=w.duration_ns / 1e3, node=key[0][: -len(SUFFIX)])
             for key, works in gpu.per_node.items() for w in works]
    spans += [Span(name=w.name, kind="copy", lane="GPU", start_us=(w.start_ns - t0) / 1e3, dur_us=w.duration_ns / 1e3)
              for w in gpu.session_copies]
    return Timeline(precision, batch_size, backend, "CUPTI kernel records of one onnxruntime run (GPU time)",
                    tuple(sorted(spans, key=lambda s: s.start_us)), (run.end_ns - run.start_ns) / 1e3,
                    {**settings, "kernel_times": True, "attributed_share": round(gpu.attributed_share, 4),
                     "clock_correction_us": round(gpu.correction_ns / 1e3, 2)})


GPU_CATEGORIES = {"kernel": None, "gpu_memcpy": "copy", "gpu_memset": "copy"}


def from_torch_trace(trace: Mapping[str, Any], precision: str, batch_size: int, *, window: str, backend: str,
                     node_prefix: str = "", settings: Mapping[str, Any] | None = None) -> Timeline:
    """One iteration from a torch.profiler Chrome trace (``export_chrome_trace``): the GPU activities
    whose launch lies inside the host range named ``window``; each labelled with the innermost host
    range starting with ``node_prefix`` around its launch (the ONNX node, in eager runs)."""
    events = [e for e in trace.get("traceEvents", []) if isinstance(e, Mapping) and e.get("ph") == "X"]
    windows = sorted((e for e in events if e.get("name") == window), key=lambda e: float(e["ts"]))
    if not windows:
        raise ValueError(f"no host range {window!r} in the torch profile")
    w = windows[-1]
    w_start, w_end = float(w["ts"]), float(w["ts"]) + float(w.get("dur", 0))
    ranges = [(float(e["ts"]), float(e["ts"]) + float(e.get("dur", 0)), str(e["name"])[len(node_prefix):])
              for e in events if node_prefix and str(e.get("name", "")).startswith(node_prefix)]
    launches = {}  # correlation id -> host launch instant
    for e in events:
        if e.get("cat") == "cuda_runtime" and (e.get("args") or {}).get("correlation") is not None:
            launches[(e.get("args") or {})["correlation"]] = float(e["ts"])
    spans = []
    for e in events:
        cat = e.get("cat")
        if cat not in GPU_CATEGORIES:
            continue
        args = e.get("args") or {}
        launch = launches.get(args.get("correlation"))
        if launch is None:  # a runtime the profiler did not hook (cuda-python's copies): by its own start
            launch = float(e["ts"])
        if not w_start <= launch <= w_end:
            continue
        inner = [r for r in ranges if r[0] <= launch <= r[1]]
        node = min(inner, key=lambda r: r[1] - r[0])[2] if inner else None
        name = str(e.get("name", ""))
        spans.append(Span(name=name, kind=GPU_CATEGORIES[cat] or kernel_kind(name), lane=f"stream {args.get('stream', e.get('tid'))}",
                          start_us=float(e["ts"]), dur_us=float(e.get("dur", 0)), node=node))
    if not spans:
        raise ValueError(f"no GPU activity launched inside {window!r}")
    origin = min(w_start, min(s.start_us for s in spans))
    shifted = tuple(sorted((Span(s.name, s.kind, s.lane, s.start_us - origin, s.dur_us, s.node) for s in spans),
                           key=lambda s: s.start_us))
    window_us = max(max(s.end_us for s in shifted), w_end - origin)
    return Timeline(precision, batch_size, backend, "torch.profiler (CUPTI): GPU kernels and copies per stream",
                    shifted, window_us, dict(settings or {}))


def timeline_torch(one: Callable[[], None], precision: str, batch_size: int, *, warmup: int, backend: str,
                   settings: Mapping[str, Any] | None = None, node_prefix: str = "") -> Timeline:
    """``warmup`` calls of ``one`` (one whole iteration as the timing loop runs it: copies, enqueue or graph
    replay, synchronisation), then one more under torch.profiler inside a host range; its timeline."""
    import torch
    from torch.profiler import ProfilerActivity, profile, record_function

    from ..util.scratch import temp_dir

    window = "trtprof.timeline.iteration"
    for _ in range(warmup):
        one()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        with record_function(window):
            one()
            torch.cuda.synchronize()
    with temp_dir("torchtl") as tmp:
        path = Path(tmp) / "trace.json"
        prof.export_chrome_trace(str(path))
        trace = json.loads(path.read_text(encoding="utf-8"))
    return from_torch_trace(trace, precision, batch_size, window=window, backend=backend, node_prefix=node_prefix,
                            settings=settings)


def record_timeline(record: Any, batch_size: int, feed: "FeedSettings | None" = None, *, warmup: int = 5,
                    cuda_graph: bool = False, copies: bool = True, autotune: bool | None = None) -> Timeline:
    """One engine's timeline at ``batch_size`` with its backend's profiler, on the same seeded inputs (or
    the first batch of the user's: ``feed``) that the latency and per-layer runs use (``layers.profile``'s
    ``engine_feeds``). A torch engine runs the timing loop's own iteration (its buffers, stream, copies
    and, with ``cuda_graph``, graph replay), with ``autotune`` as the timing ran it. The timeline is
    labelled with the engine's backend (a plugin may use a profiler of the built-in backends)."""
    from ..model.inputs import FeedSettings
    from .profile import engine_feeds, loaded_engine, timed_session

    feed = feed or FeedSettings()  # the default: seed 0's random inputs
    with loaded_engine(record, "timeline", autotune) as runner:
        input_shapes, feeds = engine_feeds(record, runner, batch_size, shapes=feed.shapes, seed=feed.seed,
                                           int_range=feed.int_range, data=feed.data)
        caps = backends.capabilities(record.backend)
        if caps.timeline == "tensorrt-sequence":  # per-layer times only: a sequence (see from_precision_profile)
            from .tensorrt import profile_tensorrt

            timeline = from_precision_profile(profile_tensorrt(runner, input_shapes, feeds, record.precision,
                                                               iterations=warmup + 1, backend=record.backend))
        elif caps.timeline == "ort-session":
            timeline = timeline_onnxruntime(record, feeds, warmup=warmup, batch_size=batch_size, device=caps.device,
                                            timed=timed_session(runner, input_shapes))
        else:
            timeline = timeline_torch_runner(runner, record, feeds, batch_size, warmup=warmup, cuda_graph=cuda_graph,
                                             copies=copies)
    return dataclasses.replace(timeline, backend=record.backend)


def timeline_torch_runner(runner: Any, record: Any, feeds: Mapping[str, Any], batch_size: int, *, warmup: int,
                          cuda_graph: bool, copies: bool) -> Timeline:
    """The timing loop's iteration (``measure.timing``'s buffers, launch and events; nothing timed here
    is reported as a latency) under torch.profiler. In eager mode a profiler range around each onnx2torch
    submodule labels its kernels with the ONNX node; a graph replay runs no Python, so no labels there.
    ``settings`` records the event-timed compute of the profiled iteration and of an unprofiled one:
    the sum of kernel times is checked against them (issue 35)."""
    from contextlib import ExitStack

    from ..backends.torch import engine_onnx
    from ..measure import timing
    from ..system import cuda
    from .torch_profile import PREFIX, install_layer_ranges, onnx_node_labels, per_node_module

    measured: list[float] = []
    base_settings = {"cuda_graph": cuda_graph, "copies": copies, "autotune": getattr(runner, "autotune", None),
                     "tf32": getattr(runner, "tf32", None),
                     # the module the recorded iteration ran (torch.export's program or onnx2torch's conversion)
                     "module": getattr(runner, "loaded_by", None)}
    with ExitStack() as stack:
        output_shapes = runner.prepare({n: tuple(int(d) for d in a.shape) for n, a in feeds.items()})
        stream = stack.enter_context(cuda.Stream())
        buffers, host_in, host_out = timing.device_buffers(stack, stream, feeds, output_shapes,
                                                           {o.name: o.dtype for o in runner.outputs})
        compute = timing.compute_launch(stack, runner, buffers, stream, cuda_graph)
        slots = [[stack.enter_context(cuda.Event(blocking_sync=True)) for _ in range(4)]]
        issue, wait = timing.event_iteration(stream, compute, host_in, host_out, slots, copies)
        raw = [e.raw for e in slots[0]]

        def one() -> None:
            issue(raw)
            measured.append(wait(slots[0])[1])

        t = timeline_torch(one, record.precision, batch_size, warmup=warmup, backend=record.backend, settings=base_settings)
        one()  # the same iteration unprofiled: the profiler's own slow-down shows against it
        ev_profiled, ev_unprofiled = measured[-2], measured[-1]
        labels = "none: a CUDA graph replay runs no Python, so no ONNX node is known"
        if not cuda_graph:
            # Node labels come from a second iteration with a profiler range around every onnx2torch
            # submodule: the ranges cost host time (on ResNet-50 batch 1 they made the eager iteration
            # 3-4x longer on the H200), so the timeline itself is the iteration without them; the labels
            # move over when both iterations ran the same kernels in the same order.
            label_of, _ops, _order = onnx_node_labels(engine_onnx(record.artifact_path))
            handles = install_layer_ranges(per_node_module(runner), label_of)
            try:
                labelled = timeline_torch(one, record.precision, batch_size, warmup=1, backend=record.backend,
                                          node_prefix=PREFIX)
            finally:
                for h in handles:
                    h.remove()
            if [s.name for s in labelled.spans] == [s.name for s in t.spans]:
                t = Timeline(t.precision, t.batch_size, t.backend, t.source,
                             tuple(Span(s.name, s.kind, s.lane, s.start_us, s.dur_us, ls.node)
                                   for s, ls in zip(t.spans, labelled.spans)), t.window_us, t.settings)
                labels = "from a second, labelled iteration with the same kernels in the same order"
            else:
                labels = "none: the labelled iteration ran other kernels than the timed one"
    settings = {**t.settings, "event_compute_ms_profiled": ev_profiled, "event_compute_ms_unprofiled": ev_unprofiled,
                "onnx_node_labels": labels}
    return Timeline(t.precision, t.batch_size, t.backend, t.source, t.spans, t.window_us, settings)


def from_layer_times(layers: Iterable[tuple[str, str, float]], precision: str, batch_size: int,
                     source: str, *, backend: str) -> Timeline:
    """Per-layer times without start instants (TensorRT's IProfiler), laid end to end in one lane:
    a sequence of the engine's layers, no gaps by construction (the idle share is not measured)."""
    spans, t = [], 0.0
    for name, op, ms in layers:
        spans.append(Span(name=name, kind=kernel_kind(name, op), lane="engine (layers end to end)",
                          start_us=t, dur_us=ms * 1e3, node=name))
        t += ms * 1e3
    return Timeline(precision, batch_size, backend, source, tuple(spans), t, {"idle_measured": False})


def from_precision_profile(profile: Any) -> Timeline:
    """A per-layer profile without start instants (``layers.table.PrecisionProfile``, e.g. TensorRT's)
    as a sequence: its layers end to end, in the order the profiler reported them."""
    return from_layer_times(((layer.name, layer.op_type, layer.median_ms) for layer in profile.layers),
                            profile.precision, profile.batch_size, profile.source, backend=profile.backend)


# ---------------------------------------------------------------------------------------------------
# Pictures: the same stacked view as SVG (page) and PNG (output dir)
# ---------------------------------------------------------------------------------------------------

SVG_WIDTH = 1100  # fits a 1280 px window with the page's margins
ROW_PX, LABEL_PX = 18, 150


def timeline_svg(timelines: Sequence[Timeline]) -> str:
    """Every precision's lanes stacked on one time axis (the longest window sets the scale); idle gaps
    shaded grey; casts outlined; each span's title (hover) names it, its ONNX node and duration."""
    import html

    if not timelines:
        return ""
    scale_us = max(t.window_us for t in timelines) or 1.0
    plot_px = SVG_WIDTH - LABEL_PX - 10
    x = lambda us: LABEL_PX + plot_px * us / scale_us  # noqa: E731
    rows, y = [], 20
    for t in timelines:
        lanes = t.lanes or ("(no spans)",)
        top = y
        for lane in lanes:
            rows.append(f'<text x="4" y="{y + 13}" font-size="11">{html.escape(f"{t.precision} {lane}"[:24])}</text>')
            for s in t.spans:
                if s.lane != lane:
                    continue
                title = f"{s.name} ({s.kind}{', ONNX node ' + s.node if s.node else ''}): {s.dur_us:.1f} µs"
                stroke = ' stroke="#000" stroke-width="1.5"' if s.kind == "cast" else ""
                rows.append(f'<rect x="{x(s.start_us):.2f}" y="{y + 2}" width="{max(0.5, x(s.end_us) - x(s.start_us)):.2f}" '
                            f'height="{ROW_PX - 4}" fill="{COLOURS.get(s.kind, COLOURS["other"])}"{stroke}>'
                            f"<title>{html.escape(title)}</title></rect>")
            y += ROW_PX
        for a, b in t.gaps():
            rows.append(f'<rect x="{x(a):.2f}" y="{top}" width="{max(0.5, x(b) - x(a)):.2f}" height="{y - top}" '
                        f'fill="#000" fill-opacity="0.07"><title>idle {b - a:.1f} µs</title></rect>')
        rows.append(f'<text x="{x(t.window_us) + 2 if t.window_us < scale_us * 0.8 else LABEL_PX}" y="{y + 12}" '
                    f'font-size="11">{html.escape(t.precision)}: {t.window_us / 1e3:.3g} ms, idle {t.idle_share:.0%}</text>')
        y += ROW_PX + 6
    axis = (f'<line x1="{LABEL_PX}" y1="{y}" x2="{LABEL_PX + plot_px}" y2="{y}" stroke="#333"/>'
            f'<text x="{LABEL_PX}" y="{y + 14}" font-size="11">0</text>'
            f'<text x="{LABEL_PX + plot_px - 60}" y="{y + 14}" font-size="11">{scale_us / 1e3:.3g} ms</text>')
    legend = "".join(f'<rect x="{LABEL_PX + 90 * i}" y="2" width="10" height="10" fill="{COLOURS[k]}"/>'
                     f'<text x="{LABEL_PX + 90 * i + 13}" y="11" font-size="11">{k}</text>' for i, k in enumerate(KINDS))
    return (f'<svg xmlns="http://www.w3.org/2000/svg" width="{SVG_WIDTH}" height="{y + 20}" '
            f'viewBox="0 0 {SVG_WIDTH} {y + 20}" style="max-width:100%">{legend}{"".join(rows)}{axis}</svg>')


def plot_timelines(timelines: Sequence[Timeline], path: Path, title: str = "") -> Path:
    """The stacked timelines as a PNG (matplotlib, imported here)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from ..util.files import atomic_write_bytes
    import io

    labels = [(t, lane) for t in timelines for lane in (t.lanes or ("(no spans)",))]
    fig, ax = plt.subplots(figsize=(11, 1.2 + 0.35 * len(labels)))
    for row, (t, lane) in enumerate(labels):
        y = len(labels) - 1 - row
        for s in (s for s in t.spans if s.lane == lane):
            ax.broken_barh([(s.start_us / 1e3, s.dur_us / 1e3)], (y - 0.4, 0.8), facecolors=COLOURS.get(s.kind),
                           edgecolor="black" if s.kind == "cast" else "none", linewidth=0.8)
        for a, b in t.gaps():
            ax.broken_barh([(a / 1e3, (b - a) / 1e3)], (y - 0.5, 1.0), facecolors="black", alpha=0.06)
    ax.set_yticks(range(len(labels)))
    ax.set_yticklabels([f"{t.precision} {lane} (idle {t.idle_share:.0%})" for t, lane in reversed(labels)], fontsize=8)
    ax.set_xlabel("time in the iteration (ms)")
    ax.set_xlim(0, max(t.window_us for t in timelines) / 1e3 if timelines else 1)
    handles = [plt.Rectangle((0, 0), 1, 1, color=COLOURS[k]) for k in KINDS]
    ax.legend(handles, KINDS, ncol=len(KINDS), fontsize=7, loc="lower center", bbox_to_anchor=(0.5, 1.0),
              frameon=False)
    if title:
        fig.suptitle(title + " — grey: idle; outlined: casts", fontsize=10)
    unescape_figure_text(fig)  # a non-ASCII model name under LC_ALL=C (before the layout measures the text)
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=110, metadata={"Software": PNG_PRODUCER})  # how a later run knows it
    plt.close(fig)
    atomic_write_bytes(path, buf.getvalue())
    return path
