"""`trtprof bench` as a library call: every engine × batch size through the shared timing loop."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterable, Mapping, Sequence

from . import backends, timing
from .backends.base import set_autotune
from .cache import EngineRecord, now_iso
from .environment import collect
from .inputs import DEFAULT_INT_RANGE, make_inputs, resolve_shapes
from .results import BenchResult, ResultSet
from .timing import TimingConfig


@dataclass(frozen=True)
class BenchPlan:
    record: EngineRecord
    batch_size: int


def plan(records: Iterable[EngineRecord], batch_sizes: Sequence[int] | None = None) -> list[BenchPlan]:
    """Every engine × batch size; without ``batch_sizes`` each engine's own built batch sizes."""
    items = []
    for record in records:
        for batch in batch_sizes or record.spec.batch_sizes:
            items.append(BenchPlan(record, int(batch)))
    return items


def load_runner(record: EngineRecord):
    """Verify the artifact against its metadata, then load it with the backend that built it."""
    record.verify()
    backend = backends.resolve(record.backend)
    return backend.load(record.artifact_path, record)


def effective_precision(record: EngineRecord) -> str:
    return str(record.backend_metadata.get("effective_precision", record.precision))


def bench_one(
    record: EngineRecord,
    runner,
    batch_size: int,
    config: TimingConfig,
    *,
    shapes: Mapping[str, tuple[int, ...]] | None = None,
    seed: int = 0,
    int_range: tuple[int, int] = DEFAULT_INT_RANGE,
) -> BenchResult:
    overrides = dict(record.spec.shape_overrides())
    overrides.update(shapes or {})
    input_shapes = resolve_shapes(runner.inputs, batch_size, overrides, model_path=record.model_path)
    feeds = make_inputs(runner.inputs, input_shapes, seed=seed, int_range=int_range)
    if runner.device == "cpu":
        samples = timing.time_host(lambda: runner.infer(feeds), config)
        applied = {**config.to_json(), "copies": None, "cuda_graph": False, "spin_wait": None, "clock": "perf_counter_ns"}
    else:
        samples = timing.time_device(runner, feeds, config)
        applied = {**config.to_json(), "clock": "cuda_events"}
    applied["autotune"] = getattr(runner, "autotune", None)
    applied.update({"input_shapes": {k: list(v) for k, v in input_shapes.items()}, "seed": seed,
                    "int_range": list(int_range), "warmup_done": samples.warmup_done,
                    "warmup_s": round(samples.warmup_s, 4)})
    warnings = list(samples.notes)
    if record.backend_metadata.get("effective_precision") not in (None, record.precision):
        warnings.append(
            f"requested {record.precision}, effective {record.backend_metadata['effective_precision']}: "
            "not a measurement of that precision (see the build notes / `trtprof inspect`)"
        )
    return BenchResult.from_samples(
        stages=samples.stages,
        span_s=samples.span_s,
        batch_size=batch_size,
        model=record.model,
        precision=record.precision,
        backend=record.backend,
        engine={
            "key": record.key,
            "artifact": str(record.artifact_path),
            "effective_precision": effective_precision(record),
            "build_seconds": record.build_seconds,
            "backend_metadata": record.backend_metadata,
            "environment": record.environment,
        },
        config=applied,
        warnings=warnings,
        device=samples.device,
    )


def bench_records(
    records: Sequence[EngineRecord],
    config: TimingConfig,
    *,
    batch_sizes: Sequence[int] | None = None,
    shapes: Mapping[str, tuple[int, ...]] | None = None,
    seed: int = 0,
    int_range: tuple[int, int] = DEFAULT_INT_RANGE,
    on_result: Callable[[BenchResult], None] | None = None,
    on_start: Callable[[BenchPlan], None] | None = None,
    autotune: bool = True,
) -> ResultSet:
    """Bench every engine × batch size. All inputs are checked (engines load, shapes resolve) before
    the first measurement, so a bad request fails in a second rather than after minutes of timing."""
    items = plan(records, batch_sizes)
    runners = {}
    try:
        for record in records:
            runners[record.key] = load_runner(record)
            set_autotune(runners[record.key], autotune)
        for item in items:
            runner = runners[item.record.key]
            overrides = {**item.record.spec.shape_overrides(), **(shapes or {})}
            resolve_shapes(runner.inputs, item.batch_size, overrides, model_path=item.record.model_path)
        results = []
        for item in items:
            if on_start is not None:
                on_start(item)
            result = bench_one(item.record, runners[item.record.key], item.batch_size, config,
                               shapes=shapes, seed=seed, int_range=int_range)
            results.append(result)
            if on_result is not None:
                on_result(result)
    finally:
        for runner in runners.values():
            runner.close()
    return ResultSet(environment=collect(), results=results, created=now_iso())


def bench_path(path: Path, config: TimingConfig, **kwargs) -> ResultSet:
    from .cache import list_engines

    return bench_records(list_engines(path), config, **kwargs)
