"""The whole training comparison: per batch size, an accuracy/memory/reasons pass per arm (each arm
alone), then every arm's step interleaved by compare's loop (``interleave.run_one_load``) and judged by compare's
``speedup_ci`` and ``verdict`` — the same statistics as the inference verdict, not a copy of them.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

import numpy as np

from ..errors import BadInput
from ..measure.interleave import Arm, InterleavedOutcome, RoundPlan, run_one_load
from ..schemas import TRAIN_COMPARE as SCHEMA
from ..stats.speedup import CONFIDENCE
from ..stats.latency import median_ci_exact
from ..system import nvml
from ..system.noise import cpu_state
from ..system.validity import Facts, Validity, assess, merge as merge_validity

DEFAULT_STEPS = 20  # accuracy side: loss after this many steps per arm, same seed and data
# A speedup whose 95 % CI spans more than this factor (high / low) says nothing about the speed of
# either arm (a loaded CPU gave 0.012 … 2383): reported as "not measurable here", not as a speedup.
MAX_CI_RATIO = 2.0
NOT_MEASURABLE = "not measurable here"


def unmeasurable_reason(ci_low: float, ci_high: float, device: str) -> str | None:
    """Why a speedup CI is not a measurement (None when it is one)."""
    if not (math.isfinite(ci_low) and math.isfinite(ci_high)) or ci_low <= 0:
        return f"the 95 % CI [{ci_low:.3g}, {ci_high:.3g}] is not a finite positive interval"
    if ci_high / ci_low > MAX_CI_RATIO:
        where = "this CPU's step times vary too much" if device == "cpu" else "the step times vary too much"
        return (f"the 95 % CI [{ci_low:.3g}, {ci_high:.3g}] spans a factor {ci_high / ci_low:.3g} (> {MAX_CI_RATIO:g}): "
                f"{where} between rounds for a speedup to be measured here")
    return None


@dataclass(frozen=True)
class TrainOptions:
    """How to train and compare, carried whole (as compare's ``CompareOptions``)."""

    optimizer: str = "adam"
    loss: str = "mae-to-ones"
    steps: int = DEFAULT_STEPS
    seed: int = 0
    find_max_batch: bool = False
    max_batch_limit: int = 4096
    reasons: bool = True
    autotune: bool = True  # cuDNN autotuning (cudnn.benchmark) in every arm, tuned before timing
    # Where and on what, as CompareOptions carries them (not in ``to_json``: the document records the device
    # and the inputs on their own): "auto"/"cpu"/"cuda"; input shape overrides (``--shape``); the user's
    # inputs (user_inputs.InputData, ``--inputs``: its first batch instead of random inputs).
    device: str = "auto"
    shapes: Mapping[str, tuple[int, ...]] | None = None
    data: Any = None

    def __post_init__(self) -> None:
        if self.steps < 1:
            raise BadInput("--steps must be >= 1")
        if self.max_batch_limit < 1:
            raise BadInput("--max-batch-limit must be >= 1")

    def to_json(self) -> dict[str, Any]:
        return {"optimizer": self.optimizer, "loss": self.loss, "accuracy_steps": self.steps, "seed": self.seed,
                "find_max_batch": self.find_max_batch, "max_batch_limit": self.max_batch_limit,
                "autotune": self.autotune}


@dataclass
class ArmRun:
    """What the solo pass of one arm found (before the timed rounds)."""

    losses: list[float]
    skipped_steps: int | None
    memory: dict[str, Any] | None = None
    profile: Any = None  # reasons.StepProfile
    extra: dict[str, Any] | None = None  # framework-specific evidence (Keras: layer policies)

    def to_json(self) -> dict[str, Any]:
        finite = [x for x in self.losses if math.isfinite(x)]
        return {"loss_first": self.losses[0] if self.losses else None,
                "loss_last": self.losses[-1] if self.losses else None,
                "losses": self.losses, "steps": len(self.losses), "all_finite": len(finite) == len(self.losses),
                "skipped_steps": self.skipped_steps, "memory": self.memory,
                "profile": self.profile.to_json() if self.profile is not None else None,
                **({"framework": self.extra} if self.extra else {})}


@dataclass(frozen=True)
class TrainHooks:
    """Who hears what while a training comparison runs (the CLI prints them), as compare's ``CompareHooks``:
    ``on_arm`` each arm's solo pass (batch size, arm, ArmRun), ``on_batch`` each batch size's timed rounds."""

    on_batch: Callable[[int, InterleavedOutcome], None] | None = None
    on_arm: Callable[[int, str, ArmRun], None] | None = None


@dataclass(frozen=True)
class TrainWorkload:
    """The model as ``compare_training`` runs it: its name in the document, the batch sizes, the input
    shapes at a batch size (every one checked before any step runs) and the feeds for those shapes."""

    name: str
    batch_sizes: Sequence[int]
    shapes_for: Callable[[int], Mapping[str, tuple[int, ...]]]
    make_feeds: Callable[[Mapping[str, tuple[int, ...]]], Mapping[str, np.ndarray]]


@dataclass
class _BatchRun:
    """One batch size measured: its shapes, every arm's solo pass, the interleaved rounds and their medians."""

    batch: int
    shapes: Mapping[str, tuple[int, ...]]
    solo: Mapping[str, ArmRun]
    outcome: InterleavedOutcome
    timed: list[Arm]

    @property
    def medians(self) -> dict[str, float]:
        return {a.name: float(np.median(a.latency_ms)) for a in self.timed}


class Trainer:
    """What differs between frameworks: making a runner per arm, its solo pass, the environment."""

    framework = ""
    device = "cpu"
    # its steps run with cuDNN autotuning as ``--autotune`` says where ``device`` is "cuda" (torch): the settings
    # record it as ``cudnn_benchmark`` (None where it does not apply)
    cudnn_autotune = False
    inputs: tuple = ()

    def make_runner(self, arm: Any) -> Any:
        raise NotImplementedError

    def solo(self, arm: Any, runner: Any, feeds: Mapping[str, np.ndarray], steps: int, reasons: bool) -> ArmRun:
        raise NotImplementedError

    def max_batch(self, arm: Any, make_feeds: Callable[[int], Mapping[str, np.ndarray]], limit: int, *,
                  start: int = 1, resolution: float = 0.1) -> dict[str, Any] | None:
        return None

    def findings(self, base: ArmRun, cand: ArmRun, *, peer: tuple[ArmRun, float] | None, steps: int,
                 timed_ms: float | None = None) -> list[Any]:
        return []

    def environment(self) -> dict[str, Any]:
        return {}

    def release(self) -> None:
        pass


ENQUEUE_NOTE = ("host enqueue time ≈ GPU time: in a training step the host also waits inside the step (GradScaler's "
                "inf check reads a flag back; with many kernels per step the launch queue can be full), so this alone does not "
                "mean the GPU idles; the launch_bound reason (profiler: share of the step with a kernel running) says "
                "whether it does")


def training_notes(notes: Sequence[str]) -> list[str]:
    """The timing loop's notes, with its inference-minded enqueue-bound advice (``--cuda-graph``)
    replaced by what that observation means for a training step."""
    return [f"{ENQUEUE_NOTE} [{n.split('(in ')[-1].rstrip(')')}]" if n.startswith("enqueue-bound") and "(in " in n
            else (ENQUEUE_NOTE if n.startswith("enqueue-bound") else n) for n in notes]


def _side(name: str, arm: Arm) -> dict[str, Any]:
    lat = arm.latency_ms
    low, high = median_ci_exact(lat)
    return {"precision": name, "median_ms": float(np.median(lat)), "ci_low_ms": low, "ci_high_ms": high,
            "n": int(lat.size), "cv": float(np.std(lat, ddof=1) / np.mean(lat)) if lat.size > 1 else 0.0,
            "stage_medians_ms": {k: float(np.median(v)) for k, v in arm.pooled().items()}}


def _result(model: str, backend: str, arm: Arm, run: _BatchRun, plan: RoundPlan, options: TrainOptions,
            arm_json: dict) -> Any:
    from ..measure.results import BenchResult

    clock = "perf_counter_ns" if arm.runner.device == "cpu" else "cuda_events"
    outcome = run.outcome
    return BenchResult.from_samples(
        stages=arm.pooled(), span_s=arm.span_s, batch_size=run.batch, model=model, precision=arm.name, backend=backend,
        engine={"artifact": "", "effective_precision": arm.name, "train_arm": arm_json},
        config={"interleaved": True, "training_step": True, "rounds": outcome.rounds,
                "round_iterations": outcome.round_iterations[arm.name], "warmup_done": arm.warmup_done,
                "target_ci": plan.target_ci, "time_budget_s": plan.time_budget_s, "stop_reason": outcome.stop_reason,
                "copies": plan.copies if clock == "cuda_events" else None,
                "cuda_graph": bool(arm_json.get("graphed")), "clock": clock,
                "input_shapes": {k: list(v) for k, v in run.shapes.items()}, **options.to_json()},
        warnings=training_notes(arm.notes), device=arm.device)


def comparison_pairs(arms: Sequence[Any]) -> list[tuple[str, str]]:
    """Baseline vs every candidate, and every graphed arm vs its eager arm when that is a candidate
    too (``amp-bf16+graphed`` vs ``amp-bf16``: what CUDA graphs change, measured)."""
    names = [a.name for a in arms]
    pairs = [(names[0], n) for n in names[1:]]
    for arm in arms[1:]:
        eager = getattr(arm, "eager_name", arm.name)
        if getattr(arm, "graphed", False) and eager in names[1:]:
            pairs.append((eager, arm.name))
    return pairs


def pair_speedup(outcome: InterleavedOutcome, baseline: str, cand: str) -> Any:
    """``cand`` against ``baseline`` as of the loop's last look: the loop's own speedup against its
    baseline, else (a graphed arm against its eager arm) one taken from their blocks under the loop's
    margin (``plan.margin``, which every speedup of the loop carries): one margin for every verdict."""
    if baseline == outcome.arms[0].name:
        return outcome.speedups[cand]
    return outcome.speedup(baseline, cand, margin=outcome.speedups[cand].margin)


def _comparison(trainer: Trainer, run: _BatchRun, baseline: str, cand: str, options: TrainOptions,
                warnings: list[str]) -> dict[str, Any]:
    """One candidate against one baseline at one batch size: speedup, verdict (or why it is not
    measurable here), losses, memory, reasons."""
    outcome, solo, medians, batch = run.outcome, run.solo, run.medians, run.batch
    base_arm, cand_arm = outcome.arm(baseline), outcome.arm(cand)
    # One in-process load (training runners are stateful and built here): its rounds are the
    # clusters of the CI and the method says "one load only" (compare's schema-2 statistics);
    # the loop's speedup as of its last look, as compare reports it.
    speed = pair_speedup(outcome, baseline, cand)
    peer = None
    if cand == "amp-bf16" and "amp-fp16" in solo:
        peer = (solo["amp-fp16"], medians["amp-fp16"] / medians["amp-bf16"])
    findings = trainer.findings(solo[baseline], solo[cand], peer=peer, steps=options.steps, timed_ms=medians[cand])
    base_run, cand_run = solo[baseline], solo[cand]
    if not all(math.isfinite(x) for x in cand_run.losses) and all(math.isfinite(x) for x in base_run.losses):
        warnings.append(f"{cand} at batch {batch}: the loss became non-finite within {options.steps} steps where "
                        f"{baseline} stayed finite")
    speed_json = speed.to_json()
    unmeasurable = unmeasurable_reason(speed_json["ci_low"], speed_json["ci_high"], trainer.device)
    return {
        "batch_size": batch, "baseline": baseline, "candidate": cand,
        "speedup": speed_json, "verdict": NOT_MEASURABLE if unmeasurable else speed.verdict,
        **({"not_measurable": unmeasurable, "statistical_verdict": speed.verdict} if unmeasurable else {}),
        "latency": {"baseline": _side(baseline, base_arm), "candidate": _side(cand, cand_arm)},
        "accuracy": {"baseline_loss_last": base_run.losses[-1], "candidate_loss_last": cand_run.losses[-1],
                     "steps": options.steps, "candidate_skipped_steps": cand_run.skipped_steps,
                     "loss_ratio": (cand_run.losses[-1] / base_run.losses[-1]
                                    if base_run.losses[-1] not in (0.0,) and math.isfinite(base_run.losses[-1])
                                    else None)},
        "memory": {"baseline": base_run.memory, "candidate": cand_run.memory},
        "diagnosis": [f.to_json() for f in findings],
        "timing_notes": {"baseline": training_notes(base_arm.notes), "candidate": training_notes(cand_arm.notes)},
        "rounds": outcome.rounds, "stop_reason": outcome.stop_reason,
        "round_ratios": outcome.round_ratios(baseline, cand), "median_ci_half_width": outcome.half_widths,
    }


def _solo_pass(trainer: Trainer, arms: Sequence[Any], feeds: Mapping[str, np.ndarray], options: TrainOptions,
               on_arm: Callable[[str, ArmRun], None]) -> dict[str, ArmRun]:
    """Each arm alone: its loss curve, peak memory and the evidence for the reasons."""
    solo: dict[str, ArmRun] = {}
    for arm in arms:
        runner = trainer.make_runner(arm)
        try:
            solo[arm.name] = trainer.solo(arm, runner, feeds, options.steps, options.reasons)
        finally:
            runner.close()
            del runner
            trainer.release()
        on_arm(arm.name, solo[arm.name])
    return solo


def _measure_batch(trainer: Trainer, arms: Sequence[Any], plan: RoundPlan, options: TrainOptions,
                   workload: TrainWorkload, batch: int, hooks: TrainHooks) -> _BatchRun:
    """One batch size: every arm's solo pass, then every arm's step interleaved by compare's loop in one load."""
    shapes = workload.shapes_for(batch)
    feeds = workload.make_feeds(shapes)
    on_arm = hooks.on_arm
    solo = _solo_pass(trainer, arms, feeds, options, lambda name, run: on_arm(batch, name, run) if on_arm else None)
    runners = {arm.name: trainer.make_runner(arm) for arm in arms}
    try:
        timed = [Arm(name=arm.name, runner=runners[arm.name], feeds=feeds) for arm in arms]
        outcome = run_one_load(timed, plan)
    finally:
        for r in runners.values():
            r.close()
        runners.clear()
        trainer.release()
    if hooks.on_batch is not None:
        hooks.on_batch(batch, outcome)
    return _BatchRun(batch=batch, shapes=shapes, solo=solo, outcome=outcome, timed=timed)


def _batch_entry(trainer: Trainer, arms: Sequence[Any], run: _BatchRun, options: TrainOptions,
                 workload: TrainWorkload, first: bool) -> dict[str, Any]:
    """The document's entry for one batch size (with the largest batch each arm fits, once: ``first``)."""
    entry: dict[str, Any] = {"batch_size": run.batch, "arms": {a.name: run.solo[a.name].to_json() for a in arms},
                             "median_step_ms": run.medians, "rounds": run.outcome.rounds,
                             "stop_reason": run.outcome.stop_reason,
                             "round_medians_ms": {a.name: a.round_medians_ms for a in run.timed}}
    if options.find_max_batch and first:  # once: it does not depend on the batch size
        entry["max_batch"] = {}
        for arm in arms:
            entry["max_batch"][arm.name] = trainer.max_batch(
                arm, lambda b: workload.make_feeds(workload.shapes_for(b)), options.max_batch_limit)
    return entry


def run_settings(trainer: Trainer, plan: RoundPlan, options: TrainOptions) -> dict[str, Any]:
    """The result's "settings": the round plan and the options as the arms ran."""
    return {"target_ci": plan.target_ci, "time_budget_s": plan.time_budget_s,
            "round_iterations": plan.round_iterations, "min_rounds": plan.min_rounds,
            "confidence": CONFIDENCE, "equivalence_margin": plan.margin,
            "copies": plan.copies, "cuda_graph": False, **options.to_json(),
            # cuDNN autotuning as the arms ran (None: not applicable on this device/framework)
            "cudnn_benchmark": options.autotune if trainer.device == "cuda" and trainer.cudnn_autotune
            else None}


def compare_training(trainer: Trainer, arms: Sequence[Any], plan: RoundPlan, options: TrainOptions,
                     workload: TrainWorkload, hooks: TrainHooks = TrainHooks()) -> dict[str, Any]:
    """Run everything and return the JSON document (schema ``trtprof.train_compare/1``)."""
    from ..util.files import now_iso
    from ..system.environment import collect

    if plan.cuda_graph:
        raise BadInput("--cuda-graph: the timing loop does not capture a training step; add NAME+graphed to "
                       "--precisions (e.g. amp-bf16+graphed) for a CUDA-graphed step")
    backend = f"{trainer.framework}-train"
    comparisons: list[dict[str, Any]] = []
    results: list[Any] = []
    per_batch: list[dict[str, Any]] = []
    warnings: list[str] = []
    for b in workload.batch_sizes:  # every shape checked before any step runs
        workload.shapes_for(b)
    host_before = cpu_state()  # the load average before the steps, not one they raised (system.validity)
    arm_json = {a.name: a.to_json() for a in arms}
    for index, batch in enumerate(workload.batch_sizes):
        run = _measure_batch(trainer, arms, plan, options, workload, batch, hooks)
        results.extend(_result(workload.name, backend, arm, run, plan, options, arm_json[arm.name]) for arm in run.timed)
        for base, cand in comparison_pairs(arms):
            entry_json = _comparison(trainer, run, base, cand, options, warnings)
            stamp = train_validity(run.outcome, base, cand, plan, host_before, trainer.device)
            comparisons.append({**entry_json, "validity": stamp.to_json()})
        per_batch.append(_batch_entry(trainer, arms, run, options, workload, index == 0))
    env = collect()
    env["backend"] = trainer.environment()
    env.setdefault("host", {})["cpu_state"] = host_before
    return {
        "validity": merge_validity([Validity.from_json(c["validity"]) for c in comparisons]).to_json(),
        "schema": SCHEMA, "created": now_iso(), "model": workload.name, "backend": backend, "device": trainer.device,
        "arms": [a.to_json() for a in arms],
        "settings": run_settings(trainer, plan, options),
        "comparisons": comparisons,
        "batches": per_batch,
        "warnings": warnings,
        "environment": env,
        "results": [r.to_json() for r in results],
    }


def train_validity(outcome: InterleavedOutcome, baseline: str, cand: str, plan: RoundPlan,
                   cpu: Mapping[str, Any] | None, device: str) -> Validity:
    """One training comparison's stamp: the budget it ran under against what it spent, the GPU watch
    over both arms' blocks, and the host before the steps (a CPU run). One load by design (training
    runners are built in this process), so no minimum of loads is asked."""
    gpu = nvml.merge_watches(outcome.arm(baseline).watched, outcome.arm(cand).watched)
    return assess(Facts(budget_s=plan.time_budget_s, spent_s=outcome.elapsed_s, gpu=gpu, cpu=cpu,
                        host_timed=device == "cpu"))


def write_json(data: Mapping[str, Any], path: Path) -> None:
    import json

    from ..util.files import atomic_write_text

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(path, json.dumps(data, indent=1, allow_nan=True) + "\n")
