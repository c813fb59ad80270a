"""The concurrent driver: N requests in flight against one engine, per-request latency and throughput.

Why a second driver beside ``trtprof.measure.timing``: the single-stream loop answers "how long does one
request take"; a deployer asks "how many requests per second at what latency when N are in flight",
which perf_analyzer's concurrency mode and trtexec's ``--infStreams`` answer. That needs N
independent issuers, so it is a different loop, and the single-stream one stays as it is.

The model (closed loop, perf_analyzer's ``--concurrency-range``): N worker threads, each with its own
*session* (below), issue one synchronous request after another. Each worker first issues one
unmeasured *priming* request, one worker at a time; then all start together (a barrier),
run ``warmup_s`` unmeasured, then a window of at least ``window_s`` and ``min_requests`` completed
requests is measured. A request's latency is the host time from issue to completion, as a client
sees it (queueing behind the other N−1 included); throughput is the requests *completed* inside
the window over its wall time (samples/s = that × batch).

Sessions, so that the N requests really are independent:

* **GPU** (``gpu_sessions``): per worker its own non-blocking CUDA stream, its own pinned host and
  device buffers, and its own execution state: TensorRT engines get one execution context per stream
  (``runner.fork()``; a context must not run on two streams at once), the torch module is shared and
  each worker enters ``runner.bind`` on its own stream in its own thread (torch's current stream and
  inference mode are per thread). A request is H2D (unless ``copies`` is off), the launch, D2H, an
  event and a blocking wait on it.
Threads are long-lived (``Workers``): slot i is the same thread in every window of a sweep. This is
not a detail. PyTorch keeps cuDNN's autotuned convolution plans in a ``thread_local`` cache
(aten/src/ATen/native/cudnn/Conv_v8.cpp, ``benchmark_cache``), so with ``cudnn.benchmark`` on, a new
thread autotunes every convolution again on its first request. Fresh threads per window made every
window autotune inside its own measurement (N threads at once, timing each other's kernels), which on
an H200 put fp16/tf32 ResNet-50 (many tensor-core candidates to time) 10× below fp32 and at 0
requests/s with 8 in flight. The priming request, serialized, lets each thread autotune alone and
before anything is measured; reusing the threads makes that happen once per thread and shape.

* **CPU** (``cpu_sessions``): ONNX Runtime gets N sessions whose intra-op threads split the total
  (``threads`` or the usable cores) between them, recorded in the point's ``sessions``; a runner of
  any other kind is shared by the N threads.
"""
from __future__ import annotations

import functools
import os
import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import ExitStack, contextmanager, nullcontext
from dataclasses import asdict, dataclass, field
from typing import Any, Callable, ContextManager, Iterator, Mapping, Sequence

import numpy as np

from ..system.energy import per_inference
from ..errors import BadInput

DEFAULT_WINDOW_S = 1.0  # one measured window per point and round
DEFAULT_WARMUP_S = 0.2  # all N workers busy before the window opens (GPU clocks, allocator, arenas)
DEFAULT_MIN_REQUESTS = 20  # a p99 needs some requests; the window grows until this many completed …
# A window is repeated points × rounds times: an hour each is already a day-long sweep; more is a typo.
MAX_WINDOW_S = 3600.0
MAX_WINDOW_FACTOR = 10  # … but never beyond 10 windows' time: a very slow point is reported as it is
DEFAULT_ROUNDS = 3  # windows per point, interleaved across precisions: the SLO verdict's CI needs rounds
POLL_S = 0.005  # how often the main thread looks at the completed count once the window's time is up

# A session: entered in its worker thread, yields the zero-argument synchronous request.
Session = Callable[[], ContextManager[Callable[[], Any]]]


@dataclass(frozen=True)
class ServingConfig:
    """What the concurrency sweep measures and for how long; recorded in the JSON."""

    concurrency: tuple[int, ...] = (1,)
    window_s: float = DEFAULT_WINDOW_S
    warmup_s: float = DEFAULT_WARMUP_S
    min_requests: int = DEFAULT_MIN_REQUESTS
    rounds: int = DEFAULT_ROUNDS
    copies: bool = True  # GPU: H2D and D2H inside every request
    threads: int | None = None  # CPU: intra-op threads in total, split between the N sessions
    slo_ms: float | None = None  # p99 target for "throughput at a latency target" (trtprof.stats.slo)
    margin: float | None = None  # the run's --margin for the throughput verdicts at the target (None: the default)

    def __post_init__(self) -> None:
        if not self.concurrency or any(int(n) < 1 for n in self.concurrency):
            raise BadInput("--concurrency: give positive integers, e.g. 1,2,4,8")
        if not 0 < self.window_s <= MAX_WINDOW_S or self.warmup_s < 0:
            raise BadInput(f"--window-s must be > 0 and at most {MAX_WINDOW_S:g}")
        if self.min_requests < 1 or self.rounds < 1:
            raise BadInput("--serving-rounds must be >= 1")
        if self.slo_ms is not None and not self.slo_ms > 0:
            raise BadInput("--slo-ms must be > 0 (a p99 latency target in milliseconds)")

    def to_json(self) -> dict[str, Any]:
        return {**asdict(self), "concurrency": list(self.concurrency)}


@dataclass
class Window:
    """One measured window at one point (engine, batch size, concurrency)."""

    latencies_ms: np.ndarray  # per request completed inside the window, all workers
    wall_s: float
    per_worker: list[int]  # requests completed inside the window, per worker
    energy: dict[str, Any] = field(default_factory=dict)
    stretched: bool = False  # the window ran past window_s to reach min_requests
    started_unix: float = 0.0  # wall-clock edges (time.time), to line the window up with outside power logs
    ended_unix: float = 0.0

    @property
    def requests(self) -> int:
        return int(self.latencies_ms.size)

    @property
    def requests_per_s(self) -> float:
        return self.requests / self.wall_s if self.wall_s > 0 else float("nan")


class Workers:
    """Long-lived worker threads: slot ``i`` runs on the same thread in every window it is given.

    Per-thread state survives from one window to the next: PyTorch's cuDNN plan cache (per thread,
    see the module docstring), its cuDNN/cuBLAS handles. A sweep opens one for its highest
    concurrency level and hands it to every window. One single-thread executor per slot."""

    def __init__(self, n: int) -> None:
        self._slots = [ThreadPoolExecutor(max_workers=1, thread_name_prefix=f"trtprof-serve-{i}") for i in range(n)]

    def __len__(self) -> int:
        return len(self._slots)

    def submit(self, i: int, fn: Callable[[], None]) -> Future:
        return self._slots[i].submit(fn)

    def close(self) -> None:
        for slot in self._slots:
            slot.shutdown(wait=True)

    def __enter__(self) -> "Workers":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


class _WindowRun:
    """The shared state of one window's workers: each one's (start, end) request times, the errors, the stop
    flag, the barrier they start the window on and the lock their priming request takes."""

    def __init__(self, sessions: Sequence[Session], clock: Callable[[], int]) -> None:
        n = len(sessions)
        self.sessions, self.clock = sessions, clock
        self.times: list[list[tuple[int, int]]] = [[] for _ in range(n)]
        self.errors: list[BaseException] = []
        self.stop = threading.Event()
        self.barrier = threading.Barrier(n + 1)
        self.priming = threading.Lock()

    def work(self, i: int) -> None:
        record, clock = self.times[i].append, self.clock
        try:
            with self.sessions[i]() as request:
                with self.priming:  # one thread at a time: its first request may autotune (timed kernels)
                    request()
                self.barrier.wait()
                while not self.stop.is_set():
                    t0 = clock()
                    request()
                    record((t0, clock()))
        except threading.BrokenBarrierError:
            pass  # another worker failed during set-up; its error is the one to report
        except BaseException as err:  # noqa: BLE001 - re-raised in the caller's thread
            self.errors.append(err)
            self.stop.set()
            self.barrier.abort()

    def requests(self) -> int:
        return sum(len(t) for t in self.times)

    def measure(self, config: ServingConfig, meter: Any, sleep: Callable[[float], None]) -> dict[str, Any]:
        """Warm up, then time the window (stretched until ``min_requests``, up to ``MAX_WINDOW_FACTOR``):
        its edges on the clock and in Unix time, the energy ``meter`` read at them, whether it stretched."""
        edges: dict[str, Any] = {"start": 0, "end": 0, "started_unix": 0.0, "ended_unix": 0.0, "spent": {},
                                 "stretched": False}
        try:
            self.barrier.wait()
            sleep(config.warmup_s)
            before = self.requests()
            if meter is not None:
                meter.start()
            edges["start"], edges["started_unix"] = self.clock(), time.time()
            sleep(config.window_s)
            limit = edges["start"] + MAX_WINDOW_FACTOR * config.window_s * 1e9
            while not self.stop.is_set() and self.requests() - before < config.min_requests and self.clock() < limit:
                edges["stretched"] = True
                sleep(POLL_S)
            edges["end"], edges["ended_unix"] = self.clock(), time.time()
            if meter is not None:  # at the window's edge, while the workers still run: no tail in the joules
                edges["spent"] = meter.stop()
        except threading.BrokenBarrierError:
            pass
        return edges


def run_window(sessions: Sequence[Session], config: ServingConfig = ServingConfig(), *, meter: Any = None,
               batch_size: int = 1, workers: Workers | None = None, clock: Callable[[], int] = time.perf_counter_ns,
               sleep: Callable[[float], None] = time.sleep) -> Window:
    """Run ``len(sessions)`` closed-loop workers; measure one window (see the module docstring) of
    ``config.window_s`` after ``config.warmup_s``, stretched to at least ``config.min_requests``.

    ``workers``: the long-lived threads to run on (slot i runs session i); without it the window
    gets threads of its own, which a sweep must not do (per-thread autotuning, module docstring).
    ``meter`` (``energy.EnergyMeter``) is started and stopped at the window's edges. A worker's
    failure stops all of them and is raised here, after every thread has ended."""
    n = len(sessions)
    if workers is None:
        with Workers(n) as own:
            return run_window(sessions, config, meter=meter, batch_size=batch_size, workers=own, clock=clock,
                              sleep=sleep)
    if len(workers) < n:
        raise ValueError(f"{n} sessions need {n} workers, got {len(workers)}")
    run = _WindowRun(sessions, clock)
    running = [workers.submit(i, functools.partial(run.work, i)) for i in range(n)]
    try:
        edges = run.measure(config, meter, sleep)
    finally:
        run.stop.set()
        for job in running:
            job.result()  # work() keeps its errors in ``errors``
    if run.errors:
        raise run.errors[0]
    start, end = edges["start"], edges["end"]
    done = [[(a, b) for a, b in t if start <= b <= end] for t in run.times]
    latencies = np.array([(b - a) / 1e6 for t in done for a, b in t], dtype=np.float64)
    window = Window(latencies_ms=latencies, wall_s=(end - start) / 1e9, per_worker=[len(t) for t in done],
                    stretched=edges["stretched"], started_unix=edges["started_unix"], ended_unix=edges["ended_unix"])
    if edges["spent"]:
        window.energy = per_inference(edges["spent"], window.requests * batch_size)
    return window


def usable_cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


@contextmanager
def cpu_sessions(runner: Any, n: int, feeds: Mapping[str, np.ndarray], *,
                 load: Callable[[int], Any] | None = None, threads: int | None = None
                 ) -> Iterator[tuple[list[Session], dict[str, Any]]]:
    """N host sessions. With ``load`` (ONNX Runtime: ``threads_per_session → runner``), N runners
    whose intra-op threads split ``threads`` (default: the usable cores); otherwise ``runner`` shared."""
    feeds = dict(feeds)
    with ExitStack() as stack:
        if load is None:
            runners = [runner] * n
            info: dict[str, Any] = {"kind": "cpu", "sessions": 1, "shared_by_threads": n}
        else:
            total = threads or usable_cores()
            split = max(1, total // n)
            runners = []
            for _ in range(n):
                r = load(split)
                stack.callback(r.close)
                runners.append(r)
            info = {"kind": "cpu", "sessions": n, "threads_total": total, "intra_op_threads_per_session": split,
                    "oversubscribed": split * n > total}

        def session(r: Any) -> Session:
            return lambda: nullcontext(lambda: r.infer(feeds))

        yield [session(r) for r in runners], info


class SessionList(list):
    """The sessions of ``gpu_sessions``; ``outputs()`` copies each session's host outputs as its last
    request left them (with ``copies``; a correctness check of the concurrent path)."""

    outputs: Callable[[], list[dict[str, np.ndarray]]]


@contextmanager
def gpu_sessions(runner: Any, n: int, feeds: Mapping[str, np.ndarray], *, copies: bool = True,
                 streams: Sequence[Any] | None = None) -> Iterator[tuple[list[Session], dict[str, Any]]]:
    """N CUDA sessions over one loaded engine (see the module docstring). Everything is created
    here, in the caller's thread, and released after the workers have ended, except ``streams``
    (``cuda.Stream``, at least N) that a sweep keeps for all its windows: PyTorch's caching allocator
    keeps its free blocks per stream, so a new stream per window would allocate afresh every window
    and leave the old streams' blocks reserved."""
    from ..system import cuda

    input_shapes = {name: tuple(int(d) for d in np.shape(a)) for name, a in feeds.items()}
    out_dtypes = {spec.name: np.dtype(spec.dtype) for spec in runner.outputs}
    with ExitStack() as stack:
        fork = getattr(runner, "fork", None)
        instances = _instances(stack, runner, n)
        out_shapes: dict[int, dict[str, tuple[int, ...]]] = {}
        for inst in instances:
            if id(inst) not in out_shapes:
                out_shapes[id(inst)] = inst.prepare(input_shapes)
        hold = getattr(runner, "hold_mode", None)  # torch: TF32/autotune flags set once, for every thread
        if hold is not None:
            stack.enter_context(hold())
        lock = threading.Lock()  # a shared runner's bind caches its bound tensors: one thread at a time
        rt, ok = cuda.runtime(), cuda.ok
        to_dev, to_host = rt.cudaMemcpyKind.cudaMemcpyHostToDevice, rt.cudaMemcpyKind.cudaMemcpyDeviceToHost
        sessions = SessionList()
        host_outputs: list[dict[str, np.ndarray]] = []
        sessions.outputs = lambda: [{k: np.array(v, copy=True) for k, v in o.items()} for o in host_outputs]
        if streams is not None and len(streams) < n:
            raise ValueError(f"{n} sessions need {n} streams, got {len(streams)}")
        for k, inst in enumerate(instances):
            stream = streams[k] if streams is not None else stack.enter_context(cuda.Stream())
            buffers, uploads, downloads, outputs = _session_buffers(stack, feeds, stream, out_shapes[id(inst)],
                                                                    out_dtypes)
            host_outputs.append(outputs)
            stream.synchronize()
            done = stack.enter_context(cuda.Event(blocking_sync=True, timing=False))
            transfers = (uploads, downloads) if copies else ([], [])
            sessions.append(_gpu_session(inst, buffers, stream, done, transfers, lock, (rt, ok, to_dev, to_host)))
        yield sessions, {"kind": "cuda", "streams": n, "contexts": len({id(i) for i in instances}),
                         "per_stream_context": fork is not None, "copies": copies}


def _instances(stack: ExitStack, runner: Any, n: int) -> list[Any]:
    """N instances of ``runner`` for N sessions: forks where the runner forks (each closed by ``stack``),
    else the runner itself N times."""
    fork = getattr(runner, "fork", None)
    instances = [runner]
    for _ in range(n - 1):
        if fork is None:
            instances.append(runner)
        else:
            twin = fork()
            stack.callback(twin.close)
            instances.append(twin)
    return instances


def _session_buffers(stack: ExitStack, feeds: Mapping[str, np.ndarray], stream: Any,
                     out_shapes: Mapping[str, tuple[int, ...]], out_dtypes: Mapping[str, np.dtype]
                     ) -> tuple[dict[str, int], list, list, dict[str, np.ndarray]]:
    """One session's pinned host and device buffers (released by ``stack``), its inputs uploaded once on
    ``stream``: (device pointers by name, upload copies, download copies, host output arrays)."""
    from ..system import cuda

    buffers: dict[str, int] = {}
    uploads, downloads = [], []
    for name, arr in feeds.items():
        arr = np.ascontiguousarray(arr)
        view = stack.enter_context(cuda.PinnedHostBuffer(arr.nbytes)).array(arr.shape, arr.dtype)
        view[...] = arr
        buffers[name] = stack.enter_context(cuda.DeviceBuffer(arr.nbytes)).ptr
        uploads.append((buffers[name], view.ctypes.data, view.nbytes))
        cuda.memcpy_htod_async(buffers[name], view, stream)
    outputs: dict[str, np.ndarray] = {}
    for name, shape in out_shapes.items():
        dtype = out_dtypes.get(name, np.dtype("float32"))
        nbytes = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
        outputs[name] = stack.enter_context(cuda.PinnedHostBuffer(nbytes)).array(tuple(shape), dtype)
        buffers[name] = stack.enter_context(cuda.DeviceBuffer(nbytes)).ptr
        downloads.append((outputs[name].ctypes.data, buffers[name], nbytes))
    return buffers, uploads, downloads, outputs


def _gpu_session(inst: Any, buffers: dict[str, int], stream: Any, done: Any, transfers: tuple[list, list],
                 lock: threading.Lock, api: tuple) -> Session:
    rt, ok, to_dev, to_host = api
    uploads, downloads = transfers
    memcpy, record, raw, event = rt.cudaMemcpyAsync, rt.cudaEventRecord, stream.raw, done.raw

    @contextmanager
    def session() -> Iterator[Callable[[], None]]:
        with ExitStack() as stack:
            bind = getattr(inst, "bind", None)
            with lock:  # entered in the worker's own thread: torch's current stream is per thread
                if bind is not None:
                    launch = stack.enter_context(bind(buffers, stream.handle))
                else:
                    def launch() -> None:
                        inst.enqueue(buffers, stream.handle)

            def request() -> None:
                for dst, src, nbytes in uploads:
                    ok(memcpy(dst, src, nbytes, to_dev, raw), "cudaMemcpyAsync(HostToDevice)")
                launch()
                for dst, src, nbytes in downloads:
                    ok(memcpy(dst, src, nbytes, to_host, raw), "cudaMemcpyAsync(DeviceToHost)")
                ok(record(event, raw), "cudaEventRecord")
                done.synchronize()

            yield request

    return session
