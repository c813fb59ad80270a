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

import math
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


# An iteration longer than an hour is not a measurement trtexec makes (its default run is ~3 s of
# iterations); a value above it is a damaged or hand-edited file, and 1e308 would overflow every sum.
MAX_PLAUSIBLE_MS = 3_600_000.0
# The run's span must hold its longest iteration; this slack absorbs the rounding of trtexec's
# millisecond timestamps (printed with a few decimals).
SPAN_SLACK_MS = 1e-3


def _float(value: Any, field: str, path: Path) -> float:
    """A JSON number as a float; BadInput naming the field for a string, null, a bool or an integer too
    large for a float (a 400-digit one)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise BadInput(f"{field}: {str(value)[:40]!r} is not a number", path=path)
    try:
        return float(value)
    except OverflowError:
        raise BadInput(f"{field}: {str(value)[:20]}… is too large to be a time", path=path) from None


def _ms(value: Any, field: str, path: Path) -> float:
    """A finite, non-negative, plausible number of milliseconds; BadInput naming the field otherwise
    (a string, null, a bool, a 400-digit integer, inf/NaN, a negative time, 1e308)."""
    number = _float(value, field, path)
    if not math.isfinite(number) or number < 0:
        raise BadInput(f"{field}: {number!r} is not a finite time >= 0", path=path)
    if number > MAX_PLAUSIBLE_MS:
        raise BadInput(f"{field}: {number:.4g} ms is not a plausible trtexec time (> {MAX_PLAUSIBLE_MS:.0f} ms)",
                       path=path)
    return number


def _stamp(value: Any, field: str, path: Path) -> float:
    """A timestamp (ms since trtexec's start): a finite number within 31 years of the start."""
    number = _float(value, field, path)
    if not math.isfinite(number) or abs(number) > 1e12:  # 1e12 ms = 31 years since the run started
        raise BadInput(f"{field}: {number!r} is not a plausible timestamp", path=path)
    return number


def parse_times(data: Any, path: Path) -> tuple[dict[str, np.ndarray], float]:
    """Per-stage samples (ms) and the span (s) from trtexec's ``--exportTimes`` list, every value checked
    as a number before use (exit 2 naming the iteration and field), and the whole refused when it cannot
    be a measurement: all latencies zero, or a span that is not positive or shorter than one iteration."""
    if not isinstance(data, list) or not data or not all(isinstance(x, dict) for x in data):
        raise BadInput("--times: expected trtexec's --exportTimes output (a non-empty list of per-iteration "
                       "objects)", path=path)
    missing = [key for key in ("latencyMs", "computeMs", "startEnqMs", "endEnqMs") if key not in data[0]]
    if missing:
        raise BadInput(f"--times: not trtexec's --exportTimes output (no {', '.join(missing)})", path=path)
    columns: dict[str, list[float]] = {name: [] for name, key in _STAGES.items() if key in data[0]}
    enqueue, starts, ends = [], [], []
    for i, x in enumerate(data):
        def field(key: str, i: int = i) -> str:
            return f"--times: iteration {i} {key}"
        try:
            for name in columns:
                columns[name].append(_ms(x[_STAGES[name]], field(_STAGES[name]), path))
            start_enq, end_enq = (_stamp(x[k], field(k), path) for k in ("startEnqMs", "endEnqMs"))
            start_key = next(k for k in ("startH2dMs", "startComputeMs", "startEnqMs") if k in x)
            end_key = next(k for k in ("endD2hMs", "endComputeMs", "endEnqMs") if k in x)
        except KeyError as err:
            raise BadInput(f"--times: iteration {i} has no {err}", path=path) from None
        if end_enq < start_enq:
            raise BadInput(f"--times: iteration {i} endEnqMs is before its startEnqMs", path=path)
        enqueue.append(end_enq - start_enq)
        starts.append(_stamp(x[start_key], field(start_key), path))
        ends.append(_stamp(x[end_key], field(end_key), path))
        if ends[-1] < starts[-1]:
            raise BadInput(f"--times: iteration {i} {end_key} is before its {start_key} (a negative span)", path=path)
    stages = {name: np.array(values) for name, values in columns.items()}
    stages["enqueue_ms"] = np.array(enqueue)
    if not np.any(stages["latency_ms"] > 0):
        raise BadInput("--times: every latencyMs is 0; not a measurement", path=path)
    span_ms = max(ends) - min(starts)
    if not span_ms > 0 or span_ms + SPAN_SLACK_MS < float(np.max(stages["latency_ms"])):
        raise BadInput(f"--times: the run's span ({span_ms:.4g} ms, first start to last end) is not positive or "
                       f"shorter than its longest iteration ({float(np.max(stages['latency_ms'])):.4g} ms)",
                       path=path)
    return stages, span_ms / 1000.0


def parse_profile(data: Any, path: Path) -> tuple[tuple[dict[str, Any], ...], int | None]:
    """Per-layer times from ``--exportProfile`` (median and average ms, share of the total)."""
    if not isinstance(data, list) or not all(isinstance(x, dict) for x in data):
        raise BadInput("--profile: expected trtexec's --exportProfile output (a list of objects)", path=path)
    runs = next((_count(x["count"], path) for x in data if "count" in x), None)
    layers = []
    for x in data:
        if "name" not in x:
            continue
        where = f"--profile: layer {str(x['name'])[:60]!r}"
        if "averageMs" not in x:
            raise BadInput(f"{where} has no averageMs", path=path)
        average = _ms(x["averageMs"], f"{where} averageMs", path)
        share = x.get("percentage", 0.0)
        if isinstance(share, bool) or not isinstance(share, (int, float)) or not 0 <= float(share) <= 100.0 + 1e-6:
            raise BadInput(f"{where} percentage: {str(share)[:40]!r} is not a share between 0 and 100", path=path)
        layers.append({"name": str(x["name"]), "median_ms": _ms(x.get("medianMs", average), f"{where} medianMs", path),
                       "average_ms": average, "percentage": float(share)})
    if not layers:
        raise BadInput("--profile: no layer entries (expected objects with name/averageMs)", path=path)
    return tuple(layers), runs


def _count(value: Any, path: Path) -> int:
    """The profile's run count: a positive whole number ("abc", null, Infinity, 2.5, true refused)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) \
            or value != int(value) or not 0 < value < 2**53:
        raise BadInput(f"--profile: count: {str(value)[:40]!r} is not a positive whole number", path=path)
    return int(value)


def _as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def layer_precision(layer: Mapping[str, Any]) -> str | None:
    """"fp16", "fp32", "int8", … of a layer's first output's ``Format/Datatype`` string."""
    ios = [v for key in ("Outputs", "Inputs") for v in _as_list(layer.get(key))]
    for io in ios:
        match = _DTYPE.search(str(io.get("Format/Datatype", "") if isinstance(io, dict) else io))
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
    for i, layer in enumerate(layers):
        for key in ("Inputs", "Outputs"):
            if key in layer and not isinstance(layer[key], list):
                raise BadInput(f"--layer-info: layer {i} {key}: {str(layer[key])[:40]!r} is not a list", path=path)
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
