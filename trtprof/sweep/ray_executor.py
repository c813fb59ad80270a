"""The Ray executor: every cell a Ray task (``num_gpus=1``, or ``num_cpus`` on a CPU-only cluster).

Why Ray rather than a scheduler of our own: it already knows each node's GPUs (and sets
``CUDA_VISIBLE_DEVICES`` per task), can pin a task to a GPU type through the
``accelerator_type:<TYPE>`` resource it advertises for NVIDIA GPUs (or one given with
``ray start --resources``), retries tasks whose worker or node died (``max_retries``), and lets the
driver take results in completion order (``ray.wait``). The task itself is the same ``run_cell``
the local executor uses: a ``trtprof build`` + ``compare`` subprocess on the node, so every node needs
trtprof and the model files at the same paths (a shared filesystem, or the same checkout).
"""
from __future__ import annotations

import os
from typing import Any, Callable, Sequence

from ..errors import BadInput, MissingDependency
from .cell import CellRun, Slot, cell_record, run_cell
from .spec import Cell

TASK_RETRIES = 1  # a task whose worker/node died is run once more, then recorded as failed
POLL_S = 0.5


def _ray() -> Any:
    try:
        import ray
    except ImportError as err:
        raise MissingDependency("ray", "ray", why="--executor ray") from err
    return ray


def ray_cell_task(cell: Cell, use_gpu: bool) -> dict[str, Any]:
    """Runs on a Ray worker: find the GPU Ray gave this task (by index → NVML identity), run the cell."""
    import ray

    ctx = ray.get_runtime_context()
    node = ctx.get_node_id()
    gpu = None
    if use_gpu:
        from ..system.nvml import describe_gpus

        ids = [str(i) for i in ray.get_gpu_ids()]
        if ids:
            # Ray's id is what the node's CUDA_VISIBLE_DEVICES listed: an index (NVML's order, as
            # CUDA_DEVICE_ORDER=PCI_BUS_ID) or a UUID.
            mine = ids[0]
            gpu = next((g for g in describe_gpus() if str(g.get("index")) == mine or g.get("uuid") == mine), None)
            if gpu is None:  # no NVML on the node: still pin the device Ray chose
                gpu = {"index": int(mine) if mine.isdigit() else None, "uuid": None if mine.isdigit() else mine}
    slot = Slot(name=f"ray:{node[:8]}" + (f":gpu{gpu.get('index')}" if gpu else ""), gpu=gpu)
    record = run_cell(cell, slot)
    record["ray"] = {"node_id": node, "task_id": ctx.get_task_id(), "worker_id": ctx.get_worker_id(),
                     "worker_pid": os.getpid(), "gpu_ids": [str(i) for i in ray.get_gpu_ids()]}
    return record


def _failed(cell: Cell, error: str) -> dict[str, Any]:
    import time

    now = time.time()
    return cell_record(cell, Slot(name="ray"), CellRun(attempts=[], result=None, log_text="", started_epoch=now,
                                                       finished_epoch=now, error=error))


def run_ray(cells: Sequence[Cell], on_record: Callable[[dict[str, Any]], None], *, address: str | None = None,
            cpus_per_cell: int = 1) -> dict[str, Any]:
    """Submit every cell; store each record as its task finishes. Returns what the executor used.

    A cell whose GPU type no node advertises is recorded as failed at once (Ray would otherwise keep
    it pending forever). A task that raised or whose worker died twice is recorded as failed with
    Ray's error. Ctrl-C cancels what is still running; finished cells are already stored."""
    ray = _ray()
    if not ray.is_initialized():
        try:
            ray.init(address=address, log_to_driver=False)
        except ConnectionError as err:
            raise BadInput(f"--address {address}: cannot connect to a Ray cluster ({err})") from err
    resources = ray.cluster_resources()
    use_gpu = resources.get("GPU", 0) > 0
    if cpus_per_cell < 1:
        raise BadInput("--ray-cpus-per-cell must be >= 1")
    task = ray.remote(ray_cell_task)
    pending: dict[Any, Cell] = {}
    for cell in cells:
        options: dict[str, Any] = {"max_retries": TASK_RETRIES, "retry_exceptions": False,
                                   "num_cpus": cpus_per_cell}
        if use_gpu:
            options["num_gpus"] = 1
        if cell.gpu_type:
            key = f"accelerator_type:{cell.gpu_type}"
            if key not in resources:
                have = sorted(k.split(":", 1)[1] for k in resources if k.startswith("accelerator_type:"))
                on_record(_failed(cell, f"no node of the Ray cluster advertises {key} (types: {', '.join(have) or 'none'})"))
                continue
            options["resources"] = {key: 0.001}
        pending[task.options(**options).remote(cell, use_gpu)] = cell
    try:
        while pending:
            ready, _ = ray.wait(list(pending), num_returns=1, timeout=POLL_S)
            for ref in ready:
                cell = pending.pop(ref)
                try:
                    record = ray.get(ref)
                except Exception as err:  # noqa: BLE001 - RayTaskError, WorkerCrashedError, NodeDiedError …
                    first = str(err).strip().splitlines()[0] if str(err).strip() else ""
                    record = _failed(cell, f"ray: {type(err).__name__}: {first}"[:500])
                on_record(record)
    except KeyboardInterrupt:
        for ref in pending:
            ray.cancel(ref, force=True)
        raise
    return {"name": "ray", "address": address, "use_gpu": use_gpu, "cpus_per_cell": cpus_per_cell,
            "cluster_resources": {k: v for k, v in resources.items() if not k.startswith("node:")}}
