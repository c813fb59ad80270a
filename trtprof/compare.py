"""FP16 vs FP32 (or any precisions): interleaved rounds, a stopping rule, and a speedup with a CI.

Why interleaved: two back-to-back benchmarks see different clocks, temperatures and background
load, so "fp16 median / fp32 median" from two separate runs mixes the speedup with drift. Here every
precision runs one block of iterations per round, and the order alternates between rounds
(A B, B A, A B, …): slow drift and throttling hit every precision alike, and no precision is always
the one that runs right after a switch.

Statistics (pure functions, tested on synthetic samples with known answers):

* per precision, the median latency and a distribution-free 95 % CI of it (order statistics,
  ``median_ci_exact``) — cheap enough to recompute after every round for the stopping rule;
* the speedup ``median(baseline) / median(candidate)`` with a two-sample bootstrap CI
  (``speedup_ci``) and a verdict with a named equivalence margin.
"""
from __future__ import annotations

import re
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Sequence

import numpy as np

from . import timing
from .stats import median_ci_exact, relative_half_width
from .timing import Samples, TimingConfig

SCHEMA = "trtprof.compare/1"

CONFIDENCE = 0.95
DEFAULT_TARGET_CI = 0.01  # stop when every median's 95 % CI half-width is within ±1 % of it (issue 6)
DEFAULT_TIME_BUDGET_S = 20.0  # per batch size; CI-friendly on a 2-core CPU, enough rounds on a GPU
MIN_ROUNDS = 5  # never conclude from fewer rounds: one disturbed round must not decide the answer,
# and the round-cluster bootstrap (speedup_ci) needs MIN_CLUSTER_ROUNDS of them
DEFAULT_ROUND_S = 0.2  # one block per precision per round: short, so drift within a block is small
MIN_ROUND_ITERATIONS = 5  # a block of a very slow model still gives a median of several samples
MAX_ROUND_ITERATIONS = 2000  # a block of a very fast model stays short in samples (bootstrap memory)
ROUND_WARMUP = 2  # the first calls after another engine ran pay for cold caches; not steady state
FIRST_WARMUP = 10  # before the first round, per precision: at least this many calls …
FIRST_WARMUP_MS = 500.0  # … and this long (GPU clocks ramp from idle under load: FACTS.md)
# Rounds needed before the round-cluster bootstrap means anything: with 5 rounds there are 126
# distinct resamples, enough for a coarse 95 % interval; with fewer, only the i.i.d. CI is used.
MIN_CLUSTER_ROUNDS = 5
N_RESAMPLES = 1000  # bootstrap resamples: percentile CI endpoints stable to a few 1e-3 relative
BOOTSTRAP_ELEMENTS = 4_000_000  # resampled values held in memory at once (scipy's ``batch``)
# Above this many samples per precision the speedup bootstrap runs on a seeded random subsample:
# a smaller sample can only widen the CI (conservative), and it keeps the bootstrap to ~1 s.
MAX_BOOTSTRAP_SAMPLES = 5000
# A speedup whose CI lies within ±1 % of 1.0 is not one to act on: it is the size of the stopping
# target itself (each median is only known to ±1 %) and of drift that interleaving does not cancel.
EQUIVALENCE_MARGIN = 0.01

FASTER = "faster"
SLOWER = "slower"
NO_DIFFERENCE = "no measurable difference"


@dataclass(frozen=True)
class Speedup:
    """``median(baseline) / median(candidate)``: above 1 means the candidate is faster."""

    estimate: float
    ci_low: float
    ci_high: float
    confidence: float = CONFIDENCE
    method: str = "two-sample percentile bootstrap of the ratio of medians"

    @property
    def verdict(self) -> str:
        return verdict(self.ci_low, self.ci_high)

    def to_json(self) -> dict[str, Any]:
        return {"estimate": self.estimate, "ci_low": self.ci_low, "ci_high": self.ci_high,
                "confidence": self.confidence, "method": self.method}


def verdict(ci_low: float, ci_high: float, margin: float = EQUIVALENCE_MARGIN) -> str:
    """``faster`` only when the whole CI is above 1 + margin, ``slower`` when it is below
    1 / (1 + margin); otherwise (CI holds 1.0, or only a sub-margin change) no measurable difference."""
    if ci_low > 1.0 + margin:
        return FASTER
    if ci_high < 1.0 / (1.0 + margin):
        return SLOWER
    return NO_DIFFERENCE


def _ratio_of_medians(baseline: np.ndarray, candidate: np.ndarray, axis: int = -1) -> np.ndarray:
    return np.median(baseline, axis=axis) / np.median(candidate, axis=axis)


def speedup_ci(
    baseline_ms: Sequence[float] | np.ndarray,
    candidate_ms: Sequence[float] | np.ndarray,
    *,
    confidence: float = CONFIDENCE,
    n_resamples: int = N_RESAMPLES,
    seed: int = 0,
    rounds: tuple[Sequence[np.ndarray], Sequence[np.ndarray]] | None = None,
) -> Speedup:
    """Speedup with a bootstrap CI: each sample resampled independently (scipy, ``paired=False``).

    Why two-sample rather than paired per-round ratios: a paired bootstrap resamples rounds, and
    the rounds are few when a block is long (a slow model, batch 256 on a CPU: 3–10 rounds), which
    gives a CI from a handful of numbers. The two-sample bootstrap uses every iteration. It is
    honest under interleaving: drift hits both precisions alike, so it does not bias the ratio; it
    only widens each pooled sample, which widens the CI (conservative) rather than narrowing it.
    Per-round ratios are still reported beside it (``round_ratios``) as a check. Percentile rather
    than BCa: BCa's jackknife costs n medians of n samples, too slow for 10⁵ samples. The estimate
    uses every sample; the CI at most ``MAX_BOOTSTRAP_SAMPLES`` per side (see there).

    Samples inside one block are not independent: a noisy neighbour or a clock dip during one block
    shifts that whole block, and an i.i.d. bootstrap then reports a CI far narrower than a re-run
    would show. So when ``rounds`` (the per-round blocks of each side, in order) is given and there
    are at least ``MIN_CLUSTER_ROUNDS`` of them, a cluster bootstrap (resample whole rounds, both
    sides of a round together) is computed as well, and the reported CI is the hull of the two.
    """
    from scipy import stats as sps

    b = np.asarray(baseline_ms, dtype=np.float64)
    c = np.asarray(candidate_ms, dtype=np.float64)
    if b.size == 0 or c.size == 0:
        raise ValueError("no samples")
    estimate = float(np.median(b) / np.median(c))
    rng = np.random.default_rng(seed)
    if b.size > MAX_BOOTSTRAP_SAMPLES:
        b = rng.choice(b, MAX_BOOTSTRAP_SAMPLES, replace=False)
    if c.size > MAX_BOOTSTRAP_SAMPLES:
        c = rng.choice(c, MAX_BOOTSTRAP_SAMPLES, replace=False)
    if b.size < 2 or c.size < 2 or (np.all(b == b[0]) and np.all(c == c[0])):
        return Speedup(estimate, estimate, estimate, confidence)
    batch = max(1, BOOTSTRAP_ELEMENTS // max(b.size, c.size))
    res = sps.bootstrap(
        (b, c), _ratio_of_medians, paired=False, vectorized=True, axis=-1,
        confidence_level=confidence, n_resamples=n_resamples, method="percentile",
        batch=min(batch, n_resamples), rng=rng,
    )
    low, high = float(res.confidence_interval.low), float(res.confidence_interval.high)
    method = Speedup.method
    if rounds is not None and min(len(rounds[0]), len(rounds[1])) >= MIN_CLUSTER_ROUNDS:
        c_low, c_high = _cluster_ci(rounds[0], rounds[1], confidence, n_resamples, rng)
        low, high = min(low, c_low), max(high, c_high)
        method += " ∪ round-cluster bootstrap"
    return Speedup(estimate, low, high, confidence, method)


def _cluster_ci(
    baseline_rounds: Sequence[np.ndarray],
    candidate_rounds: Sequence[np.ndarray],
    confidence: float,
    n_resamples: int,
    rng: np.random.Generator,
) -> tuple[float, float]:
    """Percentile CI of median ratio when whole rounds (both sides of round i together) are resampled.

    Each round is summarised by its block medians, and a resample's ratio is the median of the chosen
    baseline medians over that of the chosen candidate medians: between-round variation, which an
    i.i.d. bootstrap of pooled samples misses, is exactly what this interval measures."""
    n = min(len(baseline_rounds), len(candidate_rounds))
    b = np.array([np.median(r) for r in baseline_rounds[:n]])
    c = np.array([np.median(r) for r in candidate_rounds[:n]])
    picks = rng.integers(0, n, size=(n_resamples, n))
    ratios = np.median(b[picks], axis=1) / np.median(c[picks], axis=1)
    alpha = (1.0 - confidence) / 2.0
    return float(np.quantile(ratios, alpha)), float(np.quantile(ratios, 1.0 - alpha))


# ---------------------------------------------------------------------------------------------
# The interleaved measurement
# ---------------------------------------------------------------------------------------------


def measure_block(runner: Any, feeds: Mapping[str, np.ndarray], config: TimingConfig) -> Samples:
    """One block through THE shared loop: host clock for cpu runners, CUDA events for cuda runners."""
    if runner.device == "cpu":
        return timing.time_host(lambda: runner.infer(feeds), config)
    time_device = getattr(timing, "time_device", None)
    if time_device is None:  # pragma: no cover - depends on the GPU timing loop being present
        from .errors import BackendUnavailable

        raise BackendUnavailable("this trtprof has no GPU timing loop (timing.time_device)")
    return time_device(runner, feeds, config)


@dataclass
class Arm:
    """One precision at one batch size: its runner, inputs, and the samples of every round."""

    name: str  # the precision, e.g. "fp32"
    runner: Any
    feeds: Mapping[str, np.ndarray]
    stages: dict[str, list[np.ndarray]] = field(default_factory=dict)
    round_medians_ms: list[float] = field(default_factory=list)
    span_s: float = 0.0
    note_counts: dict[str, list] = field(default_factory=dict)  # note shape → [first text, blocks]
    device_first: dict[str, Any] = field(default_factory=dict)
    device_last: dict[str, Any] = field(default_factory=dict)
    warmup_done: int = 0
    warmup_s: float = 0.0

    def add(self, samples: Samples) -> None:
        for stage, values in samples.stages.items():
            self.stages.setdefault(stage, []).append(np.asarray(values, dtype=np.float64))
        self.round_medians_ms.append(float(np.median(samples.latency_ms)))
        self.span_s += samples.span_s
        for note in samples.notes:  # one entry per kind of note, not one per block
            key = re.sub(r"[-+]?\d[\d.,]*", "#", note)
            self.note_counts.setdefault(key, [note, 0])[1] += 1
        if not self.device_first:
            self.device_first = dict(samples.device)
        self.device_last = dict(samples.device)

    @property
    def notes(self) -> list[str]:
        """The timing loop's warnings, each once, with how many of the blocks raised it."""
        blocks = len(self.round_medians_ms)
        return [f"{text} (in {n} of {blocks} blocks)" if blocks > 1 else text
                for text, n in self.note_counts.values()]

    def pooled(self) -> dict[str, np.ndarray]:
        return {stage: np.concatenate(parts) for stage, parts in self.stages.items() if parts}

    @property
    def latency_ms(self) -> np.ndarray:
        parts = self.stages.get("latency_ms", [])
        return np.concatenate(parts) if parts else np.empty(0)

    @property
    def device(self) -> dict[str, Any]:
        """NVML state at the first and the last round (clock drift shows as a difference)."""
        if not self.device_first:
            return {}
        return {"first_round": self.device_first, "last_round": self.device_last}


@dataclass(frozen=True)
class RoundPlan:
    target_ci: float = DEFAULT_TARGET_CI
    time_budget_s: float = DEFAULT_TIME_BUDGET_S
    round_iterations: int | None = None  # None: sized to ~DEFAULT_ROUND_S from the warmup
    min_rounds: int = MIN_ROUNDS
    first_warmup: int = FIRST_WARMUP
    first_warmup_ms: float = FIRST_WARMUP_MS
    copies: bool = True
    cuda_graph: bool = False
    autotune: bool = True  # torch: cudnn.benchmark during the run (backends.base.set_autotune)

    def block_config(self, iterations: int) -> TimingConfig:
        return TimingConfig(warmup=ROUND_WARMUP, iterations=iterations, copies=self.copies, cuda_graph=self.cuda_graph)


@dataclass
class InterleavedOutcome:
    arms: list[Arm]
    rounds: int
    stop_reason: str  # "target" | "time_budget"
    elapsed_s: float
    round_iterations: dict[str, int]
    half_widths: dict[str, float]

    def arm(self, name: str) -> Arm:
        return next(a for a in self.arms if a.name == name)

    def round_ratios(self, baseline: str, candidate: str) -> list[float]:
        b, c = self.arm(baseline).round_medians_ms, self.arm(candidate).round_medians_ms
        return [x / y for x, y in zip(b, c) if y > 0]


def _iterations_for(median_ms: float, plan: RoundPlan) -> int:
    if plan.round_iterations is not None:
        return int(plan.round_iterations)
    if not np.isfinite(median_ms) or median_ms <= 0:
        return MAX_ROUND_ITERATIONS
    wanted = int(DEFAULT_ROUND_S * 1e3 / median_ms)
    return int(min(MAX_ROUND_ITERATIONS, max(MIN_ROUND_ITERATIONS, wanted)))


def run_interleaved(
    arms: Sequence[Arm],
    plan: RoundPlan,
    *,
    measure: Callable[[Any, Mapping[str, np.ndarray], TimingConfig], Samples] = measure_block,
    on_round: Callable[[int, dict[str, float]], None] | None = None,
) -> InterleavedOutcome:
    """Warm each arm up, then run rounds (order alternating) until every median's CI half-width is
    within ``target_ci`` of it (after at least ``min_rounds``) or the time budget is spent.

    The budget counts measured rounds only (warmup excluded) and is checked before each round: a
    round that would start after the budget is not started, but ``min_rounds`` are always run.
    """
    arms = list(arms)
    iterations: dict[str, int] = {}
    warm_cap_ms = min(plan.first_warmup_ms, plan.time_budget_s * 1e3 * 0.1)
    for arm in arms:
        first = TimingConfig(warmup=plan.first_warmup, warmup_ms=warm_cap_ms, iterations=MIN_ROUND_ITERATIONS,
                             copies=plan.copies, cuda_graph=plan.cuda_graph)
        warm = measure(arm.runner, arm.feeds, first)
        arm.warmup_done, arm.warmup_s = warm.warmup_done + warm.n, warm.warmup_s + warm.span_s
        iterations[arm.name] = _iterations_for(float(np.median(warm.latency_ms)), plan)
    # One block size for every arm (sized by the slowest): rounds are symmetric, every precision
    # gets the same number of samples per round, and per-round ratios compare like with like.
    shared = min(iterations.values())
    iterations = {name: shared for name in iterations}
    started = time.perf_counter()
    rounds = 0
    last_round_s = 0.0
    half: dict[str, float] = {a.name: float("inf") for a in arms}
    stop_reason = "time_budget"
    while True:
        elapsed = time.perf_counter() - started
        if rounds >= plan.min_rounds:
            if all(h <= plan.target_ci for h in half.values()):
                stop_reason = "target"
                break
            if elapsed + last_round_s > plan.time_budget_s:
                break
        t0 = time.perf_counter()
        order = arms if rounds % 2 == 0 else arms[::-1]
        for arm in order:
            arm.add(measure(arm.runner, arm.feeds, plan.block_config(iterations[arm.name])))
        rounds += 1
        last_round_s = time.perf_counter() - t0
        half = {a.name: relative_half_width(a.latency_ms) for a in arms}
        if on_round is not None:
            on_round(rounds, dict(half))
    return InterleavedOutcome(arms=arms, rounds=rounds, stop_reason=stop_reason,
                              elapsed_s=time.perf_counter() - started, round_iterations=iterations,
                              half_widths=half)


# ---------------------------------------------------------------------------------------------
# The whole comparison: engines → interleaved rounds → speedup, accuracy, diagnosis, roofline
# ---------------------------------------------------------------------------------------------


@dataclass
class Comparison:
    """One candidate precision against the baseline at one batch size (one JSON ``comparisons`` entry)."""

    batch_size: int
    baseline: str
    candidate: str
    speedup: Speedup
    accuracy: Any  # accuracy.AccuracyDelta | None
    diagnosis: list[Any]  # diagnose.Finding
    baseline_result: Any  # results.BenchResult
    candidate_result: Any
    rounds: int
    stop_reason: str
    round_ratios: list[float]
    half_widths: dict[str, float]
    roofline: dict[str, Any] = field(default_factory=dict)

    @property
    def verdict(self) -> str:
        return self.speedup.verdict

    def to_json(self) -> dict[str, Any]:
        def side(r: Any) -> dict[str, Any]:
            lat = r.stats["latency_ms"]
            low, high = median_ci_exact(r.samples_ms["latency_ms"])
            return {"precision": r.precision, "effective_precision": r.engine.get("effective_precision", r.precision),
                    "median_ms": lat.p50, "ci_low_ms": low, "ci_high_ms": high, "n": lat.n, "cv": lat.cv,
                    "stage_medians_ms": {k: s.p50 for k, s in r.stats.items()},
                    "engine": r.engine.get("artifact", "")}

        acc = self.accuracy.to_json() if self.accuracy is not None else None
        return {
            "batch_size": self.batch_size,
            "baseline": self.baseline,
            "candidate": self.candidate,
            "speedup": self.speedup.to_json(),
            "verdict": self.verdict,
            "accuracy": acc,
            "diagnosis": [f.to_json() for f in self.diagnosis],
            "latency": {"baseline": side(self.baseline_result), "candidate": side(self.candidate_result)},
            "rounds": self.rounds,
            "stop_reason": self.stop_reason,
            "round_ratios": self.round_ratios,
            "median_ci_half_width": self.half_widths,
            "roofline": self.roofline,
        }


@dataclass
class CompareReport:
    model: str
    backend: str
    plan: RoundPlan
    comparisons: list[Comparison]
    results: list[Any]  # results.BenchResult, one per precision × batch size (raw samples inside)
    environment: dict[str, Any]
    created: str = ""
    device_peak: dict[str, Any] | None = None
    warnings: list[str] = field(default_factory=list)
    layers: dict[int, Any] = field(default_factory=dict)  # batch → layers.LayerTable (compare --layers)

    def to_json(self) -> dict[str, Any]:
        extra = {"layers": {str(b): t.to_json() for b, t in self.layers.items()}} if self.layers else {}
        return {
            "schema": SCHEMA,
            "created": self.created,
            "model": self.model,
            "backend": self.backend,
            "settings": {"target_ci": self.plan.target_ci, "time_budget_s": self.plan.time_budget_s,
                         "round_iterations": self.plan.round_iterations, "min_rounds": self.plan.min_rounds,
                         "confidence": CONFIDENCE, "equivalence_margin": EQUIVALENCE_MARGIN,
                         "copies": self.plan.copies, "cuda_graph": self.plan.cuda_graph,
                         "autotune": self.plan.autotune},
            "comparisons": [c.to_json() for c in self.comparisons],
            "warnings": self.warnings,
            "device_peak": self.device_peak,
            "environment": self.environment,
            "results": [r.to_json() for r in self.results],
            **extra,
        }

    def write_json(self, path) -> None:
        import json
        from pathlib import Path

        from .cache import atomic_write_text

        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_text(path, json.dumps(self.to_json(), indent=1, allow_nan=True) + "\n")


def select_records(records: Sequence[Any], precisions: Sequence[Any], backend: str = "auto") -> dict[str, Any]:
    """One engine per precision from an engines dir, in the order of ``precisions`` (first = baseline)."""
    from .errors import BadInput

    wanted = [str(p) for p in precisions]
    chosen: dict[str, Any] = {}
    for precision in wanted:
        matches = [r for r in records if r.precision == precision and (backend == "auto" or r.backend == backend)]
        if not matches:
            have = sorted({f"{r.precision}/{r.backend}" for r in records})
            raise BadInput(f"no {precision} engine here (have: {', '.join(have) or 'none'}); build it or pass the model")
        keys = {(r.model, r.backend) for r in matches}
        if len(keys) > 1:
            raise BadInput(f"several {precision} engines here ({', '.join(sorted(f'{m}/{b}' for m, b in keys))}); "
                           "narrow with --backend or a folder holding one model")
        chosen[precision] = max(matches, key=lambda r: r.created)
    models = {r.model_path for r in chosen.values()}
    if len(models) > 1:
        raise BadInput(f"the engines come from different models ({', '.join(sorted(models))})")
    return chosen


def _result_for(record: Any, arm: Arm, batch_size: int, plan: RoundPlan, outcome: InterleavedOutcome,
                input_shapes: Mapping[str, tuple[int, ...]], seed: int) -> Any:
    from .bench import effective_precision
    from .results import BenchResult

    clock = "perf_counter_ns" if arm.runner.device == "cpu" else "cuda_events"
    warnings = list(arm.notes)
    if record.backend_metadata.get("effective_precision") not in (None, record.precision):
        warnings.append(f"requested {record.precision}, effective {record.backend_metadata['effective_precision']}"
                        + (": " + record.notes[0] if record.notes else ""))
    return BenchResult.from_samples(
        stages=arm.pooled(), span_s=arm.span_s, batch_size=batch_size, model=record.model,
        precision=record.precision, backend=record.backend,
        engine={"key": record.key, "artifact": str(record.artifact_path),
                "effective_precision": effective_precision(record), "build_seconds": record.build_seconds,
                "backend_metadata": record.backend_metadata, "environment": record.environment,
                "notes": list(record.notes)},
        config={"interleaved": True, "rounds": outcome.rounds, "round_iterations": outcome.round_iterations[arm.name],
                "round_warmup": ROUND_WARMUP, "warmup_done": arm.warmup_done, "warmup_s": round(arm.warmup_s, 4),
                "target_ci": plan.target_ci, "time_budget_s": plan.time_budget_s, "stop_reason": outcome.stop_reason,
                "copies": plan.copies if clock == "cuda_events" else None, "cuda_graph": plan.cuda_graph,
                "clock": clock, "autotune": getattr(arm.runner, "autotune", None), "input_shapes": {k: list(v) for k, v in input_shapes.items()}, "seed": seed},
        warnings=warnings,
        device=arm.device,
    )


def compare_records(
    records: Mapping[str, Any],
    batch_sizes: Sequence[int],
    plan: RoundPlan = RoundPlan(),
    *,
    shapes: Mapping[str, tuple[int, ...]] | None = None,
    seed: int = 0,
    int_range: tuple[int, int] | None = None,
    onnx_path: Any = None,
    on_batch: Callable[[int, InterleavedOutcome], None] | None = None,
    layers: bool = False,
) -> CompareReport:
    """Interleave the engines of ``records`` (precision → record; the first is the baseline) at each
    batch size; every candidate gets a speedup, an accuracy delta and its diagnosis. ``layers``: also
    profile every engine layer by layer (a separate run after the timing, ``trtprof.layers``)."""
    from . import diagnose as dg
    from . import fp16range
    from .accuracy import compare_outputs, run_outputs
    from .backends.base import set_autotune
    from .bench import load_runner
    from .cache import now_iso
    from .environment import collect
    from .inputs import DEFAULT_INT_RANGE, make_inputs, resolve_shapes

    names = list(records)
    baseline = names[0]
    runners: dict[str, Any] = {}
    comparisons: list[Comparison] = []
    results: list[Any] = []
    warnings: list[str] = []
    outcomes: dict[int, InterleavedOutcome] = {}
    per_batch: dict[int, dict[str, Any]] = {}
    try:
        for name in names:
            runners[name] = load_runner(records[name])
            set_autotune(runners[name], plan.autotune)
        first = records[baseline]
        overrides = {**first.spec.shape_overrides(), **(shapes or {})}
        all_shapes = {b: resolve_shapes(runners[baseline].inputs, b, overrides, model_path=first.model_path)
                      for b in batch_sizes}  # every shape checked before the first measurement
        on_gpu = any(r.device == "cuda" for r in runners.values())
        peak = None
        if on_gpu:
            from .roofline import query_device_peak

            peak = query_device_peak()
        outputs: dict[int, dict[str, dict[str, np.ndarray]]] = {}
        for batch in batch_sizes:
            feeds = make_inputs(runners[baseline].inputs, all_shapes[batch], seed=seed,
                                int_range=int_range or DEFAULT_INT_RANGE)
            if batch == min(batch_sizes):  # FP16 range risks predicted from the FP32 model, one batch (issue 10)
                fp16_range = fp16range.for_compare(onnx_path, records, feeds)
            outputs[batch] = {name: run_outputs(runners[name], feeds) for name in names}
            arms = [Arm(name=name, runner=runners[name], feeds=feeds) for name in names]
            outcome = run_interleaved(arms, plan)
            outcomes[batch] = outcome
            per_batch[batch] = {arm.name: _result_for(records[arm.name], arm, batch, plan, outcome, all_shapes[batch], seed)
                                for arm in arms}
            results.extend(per_batch[batch].values())
            if on_batch is not None:
                on_batch(batch, outcome)
    finally:
        for runner in runners.values():
            runner.close()

    series = {name: [per_batch[b][name] for b in batch_sizes] for name in names}
    costs = _graph_costs(onnx_path, all_shapes, names, warnings)
    from .layers.profile import graph_facts, profile_records

    graphs = {b: graph_facts(onnx_path, records[baseline], b, shapes) for b in batch_sizes} if on_gpu else {}
    tables = profile_records(records, batch_sizes, onnx_path=onnx_path, shapes=shapes, seed=seed, int_range=int_range,
                             autotune=plan.autotune) if layers else {}
    for batch in batch_sizes:
        outcome = outcomes[batch]
        base_result = per_batch[batch][baseline]
        for cand in names[1:]:
            cand_result = per_batch[batch][cand]
            speed = speedup_ci(base_result.samples_ms["latency_ms"], cand_result.samples_ms["latency_ms"],
                               rounds=(outcome.arm(baseline).stages.get("latency_ms", []),
                                       outcome.arm(cand).stages.get("latency_ms", [])))
            acc = fp16range.annotate(compare_outputs(outputs[batch][baseline], outputs[batch][cand]), fp16_range,
                                     cand_result)
            roof = {}
            for side, result in (("baseline", base_result), ("candidate", cand_result)):
                cost = costs.get((batch, result.precision))
                if cost is not None:
                    from .roofline import achieved

                    stage = "compute_ms" if "compute_ms" in result.stats else "latency_ms"
                    roof[side] = {**achieved(cost, result.stats[stage].p50, peak, result.precision), "timed_stage": stage,
                                  "flops_by_op": cost.flops_by_op, "counted_ops": list(cost.counted_ops)}
            rates = peak.rates if peak is not None else None
            findings = dg.diagnose(base_result, cand_result, series=series, rates=rates, speedup=speed.estimate,
                                   roofline=roof.get("candidate"), device_kind=runners_device(runners, cand),
                                   layers=tables.get(batch), graph=graphs.get(batch))
            if acc.flagged:
                msg = (f"{cand} produced {acc.nonfinite} non-finite output values (inf/NaN) at batch {batch} where "
                       f"{baseline} is finite: FP16 overflow (max 65504); keep the overflowing layers in FP32")
                findings.insert(0, dg.Finding("nonfinite", msg, {"nonfinite": acc.nonfinite, "elements": acc.elements}))
                warnings.append(msg)
            comparisons.append(Comparison(
                batch_size=batch, baseline=baseline, candidate=cand, speedup=speed, accuracy=acc, diagnosis=findings,
                baseline_result=base_result, candidate_result=cand_result, rounds=outcome.rounds,
                stop_reason=outcome.stop_reason, round_ratios=outcome.round_ratios(baseline, cand),
                half_widths=outcome.half_widths, roofline=roof,
            ))
    first = records[baseline]
    env = collect()
    env["backend"] = dict(first.environment)
    return CompareReport(model=first.model, backend=first.backend, plan=plan, comparisons=comparisons,
                         results=results, environment=env, created=now_iso(),
                         device_peak=peak.to_json() if peak is not None else None, warnings=warnings,
                         layers=tables)


def runners_device(runners: Mapping[str, Any], name: str) -> str | None:
    runner = runners.get(name)
    return getattr(runner, "device", None)


def _graph_costs(onnx_path: Any, all_shapes: Mapping[int, Mapping[str, tuple[int, ...]]], names: Sequence[str],
                 warnings: list[str]) -> dict[tuple[int, str], Any]:
    """Roofline counts per (batch, precision); a model that cannot be counted costs a warning, not the run."""
    if onnx_path is None:
        return {}
    from .errors import TrtprofError
    from .model import load_onnx
    from .roofline import graph_cost

    try:
        model = load_onnx(onnx_path)
        out = {}
        for batch, shapes in all_shapes.items():
            for name in names:
                out[(batch, name)] = graph_cost(model, shapes, float_bytes=2 if name == "fp16" else 4)
        return out
    except (TrtprofError, ValueError, KeyError) as err:
        warnings.append(f"roofline skipped: {err}")
        return {}


def compare_model(
    model: Any,
    precisions: Sequence[Any],
    batch_sizes: Sequence[int],
    plan: RoundPlan = RoundPlan(),
    *,
    engines_dir: Any = "engines",
    backend: str = "auto",
    shapes: Mapping[str, tuple[int, ...]] | None = None,
    seed: int = 0,
    int_range: tuple[int, int] | None = None,
    on_built: Callable[[Any], None] | None = None,
    on_batch: Callable[[int, InterleavedOutcome], None] | None = None,
    layers: bool = False,
) -> CompareReport:
    """MODEL (ONNX or TensorFlow) → build what is missing → ``compare_records``.
    An engines dir (or one engine's JSON) → its engines of the asked precisions, batch sizes checked."""
    from pathlib import Path

    from .build import as_onnx, build_engines
    from .cache import list_engines
    from .errors import BadInput

    path = Path(model)
    if path.is_dir() and any(path.glob("*.json")) and not (path / "saved_model.pb").exists():
        records = select_records(list_engines(path), precisions, backend)
        built = set.intersection(*(set(r.spec.batch_sizes) for r in records.values()))
        sizes = tuple(batch_sizes) or tuple(sorted(built))
        onnx_path = None
        source = Path(next(iter(records.values())).model_path)
        if source.exists():
            try:
                onnx_path = as_onnx(source, path)
            except Exception:  # roofline is optional here: a TF source without TF installed
                onnx_path = None
    else:
        sizes = tuple(batch_sizes) or (1,)
        outcomes = build_engines(path, precisions, sizes, shapes=shapes, engines_dir=Path(engines_dir),
                                 backend=backend, on_done=on_built)
        records = {o.record.precision: o.record for o in outcomes}
        onnx_path = as_onnx(path, Path(engines_dir))
    if len(records) < 2:
        raise BadInput("compare needs at least two precisions (e.g. --precisions fp32,fp16)")
    return compare_records(records, sizes, plan, shapes=shapes, seed=seed, int_range=int_range,
                           onnx_path=onnx_path, on_batch=on_batch, layers=layers)
