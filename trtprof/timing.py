"""THE timing loop. Backends never time themselves.

Two clocks, one contract. Host runners ("cpu") are timed with ``perf_counter_ns`` around each call;
device runners ("cuda") are timed with CUDA events on the profiler's stream (``time_device``). Both
warm up (by count and/or by time), then run until the iteration count AND the minimum duration are
both met (trtexec / MLPerf LoadGen: a fast model gets more samples, a slow one at least the count),
and return raw per-iteration samples per stage, in milliseconds.
"""
from __future__ import annotations

import time
from dataclasses import asdict, dataclass, field
from typing import Any, Callable

import numpy as np

from .errors import BadInput

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

    @property
    def latency_ms(self) -> np.ndarray:
        return self.stages["latency_ms"]

    @property
    def n(self) -> int:
        return int(self.latency_ms.size)


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


def time_host(
    fn: Callable[[], Any],
    config: TimingConfig,
) -> Samples:
    """Time a synchronous host call: one ``perf_counter_ns`` pair per iteration, nothing else inside.

    The sample buffer is preallocated and grown geometrically so the loop does no allocation per
    iteration beyond what ``fn`` does.
    """
    warm_runs, warm_s = warm_up(fn, config)
    buf = np.empty(max(config.iterations, 16), dtype=np.int64)
    clock = time.perf_counter_ns
    seconds = config.duration_s
    done = 0
    first = clock()
    while _keep_going(done, first, config.iterations, seconds):
        t0 = clock()
        fn()
        t1 = clock()
        if done == buf.size:
            buf = np.concatenate([buf, np.empty_like(buf)])
        buf[done] = t1 - t0
        done += 1
    span_s = (clock() - first) / 1e9
    latency = buf[:done].astype(np.float64) / 1e6
    return Samples(stages={"latency_ms": latency}, span_s=span_s, warmup_done=warm_runs, warmup_s=warm_s)
