"""How to compare and who hears what: ``CompareOptions`` (the settings a comparison carries whole through
its phases), ``CompareHooks`` (the CLI's listeners), ``BuildTally`` (the engine builds the time budget
leaves out) and the isolation modes of the loads."""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, Callable, Mapping

from .. import backends
from ..errors import BackendUnavailable, BadInput
from ..measure.budget import BudgetStart, TimeBudget
from ..measure.interleave import InterleavedOutcome, Progress, RoundPlan
from ..model.inputs import DEFAULT_INT_RANGE

ISOLATION_PROCESS = "process"  # every load a fresh worker process (default)
ISOLATION_IN_PROCESS = "in-process"  # loads re-created in this process (fakes; backends that cannot be spawned)
ISOLATION_SERIAL = "serial"  # load i of every batch size one worker process living alone (measure.serial_loads): --serial-loads


@dataclass(frozen=True)
class CompareOptions:
    """How to compare, carried whole through the phases of ``compare_records`` (torch.utils.benchmark
    carries one frozen spec per measurement the same way): one object to log, test and pass on
    instead of a dozen loose parameters.

    ``shapes``: input shape overrides (name → shape); ``seed``/``int_range``: the random inputs;
    ``data`` (user_inputs.InputData) replaces them: accuracy runs on its samples as far as its share of the
    budget allows (``accuracy_pass``), timing on its first batch; ``accuracy_samples`` (``--accuracy-samples``:
    "all", or a number) insists on every sample, or the first N, whatever the budget (None: bounded by it);
    ``budget_start`` (measure.budget.BudgetStart): where the time budget (its seconds:
    ``plan.time_budget_s``, carried there only) counts from and what its end's reserve is a multiple of (the
    CLI: its process's start and imports; ``compare_model`` leaves the engine builds out; default: from when
    ``compare_records`` begins, the reserve a multiple of the launch up to it); ``accuracy_budget`` (accuracy.AccuracyBudget; default ``DEFAULT_BUDGET``) gives every
    candidate its accuracy verdict; ``isolation``: every load a worker process (``device`` sets its
    CUDA_VISIBLE_DEVICES), started side by side or one after another (``ISOLATION_SERIAL``), or fresh in-process
    runners; ``layers``: also profile every engine layer by
    layer after the timing."""

    plan: RoundPlan = RoundPlan()
    shapes: Mapping[str, tuple[int, ...]] | None = None
    seed: int = 0
    int_range: tuple[int, int] | None = None
    isolation: str = ISOLATION_PROCESS
    device: str | None = None
    layers: bool = False
    accuracy_budget: Any = None
    output_pairs: Mapping[str, Mapping[str, str]] | None = None  # arm → {its output: baseline's} (A/B by position)
    data: Any = None
    accuracy_samples: int | str | None = None  # --accuracy-samples: "all", N, or None (bounded by the budget)
    budget_start: BudgetStart | None = None  # where plan.time_budget_s counts from (its one carrier: the plan)
    timeline: Any = None  # compare.timeline.TimelineRequest: one batch size's timelines after the timing

    @property
    def ints(self) -> tuple[int, int]:
        return self.int_range or DEFAULT_INT_RANGE

    @property
    def time_budget(self) -> TimeBudget:
        """``plan.time_budget_s`` from ``budget_start``, else from when the comparison begins."""
        return (self.budget_start or BudgetStart()).budget(self.plan.time_budget_s)

    def leaving_out(self, seconds: float) -> CompareOptions:
        """These options with ``seconds`` (engine builds: a one-off) left out of the time budget."""
        return replace(self, budget_start=(self.budget_start or BudgetStart()).leaving_out(seconds))


class BuildTally:
    """An ``on_built`` hook that adds up the seconds of the engines really built (the time budget
    leaves them out) and passes every outcome on to ``on_built``."""

    def __init__(self, on_built: Callable[[Any], None] | None = None) -> None:
        self.on_built, self.seconds = on_built, 0.0

    def __call__(self, outcome: Any) -> None:
        self.seconds += outcome.seconds if outcome.built else 0.0
        if self.on_built is not None:
            self.on_built(outcome)


@dataclass(frozen=True)
class CompareHooks:
    """Who hears what while a comparison runs (the CLI prints them): ``on_built`` each engine built or
    found, ``on_progress`` every look of the stopping rule, ``on_batch`` each batch size once decided."""

    on_built: Callable[[Any], None] | None = None
    on_progress: Callable[[int, Progress], None] | None = None
    on_batch: Callable[[int, InterleavedOutcome], None] | None = None
    on_budget: Callable[[int, str], None] | None = None  # before a batch size's rounds: its budget's line
    on_note: Callable[[str], None] | None = None  # a one-off line before the rounds (loads lowered to fit memory)
    on_startup: Callable[[str], None] | None = None  # each part of the start-up as it begins (StartupLog's lines)


def default_isolation(backend: str) -> str:
    """The loads compare runs without ``--in-process``/``--serial-loads``/``--side-by-side-loads``: lone worker
    processes (``ISOLATION_SERIAL``) for a backend whose capabilities say so (``Capabilities.lone_loads``;
    ``auto``: the backend it picks here), else worker processes side by side."""
    try:
        picked = backends.resolve(backend) if backend == "auto" else backends.get(backend)
    except (BadInput, BackendUnavailable):
        return ISOLATION_PROCESS
    return ISOLATION_SERIAL if picked.capabilities.lone_loads else ISOLATION_PROCESS


def budget_line(hooks: CompareHooks, batch: int, backend: str) -> Callable[[str], None] | None:
    """The budget's line for ``batch`` (``BatchWindow.fitted``: the budget grew for the loads, or cannot hold
    them), with the backend's word on why its loads cost seconds where it has one (``Capabilities.costly_loads``:
    torch's cuDNN autotuning, issue 43)."""
    on_budget = hooks.on_budget
    if on_budget is None:
        return None
    why = backends.capabilities(backend).costly_loads

    def line(text: str) -> None:
        on_budget(batch, f"{text}; {why}" if why else text)

    return line
