"""The local executor: one worker per GPU (or N CPU workers), each running its cells one at a time.

Why one worker per GPU and never two: two processes on one GPU time-slice its SMs, so neither
measures what the model does alone. Why CPU cores are partitioned too: a GPU cell's host side
(enqueue, copies, Python) runs on cores, and two workers sharing cores disturb each other's launch
latency. On a CPU-only host the default is ONE worker: two CPU workers share memory bandwidth, the
last-level cache and the package's turbo budget, so a cell measured beside another is not the cell
alone (benchmarks/sweep_interference.py measures by how much); ``--workers N`` trades that for
wall time and records who ran beside whom.
"""
from __future__ import annotations

import os
import queue
import threading
import time
from typing import Any, Callable, Mapping, Sequence

from ..errors import BadInput
from .cell import CellRun, Interrupted, Processes, Slot, build_model, cell_record, run_cell
from .spec import Cell


def available_cpus() -> list[int]:
    if hasattr(os, "sched_getaffinity"):
        return sorted(os.sched_getaffinity(0))
    return list(range(os.cpu_count() or 1))


def partition(cores: Sequence[int], parts: int) -> list[tuple[int, ...]]:
    """Contiguous, disjoint core sets whose sizes differ by at most one and sum to all cores."""
    if parts <= 0 or parts > len(cores):
        raise ValueError(f"cannot split {len(cores)} cores into {parts} parts")
    size, extra = divmod(len(cores), parts)
    out, start = [], 0
    for i in range(parts):
        n = size + (1 if i < extra else 0)
        out.append(tuple(cores[start:start + n]))
        start += n
    return out


def visible_gpus(environ: Mapping[str, str] | None = None) -> list[dict[str, Any]]:
    """NVML's GPUs, narrowed to the parent's CUDA_VISIBLE_DEVICES (indices or UUIDs) when it is set."""
    from ..system.nvml import describe_gpus

    gpus = describe_gpus()
    env = os.environ if environ is None else environ
    visible = env.get("CUDA_VISIBLE_DEVICES")
    if visible is None:
        return gpus
    wanted = [v.strip() for v in visible.split(",") if v.strip()]
    out = []
    for w in wanted:
        for g in gpus:
            if (w.isdigit() and g.get("index") == int(w)) or (g.get("uuid") and str(g["uuid"]).startswith(w)):
                out.append(g)
                break
    return out


def local_slots(gpus_arg: str | None, workers: int | None, *, gpus: list[dict[str, Any]] | None = None,
                cores: Sequence[int] | None = None) -> list[Slot]:
    """``--gpus all|none|0,1`` and ``--workers N`` → the worker slots, cores split between them."""
    gpus = visible_gpus() if gpus is None else gpus
    cores = available_cpus() if cores is None else list(cores)
    choice = (gpus_arg or "all").strip().lower()
    if choice in ("none", "cpu") or (choice == "all" and not gpus):
        n = 1 if workers is None else workers
        if n < 1 or n > len(cores):
            raise BadInput(f"--workers {n}: this host has {len(cores)} usable CPU core(s); give 1 to {len(cores)}")
        return [Slot(name=f"cpu{i}", cpus=part, hide_gpus=bool(gpus)) for i, part in enumerate(partition(cores, n))]
    if choice == "all":
        chosen = list(gpus)
    else:
        try:
            indices = [int(t) for t in choice.split(",") if t.strip()]
        except ValueError as err:
            raise BadInput(f"--gpus {gpus_arg!r}: expected all, none, or GPU indices like 0,1") from err
        by_index = {g.get("index"): g for g in gpus}
        missing = [i for i in indices if i not in by_index]
        if missing or not indices:
            have = ", ".join(str(g.get("index")) for g in gpus) or "none"
            raise BadInput(f"--gpus {gpus_arg!r}: no GPU {missing[0] if missing else ''} here (NVML sees: {have})")
        chosen = [by_index[i] for i in dict.fromkeys(indices)]
    if workers is not None and workers != len(chosen):
        raise BadInput(f"--workers {workers}: on GPUs there is one worker per GPU ({len(chosen)} chosen); "
                       "pick GPUs with --gpus")
    parts = partition(cores, len(chosen)) if len(cores) >= len(chosen) else [None] * len(chosen)
    return [Slot(name=f"gpu{g.get('index')}", gpu=g, cpus=part) for g, part in zip(chosen, parts)]


def _pool(items: Sequence[Any], slots: Sequence[Slot], fn: Callable[[Any, Slot], Any], processes: Processes) -> None:
    """Run ``fn(item, slot)`` for every item on the first free slot (one thread per slot).

    Ctrl-C: the running children are stopped, their half-done items dropped, and KeyboardInterrupt
    propagates after every worker thread has ended. A bug in ``fn`` stops the pool and is re-raised."""
    todo: "queue.Queue[Any]" = queue.Queue()
    for item in items:
        todo.put(item)
    errors: list[BaseException] = []

    def work(slot: Slot) -> None:
        while not processes.stopping.is_set():
            try:
                item = todo.get_nowait()
            except queue.Empty:
                return
            try:
                fn(item, slot)
            except Interrupted:
                return
            except BaseException as err:  # noqa: BLE001 - a bug here must stop the sweep, not hang it
                errors.append(err)
                processes.stop_all()
                return

    threads = [threading.Thread(target=work, args=(slot,), name=f"sweep-{slot.name}", daemon=True) for slot in slots]
    for t in threads:
        t.start()
    try:
        for t in threads:
            while t.is_alive():
                t.join(timeout=0.2)
    except KeyboardInterrupt:
        processes.stop_all()
        for t in threads:
            t.join()
        raise
    if errors:
        raise errors[0]


def run_local(cells: Sequence[Cell], slots: Sequence[Slot], on_record: Callable[[dict[str, Any]], None], *,
              timeout_s: float | None = None) -> list[dict[str, Any]]:
    """Pre-build every model once (spread over the slots), then every cell on the first free slot;
    ``on_record`` as each cell finishes (from the worker's thread). Returns the pre-build summary.

    Why a separate pre-build: a build inside each cell would be a cache hit after the first, but it
    still costs a process start and the backend's import per cell, time that one GPU and two GPUs
    pay alike and that would blur what the second GPU buys. A model whose build failed has its cells
    recorded as failed with the build's error, without running them."""
    processes = Processes()
    firsts: dict[tuple[str, ...], Cell] = {}
    for cell in cells:
        firsts.setdefault(tuple(cell.build_argv()), cell)
    builds: dict[tuple[str, ...], tuple[Slot, float, dict[str, Any]]] = {}

    def build(cell: Cell, slot: Slot) -> None:
        t0 = time.time()
        builds[tuple(cell.build_argv())] = (slot, t0, build_model(cell, slot, processes=processes, timeout_s=timeout_s))

    _pool(list(firsts.values()), slots, build, processes)
    summary = []
    runnable = []
    for key, first in firsts.items():
        slot, t0, res = builds[key]
        summary.append({"model": first.model.stem, "backend": first.model.backend, "slot": slot.name,
                        "seconds": round(sum(a["seconds"] for a in res["attempts"]), 3), "ok": res["ok"],
                        "error": res["error"]})
    for cell in cells:
        slot, t0, res = builds[tuple(cell.build_argv())]
        if res["ok"]:
            runnable.append(cell)
        else:
            on_record(cell_record(cell, slot, CellRun(attempts=res["attempts"], result=None, log_text=res["log"],
                                                      started_epoch=t0)))
    _pool(runnable, slots, lambda cell, slot: on_record(run_cell(cell, slot, processes=processes,
                                                                  timeout_s=timeout_s, build=False)), processes)
    return summary
