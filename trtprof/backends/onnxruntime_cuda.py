"""ONNX Runtime's CUDA execution provider as a GPU backend, timed by trtprof's GPU loop like TensorRT.

Engines are ONNX files per precision, as on the CPU backend (fp16 by trtprof's own conversion, float IO
kept); what differs is how they run. The runner is a ``cuda`` runner:
- its session runs on a stream the runner creates at load and hands to ORT as ``user_compute_stream``;
  the timing loop times on that same stream (``stream``), so the events, the pinned copies and ORT's
  kernels are ordered on one stream, as trtexec's are;
- inputs and outputs are bound to the profiler's device buffers (IO binding): no host copy, no
  allocation inside the timed call; ``disable_synchronize_execution_providers`` keeps ORT from
  synchronising the stream at the end of each run, so the host enqueue time is ORT's launch time;
- CUDA graphs are ORT's own (``enable_cuda_graph``): ORT captures on its first runs and replays after,
  one graph per set of bound buffers (``gpu_graph_id``), so the loop does not capture around it
  (``Capabilities.graph_capture = "runner"``). ORT refuses a graph when a node is not on the CUDA EP
  (shape nodes left on the CPU, Memcpy around them): the runner then runs eager and says why.
- graphs at several shapes (issue 42): ORT keeps one graph per ``gpu_graph_id``, and they may differ in shape,
  but on the H200 one session that captured at batch 1, then ran and captured at batch 32, faulted replaying
  batch 1 (cudaErrorIllegalAddress / MisalignedAddress, timm's EfficientNet-B0 and MobileNetV3-L); the same
  session run eagerly at 1 and 32 *before* its first capture replayed both without fault, and so did a session
  per batch size (benchmarks/ort_shape_switch.py). So the load's session captures only at shapes it ran eagerly
  before its first capture: ``expect_shapes`` (compare's workers call it with every batch size before priming)
  and ``infer``/``prepare`` before any capture add to that set; a shape outside it, after a capture, gets a
  session of its own with the same options on the same stream (``session_per_shape`` in its settings), kept
  for switching back. ``infer`` at such a shape runs on one graph-less session, which ``trim`` gives back.
  (One session per shape for every shape ran ResNet-50 out of device memory with 6 workers × 3 arms side by side.)
  With the graph off, one session runs every shape.
- a session per shape where a worker is alone on the GPU: ORT's Conv keeps one shape's cuDNN plans
  (conv.cc ``last_x_dims``) and builds them again on the host whenever its session switches shape: on the H200
  ~2 s per arm and shape for EfficientNet-B0 and MobileNetV3-L, 0.1-0.3 s for ResNet-50 (2026-12-04d), and the
  run ahead above costs each arm one build per shape more. Lone loads (compare's default on a GPU) have one
  worker alive at a time, so their workers tell the shapes with ``expect_shapes(..., own_sessions=True)``:
  nothing runs ahead, the first shape told keeps the load's session and every other shape gets a session of its
  own (``session_per_shape``), opened then, which never switches shape; ``infer`` (life 0's accuracy pass, told
  the shapes first) runs on them too, and a session's first run at its shape (its cuDNN plans built) gives the
  output shapes ``prepare`` takes instead of running it again. Each such session holds the weights once more:
  only where they fit (``room_for_sessions``: the bytes the load's session took, measured by cudaMemGetInfo at
  load, times the sessions more, within ``SESSION_ROOM`` of the memory free when told, after the sessions earlier
  runners opened); else the load's session runs every shape ahead as above, and ``session_per_shape_refused`` says why.
- fixed dims (issues 42 and 43): ``torch.onnx.export`` writes a transformer's reshapes as arithmetic on the
  input's shape (Shape → Gather → Concat → Reshape), which ORT places on its CPU EP, so it refuses the
  graph. When a load's graph was refused and the inputs' dynamic dims are named, ``prepare`` opens the
  session once more with every named dim fixed at the prepared shapes (ORT's documented
  ``add_free_dimension_override_by_name``): ORT's own constant folding then removes the shape arithmetic
  at session creation, every node lands on the CUDA EP, and the graph is captured. That session serves
  the prepared shapes only (one per set, as above); the load's session runs any other shape (``infer``). Its
  result records the overrides (``free_dimension_overrides``) and the load's refusal
  (``cuda_graph_refused_dynamic``); where ORT still refuses, the runner stays eager and the reason says both.

Every provider option that changes speed is chosen here on purpose and recorded (``settings``): TF32
(``use_tf32`` only for tf32), ``cudnn_conv_algo_search`` EXHAUSTIVE (ORT >= 1.20 with cuDNN 9 maps it to
cuDNN's heuristics query, so a load does not time kernels; DEFAULT is cuDNN's slow fallback, ORT#22705),
``prefer_nhwc`` off (ORT's default; ``--what-if nhwc`` measures it), the cuDNN workspace at its maximum
(ORT's default), the graph on. ``session.get_provider_options()`` is recorded as ORT reports it.
"""
from __future__ import annotations

import importlib.util
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterable, Iterator, Mapping

from ..errors import BackendUnavailable, BadModel, UnsupportedPrecision
from ..system import readahead
from ..spec import Precision, TensorSpec
from .base import Availability, Capabilities, DeviceKind, RunnerBase
from .onnxruntime import (CUDA_EP, ORT_WARNING, OnnxRuntimeBackend, SessionSettings, fix_dims, import_ort,
                          ort_cause, ort_session)

if TYPE_CHECKING:
    import numpy as np

    from ..engines.cache import EngineRecord

EXTRA = "ort-cuda"
INSTALL = f"pip install 'trtprof[{EXTRA}]' (pip uninstall -y onnxruntime first: both packages provide the module)"
# ORT's CUDA EP options trtprof chooses on purpose (strings, as ORT takes them); use_tf32 and the stream
# are set per session
CUDA_OPTIONS: dict[str, str] = {
    "cudnn_conv_algo_search": "EXHAUSTIVE",
    "cudnn_conv_use_max_workspace": "1",
    "prefer_nhwc": "0",
    "do_copy_in_default_stream": "1",
}
# The runner option ``--what-if nhwc`` sets (a build option applied at load: the engine file is the same, the
# session differs, so it stays in the cache key, builder.pipeline.RUNNER_OPTIONS): ORT's own option name, so a
# result's recorded provider options carry it under the same name; "1" runs Conv (and pooling, BatchNorm)
# with ORT's NHWC kernels, transposing at the edges of each NHWC region.
LAYOUT_OPTION = "prefer_nhwc"
NHWC = "1"
NO_SYNC = "disable_synchronize_execution_providers"  # ORT run config: no cudaStreamSynchronize after a run
GRAPH_ID = "gpu_graph_id"  # ORT run config: which captured graph a run uses; -1 runs without one
GRAPH_REFUSED = "all compute graph nodes have not been partitioned"  # ORT's words when a node is not on CUDA


# A session per batch size (``expect_shapes(..., own_sessions=True)``) holds the model's weights once more for each
# shape: only where a runner's sessions more take at most this share of the device's free memory (read when told, so
# the sessions earlier runners opened are counted), else the load's session serves every shape, run ahead (a large
# model on a small GPU).
SESSION_ROOM = 0.5


def free_device_bytes() -> int | None:
    """The current device's free memory (cudaMemGetInfo), None where it cannot be read."""
    from ..system import cuda

    try:
        return cuda.memory_info()[0]
    except Exception:  # noqa: BLE001 - no driver, no device: unknown, and the caller stays with one session
        return None


def room_for_sessions(footprint: int | None, more: int) -> str | None:
    """None where ``more`` sessions of ``footprint`` bytes each (the load's session's, measured at load) fit within
    ``SESSION_ROOM`` of the free device memory now; else why not."""
    free = free_device_bytes()
    if footprint is None or free is None:
        return "the device memory a session takes could not be read"
    if footprint * more > SESSION_ROOM * free:
        gib = 2.0 ** 30
        return (f"{more} more sessions of {footprint / gib:.2f} GiB exceed {SESSION_ROOM:.0%} of the "
                f"{free / gib:.2f} GiB free")
    return None


def imported_package() -> str:
    """Which ONNX Runtime distribution provides the ``onnxruntime`` module here (one line for messages)."""
    from importlib import metadata

    found = []
    for dist in ("onnxruntime-gpu", "onnxruntime"):
        try:
            found.append(f"{dist} {metadata.version(dist)}")
        except metadata.PackageNotFoundError:
            continue
    spec = importlib.util.find_spec("onnxruntime")
    where = str(Path(spec.origin).parent) if spec is not None and spec.origin else "nowhere"
    return (", ".join(found) or "no onnxruntime distribution") + f" (module imported from {where})"


def cuda_availability() -> Availability:
    """Whether ORT's CUDA EP can run here: a GPU, the module, and the CUDA provider in it."""
    from ..system import cuda

    if importlib.util.find_spec("onnxruntime") is None:
        return Availability(False, f"onnxruntime-gpu is not installed: {INSTALL}")
    if cuda.device_count() == 0:
        return Availability(False, "no CUDA GPU (ONNX Runtime's CUDA execution provider needs an NVIDIA GPU)")
    providers = import_ort().get_available_providers()
    if CUDA_EP not in providers:
        return Availability(False, f"ONNX Runtime here has no CUDA execution provider ({', '.join(providers)}): "
                                   f"{imported_package()}; {INSTALL}")
    return Availability(True)


def free_dims(inputs: tuple[TensorSpec, ...], shapes: Mapping[str, tuple[int, ...]]) -> tuple[dict[str, int], str]:
    """The value of each named dynamic input dim at these shapes (for ORT's free-dimension overrides), and
    '' — or ({}, why not): no dynamic dim, an unnamed one (ORT can override only what has a name, or a
    denotation), or one name given two values by the shapes."""
    dims: dict[str, int] = {}
    for spec in inputs:
        shape = shapes.get(spec.name)
        if shape is None or len(shape) != len(spec.shape):
            return {}, f"input {spec.name!r} has no prepared shape of rank {len(spec.shape)}"
        for declared, value in zip(spec.shape, shape):
            if declared is None:
                return {}, f"input {spec.name!r} has an unnamed dynamic dim (ORT overrides named dims only)"
            if isinstance(declared, str):
                if dims.setdefault(declared, int(value)) != int(value):
                    return {}, f"dim {declared!r} is {dims[declared]} and {int(value)} in the prepared shapes"
    return dims, "" if dims else "no dynamic input dim"


def session_settings(session: Any, graph: bool, refused: str | None) -> dict[str, Any]:
    """What a result records about how this session ran: ORT's own view of the CUDA EP options, and the graph."""
    try:
        options = dict(session.get_provider_options().get(CUDA_EP, {}))
    except Exception:  # noqa: BLE001 - diagnostics only
        options = {}
    options.pop("user_compute_stream", None)  # a pointer, different in every process
    return {"provider": CUDA_EP, "provider_options": options, "cuda_graph": graph,
            **({"cuda_graph_refused": refused} if refused else {}),
            "io_binding": True, "run_config": {NO_SYNC: "1"}}


def output_shapes(ran: Mapping[str, Any]) -> dict[str, tuple[int, ...]]:
    """Each output's shape, from a run's outputs."""
    return {name: tuple(int(d) for d in value.shape) for name, value in ran.items()}


def shapes_key(shapes: Mapping[str, tuple[int, ...]]) -> tuple[Any, ...]:
    """What identifies a set of input shapes (the runner keeps one session per key)."""
    return tuple(sorted((str(k), tuple(int(d) for d in v)) for k, v in shapes.items()))


@dataclass
class ShapeSession:
    """The session that runs one set of input shapes, with what a result records of it: the dims it fixed,
    why it runs eager (None: ORT's graph on), extra settings, and the graphs it captured (by bound buffers)."""
    session: Any
    fixed: dict[str, int]
    refused: str | None
    notes: dict[str, Any] = field(default_factory=dict)
    graph_ids: dict[tuple[Any, ...], int] = field(default_factory=dict)


class OnnxRuntimeCudaRunner(RunnerBase):
    """A session on the CUDA EP, run through IO binding on its own stream (see the module docstring)."""

    device: DeviceKind = "cuda"
    # its device state is kept from one timing block to the next inside a LaunchKeeper (measure.kept_launch):
    # the session keeps every graph it captured anyway, so new buffers per block only cost a new capture
    keeps_launch = True
    # its first run at a shape times no kernels (cudnn_conv_algo_search EXHAUSTIVE is cuDNN's heuristics query on
    # ORT >= 1.20 with cuDNN 9, ../shared/FACTS.md), so compare's workers may make those runs side by side
    # before timing (measure.workers' priming); a torch runner's cudnn.benchmark times kernels: not it
    primes_beside_others = True

    def __init__(self, session: Any, stream: Any, record: "EngineRecord", *, graph: bool, refused: str | None,
                 reopen: Callable[[bool, Mapping[str, int] | None], Any] | None = None) -> None:
        inputs: tuple[TensorSpec, ...] = tuple(record.inputs)
        outputs: tuple[TensorSpec, ...] = tuple(record.outputs)
        self._session = session
        self._dynamic = session  # the load's session: the shapes it may run (_load_may_run), or (refused) any, eager
        self._dynamic_refused = refused
        self._load_graph = graph  # the load's session runs with ORT's graph on
        # reopen(graph, dims): a session with the graph on or off (and those free dims fixed, where given); None
        # where the graph is off (see the module docstring)
        self._reopen = reopen
        self._eager: Any = None
        self._per_shapes: dict[tuple[Any, ...], ShapeSession] = {}
        self._load_entry = ShapeSession(session, {}, None)
        self._known: set[tuple[Any, ...]] = set()  # shapes the load's session ran eagerly before its first capture
        # shapes told by ``expect_shapes(..., own_sessions=True)``: each runs on a session of its own, the first one
        # told on the load's, so no session ever switches shape (see the module docstring)
        self._own: set[tuple[Any, ...]] = set()
        self.footprint: int | None = None  # the device bytes the load's session took (set by ``load``), None: unread
        # by input shapes, the session that already ran them and the output shapes it gave: the load's session's
        # eager runs on zeros (``expect_shapes``), or a told shape's first run on its own session (``infer``: the
        # accuracy pass's or ``prepare``'s). ``prepare`` on that same session takes them instead of running it again
        # (3 arms × 3 batch sizes of ResNet-50: ~0.4 s of each compare load)
        self._ran_outputs: dict[tuple[Any, ...], tuple[Any, dict[str, tuple[int, ...]]]] = {}
        self._fixed_dims: dict[str, int] = {}
        self.stream = stream  # the timing loop times on this stream (ORT's user_compute_stream)
        self.inputs = inputs
        self.outputs = outputs
        self.graph_enabled = graph
        self.graph_refused = refused
        self.use_graph = graph
        self._graph_ids: dict[tuple[Any, ...], int] = self._load_entry.graph_ids
        self._shapes: dict[str, tuple[int, ...]] = {}  # every input's and output's shape, set by prepare
        self.settings = session_settings(session, graph, refused)

    @property
    def session(self) -> Any:
        return self._session

    @property
    def sessions_opened(self) -> int:
        """How many ORT sessions this runner holds now (the load's, one per other prepared shapes, the eager one)."""
        held = {id(s.session) for s in self._per_shapes.values()} | {id(self._dynamic)}
        return len(held) + (self._eager is not None)

    def runtime_graph(self, enabled: bool) -> dict[str, Any]:
        """Switch ORT's own graph for the coming launches; the launch record the timing loop keeps."""
        self.use_graph = bool(enabled) and self.graph_enabled
        record: dict[str, Any] = {"graph_by": "onnxruntime", "provider_options": self.settings["provider_options"]}
        record.update((k, self.settings[k]) for k in ("free_dimension_overrides", "cuda_graph_refused_dynamic",
                                                      "session_per_shape", "session_per_shape_refused")
                      if k in self.settings)
        if not enabled:
            return {"mode": "eager", **record}
        if self.graph_enabled:
            return {"mode": "cuda_graph", **record}
        return {"mode": "eager", **record, "capture_failed": self.graph_refused or "not enabled"}

    def runtime_report(self) -> dict[str, Any]:
        """The session's settings, for a bench result's ``config.runtime``."""
        return dict(self.settings)

    def profile_options(self) -> dict[str, str]:
        """The provider options a separate profiling session takes so that it runs this session's kernels:
        the ones trtprof chooses, as ORT reports them for this session (no graph, no stream)."""
        reported = self.settings["provider_options"]
        return {k: str(reported[k]) for k in (*CUDA_OPTIONS, LAYOUT_OPTION) if k in reported}

    def profile_dims(self, input_shapes: Mapping[str, tuple[int, ...]]) -> dict[str, int]:
        """The named dynamic dims the timed session fixes at these shapes (where ORT refused the load's graph:
        ``_fix_dims``), so that a profiling session runs the graph that is timed, shape arithmetic folded;
        {} where the load's session is the timed one, or the dims cannot be fixed."""
        if self._reopen is None or self._dynamic_refused is None:
            return {}
        return free_dims(self.inputs, input_shapes)[0]

    def _run_options(self, key: tuple[Any, ...] | None) -> Any:
        ort = import_ort()
        options = ort.RunOptions()
        options.add_run_config_entry(NO_SYNC, "1")
        if self.graph_enabled:
            graph_id = -1
            if key is not None and self.use_graph:
                # one graph per set of bound buffers and shapes: a replay writes to the addresses it captured
                graph_id = self._graph_ids.setdefault(key, len(self._graph_ids) + 1)  # ids from 1 (ORT: not 0)
            options.add_run_config_entry(GRAPH_ID, str(graph_id))
        return options

    def _load_may_run(self, key: tuple[Any, ...]) -> bool:
        """The load's session (graph on) may run these shapes: it captured nothing yet, or ran them before."""
        return not self._load_entry.graph_ids or key in self._known

    def _shape_session(self, input_shapes: Mapping[str, tuple[int, ...]]) -> "ShapeSession":
        """The session that runs these shapes, opened on first use (see the module docstring): with the
        load's graph accepted, the load's session where ``_load_may_run``, else a session of the same options;
        with it refused, one with the named dims fixed (``_fix_dims``)."""
        key = shapes_key(input_shapes)
        if key not in self._per_shapes:
            if self._dynamic_refused is not None:
                entry = self._fix_dims(input_shapes)
            elif self._load_may_run(key):
                entry = self._load_entry
            else:
                assert self._reopen is not None
                entry = ShapeSession(self._reopen(True, None), {}, None, {"session_per_shape": True})
            self._per_shapes[key] = entry
        return self._per_shapes[key]

    def expect_shapes(self, shapes: "Iterable[Mapping[str, tuple[int, ...]]]", own_sessions: bool = False) -> None:
        """The shapes the coming launches will use (compare's workers, before priming). ``own_sessions``: each
        shape runs on a session of its own, opened now (the first shape told keeps the load's session), and
        nothing runs; told again, nothing more. Otherwise the load's session runs once eagerly at each before
        its first capture, so that it captures and replays at all of them (see the module docstring). After a
        capture, or with the graph off or refused, nothing to do."""
        if self._reopen is None or self._dynamic_refused is not None or self._load_entry.graph_ids:
            return
        shapes = list(shapes)
        keys = list(dict.fromkeys(shapes_key(each) for each in shapes))
        if own_sessions and len(keys) > 1:
            if set(keys) <= self._own:  # told before (life 0: the accuracy pass, then priming)
                return
            why_not = room_for_sessions(self.footprint, len(keys) - 1)
            if why_not is None:
                self._own.update(keys)
                self._per_shapes[keys[0]] = self._load_entry
                for key in keys[1:]:
                    self._per_shapes[key] = ShapeSession(self._reopen(True, None), {}, None, {"session_per_shape": True})
                return
            self._load_entry.notes["session_per_shape_refused"] = why_not  # in the result's settings: run ahead instead
        for each in shapes:
            key = shapes_key(each)
            if key not in self._known:
                self._ran_outputs[key] = (self._dynamic, output_shapes(self.infer(self._zeros(each))))

    def _zeros(self, input_shapes: Mapping[str, tuple[int, ...]]) -> dict[str, "np.ndarray"]:
        """Zero inputs at these shapes (the eager runs of ``prepare`` and ``expect_shapes``)."""
        import numpy as np

        return {s.name: np.zeros(input_shapes[s.name], dtype=np.dtype(s.dtype)) for s in self.inputs}

    def _fix_dims(self, input_shapes: Mapping[str, tuple[int, ...]]) -> "ShapeSession":
        """Where the load's graph was refused: the session for these shapes with the named dynamic dims fixed
        (graph on), or the load's session with the reason it stays eager (see the module docstring)."""
        assert self._reopen is not None and self._dynamic_refused is not None
        dims, why_not = free_dims(self.inputs, input_shapes)
        if not dims:
            return ShapeSession(self._dynamic, {}, f"{self._dynamic_refused}; dims not fixed: {why_not}")
        try:
            session = self._reopen(True, dims)
        except BadModel as err:
            cause = graph_refusal(err.__cause__ or err)
            if cause is None:
                raise
            text = ", ".join(f"{k}={v}" for k, v in dims.items())
            return ShapeSession(self._dynamic, {}, f"{self._dynamic_refused}; with the dims fixed ({text}) still: {cause}")
        return ShapeSession(session, dims, None, {"free_dimension_overrides": dict(dims),
                                                  "cuda_graph_refused_dynamic": self._dynamic_refused})

    def prepare(self, input_shapes: Mapping[str, tuple[int, ...]]) -> dict[str, tuple[int, ...]]:
        """Output shapes for these input shapes, from one eager run on zeros, on the session that runs them
        (``_shape_session``), which the coming launches use; where that session ran these shapes already (the
        load's session's zeros in ``expect_shapes``, a told shape's first run on its own), that run's shapes."""
        if self._reopen is not None:
            entry = self._shape_session(input_shapes)
            refused = entry.refused
            self._session, self._fixed_dims, self._graph_ids = entry.session, entry.fixed, entry.graph_ids
            self.graph_enabled = self.use_graph = refused is None
            self.graph_refused = refused
            self.settings = {**session_settings(entry.session, refused is None, refused), **entry.notes}
        ran = self._ran_outputs.get(shapes_key(input_shapes))
        if ran is not None and ran[0] is self._session:  # this session ran these shapes already
            outputs = dict(ran[1])
        else:
            outputs = output_shapes(self.infer(self._zeros(input_shapes)))
        self._shapes = {**{k: tuple(v) for k, v in input_shapes.items()}, **outputs}
        return outputs

    def _binding(self, buffers: Mapping[str, int], shapes: Mapping[str, tuple[int, ...]]) -> Any:
        import numpy as np

        binding = self._session.io_binding()
        for spec in self.inputs:
            binding.bind_input(spec.name, "cuda", 0, np.dtype(spec.dtype), list(shapes[spec.name]), buffers[spec.name])
        for spec in self.outputs:
            binding.bind_output(spec.name, "cuda", 0, np.dtype(spec.dtype), list(shapes[spec.name]),
                                buffers[spec.name])
        return binding

    @contextmanager
    def bind(self, buffers: Mapping[str, int], stream: int,
             shapes: Mapping[str, tuple[int, ...]] | None = None) -> Iterator[Any]:
        """The launch of one inference on ``stream`` reading and writing ``buffers``. On the runner's own
        stream the launch is ORT's run alone; on another stream the two streams wait on each other
        around it (events), so ``stream``'s events still bracket ORT's work."""
        from ..system import cuda

        shapes = dict(shapes or self._shapes)
        binding = self._binding(buffers, shapes)
        key = (tuple(sorted(buffers.items())), tuple(sorted(shapes.items())))
        options = self._run_options(key)
        run = self._session.run_with_iobinding
        if int(stream) == self.stream.handle:
            yield lambda: run(binding, options)
            return
        rt, ok = cuda.runtime(), cuda.ok
        with cuda.Event(timing=False) as before, cuda.Event(timing=False) as after:
            def launch() -> None:
                ok(rt.cudaEventRecord(before.raw, stream), "cudaEventRecord")
                ok(rt.cudaStreamWaitEvent(self.stream.raw, before.raw, 0), "cudaStreamWaitEvent")
                run(binding, options)
                ok(rt.cudaEventRecord(after.raw, self.stream.raw), "cudaEventRecord")
                ok(rt.cudaStreamWaitEvent(stream, after.raw, 0), "cudaStreamWaitEvent")

            yield launch

    def enqueue(self, buffers: Mapping[str, int], stream: int) -> None:
        with self.bind(buffers, stream) as launch:
            launch()

    def infer(self, feeds: Mapping[str, "np.ndarray"]) -> dict[str, "np.ndarray"]:
        """Host in, host out (the accuracy path): ORT copies, runs without a graph, synchronises. On the session
        prepared for these shapes; at others, on the load's session where it may run them (``_load_may_run``,
        which this run then extends before a capture), else on the graph-less session (opened once, given back
        by ``trim``)."""
        names = [o.name for o in self.outputs]
        options = import_ort().RunOptions()
        key = shapes_key({k: v.shape for k, v in feeds.items()})
        entry = self._per_shapes.get(key)
        if entry is not None:
            session = entry.session
        elif self._reopen is not None and self._dynamic_refused is None and not self._load_may_run(key):
            if self._eager is None:
                self._eager = self._reopen(False, None)
            session = self._eager
        else:
            session = self._dynamic
        if session is self._dynamic and self._load_graph and not self._load_entry.graph_ids:
            self._known.add(key)
        if session is not self._eager and (session is not self._dynamic or self._load_graph):
            options.add_run_config_entry(GRAPH_ID, "-1")  # a session with the graph on: no graph in this run
        values = session.run(names, dict(feeds), options)
        result = dict(zip(names, values))
        if entry is not None and key in self._own:
            self._ran_outputs.setdefault(key, (session, output_shapes(result)))
        return result

    def trim(self) -> None:
        """Give back the graph-less session ``infer`` opened for unprepared shapes (its arena with it)."""
        self._eager = None

    def close(self) -> None:
        self._session = self._dynamic = self._eager = self._load_entry.session = None
        self._per_shapes, self._ran_outputs = {}, {}
        if self.stream is not None:
            self.stream.close()
            self.stream = None


def graph_refusal(err: BaseException) -> str | None:
    """ORT's reason when a session cannot use a CUDA graph (None for any other failure)."""
    text = str(err)
    if GRAPH_REFUSED in text or "cuda graph" in text.lower():
        return ort_cause(text)
    return None


class OnnxRuntimeCudaBackend(OnnxRuntimeBackend):
    """ONNX Runtime on its CUDA execution provider (onnxruntime-gpu), timed with CUDA events."""

    name = "onnxruntime-cuda"
    device: DeviceKind = "cuda"
    provider = CUDA_EP
    capabilities = Capabilities(
        device="cuda", batch_independent=True, layer_profiler="ort-session", timeline="ort-session",
        session_warnings=True, graph_capture="runner", layout_option=LAYOUT_OPTION, ort_contrib_ops=True, extra=EXTRA,
        lone_loads=True)

    def available(self) -> Availability:
        return cuda_availability()

    def check_precision(self, precision: Precision) -> None:
        if precision is Precision.FP8:
            raise UnsupportedPrecision("fp8 is not available on onnxruntime-cuda (no FP8 kernels in ORT's CUDA EP); "
                                       "use --backend tensorrt or tensorrt-rtx (compute capability 8.9+)")
        if precision is Precision.BF16:
            raise UnsupportedPrecision("bf16 is not available on onnxruntime-cuda: ORT's CUDA EP has no BF16 Conv "
                                       "and few BF16 kernels; use --backend torch")
        if precision is Precision.INT8:
            raise UnsupportedPrecision("int8 is not available on onnxruntime-cuda: ORT's CUDA EP has no integer "
                                       "Conv/MatMul kernels for QDQ models (they run FP32 between casts); use "
                                       "--backend tensorrt")

    def load(self, artifact: Path, record: "EngineRecord", *, threads: int | None = None,  # type: ignore[override]
             log_warnings: bool = False, graph: bool = True,
             cuda_options: Mapping[str, str] | None = None) -> OnnxRuntimeCudaRunner:
        """A runner on a stream of its own; ORT's CUDA graph on unless ``graph`` is False or ORT refuses it
        (the refusal is kept as the reason). The engine's ``prefer_nhwc`` build option (``--what-if nhwc``)
        overrides ``CUDA_OPTIONS``' layout; ``cuda_options`` override both. ``threads`` is refused: its
        capabilities do not say ``host_threads`` (bench refuses ``--threads`` before this)."""
        from ..system import cuda

        if threads is not None:
            raise BackendUnavailable("--threads applies to host runtimes; onnxruntime-cuda runs on the GPU")
        av = cuda_availability()
        if not av.ok:
            raise BackendUnavailable(f"backend {self.name!r} cannot run here: {av.reason}")
        severity = ORT_WARNING if log_warnings else 4
        stream = cuda.Stream()
        layout = record.spec.option(LAYOUT_OPTION)
        options = {**CUDA_OPTIONS, **({LAYOUT_OPTION: str(layout)} if layout is not None else {}),
                   **(cuda_options or {}), "user_compute_stream": str(stream.handle)}
        precision = record.spec.precision

        def session(with_graph: bool, dims: Mapping[str, int] | None = None) -> Any:
            settings = SessionSettings(log_severity=severity, configure=fix_dims(dims))
            return ort_session(Path(artifact), precision, path=Path(artifact), settings=settings, device="cuda",
                               cuda_options={**options, "enable_cuda_graph": "1" if with_graph else "0"})

        refused = None
        before = free_device_bytes()
        try:
            try:
                timed = session(graph)
            except BadModel as err:
                refused = graph_refusal(err.__cause__ or err) if graph else None
                if refused is None:
                    raise
                timed = session(False)
        except BaseException:
            stream.close()
            raise
        after = free_device_bytes()
        readahead.start()  # the provider has loaded cuDNN: its engine libraries read in the background (host I/O)
        footprint = before - after if before is not None and after is not None and before > after else None
        runner = OnnxRuntimeCudaRunner(timed, stream, record, graph=graph and refused is None, refused=refused,
                                       reopen=session if graph else None)
        runner.footprint = footprint
        return runner
