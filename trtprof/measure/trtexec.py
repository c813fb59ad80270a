"""trtexec's own measurements as a trtprof record: ``trtprof import trtexec --times T.json …``.

Why: TensorRT users already trust trtexec and have its JSON exports (``--exportTimes``,
``--exportProfile``, ``--exportLayerInfo``). Read into a trtprof results file, they get trtprof's
report, plots and diagnosis without re-measuring.

What one trtexec run can and cannot say: its iterations all come from one process, one engine load,
one set of clocks. The statistics here (median, percentiles, the exact median CI) describe the
iteration-to-iteration noise of that one load; the load-to-load variation that ``trtprof compare``
measures by reloading (often the larger part) is not in the file, and every record says so.

Formats (trtexec 8.x–10.x, checked against the TensorRT repository's trt-engine-explorer examples):
- times: a list of per-iteration objects ``{"startEnqMs", "endEnqMs", "startH2dMs", …, "h2dMs",
  "computeMs", "d2hMs", "latencyMs"}``;
- profile: a list whose first item is ``{"count": N}`` then per layer ``{"name", "timeMs",
  "averageMs", "medianMs", "percentage"}``;
- layer info: ``{"Layers": [...]}`` with ``"Format/Datatype"`` strings per input/output (detailed
  verbosity), or plain layer names (without it).
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

import numpy as np

from ..errors import BadInput
from ..spec import Precision

ONE_LOAD_NOTE = ("imported from trtexec: one process, one engine load — the statistics hold the iteration-to-"
                 "iteration noise of that load only; load-to-load variation (which `trtprof compare` measures by "
                 "reloading) is not in the file")
_STAGES = {"latency_ms": "latencyMs", "compute_ms": "computeMs", "h2d_ms": "h2dMs", "d2h_ms": "d2hMs"}
_DTYPE = re.compile(r"\b(FP32|FP16|BF16|FP8|Int8|INT8|Int32|Int64|Bool|UInt8|Int4|FP4)\b", re.IGNORECASE)


@dataclass(frozen=True)
class TrtexecRun:
    """What the export files of one trtexec run hold, parsed and checked."""

    stages_ms: dict[str, np.ndarray]  # latency_ms, compute_ms, h2d_ms, d2h_ms, enqueue_ms
    span_s: float
    layers: tuple[dict[str, Any], ...] = ()  # from --exportProfile
    profile_runs: int | None = None
    layers_by_precision: dict[str, int] | None = None  # from --exportLayerInfo
    reformat_layers: int | None = None


def _load(path: Path, what: str) -> Any:
    from ..util.datafile import load_json

    path = Path(path)
    if not path.is_file():
        raise BadInput(f"{what}: no such file", path=path)
    return load_json(path, f"trtexec {what} file")


def parse_times(data: Any, path: Path) -> tuple[dict[str, np.ndarray], float]:
    """Per-stage samples (ms) and the span (s) from trtexec's ``--exportTimes`` list."""
    if not isinstance(data, list) or not data or not all(isinstance(x, dict) for x in data):
        raise BadInput("--times: expected trtexec's --exportTimes output (a non-empty list of per-iteration "
                       "objects)", path=path)
    missing = [key for key in ("latencyMs", "computeMs", "startEnqMs", "endEnqMs") if key not in data[0]]
    if missing:
        raise BadInput(f"--times: not trtexec's --exportTimes output (no {', '.join(missing)})", path=path)
    try:
        stages = {name: np.array([float(x[key]) for x in data]) for name, key in _STAGES.items() if key in data[0]}
        stages["enqueue_ms"] = np.array([float(x["endEnqMs"]) - float(x["startEnqMs"]) for x in data])
        starts = [float(x.get("startH2dMs", x.get("startComputeMs", x["startEnqMs"]))) for x in data]
        ends = [float(x.get("endD2hMs", x.get("endComputeMs", x["endEnqMs"]))) for x in data]
    except (KeyError, TypeError, ValueError) as err:
        raise BadInput(f"--times: damaged iteration entry ({type(err).__name__}: {err})", path=path) from err
    for name, values in stages.items():
        if not np.all(np.isfinite(values)) or np.any(values < 0):
            raise BadInput(f"--times: {name} has negative or non-finite values", path=path)
    return stages, max(ends) / 1000.0 - min(starts) / 1000.0


def parse_profile(data: Any, path: Path) -> tuple[tuple[dict[str, Any], ...], int | None]:
    """Per-layer times from ``--exportProfile`` (median and average ms, share of the total)."""
    if not isinstance(data, list) or not all(isinstance(x, dict) for x in data):
        raise BadInput("--profile: expected trtexec's --exportProfile output (a list of objects)", path=path)
    runs = next((int(x["count"]) for x in data if "count" in x), None)
    layers = []
    for x in data:
        if "name" not in x:
            continue
        try:
            layers.append({"name": str(x["name"]), "median_ms": float(x.get("medianMs", x["averageMs"])),
                           "average_ms": float(x["averageMs"]), "percentage": float(x.get("percentage", 0.0))})
        except (KeyError, TypeError, ValueError) as err:
            raise BadInput(f"--profile: damaged layer entry {x.get('name')!r} ({err})", path=path) from err
    if not layers:
        raise BadInput("--profile: no layer entries (expected objects with name/averageMs)", path=path)
    return tuple(layers), runs


def layer_precision(layer: Mapping[str, Any]) -> str | None:
    """"fp16", "fp32", "int8", … of a layer's first output's ``Format/Datatype`` string."""
    for io in (*layer.get("Outputs", []), *layer.get("Inputs", [])):
        match = _DTYPE.search(str(io.get("Format/Datatype", "")))
        if match:
            return match.group(1).lower()
    return None


def parse_layer_info(data: Any, path: Path) -> tuple[dict[str, int] | None, int | None]:
    """(layers per output precision, reformat layers) from ``--exportLayerInfo``; (None, None) when
    the engine was built without detailed profiling verbosity (names only, no types)."""
    layers = data.get("Layers") if isinstance(data, dict) else None
    if not isinstance(layers, list):
        raise BadInput("--layer-info: expected trtexec's --exportLayerInfo output ({\"Layers\": [...]})", path=path)
    if not layers or not all(isinstance(x, dict) for x in layers):
        return None, None  # names only: built without --profilingVerbosity=detailed
    counts: dict[str, int] = {}
    reformats = 0
    for layer in layers:
        if layer.get("LayerType") == "Reformat" or layer.get("Origin") == "REFORMAT":
            reformats += 1
            continue
        name = layer_precision(layer)
        if name is not None:
            counts[name] = counts.get(name, 0) + 1
    return dict(sorted(counts.items())), reformats


def read_run(times: Path, profile: Path | None = None, layer_info: Path | None = None) -> TrtexecRun:
    stages, span = parse_times(_load(times, "--times"), Path(times))
    layers: tuple[dict[str, Any], ...] = ()
    runs = None
    if profile is not None:
        layers, runs = parse_profile(_load(profile, "--profile"), Path(profile))
    by_precision = reformats = None
    if layer_info is not None:
        by_precision, reformats = parse_layer_info(_load(layer_info, "--layer-info"), Path(layer_info))
    return TrtexecRun(stages_ms=stages, span_s=span, layers=layers, profile_runs=runs,
                      layers_by_precision=by_precision, reformat_layers=reformats)


def to_result(run: TrtexecRun, *, precision: Precision, batch_size: int, model: str,
              files: Mapping[str, str]) -> Any:
    """A ``BenchResult`` (backend "trtexec") whose samples are trtexec's iterations."""
    from .results import BenchResult

    meta: dict[str, Any] = {"source": "trtexec", "files": dict(files)}
    if run.layers_by_precision is not None:
        meta["layers_by_precision"] = run.layers_by_precision
        meta["reformat_layers"] = run.reformat_layers
    if run.layers:
        meta["trtexec_profile"] = {"runs": run.profile_runs, "layers": list(run.layers)}
    copies = bool(np.any(run.stages_ms.get("h2d_ms", np.zeros(1)) > 0) or np.any(run.stages_ms.get("d2h_ms", np.zeros(1)) > 0))
    config = {"source": "trtexec", "clock": "trtexec (CUDA events)", "loads": 1, "iterations": int(len(run.stages_ms["latency_ms"])),
              "copies_included": copies}
    return BenchResult.from_samples(
        stages=run.stages_ms, span_s=run.span_s, batch_size=batch_size, model=model, precision=precision.value,
        backend="trtexec", engine={"artifact": "", "effective_precision": _effective(precision, run.layers_by_precision),
                                   "backend_metadata": meta, "notes": [ONE_LOAD_NOTE]},
        config=config, warnings=[ONE_LOAD_NOTE])


def _effective(precision: Precision, counts: Mapping[str, int] | None) -> str:
    """The requested precision, unless the layer info shows no layer of that type ("fp32")."""
    if not counts or precision in (Precision.FP32, Precision.TF32):
        return precision.value
    return precision.value if counts.get(precision.value, 0) > 0 else "fp32"
