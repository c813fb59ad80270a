"""Per-layer profiles of several engines (one per precision) at one batch size → a LayerTable.

The profiled run is separate from the latency run: each engine is loaded afresh, warmed up, and run
``iterations`` times under its backend's profiler. Inputs are the same seeded random tensors the
latency run uses, and the torch runner keeps its autotune setting, so the kernels are the same.
"""
from __future__ import annotations

import dataclasses
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Iterator, Mapping, Sequence

from .. import backends
from ..measure import bench  # bench.load_runner as a module attribute: tests replace it with a fake
from ..backends.base import set_autotune
from ..engines.cache import EngineRecord
from ..errors import BadInput, BackendUnavailable, TrtprofError
from ..model.inputs import DEFAULT_INT_RANGE, make_inputs, resolve_shapes
from ..model.onnx_model import OnnxModel
from ..system.preflight import check_integer_feeds
from .graph import node_facts
from .ort import TimedSession, profile_onnxruntime
from .table import LayerTable, PrecisionProfile
from .tensorrt import profile_tensorrt
from .torch_profile import profile_torch

DEFAULT_ITERATIONS = 20  # medians over 20 profiled iterations: a layer's time to a few %
DEFAULT_WARMUP = 5  # covers cuDNN autotuning (first call per shape) and lazy initialisation


def profiled_backends() -> list[str]:
    """The backends with a per-layer profiler here (their capabilities name one: ORT session profiling,
    torch.profiler/CUPTI, TensorRT's IProfiler)."""
    return [n for n in backends.names() if backends.capabilities(n).layer_profiler is not None]


@contextmanager
def loaded_engine(record: EngineRecord, what: str, autotune: bool | None = None) -> Iterator[Any]:
    """The engine's runner for a profiled run (autotune set as the timing ran it, unless None), closed
    after; a backend without a profiler here is refused before anything loads."""
    if backends.capabilities(record.backend).layer_profiler is None:
        raise BackendUnavailable(f"no {what} for the {record.backend} backend "
                                 f"({', '.join(profiled_backends())} have one)")
    runner = bench.load_runner(record)
    try:
        if autotune is not None:
            set_autotune(runner, autotune)
        yield runner
    finally:
        runner.close()


def engine_feeds(record: EngineRecord, runner: Any, batch_size: int, *,
                 shapes: Mapping[str, tuple[int, ...]] | None = None, seed: int = 0,
                 int_range: tuple[int, int] | None = None, data: Any = None) -> tuple[dict[str, tuple[int, ...]], Any]:
    """(input shapes, feeds) at ``batch_size``: the same seeded inputs, or the first batch of the user's
    (``data``), that the latency run measures, so that a profiled run runs the same kernels."""
    overrides = {**record.spec.shape_overrides(), **(shapes or {}), **(data.shape_overrides() if data else {})}
    input_shapes = resolve_shapes(runner.inputs, batch_size, overrides, model_path=record.model_path)
    feeds = make_inputs(runner.inputs, input_shapes, seed=seed, int_range=int_range or DEFAULT_INT_RANGE, data=data)
    return input_shapes, feeds


@dataclass(frozen=True)
class ProfileRun:
    """How every engine's profiled run goes, as one record (``trtprof profile`` fills it from its flags,
    ``compare --layers`` from its CompareOptions): ``iterations`` profiled after ``warmup``, on the inputs the
    latency run measures (``shapes`` overrides; seeded random inputs, ``seed`` and ``int_range``, or the
    first batch of the user's, ``data``), with ``autotune`` set as the timing ran it."""

    iterations: int = DEFAULT_ITERATIONS
    warmup: int = DEFAULT_WARMUP
    shapes: Mapping[str, tuple[int, ...]] | None = None
    seed: int = 0
    int_range: tuple[int, int] | None = None
    autotune: bool = True
    data: Any = None


def timed_session(runner: Any, input_shapes: Mapping[str, tuple[int, ...]]) -> "TimedSession":
    """What a separate profiling session copies from the runner's timed one so that it runs the same kernels
    (a GPU runner of ONNX Runtime says: its chosen provider options, the dims it fixes); none on others."""
    options, dims = getattr(runner, "profile_options", None), getattr(runner, "profile_dims", None)
    return TimedSession(cuda_options=options() if callable(options) else None,
                        free_dims=dims(input_shapes) if callable(dims) else {})


def profile_record(record: EngineRecord, batch_sizes: Sequence[int],
                   run: ProfileRun = ProfileRun()) -> dict[int, PrecisionProfile]:
    """One engine's per-layer profile at each batch size, with the profiler of the backend that
    built it (the engine is loaded once); on the first batch of the user's inputs (``run.data``) if given."""
    iterations, warmup, data = run.iterations, run.warmup, run.data
    if iterations < 1:
        raise BadInput(f"--iterations must be at least 1, got {iterations}")
    out: dict[int, PrecisionProfile] = {}
    with loaded_engine(record, "per-layer profiler", run.autotune) as runner:
        if data is not None:
            data.check(runner.inputs, model_path=record.model_path)
        check_integer_feeds(bench.onnx_of(record), runner.inputs, run.int_range or DEFAULT_INT_RANGE, data)
        onnx_model = None
        caps = backends.capabilities(record.backend)
        if caps.layer_profiler == "torch-profiler":
            from ..backends.torch import engine_onnx  # lazy: onnx takes ~0.3 s to import; only torch needs it

            onnx_model = engine_onnx(record.artifact_path)
        for batch_size in batch_sizes:
            input_shapes, feeds = engine_feeds(record, runner, batch_size, shapes=run.shapes, seed=run.seed,
                                               int_range=run.int_range, data=data)
            if caps.layer_profiler == "ort-session":
                out[batch_size] = profile_onnxruntime(record, feeds, iterations=iterations, warmup=warmup,
                                                      batch_size=batch_size, device=caps.device,
                                                      timed=timed_session(runner, input_shapes))
            elif caps.layer_profiler == "torch-profiler":
                out[batch_size] = profile_torch(runner, feeds, iterations=iterations, warmup=warmup,
                                                batch_size=batch_size, backend=record.backend, onnx_model=onnx_model)
            else:
                out[batch_size] = profile_tensorrt(runner, input_shapes, feeds, record.precision, iterations=iterations,
                                                  backend=record.backend)
            # labelled with the engine's backend (a plugin may use a profiler of the built-in backends)
            out[batch_size] = dataclasses.replace(out[batch_size], backend=record.backend)
    return out


def graph_facts(model: OnnxModel | None, record: EngineRecord, batch_size: int,
                shapes: Mapping[str, tuple[int, ...]] | None = None) -> dict[str, dict[str, Any]]:
    """Node facts (shapes, tensor-core eligibility) of the source ONNX ``model`` (read once by the caller)
    at this batch size; {} without a model and when it cannot be shape-inferred (the table then has no
    graph column, nothing is claimed)."""
    if model is None:
        return {}
    try:
        overrides = {**record.spec.shape_overrides(), **(shapes or {})}
        input_shapes = resolve_shapes(tuple(record.inputs), batch_size, overrides, model_path=record.model_path)
        return node_facts(model.proto, input_shapes)
    except (TrtprofError, ValueError, KeyError, OSError):
        return {}


def profile_records(records: Mapping[str, EngineRecord], batch_sizes: Sequence[int], run: ProfileRun = ProfileRun(),
                    *, model: OnnxModel | None = None,
                    graphs: Mapping[int, Mapping[str, Mapping[str, Any]]] | None = None) -> dict[int, LayerTable]:
    """Every precision of ``records`` (precision → record, baseline first), one engine after the
    other, at every batch size (each as ``run`` says): one LayerTable per batch size. ``graphs``:
    ``graph_facts`` of the baseline record already computed per batch size (those batch sizes are not
    computed again); ``model``: the source ONNX model, read once (onnx_model.OnnxModel; None: no graph column)."""
    per: dict[str, dict[int, PrecisionProfile]] = {name: profile_record(rec, batch_sizes, run)
                                                   for name, rec in records.items()}
    first = next(iter(records.values()))
    known = graphs or {}
    return {b: LayerTable(batch_size=b, precisions=tuple(records), profiles=one_clock({n: per[n][b] for n in records}),
                          graph=known[b] if b in known else graph_facts(model, first, b, run.shapes))
            for b in batch_sizes}


def one_clock(profiles: Mapping[str, PrecisionProfile]) -> dict[str, PrecisionProfile]:
    """The profiles of one table on one clock: where some have GPU kernel times (ONNX Runtime's CUDA EP with
    CUPTI) and others only host times (their GPU work could not be tied to nodes), every one that has its
    host-time twin (``host_fallback``) shows that, with a note; a table whose ratios divide a GPU time by a
    host time would name layers "slower" that are not."""
    gpu = [n for n, p in profiles.items() if p.kernel_times]
    host = [n for n, p in profiles.items() if not p.kernel_times]
    if not gpu or not host or any(profiles[n].host_fallback is None for n in gpu):
        return dict(profiles)
    why = (f"GPU kernel times of {', '.join(gpu)} set aside: {', '.join(host)} could not be tied to nodes on the GPU, "
           "and one table compares one clock: host launch times shown for every precision")
    return {n: dataclasses.replace(p.host_fallback, notes=p.host_fallback.notes + (why,), gpu_twin=p) if n in gpu and
            p.host_fallback is not None else p for n, p in profiles.items()}
