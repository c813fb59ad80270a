"""The Backend and Runner protocols every backend implements.

A backend builds an artifact from an ONNX file and loads it into a runner. Runners never time
themselves: ``trtprof.measure.timing`` owns warmup, stopping, buffers, streams and events, so every backend
is measured by the same loop (a backend that timed its own ``infer`` around copies and syncs is the
classic source of "Python is 3x slower than trtexec").
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, Mapping, Protocol, runtime_checkable

from ..spec import BuildSpec, Precision, TensorSpec

if TYPE_CHECKING:
    import numpy as np

    from ..engines.cache import EngineRecord

DeviceKind = Literal["cpu", "cuda"]


@dataclass(frozen=True)
class Availability:
    ok: bool
    reason: str = ""  # why not, and what to install

    def __bool__(self) -> bool:
        return self.ok


@dataclass
class BuildReport:
    """What a backend says about an artifact it just wrote.

    ``metadata`` lands in the engine's JSON (e.g. how many nodes really run in FP16); ``notes`` are
    printed after the build line, one per line, and kept in the metadata too.
    """

    metadata: dict[str, Any] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)


@runtime_checkable
class Runner(Protocol):
    """A loaded engine.

    ``device`` selects the timing loop: "cpu" runners are timed around ``infer`` with a host clock;
    "cuda" runners are timed with CUDA events around ``enqueue`` on the profiler's stream.
    """

    device: DeviceKind
    inputs: tuple[TensorSpec, ...]
    outputs: tuple[TensorSpec, ...]

    def infer(self, feeds: Mapping[str, "np.ndarray"]) -> dict[str, "np.ndarray"]:
        """Synchronous host-in/host-out inference (correctness path; host loop times this)."""
        ...

    def close(self) -> None: ...


class DeviceRunner(Runner, Protocol):
    """A runner whose work is enqueued on a CUDA stream and reads/writes profiler-owned buffers."""

    def prepare(self, input_shapes: Mapping[str, tuple[int, ...]]) -> dict[str, tuple[int, ...]]:
        """Fix input shapes for the coming runs; return every output's concrete shape."""
        ...

    def enqueue(self, buffers: Mapping[str, int], stream: int) -> None:
        """Enqueue one inference on ``stream`` (a cudaStream_t as int); never synchronize.

        ``buffers`` maps every input and output name to a device pointer owned by the profiler,
        sized for the shapes given to ``prepare``.
        """
        ...

    # Optional: ``bind(buffers, stream)`` — a context manager entered once per measurement that
    # yields a zero-argument launch equivalent to ``enqueue(buffers, stream)``. ``time_device`` uses
    # it when present: a runner whose per-call setup (stream/context managers) costs tens of µs of
    # host time would otherwise have that time measured as the model's, while the GPU waits.


LayerProfiler = Literal["ort-session", "torch-profiler", "tensorrt-profiler"]
TimelineSource = Literal["ort-session", "torch-profiler", "tensorrt-sequence"]
GraphCapture = Literal["outer", "runner"]


@dataclass(frozen=True)
class Capabilities:
    """Everything the rest of trtprof may ask of a backend, with its default, in one record.

    Why a record and not a base class: the wings above ``backends/`` (build, measure, layers, diagnose,
    serving, cli) must decide *what to do* with an engine from its backend's name alone, often without
    importing the backend (a results file, a cached record, a worker that has not loaded anything yet).
    A frozen record of plain values is cheap to read there (``backends.capabilities(name)``), is the same
    for every engine of the backend, and lists in one screen what a new backend has to say about itself.
    Behaviour (build, load, run) stays on the backend and runner classes; facts about it live here.

    A backend that declares nothing gets the defaults: a CPU runtime timed with the host clock, one
    artifact per batch set, no profiler, nothing special. Every field is read by name somewhere outside
    ``backends/``; none may be added without a reader.
    """

    # where its runners run: "cpu" runners are timed around ``infer`` with the host clock, "cuda" runners
    # with CUDA events around ``enqueue`` on the profiler's stream (measure.timing)
    device: DeviceKind = "cpu"
    # one artifact serves every batch size (ONNX Runtime keeps the dynamic batch, torch converts the graph):
    # the cache key leaves the batch set out (builder.pipeline.key_spec); TensorRT bakes the profile in
    batch_independent: bool = False
    # its build fixes every input shape at each batch size of the spec and folds the shape arithmetic
    # that makes constant (convert.fixed_shapes), when the graph has any: such an engine holds one module
    # per batch size, so the cache key keeps the batch set even where ``batch_independent`` (builder.pipeline.key_spec)
    fixed_shapes: bool = False
    # the per-layer profiler ``profile`` and ``compare --layers`` use for its engines (layers.profile), or None
    layer_profiler: LayerProfiler | None = None
    # where ``--timeline`` gets its spans (layers.timeline), or None
    timeline: TimelineSource | None = None
    # the per-layer profile's kernel times are GPU kernels comparable to the event-timed compute, so
    # their shortfall is time the GPU waited for the host (diagnose.layer_rules.gpu_idle_gaps)
    kernel_times: bool = False
    # why a load of its engines costs seconds, and where loads are cheap: appended to the budget's line
    # when the budget grows or cannot hold the loads (compare.core.budget_line); None: nothing to say
    costly_loads: str | None = None
    # compare's loads are lone worker processes by default (compare.options.default_isolation: load i of every batch
    # size one process, started once the previous one's rounds are done), not side by side: where measured to matter and
    # loads are cheap (onnxruntime-cuda on the H200: side-by-side loads read batch 1 up to 10 % fast, lone ones
    # within 1 % of a user's loop, 2026-12-04)
    lone_loads: bool = False
    # takes ``--threads`` (intra-op threads of a host runtime) at load; serving opens one session per
    # thread through ``load(..., threads=)`` (serving.sweep)
    host_threads: bool = False
    # its loads log the runtime's own warnings when asked (``load(..., log_warnings=True)``, issue 34)
    session_warnings: bool = False
    # a TensorRT plan: ``inspect`` reads its layers, its context's activations count towards the memory
    # in use, and its optimisation profile caps the batch (measure.maxbatch, cli.inspect)
    tensorrt_plan: bool = False
    # who captures the CUDA graph: "outer" — the timing loop captures the runner's launches on its own
    # stream; "runner" — the runtime captures and replays its own graph (ONNX Runtime's enable_cuda_graph),
    # so the loop must not capture around it (measure.timing.compute_launch)
    graph_capture: GraphCapture = "outer"
    # takes the A/B what-if's memory-format runner option (channels-last; compare.ab)
    memory_format_option: bool = False
    # the runner option (a build option applied at load, kept in the cache key) that switches its
    # convolutions to NHWC kernels, by the name its recorded provider options carry it (ONNX Runtime's
    # CUDA EP: ``prefer_nhwc``), or None: ``--what-if nhwc`` sets it to "1" (compare.ab), the NCHW finding
    # reads it from the provider options a result recorded (diagnose.rules)
    layout_option: str | None = None
    # runs ONNX Runtime's contrib ops (domain com.microsoft: Attention, SkipLayerNormalization, BiasGelu, …),
    # which ORT's transformer optimizer writes: ``--what-if ort-fusions`` runs on it (compare.ab)
    ort_contrib_ops: bool = False
    # its runtime inserts casts to FP32 where it has no FP16 kernel: the sentence the "fp16 that is not
    # FP16" finding adds, or None (diagnose.rules)
    fp16_fallback_cause: str | None = None
    # the extra that installs it (``pip install 'trtprof[EXTRA]'``), for messages
    extra: str | None = None
    # its runtime keeps a cache of JIT-compiled kernels per GPU beside each engine, ``<stem>.<smXY>.rtxcache``
    # (TensorRT-RTX): ``cache ls/prune`` count it among the entry's files (engines.cache_admin.scan_dir, told by
    # cli._common.keeps_runtime_cache)
    runtime_cache: bool = False

    @property
    def host_clock_on_gpu(self) -> bool:
        """A GPU backend whose per-layer and timeline times are host times (no ``kernel_times``): ONNX Runtime's
        session profiler on its CUDA EP times each node's launch, not its kernels (layers.timeline,
        diagnose.layer_rules)."""
        return self.device == "cuda" and not self.kernel_times


DEFAULT_CAPABILITIES = Capabilities()


class BackendBase:
    """Defaults for the optional members of ``Backend``: a backend class may inherit them or define its own.

    ``buildable`` — whether it can build here (TensorRT-RTX builds without a GPU); ``check_runnable`` —
    refuse a cached record that cannot run here, in one line; ``prime_runtime`` — start the runtime
    once before the first load, so its own start-up is not counted as an engine's memory."""

    name: str = ""
    artifact_suffix: str = ".onnx"
    capabilities: Capabilities = DEFAULT_CAPABILITIES

    def available(self) -> Availability:  # pragma: no cover - every backend overrides it
        raise NotImplementedError

    def buildable(self) -> Availability:
        return self.available()

    def check_runnable(self, record: "EngineRecord") -> None:
        return None

    def prime_runtime(self, threads: int | None = None) -> bool:
        return False


class RunnerBase:
    """Every optional member of a runner the rest of trtprof reads, declared once with its default.

    Runners inherit it; the readers (``getattr(runner, NAME, None)``, so a duck-typed test fake without the
    base still works) treat a None as "this runner has none". A member listed here and nowhere read is a
    defect; a member read elsewhere and not listed here is one too.
    """

    # runtime state a result records
    autotune: bool | None = None  # cuDNN autotuning on/off (torch); None: the runtime has no such setting
    tf32: bool | None = None  # TF32 math on (torch)
    loaded_by: str | None = None  # what made the module that runs (torch: torch.export or onnx2torch)
    load_warnings: tuple[str, ...] = ()  # the runtime's warnings while loading (measure.bench.load_runner)
    # the timing loop (measure.timing)
    stream: Any = None  # the stream the runtime is bound to at load (ORT's user_compute_stream): timed on
    bind: Any = None  # bind(buffers, stream) -> context manager yielding a zero-argument launch
    runtime_graph: Any = None  # runtime_graph(enabled) -> launch record: the runtime replays its own CUDA graph
    # expect_shapes(shapes): every set of input shapes the coming launches use, told before the first (workers'
    # priming): ORT's CUDA graph runner runs each eagerly first, to capture them all in one session
    expect_shapes: Any = None
    # memory (system.memory, measure.workers, measure.maxbatch, serving)
    trim: Any = None  # trim(): give back cached device memory between blocks
    reset_memory_peak: Any = None  # reset_memory_peak(): before a measured run
    memory_report: Any = None  # memory_report() -> dict: the runtime's own memory figures
    runtime_report: Any = None  # runtime_report() -> dict: settings/caches for bench's config.runtime
    # serving (serving.driver)
    fork: Any = None  # fork() -> a runner sharing the weights, for one more request in flight
    hold_mode: Any = None  # hold_mode() -> context manager setting thread-wide flags once for every thread
    # per-layer profiling (layers.torch_profile)
    use_converted_module: Any = None  # use_converted_module() -> context manager: profile onnx2torch's module


# What the ``in_use_bytes`` of a runner's ``memory_report()`` measures, in words, by the report's "kind": read back
# from a result (which keeps the report, not the runner) where a batch-size search names the memory at its answer
# (measure.maxbatch.fit_memory); a kind not listed is "in use"
MEMORY_REPORT_WORDS: Mapping[str, str] = {"torch_allocator": "torch allocator peak",  # TorchRunner
                                          "tensorrt": "TensorRT context + IO buffers"}  # TensorRTRunner (and RTX's)


def set_autotune(runner: Any, enabled: bool) -> bool | None:
    """Switch a runner's kernel autotuning (cuDNN benchmark mode on torch) and return what it now
    does; None for runners without the setting (ONNX Runtime CPU, TensorRT, which always times its
    tactics at build time). Callers record the returned value in their results' ``config``."""
    if getattr(runner, "autotune", None) is None:
        return None
    runner.autotune = bool(enabled)
    return bool(runner.autotune)


class Backend(Protocol):
    name: str
    artifact_suffix: str  # e.g. ".onnx", ".plan"
    capabilities: Capabilities  # what the rest of trtprof may ask of it (see Capabilities)

    def available(self) -> Availability:
        """Cheap check (importlib.util.find_spec, device count); never imports the heavy package."""
        ...

    def check_precision(self, precision: Precision) -> None:
        """Raise UnsupportedPrecision when this backend cannot honour ``precision`` here."""
        ...

    def environment(self) -> dict[str, Any]:
        """Backend version and device identity: part of every cache key."""
        ...

    def build(self, model: Path, spec: BuildSpec, out: Path) -> BuildReport:
        """Write the artifact for ``spec`` to ``out`` (a temp path the cache renames into place).
        Backends that take int8/fp8 also accept ``calibration=`` (a list of feed dicts, made by
        build_engines from --inputs or seeded random inputs as the spec's options say)."""
        ...

    def buildable(self) -> Availability:
        """Whether it can build here (``BackendBase``: where it can run)."""
        ...

    def check_runnable(self, record: "EngineRecord") -> None:
        """Raise a TrtprofError (one line) when ``record`` cannot run here; ``BackendBase``: never."""
        ...

    def prime_runtime(self, threads: int | None = None) -> bool:
        """Start the runtime once before the first load; True where it started something (``BackendBase``:
        nothing to start)."""
        ...

    def load(self, artifact: Path, record: "EngineRecord") -> Runner:
        """A runner for ``artifact``. A backend whose capabilities say ``host_threads`` also takes
        ``threads=``; one that says ``session_warnings`` takes ``log_warnings=``."""
        ...
