"""Run one cell in its own processes (``trtprof build`` then ``compare``/``bench``) and read it back.

The result JSON is read defensively (``.get`` everywhere, the verdict passed through as written):
``trtprof.compare/1`` and ``/2`` differ in verdict names and may differ in fields, and the sweep must
keep working while the compare schema moves.
"""
from __future__ import annotations
import json
import os
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Mapping

from ..engines.cache_admin import remove_unheld_locks
from ..util.files import dirs_kept_only_if_used
from ..util.scratch import temp_dir
from .spec import Cell

# Exit codes of a cell's trtprof processes. 2 = bad input (TrtprofError): the same input fails the same
# way again, so it is not retried. Anything else (a crash, a signal, the OOM killer) is retried once.
EXIT_BAD_INPUT = 2
EXIT_TIMEOUT = 124  # as timeout(1): the step outlived --cell-timeout-s; it would again, so no retry
MAX_ATTEMPTS = 2
LOG_TAIL_CHARS = 4000


@dataclass(frozen=True)
class Slot:
    """Where a cell runs: one GPU (by NVML identity) and/or a set of CPU cores."""

    name: str  # "gpu0", "cpu1", "ray"
    gpu: Mapping[str, Any] | None = None  # an entry of nvml.describe_gpus(): index, name, uuid, driver, …
    cpus: tuple[int, ...] | None = None  # cores to pin to; None: not pinned
    hide_gpus: bool = False  # CPU slots on a GPU host: CUDA_VISIBLE_DEVICES="" so nothing lands on a GPU

    def env(self, base: Mapping[str, str]) -> dict[str, str]:
        env = dict(base)
        env["PYTHONUNBUFFERED"] = "1"
        env["CUDA_DEVICE_ORDER"] = "PCI_BUS_ID"  # CUDA's order = NVML's order, should an index leak through
        if self.gpu is not None:
            # The UUID, not an index: unambiguous whatever the parent's CUDA_VISIBLE_DEVICES was.
            env["CUDA_VISIBLE_DEVICES"] = str(self.gpu.get("uuid") or self.gpu.get("index"))
        elif self.hide_gpus:
            env["CUDA_VISIBLE_DEVICES"] = ""
        if self.cpus:
            for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
                env[var] = str(len(self.cpus))
        from ..measure.workers import prepend_package_root  # here, not at the top: the sweep imports no measuring code

        prepend_package_root(env)  # the trtprof the sweep itself runs from
        return env

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "gpu": dict(self.gpu) if self.gpu else None,
                "cpus": list(self.cpus) if self.cpus else None}


class Processes:
    """The child processes running now, so an interrupted sweep can stop them (they run in their own
    session: the terminal's Ctrl-C reaches only the sweep, which then ends them here)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._procs: set[subprocess.Popen] = set()
        self.stopping = threading.Event()

    def add(self, proc: subprocess.Popen) -> None:
        with self._lock:
            self._procs.add(proc)
        if self.stopping.is_set():
            proc.kill()

    def discard(self, proc: subprocess.Popen) -> None:
        with self._lock:
            self._procs.discard(proc)

    def stop_all(self) -> None:
        self.stopping.set()
        with self._lock:
            procs = list(self._procs)
        for proc in procs:
            try:
                proc.terminate()
            except ProcessLookupError:
                pass
        deadline = time.monotonic() + 5.0
        for proc in procs:
            try:
                proc.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                proc.kill()


class Interrupted(Exception):
    """The sweep is stopping; the cell's half-done work is dropped, not recorded as a failure."""


def worker_argv(slot: Slot, argv: list[str]) -> list[str]:
    pin = ["--cpus", ",".join(map(str, slot.cpus))] if slot.cpus else []
    return [sys.executable, "-m", "trtprof.cli.sweep_worker", *pin, "--", *argv]


def _run(argv: list[str], env: Mapping[str, str], log: Any, processes: Processes | None,
         timeout_s: float | None) -> int:
    log.write(f"$ trtprof {' '.join(argv[argv.index('--') + 1:])}\n")
    log.flush()
    proc = subprocess.Popen(argv, env=dict(env), stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                            start_new_session=True)
    if processes is not None:
        processes.add(proc)
    try:
        return proc.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
        log.write(f"\n[sweep] killed after the cell timeout of {timeout_s:g} s\n")
        return EXIT_TIMEOUT
    finally:
        if processes is not None:
            processes.discard(proc)


def error_line(log_text: str, rc: int) -> str:
    """The one-line cause: the CLI's ``trtprof X: error: …`` line, else the last line, else the code."""
    lines = [ln.strip() for ln in log_text.splitlines() if ln.strip()]
    if rc == EXIT_TIMEOUT and lines and lines[-1].startswith("[sweep] killed after"):
        return lines[-1][len("[sweep] "):]
    for line in reversed(lines):
        if ": error:" in line and line.startswith("trtprof"):
            return line
    if rc < 0:
        return f"killed by signal {-rc}" + (f" (last output: {lines[-1][:200]})" if lines else "")
    return f"exit code {rc}" + (f": {lines[-1][:300]}" if lines else "")


def _attempts(stages: list[tuple[str, list[str]]], slot: Slot, child_env: Mapping[str, str], log_path: Path,
              processes: Processes | None, timeout_s: float | None,
              check: Callable[[], str | None] = lambda: None) -> list[dict[str, Any]]:
    """Run the stages in order, each a trtprof process; on a crash run them all once more.

    ``check`` runs after all stages exit 0 and returns an error (e.g. an unreadable JSON) or None.
    The last attempt in the returned list has no ``error`` exactly when everything succeeded."""
    attempts: list[dict[str, Any]] = []
    for attempt in range(1, MAX_ATTEMPTS + 1):
        t0 = time.perf_counter()
        rc, stage = 0, stages[-1][0]
        with open(log_path, "a", encoding="utf-8") as log:
            if attempt > 1:
                log.write(f"\n[sweep] attempt {attempt} after: {attempts[-1]['error']}\n")
            for stage, argv in stages:
                rc = _run(worker_argv(slot, argv), child_env, log, processes, timeout_s)
                if rc != 0:
                    break
        if processes is not None and processes.stopping.is_set():
            raise Interrupted(stage)
        entry: dict[str, Any] = {"attempt": attempt, "stage": stage, "exit_code": rc,
                                 "seconds": round(time.perf_counter() - t0, 3)}
        attempts.append(entry)
        if rc == 0:
            problem = check()
            if problem is None:
                break
            entry["error"] = problem
            continue
        entry["error"] = f"{stage}: {error_line(log_path.read_text(encoding='utf-8', errors='replace'), rc)}"
        if rc in (EXIT_BAD_INPUT, EXIT_TIMEOUT):
            break
    return attempts


def build_model(cell: Cell, slot: Slot, *, processes: Processes | None = None,
                timeout_s: float | None = None) -> dict[str, Any]:
    """The sweep's pre-build step for one model: ``trtprof build`` with every precision and batch size
    of the sweep, so the cells after it only load engines. Returns ``ok``, ``error``, ``attempts``, ``log``."""
    child_env = slot.env(os.environ)
    with dirs_kept_only_if_used(Path(cell.engines_dir), remove_unheld_locks), temp_dir("build") as tmp:
        log_path = Path(tmp) / "build.log"
        log_path.touch()
        attempts = _attempts([("build", cell.build_argv())], slot, child_env, log_path, processes, timeout_s)
        log = log_path.read_text(encoding="utf-8", errors="replace")
    error = attempts[-1].get("error")
    return {"ok": error is None, "error": error, "attempts": attempts, "log": log}


def run_cell(cell: Cell, slot: Slot, *, processes: Processes | None = None, timeout_s: float | None = None,
             build: bool = True) -> dict[str, Any]:
    """Build (``build=True``: a cache hit after the first cell of a model; the local executor pre-builds
    and passes False), then compare/bench; a crashed attempt is retried once.

    Returns the cell record: what ran, where (host, GPU, cores), how long, the outcome, the result
    JSON itself (``"result"``, for the sweep to store) and the log tail. Raises ``Interrupted`` when
    the sweep is stopping."""
    child_env = slot.env(os.environ)
    started_epoch = time.time()
    result: dict[str, Any] | None = None
    with dirs_kept_only_if_used(Path(cell.engines_dir), remove_unheld_locks), temp_dir(f"cell-{cell.id}") as tmp:
        out = tmp / "result.json"
        log_path = tmp / "cell.log"
        log_path.touch()
        stages = ([("build", cell.build_argv())] if build else []) + [(cell.kind, cell.run_argv(str(out)))]

        def check() -> str | None:
            nonlocal result
            try:
                result = json.loads(out.read_text(encoding="utf-8"))
            except (OSError, ValueError) as err:
                return f"{cell.kind} exited 0 but its JSON is unreadable: {err}"
            return None

        attempts = _attempts(stages, slot, child_env, log_path, processes, timeout_s, check)
        log_text = log_path.read_text(encoding="utf-8", errors="replace")
    if attempts[-1].get("error") is not None:
        result = None
    return cell_record(cell, slot, CellRun(attempts=attempts, result=result, log_text=log_text,
                                           started_epoch=started_epoch))


@dataclass(frozen=True)
class CellRun:
    """What running a cell left: its attempts, its result JSON (None: it failed), its log's text and when it
    started. ``error`` overrides the last attempt's (a cell that never ran has no attempts); ``finished_epoch``
    None is now (a cell that never ran passes its start: no duration, so it is nobody's neighbour)."""

    attempts: list[dict[str, Any]]
    result: Mapping[str, Any] | None
    log_text: str
    started_epoch: float
    finished_epoch: float | None = None
    error: str | None = None


def cell_record(cell: Cell, slot: Slot, run: CellRun) -> dict[str, Any]:
    """The sweep's JSON record of ``cell`` run on ``slot`` (``run``: what the run left)."""
    from ..system.environment import host, package_versions

    attempts, result, log_text, error = run.attempts, run.result, run.log_text, run.error
    started_epoch = run.started_epoch
    finished_epoch = time.time() if run.finished_epoch is None else run.finished_epoch
    env_json = (result or {}).get("environment") or {}
    failed = result is None
    return {
        **cell.to_json(),
        "status": "failed" if failed else "ok",
        "error": (error or (attempts[-1].get("error") if attempts else None)) if failed else None,
        "attempts": attempts,
        "slot": slot.to_json(),
        "host": env_json.get("host") or host(),
        "gpu": dict(slot.gpu) if slot.gpu else None,
        "packages": env_json.get("packages") or package_versions(),
        "started": time.strftime("%Y-%m-%dT%H:%M:%S%z", time.localtime(started_epoch)),
        "started_epoch": started_epoch,
        "finished_epoch": finished_epoch,
        "wall_s": round(finished_epoch - started_epoch, 3),
        "summary": summarize(cell.kind, result) if result is not None else [],
        "result": dict(result) if result is not None else None,
        "log_tail": log_text[-LOG_TAIL_CHARS:],
    }


def _num(value: Any) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def summarize(kind: str, data: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The few numbers the matrix needs, read defensively from a compare (schema 1 or 2) or bench JSON."""
    rows: list[dict[str, Any]] = []
    if kind == "compare":
        for c in data.get("comparisons") or []:
            s = c.get("speedup") or {}
            lat = c.get("latency") or {}
            rows.append({
                "batch_size": c.get("batch_size"), "baseline": c.get("baseline"), "candidate": c.get("candidate"),
                "speedup": _num(s.get("estimate")), "ci_low": _num(s.get("ci_low")), "ci_high": _num(s.get("ci_high")),
                "confidence": _num(s.get("confidence")),
                "verdict": c.get("verdict"),
                "baseline_median_ms": _num((lat.get("baseline") or {}).get("median_ms")),
                "candidate_median_ms": _num((lat.get("candidate") or {}).get("median_ms")),
                "effective_precision": (lat.get("candidate") or {}).get("effective_precision"),
            })
    else:
        for r in data.get("results") or []:
            lat = (r.get("stats") or {}).get("latency_ms") or {}
            rows.append({"batch_size": r.get("batch_size"), "precision": r.get("precision"),
                         "median_ms": _num(lat.get("p50")), "p99_ms": _num(lat.get("p99")), "n": lat.get("n"),
                         "throughput_per_s": _num(r.get("throughput_per_s"))})
    return rows
