"""The speedup's statistics: a hierarchical CI (loads → rounds → iterations), four verdicts, and shape.

Why hierarchical: the samples of one block (one arm, one round) share that block's disturbances, the
blocks of one load (one process holding one instance of every engine) share that load's placement,
allocation and thread layout. Measured here on ONNX Runtime, an i.i.d. bootstrap over iterations
covered the truth in 20–28 % of A/A runs, and one loaded instance could be 3–8 % slower than another
through every round. So the unit of evidence is the *load*, and inside it the *round*:

* each block is summarised by its median (robust to the 1 % of iterations that are 5× slow);
* each round by the paired log ratio ``log(median baseline block) − log(median candidate block)``
  (both blocks ran back to back, so drift and shared bursts cancel);
* each load by the median of its rounds' log ratios (one disturbed round cannot move it far);
* the estimate is the mean over loads (each load weighs the same: it is one draw of "how the
  engines happened to be placed").

The CI resamples the hierarchy — loads with replacement, then rounds with replacement within each
chosen load (a two-stage cluster bootstrap; it counts the within-load spread a second time, which
errs wide) — for the standard error of the statistic, and takes a Student-t quantile with
``loads − 1`` degrees of freedom: with 4–8 loads a percentile interval of the bootstrap alone
covers far less than 95 % when loads differ (three loads give ten distinct resamples), while the
t quantile accounts for how few independent loads there are. The reported CI is the hull of that t
interval and the sign-flip randomization interval of the per-load values (``sign_flip_interval``),
which stays exact when the load effects are not normal. Per-engine median CIs use the same
hierarchy (t interval) on each arm's log block medians.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Sequence, Union

import numpy as np

from .wording import plural, times

CONFIDENCE = 0.95
N_RESAMPLES = 2000  # bootstrap resamples: the SE is stable to ~2 % relative, cheap on block medians
# A speedup within ±1 % of 1.0 is not one to act on: the size of drift that interleaving does not
# cancel on a busy machine. ``--margin`` changes it.
EQUIVALENCE_MARGIN = 0.01

FASTER = "faster"
SLOWER = "slower"
EQUIVALENT = "equivalent"
INCONCLUSIVE = "inconclusive"
VERDICTS = (FASTER, SLOWER, EQUIVALENT, INCONCLUSIVE)
DECISIVE = (FASTER, SLOWER, EQUIVALENT)  # the stopping rule's "the question is answered"

Values = Union[Sequence[float], np.ndarray]  # one load's per-round values

METHOD = ("two-stage cluster bootstrap (loads with replacement, then rounds within each load) of the mean over "
          "loads of the median per-round log ratio of block medians; its SE × Student-t quantile with loads−1 df; "
          "hull with the sign-flip randomization interval of the load values")
# The t interval is exact only for normal load effects; with few loads whose effects are not normal
# (simulated: every load 3–8 % faster or slower at random) it covered 93–95 %. The sign-flip
# (randomization) interval of the per-load values is exact for any distribution symmetric about
# the truth — an A/A run is symmetric by construction — so the reported CI is the hull of both.
SIGN_FLIP_MIN_LOADS = 6  # below this even the most extreme of 2^L sign patterns has p > 5 %
SIGN_FLIP_EXACT_LOADS = 12  # enumerate all 2^L patterns up to here, else draw this many at random
ENGINE_METHOD = ("pooled median × exp(± t(loads−1) × SE); SE from the two-stage cluster bootstrap (loads, then "
                 "rounds) of the mean over loads of the median log block median")

# Distribution shape (beside the verdict, never changing it).
# A KDE mode counts when its peak stands this far (fraction of the highest peak) above the valley
# that separates it from a higher one: smaller bumps are sampling noise of a few hundred samples.
MODE_MIN_PROMINENCE = 0.1
MODE_MIN_MASS = 0.05  # … and at least 5 % of the samples lie nearer to it than to any other mode
KDE_MAX_SAMPLES = 4000  # a seeded subsample above this: the KDE's cost grows with n × grid
KDE_GRID = 512
# Heavy tail: (p99 − p50) over the robust σ (1.4826·MAD). A normal distribution gives 2.33; a
# lognormal with 10 % spread ~2.6. Above 6 the slowest 1 % sit far beyond what the body predicts.
HEAVY_TAIL_RATIO = 6.0
# Report the mean ratio beside the median ratio when they differ by more than this (relative).
MEAN_MEDIAN_DISAGREE = 0.01


@dataclass(frozen=True)
class Speedup:
    """``baseline / candidate`` latency: above 1 means the candidate is faster.

    ``estimate`` is the hierarchical estimate (geometric, paired by round); ``median_ratio`` and
    ``mean_ratio`` are the pooled-sample ratios, reported so a bimodal or heavy-tailed latency shows."""

    estimate: float
    ci_low: float
    ci_high: float
    confidence: float = CONFIDENCE
    method: str = METHOD
    margin: float = EQUIVALENCE_MARGIN
    loads: int = 1
    rounds: int = 0
    se_log: float = float("nan")  # standard error of log(estimate)
    df: int = 0  # degrees of freedom of the t quantile (loads − 1)
    median_ratio: float = float("nan")
    mean_ratio: float = float("nan")
    components: dict[str, float] = field(default_factory=dict)  # between-load / within-load variances

    @property
    def verdict(self) -> str:
        return verdict(self.ci_low, self.ci_high, self.margin)

    @property
    def half_width(self) -> float:
        """Relative half-width of the CI: (high − low) / 2 / estimate."""
        return (self.ci_high - self.ci_low) / 2 / self.estimate if self.estimate > 0 else float("inf")

    def interval(self, confidence: float) -> tuple[float, float]:
        """The same interval at another confidence (the stopping rule looks at a stricter one)."""
        if not math.isfinite(self.se_log):
            return 0.0, float("inf")
        half = t_quantile(self.df, confidence) * self.se_log
        return self.estimate * math.exp(-half), self.estimate * math.exp(half)

    def to_json(self) -> dict[str, Any]:
        return {"estimate": self.estimate, "ci_low": self.ci_low, "ci_high": self.ci_high,
                "confidence": self.confidence, "method": self.method, "margin": self.margin,
                "loads": self.loads, "rounds": self.rounds, "se_log": self.se_log, "df": self.df,
                "median_ratio": self.median_ratio, "mean_ratio": self.mean_ratio,
                "variance_components": dict(self.components)}


def verdict(ci_low: float, ci_high: float, margin: float = EQUIVALENCE_MARGIN) -> str:
    """Four answers. ``faster``: the whole CI above 1 + margin; ``slower``: wholly below
    1 / (1 + margin); ``equivalent``: wholly inside [1 / (1 + margin), 1 + margin]; otherwise the CI
    straddles a margin boundary and the data cannot say: ``inconclusive``."""
    high_edge, low_edge = 1.0 + margin, 1.0 / (1.0 + margin)
    if ci_low > high_edge:
        return FASTER
    if ci_high < low_edge:
        return SLOWER
    if ci_low >= low_edge and ci_high <= high_edge:
        return EQUIVALENT
    return INCONCLUSIVE


# ---------------------------------------------------------------------------------------------
# The hierarchical bootstrap
# ---------------------------------------------------------------------------------------------


def _padded(loads: Sequence[Values]) -> tuple[np.ndarray, np.ndarray]:
    """Ragged per-load values → (L × Rmax matrix padded with NaN, counts)."""
    counts = np.array([len(v) for v in loads], dtype=np.int64)
    out = np.full((len(loads), int(counts.max())), np.nan)
    for i, v in enumerate(loads):
        out[i, : len(v)] = v
    return out, counts


def hierarchical_statistic(loads: Sequence[Values]) -> float:
    """Mean over loads of the median of each load's values (per-round log ratios, or log block medians)."""
    return float(np.mean([np.median(v) for v in loads]))


def hierarchical_se(loads: Sequence[Values], *, n_resamples: int = N_RESAMPLES, seed: int = 0) -> float:
    """SE of ``hierarchical_statistic`` by the two-stage cluster bootstrap: draw L loads with
    replacement, then within each drawn load its R_i values with replacement, recompute."""
    arrays = [np.asarray(v, dtype=np.float64) for v in loads if len(v)]
    if not arrays:
        raise ValueError("no rounds")
    matrix, counts = _padded(arrays)
    n_loads = len(arrays)
    rng = np.random.default_rng(seed)
    which = rng.integers(0, n_loads, size=(n_resamples, n_loads))  # stage 1: loads
    r_max = matrix.shape[1]
    drawn = counts[which][..., None]  # R_i of each drawn load
    picks = (rng.random((n_resamples, n_loads, r_max)) * drawn).astype(np.int64)  # stage 2: its rounds
    values = matrix[which[..., None], picks]
    values[np.arange(r_max)[None, None, :] >= drawn] = np.inf  # only R_i draws count; sorted to the end
    values.sort(axis=2)
    lo = np.take_along_axis(values, (drawn - 1) // 2, axis=2)[..., 0]
    hi = np.take_along_axis(values, drawn // 2, axis=2)[..., 0]
    stats = ((lo + hi) / 2).mean(axis=1)
    # The bootstrap variance of a mean of L cluster values is (L − 1)/L of the usual unbiased one:
    # with 4 loads that alone would shrink the interval by 13 %.
    return float(np.std(stats, ddof=1)) * math.sqrt(n_loads / (n_loads - 1)) if n_loads > 1 else float(np.std(stats, ddof=1))


def t_quantile(df: int, confidence: float = CONFIDENCE) -> float:
    from scipy import stats as sps

    return float(sps.t.ppf(0.5 + confidence / 2, max(df, 1)))


def variance_components(loads: Sequence[Values]) -> dict[str, float]:
    """Method-of-moments split of the spread: ``within`` (round to round, inside a load) and
    ``between`` (load to load, beyond what the rounds explain). Drives where the loop adds effort."""
    arrays = [np.asarray(v, dtype=np.float64) for v in loads if len(v)]
    within_parts = [np.var(v, ddof=1) for v in arrays if v.size > 1]
    within = float(np.mean(within_parts)) if within_parts else 0.0
    if len(arrays) < 2:
        return {"within": within, "between": 0.0}
    means = np.array([np.median(v) for v in arrays])
    r_bar = float(np.mean([v.size for v in arrays]))
    between = max(0.0, float(np.var(means, ddof=1)) - within / r_bar)
    return {"within": within, "between": between}


def log_ratios(baseline_blocks: Sequence[Sequence[np.ndarray]],
               candidate_blocks: Sequence[Sequence[np.ndarray]]) -> list[np.ndarray]:
    """Per load, per round: log(median of the baseline block) − log(median of the candidate block)."""
    out = []
    for b_load, c_load in zip(baseline_blocks, candidate_blocks):
        n = min(len(b_load), len(c_load))
        out.append(np.array([math.log(float(np.median(b_load[j])) / float(np.median(c_load[j]))) for j in range(n)]))
    return out


def speedup_ci(
    baseline_blocks: Sequence[Sequence[np.ndarray]],
    candidate_blocks: Sequence[Sequence[np.ndarray]],
    *,
    margin: float = EQUIVALENCE_MARGIN,
    confidence: float = CONFIDENCE,
    n_resamples: int = N_RESAMPLES,
    seed: int = 0,
    rounds: tuple[Sequence[np.ndarray], Sequence[np.ndarray]] | None = None,
) -> Speedup:
    """The speedup of ``candidate`` over ``baseline`` with its hierarchical CI.

    ``*_blocks[i][j]`` is the latency samples (ms) of load ``i``, round ``j``. With one load the
    t quantile has no load-to-load spread to use: the rounds of that load are the clusters then
    (df = rounds − 1) and the method says so — between-load differences are not in that interval.

    Schema-1 callers passed pooled samples plus ``rounds=(baseline blocks, candidate blocks)``: that
    is read as one load of those rounds. Pooled samples alone are refused (no rounds, no honest CI).
    """
    if rounds is not None:
        baseline_blocks, candidate_blocks = [list(rounds[0])], [list(rounds[1])]
    elif len(baseline_blocks) and np.ndim(baseline_blocks[0]) == 0:
        raise ValueError("speedup_ci needs blocks (loads → rounds → samples), not pooled samples")
    per_load = [v for v in log_ratios(baseline_blocks, candidate_blocks) if v.size]
    if not per_load:
        raise ValueError("no rounds")
    n_rounds = int(sum(v.size for v in per_load))
    theta = hierarchical_statistic(per_load)
    method = METHOD
    if len(per_load) >= 2:
        se = hierarchical_se(per_load, n_resamples=n_resamples, seed=seed)
        df = len(per_load) - 1
    else:  # one load: the rounds are the only clusters
        values = per_load[0]
        se = _median_se(values, n_resamples, seed) if values.size > 1 else float("inf")
        df = max(values.size - 1, 1)
        method = "one load only (between-load differences NOT included): bootstrap SE of the median per-round " \
                 "log ratio × Student-t quantile with rounds−1 df"
    half = t_quantile(df, confidence) * se
    low, high = theta - half, theta + half
    if len(per_load) >= SIGN_FLIP_MIN_LOADS:
        f_low, f_high = sign_flip_interval(np.array([np.median(v) for v in per_load]), confidence, seed=seed)
        low, high = min(low, f_low), max(high, f_high)
    b_all = np.concatenate([np.concatenate(list(x)) for x in baseline_blocks if len(x)])
    c_all = np.concatenate([np.concatenate(list(x)) for x in candidate_blocks if len(x)])
    return Speedup(
        estimate=math.exp(theta), ci_low=math.exp(low), ci_high=math.exp(high),
        confidence=confidence, method=method, margin=margin, loads=len(per_load), rounds=n_rounds,
        se_log=se, df=df, median_ratio=float(np.median(b_all) / np.median(c_all)),
        mean_ratio=float(np.mean(b_all) / np.mean(c_all)), components=variance_components(per_load),
    )


def sign_flip_interval(values: np.ndarray, confidence: float = CONFIDENCE, seed: int = 0) -> tuple[float, float]:
    """CI of the center of ``values`` by inverting the sign-flip test of their mean: θ is inside
    when |mean(x − θ)| is not beyond the (1 − confidence) tail of |mean(±(x − θ))| over sign patterns.
    Exact for independent values symmetric about θ, whatever their distribution."""
    x = np.asarray(values, dtype=np.float64)
    n = x.size
    if n <= SIGN_FLIP_EXACT_LOADS:
        signs = 1.0 - 2.0 * ((np.arange(2 ** n)[:, None] >> np.arange(n)[None, :]) & 1)
    else:
        signs = np.random.default_rng(seed).choice((-1.0, 1.0), size=(2 ** SIGN_FLIP_EXACT_LOADS, n))
    alpha = 1.0 - confidence

    def accepted(theta: float) -> bool:
        d = x - theta
        observed = abs(d.mean())
        return float(np.mean(np.abs(signs @ d) / n >= observed - 1e-15)) > alpha

    center = float(x.mean())
    span = float(np.ptp(x)) or abs(center) * 1e-6 or 1e-9

    def edge(direction: float) -> float:
        inside, outside = center, center + direction * 3 * span
        while accepted(outside):  # pragma: no cover - only for L < SIGN_FLIP_MIN_LOADS
            outside += direction * 3 * span
        for _ in range(50):
            mid = (inside + outside) / 2
            inside, outside = (mid, outside) if accepted(mid) else (inside, mid)
        return inside

    return edge(-1.0), edge(1.0)


def _median_se(values: np.ndarray, n_resamples: int, seed: int) -> float:
    rng = np.random.default_rng(seed)
    picks = rng.integers(0, values.size, size=(n_resamples, values.size))
    return float(np.std(np.median(values[picks], axis=1), ddof=1))


def engine_median_ci(blocks: Sequence[Sequence[np.ndarray]], *, confidence: float = CONFIDENCE,
                     n_resamples: int = N_RESAMPLES, seed: int = 0) -> tuple[float, float]:
    """CI of one engine's median latency that is honest in the same sense as the speedup's: the
    spread of its log block medians across loads and rounds, not the i.i.d. spread of iterations."""
    per_load = [np.log([float(np.median(b)) for b in load]) for load in blocks if len(load)]
    pooled = float(np.median(np.concatenate([np.concatenate(list(load)) for load in blocks if len(load)])))
    if len(per_load) >= 2:
        se, df = hierarchical_se(per_load, n_resamples=n_resamples, seed=seed), len(per_load) - 1
    elif per_load[0].size > 1:
        se, df = _median_se(per_load[0], n_resamples, seed), per_load[0].size - 1
    else:
        return pooled, pooled
    half = t_quantile(df, confidence) * se
    return pooled * math.exp(-half), pooled * math.exp(half)


# ---------------------------------------------------------------------------------------------
# What it would take, and the shape of the distributions
# ---------------------------------------------------------------------------------------------


def rounds_to_decide(s: Speedup) -> float:
    """About how many more rounds (all loads together) would make ``s`` decisive, from its SE.

    The SE shrinks like 1/√rounds while the within-load (round-to-round) spread dominates; the
    needed half-width is the distance from the estimate to the nearest margin edge (beyond it: a
    decisive faster/slower; inside: equivalent). ``inf`` when the between-load spread alone already
    exceeds what is needed (more rounds cannot help, more loads can) or the estimate sits on an edge.
    """
    theta, edge = math.log(s.estimate), math.log1p(s.margin)
    need = abs(abs(theta) - edge)
    if need <= 0 or not math.isfinite(s.se_log) or s.rounds == 0:
        return float("inf")
    t = t_quantile(s.df, s.confidence)
    between = s.components.get("between", 0.0)
    if s.loads >= 2 and t * math.sqrt(between / s.loads) >= need:
        return float("inf")
    now = t * s.se_log
    if now <= need:
        return 0.0
    return s.rounds * ((now / need) ** 2 - 1.0)


def inconclusive_hint(s: Speedup, round_s: float) -> str:
    """The sentence an ``inconclusive`` verdict carries: what spans what, and what would decide it."""
    more = rounds_to_decide(s)
    head = (f"the CI [{s.ci_low:.3f}, {s.ci_high:.3f}] spans the ±{s.margin:.0%} margin edge "
            f"{'1+margin' if s.estimate >= 1 else '1/(1+margin)'}")
    if not math.isfinite(more):
        return head + "; the loads disagree more than the margin allows: more loads (a longer --time-budget-s), " \
                      "a quieter machine, or a wider --margin would decide it"
    more_rounds = max(1, int(math.ceil(more)))
    return (head + f"; about {plural(more_rounds, 'more round')} (~{more_rounds * round_s:.0f} s more --time-budget-s) "
                   "would decide it")


@dataclass(frozen=True)
class Shape:
    """What a latency distribution looks like beyond its median."""

    modes: int
    mode_ms: tuple[float, ...]
    tail_ratio: float  # (p99 − p50) / (1.4826 · MAD): decides "heavy tail"
    p99_over_median: float = float("nan")  # p99 / p50: how a reader says a tail ("p99 = 60× the median")

    @property
    def multimodal(self) -> bool:
        return self.modes > 1

    @property
    def heavy_tail(self) -> bool:
        return self.tail_ratio > HEAVY_TAIL_RATIO

    def describe(self) -> str:
        parts = []
        if self.multimodal:
            parts.append(f"{self.modes} modes (" + ", ".join(f"{m:.4g}" for m in self.mode_ms) + " ms)")
        if self.heavy_tail:
            parts.append("heavy tail" + (f" (p99 = {times(self.p99_over_median)} the median)"
                                         if math.isfinite(self.p99_over_median) else ""))
        return "; ".join(parts)

    def to_json(self) -> dict[str, Any]:
        return {"modes": self.modes, "mode_ms": list(self.mode_ms), "tail_ratio": self.tail_ratio,
                "p99_over_median": self.p99_over_median if math.isfinite(self.p99_over_median) else None,
                "multimodal": self.multimodal, "heavy_tail": self.heavy_tail}


def distribution_shape(samples_ms: Sequence[float] | np.ndarray, seed: int = 0) -> Shape:
    """Modes from a Gaussian KDE (scipy; no dip test in scipy) and a robust tail ratio.

    The KDE runs on the central 99 % (the tail is measured separately), Scott's bandwidth; a mode
    needs ``MODE_MIN_PROMINENCE`` of the highest peak (scipy ``find_peaks``) and ``MODE_MIN_MASS``."""
    from scipy import signal
    from scipy import stats as sps

    x = np.asarray(samples_ms, dtype=np.float64)
    p50 = float(np.median(x)) if x.size else float("nan")
    mad = float(np.median(np.abs(x - p50))) if x.size else 0.0
    p99 = float(np.percentile(x, 99)) if x.size else float("nan")
    tail = (p99 - p50) / (1.4826 * mad) if mad > 0 else 0.0
    p99_ratio = p99 / p50 if p50 > 0 else float("nan")
    if x.size < 50 or mad == 0:
        return Shape(1, (p50,), tail, p99_ratio)
    lo, hi = np.percentile(x, (0.5, 99.5))
    core = x[(x >= lo) & (x <= hi)]
    if core.size > KDE_MAX_SAMPLES:
        core = np.random.default_rng(seed).choice(core, KDE_MAX_SAMPLES, replace=False)
    if np.ptp(core) == 0:
        return Shape(1, (p50,), tail, p99_ratio)
    grid = np.linspace(lo, hi, KDE_GRID)
    density = sps.gaussian_kde(core)(grid)
    peaks, _ = signal.find_peaks(np.concatenate([[0.0], density, [0.0]]), prominence=MODE_MIN_PROMINENCE * density.max())
    peaks = peaks - 1
    if peaks.size > 1:  # mass nearest each peak
        centers = grid[peaks]
        nearest = np.argmin(np.abs(core[:, None] - centers[None, :]), axis=1)
        mass = np.bincount(nearest, minlength=peaks.size) / core.size
        peaks = peaks[mass >= MODE_MIN_MASS]
    if peaks.size == 0:
        return Shape(1, (p50,), tail, p99_ratio)
    return Shape(int(peaks.size), tuple(float(grid[p]) for p in peaks), tail, p99_ratio)


def mean_median_note(s: Speedup) -> str | None:
    """When the mean ratio and the median ratio disagree, say both: the median answers "typical
    call", the mean "throughput over many calls", and a bimodal or heavy-tailed engine splits them."""
    if not (math.isfinite(s.mean_ratio) and math.isfinite(s.median_ratio)):
        return None
    if abs(s.mean_ratio / s.median_ratio - 1.0) <= MEAN_MEDIAN_DISAGREE:
        return None
    return (f"the median ratio is {s.median_ratio:.3f}× but the mean ratio is {s.mean_ratio:.3f}×: "
            "the typical call and the average call disagree (see the distribution shape)")
