"""Peak GPU memory of a training step per arm, and the largest batch that fits.

Why separate from timing: the interleaved timing keeps every arm's module alive at once, so a peak
read there would mix the arms. Here each arm runs alone (the others closed), after
``empty_cache`` and ``reset_peak_memory_stats``, so its peak is its own: weights, gradients,
optimizer state, activations kept for backward, cuDNN workspaces and the allocator's rounding.
"""
from __future__ import annotations

import gc
from dataclasses import dataclass
from typing import Any

from .step import import_torch

MIB = 1024 * 1024
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
