"""Loads whose worker processes never live at the same time (``compare --serial-loads``).

Why: on the H200 (2026-12-04, ``benchmarks/results/ort_cuda-H200-2026-12-04/``) a process replays a small CUDA
graph faster once any other process has created a CUDA context while it lives — a bare ``cudaFree(0)`` does it,
and the process stays fast after the other one exits: ResNet-50 at batch 1 through ONNX Runtime's CUDA EP,
0.839 → 0.756 ms (fp16) and 2.243 → 2.175 ms (fp32), the same kernels with shorter gaps between them. compare's
default loads are worker processes started side by side, so all but the last one started measure in that
state, while a user's own loop, alone on the GPU, does not. Here each load is a worker process started after the
previous one exited, that loads its engines, warms up, runs all of its rounds and exits: every load is a lone
process, as the user's loop is (six such loads read 2.242-2.245 / 0.835-0.840 ms; the independent ORT loop
2.231 / 0.833 back to back).

What it costs: one process start and engine load per load and batch size, one after another (nothing side by
side), and the rounds of a load are no longer interleaved in time with the other loads' (drift between loads
then falls into the load-to-load spread, which the interval already carries). ``SerialLoop`` is
``interleave.RoundLoop`` with that order: a load's rounds are decided when it opens, and a closed load gets no more.
"""
from __future__ import annotations

import time
from typing import Any, Callable, Mapping, Sequence

from .interleave import FLOOR_LOADS, FLOOR_ROUNDS, InterleavedOutcome, Load, LoopHooks, RoundPlan, \
    RoundLoop, run_interleaved
from .budget import BatchWindow
from .workers import Worker, WorkerLoad


class SerialLoop(RoundLoop):
    """``RoundLoop`` for loads that live one at a time: each opens after the one before it closed, runs its rounds
    and closes; more loads (not more rounds) follow the minimum while the interval is undecided and one fits."""

    def open_minimum(self) -> None:
        plan = self.plan
        medians_ms, wanted, design_round_s = self.first_load()
        later_s = (plan.min_loads - 1) * self.load_open_s  # the minimum's other loads, opened one by one
        self.size_blocks(medians_ms, wanted, loads=plan.min_loads, later_s=later_s)
        self.run_and_close(self.rounds_for(opened=True))
        while len(self.loads) < plan.min_loads:
            if len(self.loads) >= FLOOR_LOADS and self.load_open_s + FLOOR_ROUNDS * self.round_s > self.remaining():
                break
            rounds = self.rounds_for(opened=False)
            self.add_load()
            if len(self.loads) == 2:
                self.refit_window(design_round_s)
            self.run_and_close(rounds)
        self.note_floor_overrun(min(self.done))

    def rounds_for(self, opened: bool) -> int:
        """Rounds for the next load (``opened``: the newest, already open): the minimum's when they and the
        minimum's loads still to open after it fit what is left, else the floor's (two round pairs for a plan of
        one load: its pairs are the interval's units)."""
        plan = self.plan
        floor = FLOOR_ROUNDS if plan.min_loads >= FLOOR_LOADS else 2 * FLOOR_ROUNDS
        after = max(plan.min_loads - len(self.loads) - (0 if opened else 1), 0)
        load_s = self.load_open_s + plan.min_rounds * self.round_s
        needed = (0.0 if opened else self.load_open_s) + plan.min_rounds * self.round_s + after * load_s
        return max(plan.min_rounds, floor) if needed <= self.remaining() else floor

    def run_and_close(self, rounds: int) -> None:
        """The newest load's ``rounds``, then it is closed (its process exits before the next one starts)."""
        index = len(self.loads) - 1
        self.run(index, rounds)
        self.loads[index].close()

    def next_sweep(self) -> tuple[list[int], bool]:
        """No rounds for a closed load: another load with the minimum's rounds where one fits, else nothing."""
        cost = self.load_open_s + self.plan.min_rounds * self.round_s
        if len(self.loads) < self.plan.max_loads and cost <= self.remaining():
            return [0] * len(self.done), True
        return [], False

    def add_one_more(self) -> None:
        self.add_load()
        self.run_and_close(self.plan.min_rounds)


def run_serial(names: Sequence[str], open_load: Callable[[int], Load], plan: RoundPlan, *,
               clock: Callable[[], float] = time.perf_counter, window: BatchWindow | None = None,
               hooks: LoopHooks = LoopHooks()) -> InterleavedOutcome:
    """``interleave.run_interleaved`` with ``SerialLoop``: loads one after another, each alone. A load that
    ``open_load`` gives must be closable more than once (the loop closes each after its rounds, and all on return)."""
    return run_interleaved(names, open_load, plan, clock=clock, window=window, hooks=hooks, loop_class=SerialLoop)


class LoneLoad(WorkerLoad):
    """A worker process of its own for one load at one batch size: closing the load ends the process (waited
    for, so that its CUDA context is gone before the next load's process starts); closing twice is harmless."""

    def close(self) -> None:
        self.worker.close()


class LoneWorkers:
    """``open_load`` for ``SerialLoop``: load ``i`` is a fresh worker process, started only once every worker
    this object started before it has exited. No worker is started ahead (a process starting, or creating its
    CUDA context, beside a timed load is what this mode avoids)."""

    def __init__(self, records: Mapping[str, Any], device: str | None = None, autotune: bool = True) -> None:
        self.records, self.device, self.autotune = dict(records), device, autotune
        self.started: list[Worker] = []  # every worker started here, in order; all but the newest have exited
        self.concurrent: dict[str, Any] = {}  # as WorkerPool's: nothing of this run runs beside a timed load

    def load(self, index: int, shapes: Mapping[str, tuple[int, ...]], seed: int, int_range: tuple[int, int],
             fixed: Mapping[str, Any] | None = None) -> LoneLoad:
        self.close()
        worker = Worker(index, self.records, self.device, self.autotune)
        self.started.append(worker)
        worker.wait_ready()
        return LoneLoad(worker, (dict(shapes), seed, int_range, fixed))

    def close(self) -> None:
        """The newest worker ended (waited for): the ones before it were ended when it started."""
        if self.started:
            self.started[-1].close()

    def kill(self) -> None:
        for w in self.started:
            if w.proc.poll() is None:
                w.proc.kill()
                w.proc.wait()
