"""One comparison's result (one candidate against the baseline at one batch size) as a typed value:
what ``trtprof compare`` prints and what the pages show, read by attribute, and what the JSON holds,
its serialised form (``to_json``/``from_json``, round-trip tested on committed compare files).

torch.utils.benchmark's ``Measurement`` is both the object and what is saved; this is the same idea for
compare's ``comparisons`` entries (issue 32: the CLI printed a dict by string keys). The live
``comparison.Comparison`` (raw samples, Speedup, BenchResults) makes one with ``result()``; the schema
(``schemas.COMPARE``) is unchanged. The accuracy block, the shapes, the roofline and the half-widths stay
plain JSON objects (their writers own their fields); keys this type does not know (a newer writer's)
are kept in ``extra`` and written back unchanged.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Mapping

from ..diagnose.findings import Finding
from .verdict_words import ShownVerdict, loads_from_stamp, shown_verdict


@dataclass(frozen=True)
class SpeedupSummary:
    """The speedup with its CI as printed; ``fields``: the whole JSON object (method, SE, df,
    variance components, …), written back as read."""

    estimate: float
    ci_low: float
    ci_high: float
    fields: Mapping[str, Any] = field(default_factory=dict)

    @property
    def median_ratio(self) -> float | None:
        return self.fields.get("median_ratio")

    @property
    def mean_ratio(self) -> float | None:
        return self.fields.get("mean_ratio")

    def to_json(self) -> dict[str, Any]:
        return {**self.fields, "estimate": self.estimate, "ci_low": self.ci_low, "ci_high": self.ci_high}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> SpeedupSummary:
        return cls(estimate=float(data["estimate"]), ci_low=float(data["ci_low"]), ci_high=float(data["ci_high"]),
                   fields=dict(data))


LATENCY_KEYS = ("precision", "effective_precision", "median_ms", "ci_low_ms", "ci_high_ms", "n", "cv",
                "stage_medians_ms", "engine")


@dataclass(frozen=True)
class ArmLatency:
    """One side's median latency with its CI (ms), what it ran as, and its engine."""

    precision: str
    effective_precision: str
    median_ms: float
    ci_low_ms: float
    ci_high_ms: float
    n: int
    cv: float
    stage_medians_ms: Mapping[str, float] = field(default_factory=dict)
    engine: str = ""
    extra: Mapping[str, Any] = field(default_factory=dict)

    @property
    def ci_defined(self) -> bool:
        """Whether its median has an interval (compare's per-arm interval needs 6 loads at 95 %:
        ``stats.speedup.engine_median_ci``; NaN bounds say it is not defined)."""
        return math.isfinite(self.ci_low_ms) and math.isfinite(self.ci_high_ms)

    def to_json(self) -> dict[str, Any]:
        return {"precision": self.precision, "effective_precision": self.effective_precision,
                "median_ms": self.median_ms, "ci_low_ms": self.ci_low_ms, "ci_high_ms": self.ci_high_ms,
                "n": self.n, "cv": self.cv, "stage_medians_ms": dict(self.stage_medians_ms), "engine": self.engine,
                **self.extra}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> ArmLatency:
        nan = math.nan
        return cls(precision=data.get("precision", ""),
                   effective_precision=data.get("effective_precision", data.get("precision", "")),
                   median_ms=data.get("median_ms", nan), ci_low_ms=data.get("ci_low_ms", nan),
                   ci_high_ms=data.get("ci_high_ms", nan), n=data.get("n", 0), cv=data.get("cv", nan),
                   stage_medians_ms=dict(data.get("stage_medians_ms") or {}), engine=data.get("engine", ""),
                   extra={k: v for k, v in data.items() if k not in LATENCY_KEYS})


# The JSON keys of one comparison, in the order they are written (schemas.COMPARE).
KEYS = ("batch_size", "baseline", "candidate", "speedup", "verdict", "verdict_shown", "provisional", "provisional_reason",
        "validity", "accuracy", "diagnosis", "verdict_note", "shape", "latency", "loads", "min_loads", "rounds",
        "stop_reason", "round_ratios", "median_ci_half_width", "roofline")
SIDES = ("baseline", "candidate")


@dataclass(frozen=True)
class ComparisonResult:
    """One ``comparisons`` entry of a compare JSON. ``latency``: side ("baseline", "candidate") →
    ``ArmLatency`` (absent in files that never had it); ``rounds``: None where a file did not say."""

    batch_size: int
    baseline: str
    candidate: str
    speedup: SpeedupSummary
    verdict: str
    validity: Mapping[str, Any] | None = None  # system.validity.Validity's JSON; absent before it existed
    accuracy: Mapping[str, Any] | None = None
    diagnosis: tuple[Finding, ...] = ()
    verdict_note: str = ""
    shape: Mapping[str, Any] = field(default_factory=dict)
    latency: Mapping[str, ArmLatency] = field(default_factory=dict)
    loads: int = 1
    rounds: int | None = None
    stop_reason: str = ""
    round_ratios: tuple[float, ...] = ()
    median_ci_half_width: Mapping[str, float] = field(default_factory=dict)
    roofline: Mapping[str, Any] = field(default_factory=dict)
    extra: Mapping[str, Any] = field(default_factory=dict)
    min_loads: int | None = None  # the VALID minimum it ran against (None: a file from before it was recorded)
    loads_known: bool = True  # False: a file that did not say (compare/1): ``loads`` is a default, never provisional

    def shown(self) -> ShownVerdict:
        """The verdict as it may be shown (``verdict_words``): provisional below the minimum loads (from
        ``min_loads``, or an older file's stamp), qualified when the accuracy is BROKEN."""
        loads, least = (None, None) if not self.loads_known else (self.loads, self.min_loads) \
            if self.min_loads is not None else (loads_from_stamp(self.validity) or (None, None))
        return shown_verdict(self.verdict, loads=loads, min_loads=least,
                             accuracy=((self.accuracy or {}).get("verdict") or {}).get("verdict"))

    def label(self, side: str) -> str:
        """The arm's label (``fp16``, an A/B arm's ``fp16+pad-channels``, an A/A's ``fp32#2``)."""
        return self.baseline if side == "baseline" else self.candidate

    def effective_label(self, side: str) -> str:
        """``fp16 (effective fp32+casts)`` when the engine did not compute in the asked precision: an ONNX
        Runtime CPU "fp16" that is slower is a cast-and-FP32 result, not FP16's."""
        asked, lat = self.label(side), self.latency.get(side)
        if lat is None or not lat.effective_precision or lat.effective_precision == (lat.precision or asked):
            return asked
        return f"{asked} (effective {lat.effective_precision})"

    @property
    def nonfinite(self) -> int | None:
        return (self.accuracy or {}).get("nonfinite")

    def to_json(self) -> dict[str, Any]:
        shown = self.shown() if self.min_loads is not None and self.loads_known else None  # a writer that knew it
        return {"batch_size": self.batch_size, "baseline": self.baseline, "candidate": self.candidate,
                "speedup": self.speedup.to_json(), "verdict": self.verdict,
                **({"verdict_shown": shown.words, "provisional": shown.provisional,
                    "provisional_reason": shown.provisional_reason} if shown is not None else {}),
                **({"validity": dict(self.validity)} if self.validity is not None else {}),
                "accuracy": dict(self.accuracy) if self.accuracy is not None else None,
                "diagnosis": [f.to_json() for f in self.diagnosis], "verdict_note": self.verdict_note,
                "shape": dict(self.shape), "latency": {k: v.to_json() for k, v in self.latency.items()},
                "loads": self.loads, **({"min_loads": self.min_loads} if self.min_loads is not None else {}),
                "rounds": self.rounds, "stop_reason": self.stop_reason,
                "round_ratios": list(self.round_ratios), "median_ci_half_width": dict(self.median_ci_half_width),
                "roofline": dict(self.roofline), **self.extra}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> ComparisonResult:
        """One entry as written by ``to_json`` (schemas.COMPARE), or by an older writer (COMPARE_V1, the
        imported-trtexec compare): what it lacks takes the defaults the pages always assumed."""
        return cls(
            batch_size=int(data["batch_size"]), baseline=data["baseline"], candidate=data["candidate"],
            speedup=SpeedupSummary.from_json(data["speedup"]), verdict=data["verdict"],
            validity=dict(data["validity"]) if data.get("validity") is not None else None,
            accuracy=dict(data["accuracy"]) if data.get("accuracy") is not None else None,
            diagnosis=tuple(Finding(f["rule"], f["message"], dict(f.get("evidence") or {}))
                            for f in data.get("diagnosis") or ()),
            verdict_note=data.get("verdict_note") or "", shape=dict(data.get("shape") or {}),
            latency={side: ArmLatency.from_json(v) for side, v in (data.get("latency") or {}).items()},
            loads=data.get("loads", 1), rounds=data.get("rounds"), stop_reason=data.get("stop_reason", ""),
            min_loads=data["min_loads"] if type(data.get("min_loads")) is int else None, loads_known="loads" in data,
            round_ratios=tuple(data.get("round_ratios") or ()),
            median_ci_half_width=dict(data.get("median_ci_half_width") or {}),
            roofline=dict(data.get("roofline") or {}),
            extra={k: v for k, v in data.items() if k not in KEYS})
