"""``run_sweep``: the cells of a spec, minus those already done, through an executor into the store."""
from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

from ..util.files import now_iso
from ..errors import BadInput
from .cell import Slot
from .spec import SweepSpec, model_json
from .store import SweepStore, merge


@dataclass(frozen=True)
class SweepOutcome:
    merged_path: Path
    merged: dict[str, Any]
    skipped: int  # cells already done (--resume)
    interrupted: bool


def read_interference(path: Path | None) -> dict[str, Any] | None:
    """The figures ``benchmarks/sweep_interference.py --out FILE`` wrote: ``{"gpu": {...}, "cpu": {...}}``."""
    if path is None:
        return None
    from ..measure.results import read_json

    data = read_json(Path(path))
    if not any(isinstance(data.get(k), dict) for k in ("gpu", "cpu")):
        raise BadInput("not a sweep_interference result (no 'gpu' or 'cpu' figures)", path=path)
    return data


def spec_json(spec: SweepSpec) -> dict[str, Any]:
    return {"source": spec.source, "kinds": list(spec.kinds), "engines": spec.engines,
            "gpu_types": list(spec.gpu_types),
            "models": [model_json(m) for m in spec.models]}


@dataclass(frozen=True)
class ExecutorSettings:
    """Where the cells run: ``name`` ``local`` (this host's ``slots``, each cell at most ``timeout_s``) or
    ``ray`` (the cluster at ``address``, ``ray_cpus_per_cell`` CPUs for a cell without a GPU)."""

    name: str = "local"
    slots: Sequence[Slot] = ()
    address: str | None = None
    ray_cpus_per_cell: int = 1
    timeout_s: float | None = None


def run_sweep(
    spec: SweepSpec,
    out_dir: Path,
    *,
    executor: ExecutorSettings = ExecutorSettings(),
    resume: bool = False,
    interference: Mapping[str, Any] | None = None,
    on_record: Callable[[dict[str, Any], int, int], None] | None = None,
) -> SweepOutcome:
    """Run what is not done yet through ``executor``; on Ctrl-C keep what finished, write the merged file,
    report it."""
    slots, address, timeout_s = executor.slots, executor.address, executor.timeout_s
    store = SweepStore(out_dir, resume=resume)
    cells = spec.cells()
    done = store.done_ids() if resume else set()
    todo = [c for c in cells if c.id not in done]
    ran = 0

    def record(rec: dict[str, Any]) -> None:
        nonlocal ran
        store.add(rec)
        ran += 1
        if on_record is not None:
            on_record(rec, ran, len(todo))

    started = time.perf_counter()
    interrupted = False
    if executor.name == "local":
        from .local import run_local

        info: dict[str, Any] = {"name": "local", "slots": [s.to_json() for s in slots]}
        try:
            info["prebuild"] = run_local(todo, slots, record, timeout_s=timeout_s)
        except KeyboardInterrupt:
            interrupted = True
    elif executor.name == "ray":
        from .ray_executor import run_ray

        info = {"name": "ray", "address": address}
        try:
            info = run_ray(todo, record, address=address, cpus_per_cell=executor.ray_cpus_per_cell)
        except KeyboardInterrupt:
            interrupted = True
    else:
        raise BadInput(f"--executor {executor.name!r}: choose local or ray")
    wall = time.perf_counter() - started
    info.update({"run_wall_s": round(wall, 3), "cells_run": ran, "cells_skipped": len(cells) - len(todo),
                 "interrupted": interrupted, "finished": now_iso()})
    runs = store.add_run(info)
    merged = merge(spec_json(spec), [c.to_json() for c in cells], store.latest(), executor=info,
                   interference=interference, runs=runs)
    path = store.write_merged(merged)
    return SweepOutcome(merged_path=path, merged=merged, skipped=len(cells) - len(todo), interrupted=interrupted)
