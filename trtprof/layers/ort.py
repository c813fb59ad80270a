"""Per-node times from ONNX Runtime's own session profiling (``SessionOptions.enable_profiling``).

ORT writes a Chrome-trace JSON in which every executed node of every run is one ``cat: "Node"``
event named ``<node>_kernel_time`` with ``args.op_name`` and ``args.provider``; fused nodes carry
ORT's fused names (``conv0_nchwc``), layout changes appear as ``ReorderInput``/``ReorderOutput``
and precision fallbacks as inserted ``Cast`` nodes — each its own row. A separate session with
profiling on runs the asked iterations; the timed session is never profiled.
"""
from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np

from ..scratch import temp_dir
from .table import KernelTime, LayerTiming, PrecisionProfile, kind_of

SOURCE = "onnxruntime session profiling (per-node wall time on the host)"
SUFFIX = "_kernel_time"
# ORT's InsertCastTransformer renames a node it runs in FP32 behind casts (no FP16 kernel on the CPU
# provider) "InsertedPrecisionFreeCast_<node>": the same layer, so its row joins the baseline's.
RENAMED_PREFIX = "InsertedPrecisionFreeCast_"


def parse_profile(events: Sequence[Mapping[str, Any]], iterations: int) -> tuple[tuple[LayerTiming, ...], float | None]:
    """Per-node medians over the last ``iterations`` runs of an ORT profile; and the per-run total."""
    runs = [e for e in events if e.get("cat") == "Session" and e.get("name") == "model_run"]
    runs.sort(key=lambda e: e.get("ts", 0))
    runs = runs[-iterations:] if iterations else runs
    windows = [(float(e["ts"]), float(e["ts"]) + float(e.get("dur", 0))) for e in runs]
    per_node: dict[str, list[float]] = defaultdict(list)
    per_run: dict[int, float] = defaultdict(float)
    ops: dict[str, tuple[str, str]] = {}
    order: list[str] = []
    for e in sorted((e for e in events if e.get("cat") == "Node"), key=lambda e: e.get("ts", 0)):
        name = str(e.get("name", ""))
        if not name.endswith(SUFFIX):
            continue  # fence_before/fence_after markers
        ts = float(e.get("ts", 0))
        run = next((i for i, (a, b) in enumerate(windows) if a <= ts <= b), None)
        if windows and run is None:
            continue  # a warmup run
        node = name[: -len(SUFFIX)]
        args = e.get("args", {}) or {}
        provider = str(args.get("provider", ""))
        if node.startswith(RENAMED_PREFIX):
            node = node[len(RENAMED_PREFIX):]
            provider += ", FP32 behind inserted casts"
        ops.setdefault(node, (str(args.get("op_name", "")), provider))
        if node not in order:
            order.append(node)
        ms = float(e.get("dur", 0)) / 1e3
        per_node[node].append(ms)
        per_run[run if run is not None else 0] += ms
    layers = []
    for node in order:
        op, provider = ops[node]
        layers.append(LayerTiming(
            name=node, op_type=op, kind=kind_of(op, node), median_ms=float(np.median(per_node[node])),
            kernels=(KernelTime(name=f"{op} ({provider})", median_ms=float(np.median(per_node[node])),
                                calls=max(1, round(len(per_node[node]) / max(1, len(windows) or 1))), tensor_core=None),),
        ))
    total = float(np.median(list(per_run.values()))) if per_run else None
    return tuple(layers), total


def profile_onnxruntime(artifact: Path, precision: str, feeds: Mapping[str, np.ndarray], *, iterations: int,
                        warmup: int, batch_size: int) -> PrecisionProfile:
    """Run ``warmup`` + ``iterations`` inferences on a fresh profiling session and parse its trace."""
    from ..backends.onnxruntime import _session
    from ..spec import Precision

    with temp_dir("ortprof") as tmp:
        session = _session(Path(artifact), Precision(precision), path=Path(artifact),
                           profile_prefix=str(Path(tmp) / "ort"))
        for _ in range(warmup + iterations):
            session.run(None, dict(feeds))
        trace = Path(session.end_profiling())
        events = json.loads(trace.read_text())
    layers, total = parse_profile(events, iterations)
    return PrecisionProfile(precision=precision, backend="onnxruntime", source=SOURCE, batch_size=batch_size,
                            iterations=iterations, layers=layers, iteration_total_ms=total,
                            config={"warmup": warmup, "provider": session.get_providers()[0]})
