"""A compare result as one value: ``CompareDocument``, what ``trtprof compare`` prints, saves and
``report`` renders, and ``CompareReport``, the live comparison it is made from.

Why one value (issue 41, item 2): the CLI printed from one JSON and saved another a moment later, and
``to_json`` read the clock, so the two differed. Now the live ``CompareReport`` is ``seal``ed (the
budget spent fixed once), ``document()`` makes the ``CompareDocument``, and the CLI prints that value's
comparisons and writes that value's ``to_json``, which reads nothing but the value.

A ``CompareDocument`` read from a file (``from_json``) is checked once (``compare.checks``: the types of
every field a page renders) and keeps every key it does not type, top level (``blocks``) and in each
comparison (``ComparisonResult.extra``) and result (``BenchResult.extra``), so ``to_json`` writes a
newer writer's keys back unchanged.
"""
from __future__ import annotations

import json
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Mapping, Protocol, Sequence

from ..errors import BadInput
from ..measure.budget import TimeBudget
from ..measure.interleave import STOP_CONFIDENCE, RoundPlan
from ..measure.results import BenchResult, results_from_json
from ..schemas import COMPARE as SCHEMA
from ..stats.speedup import CONFIDENCE, ENGINE_METHOD, METHOD
from ..system.validity import merge as merge_validity
from ..util.files import atomic_write_text
from .checks import check_compare, check_page_objects, check_stamps
from .options import ISOLATION_PROCESS
from .result import ComparisonResult

TYPED = ("comparisons", "results")  # the top-level keys a CompareDocument holds typed; the rest are ``blocks``


@dataclass(frozen=True)
class CompareDocument:
    """One compare file's content. ``comparisons`` and ``results`` typed; ``blocks``: every other
    top-level key (schema, model, settings, environment, warnings, layers, timeline, serving, budget, an
    A/B's ``ab``, and any key a newer writer added) as JSON, in the file's order; ``order``: where the
    two typed lists sit among them (``to_json`` writes the keys in the order they were read)."""

    comparisons: tuple[ComparisonResult, ...]
    results: tuple[BenchResult, ...]
    blocks: Mapping[str, Any] = field(default_factory=dict)
    order: tuple[str, ...] = ()

    @property
    def schema(self) -> str:
        return str(self.blocks.get("schema", ""))

    @property
    def model(self) -> str:
        return self.blocks.get("model") or ""

    @property
    def backend(self) -> str:
        return self.blocks.get("backend") or ""

    @property
    def warnings(self) -> list[str]:
        return list(self.blocks.get("warnings") or [])

    @property
    def layers(self) -> Mapping[str, Any]:
        return self.blocks.get("layers") or {}

    def to_json(self) -> dict[str, Any]:
        """The file's JSON; pure (it reads only this value)."""
        typed = {"comparisons": [c.to_json() for c in self.comparisons],
                 "results": [r.to_json() for r in self.results]}
        keys = list(self.order) + [k for k in (*self.blocks, *TYPED) if k not in self.order]
        return {k: typed[k] if k in typed else self.blocks[k] for k in keys}

    def write_json(self, path: Path) -> None:
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_text(path, json.dumps(self.to_json(), indent=1, allow_nan=True) + "\n")

    @classmethod
    def from_json(cls, data: Mapping[str, Any], path: Path) -> CompareDocument:
        """A compare file's JSON (schemas.COMPARE_READABLE), checked once: a field of the wrong type is one
        BadInput line naming it and ``path``."""
        check_compare(data, path)  # types of every rendered field, before any is rendered (issue 36)
        check_stamps(data, path)
        check_page_objects(data, path)
        results = results_from_json(data.get("results", []), path)
        try:
            comparisons = [ComparisonResult.from_json(c) for c in data.get("comparisons") or []]
        except (KeyError, TypeError, ValueError, AttributeError) as err:
            raise BadInput(f"a comparison entry is incomplete ({type(err).__name__}: {err})", path=path) from err
        return cls(comparisons=tuple(comparisons), results=tuple(results),
                   blocks={k: v for k, v in data.items() if k not in TYPED}, order=tuple(data))


class LiveComparison(Protocol):
    """What ``CompareReport`` needs of a ``core.Comparison`` (named here, not imported: core imports this)."""

    batch_size: int

    @property
    def validity(self) -> Any: ...

    def result(self) -> ComparisonResult: ...


@dataclass
class CompareReport:
    model: str
    backend: str
    plan: RoundPlan
    comparisons: Sequence[LiveComparison]  # core.Comparison, one per candidate × batch size
    results: list[BenchResult]  # one per precision × batch size (raw samples inside)
    environment: dict[str, Any]
    created: str = ""
    device_peak: dict[str, Any] | None = None
    warnings: list[str] = field(default_factory=list)
    isolation: str = ISOLATION_PROCESS
    layers: dict[int, Any] = field(default_factory=dict)  # batch → layers.LayerTable (compare --layers)
    interrupted: bool = False  # Ctrl-C/SIGTERM: the comparisons are the batch sizes finished before it
    pending: list[int] = field(default_factory=list)  # batch sizes not measured because of the interrupt
    serving: dict[str, Any] | None = None  # --concurrency sweep and --slo-ms verdicts (trtprof.serving.sweep)
    budget: dict[str, Any] = field(default_factory=dict)  # Measured.budget_account: what the time budget covered
    time_budget: TimeBudget | None = None  # the budget it ran under (began: its start fixed)
    lost: str = ""  # a measurement worker died: which load and how (the CLI exits 2 with it)
    partial: list[int] = field(default_factory=list)  # batch sizes kept from the rounds before that death
    timeline: dict[str, Any] | None = None  # compare --timeline: compare.timeline.record_timelines's block
    concurrent: dict[str, Any] = field(default_factory=dict)  # measure.concurrent.record: what ran beside the timing
    spent_s: float | None = None  # the budget spent, fixed by seal(): to_json reads no clock once sealed

    def seal(self) -> "CompareReport":
        """Fix what the report says about time (the budget spent, after measuring, the analysis and any
        serving sweep), so that every ``to_json`` after it — the printed result and the saved file — is the
        same value (issue 41: the printed and the saved result differed by the clock read in between)."""
        if self.time_budget is not None and self.spent_s is None:
            self.spent_s = round(self.time_budget.elapsed_s(time.perf_counter()), 3)
        return self

    def document(self) -> CompareDocument:
        """The result as one value (what the CLI prints and saves). Pure once ``seal``ed (the CLI seals
        before it makes it); before that the budget spent is read now."""
        extra: dict[str, Any] = {"layers": {str(b): t.to_json() for b, t in self.layers.items()}} if self.layers else {}
        if self.timeline is not None:
            extra["timeline"] = self.timeline
        if self.serving is not None:
            extra["serving"] = self.serving
        if self.budget:  # spent: after measuring and the analysis (fixed by seal())
            spent = self.spent_s
            if spent is None and self.time_budget is not None:
                spent = round(self.time_budget.elapsed_s(time.perf_counter()), 3)
            extra["budget"] = {**self.budget, "spent_s": spent}
        head = {"schema": SCHEMA, "created": self.created, "model": self.model, "backend": self.backend,
                "settings": {**self.plan.to_json(), "min_rounds": self.plan.min_rounds, "confidence": CONFIDENCE,
                             "stop_confidence": STOP_CONFIDENCE, "isolation": self.isolation,
                             "method": {"speedup": METHOD, "median_ci": ENGINE_METHOD}},
                **({"validity": merge_validity([c.validity for c in self.comparisons]).to_json()}
                   if any(c.validity is not None for c in self.comparisons) else {})}
        middle = {"warnings": list(self.warnings), "device_peak": self.device_peak, "environment": self.environment}
        tail = {"interrupted": self.interrupted, "pending_batch_sizes": list(self.pending),
                "worker_lost": self.lost or None, "concurrent_with_timing": self.concurrent or None, **extra}
        comparisons = tuple(self.comparison_result(c) for c in self.comparisons)
        return CompareDocument(comparisons=comparisons, results=tuple(self.results), blocks={**head, **middle, **tail},
                               order=(*head, "comparisons", *middle, "results", *tail))

    def comparison_result(self, c: LiveComparison) -> ComparisonResult:
        """One comparison's typed result; a batch size kept from before a worker died says ``partial``."""
        result = c.result()
        return replace(result, extra={**result.extra, "partial": True}) if c.batch_size in self.partial else result

    def to_json(self) -> dict[str, Any]:
        return self.document().to_json()

    def write_json(self, path) -> None:
        self.document().write_json(path)
