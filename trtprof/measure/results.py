"""Benchmark results: versioned JSON that describes itself, and a flat CSV (one row per entry)."""
from __future__ import annotations

import csv
import io
import math
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np

from ..util.csvsafe import csv_cell
from ..util.files import atomic_write_text
from ..errors import BadInput
from ..util.labels import engine_labels
from ..system.memory import in_use_bytes
from ..schemas import RESULTS as SCHEMA
from ..stats.latency import LatencyStats
from ..stats.throughput import throughput
from ..system.validity import FP32_BEHIND_CASTS, Facts, HeavyCensus, Validity, assess, merge

CSV_STATS = ("n", "mean", "std", "min", "p50", "p90", "p95", "p99", "max", "cv")


# the keys of one result entry that BenchResult types (to_json writes them; any other is kept in ``extra``)
ENTRY_KEYS = ("model", "precision", "backend", "batch_size", "engine", "config", "stats", "throughput_per_s",
              "throughput", "memory", "energy", "span_s", "warnings", "third_party_warnings", "validity", "device",
              "samples_ms", "stage_samples_ms")


@dataclass
class BenchResult:
    """One engine × batch size measurement."""

    model: str
    precision: str
    backend: str
    batch_size: int
    engine: dict[str, Any]  # key, artifact path, build metadata (what the backend really did)
    config: dict[str, Any]  # timing config + input shapes + seed
    stats: dict[str, LatencyStats]  # per stage: latency_ms always; h2d_ms, compute_ms, ... on GPU
    throughput_per_s: float
    samples_ms: dict[str, list[float]]  # raw samples per stage (histograms need them)
    span_s: float
    warnings: list[str] = field(default_factory=list)
    device: dict[str, Any] = field(default_factory=dict)  # per-run device state (GPU clocks...)
    # how ``throughput_per_s`` was computed and the mean rate beside it (``trtprof.stats.throughput``)
    throughput: dict[str, Any] = field(default_factory=dict)
    memory: dict[str, Any] = field(default_factory=dict)  # memory in use during inference (``trtprof.system.memory``)
    energy: dict[str, Any] = field(default_factory=dict)  # joules per inference (``trtprof.system.energy``)
    validity: dict[str, Any] = field(default_factory=dict)  # the stamp (``stamp_result``, ``trtprof.system.validity``)
    # the runtime library's own warnings at load and while timing, each once with a count
    # (``util.thirdparty.Tally``: [{"message", "during", "count", "of"}])
    third_party_warnings: list[dict[str, Any]] = field(default_factory=list)
    extra: dict[str, Any] = field(default_factory=dict)  # keys read that this type does not know: written back

    @property
    def latency(self) -> LatencyStats:
        return self.stats["latency_ms"]

    @classmethod
    def from_samples(
        cls,
        *,
        stages: Mapping[str, np.ndarray],
        span_s: float,
        batch_size: int,
        blocks: Sequence[tuple[int, float]] | None = None,
        **fields: Any,
    ) -> "BenchResult":
        """``blocks``: (iterations, wall s) per timed block, when the run had several (compare's
        rounds): throughput is then their median rate, else batch / median latency (``trtprof.stats.throughput``)."""
        stats = {name: LatencyStats.from_samples(values) for name, values in stages.items() if len(values)}
        rate = throughput(batch_size, stages["latency_ms"], span_s, blocks)
        warnings = list(fields.pop("warnings", []))
        if rate.note:
            warnings.append(rate.note)
        return cls(
            batch_size=batch_size,
            stats=stats,
            throughput_per_s=rate.per_s,
            samples_ms={name: [float(v) for v in values] for name, values in stages.items()},
            span_s=span_s,
            warnings=warnings,
            throughput=rate.to_json(),
            **fields,
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "model": self.model,
            "precision": self.precision,
            "backend": self.backend,
            "batch_size": self.batch_size,
            "engine": self.engine,
            "config": self.config,
            "stats": {name: s.to_json() for name, s in self.stats.items()},
            "throughput_per_s": self.throughput_per_s,
            "throughput": self.throughput,
            "memory": self.memory,
            "energy": self.energy,
            "span_s": self.span_s,
            "warnings": self.warnings,
            "third_party_warnings": self.third_party_warnings,
            **({"validity": self.validity} if self.validity else {}),
            "device": self.device,
            "samples_ms": self.samples_ms["latency_ms"],
            "stage_samples_ms": {k: v for k, v in self.samples_ms.items() if k != "latency_ms"},
            **self.extra,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> "BenchResult":
        samples = {"latency_ms": list(data["samples_ms"]), **{k: list(v) for k, v in data.get("stage_samples_ms", {}).items()}}
        return cls(
            model=data["model"],
            precision=data["precision"],
            backend=data["backend"],
            batch_size=int(data["batch_size"]),
            engine=dict(data.get("engine", {})),
            config=dict(data.get("config", {})),
            stats={k: LatencyStats.from_json(v) for k, v in data["stats"].items()},
            throughput_per_s=float(data["throughput_per_s"]),
            samples_ms=samples,
            span_s=float(data.get("span_s", 0.0)),
            warnings=list(data.get("warnings", [])),
            device=dict(data.get("device", {})),
            throughput=dict(data.get("throughput", {})),
            memory=dict(data.get("memory", {})),
            energy=dict(data.get("energy", {})),
            validity=dict(data.get("validity") or {}),
            third_party_warnings=[dict(w) for w in data.get("third_party_warnings") or []],
            extra={k: v for k, v in data.items() if k not in ENTRY_KEYS},
        )


def result_facts(result: BenchResult, cpu: Mapping[str, Any] | None, host_timed: bool, **more: Any) -> Facts:
    """What ``system.validity`` judges of one result: the GPU watch in its device state (one run's,
    or every block's for compare's arms), the host's state read before measuring (for a host-timed
    result), and whether its "fp16" ran FP32 behind casts."""
    during = result.device.get("during") or None
    eff = result.engine.get("effective_precision", result.precision)
    label = str(result.config.get("arm") or result.precision)
    casts = (label,) if (result.precision == "fp16" and eff == FP32_BEHIND_CASTS) else ()
    meta = result.engine.get("backend_metadata") or {}
    heavy = HeavyCensus.of(label, str(result.precision), str(eff), meta.get("node_precision"), meta.get("kept_fp32"))
    return Facts(gpu=during, cpu=cpu, host_timed=host_timed, casts=casts,
                 heavy_fp32=(heavy,) if heavy is not None else (), **more)


def stamp_result(result: BenchResult, cpu: Mapping[str, Any] | None, host_timed: bool, **more: Any) -> Validity:
    """Judge ``result`` and keep the stamp on it (its JSON's ``validity``)."""
    validity = assess(result_facts(result, cpu, host_timed, **more))
    result.validity = validity.to_json()
    return validity


SET_KEYS = ("schema", "created", "environment", "results", "interrupted", "validity", "pending", "serving", "max_batch")


@dataclass
class ResultSet:
    """A bench results file's content (``trtprof bench``, ``import trtexec``): what ``plot``, ``report`` and
    ``compare`` on imported runs read, once (``compare.results_file.read_results``)."""

    environment: dict[str, Any]
    results: list[BenchResult]
    created: str = ""
    interrupted: bool = False  # stopped by Ctrl-C/SIGTERM: ``results`` holds what finished
    pending: list[dict[str, Any]] = field(default_factory=list)  # what an interrupted run did not measure
    serving: list[dict[str, Any]] = field(default_factory=list)  # --concurrency sweeps (trtprof.serving.sweep)
    max_batch: list[dict[str, Any]] = field(default_factory=list)  # --find-max-batch, per engine (trtprof.measure.maxbatch)
    # the file's own stamp as read (None: merged from the results' stamps when written, as bench does)
    validity: dict[str, Any] | None = None
    extra: dict[str, Any] = field(default_factory=dict)  # top-level keys read that this type does not know

    def to_json(self) -> dict[str, Any]:
        data = {
            "schema": SCHEMA,
            "created": self.created,
            "environment": self.environment,
            "results": [r.to_json() for r in self.results],
            "interrupted": self.interrupted,
        }
        if self.validity is not None:  # the file's, as read
            data["validity"] = self.validity
        elif any(r.validity for r in self.results):  # every result's stamp as one (each result keeps its own)
            data["validity"] = merge([Validity.from_json(r.validity) for r in self.results if r.validity]).to_json()
        if self.interrupted or self.pending:
            data["pending"] = self.pending
        if self.serving:
            data["serving"] = self.serving
        if self.max_batch:
            data["max_batch"] = self.max_batch
        return {**data, **self.extra}

    def write_json(self, path: Path) -> None:
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_text(path, json.dumps(self.to_json(), indent=1) + "\n")

    def write_csv(self, path: Path) -> None:
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_text(path, to_csv(self.results))

    @classmethod
    def read(cls, path: Path) -> "ResultSet":
        """A bench results file for its results (tests, tools); the commands read through
        ``compare.results_file.read_bench``, which checks the blocks the pages read as well."""
        path = Path(path)
        data = read_json(path)
        check_bench_file(data, path)
        return cls.from_json(data, path)

    @classmethod
    def from_json(cls, data: Mapping[str, Any], path: Path) -> "ResultSet":
        """A results file's JSON (schemas.RESULTS; the caller checked the schema), each entry checked
        (``results_from_json``); keys this type does not know are kept in ``extra``."""
        results = results_from_json(data.get("results", []), path)
        validity = data.get("validity")
        return cls(environment=data.get("environment", {}), results=results, created=data.get("created", ""),
                   interrupted=bool(data.get("interrupted", False)), pending=as_read(data.get("pending")),
                   serving=as_read(data.get("serving")), max_batch=as_read(data.get("max_batch")),
                   validity=dict(validity) if isinstance(validity, Mapping) else None,
                   extra={k: v for k, v in data.items() if k not in SET_KEYS})


def check_bench_file(data: Mapping[str, Any], path: Path) -> None:
    """A bench results file's schema, and its results list there (what ``plot`` and ``import`` need)."""
    if data.get("schema") != SCHEMA:
        raise BadInput(f"not a trtprof results file (schema {data.get('schema')!r}, expected {SCHEMA!r})", path=path)
    if "results" not in data:
        raise BadInput("damaged results file (no results list)", path=path)


def as_read(value: Any) -> Any:
    """A list block as the file has it (a copy of a list; what is not a list kept as it is for the page's own
    checks to name); absent or null: an empty list."""
    return list(value) if isinstance(value, list) else [] if value is None else value


ENTRY_TEXT = ("model", "precision", "backend")
ENTRY_OBJECTS = ("engine", "config", "device", "throughput", "memory", "energy", "stats")


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def check_entry_fields(item: Mapping[str, Any], where: str) -> None:
    """The fields pages and plots format, typed before they are (issue 36: ``artifact_bytes: []`` was a
    traceback in ``report``): names are strings, the batch an integer >= 1, sizes numbers."""
    for key in ENTRY_TEXT:
        if not isinstance(item.get(key), str):
            raise BadInput(f"{where}.{key}: {str(item.get(key))[:60]!r} is not a string")
    batch = item.get("batch_size")
    if not isinstance(batch, int) or isinstance(batch, bool) or batch < 1:
        raise BadInput(f"{where}.batch_size: {str(batch)[:60]!r} is not an integer >= 1")
    if not _is_number(item.get("throughput_per_s")):
        raise BadInput(f"{where}.throughput_per_s: {str(item.get('throughput_per_s'))[:60]!r} is not a number")
    for key in ENTRY_OBJECTS:
        if key in item and not isinstance(item[key], dict):
            raise BadInput(f"{where}.{key}: expected an object, not {type(item[key]).__name__}")
    if not isinstance((item.get("stats") or {}).get("latency_ms"), dict):  # every page and plot reads it
        raise BadInput(f"{where}.stats.latency_ms: expected an object (the latency statistics)")
    check_stat_order(item.get("stats") or {}, where)
    check_warning_lists(item, where)
    for section in ("engine", "memory"):  # byte counts: formatted as sizes on every page
        for key, value in (item.get(section) or {}).items():
            if key.endswith("_bytes") and value is not None and not (_is_number(value) and math.isfinite(value)):
                raise BadInput(f"{where}.{section}.{key}: {str(value)[:60]!r} is not a number")


ORDERED_STATS = ("min", "p50", "p90", "p95", "p99", "max")  # never decreasing in a result trtprof wrote


def check_stat_order(stats: Mapping[str, Any], where: str) -> None:
    """Each stage's order statistics are finite numbers in order: the latency plot draws bars from the
    minimum to p90 around the median (a p90 below it was a matplotlib ValueError, not a line)."""
    for stage, values in stats.items():
        if not isinstance(values, dict):
            raise BadInput(f"{where}.stats.{stage}: expected an object, not {type(values).__name__}")
        seen = [(k, values[k]) for k in ORDERED_STATS if k in values]
        for k, v in seen:
            if not (_is_number(v) and math.isfinite(v)):
                raise BadInput(f"{where}.stats.{stage}.{k}: {str(v)[:60]!r} is not a finite number")
        for (k0, v0), (k1, v1) in zip(seen, seen[1:]):
            if v1 < v0:
                raise BadInput(f"{where}.stats.{stage}: {k1} {v1:g} is below {k0} {v0:g} (order statistics out of "
                               "order: a damaged file)")


def check_warning_lists(item: Mapping[str, Any], where: str) -> None:
    """``warnings``: a list of strings; ``third_party_warnings``: a list of objects with a string
    message and whole counts (every page joins and formats them)."""
    warnings = item.get("warnings", [])
    if not isinstance(warnings, list) or not all(isinstance(w, str) for w in warnings):
        raise BadInput(f"{where}.warnings: expected a list of strings")
    kept = item.get("third_party_warnings", [])
    if not isinstance(kept, list):
        raise BadInput(f"{where}.third_party_warnings: expected a list")
    for i, e in enumerate(kept):
        if not (isinstance(e, dict) and isinstance(e.get("message"), str) and isinstance(e.get("during"), str)
                and all(isinstance(e.get(k), int) and not isinstance(e.get(k), bool) for k in ("count", "of"))):
            raise BadInput(f"{where}.third_party_warnings[{i}]: expected an object with a message, when it was "
                           "written (during) and whole counts (count, of)")


def results_from_json(items: Any, path: Path) -> list[BenchResult]:
    """Each entry of a file's ``results`` list, checked: an object whose samples are a non-empty list
    of finite numbers (a NaN or an empty list would crash a plot or a percentile); BadInput names
    the entry (``results[3].samples_ms[7]``) and the file."""
    from ..util.datafile import finite_samples

    if not isinstance(items, list):
        raise BadInput(f"results: expected a list, not {type(items).__name__}", path=path)
    out = []
    for i, item in enumerate(items):
        where = f"results[{i}]"
        if not isinstance(item, dict):
            raise BadInput(f"{where}: expected an object, not {type(item).__name__}", path=path)
        stages = item.get("stage_samples_ms", {})
        try:
            finite_samples(item.get("samples_ms"), f"{where}.samples_ms")
            if not isinstance(stages, dict):
                raise BadInput(f"{where}.stage_samples_ms: expected an object")
            for name, values in stages.items():
                finite_samples(values, f"{where}.stage_samples_ms.{name}")
            check_entry_fields(item, where)
            out.append(BenchResult.from_json(item))
        except BadInput as err:
            raise BadInput(err.message, path=path) from err
        except (KeyError, TypeError, ValueError, AttributeError) as err:
            raise BadInput(f"{where}: damaged ({type(err).__name__}: {err})", path=path) from err
    return out


def read_json(path: Path) -> dict[str, Any]:
    """A JSON object from ``path``, with one-line errors for a missing, unreadable or non-object file."""
    path = Path(path)
    if path.is_dir():
        raise BadInput("is a directory; give the results JSON inside it (e.g. results.json)", path=path)
    if not path.is_file():
        raise BadInput("no such results file", path=path)
    from ..util.datafile import load_json

    data = load_json(path, "results file")  # size, nesting and UTF-8 bounded: one line, not a traceback
    if not isinstance(data, dict):
        raise BadInput(f"not a trtprof results file (a JSON {type(data).__name__}, not an object)", path=path)
    return data


def csv_columns(results: Sequence[BenchResult]) -> list[str]:
    stages = sorted({s for r in results for s in r.stats}, key=lambda s: (s != "latency_ms", s))
    cols = ["engine_label", "model", "precision", "effective_precision", "backend", "batch_size", "throughput_per_s"]
    for stage in stages:
        cols += [f"{stage}.{k}" for k in CSV_STATS]
    return cols + ["artifact_bytes", "memory_in_use_bytes", "warmup", "iterations", "duration_s", "copies",
                   "cuda_graph", "engine"]


def to_csv(results: Sequence[BenchResult]) -> str:
    cols = csv_columns(results)
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=cols, lineterminator="\n")
    writer.writeheader()
    for r, label in zip(results, engine_labels(results)):
        row: dict[str, Any] = {
            "engine_label": label,
            "model": r.model,
            "precision": r.precision,
            "effective_precision": r.engine.get("effective_precision", r.precision),
            "backend": r.backend,
            "batch_size": r.batch_size,
            "throughput_per_s": f"{r.throughput_per_s:.6g}",
            "engine": r.engine.get("artifact", ""),
            "artifact_bytes": r.engine.get("artifact_bytes", ""),
            "memory_in_use_bytes": "" if in_use_bytes(r.memory) is None else in_use_bytes(r.memory),
        }
        for stage, s in r.stats.items():
            for k in CSV_STATS:
                row[f"{stage}.{k}"] = f"{getattr(s, k):.6g}" if isinstance(getattr(s, k), float) else getattr(s, k)
        for k in ("warmup", "iterations", "duration_s", "copies", "cuda_graph"):
            row[k] = r.config.get(k, "")
        writer.writerow({k: csv_cell(v) for k, v in row.items()})  # a model named "=cmd|…" stays text
    return out.getvalue()
