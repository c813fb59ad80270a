"""The concurrency sweep: every precision × batch size × concurrency, in interleaved rounds.

Each *point* (one engine at one batch size and concurrency) gets one window per round through
``trtprof.serving.driver``. Rounds interleave the precisions (A B, B A, …) at every point, back to back,
so that drift hits all of them alike and round ``r`` of two precisions forms a pair: the SLO verdict
(``trtprof.stats.slo``) takes its CI from those pairs with ``trtprof.stats.speedup``, as ``compare`` does.

A point's throughput is the median over its rounds of each window's rate (``trtprof.stats.throughput``'s
rule: a stalled window is one of several); its latency distribution pools every request of every
round. Memory is read while the point's sessions are open (torch: allocator peak; TensorRT: one
context per stream; ONNX Runtime: RSS growth with its N sessions); energy adds up the windows.
"""
from __future__ import annotations

from contextlib import ExitStack, nullcontext
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Sequence

import numpy as np

from .. import backends
from ..model.inputs import FeedSettings
from ..system import energy, memory, nvml, preflight
from ..system.noise import cpu_state
from ..system.validity import FP32_BEHIND_CASTS, Facts, HeavyCensus, Validity, assess
from .driver import ServingConfig, Window, Workers, cpu_sessions, gpu_sessions, run_window
from ..stats.latency import LatencyStats
from ..util.labels import variant_label

METHOD = "median over rounds of requests completed in the window / window wall time (closed loop, N in flight)"


@dataclass
class Point:
    arm: str  # the precision label (fp32, fp16, fp32#2 for an A/A arm)
    precision: str
    backend: str
    model: str
    batch_size: int
    concurrency: int
    windows: list[Window] = field(default_factory=list)
    sessions: dict[str, Any] = field(default_factory=dict)
    memory: dict[str, Any] = field(default_factory=dict)
    artifact_bytes: int | None = None
    failed: str | None = None  # "did not fit: …" when the point ran out of memory (not measured again)
    watched: dict[str, Any] | None = None  # the GPU watch over its windows (nvml.watch_gpu), None on a CPU

    @property
    def latency(self) -> LatencyStats:
        pooled = np.concatenate([w.latencies_ms for w in self.windows]) if self.windows else np.empty(0)
        return LatencyStats.from_samples(pooled if pooled.size else [float("nan")])

    @property
    def round_samples_per_s(self) -> list[float]:
        return [w.requests_per_s * self.batch_size for w in self.windows]

    @property
    def requests_per_s(self) -> float:
        return float(np.median([w.requests_per_s for w in self.windows])) if self.windows else float("nan")

    @property
    def samples_per_s(self) -> float:
        return self.requests_per_s * self.batch_size

    @property
    def energy(self) -> dict[str, Any]:
        return energy.combine([w.energy for w in self.windows])

    def to_json(self) -> dict[str, Any]:
        lat = self.latency
        return {
            "arm": self.arm, "precision": self.precision, "backend": self.backend, "model": self.model,
            "batch_size": self.batch_size, "concurrency": self.concurrency,
            "requests_per_s": self.requests_per_s, "samples_per_s": self.samples_per_s, "throughput_method": METHOD,
            "latency_ms": lat.to_json(),
            "rounds": [{"requests": w.requests, "wall_s": w.wall_s, "requests_per_s": w.requests_per_s,
                        "samples_per_s": w.requests_per_s * self.batch_size, "per_worker": w.per_worker,
                        "stretched": w.stretched, "started_unix": w.started_unix, "ended_unix": w.ended_unix,
                        "p50_ms": float(np.median(w.latencies_ms)) if w.requests else None,
                        "p99_ms": float(np.percentile(w.latencies_ms, 99)) if w.requests else None,
                        "energy": w.energy} for w in self.windows],
            "sessions": self.sessions, "memory": self.memory, "artifact_bytes": self.artifact_bytes,
            "energy": self.energy, "failed": self.failed,
        }


@dataclass
class ServingSweep:
    config: ServingConfig
    points: list[Point]
    arms: list[str]  # the first is the baseline of the SLO verdict
    slo: dict[str, Any] | None = None
    validity: Any = None  # system.validity.Validity of the whole sweep (serving_validity)

    def fits(self) -> dict[str, dict[str, Any]]:
        """Per arm: the largest batch size measured without running out of memory, and what did not fit."""
        out = {}
        for arm in self.arms:
            mine = [p for p in self.points if p.arm == arm]
            out[arm] = {"largest_batch_measured": max((p.batch_size for p in mine if p.windows), default=None),
                        "did_not_fit": [{"batch_size": p.batch_size, "concurrency": p.concurrency, "reason": p.failed}
                                        for p in mine if p.failed]}
        return out

    def to_json(self) -> dict[str, Any]:
        return {**({"validity": self.validity.to_json()} if self.validity is not None else {}),
                "settings": self.config.to_json(), "arms": self.arms, "points": [p.to_json() for p in self.points],
                "fits": self.fits(), "slo": self.slo}


@dataclass(frozen=True)
class SweepSlots:
    """What every window of one sweep reuses: the long-lived worker threads, the GPU streams (one per worker
    slot, ``gpu_sessions`` says why; None on a CPU) and how to load an engine again with N host threads
    (CPU backends whose capabilities say ``host_threads``: one session per thread budget)."""

    workers: Workers | None = None
    streams: Sequence[Any] | None = None
    load: Callable[[Any, int], Any] | None = None


def measure_point(record: Any, runner: Any, level: int, feeds: Mapping[str, np.ndarray], batch_size: int,
                  config: ServingConfig, slots: SweepSlots = SweepSlots()
                  ) -> tuple[Window, dict[str, Any], dict[str, Any]]:
    """One window of ``level`` requests in flight on ``slots.workers`` (the sweep's long-lived threads);
    returns (window, sessions info, memory)."""
    load, workers, streams = slots.load, slots.workers, slots.streams
    rss0 = memory.rss_bytes()
    memory.reset_peak(runner)
    if runner.device == "cpu":
        loader = None
        if load is not None and backends.capabilities(record.backend).host_threads:
            def loader(threads: int) -> Any:
                return load(record, threads)
        sessions_cm = cpu_sessions(runner, level, feeds, load=loader, threads=config.threads)
        meter = None
    else:
        from ..system import cuda

        sessions_cm = gpu_sessions(runner, level, feeds, copies=config.copies, streams=streams)
        meter = energy.EnergyMeter(pci_bus_id=cuda.pci_bus_id(cuda.current_device()))
    try:
        with sessions_cm as (sessions, info):
            rss1 = memory.rss_bytes()
            with watch(runner) as during:  # the GPU sampled through the window (system.validity)
                window = run_window(sessions, config, meter=meter, batch_size=batch_size, workers=workers)
            info = {**info, "gpu_watch": dict(during)} if during else info
            used = memory.inference_memory(runner, rss_before_load=rss0, rss_after_load=rss1, rss_before_run=rss1,
                                           rss_after_run=memory.rss_bytes())
    finally:
        if meter is not None:
            meter.close()
    if meter is None:
        window.energy = energy.not_available(energy.CPU_REASON)
    return window, info, used


def watch(runner: Any) -> Any:
    """``nvml.watch_gpu`` on the GPU the runner uses; an empty summary on a CPU."""
    if runner.device == "cpu":
        return nullcontext({})
    from ..system import cuda

    return nvml.watch_gpu(pci_bus_id=cuda.pci_bus_id(cuda.current_device()))


def serving_validity(sweep: "ServingSweep", arms: Mapping[str, Any], cpu: Mapping[str, Any] | None,
                     host_timed: bool) -> Validity:
    """The sweep's stamp: its rounds against what an interval needs, the GPU watch over every window,
    the host before the sweep (host-timed), and an "fp16" arm that ran FP32 behind casts."""
    gpu = None
    for p in sweep.points:
        gpu = nvml.merge_watches(gpu, p.watched)
    casts = tuple(n for n, rec in arms.items() if str(rec.precision) == "fp16"
                  and rec.backend_metadata.get("effective_precision") == FP32_BEHIND_CASTS)
    heavy = [HeavyCensus.of(n, str(rec.precision), str(rec.backend_metadata.get("effective_precision", rec.precision)),
                            rec.backend_metadata.get("node_precision"), rec.backend_metadata.get("kept_fp32"))
             for n, rec in arms.items()]
    return assess(Facts(rounds=sweep.config.rounds, gpu=gpu, cpu=cpu, host_timed=host_timed, casts=casts,
                        heavy_fp32=tuple(h for h in heavy if h is not None)))


def did_not_fit(err: BaseException, runner: Any) -> str:
    """The reason a point ran out of memory; the runner's cached blocks are given back (torch) so the
    next point starts from what is really in use."""
    trim = getattr(runner, "trim", None)
    if trim is not None:
        trim()
    first = (str(err).strip().splitlines() or [""])[0][:200]
    return f"did not fit: {type(err).__name__}" + (f": {first}" if first else "")


def _load_arms(arms: Mapping[str, Any], autotune: bool, pool: Workers, keep: ExitStack,
               runners: dict[str, Any]) -> list[Any]:
    """Load every arm into ``runners`` (closed by the caller); the GPU streams for the sweep's worker slots
    (kept open by ``keep``) once a runner is on a GPU, else []."""
    from ..backends.base import set_autotune
    from ..measure.bench import load_runner

    streams: list[Any] = []
    for name in arms:
        runners[name] = load_runner(arms[name])
        set_autotune(runners[name], autotune)
        if runners[name].device != "cpu" and not streams:
            from ..system import cuda

            streams = [keep.enter_context(cuda.Stream()) for _ in range(len(pool))]
    return streams


def _measure_into(point: Point, record: Any, runner: Any, feeds: Mapping[str, np.ndarray], config: ServingConfig,
                  slots: SweepSlots) -> bool:
    """One more window for ``point``; False when it ran out of memory (``point.failed`` then says so)."""
    try:
        window, info, used = measure_point(record, runner, point.concurrency, feeds, point.batch_size, config, slots)
    except Exception as err:  # noqa: BLE001 - only running out of memory is an answer here
        if not preflight.is_out_of_memory(err):
            raise
        point.failed = did_not_fit(err, runner)
        return False
    point.windows.append(window)
    point.watched = nvml.merge_watches(point.watched, info.pop("gpu_watch", None))
    point.sessions, point.memory = info, used
    return True


def _new_point(record: Any, name: str, batch: int, level: int) -> Point:
    return Point(arm=name, precision=record.precision, backend=record.backend, model=record.model, batch_size=batch,
                 concurrency=level, artifact_bytes=memory.artifact_bytes(record.artifact_path))


def _finished(config: ServingConfig, arms: Mapping[str, Any], points: Mapping[Any, Point], host_before: Any,
              host_timed: bool) -> ServingSweep:
    """The sweep's result: its points in arm, batch, concurrency order, its stamp and the SLO view."""
    names = list(arms)
    ordered = sorted(points.values(), key=lambda p: (names.index(p.arm), p.batch_size, p.concurrency))
    result = ServingSweep(config=config, points=ordered, arms=names)
    result.validity = serving_validity(result, arms, host_before, host_timed)
    if config.slo_ms is not None:
        from ..stats.slo import at_target

        result.slo = (at_target(ordered, names, config.slo_ms) if config.margin is None
                      else at_target(ordered, names, config.slo_ms, margin=config.margin))
    return result


@dataclass(frozen=True)
class SweepHooks:
    """The caller's side of ``sweep_records`` (each optional): ``on_point(point, round)`` hears every point
    measured; ``stop()`` true before a point ends the sweep there, keeping what was measured."""

    on_point: Callable[[Point, int], None] | None = None
    stop: Callable[[], bool] | None = None


def sweep_records(arms: Mapping[str, Any], batch_sizes: Sequence[int], config: ServingConfig, *,
                  feed: FeedSettings = FeedSettings(), autotune: bool = True, hooks: SweepHooks = SweepHooks(),
                  workers: Workers | None = None) -> ServingSweep:
    """Every arm (label → engine record; the first is the baseline) × batch size × concurrency, in
    ``config.rounds`` interleaved rounds; with ``config.slo_ms`` also the throughput at that p99. The inputs:
    ``feed``'s seeded random ones at its shapes (its ``data``, the user's ``--inputs``, is not used here).

    Every window runs on the same long-lived threads (``workers``, or the sweep's own), so that
    per-thread state such as PyTorch's cuDNN plan cache is built once, not in every window
    (``trtprof.serving.driver``'s docstring). ``stop()`` true before a point ends the sweep there, keeping
    what was measured (a benchmark's time bound)."""
    from ..measure.bench import load_runner
    from ..model.inputs import DEFAULT_INT_RANGE, make_inputs, resolve_shapes

    shapes, seed, int_range = feed.shapes, feed.seed, feed.int_range
    on_point, stop = hooks.on_point, hooks.stop

    names = list(arms)
    host_before = cpu_state()  # the load average before the sweep, not one it raised
    runners: dict[str, Any] = {}
    points: dict[tuple[str, int, int], Point] = {}
    pool = workers if workers is not None else Workers(max(int(n) for n in config.concurrency))
    own = pool if workers is None else None  # the sweep's own: closed here
    keep = ExitStack()  # the GPU streams, one per worker slot, for every window (gpu_sessions says why)
    try:
        streams = _load_arms(arms, autotune, pool, keep, runners)
        host_timed = any(r.device == "cpu" for r in runners.values())
        slots = SweepSlots(workers=pool, streams=streams or None,
                           load=lambda record, k: load_runner(record, threads=k))
        first, record0 = runners[names[0]], arms[names[0]]
        overrides = {**record0.spec.shape_overrides(), **(shapes or {})}
        feeds = {b: make_inputs(first.inputs, resolve_shapes(first.inputs, b, overrides, model_path=record0.model_path),
                                seed=seed, int_range=int_range or DEFAULT_INT_RANGE) for b in batch_sizes}
        for r in range(config.rounds):
            order = names if r % 2 == 0 else names[::-1]
            for level in config.concurrency:
                for batch in batch_sizes:
                    for name in order:
                        if stop is not None and stop():
                            break
                        point = points.setdefault((name, batch, int(level)),
                                                  _new_point(arms[name], name, batch, int(level)))
                        if not point.failed and _measure_into(point, arms[name], runners[name], feeds[batch],
                                                              config, slots) and on_point is not None:
                            on_point(point, r)
    finally:
        if own is not None:
            own.close()
        keep.close()
        for runner in runners.values():
            runner.close()
    return _finished(config, arms, points, host_before, host_timed)


PRECISION_ORDER = ("fp32", "tf32", "fp16", "bf16", "int8")  # baseline first


def group_arms(records: Sequence[Any]) -> list[dict[str, Any]]:
    """``bench``'s engines → one arm mapping per (model, backend), FP32 first (the baseline), an
    engine of a precision already present labelled by what differs (``int8 (calib 3f2a…)``)."""
    groups: dict[tuple[str, str], list[Any]] = {}
    for r in records:
        groups.setdefault((r.model, r.backend), []).append(r)
    out = []
    for group in groups.values():
        group.sort(key=lambda r: (PRECISION_ORDER.index(r.precision) if r.precision in PRECISION_ORDER
                                  else len(PRECISION_ORDER), r.created))
        arms: dict[str, Any] = {}
        for r in group:
            label = str(r.precision)
            if label in arms:  # a second engine of this precision: named by what differs (util.labels)
                label = variant_label(label, dict(r.spec.options), dict(arms[label].spec.options), r.key)
            if label in arms:  # the same options as another one: its cache key tells them apart
                label = variant_label(str(r.precision), {}, {}, r.key)
            k = 1
            while label in arms:  # the same key twice (one engine listed twice): numbered
                k += 1
                label = f"{r.precision} #{k}"
            arms[label] = r
        out.append(arms)
    return out
