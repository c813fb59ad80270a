"""`trtprof bench` as a library call: every engine × batch size through the shared timing loop."""
from __future__ import annotations

import contextlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping, Sequence

from .. import backends
from ..system import energy, memory, preflight
from ..backends.base import set_autotune
from ..engines.cache import EngineRecord
from ..util.files import now_iso
from ..util.thirdparty import tally_json, third_party_warnings
from .interleave import measure_block
from ..system.environment import collect
from ..errors import BadInput
from ..model.inputs import FeedSettings, make_inputs, resolve_shapes
from ..system.noise import cpu_noise_warning, cpu_state
from .results import BenchResult, ResultSet, stamp_result
from .timing import TimingConfig


@dataclass(frozen=True)
class BenchPlan:
    record: EngineRecord
    batch_size: int


@dataclass(frozen=True)
class BenchHooks:
    """What ``bench_records`` tells its caller as it goes (each optional): the whole plan once every input
    was checked (``on_plan``), each engine × batch size as it starts (``on_start``) and as it ends
    (``on_result``, with its result)."""

    on_plan: Callable[[list[BenchPlan]], None] | None = None
    on_start: Callable[[BenchPlan], None] | None = None
    on_result: Callable[[BenchResult], None] | None = None


def plan(records: Iterable[EngineRecord], batch_sizes: Sequence[int] | None = None) -> list[BenchPlan]:
    """Every engine × batch size; without ``batch_sizes`` each engine's own built batch sizes."""
    items = []
    for record in records:
        for batch in batch_sizes or record.spec.batch_sizes:
            items.append(BenchPlan(record, int(batch)))
    return items


def load_runner(record: EngineRecord, threads: int | None = None, *, log_warnings: bool = False):
    """Verify the artifact against its metadata, then load it with the backend that built it.
    ``threads`` (ONNX Runtime only) sets intra-op threads and one inter-op thread.

    A backend that builds where it cannot run (TensorRT-RTX) first says, in one line, why this
    machine cannot run this engine (``check_runnable``: its GPU, or no GPU, and the engine's targets).

    What the library writes while loading (ONNX Runtime: unused initializers, shapes merged leniently,
    nodes it could not place; Python warnings) is kept on the runner as ``load_warnings`` (issue 34).
    ``log_warnings``: the caller captures what the runner writes while it runs too (the timed blocks:
    ``interleave.measure_block``, ``bench_one``), so ONNX Runtime keeps its session's warnings on
    (ORT's own default); without it its session logs none, and nothing reaches a terminal raw."""
    record.verify()
    backends.get(record.backend).check_runnable(record)
    backend = backends.resolve(record.backend)
    caps = backend.capabilities
    if threads is not None and not caps.host_threads:
        raise BadInput(f"--threads applies to host runtimes' engines ({', '.join(threads_backends())}); "
                       f"this one is {record.backend}", path=record.artifact_path)
    options: dict[str, Any] = {"log_warnings": True} if log_warnings and caps.session_warnings else {}
    if threads is not None:
        options["threads"] = threads
    with third_party_warnings() as caught:
        runner = backend.load(record.artifact_path, record, **options)
    if caught:
        # an optional attribute, not part of the Runner protocol (read with getattr by interleave.with_load_warnings
        # and bench_one); a runner with __slots__ keeps none
        with contextlib.suppress(AttributeError):
            setattr(runner, "load_warnings", tuple(caught))
    return runner


def onnx_of(record: EngineRecord) -> Path | None:
    """An ONNX file with the engine's graph, for checks that read the model (None if there is none)."""
    if record.artifact_path.suffix == ".onnx":
        return record.artifact_path
    model = Path(record.model_path) if record.model_path else None
    return model if model is not None and model.suffix == ".onnx" and model.is_file() else None


def pending_json(items: Sequence[BenchPlan]) -> list[dict]:
    """What an interrupted run did not measure, as recorded in its results file."""
    return [{"model": i.record.model, "precision": i.record.precision, "backend": i.record.backend,
             "batch_size": i.batch_size, "artifact": str(i.record.artifact_path)} for i in items]


def effective_precision(record: EngineRecord) -> str:
    return str(record.backend_metadata.get("effective_precision", record.precision))


def bench_one(
    record: EngineRecord,
    runner,
    batch_size: int,
    config: TimingConfig,
    *,
    feed: FeedSettings = FeedSettings(),
    threads: int | None = None,
    load_rss: tuple[int | None, int | None] = (None, None),
) -> BenchResult:
    """Time one engine at one batch size, on seeded random inputs or the first batch of the user's
    (``feed``: its ``data``, user_inputs.InputData). ``load_rss``: the process RSS before and after this
    engine was loaded (CPU runners report memory as RSS deltas, ``trtprof.system.memory``)."""
    shapes, seed, int_range, data = feed.shapes, feed.seed, feed.int_range, feed.data
    overrides = dict(record.spec.shape_overrides())
    overrides.update(shapes or {})
    overrides.update(data.shape_overrides() if data is not None else {})
    input_shapes = resolve_shapes(runner.inputs, batch_size, overrides, model_path=record.model_path)
    needed = preflight.input_bytes(runner.inputs, input_shapes)
    # ORT's RuntimeErrors, torch OutOfMemoryError, cudaErrorMemoryAllocation, cuDNN/cuBLAS ALLOC_FAILED, numpy
    # MemoryError or "array is too big": all become OutOfMemory naming the batch (preflight.is_out_of_memory).
    with preflight.allocation_guard(batch_size, needed):
        feeds = make_inputs(runner.inputs, input_shapes, seed=seed, int_range=int_range, data=data)
        rss_before_run = memory.settled_rss_bytes()
        memory.reset_peak(runner)
        samples = measure_block(runner, feeds, config)  # with the library's lines while it runs (issue 34)
        if runner.device == "cpu":
            applied = {**config.to_json(), "copies": None, "cuda_graph": False, "spin_wait": None,
                       "clock": "perf_counter_ns", "threads": threads}
        else:
            applied = {**config.to_json(), "clock": "cuda_events"}
    used = memory.inference_memory(runner, rss_before_load=load_rss[0], rss_after_load=load_rss[1],
                                   rss_before_run=rss_before_run, rss_after_run=memory.settled_rss_bytes())
    spent = energy.of_timed_loop(runner.device, samples.device, samples.span_s, samples.n * batch_size)
    applied["autotune"] = getattr(runner, "autotune", None)
    applied.update({"input_shapes": {k: list(v) for k, v in input_shapes.items()}, "seed": seed,
                    "int_range": list(int_range), "warmup_done": samples.warmup_done,
                    "inputs": data.describe() + ", first batch" if data is not None else "random inputs",
                    "warmup_s": round(samples.warmup_s, 4)})
    runtime_report = getattr(runner, "runtime_report", None)  # TensorRT-RTX: JIT and runtime cache
    if runtime_report is not None:
        applied["runtime"] = runtime_report()
    return BenchResult.from_samples(
        stages=samples.stages,
        span_s=samples.span_s,
        batch_size=batch_size,
        model=record.model,
        precision=record.precision,
        backend=record.backend,
        engine=engine_json(record),
        config=applied,
        warnings=result_warnings(record, runner, samples, threads, config),
        device=samples.device,
        memory=used,
        energy=spent,
        third_party_warnings=tally_json(getattr(runner, "load_warnings", None) or (), samples.run_warnings),
    )


def engine_json(record: EngineRecord) -> dict[str, Any]:
    """A result's ``engine``: what was measured, as the cache recorded it."""
    return {
        "key": record.key,
        "artifact": str(record.artifact_path),
        "artifact_bytes": memory.artifact_bytes(record.artifact_path),
        "spec": record.spec.to_json(),
        "effective_precision": effective_precision(record),
        "build_seconds": record.build_seconds,
        "backend_metadata": record.backend_metadata,
        "environment": record.environment,
    }


def result_warnings(record: EngineRecord, runner: Any, samples: Any, threads: int | None,
                    config: TimingConfig) -> list[str]:
    """The timing loop's notes, a noisy CPU's warning, and an engine that is not the precision it was asked for."""
    warnings = list(samples.notes)
    if runner.device == "cpu" and samples.n > 1:
        lat = samples.latency_ms
        cv = float(lat.std(ddof=1) / lat.mean()) if lat.mean() > 0 else 0.0
        note = cpu_noise_warning(cv, threads=threads, duration_s=config.duration_s)
        if note:
            warnings.append(note)
    if record.backend_metadata.get("effective_precision") not in (None, record.precision):
        warnings.append(
            f"requested {record.precision}, effective {record.backend_metadata['effective_precision']}: "
            "not a measurement of that precision (see the build notes / `trtprof inspect`)"
        )
    return warnings


def threads_backends() -> list[str]:
    """The backends that take ``--threads`` (their capabilities say ``host_threads``)."""
    return [n for n in backends.names() if backends.capabilities(n).host_threads]


def prime_runtimes(records: Sequence[EngineRecord], threads: int | None) -> dict[str, int | None]:
    """Each backend's start-up, before any engine is loaded (where its ``prime_runtime`` starts
    something): the resident memory it took, so that the first engine's load is its own memory only."""
    used: dict[str, int | None] = {}
    for name in dict.fromkeys(r.backend for r in records):
        before = memory.settled_rss_bytes()
        if backends.get(name).prime_runtime(threads):
            used[name] = memory.delta(memory.settled_rss_bytes(), before)
    return used


def _load_checked(records: Sequence[EngineRecord], threads: int | None, autotune: bool, int_range: tuple[int, int],
                  data: Any, runners: dict[str, Any], load_rss: dict[str, Any]) -> None:
    """Load every engine into ``runners`` (by key; ``load_rss``: the RSS before and after each load), then
    check the inputs against it: integer ranges within the model's embeddings, the user's arrays (``data``).
    Each runner goes in before its checks, so that the caller closes every one it loaded."""
    for record in records:
        before = memory.settled_rss_bytes()  # settled: the deltas do not depend on the load order
        runners[record.key] = load_runner(record, threads, log_warnings=True)
        load_rss[record.key] = (before, memory.settled_rss_bytes())
        set_autotune(runners[record.key], autotune)
        preflight.check_integer_feeds(onnx_of(record), runners[record.key].inputs, int_range, data)
        if data is not None:
            data.check(runners[record.key].inputs, model_path=record.model_path)


def _check_plan(items: Sequence[BenchPlan], runners: Mapping[str, Any],
                shapes: Mapping[str, tuple[int, ...]] | None, data: Any) -> None:
    """Every planned batch size's shapes resolve and its largest inputs fit in memory."""
    for item in items:
        runner = runners[item.record.key]
        overrides = {**item.record.spec.shape_overrides(), **(shapes or {}),
                     **(data.shape_overrides() if data is not None else {})}
        input_shapes = resolve_shapes(runner.inputs, item.batch_size, overrides, model_path=item.record.model_path)
        preflight.check_batch_memory(runner, item.batch_size, input_shapes)


def bench_records(
    records: Sequence[EngineRecord],
    config: TimingConfig,
    *,
    batch_sizes: Sequence[int] | None = None,
    feed: FeedSettings = FeedSettings(),
    hooks: BenchHooks = BenchHooks(),
    threads: int | None = None,
    autotune: bool = True,
) -> ResultSet:
    """Bench every engine × batch size on ``feed``'s inputs, telling ``hooks`` as it goes. All inputs are
    checked (engines load, shapes resolve, integer ranges fit the model's embeddings, the largest inputs
    fit in memory) before the first measurement, so a bad request fails in a second rather than after
    minutes of timing.

    Ctrl-C (KeyboardInterrupt) during the measurements keeps what finished: the returned set has
    ``interrupted`` True and ``pending`` lists what was still to run."""
    shapes, int_range, data = feed.shapes, feed.int_range, feed.data
    on_plan, on_start, on_result = hooks.on_plan, hooks.on_start, hooks.on_result
    items = plan(records, batch_sizes)
    runners: dict[str, Any] = {}
    load_rss: dict[str, tuple[int | None, int | None]] = {}
    results: list[BenchResult] = []
    interrupted, pending = False, []
    environment = collect()
    environment.setdefault("host", {})["cpu_state"] = cpu_state()
    environment["host"]["runtime_startup_bytes"] = prime_runtimes(records, threads)
    try:
        _load_checked(records, threads, autotune, int_range, data, runners, load_rss)
        _check_plan(items, runners, shapes, data)
        if on_plan is not None:
            on_plan(items)
        for index, item in enumerate(items):
            try:
                if on_start is not None:
                    on_start(item)
                result = bench_one(item.record, runners[item.record.key], item.batch_size, config,
                                   feed=feed, threads=threads, load_rss=load_rss.get(item.record.key, (None, None)))
            except KeyboardInterrupt:
                interrupted, pending = True, pending_json(items[index:])
                break
            stamp_result(result, environment["host"]["cpu_state"], runners[item.record.key].device == "cpu")
            results.append(result)
            try:
                if on_result is not None:
                    on_result(result)
            except KeyboardInterrupt:
                interrupted, pending = True, pending_json(items[index + 1:])
                break
    finally:
        for runner in runners.values():
            runner.close()
    return ResultSet(environment=environment, results=results, created=now_iso(), interrupted=interrupted,
                     pending=pending)


def bench_path(path: Path, config: TimingConfig, **kwargs) -> ResultSet:
    from ..engines.cache import list_engines

    return bench_records(list_engines(path), config, **kwargs)
