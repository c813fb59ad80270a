"""Loads as fresh worker processes: one process holds one instance of every arm and runs its rounds.

Why processes: two instances of one engine in one process share the allocator, the thread pool and
whatever state the first one left behind; across processes placement, ASLR and (on a GPU) the CUDA
context differ, which is exactly the load-to-load spread a user sees from run to run (pyperf runs 20
processes for the same reason). It is also the right isolation between configurations. A worker
is started once per compare and serves every batch size, so the cost is a few process starts.

Protocol: ``python -m trtprof.measure.workers`` reads pickled commands on stdin and answers on the original
stdout (the worker moves fd 1 to stderr so a library's prints cannot corrupt the channel):
``init`` (records, labels) → ``ready`` with each arm's ``ArmFacts``; ``outputs`` (batch sizes with their shapes,
seed, int range) → each arm's outputs and memory per batch size (compare's accuracy pass, run by load 0
before any timing: the parent then loads no engine of its own); ``feeds`` (shapes, seed, int range, fixed feeds or None) → ``ok``;
``warm`` (TimingConfig) / ``rounds`` (first, count, TimingConfig, arm order) → Samples per arm; ``close``.
A failure answers
``error`` with the exception's class and message; the parent re-raises it as a TrtprofError.
This module is the parent's side; what runs inside the worker (its loop, one handler per command) is
``measure.worker_loop``.
"""
from __future__ import annotations

import os
import pickle
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Iterator, Mapping, Sequence

from ..errors import TrtprofError
from ..util.scratch import marked_dir
from ..util.thirdparty import SINK_ENV
from .concurrent import Span, record
from . import blocks
from .interleave import ROUND_WARMUP, LoadLost
from .timing import Samples, TimingConfig
from .worker_deaths import STDERR_TAIL_CHARS, capture_tail, error_tail, how_it_ended, killed_from_outside  # noqa: F401
from .worker_loop import PARENT_ENV, feeds_key, has_preload
from .worker_loop import preload, serve, trim  # noqa: F401 - the worker side's entry points, named here too

# Worker processes starting at once, ahead of the load being measured: the default run's 6 loads all start
# with the command; --min-loads 29 does not start 29 torch processes (each with a CUDA context) at once.
SPAWN_AHEAD = 8
DEATH_WAIT_S = 5.0  # for a worker whose pipe closed to be reaped, so the message can name its signal
PACKAGE_ROOT = str(Path(__file__).resolve().parents[2])  # the folder holding this trtprof (trtprof/measure/workers.py)


def prepend_package_root(env: dict[str, str]) -> None:
    """Put the folder holding this trtprof first on ``env``'s PYTHONPATH, so a child process started
    with ``-m trtprof…`` runs the same trtprof as its parent (not another one installed)."""
    env["PYTHONPATH"] = os.pathsep.join([PACKAGE_ROOT, *filter(None, [env.get("PYTHONPATH")])])


@dataclass(frozen=True)
class ArmFacts:
    """What the parent needs of one loaded arm without loading it itself: its input and output specs,
    its device (``cpu``/``cuda``) and what ``set_autotune`` made of the plan's setting. Sent by a
    worker in its ``ready`` reply."""

    inputs: tuple[Any, ...]
    outputs: tuple[Any, ...]
    device: str
    autotune: bool | None
    # its first run at a shape times no kernels (the runner's ``primes_beside_others``): priming, and the accuracy
    # pass, may run beside other workers' runs
    primes_beside_others: bool = False


class WorkerFailed(TrtprofError):
    """A measurement worker process failed or died."""


class WorkerDied(WorkerFailed, LoadLost):
    """The worker process is gone (killed by a signal, the OOM killer's SIGKILL included, or exited):
    its load is lost, the rounds it finished before are not (``LoadLost.partial``)."""


class Worker:
    """Parent side of one worker process (one load)."""

    def __init__(self, index: int, records: Mapping[str, Any] | None, device: str | None = None,
                 autotune: bool = True, preload: Sequence[str] = ()) -> None:
        """Start the process; with ``records``, tell it to load them (else ``init`` does, later: a
        spare started before the engines are known, ``preload`` naming the backends whose libraries
        it imports meanwhile)."""
        self.index = index
        self.device = device
        env = dict(os.environ)
        prepend_package_root(env)
        if device is not None:  # each worker makes its own CUDA context on the device it is told
            env["CUDA_VISIBLE_DEVICES"] = str(device)
        if threading.current_thread() is threading.main_thread():
            env[PARENT_ENV] = str(os.getpid())
        else:
            env.pop(PARENT_ENV, None)
        self.stderr = tempfile.TemporaryFile()
        # where the worker's capture blocks write what its libraries say (util.thirdparty.SINK_ENV): read
        # when it dies inside one, removed at close; in a marked dir, so that after a kill -9 of this
        # process the next trtprof command removes it (util.scratch.clean_stale)
        self.log_dir = marked_dir("worker")
        self.capture_path = str(self.log_dir / "capture.log")
        env[SINK_ENV] = self.capture_path
        argv = [sys.executable, "-m", "trtprof.measure.workers", *(["--preload", ",".join(preload)] if preload else [])]
        self.proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.stderr, env=env)
        self.spawned_at = time.monotonic()
        self.ready_at: float | None = None  # the worker's own clock when its engines were loaded
        # the worker's start-up by its clock (``worker_loop.MARKS``, ``init_at``: its engines asked) and seconds per arm
        self.marks: dict[str, float] = {}
        self.arms_s: dict[str, float] = {}
        self.prime_s: dict[str, float] = {}  # the priming's seconds: the shapes run ahead (alone: the sessions opened), then per batch size
        self.primed_at: float | None = None  # the worker's clock when its priming was done
        self.closed_at: float | None = None  # when ``close`` had reaped it (this clock)
        self.facts: dict[str, ArmFacts] = {}
        self._ready = False
        self._priming_since: float | None = None  # a prime asked, its answer not read yet (``wait_primed``)
        self.primed: set[Any] = set()  # the feeds keys (worker_loop.feeds_key) its priming covered
        self._prime_keys: dict[int, Any] = {}
        self.prime_notes: list[str] = []
        # what the library wrote priming, batch size → arm → lines (``wait_primed``), and whether the arms' first runs
        # ran side by side there
        self.prime_lines: dict[int, dict[str, list[str]]] = {}
        self.primed_side_by_side = self.side_by_side_failed = False
        self._initialised = False
        self._asked_to_close = False
        self.told_shared = False  # told where the run's shared seeded inputs are (``LifeWorkers.tell_shared``)
        self.told: dict[str, Any] | None = None  # the engines it was told (``engines_identity``), once ``init``
        self.told_at: float | None = None  # when (this clock)
        if records is not None:
            self.init(records, autotune)

    def init(self, records: Mapping[str, Any], autotune: bool) -> None:
        """Tell the worker which engines to load (once); ``told`` keeps which, as they stood on disk then."""
        if not self._initialised:
            self._initialised = True
            self.told, self.told_at = engines_identity(records), time.monotonic()
            self._send(("init", dict(records), autotune))

    def _send(self, message: Any) -> None:
        assert self.proc.stdin is not None
        try:
            pickle.dump(message, self.proc.stdin, protocol=pickle.HIGHEST_PROTOCOL)
            self.proc.stdin.flush()
        except (BrokenPipeError, OSError) as err:
            raise self._died() from err

    def _receive(self, who: str | None = None) -> Any:
        """The next reply; an ``error`` reply raised as its class, its message after ``who`` (default:
        which load and that it ran in a worker process)."""
        assert self.proc.stdout is not None
        try:
            kind, payload = pickle.load(self.proc.stdout)
        except (EOFError, pickle.UnpicklingError, OSError) as err:
            raise self._died() from err
        if kind == "error":
            cls_name, message = payload
            prefix = f"load {self.index} (worker process): " if who is None else who
            raise _error_class(cls_name)(f"{prefix}{message}")
        return payload

    def _died(self) -> WorkerDied:
        try:  # its pipe closed: it is exiting or gone; reap it to learn how (a few seconds at most)
            self.proc.wait(timeout=DEATH_WAIT_S)
        except subprocess.TimeoutExpired:
            pass
        self.stderr.seek(0)
        # killed from outside (kill -9, the OOM killer): the signal is the cause, what it wrote is not; one
        # that exited or crashed: its stderr, and what its last capture block took in (loading or timing)
        outside = killed_from_outside(self.proc.returncode)
        tail = "" if outside else error_tail(self.stderr.read().decode("utf-8", "replace"))
        last = "" if outside else capture_tail(self.capture_path)
        if last:
            last = f"inside a block it wrote: {last}"
            tail = f"{tail} | {last}" if tail else last
        return WorkerDied(f"load {self.index} (measurement worker, pid {self.proc.pid}) {how_it_ended(self.proc.returncode)}"
                          + (f": {tail}" if tail else ""))

    def wait_ready(self, who: str | None = None) -> None:
        """Wait for ``ready`` (the engines loaded); a failure to load raised as ``_receive`` does."""
        if not self._ready:
            payload = self._receive(who)
            if isinstance(payload, dict):  # a worker of this trtprof: its arms' facts and when it was ready
                self.facts = {label: ArmFacts(**f) for label, f in payload.get("facts", {}).items()}
                self.ready_at = payload.get("ready_at")
                self.marks = {**payload.get("marks", {}), **({"init": payload["init_at"]} if "init_at" in payload else {})}
                self.arms_s = dict(payload.get("arms_s", {}))
            self._ready = True

    def prime(self, batches: Sequence[tuple[int, Mapping[str, tuple[int, ...]]]], seed: int,
              int_range: tuple[int, int], config: TimingConfig, alone: bool = False,
              side_by_side: Mapping[int, Mapping[str, Sequence[str]]] | None = None) -> None:
        """Ask the worker to prime its runners at each batch size (``worker_loop._WorkerState.prime``; ``alone``: no
        other worker holds the GPU while it lives; ``side_by_side``: the arms' first runs in threads, what the library
        wrote given to arms by these lines of life 0) once it has loaded them, without waiting: ``wait_primed`` reads
        the answer, and every other call waits for it first."""
        if self._initialised and self._priming_since is None:
            known = None if side_by_side is None else {b: {k: list(v) for k, v in arms.items()}
                                                       for b, arms in side_by_side.items()}
            self._send(("prime", [(b, dict(s)) for b, s in batches], seed, int_range, config, alone, known))
            self._priming_since = time.monotonic()
            self._prime_keys = {b: feeds_key(s, seed, int_range) for b, s in batches}

    def wait_primed(self) -> Span | None:
        """Read the priming's answer (after ``ready``); its span by the worker's clock, None when none was asked."""
        if self._priming_since is None:
            return None
        self.wait_ready()
        asked, self._priming_since = self._priming_since, None
        payload = self._receive()
        self.primed = {self._prime_keys[b] for b in payload.get("primed", ())}
        self.prime_notes = list(payload.get("notes", ()))  # where it stopped, and why: kept in the run's record
        self.prime_s, self.primed_at = dict(payload.get("seconds", {})), payload.get("done_at")
        self.prime_lines = {b: dict(arms) for b, arms in (payload.get("lines") or {}).items()}
        self.primed_side_by_side = bool(payload.get("side_by_side"))
        self.side_by_side_failed = bool(payload.get("side_by_side_failed"))
        stopped = f" ({'; '.join(self.prime_notes)})" if self.prime_notes else ""
        return Span(f"worker {self.index} priming{stopped}", asked, payload.get("done_at"))

    def is_ready(self) -> bool:
        """Has the worker said ``ready`` (without waiting for it)?"""
        import select

        if not self._ready and self.proc.stdout is not None and select.select([self.proc.stdout], [], [], 0)[0]:
            self.wait_ready()
        return self._ready

    def call(self, *message: Any) -> Any:
        self.wait_ready()
        self.wait_primed()
        self._send(message)
        return self._receive()

    def ask(self, *message: Any) -> None:
        """Send a command without waiting for its answer (``answer`` reads it): the parent works meanwhile."""
        self.wait_ready()
        self.wait_primed()
        self._send(message)

    def answer(self, who: str | None = None) -> Any:
        return self._receive(who)

    def ask_to_close(self) -> None:
        """Tell the worker to exit, without waiting for it (``close`` waits)."""
        try:
            if not self._asked_to_close and self.proc.poll() is None:
                self._asked_to_close = True
                self._send(("close",))
        except TrtprofError:
            pass  # it is gone already: close reaps it

    def close(self) -> None:
        # A worker still starting is waited for (up to 30 s); the pool kills the ones it never handed a
        # load before closing (a torch worker takes ~9 s to start on an H200).
        try:
            self.ask_to_close()
            if self.proc.poll() is None:
                self.proc.wait(timeout=30)
        except (TrtprofError, subprocess.TimeoutExpired):
            self.proc.kill()
            self.proc.wait()
        finally:
            self.closed_at = self.closed_at or time.monotonic()
            for stream in (self.proc.stdin, self.proc.stdout):
                if stream is not None:
                    try:
                        stream.close()
                    except OSError:  # BrokenPipeError flushing to a worker that died: nothing to tell it
                        pass
            self.stderr.close()
            shutil.rmtree(self.log_dir, ignore_errors=True)


def engines_identity(records: Mapping[str, Any]) -> dict[str, Any]:
    """What makes two sets of engines the same load, by arm: each artifact's path, cache key and sha256, and the
    file's size and modification time now (an entry rebuilt in place meanwhile is another load)."""
    def one(record: Any) -> tuple[Any, ...]:
        try:
            path = Path(record.artifact_path)
            stat = path.stat()
            return str(path), record.key, record.artifact_sha256, stat.st_size, stat.st_mtime_ns
        except (OSError, ValueError, AttributeError):  # no file (yet), or not a record: never the same
            return (id(record),)
    return {label: one(r) for label, r in records.items()}


def _error_class(name: str) -> type[TrtprofError]:
    from .. import errors

    cls = getattr(errors, name, None)
    return cls if isinstance(cls, type) and issubclass(cls, TrtprofError) else WorkerFailed


class WorkerLoad:
    """One worker seen as a ``interleave.Load`` for one batch size (the pool closes the process).
    With its ``pool``: every worker started so far has loaded its engines before this one's warm-up
    or rounds begin (``WorkerPool.settle``), and each call of rounds is recorded as timed."""

    def __init__(self, worker: Worker, feeds_spec: tuple[Any, ...], pool: "WorkerPool | None" = None,
                 timed: list[Span] | None = None) -> None:
        """``timed``: where each call of rounds is recorded as timed without a ``pool`` (``serial_loads.LifeWorkers``)."""
        self.worker = worker
        self.feeds_spec = feeds_spec
        self.pool = pool
        self.timed = pool.timed if pool is not None else timed
        # seconds the last warm-up waited for other workers' start-up or priming (``settle``): the run's, not this
        # load's, cost (``interleave.RoundLoop.add_load`` leaves it out of what a later load is expected to cost)
        self.waited_s = 0.0
        # a round's warm-up calls in the loop this load serves (``RoundLoop.round_warmup``, told for a later load)
        self.round_warmup = ROUND_WARMUP

    def warm_up(self, config: TimingConfig) -> dict[str, Samples]:
        """The load's warm-up block. In a worker primed at these inputs (``WorkerPool.prime``) the first runs of
        every arm at this shape are behind it: its warm-up then needs what a round's does (``round_warmup`` calls,
        ``ROUND_WARMUP`` until the loop tells it; ``blocks.PRIMED_WARMUP_AS_ROUND`` off: ``ROUND_WARMUP``) and the
        plan's warm-up time, not the count that covers a process's first runs."""
        self.warm_up_begin(config)
        return self.warm_up_end()

    def warm_up_begin(self, config: TimingConfig) -> None:
        """``warm_up`` without reading its answer (``warm_up_end`` does): the warm-ups of several loads then run
        side by side in their workers (``loads.warm_up_side_by_side``)."""
        if self.pool is not None:  # the warm-up sizes the blocks: a worker starting beside it would skew them
            waiting = time.monotonic()
            self.pool.settle()
            self.waited_s = time.monotonic() - waiting
        shapes, seed, int_range, fixed = self.feeds_spec
        if fixed is None and feeds_key(shapes, seed, int_range) in self.worker.primed:
            calls = self.round_warmup if blocks.PRIMED_WARMUP_AS_ROUND else ROUND_WARMUP
            config = replace(config, warmup=min(config.warmup, calls))
        self.worker.ask("feeds", *self.feeds_spec)
        self.worker.ask("warm", config)

    def warm_up_end(self) -> dict[str, Samples]:
        """The answers to ``warm_up_begin``'s two commands, both read before either one's error is raised."""
        answers, error = [], None
        for _ in range(2):
            try:
                answers.append(self.worker.answer())
            except WorkerDied:  # its pipe is gone: nothing more to read
                raise
            except TrtprofError as err:
                error = error or err
        if error is not None:
            raise error
        return answers[1]

    def rounds(self, first: int, count: int, config: TimingConfig, order: Sequence[str]) -> list[dict[str, Samples]]:
        if self.pool is not None:
            self.pool.settle()
        if self.timed is None:
            return self.worker.call("rounds", first, count, config, list(order))
        started = time.monotonic()
        try:
            return self.worker.call("rounds", first, count, config, list(order))
        finally:
            self.timed.append(Span(f"load {self.worker.index}: rounds {first}-{first + count - 1}",
                                   started, time.monotonic()))

    def close(self) -> None:
        return None


class WorkerPool:
    """The compare's worker processes, started side by side, reused across batch sizes."""

    def __init__(self, records: Mapping[str, Any], device: str | None = None, autotune: bool = True,
                 planned: int = 0) -> None:
        """``planned``: the loads the run will open at least (its ``min_loads``); ``SPAWN_AHEAD`` of
        them start at once and the rest as the loads before them open."""
        self.records = dict(records)
        self.device = device
        self.autotune = autotune
        self.planned = planned
        self.workers: list[Worker] = []
        self.used = 0  # workers handed out as loads (the first ``used``); the others never measured
        self.created_at = time.monotonic()
        self.timed: list[Span] = []  # every call of timed rounds (WorkerLoad.rounds)
        self._deferred_prime: tuple[Any, ...] | None = None  # load 0's priming, asked after the accuracy pass
        self.busy: list[Span] = []  # other work of this run, beside the workers' start-ups (the accuracy pass)
        self.concurrent: dict[str, Any] = {}  # set by close: concurrent.record of all of it

    def spawn(self, n: int) -> None:
        """Start up to ``n`` workers at once and return: their imports and engine loads run in the
        background (and overlap each other) until ``start`` waits for them. Spares started earlier
        (``spares``) on the same device are used first."""
        while len(self.workers) < n:
            spare = take_spare(self.device)
            if spare is not None:
                spare.index = len(self.workers)
                try:
                    spare.init(self.records, self.autotune)
                except WorkerFailed:  # it died since take_spare looked: reap it, start a fresh one
                    spare.close()
                    continue
                self.workers.append(spare)
            else:
                self.workers.append(Worker(len(self.workers), self.records, self.device, self.autotune))

    def start(self, n: int) -> None:
        """Have ``n`` workers (spawning what is missing) and wait until every one started so far has
        loaded its engines — those beyond ``n`` too: measuring beside processes still starting would put
        their start-up into the first rounds (the CPU results were measured this way)."""
        self.spawn(n)
        for w in self.workers:
            w.wait_ready()

    def prime(self, batches: Sequence[tuple[int, Mapping[str, tuple[int, ...]]]], seed: int,
              int_range: tuple[int, int], config: TimingConfig, *, after_outputs: bool = False) -> int:
        """Ask every worker started so far to prime its runners at each batch size (``Worker.prime``), side by
        side, before any timing: ``settle`` (which every load's warm-up and rounds wait on) waits for their
        answers. Workers started later are not primed: their first block at a shape pays what priming would
        have. ``after_outputs`` (every arm's first run at a shape times no kernels): load 0's worker runs the
        accuracy pass first, beside the others' priming, and primes after it (``outputs`` asks it), instead of
        the accuracy pass waiting, alone, for every worker's priming (3 s of ResNet-50's start-up on the H200,
        2026-12-03). Returns how many were asked."""
        self._deferred_prime = (batches, seed, int_range, config) if after_outputs and self.workers else None
        for w in self.workers[1:] if self._deferred_prime is not None else self.workers:
            w.prime(batches, seed, int_range, config)
        return len(self.workers)

    def settle(self) -> None:
        """Wait until every worker started so far has loaded its engines (issue 33: nothing trtprof
        starts runs beside a timed round). Workers are spawned ahead of the loads that use them
        (``load``: ``SPAWN_AHEAD``), and with more planned loads than that, or a budget that stops
        opening loads early, some were still starting when the first rounds ran. Priming asked
        (``prime``) is waited for too, and kept as work of this run beside the timing (``busy``)."""
        for w in self.workers:
            w.wait_ready()
            span = w.wait_primed()
            if span is not None:
                self.busy.append(span)

    def facts(self) -> dict[str, ArmFacts]:
        """Each arm's ``ArmFacts`` as load 0's worker found them (waiting for it to load its engines)."""
        self.spawn(1)
        self.workers[0].wait_ready(who="")  # an engine that cannot load: the line the parent's own load gave
        return dict(self.workers[0].facts)

    def outputs(self, batches: Sequence[tuple[int, Mapping[str, tuple[int, ...]], int]], seed: int,
                int_range: tuple[int, int]) -> dict[int, tuple[dict[str, Any], dict[str, Any]]]:
        """compare's accuracy pass by load 0's worker: every arm once on the seeded random inputs of each
        ``(batch size, shapes, input bytes)``; batch size → (arm → outputs, arm → memory in use around
        its inference). It runs once every started worker has loaded its engines (``settle``), alone:
        a torch worker's first run at a shape is where cuDNN picks its kernels by timing them, and
        those picks stay with load 0 for its timed rounds, so they are made on a quiet machine, as in
        any load's warm-up. Only the outputs come back through the pipe (one batch per batch size: for
        ResNet-50 at batch 256, 1 MB per arm), never the inputs (150 MB there): the worker makes the
        same ones from the seed. Where priming asked load 0's worker to prime after it (``prime``'s
        ``after_outputs``), it runs beside the other workers' priming and then asks for that priming."""
        self.spawn(1)
        deferred, self._deferred_prime = self._deferred_prime, None
        if deferred is None:
            self.settle()
        asked, done_at = time.monotonic(), None
        try:
            self.workers[0].ask("outputs", [(b, dict(s), n) for b, s, n in batches], seed, int_range)
            payload = self.workers[0].answer(who="")  # its errors read as the parent's would (OutOfMemory: the batch)
            done_at = payload["done_at"]  # by the worker's clock
            return payload["outputs"]
        finally:
            what = "the accuracy pass (load 0's worker" + (", beside the others' priming)" if deferred else ")")
            self.busy.append(Span(what, asked, done_at if done_at is not None else time.monotonic()))
            if deferred is not None:
                self.workers[0].prime(*deferred)

    def ready(self, index: int) -> bool:
        """Would load ``index`` open without waiting for a worker to start?"""
        return index < len(self.workers) and self.workers[index].is_ready()

    def load(self, index: int, shapes: Mapping[str, tuple[int, ...]], seed: int,
             int_range: tuple[int, int], fixed: Mapping[str, Any] | None = None) -> WorkerLoad:
        """A load of worker ``index`` on random inputs of ``shapes``, or on ``fixed`` feeds (the first
        batch of the user's ``--inputs``)."""
        if index >= len(self.workers):
            self.start(index + 1)
        self.spawn(min(self.planned, index + 1 + SPAWN_AHEAD))  # the planned loads after it start meanwhile
        self.used = max(self.used, index + 1)
        return WorkerLoad(self.workers[index], (dict(shapes), seed, int_range, fixed), pool=self)

    def concurrency(self) -> dict[str, Any]:
        """``concurrent.record`` of this pool so far: each worker's start-up (from its spawn, a spare's
        included, until it had loaded its engines by its own clock; open when it never said so), the
        accuracy pass, against the timed rounds."""
        now = time.monotonic()
        starts = []
        for w in self.workers:
            if w.ready_at is None and w.proc.poll() is None:
                w.is_ready()  # has it finished meanwhile? (no wait)
            starts.append(Span(f"worker {w.index} start-up", w.spawned_at, w.ready_at))
        spares = [Span("a spare worker not taken, starting", w.spawned_at, None) for w in _SPARES]
        return record([*starts, *spares, *self.busy], self.timed, self.created_at, now)

    def kill(self) -> None:
        """Stop every worker now (an interrupt: their unfinished rounds are not wanted)."""
        for w in self.workers:
            if w.proc.poll() is None:
                w.proc.kill()
                w.proc.wait()

    def close(self) -> None:
        """Stop every worker: all are told first, so that they exit side by side (one after the other,
        7 workers took 0.45 s on the 2-core machine at load 2, after the budget). Workers never handed
        a load (started ahead, then the budget ended the run) are killed: one still starting would be
        waited for (a torch worker takes ~9 s on the H200), after the budget."""
        if self.workers:  # (a second close, after an interrupt's kill, keeps the first one's record)
            self.concurrent = self.concurrency()
        for w in self.workers[self.used:]:
            if w.proc.poll() is None:
                w.proc.kill()
        for w in self.workers:
            w.ask_to_close()
        for w in self.workers:
            w.close()
        self.workers.clear()
        self.used = 0


_SPARES: list[Worker] = []  # started by ``spares`` before the engines were known, not yet in a pool


def waiting_spares() -> list[Worker]:
    """The spares started and not yet taken by a pool (a copy)."""
    return list(_SPARES)


def take_spare(device: str | None) -> Worker | None:
    """A spare worker started for ``device`` and still alive, removed from the spares, or None."""
    for w in [w for w in _SPARES if w.device == device]:
        _SPARES.remove(w)
        if w.proc.poll() is None:
            return w
        w.close()  # died while waiting (its libraries failed to import): try the next
    return None


@contextmanager
def spares(n: int, backends: Sequence[str], device: str | None = None, *, lone: bool = False,
           engines: Mapping[str, Any] | None = None, autotune: bool = True) -> Iterator[None]:
    """Start ``n`` worker processes now, before the engines are known, importing ``backends``'
    libraries (no CUDA context: ``Backend.preload``) while this process finds or builds its engines: the
    pool's next ``spawn`` takes them. On the H200 a torch worker spent ~9 s starting, most of it
    importing torch and onnx2torch, after the parent had spent 4 s on the same imports; overlapping
    the two moves the first round ahead by as much. Only backends with such libraries have a
    ``preload`` (torch): for the others (ONNX Runtime imports in 0.1 s) spares would only compete with
    this process for the CPU (on the 2-core machine its launch went from 0.37 to 0.84 s), so none are
    started. ``lone`` (loads one at a time, ``serial_loads.LifeWorkers``): one spare whatever the backends, life 0's
    process, whose interpreter and trtprof's imports (0.5 s on the H200, 2026-12-04f, on the wall before life 0 could
    load its engines) then overlap the engines' lookup here; with ``engines`` (the engines the lookup will most likely
    find: ``compare.records.likely_records``) it is told them at once and loads them meanwhile too (``LifeWorkers``
    keeps it only where they are the ones found). Spares still unused on exit are killed (they hold nothing; one may
    still be importing)."""
    heavy = [name for name in backends if has_preload(name)]
    count = max(n, 0) if heavy else 0
    started = [Worker(-1, engines if lone and i == 0 else None, device, autotune, preload=heavy)
               for i in range(max(count, 1 if lone else 0))]
    _SPARES.extend(started)
    try:
        yield
    finally:
        for w in started:
            if w in _SPARES:  # never told its engines: nothing to finish, and it may still be importing torch
                _SPARES.remove(w)
                w.proc.kill()
                w.close()


if __name__ == "__main__":
    from trtprof.measure.worker_loop import main

    main()
