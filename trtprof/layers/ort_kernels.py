"""GPU kernel times per ONNX Runtime node on the CUDA EP, from CUPTI's activity records (cupti-python).

ORT's session profiler times each node's compute function on the host. On the CUDA EP that function only
launches the node's kernels, and release builds of onnxruntime-gpu record no kernel (ORT#20398), so its
per-node times are launch times. CUPTI's activity API records, for the whole process, every kernel, copy
and memset the GPU ran (GPU start and end) and every runtime or driver API call that launched one (host
start), on one clock and tied by a correlation id. A launch belongs to the node whose host interval in
ORT's profile holds it: the node's kernels are launched inside its compute function.

ORT's profile and CUPTI count time on different clocks. Their offset is read at capture (CUPTI's
timestamp against Python's monotonic and real-time clocks, read back to back; ORT's profiling start is
on one of them: the real-time clock in onnxruntime 1.31) and then refined: the offset kept is the one,
within ``SEARCH_NS`` of a candidate, that keeps every kernel-launching API call inside a profiled run and puts the
most launches inside node intervals (``fit_offset``; ORT rounds its times to whole microseconds). The share of
the GPU's work so attributed, and the correction the search made to the read offset, are recorded with the
profile; under ``ATTRIBUTED_MIN`` no per-node kernel time is claimed. Measured on the H200 with the first
version of this module: benchmarks/results/ort_kernels-H200-2026-12-03/.
"""
from __future__ import annotations

import functools
import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator, Mapping, Sequence

import numpy as np

from ..errors import MissingDependency

EXTRA = "cupti"
SOURCE = "CUPTI kernel records attributed to onnxruntime's session-profile nodes (GPU time per node)"
# ORT's profile gives a node's start and duration in whole microseconds: a launch within this much of a
# node's interval belongs to it
TOLERANCE_NS = 1_000
# the offset search: this far either side of each clock candidate (on the H200 ORT's profiling start was
# read 4 µs to over 20 µs off its events' zero, varying by session), in COARSE_NS steps, then STEP_NS
SEARCH_NS = 2_000_000
COARSE_NS = 1_000
STEP_NS = 250
MAX_CALLS = 20_000
# the run windows' fit keeps the offsets holding all but this share of the launching API calls of the best: a
# stray call outside every run (another thread's) must not pull the fit; a shift by a run loses a whole run's
# calls. Only calls that launched kernels count (``attribute``): ORT makes other calls (device queries, its stream's
# synchronisation) just outside its model_run window, and on a small graph those outnumbered 1 % of the calls —
# the report net's fp32 on the H200 (2026-12-03): the fit moved 24.25 µs off the read offset to hold them and
# tied 91.9 % of the GPU's work; a profile of the same engine read at its offset tied 100 %
RUN_SLACK = 0.01
# a clock candidate none of whose offsets puts half the launching API calls inside the runs is the wrong clock (the
# other Python clock is years off): skipped
RUNS_MIN = 0.5
# under this share of the GPU time attributed to nodes, the per-node kernel times are not used
ATTRIBUTED_MIN = 0.95
BUFFER_BYTES = 8 * 1024 * 1024
COPY_PREFIX = "memcpy"
# CUPTI's CUpti_ActivityMemcpyKind values
COPY_KINDS = {1: "HtoD", 2: "DtoH", 3: "HtoA", 4: "AtoH", 5: "AtoA", 6: "AtoD", 7: "DtoA", 8: "DtoD", 9: "HtoH",
              10: "PtoP"}


@dataclass(frozen=True)
class GpuWork:
    """One kernel, copy or memset the GPU ran: its name, GPU start/end (CUPTI ns), and correlation id."""

    name: str
    start_ns: int
    end_ns: int
    correlation: int

    @property
    def duration_ns(self) -> int:
        return max(0, self.end_ns - self.start_ns)


@dataclass
class ActivityLog:
    """What one capture recorded: the GPU's work, the API calls (correlation id → host start, CUPTI ns), and
    the offset of CUPTI's clock from each Python clock (``clock name → cupti_ns - clock_ns``)."""

    work: list[GpuWork] = field(default_factory=list)
    launches: dict[int, int] = field(default_factory=dict)
    clock_offsets: dict[str, int] = field(default_factory=dict)
    clock_drift_ns: dict[str, int] = field(default_factory=dict)  # end-of-capture offset less the start's


@dataclass(frozen=True)
class NodeSpan:
    """One executed node of one run in ORT's profile: its key (event name, ts µs) and its host interval in
    ns on ORT's clock (profiling start + ts)."""

    key: tuple[str, float]
    start_ns: int
    end_ns: int


@dataclass(frozen=True)
class Attribution:
    """The GPU work of a capture split among the nodes: node key → its work, and what no node holds."""

    per_node: Mapping[tuple[str, float], tuple[GpuWork, ...]]
    unattributed: tuple[GpuWork, ...]
    offset_ns: int
    clock: str
    correction_ns: int = 0  # the fitted offset less the read one
    # copies no node launched: the session's own copies of its inputs and outputs (a profiled run takes host
    # arrays; the timed loop's copies are its own pinned ones), kept apart from the nodes' work
    session_copies: tuple[GpuWork, ...] = ()

    @property
    def attributed_share(self) -> float:
        """Share of the GPU time (all work but the session's copies) attributed to a node; 0.0 when nothing ran."""
        inside = sum(w.duration_ns for works in self.per_node.values() for w in works)
        total = inside + sum(w.duration_ns for w in self.unattributed)
        return inside / total if total else 0.0


@functools.lru_cache(maxsize=4096)
def demangle(name: str) -> str:
    """A kernel's C++ name as Nsight and Kineto show it (CUPTI records the linker's mangled name): cxxfilt
    (libstdc++'s demangler, installed with the extra); the name as recorded where it is not installed or
    the name is not a mangled one."""
    if not name.startswith("_Z"):
        return name
    try:
        import cxxfilt  # type: ignore[import-not-found,import-untyped,unused-ignore]

        return str(cxxfilt.demangle(name))
    except Exception:  # noqa: BLE001 - ImportError, or cxxfilt.InvalidName: keep what CUPTI recorded
        return name


def import_cupti() -> Any:
    """``cupti.cupti`` (cupti-python), or MissingDependency naming the extra."""
    try:
        from cupti import cupti  # type: ignore[import-not-found]
    except ImportError as err:
        raise MissingDependency("cupti-python", EXTRA, why="GPU kernel times per node on onnxruntime-cuda") from err
    return cupti


def clock_offsets(cupti_now: Callable[[], int], clocks: Mapping[str, Callable[[], int]],
                  reads: int = 25) -> dict[str, int]:
    """``cupti_ns - clock_ns`` for each clock: of ``reads`` back-to-back readings (clock, CUPTI, clock), the
    one with the shortest bracket, against the bracket's middle."""
    out = {}
    for name, clock in clocks.items():
        best: tuple[int, int] | None = None
        for _ in range(reads):
            a = clock()
            c = cupti_now()
            b = clock()
            if best is None or b - a < best[0]:
                best = (b - a, c - (a + b) // 2)
        if best is not None:
            out[name] = best[1]
    return out


PY_CLOCKS: dict[str, Callable[[], int]] = {"realtime": time.time_ns, "monotonic": time.monotonic_ns}


class _Recorder:
    """The process's one CUPTI buffer client: CUPTI takes one pair of buffer callbacks per process, so they
    are registered once and hand their records to the capture that is open (``log``)."""

    lock = threading.Lock()
    registered = False
    log: ActivityLog | None = None

    @classmethod
    def completed(cls, activities: Sequence[Any]) -> None:
        log = cls.log
        if log is None:
            return
        for a in activities:
            correlation = int(getattr(a, "correlation_id", 0) or 0)
            if hasattr(a, "cbid"):  # a runtime or driver API call
                log.launches.setdefault(correlation, int(a.start))
            elif hasattr(a, "start") and hasattr(a, "end"):
                name = getattr(a, "name", None)
                if name is None:  # copies and memsets have no name: their kind's
                    name = (f"{COPY_PREFIX} {COPY_KINDS.get(int(a.copy_kind), a.copy_kind)}" if hasattr(a, "copy_kind")
                            else "memset")
                log.work.append(GpuWork(str(name), int(a.start), int(a.end), correlation))

    @staticmethod
    def requested() -> tuple[int, int]:
        return BUFFER_BYTES, 0


def activity_kinds(cupti: Any) -> list[Any]:
    """The activity kinds a capture enables: the GPU's work, and the API calls that launched it."""
    kind = cupti.ActivityKind
    return [kind.CONCURRENT_KERNEL, kind.MEMCPY, kind.MEMSET, kind.RUNTIME, kind.DRIVER]


@contextmanager
def capture(cupti: Any = None) -> Iterator[ActivityLog]:
    """Record the process's GPU work and launching API calls while the block runs (``cupti``: the module,
    imported here when None). One capture at a time. CaptureUnavailable, before the block runs, where CUPTI
    refuses to record."""
    cupti = cupti if cupti is not None else import_cupti()
    log = ActivityLog()
    kinds = activity_kinds(cupti)
    with _Recorder.lock:
        _Recorder.log = log
        try:
            _enable(cupti, kinds)
            before = clock_offsets(cupti.get_timestamp, PY_CLOCKS)
            log.clock_offsets = before
            try:
                yield log
            finally:
                after = clock_offsets(cupti.get_timestamp, PY_CLOCKS)
                # the two clocks may run at slightly different rates: the middle of the capture's readings
                log.clock_offsets = {k: (v + after.get(k, v)) // 2 for k, v in before.items()}
                log.clock_drift_ns = {k: after.get(k, v) - v for k, v in before.items()}
                cupti.activity_flush_all(1)
                for k in kinds:
                    cupti.activity_disable(k)
        finally:
            _Recorder.log = None


class CaptureUnavailable(RuntimeError):
    """CUPTI would not record here (another profiler holds it, or the platform has no CUPTI support): the
    profile then keeps host times and says why."""


def _enable(cupti: Any, kinds: Sequence[Any]) -> None:
    """Enable the activity kinds, or CaptureUnavailable with CUPTI's reason (whatever was enabled is disabled)."""
    done = []
    try:
        if not _Recorder.registered:
            cupti.activity_register_callbacks(_Recorder.requested, _Recorder.completed)
            _Recorder.registered = True
        for k in kinds:
            cupti.activity_enable(k)
            done.append(k)
    except Exception as err:  # cupti.cuptiError and whatever its bindings raise
        for k in done:
            try:
                cupti.activity_disable(k)
            except Exception:  # noqa: BLE001 - best effort: the capture is abandoned anyway
                pass
        raise CaptureUnavailable(f"{type(err).__name__}: {err}") from err


def run_captured(cupti: Any, work: Callable[[], Any]) -> tuple[ActivityLog | None, str | None]:
    """Run ``work`` under a capture: (its log, None); without ``cupti`` (None) or where CUPTI refuses, ``work``
    runs uncaptured: (None, None) or (None, the line that says why the times are host times)."""
    if cupti is None:
        work()
        return None, None
    try:
        with capture(cupti) as log:
            work()
        return log, None
    except CaptureUnavailable as err:
        work()
        return None, f"per-node times are host launch times: CUPTI would not record here ({err})"


def _inside(starts: np.ndarray, ends: np.ndarray, times: np.ndarray) -> np.ndarray:
    """Index of the node interval (sorted by start) holding each time within ``TOLERANCE_NS``, or -1."""
    idx = np.searchsorted(starts, times + TOLERANCE_NS, side="right") - 1
    ok = (idx >= 0) & (times <= ends[np.clip(idx, 0, None)] + TOLERANCE_NS)
    return np.where(ok, idx, -1)


def _intervals(nodes: Sequence[NodeSpan]) -> tuple[list[NodeSpan], np.ndarray, np.ndarray]:
    order = sorted(nodes, key=lambda n: n.start_ns)
    return (order, np.array([n.start_ns for n in order], dtype=np.int64),
            np.array([n.end_ns for n in order], dtype=np.int64))


def _covered(starts: np.ndarray, ends: np.ndarray, times: np.ndarray, offsets: np.ndarray) -> np.ndarray:
    """For each offset, the share of ``times`` (less the offset) inside an interval."""
    return np.array([float(np.mean(_inside(starts, ends, times - int(o)) >= 0)) for o in offsets])


def _nearest_best(offsets: np.ndarray, shares: np.ndarray, base: int) -> tuple[int, float]:
    """Of the offsets with the best share, the one nearest ``base`` (the read offset). Where nodes nearly touch
    (launch-bound graphs), a shift by part of a node holds as many launches as the truth: the read offset,
    accurate to about a microsecond where the clocks agree, decides."""
    top = np.flatnonzero(shares >= shares.max() - 1e-12)
    return int(offsets[top[int(np.argmin(np.abs(offsets[top] - base)))]]), float(shares.max())


def fit_offset(nodes: Sequence[NodeSpan], launch_times: Sequence[int], candidates: Mapping[str, int],
               runs: Sequence[NodeSpan] = ()) -> tuple[str, int, float]:
    """(clock, offset, share of launches inside a node) for the offset (CUPTI's time less ORT's): searched
    ``SEARCH_NS`` either side of each candidate (a read clock offset). With ``runs`` (the profiled runs'
    windows), the offsets that hold the most launching calls (``launch_times``, each call once) inside a run (to
    ``RUN_SLACK``) come first (a run's launches all happen inside it; between runs none is made), so a
    shift by one node's length cannot pass for the truth; among them, in ``STEP_NS`` steps, the one that puts
    the most launches inside a node, nearest the candidate (``_nearest_best``)."""
    if not nodes or not launch_times or not candidates:
        return (next(iter(candidates), ""), next(iter(candidates.values()), 0), 0.0)
    _, starts, ends = _intervals(nodes)
    _, run_starts, run_ends = _intervals(runs)
    times = np.array(sorted(launch_times), dtype=np.int64)
    calls = np.unique(np.array(launch_times, dtype=np.int64))  # a call that launched several pieces of work, once
    calls = calls[:: max(1, len(calls) // MAX_CALLS)]  # an even sample: the run windows' fit needs no more
    best = ("", 0, -1.0)
    for clock, base in candidates.items():
        coarse = base + np.arange(-SEARCH_NS, SEARCH_NS + 1, COARSE_NS, dtype=np.int64)
        if len(run_starts):
            in_runs = _covered(run_starts, run_ends, calls, coarse)
            if in_runs.max() < RUNS_MIN:  # the wrong clock: no offset near it puts the calls in the runs
                continue
            keep = coarse[in_runs >= in_runs.max() - RUN_SLACK]
        else:
            keep = coarse[[int(np.argmax(_covered(starts, ends, times, coarse)))]]
        fine = np.unique(np.concatenate([k + np.arange(-COARSE_NS, COARSE_NS + 1, STEP_NS, dtype=np.int64)
                                         for k in keep]))
        offset, share = _nearest_best(fine, _covered(starts, ends, times, fine), base)
        if share > best[2] + 1e-12:
            best = (clock, offset, share)
    return best


DUMP_ENV = "TRTPROF_CUPTI_DUMP"  # a folder: each attribution's inputs written there as JSON (for finding a fit's fault)


def dump_inputs(nodes: Sequence[NodeSpan], runs: Sequence[NodeSpan], log: ActivityLog) -> None:
    """Where ``DUMP_ENV`` names a folder, write what ``attribute`` is given (nodes, runs, the capture) as one JSON
    file there, so that a fit seen to fail on a GPU can be replayed on any machine (``load_inputs``)."""
    import json
    import os
    import uuid

    folder = os.environ.get(DUMP_ENV)
    if not folder:
        return
    os.makedirs(folder, exist_ok=True)
    data = {"nodes": [[list(n.key), n.start_ns, n.end_ns] for n in nodes],
            "runs": [[list(n.key), n.start_ns, n.end_ns] for n in runs],
            "work": [[w.name, w.start_ns, w.end_ns, w.correlation] for w in log.work],
            "launches": {str(k): v for k, v in log.launches.items()}, "clock_offsets": log.clock_offsets,
            "clock_drift_ns": log.clock_drift_ns}
    with open(os.path.join(folder, f"cupti-{uuid.uuid4().hex[:8]}.json"), "w", encoding="utf-8") as f:
        json.dump(data, f)


def load_inputs(path: str) -> tuple[list[NodeSpan], list[NodeSpan], ActivityLog]:
    """What ``dump_inputs`` wrote (or its gzip): (nodes, runs, log), ready for ``attribute``."""
    import gzip
    import json

    with (gzip.open if str(path).endswith(".gz") else open)(path, "rt", encoding="utf-8") as f:
        data = json.load(f)
    span = lambda row: NodeSpan((str(row[0][0]), float(row[0][1])), int(row[1]), int(row[2]))  # noqa: E731
    log = ActivityLog([GpuWork(str(n), int(a), int(b), int(c)) for n, a, b, c in data["work"]],
                      {int(k): int(v) for k, v in data["launches"].items()},
                      {k: int(v) for k, v in data["clock_offsets"].items()},
                      {k: int(v) for k, v in data["clock_drift_ns"].items()})
    return [span(r) for r in data["nodes"]], [span(r) for r in data["runs"]], log


def is_copy(work: GpuWork) -> bool:
    return work.name.startswith(COPY_PREFIX)


def attribute(nodes: Sequence[NodeSpan], log: ActivityLog, candidates: Mapping[str, int] | None = None,
              runs: Sequence[NodeSpan] = ()) -> Attribution:
    """Split ``log``'s GPU work among ``nodes`` (ORT's clock): each piece of work goes to the node whose host
    interval holds the API call that launched it, at the fitted clock offset (``fit_offset``, from
    ``candidates``: by default the capture's clock offsets; ``runs``: the profiled runs' windows). Copies no
    node holds are the session's own (its inputs and outputs, ``session_copies``), not unattributed work."""
    cands = dict(candidates if candidates is not None else log.clock_offsets)
    launched = [w for w in log.work if w.correlation in log.launches]
    # the fit uses the calls that launched kernels (made in a node's compute function): not every API call (the run
    # windows), and not the copies, most of which are the session's own and outside every node — counted, they pulled
    # the report net's fp32 fit 14-15 µs off the read offset to put a few inside nodes, and 86-91 % of the GPU's work
    # was tied (H200, 2026-12-03, replayed from TRTPROF_CUPTI_DUMP); at the read offset every kernel lies in its node
    kernels = [log.launches[w.correlation] for w in launched if not is_copy(w)]
    clock, offset, _ = fit_offset(nodes, kernels, cands, runs)
    order, starts, ends = _intervals(nodes)
    per: dict[tuple[str, float], list[GpuWork]] = {n.key: [] for n in order}
    outside = [w for w in log.work if w.correlation not in log.launches]
    if launched and order:
        times = np.array([log.launches[w.correlation] - offset for w in launched], dtype=np.int64)
        for w, i in zip(launched, _inside(starts, ends, times)):
            (per[order[i].key] if i >= 0 else outside).append(w)
    else:
        outside.extend(launched)
    return Attribution({k: tuple(v) for k, v in per.items()}, tuple(w for w in outside if not is_copy(w)), offset,
                       clock, offset - cands.get(clock, offset), tuple(w for w in outside if is_copy(w)))
