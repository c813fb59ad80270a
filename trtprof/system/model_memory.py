"""Memory that grows with the model, predicted from its weight bytes before any build or load
(issue 36 item 8): a 1.08 GiB model peaked at 13.4 GB to build fp32+fp16 and 14.9 GB to compare with
2 loads, and nothing said so before the machine ran out.

The factors are measured (benchmarks/model_memory_cpu.py, ONNX Runtime on the CPU, results in
benchmarks/results/model_memory_cpu-*.txt). Building fp32+fp16 peaked at 8.2–8.9× the weights. A
compare's tree is its own process plus one worker per load: the parent peaked at 7.2–7.6× the weights
(no engine of its own since the accuracy pass moved into load 0's worker; sampled stacks show it in the
FP16 range analysis of the FP32 model, fp16range.for_compare, near its peak), each worker holding an fp32 and an fp16 session
at 0.43 / 0.71 / 1.36–1.42 GB for 101 / 201 / 503 MB of weights: a fixed ~0.16 GB (its interpreter and
libraries) plus 2.2–2.7× the weights. A worker counts from the start: the planned loads all open their
sessions ahead of their first round (workers.SPAWN_AHEAD), the budget's loads or not. The constants
below are fitted above every measured peak (2, 4 and 6 loads), within ~20 % of it.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from ..errors import OutOfMemory
from .memory import fmt_size

RUNTIME_BYTES = 320 * 2**20  # the command's own Python, numpy, onnx, onnxruntime, whatever the model
BUILD_FACTOR = 10.0  # peak of one fp32+fp16 build, × weight bytes (measured 8.2–8.9×)
COMPARE_BASE_FACTOR = 7.0  # the compare's own process (its FP16 range analysis), × weight bytes (7.2–7.6×
# measured with its runtime included)
LOAD_BYTES = 200 * 2**20  # each load's worker process before any model: its interpreter and libraries
PER_LOAD_FACTOR = 2.6  # each load's fp32 and fp16 sessions, × weight bytes (measured 2.2–2.7× above ~0.16 GB)


def weight_bytes(proto: Any, folder: Path | None = None) -> int:
    """Bytes of the model's initializers (and Constant tensors), from their dims and types: nothing is
    decoded. External data counts by its declared length, else by the size of its file in ``folder``."""
    from onnx import helper

    def size(t: Any) -> int:
        try:
            itemsize = np.dtype(helper.tensor_dtype_to_np_dtype(t.data_type)).itemsize
        except (KeyError, TypeError, ValueError):
            itemsize = 4
        count = int(np.prod([int(d) for d in t.dims], dtype=np.float64)) if len(t.dims) else 1
        declared = count * itemsize
        external = {e.key: e.value for e in t.external_data}
        if "length" in external and external["length"].isdigit():
            return int(external["length"])
        if declared == 0 and "location" in external and folder is not None:
            target = folder / external["location"]
            return target.stat().st_size if target.is_file() else 0
        return declared

    graph = proto.graph
    total = sum(size(t) for t in graph.initializer)
    for node in graph.node:
        if node.op_type == "Constant":
            total += sum(size(a.t) for a in node.attribute if a.name == "value" and a.HasField("t"))
    return total


def build_bytes(weights: int) -> int:
    return int(RUNTIME_BYTES + BUILD_FACTOR * weights)


def load_bytes(weights: int) -> float:
    """What one more load (a worker with an fp32 and an fp16 session) adds to a compare's peak."""
    return LOAD_BYTES + PER_LOAD_FACTOR * weights


def compare_bytes(weights: int, loads: int) -> int:
    return int(RUNTIME_BYTES + COMPARE_BASE_FACTOR * weights + loads * load_bytes(weights))


def check_build(weights: int, available: int | None, model: str) -> None:
    """Refuse a build whose predicted peak exceeds the memory available now (None: not known, pass)."""
    if available is None or build_bytes(weights) <= available:
        return
    raise OutOfMemory(f"{model}: building it takes about {fmt_size(build_bytes(weights))} ({BUILD_FACTOR:g}× its "
                      f"{fmt_size(weights)} of weights), {fmt_size(available)} of memory is available: free memory "
                      "or build on a larger machine")


def loads_that_fit(weights: int, available: int | None, wanted: int) -> int:
    """How many loads, up to ``wanted`` (at most 64: LOADS_LIMIT), the memory available now holds at once
    (``wanted`` when unknown); counted with compare_bytes itself, so the two never disagree by a rounding."""
    if available is None:
        return wanted
    fits = 0
    while fits < wanted and compare_bytes(weights, fits + 1) <= available:
        fits += 1
    return fits


def fit_loads(weights: int, available: int | None, min_loads: int, max_loads: int, model: str) -> tuple[int, str | None]:
    """(the load ceiling to use, the one line saying it was lowered, or None). Refuses (OutOfMemory) when
    not even ``min_loads`` fit, naming the number of loads that would, when that is at least 2."""
    fits = loads_that_fit(weights, available, max_loads)
    if fits >= max_loads:
        return max_loads, None
    if fits < min_loads:
        assert available is not None
        advice = (f"try --min-loads {fits}" if fits >= 2 else
                  "not even 2 loads fit: free memory or compare on a larger machine")
        raise OutOfMemory(f"{model}: a compare with {min_loads} loads takes about "
                          f"{fmt_size(compare_bytes(weights, min_loads))} ({fmt_size(weights)} of weights; "
                          f"{fmt_size(load_bytes(weights))} per load), {fmt_size(available)} of memory is available: "
                          f"{advice}")
    return fits, (f"memory: at most {fits} loads of {fmt_size(weights)} of weights fit in the "
                  f"{fmt_size(available or 0)} available (about {fmt_size(compare_bytes(weights, fits))}); "
                  f"the compare stops adding loads there")


def fit_plan_loads(plan: Any, proto: Any, folder: Path | None, model: str,
                   available: int | None) -> tuple[Any, str | None]:
    """``plan`` (a RoundPlan) with its load ceiling lowered to what the memory holds, and the line saying
    so (None when nothing changed); OutOfMemory when not even its ``min_loads`` fit."""
    from dataclasses import replace

    weights = weight_bytes(proto, folder)
    ceiling, line = fit_loads(weights, available, plan.min_loads, plan.max_loads, model)
    return (replace(plan, max_loads=ceiling) if ceiling != plan.max_loads else plan), line
