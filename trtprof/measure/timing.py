"""THE timing loop. Backends never time themselves.

Two clocks, one contract. Host runners ("cpu") are timed with ``perf_counter_ns`` around each call;
device runners ("cuda") are timed with CUDA events on the profiler's stream (``time_device``). Both
warm up (by count and/or by time), then run until the iteration count AND the minimum duration are
both met (trtexec / MLPerf LoadGen: a fast model gets more samples, a slow one at least the count),
and return raw per-iteration samples per stage, in milliseconds.
"""
from __future__ import annotations

import time
import weakref
from contextlib import ExitStack
from dataclasses import asdict, dataclass, field
from typing import Any, Callable, Mapping

import numpy as np

from ..system import cuda, nvml
from . import kept_launch
from ..errors import BackendUnavailable, BadInput
from ..system.preflight import is_out_of_memory

DEFAULT_WARMUP = 50
DEFAULT_ITERATIONS = 200  # "hundreds": enough for a stable p99 estimate on a quiet machine
MAX_ITERATIONS = 1_000_000  # a safety stop for --duration-s on a sub-microsecond model


@dataclass(frozen=True)
class TimingConfig:
    """How long to warm up and to measure. Everything here is recorded in each result."""

    warmup: int = DEFAULT_WARMUP
    warmup_ms: float | None = None  # also warm up until this much time has passed
    iterations: int = DEFAULT_ITERATIONS
    duration_s: float | None = None  # also measure until this much time has passed
    copies: bool = True  # GPU: include H2D and D2H copies in latency
    cuda_graph: bool = False  # GPU: capture the enqueue once, replay it
    spin_wait: bool = False  # GPU: busy-wait on the event instead of a blocking sync

    def __post_init__(self) -> None:
        if self.warmup < 0:
            raise BadInput("--warmup must be >= 0")
        if self.iterations <= 0:
            raise BadInput("--iterations must be > 0")
        if self.iterations > MAX_ITERATIONS:  # the loop stops there: a larger count would be cut silently
            raise BadInput(f"--iterations {self.iterations} is above the loop's safety stop of {MAX_ITERATIONS:,} "
                           "iterations per measurement")
        if self.warmup_ms is not None and self.warmup_ms < 0:
            raise BadInput("--warmup-ms must be >= 0")
        if self.duration_s is not None and self.duration_s < 0:
            raise BadInput("--duration-s must be >= 0")

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class Samples:
    """Raw per-iteration times in ms, per stage. ``latency_ms`` is always present.

    ``span_s`` is the wall time from the first to the last timed iteration, for throughput
    (trtexec's definition: batch × iterations / span).
    """

    stages: dict[str, np.ndarray]
    span_s: float
    warmup_done: int
    warmup_s: float
    notes: list[str] = field(default_factory=list)  # warnings for the result (clocks moved, ...)
    device: dict[str, Any] = field(default_factory=dict)  # device state before/after (GPU: NVML)
    # what the runtime library wrote while this block ran (util.thirdparty; set by whoever captured it),
    # and, on a load's warm-up block, what it wrote while that engine was loaded
    run_warnings: list[str] = field(default_factory=list)
    load_warnings: list[str] = field(default_factory=list)
    # GPU blocks: seconds from the block's start to its warm-up (prepare, buffers, upload, the launch or its
    # capture); near 0 where a LaunchKeeper kept the runner's state from an earlier block (measure.kept_launch)
    setup_s: float = 0.0

    @property
    def latency_ms(self) -> np.ndarray:
        return self.stages["latency_ms"]

    @property
    def n(self) -> int:
        return int(self.latency_ms.size)


def cap_notes(n: int, span_s: float, config: TimingConfig) -> list[str]:
    """The note a result carries when the safety stop, not ``--duration-s``, ended its measurement:
    the duration asked for was not met, and the result says so instead of looking complete."""
    if n < MAX_ITERATIONS or config.duration_s is None or span_s >= config.duration_s:
        return []
    return [f"--duration-s {config.duration_s:g} not reached: measuring stopped at the safety stop of "
            f"{MAX_ITERATIONS:,} iterations after {span_s:.3g} s"]


def _keep_going(done: int, started_ns: int, count: int, seconds: float | None) -> bool:
    if done >= MAX_ITERATIONS:
        return False
    if done < count:
        return True
    return seconds is not None and (time.perf_counter_ns() - started_ns) < seconds * 1e9


def warm_up(step: Callable[[], Any], config: TimingConfig) -> tuple[int, float]:
    """Run ``step`` until both the warmup count and ``warmup_ms`` are reached. Returns (runs, s)."""
    started = time.perf_counter_ns()
    seconds = None if config.warmup_ms is None else config.warmup_ms / 1e3
    done = 0
    while _keep_going(done, started, config.warmup, seconds):
        step()
        done += 1
    return done, (time.perf_counter_ns() - started) / 1e9


class _Growable:
    """Preallocated per-iteration sample columns, doubled when full (no allocation per iteration)."""

    def __init__(self, names: tuple[str, ...], size: int) -> None:
        self.names = names
        self.data = np.empty((len(names), max(size, 16)), dtype=np.float64)
        self.n = 0

    def add(self, *values: float) -> None:
        if self.n == self.data.shape[1]:
            self.data = np.concatenate([self.data, np.empty_like(self.data)], axis=1)
        self.data[:, self.n] = values
        self.n += 1

    def columns(self) -> dict[str, np.ndarray]:
        return {name: self.data[i, : self.n].copy() for i, name in enumerate(self.names)}


def time_host(
    fn: Callable[[], Any],
    config: TimingConfig,
) -> Samples:
    """Time a synchronous host call: one ``perf_counter_ns`` pair per iteration, nothing else inside.

    The sample buffer (``_Growable``, shared with the GPU loop) is preallocated and grown
    geometrically, so the loop does no allocation per iteration beyond what ``fn`` does.
    """
    warm_runs, warm_s = warm_up(fn, config)
    samples = _Growable(("latency_ms",), config.iterations)
    clock = time.perf_counter_ns
    seconds = config.duration_s
    first = clock()
    while _keep_going(samples.n, first, config.iterations, seconds):
        t0 = clock()
        fn()
        t1 = clock()
        samples.add((t1 - t0) / 1e6)
    span_s = (clock() - first) / 1e9
    return Samples(stages=samples.columns(), span_s=span_s, warmup_done=warm_runs, warmup_s=warm_s,
                   notes=cap_notes(samples.n, span_s, config))


# --------------------------------------------------------------------------------------------------
# The GPU loop: CUDA events on the profiler's own stream (owned by the GPU engineer, issue 4).
# --------------------------------------------------------------------------------------------------
# trtexec's "GPU compute time CV" check: above this, clocks or other tenants are moving the numbers.
COMPUTE_CV_WARN = 0.025
# Median host enqueue time over median GPU compute time at or above which the GPU waits for the host
# (trtexec warns when enqueue time exceeds compute time; eager frameworks sit just under 1.0 then,
# because the GPU finishes right after the host launches the last kernel).
ENQUEUE_BOUND_RATIO = 0.9
# SM clock change between the start and the end of the timed loop that counts as "clocks moved".
CLOCK_MOVED_FRACTION = 0.05
# Throttle reasons that are not a problem for a measurement.
_BENIGN_REASONS = frozenset({"gpu_idle", "applications_clocks_setting"})
# Iterations queued on the stream at once in the timed loop (trtexec keeps the next one queued too).
IN_FLIGHT = 2
# Graph replay: eager launches this many times slower (per inference, GPU span) are host-bound, said so.
EAGER_BOUND_RATIO = 1.1
# Back-to-back launches per side when measuring that ratio: enough to fill the queue, a few ms at most.
EAGER_PROBE_RUNS = 10
# Each runner's (eager ms, graph ms) per input shapes, measured once: weakly held, so a closed runner is
# not kept alive.
_EAGER_RATIOS: "weakref.WeakKeyDictionary[Any, dict[Any, tuple[float, float]]]" = weakref.WeakKeyDictionary()
LOCK_CLOCKS_HINT = "lock clocks for steadier numbers: nvidia-smi -lgc <max SM MHz> (nvidia-smi -rgc to undo)"


def _median(values: np.ndarray) -> float:
    return float(np.median(values)) if values.size else 0.0


def _cv(values: np.ndarray) -> float:
    mean = float(np.mean(values)) if values.size else 0.0
    return float(np.std(values, ddof=1)) / mean if values.size > 1 and mean > 0 else 0.0


def device_notes(stages: dict[str, np.ndarray], before: dict[str, Any], after: dict[str, Any],
                 config: TimingConfig) -> list[str]:
    """Warnings a GPU result should carry: unstable compute time, moving clocks, throttling, a loop
    bound by the host's enqueue or by transfers. Pure function of the samples and NVML states."""
    notes: list[str] = []
    compute = stages["compute_ms"]
    cv = _cv(compute)
    if cv > COMPUTE_CV_WARN:
        notes.append(f"GPU compute time CV is {cv:.1%} (> {COMPUTE_CV_WARN:.1%}): the numbers are noisy; "
                     + LOCK_CLOCKS_HINT)
    sm0, sm1 = before.get("sm_clock_mhz"), after.get("sm_clock_mhz")
    if sm0 and sm1 and abs(sm1 - sm0) > CLOCK_MOVED_FRACTION * max(sm0, sm1):
        notes.append(f"SM clock moved from {sm0} to {sm1} MHz during the measurement; " + LOCK_CLOCKS_HINT)
    reasons = [r for r in (after.get("throttle_reasons") or []) if r not in _BENIGN_REASONS]
    if reasons:
        notes.append("GPU clocks were limited at the end of the run (" + ", ".join(reasons) + ")")
    enqueue, median_compute = _median(stages["enqueue_ms"]), _median(compute)
    if median_compute > 0 and enqueue >= ENQUEUE_BOUND_RATIO * median_compute:
        hint = "" if config.cuda_graph else "; CUDA graphs (--cuda-graph, the default without --eager) remove most of the launch cost"
        notes.append(f"enqueue-bound: host enqueue {enqueue:.3f} ms vs GPU compute {median_compute:.3f} ms "
                     f"(median), the GPU waits for the host{hint}")
    if config.copies:
        transfers = _median(stages["h2d_ms"]) + _median(stages["d2h_ms"])
        if median_compute > 0 and transfers > median_compute:
            notes.append(f"transfer-bound: H2D+D2H {transfers:.3f} ms exceeds compute {median_compute:.3f} ms "
                         "(median); --no-copies measures the engine alone")
    return notes


def time_device(runner: Any, feeds: Mapping[str, np.ndarray], config: TimingConfig) -> Samples:
    """Time a ``DeviceRunner`` with CUDA events on a stream the profiler owns.

    The profiler owns everything the runner touches: pinned host buffers (inputs copied in once),
    device buffers sized from ``runner.prepare``, one non-blocking stream and four events, all
    created before the loop and released deterministically after it. Each iteration records events
    around H2D, compute (``runner.enqueue`` or, with ``cuda_graph``, one replay of its captured
    graph) and D2H. Two iterations are kept queued (``IN_FLIGHT``); the loop waits on the oldest
    one's last event (spinning with ``spin_wait``, else a blocking sync) before reusing its events.
    Host enqueue time is ``perf_counter_ns`` around the enqueue call alone.

    latency = h2d + compute + d2h (trtexec's definition); with ``copies=False`` the copies are left
    out of the loop entirely (inputs stay on the device from the single upload) and latency = compute.

    Inside a ``kept_launch.LaunchKeeper`` an opted-in runner's set-up (``set_up_launch``: prepare, buffers,
    launch) is kept for its next block at the same shapes instead of released; ``Samples.setup_s`` says
    what the set-up cost this block.
    """
    if cuda.device_count() == 0:
        raise BackendUnavailable("no CUDA device: GPU timing needs an NVIDIA GPU and driver")

    started = time.perf_counter()
    device_index = cuda.current_device()
    bus_id = cuda.pci_bus_id(device_index)

    with ExitStack() as stack:
        state = block_state(runner, feeds, config, launch_key(feeds, config), stack)
        stream, compute = state.stream, state.compute
        assert compute is not None
        launch_info = dict(state.launch_info)
        blocking = not config.spin_wait
        slots = [[stack.enter_context(cuda.Event(blocking_sync=blocking)) for _ in range(4)]
                 for _ in range(IN_FLIGHT)]
        issue, wait = event_iteration(stream, compute, state.host_in, state.host_out, slots, config.copies)
        raw_slots = [[e.raw for e in ev] for ev in slots]

        def one_iteration() -> None:
            issue(raw_slots[0])
            wait(slots[0])

        setup_s = time.perf_counter() - started
        warm_runs, warm_s = warm_up(one_iteration, config)
        # The GPU sampled through the loop (system.validity); its first and last samples are the loop's before and
        # after reads (``states``: one read each, not a watch sample beside a gpu_state read).
        with nvml.watch_gpu(pci_bus_id=bus_id, states=True) as during:
            cols, span_s = run_in_flight(issue, wait, slots, raw_slots, config)
        before, after = nvml.pop_states(during)

    stages = cols.columns()
    if not config.copies:
        del stages["h2d_ms"], stages["d2h_ms"]
    notes = (device_notes(stages, before, after, config) + launch_notes(launch_info)
             + cap_notes(int(stages["latency_ms"].size), span_s, config))
    device = _device_facts(launch_info, device_index, bus_id, config, (before, after, during))
    return Samples(stages=stages, span_s=span_s, warmup_done=warm_runs, warmup_s=warm_s, notes=notes,
                   device=device, setup_s=setup_s)


def launch_key(feeds: Mapping[str, np.ndarray], config: TimingConfig) -> tuple[Any, ...]:
    """What a block's device state is set up for: the feeds' shapes (sorted by name), copies, graph."""
    shapes = tuple(sorted((name, tuple(int(d) for d in np.shape(arr))) for name, arr in feeds.items()))
    return shapes, config.copies, config.cuda_graph


def block_state(runner: Any, feeds: Mapping[str, np.ndarray], config: TimingConfig, key: tuple[Any, ...],
                stack: ExitStack) -> kept_launch.KeptLaunch:
    """The device state a block runs on: kept from an earlier block inside a ``LaunchKeeper`` (its inputs uploaded
    again when they are other arrays), else set up now — kept by the keeper, or released by the block's ``stack``."""
    keeper = kept_launch.keeper_for(runner)
    state = keeper.lookup(runner, key) if keeper is not None else None
    if state is None:
        state = set_up_launch(runner, feeds, config, key, ExitStack() if keeper is not None else stack)
        if keeper is not None:
            keeper.keep(state)
    elif not state.same_feeds(feeds):  # kept buffers, other inputs: their values uploaded again
        upload_inputs(state.stream, feeds, state.host_in)
        state.feeds = dict(feeds)
    return state


def prime_launch(runner: Any, feeds: Mapping[str, np.ndarray], config: TimingConfig) -> None:
    """One set-up and one launch of ``runner`` at the feeds' shapes (``measure.workers``' priming): what a
    process pays the first time it runs an engine at a shape (ONNX Runtime: cuDNN's choice of kernels, the
    arena grown, its CUDA graph captured) is paid here, before any timing, instead of inside the first block
    of every load. Inside a ``LaunchKeeper`` an opted-in runner's state stays kept for the blocks at these
    feeds (``block_state``); otherwise it is released after the launch."""
    with ExitStack() as stack:
        state = block_state(runner, feeds, config, launch_key(feeds, config), stack)
        assert state.compute is not None
        state.compute()
        state.stream.synchronize()


def set_up_launch(runner: Any, feeds: Mapping[str, np.ndarray], config: TimingConfig, key: tuple[Any, ...],
                  stack: ExitStack) -> kept_launch.KeptLaunch:
    """A block's device state, released by ``stack`` (the block's own, or one a ``LaunchKeeper`` keeps):
    the runner prepared at the feeds' shapes, the stream (the runner's, else one made here), pinned and
    device buffers with the inputs uploaded, and the launch (``compute_launch``, probed for its eager twin).
    A failure releases what was set up and is raised."""
    state = kept_launch.KeptLaunch(runner=runner, key=key, stack=stack, feeds=dict(feeds))
    try:
        output_shapes = runner.prepare(dict(key[0]))
        output_dtypes = {spec.name: spec.dtype for spec in runner.outputs}
        state.stream = runner_stream(runner) or stack.enter_context(cuda.Stream())
        state.buffers, state.host_in, state.host_out = device_buffers(stack, state.stream, feeds, output_shapes,
                                                                      output_dtypes)
        state.compute = compute_launch(stack, runner, state.buffers, state.stream, config.cuda_graph,
                                       state.launch_info)
        probe_eager_ratio(stack, runner, state.buffers, state.stream, state.compute, state.launch_info, key[0])
    except BaseException:
        stack.close()
        raise
    return state


def _device_facts(launch_info: dict[str, Any], device_index: int, bus_id: Any, config: TimingConfig,
                  gpu: tuple[Any, Any, Any]) -> dict[str, Any]:
    """``Samples.device`` of a CUDA-event loop: how it launched, which GPU, how it waited, and the GPU's
    state before, after and during the loop (NVML)."""
    before, after, during = gpu
    return {
        "launch": launch_info,
        "cuda_device": device_index,
        "pci_bus_id": bus_id,
        "name": after.get("name") or cuda.device_name(device_index),
        "sync": "spin" if config.spin_wait else "blocking",
        "before": before,
        "after": after,
        "during": during,
    }


def runner_stream(runner: Any) -> Any:
    """The stream a runner's runtime is bound to at load (ONNX Runtime's ``user_compute_stream``: the
    runner's optional ``stream``), which the loop then times on; None where the loop makes its own."""
    return getattr(runner, "stream", None)


def probe_eager_ratio(stack: ExitStack, runner: Any, buffers: Mapping[str, int], stream: Any,
                      graph: Callable[[], Any], info: dict[str, Any], shapes: Any) -> None:
    """Once per runner and input shapes (the timing loop runs many blocks on one runner), when its
    launches replay a graph: how much slower eager launches of the same runner are (``eager_over_graph``), into ``info``."""
    if info.get("mode") != "cuda_graph" or info.get("graph_by"):  # the runtime's own graph: no eager twin here
        return
    try:
        per_shape = _EAGER_RATIOS.setdefault(runner, {})
    except TypeError:  # a runner that cannot be weakly referenced is probed every time
        per_shape = {}
    if shapes not in per_shape:
        per_shape[shapes] = eager_over_graph(stream, compute_launch(stack, runner, buffers, stream, False), graph)
    eager_ms, graph_ms = per_shape[shapes]
    info.update(eager_ms=round(eager_ms, 4), graph_ms=round(graph_ms, 4),
                eager_over_graph=round(eager_ms / graph_ms, 3) if graph_ms > 0 else None)


def device_buffers(stack: ExitStack, stream: Any, feeds: Mapping[str, np.ndarray],
                   output_shapes: Mapping[str, Any], output_dtypes: Mapping[str, str],
                   ) -> tuple[dict[str, int], list[tuple[np.ndarray, int]], list[tuple[np.ndarray, int]]]:
    """Pinned host and device buffers for every input and output (released by ``stack``), and the
    inputs uploaded once before anything runs, so --no-copies computes on the real inputs too.
    Returns (name → device pointer, [(pinned input view, device ptr)], [(pinned output view, device ptr)])."""
    buffers: dict[str, int] = {}
    host_in: list[tuple[np.ndarray, int]] = []
    host_out: list[tuple[np.ndarray, int]] = []
    for name, arr in feeds.items():
        pinned = stack.enter_context(cuda.PinnedHostBuffer(np.asarray(arr).nbytes))
        view = pinned.array(np.shape(arr), np.asarray(arr).dtype)
        dev = stack.enter_context(cuda.DeviceBuffer(view.nbytes))
        buffers[name] = dev.ptr
        host_in.append((view, dev.ptr))
    for name, shape in output_shapes.items():
        dtype = np.dtype(output_dtypes.get(name, "float32"))
        nbytes = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
        pinned = stack.enter_context(cuda.PinnedHostBuffer(nbytes))
        dev = stack.enter_context(cuda.DeviceBuffer(nbytes))
        buffers[name] = dev.ptr
        host_out.append((pinned.array(tuple(shape), dtype), dev.ptr))
    upload_inputs(stream, feeds, host_in)
    return buffers, host_in, host_out


def upload_inputs(stream: Any, feeds: Mapping[str, np.ndarray], host_in: list[tuple[np.ndarray, int]]) -> None:
    """The feeds' values into their pinned views (``host_in``, in the feeds' order) and on to the device."""
    for arr, (view, ptr) in zip(feeds.values(), host_in):
        view[...] = arr
        cuda.memcpy_htod_async(ptr, view, stream)
    stream.synchronize()


def compute_launch(stack: ExitStack, runner: Any, buffers: Mapping[str, int], stream: Any,
                   cuda_graph: bool, launch_info: dict[str, Any] | None = None) -> Callable[[], Any]:
    """The zero-argument call that enqueues one inference on ``stream``.

    A runner may offer ``bind(buffers, stream)``: a context manager that sets up its per-call state
    once (e.g. PyTorch's current stream, inference mode, TF32 flags) and yields a zero-argument
    launch. Otherwise every launch is a full ``enqueue``. With ``cuda_graph`` the launch is captured
    once and each call replays the graph; when the capture fails (a converted module that copies a
    CPU tensor, say) this runner's launches stay eager, and ``launch_info`` (the result's
    ``device["launch"]``) says so and why, instead of the measurement failing. An out-of-memory
    during capture is not a capture problem: it is raised (the batch does not fit)."""
    handle = stream.handle
    runtime_graph = getattr(runner, "runtime_graph", None)
    # the runtime captures and replays its own graph (ORT's enable_cuda_graph): switched before binding
    runtime_info = runtime_graph(cuda_graph) if runtime_graph is not None else None
    bind = getattr(runner, "bind", None)
    if bind is not None:
        launch: Callable[[], Any] = stack.enter_context(bind(buffers, handle))
    else:
        def launch() -> None:
            runner.enqueue(buffers, handle)

    info = launch_info if launch_info is not None else {}
    if runtime_info is not None:
        info.update(runtime_info)
        return launch
    if not cuda_graph:
        info["mode"] = "eager"
        return launch
    # Run eagerly once first: lazy initialisation (library handles, allocator pools, autotuning)
    # must happen outside the capture, where it would be illegal.
    launch()
    stream.synchronize()
    try:
        graph = stack.enter_context(cuda.Graph(launch, stream))
    except Exception as err:  # noqa: BLE001 - any capture failure: this runner is timed eager, said so
        if is_out_of_memory(err):
            raise
        stream.synchronize()
        info.update(mode="eager", capture_failed=f"{type(err).__name__}: {first_line(err)}")
        return launch
    info["mode"] = "cuda_graph"
    return graph.launch


def first_line(err: BaseException) -> str:
    """An exception's message as one short line (CUDA and torch errors carry multi-line context)."""
    return (str(err).strip().splitlines() or [""])[0][:240]


def eager_over_graph(stream: Any, eager: Callable[[], Any], graph: Callable[[], Any],
                     runs: int = EAGER_PROBE_RUNS) -> tuple[float, float]:
    """(eager ms, graph ms) per inference: ``runs`` back-to-back launches of each between two events on
    ``stream``, after one of each. When eager launches are host-bound the GPU waits between their
    kernels, so the eager span exceeds the replay's; the ratio is what ``--eager`` would measure on
    top of the model."""
    record, ok = cuda.runtime().cudaEventRecord, cuda.ok

    def span(fn: Callable[[], Any]) -> float:
        fn()
        with cuda.Event() as start, cuda.Event() as end:
            ok(record(start.raw, stream.raw), "cudaEventRecord")
            for _ in range(runs):
                fn()
            ok(record(end.raw, stream.raw), "cudaEventRecord")
            end.synchronize()
            return start.elapsed_ms(end) / runs

    return span(eager), span(graph)


def capture_failure(device: Mapping[str, Any] | None) -> str | None:
    """Why a result's CUDA graph capture failed (the ``launch`` record ``compute_launch`` fills, as a
    result's ``device`` holds it: per round, or at its top), or None where it replayed or ran eager by choice."""
    device = device if isinstance(device, Mapping) else {}
    rounds = [device.get("last_round"), device.get("first_round"), device]
    for where in rounds:
        launch = where.get("launch") if isinstance(where, Mapping) else None
        if isinstance(launch, Mapping) and launch.get("capture_failed"):
            return str(launch["capture_failed"])
    return None


def launch_record(device: Mapping[str, Any] | None) -> dict[str, Any]:
    """The ``launch`` record ``compute_launch`` filled (mode, graph_by, a runtime's provider options, …), as
    a result's ``device`` holds it (the last round's, else the first's, else at its top); {} where none."""
    device = device if isinstance(device, Mapping) else {}
    for where in (device.get("last_round"), device.get("first_round"), device):
        launch = where.get("launch") if isinstance(where, Mapping) else None
        if isinstance(launch, Mapping) and launch:
            return dict(launch)
    return {}


def launch_notes(info: Mapping[str, Any]) -> list[str]:
    """The lines a result carries about how its launches ran: an arm that fell back to eager (and why),
    and a graph replay whose eager launches would have been host-bound (with the measured ratio)."""
    if info.get("capture_failed"):
        return [f"eager: CUDA graph capture failed ({info['capture_failed']}), so this arm's launches are eager "
                "while graph-captured arms replay; --eager times every arm's launches eagerly"]
    ratio = info.get("eager_over_graph")
    if ratio is not None and ratio >= EAGER_BOUND_RATIO:
        return [f"eager launches would be host-bound: {info['eager_ms']:.3f} ms per inference eager vs "
                f"{info['graph_ms']:.3f} ms replaying the CUDA graph (eager/graph {ratio:.2f}×); timed with the "
                "graph, as a TensorRT engine or trtexec runs; --eager times the eager launches"]
    return []


def event_iteration(stream: Any, compute: Callable[[], Any], host_in: list[tuple[np.ndarray, int]],
                    host_out: list[tuple[np.ndarray, int]], slots: list[list[Any]], copies: bool,
                    ) -> tuple[Callable[[list], int], Callable[[list], tuple[float, float, float]]]:
    """(issue, wait) for one iteration: ``issue(raw events)`` enqueues copies, compute and the four
    event records without syncing and returns the host enqueue ns; ``wait(events)`` waits for the
    last event and returns (h2d, compute, d2h) ms.

    The hot path calls the runtime directly with arguments resolved here: cuda-python's argument
    conversion plus numpy's ``.ctypes`` cost microseconds per call, and when the GPU waits for the
    host those microseconds land between the events."""
    clock = time.perf_counter_ns
    rt, ok = cuda.runtime(), cuda.ok
    memcpy, record, raw = rt.cudaMemcpyAsync, rt.cudaEventRecord, stream.raw
    to_dev, to_host = rt.cudaMemcpyKind.cudaMemcpyHostToDevice, rt.cudaMemcpyKind.cudaMemcpyDeviceToHost
    uploads = [(ptr, view.ctypes.data, view.nbytes) for view, ptr in host_in]
    downloads = [(view.ctypes.data, ptr, view.nbytes) for view, ptr in host_out]

    def issue(ev: list) -> int:
        """Enqueue one iteration with its four events; returns host enqueue ns. No sync."""
        if copies:
            ok(record(ev[0], raw), "cudaEventRecord")
            for dst, src, nbytes in uploads:
                ok(memcpy(dst, src, nbytes, to_dev, raw), "cudaMemcpyAsync(HostToDevice)")
        ok(record(ev[1], raw), "cudaEventRecord")
        t0 = clock()
        compute()
        t1 = clock()
        ok(record(ev[2], raw), "cudaEventRecord")
        if copies:
            for dst, src, nbytes in downloads:
                ok(memcpy(dst, src, nbytes, to_host, raw), "cudaMemcpyAsync(DeviceToHost)")
            ok(record(ev[3], raw), "cudaEventRecord")
        return t1 - t0

    def wait(ev: list) -> tuple[float, float, float]:
        (ev[3] if copies else ev[2]).synchronize()
        compute_ms = ev[1].elapsed_ms(ev[2])
        if not copies:
            return 0.0, compute_ms, 0.0
        return ev[0].elapsed_ms(ev[1]), compute_ms, ev[2].elapsed_ms(ev[3])

    return issue, wait


def run_in_flight(issue: Callable[[list], int], wait: Callable[[list], tuple[float, float, float]],
                  slots: list[list[Any]], raw_slots: list[list[Any]], config: TimingConfig) -> tuple[_Growable, float]:
    """The measured loop: per-stage samples and the span in seconds.

    Keeps IN_FLIGHT iterations queued (trtexec does the same): iteration i+1 is enqueued while i
    runs, so the host's launch latency and its wake-up from the sync do not open an idle gap on the
    GPU between the events (a host-bound model still shows its gaps: they are real). Slots are
    reused only after they were waited for."""
    clock = time.perf_counter_ns
    names = ("h2d_ms", "compute_ms", "d2h_ms", "latency_ms", "enqueue_ms")
    cols = _Growable(names, config.iterations)
    pending: list[tuple[list, int]] = []
    launched = 0
    first = clock()
    while True:
        if _keep_going(launched, first, config.iterations, config.duration_s):
            slot = launched % IN_FLIGHT
            pending.append((slots[slot], issue(raw_slots[slot])))
            launched += 1
            if len(pending) < IN_FLIGHT:
                continue
        if not pending:
            break
        ev, enqueue_ns = pending.pop(0)
        h2d_ms, compute_ms, d2h_ms = wait(ev)
        cols.add(h2d_ms, compute_ms, d2h_ms, h2d_ms + compute_ms + d2h_ms, enqueue_ns / 1e6)
    return cols, (clock() - first) / 1e9
