"""The worker side of ``measure.workers``: what runs inside a worker process (``python -m
trtprof.measure.workers``, whose ``__main__`` calls ``main`` here). It loads every arm once, then answers the
parent's commands (the protocol is in ``measure.workers``'s docstring) until ``close`` or until the parent is
gone. The parent side (``Worker``, ``WorkerPool``, spares) stays in ``measure.workers``.
"""

from __future__ import annotations

import os
import pickle
import signal
import sys
import time
from typing import Any, BinaryIO, Callable, Mapping, Sequence

from ..errors import TrtprofError
from .timing import TimingConfig

# The memory of compare's accuracy pass (system.memory.outputs_and_memory) when load 0's worker runs it.
WORKER_MEMORY_NOTE = ("measured in the accuracy pass (one inference per arm in load 0's worker process, before its "
                      "timing; every arm loaded in that process)")
# The parent's pid, given to a worker started from the parent's main thread: the worker asks Linux to
# SIGKILL it when that parent dies (PR_SET_PDEATHSIG), and checks between rounds elsewhere. Only from the
# main thread: Linux sends the signal when the *thread* that forked the worker ends, not the process.
PARENT_ENV = "TRTPROF_WORKER_PARENT"
PR_SET_PDEATHSIG = 1  # <linux/prctl.h>
# A folder (a developer's diagnostic, issue 42): each worker serves under cProfile and writes its statistics there when
# it ends (``worker-<start ns>-<pid>.prof``, pstats' format), so that where a life's seconds go on a GPU can be read.
# The profiler slows every Python call, the timed loop's too: such a run's times are not measurements.
PROFILE_ENV = "TRTPROF_WORKER_PROFILE"
# When this worker's start-up reached each step, by ``time.monotonic()`` (one clock for every process of the host):
# ``main`` (the interpreter up, trtprof's worker modules imported), ``preloaded`` (the backends' libraries imported
# ahead, ``preload``). Sent with ``ready``: the parent accounts a life's seconds with them (``serial_loads``).
MARKS: dict[str, float] = {}


def trim(runners: Mapping[str, Any]) -> None:
    """Give back device memory the runners cached but no longer use, before the worker goes idle.

    Loads take turns, so the other workers sit idle while one measures. A torch worker would keep
    what cuDNN's autotuning tried (large workspaces) in its caching allocator: on the H200 six workers
    of ResNet-50 at batch 256 held 22–33 GiB each and the seventh allocation ran out of memory. The
    next block's warm-up iterations take back what the model needs, before the timed ones."""
    for r in runners.values():
        release = getattr(r, "trim", None)
        if release is not None:
            release()


def shapes_ahead(shapes: Sequence[Mapping[str, tuple[int, ...]]]) -> list[Mapping[str, tuple[int, ...]]]:
    """The order the shapes are run ahead in: the first batch size's last, so that priming's first launch
    finds the kernels set up at its shape. ONNX Runtime's Conv on cuDNN 9 keeps one shape's execution plans
    (onnxruntime/core/providers/cuda/nn/conv.cc: ``last_x_dims``) and builds them again, on the host, at every
    change of shape (ResNet-50 on the H200: a first run at a shape cost 0.16-0.72 s per arm, 2026-12-03b). Run
    ahead at 1, 32, 256, then primed at 1, 32, 256, each arm builds six times; run ahead at 32, 256, 1, five."""
    return [*shapes[1:], *shapes[:1]]


def expect_shapes(runners: Mapping[str, Any], shapes: Sequence[Mapping[str, tuple[int, ...]]],
                  lines: dict[tuple[str, Any], list[str]], key: Any, own_sessions: bool = False) -> list[str]:
    """Tell each runner that takes it (``expect_shapes``) every batch size's shapes before priming; what the
    library wrote meanwhile is kept in ``lines`` under (arm, ``key``): the first batch size's feeds key, whose
    warm-up block carries it. ``own_sessions`` (a worker alone on the GPU): each shape may get a session of its
    own, so nothing runs ahead (onnxruntime-cuda). Returns a note per runner that failed (its first timed block
    meets the failure again)."""
    from ..util.thirdparty import third_party_warnings

    notes = []
    for label, runner in runners.items():
        expect = getattr(runner, "expect_shapes", None)
        if expect is None:
            continue
        try:
            with third_party_warnings(repeat=False) as caught:
                expect(list(shapes), own_sessions=own_sessions)
        except Exception as err:  # noqa: BLE001 - it saves a session per shape; the timed blocks report failures
            notes.append(f"{label}: shapes not run ahead ({type(err).__name__}: {str(err).strip()[:200]})")
            continue
        if caught:
            lines[(label, key)] = lines.get((label, key), []) + list(caught)
    return notes


# What a line written while the arms' first runs ran side by side (``first_runs_side_by_side``) says after it: a
# line every arm gets where life 0, priming one arm at a time, saw no arm write it; the arms that wrote it there
# get it with the other.
NOT_TOLD_APART = " (written while the arms' first runs ran side by side: not told apart by arm)"
AS_IN_LIFE_0 = " (written while the arms' first runs ran side by side: given to the arms that wrote it in life 0)"


def first_runs_side_by_side(runners: Mapping[str, Any], shapes: Mapping[str, tuple[int, ...]],
                            known: Mapping[str, Sequence[str]] | None) -> dict[str, list[str]]:
    """Each runner's first run at ``shapes`` (``prepare``: ONNX Runtime's eager run on zeros, where cuDNN's plans
    are built on the host; no graph is captured) in a thread of its own, all joined before returning: the
    captures that follow stay one at a time (a CUDA graph's capture must not meet another thread's allocations).
    What the library wrote meanwhile cannot be told apart by arm (ONNX Runtime's default logger names no session):
    a line goes to the arms that wrote it at these shapes in ``known`` (life 0's, primed one arm at a time), marked
    ``AS_IN_LIFE_0``; a line no arm wrote there goes to every arm, marked ``NOT_TOLD_APART``. Returns the lines
    by arm; a runner's failure is raised once every thread has ended."""
    from concurrent.futures import ThreadPoolExecutor

    from ..util.thirdparty import third_party_warnings

    with third_party_warnings(repeat=False) as caught:
        with ThreadPoolExecutor(max(len(runners), 1), thread_name_prefix="first-run") as pool:
            done = [pool.submit(r.prepare, dict(shapes)) for r in runners.values()]
        for future in done:
            future.result()
    lines: dict[str, list[str]] = {label: [] for label in runners}
    for line in caught:
        wrote = [label for label in runners if known is not None and line in (known.get(label) or ())]
        for label in wrote or runners:
            lines[label].append(line + (AS_IN_LIFE_0 if wrote else NOT_TOLD_APART))
    return lines


def arm_facts(runner: Any, autotune: bool | None) -> dict[str, Any]:
    """``ArmFacts``'s fields as a dict: the worker runs as ``__main__``, whose classes the parent cannot unpickle."""
    return {"inputs": tuple(getattr(runner, "inputs", ())), "outputs": tuple(getattr(runner, "outputs", ())),
            "device": str(getattr(runner, "device", "cpu")), "autotune": autotune,
            "primes_beside_others": bool(getattr(runner, "primes_beside_others", False))}


def accuracy_outputs(runners: Mapping[str, Any], load_rss: Mapping[str, tuple[int | None, int | None]],
                     batches: Sequence[tuple[int, Mapping[str, tuple[int, ...]], int]], seed: int,
                     int_range: tuple[int, int], made: dict[Any, dict[str, Any]] | None = None,
                     kept_lines: tuple[dict[tuple[str, Any], list[str]], Sequence[str]] | None = None,
                     ) -> dict[int, tuple[dict[str, Any], dict[str, Any]]]:
    """compare's accuracy pass in this worker, as the parent ran it before (``compare.measuring.load_reference``
    without a pool): per batch size the seeded random inputs of the baseline's specs (``make_inputs``:
    the very arrays the parent would make), every arm once through ``Runner.infer`` (host in, host out),
    the memory in use read around each inference (``outputs_and_memory``); an allocation failure is
    ``OutOfMemory`` naming the batch. Idle memory is given back after (``trim``). ``made`` (the worker's inputs
    made for priming, by ``feeds_key``): the inputs are taken from there when priming made them, and kept there
    when they were made here, so that priming and the first load's ``feeds`` do not make them again. ``kept_lines``
    ((arm, feeds key) → lines, the worker's ``prime_lines``; the arms): what the library wrote at those arms' runs is
    kept there, as priming keeps what it wrote at their first runs (the runs that set a shape
    up, made here instead of in priming)."""
    import numpy as np

    from ..model.inputs import make_inputs
    from ..system import preflight
    from ..system.memory import outputs_and_memory
    from ..util.thirdparty import third_party_warnings

    baseline = next(iter(runners.values()))
    labels = {id(r): label for label, r in runners.items()}
    out = {}

    def run(runner: Any, feeds: Mapping[str, Any], key: Any) -> dict[str, Any]:
        label = labels[id(runner)]
        lines, arms = kept_lines or ({}, ())
        if label not in arms:
            return {name: np.asarray(value) for name, value in runner.infer(feeds).items()}
        with third_party_warnings(repeat=False) as caught:
            ran = {name: np.asarray(value) for name, value in runner.infer(feeds).items()}
        lines[(label, key)] = lines.get((label, key), []) + list(caught)
        return ran

    for batch, shapes, needed in batches:
        with preflight.allocation_guard(batch, needed):
            key = feeds_key(shapes, seed, int_range)
            feeds = made.get(key) if made is not None else None
            if feeds is None:
                feeds = make_inputs(baseline.inputs, shapes, seed=seed, int_range=int_range)
                if made is not None:
                    made[key] = feeds
            outputs, memory = outputs_and_memory(dict(runners), dict(load_rss),
                                                 lambda r, f=feeds, k=key: run(r, f, k))
        out[batch] = (outputs, {arm: {**m, "measured_during": WORKER_MEMORY_NOTE} for arm, m in memory.items()})
        del feeds
    trim(runners)
    return out


def feeds_key(shapes: Mapping[str, Any], seed: int, int_range: Any) -> tuple[Any, ...]:
    """What identifies a batch size's seeded inputs (``make_inputs``' arguments but the specs)."""
    return (tuple(sorted((k, tuple(int(d) for d in v)) for k, v in dict(shapes).items())), int(seed), tuple(int_range))


def die_with_parent() -> int | None:
    """Make this worker end with the process that started it, even in the middle of a block of a million
    iterations (a worker that outlives a kill -9 of its compare holds a core and its memory for minutes).
    Linux: PR_SET_PDEATHSIG with SIGKILL, then a check that the parent did not die before it was set.
    Returns the parent's pid (None when not started from a parent's main thread), for ``parent_gone``."""
    text = os.environ.get(PARENT_ENV, "")
    if not text.isdigit():
        return None
    parent = int(text)
    if sys.platform.startswith("linux"):
        import ctypes

        try:
            ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
        except (OSError, AttributeError):  # no prctl in this libc: the check between rounds remains
            pass
    if parent_gone(parent):
        os._exit(1)
    return parent


def parent_gone(parent: int | None) -> bool:
    """The worker was re-parented (to init or a subreaper): the process that started it is gone."""
    return parent is not None and os.getppid() != parent


class _WorkerState:
    """What one worker holds between commands: its runners (every arm loaded once), their load RSS and
    the current feeds; one method per command of the protocol (``measure.workers``'s docstring)."""

    def __init__(self, parent: int | None) -> None:
        self.parent = parent
        self.runners: dict[str, Any] = {}
        self.feeds: dict[str, Any] = {}
        self.load_rss: dict[str, tuple[int | None, int | None]] = {}
        self.made: dict[Any, dict[str, Any]] = {}  # feeds key → the inputs priming made (used once, by ``feeds``)
        self.prime_lines: dict[tuple[str, Any], list[str]] = {}  # (arm, feeds key) → what the library wrote priming
        self.notes_before_priming: list[str] = []  # the accuracy pass's ``expect_shapes`` (alone): priming's notes
        self.shared: Any = None  # where the parent's seeded inputs are (``shared_inputs.read``'s locator), or None
        self.feeds_key: Any = None

    def init(self, records: Mapping[str, Any], autotune: bool) -> tuple[str, Any]:
        from ..backends.base import set_autotune
        from ..system.memory import rss_bytes
        from .bench import load_runner

        facts, arms_s = {}, {}
        asked = time.monotonic()
        for label, record in records.items():
            before, started = rss_bytes(), time.monotonic()
            self.runners[label] = load_runner(record, log_warnings=True)  # the blocks capture them
            self.load_rss[label] = (before, rss_bytes())
            facts[label] = arm_facts(self.runners[label], set_autotune(self.runners[label], autotune))
            arms_s[label] = round(time.monotonic() - started, 4)
        return "ready", {"facts": facts, "ready_at": time.monotonic(), "init_at": asked, "marks": dict(MARKS),
                         "arms_s": arms_s}

    def outputs(self, batches: Any, seed: int, int_range: Any, alone: bool = False) -> tuple[str, Any]:
        """compare's accuracy pass (``accuracy_outputs``). ``alone`` (life 0 of lone loads, which primes after it):
        the runners that prime are told the shapes with their own sessions first (``expect_shapes``), so that each
        arm runs each shape once on the session that will time it, as priming would (ONNX Runtime builds a
        shape's cuDNN plans once, not again for priming)."""
        from ..util.thirdparty import third_party_warnings

        # a worker whose runners are primed shares the seeded inputs with its priming (``made``)
        opted = {label: r for label, r in self.runners.items() if getattr(r, "primes_beside_others", False)}
        primed = bool(opted)
        if alone and batches:
            shapes = [dict(s) for _, s, _ in batches]
            self.notes_before_priming = expect_shapes(opted, shapes, self.prime_lines,
                                                      feeds_key(shapes[0], seed, int_range), own_sessions=True)
        # the lines of arms whose shapes were set up here go with their priming's (``prime_lines``); the others', the
        # same as their timed blocks' first runs write again: kept from there, not in this stderr
        with third_party_warnings():
            passed = accuracy_outputs(self.runners, self.load_rss, batches, seed, int_range,
                                      made=self.made if primed else None,
                                      kept_lines=(self.prime_lines, list(opted)) if alone else None)
        return "ok", {"outputs": passed, "done_at": time.monotonic()}

    def share(self, locator: Any) -> tuple[str, Any]:
        """Where the parent's seeded inputs are (``LifeWorkers.tell_shared``): read from there, not made here."""
        self.shared = locator
        return "ok", None

    def seeded(self, shapes: Mapping[str, tuple[int, ...]], seed: int, int_range: Any) -> dict[str, Any]:
        """A batch's seeded inputs: the ones made for it here before (``made``), else the parent's (``shared``,
        mapped read-only), else made now (``make_inputs``) — the same arrays each way."""
        from ..model.inputs import make_inputs
        from .shared_inputs import read

        key = feeds_key(shapes, seed, int_range)
        specs = next(iter(self.runners.values())).inputs
        found = self.made.get(key)
        if found is None:
            found = read(self.shared, key, specs, shapes)
        return found if found is not None else make_inputs(specs, shapes, seed=seed, int_range=int_range)

    def set_feeds(self, shapes: Any, seed: int, int_range: Any, fixed: Any) -> tuple[str, Any]:
        # the device state kept for each batch size (priming's, or the first block's) stays until the worker's end
        self.feeds_key = None if fixed is not None else feeds_key(shapes, seed, int_range)
        if fixed is not None:
            self.feeds = dict(fixed)
        else:
            self.feeds = self.seeded(shapes, seed, int_range)
            self.made.pop(self.feeds_key, None)  # made by priming: used once, here
        return "ok", None

    def prime(self, batches: Any, seed: int, int_range: Any, config: TimingConfig,
              alone: bool = False,
              side_by_side: Mapping[int, Mapping[str, Sequence[str]]] | None = None) -> tuple[str, Any]:
        """Before any timing, the runners that may (``primes_beside_others``: their first run at a shape
        times no kernels, so other workers priming beside them change nothing they keep) are set up and
        launched once at each batch size's shapes on that batch's inputs (``timing.prime_launch``); the
        inputs are kept for ``feeds``, what the library wrote for that batch's warm-up block. A failure stops
        priming with its reason (the timed block meets it again, in its place). ``alone``: no other worker holds
        the GPU while this one lives (lone loads), so each batch size may have a session of its own (``expect_shapes``'
        ``own_sessions``: ONNX Runtime's Conv then never builds its cuDNN plans again for a change of shape, and no
        shape has to run ahead). ``side_by_side`` (batch size → arm → the lines life 0 kept; None: one arm at a
        time): at each batch size the arms' first runs are made in threads first (``first_runs_side_by_side``, what
        the library wrote given to arms by those lines); the captures then follow one at a time. Returns the batch
        sizes primed, the seconds per part and what each arm's priming kept per batch size (``lines``: a later life's
        ``side_by_side``)."""
        from ..util.thirdparty import third_party_warnings
        from .timing import prime_launch

        opted = {label: r for label, r in self.runners.items() if getattr(r, "primes_beside_others", False)}
        primed: list[int] = []
        notes, self.notes_before_priming = list(self.notes_before_priming), []
        asked_beside = side_by_side is not None
        first = next(iter(self.runners.values()), None)
        if not opted or first is None:
            return "ok", {"primed": primed, "notes": notes, "done_at": time.monotonic()}
        started = time.monotonic()
        told = [shapes for _, shapes in batches]  # alone: the first told keeps the load's session, nothing runs ahead
        notes += expect_shapes(opted, told if alone else shapes_ahead(told), self.prime_lines,
                               feeds_key(batches[0][1], seed, int_range) if batches else None, own_sessions=alone)
        # expect_shapes' seconds: its eager runs, or (alone) the sessions of their own it opened
        seconds = {"sessions opened" if alone else "shapes run ahead": round(time.monotonic() - started, 4)}
        for batch, shapes in batches:
            started = time.monotonic()
            key = feeds_key(shapes, seed, int_range)
            if side_by_side is not None:
                if self.first_runs_beside(opted, batch, shapes, key, side_by_side, notes):
                    seconds[f"batch {batch} side by side"] = round(time.monotonic() - started, 4)
                else:  # this batch size's first runs and the rest of this life one arm at a time
                    side_by_side = None
            try:
                feeds = self.seeded(shapes, seed, int_range)
                for label, runner in opted.items():
                    with third_party_warnings(repeat=False) as caught:
                        prime_launch(runner, feeds, config)
                    self.prime_lines[(label, key)] = self.prime_lines.get((label, key), []) + list(caught)
            except Exception as err:  # noqa: BLE001 - priming saves time; the timed block reports the failure
                notes.append(f"batch {batch}: not primed ({type(err).__name__}: {str(err).strip()[:200]})")
                break
            self.made[key] = feeds
            primed.append(batch)
            seconds[f"batch {batch}"] = round(time.monotonic() - started, 4)
        trim(self.runners)
        lines = {batch: {label: list(self.prime_lines.get((label, feeds_key(shapes, seed, int_range)), []))
                         for label in opted} for batch, shapes in batches}
        return "ok", {"primed": primed, "notes": notes, "done_at": time.monotonic(), "seconds": seconds,
                      "lines": lines, "side_by_side": asked_beside,
                      "side_by_side_failed": asked_beside and side_by_side is None}

    def first_runs_beside(self, opted: Mapping[str, Any], batch: int, shapes: Mapping[str, tuple[int, ...]], key: Any,
                          known: Mapping[int, Mapping[str, Sequence[str]]], notes: list[str]) -> bool:
        """``first_runs_side_by_side`` at one batch size, its lines kept with that batch's; False (and a note) where
        it failed: priming then goes on one arm at a time, whose first launch meets any lasting failure again."""
        try:
            wrote = first_runs_side_by_side(opted, shapes, known.get(batch))
        except Exception as err:  # noqa: BLE001 - priming saves time; one arm at a time is the fallback
            notes.append(f"batch {batch}: first runs side by side failed ({type(err).__name__}: "
                         f"{str(err).strip()[:200]}); one arm at a time from here")
            return False
        for label, kept in wrote.items():
            self.prime_lines[(label, key)] = self.prime_lines.get((label, key), []) + kept
        return True

    def warm(self, config: TimingConfig) -> tuple[str, Any]:
        from .interleave import measure_block, with_load_warnings

        warm = {}
        for label, r in self.runners.items():
            samples = with_load_warnings(measure_block(r, self.feeds, config), r)
            primed_lines = self.prime_lines.pop((label, self.feeds_key), [])
            if primed_lines:  # written at this shape's first runs, made while priming
                samples.run_warnings = primed_lines + list(samples.run_warnings)
            warm[label] = samples
        trim(self.runners)
        return "ok", warm

    def rounds(self, start: int, count: int, config: TimingConfig, order: Sequence[str]) -> tuple[str, Any] | None:
        """The rounds' Samples, or None when the parent is gone (the worker then stops)."""
        from .interleave import measure_block, round_order

        done = []
        for j in range(start, start + count):
            if parent_gone(self.parent):
                return None
            done.append({n: measure_block(self.runners[n], self.feeds, config) for n in round_order(order, j)})
        trim(self.runners)
        return "ok", done

    def handle(self, command: str, args: Sequence[Any]) -> tuple[str, Any] | None:
        """The reply to one command; None to stop serving (``close``, or the parent gone)."""
        handlers: dict[str, Callable[..., tuple[str, Any] | None]] = {
            "init": self.init, "outputs": self.outputs, "feeds": self.set_feeds, "warm": self.warm,
            "rounds": self.rounds, "prime": self.prime, "shared": self.share}
        if command == "close":
            return None
        if command not in handlers:
            return "error", ("WorkerFailed", f"unknown command {command!r}")
        try:
            return handlers[command](*args)
        except TrtprofError as err:
            return "error", (type(err).__name__, str(err))
        except Exception as err:  # noqa: BLE001 - every failure goes back to the parent, named
            return "error", ("WorkerFailed", f"{type(err).__name__}: {err}")

    def close(self) -> None:
        for r in self.runners.values():
            r.close()


def serve(inp: BinaryIO, out: BinaryIO, parent: int | None = None) -> None:
    """The worker loop: load every arm once, then answer commands until ``close`` (or until the parent
    is gone, checked between rounds where PR_SET_PDEATHSIG is not there). Blocks of a batch size share the
    device state of the runners that keep it, set up by priming or by the first block (``measure.kept_launch``)."""
    from .kept_launch import LaunchKeeper

    with LaunchKeeper() as keeper:  # its end frees the kept buffers and launches before the runners they belong to
        state = _WorkerState(parent)
        try:
            while True:
                try:
                    message = pickle.load(inp)
                except EOFError:
                    return
                answer = state.handle(message[0], message[1:])
                if answer is None:
                    return
                pickle.dump(answer, out, protocol=pickle.HIGHEST_PROTOCOL)
                out.flush()
        finally:
            keeper.clear()
            state.close()


def backend_preload(name: str) -> Callable[[], None] | None:
    """Backend ``name``'s ``preload`` (the libraries a spare worker can import ahead), or None: it has
    none, or it is unknown or not part of this build (the build refuses it, with its reason)."""
    from .. import backends

    try:
        warm = getattr(backends.get(name), "preload", None)
    except TrtprofError:
        return None
    return warm if callable(warm) else None


def has_preload(name: str) -> bool:
    """Does backend ``name`` have libraries a spare worker can import ahead (``Backend.preload``)?"""
    return backend_preload(name) is not None



def preload(names: Sequence[str]) -> None:
    """Import what the named backends' runners will need (``Backend.preload``, where a backend has
    one), before ``init`` names the engines. A failure here is not reported: ``init`` meets it again,
    with the engine that needs it, and answers it named."""
    for name in names:
        try:
            warm = backend_preload(name)
            if warm is not None:
                warm()
        except Exception:  # noqa: BLE001 - reported by init, where it matters
            pass


def profiled(folder: str, run: Callable[[], None]) -> None:
    """``run()`` under cProfile (``PROFILE_ENV``), its statistics written to a new file in ``folder`` when it ends,
    however it ends; a folder that cannot be written loses the statistics, never the worker's answers."""
    import cProfile

    profile, started = cProfile.Profile(), time.time_ns()
    try:
        profile.runcall(run)
    finally:
        try:
            os.makedirs(folder, exist_ok=True)
            profile.dump_stats(os.path.join(folder, f"worker-{started}-{os.getpid()}.prof"))
        except OSError as err:
            print(f"trtprof worker: {PROFILE_ENV}: statistics not written ({err})", file=sys.stderr)


def main(argv: Sequence[str] | None = None) -> None:
    args = list(sys.argv[1:] if argv is None else argv)
    parent = die_with_parent()
    # Ctrl-C in a terminal reaches the whole process group: the parent decides what to keep and stops
    # its workers itself (WorkerPool.kill), so a worker must not die first and look like a failure.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    out = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)  # anything a library prints goes to stderr, never into the pickle channel
    sys.stdout = sys.stderr
    MARKS["main"] = time.monotonic()
    if args[:1] == ["--preload"] and len(args) > 1:
        preload([n for n in args[1].split(",") if n])
    MARKS["preloaded"] = time.monotonic()
    folder = os.environ.get(PROFILE_ENV, "")
    if folder:
        profiled(folder, lambda: serve(sys.stdin.buffer, out, parent))
    else:
        serve(sys.stdin.buffer, out, parent)
    # Nothing is left to clean up once serve has closed the runners: skip the interpreter's teardown of
    # numpy, onnxruntime, torch (0.4 s for 6 workers on the loaded 2-core machine, after the time budget).
    sys.stderr.flush()
    os._exit(0)

