"""Peak GPU memory of a training step per arm, and the largest batch that fits.

Why separate from timing: the interleaved timing keeps every arm's module alive at once, so a peak
read there would mix the arms. Here each arm runs alone (the others closed), after
``empty_cache`` and ``reset_peak_memory_stats``, so its peak is its own: weights, gradients,
optimizer state, activations kept for backward, cuDNN workspaces and the allocator's rounding.
"""
from __future__ import annotations

import gc
from dataclasses import dataclass
from typing import Any, Callable

from .step import import_torch

MIB = 1024 * 1024
MAX_BATCH_LIMIT = 4096  # --find-max-batch stops searching here (a fit at this size is reported as "≥")
FIT_STEPS = 2  # a batch fits when this many steps (the second with optimizer state allocated) run


@dataclass(frozen=True)
class PeakMemory:
    """Bytes the caching allocator handed out (allocated) and held from the driver (reserved)."""

    allocated_mib: float
    reserved_mib: float
    before_mib: float  # allocated before the arm started (inputs, other live tensors)

    def to_json(self) -> dict[str, Any]:
        return {"peak_allocated_mib": self.allocated_mib, "peak_reserved_mib": self.reserved_mib,
                "allocated_before_mib": self.before_mib,
                "method": "torch.cuda.max_memory_allocated/max_memory_reserved after reset_peak_memory_stats, one arm alive"}


def release() -> None:
    """Free what closed runners left in the caching allocator, so the next arm starts clean."""
    torch = import_torch()
    gc.collect()
    if torch.cuda.is_available():
        torch.cuda.synchronize()
        torch.cuda.empty_cache()


def start_peak() -> float:
    """Reset the peak counters; return MiB allocated now."""
    torch = import_torch()
    release()
    torch.cuda.reset_peak_memory_stats()
    return torch.cuda.memory_allocated() / MIB


def read_peak(before_mib: float) -> PeakMemory:
    torch = import_torch()
    torch.cuda.synchronize()
    return PeakMemory(allocated_mib=torch.cuda.max_memory_allocated() / MIB,
                      reserved_mib=torch.cuda.max_memory_reserved() / MIB, before_mib=before_mib)


@dataclass(frozen=True)
class MaxBatch:
    largest_fit: int
    smallest_fail: int | None  # None: nothing up to the limit failed
    limit: int
    probes: list[tuple[int, bool]]

    def to_json(self) -> dict[str, Any]:
        return {"largest_fit": self.largest_fit, "smallest_fail": self.smallest_fail, "limit": self.limit,
                "at_limit": self.smallest_fail is None,
                "probes": [{"batch_size": b, "fits": ok} for b, ok in self.probes]}


def find_max_batch(fits: Callable[[int], bool], start: int = 1, limit: int = MAX_BATCH_LIMIT,
                   resolution: float = 0.1) -> MaxBatch:
    """Double from ``start`` until a batch fails (or ``limit``), then bisect until the gap between the
    largest fit and the smallest failure is within ``resolution`` of the fit. Pure search: ``fits``
    does the probing (and must free its memory before returning)."""
    probes: list[tuple[int, bool]] = []

    def probe(b: int) -> bool:
        ok = fits(b)
        probes.append((b, ok))
        return ok

    lo, hi = 0, None
    b = max(1, start)
    while b <= limit:
        if probe(b):
            lo = b
            if b == limit:
                break
            b = min(limit, b * 2)
        else:
            hi = b
            break
    if hi is not None:
        while hi - lo > max(1, int(resolution * max(lo, 1))):
            mid = (lo + hi) // 2
            if mid in (lo, hi):
                break
            if probe(mid):
                lo = mid
            else:
                hi = mid
    return MaxBatch(largest_fit=lo, smallest_fail=hi, limit=limit, probes=probes)


def is_out_of_memory(err: BaseException) -> bool:
    torch = import_torch()
    if isinstance(err, torch.cuda.OutOfMemoryError):
        return True
    text = str(err)
    return isinstance(err, RuntimeError) and ("out of memory" in text or "CUDNN_STATUS_ALLOC_FAILED" in text
                                              or "CUBLAS_STATUS_ALLOC_FAILED" in text)


def _nbytes(t: Any) -> int:
    return int(t.numel()) * int(t.element_size())


def breakdown(runner: Any, tensors: list[Any], peak: dict[str, Any]) -> dict[str, Any]:
    """What the arm's peak (``PeakMemory.to_json``) is made of, measured on one more step of its
    runner after the peak was read: ``state_mib`` — parameters, their gradients and the optimizer's
    state tensors (bytes of the live tensors); ``saved_for_backward_mib`` — the distinct storages
    autograd saved for backward in that step (``saved_tensors_hooks``; the parameters themselves
    excluded, so autocast's half copies of the weights count here, with the activations). The rest
    of the peak above what was allocated before the arm started is ``workspace_and_temporaries_mib``:
    cuDNN's workspaces for the chosen algorithms, the optimizer's temporaries, the allocator's
    rounding. It is what is left, not a measured workspace, and the name says so."""
    torch = import_torch()
    params = list(runner.module.parameters())
    param_storages = {p.untyped_storage().data_ptr() for p in params}
    saved: dict[int, int] = {}

    def pack(t: Any) -> Any:
        storage = t.untyped_storage()
        if storage.data_ptr() not in param_storages:
            saved[storage.data_ptr()] = int(storage.nbytes())
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t), runner.modes():
        runner.step(tensors)
    if torch.cuda.is_available():
        torch.cuda.synchronize()
    state = sum(_nbytes(p) for p in params) + sum(_nbytes(p.grad) for p in params if p.grad is not None)
    state += sum(_nbytes(t) for st in runner.optimizer.state.values() for t in st.values() if torch.is_tensor(t))
    state_mib, saved_mib = state / MIB, sum(saved.values()) / MIB
    rest = peak["peak_allocated_mib"] - peak["allocated_before_mib"] - state_mib - saved_mib
    return {"state_mib": state_mib, "saved_for_backward_mib": saved_mib, "workspace_and_temporaries_mib": rest,
            "breakdown_method": "state: live parameter/gradient/optimizer tensors; saved: saved_tensors_hooks over one "
                                "step, distinct storages, parameters excluded; workspace_and_temporaries: peak - "
                                "allocated before - state - saved (the rest, not a measured workspace)"}
