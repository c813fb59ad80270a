"""The speedup's statistics: a load-level t interval (loads → round pairs → iterations), four verdicts,
a check for loads that form a mixture; the latency distribution's shape is ``stats.shape``.

Why load-level: the samples of one block (one arm, one round) share that block's disturbances, the
blocks of one load (one process holding one instance of every engine) share that load's placement,
allocation and thread layout. Measured here on ONNX Runtime, an i.i.d. bootstrap over iterations
covered the truth in 20–28 % of A/A runs, and one loaded instance could be 3–8 % slower than another
through every round. So the unit of evidence is the *load*:

* each round gives a paired log ratio ``log(median baseline block) − log(median candidate block)``;
  those find the disturbed rounds (a round many robust σ from its load's others whose block moved as
  a whole: a neighbour's burst while one arm ran) and measure the round-to-round spread;
* consecutive rounds run in opposite arm orders (A B, then B A), so an order effect (the second arm
  of a round always a little faster) has one sign in the even rounds and the other in the odd ones;
* each load's value is the mean, over its even rounds and its odd rounds, of the log ratio of the
  arms' medians pooled over that parity's kept blocks: the order effect (and linear drift) cancels
  between the two, and a median of 2–3× the samples of a block does not jump between the modes of
  a bimodal latency the way a block's median does (``load_value``);
* the estimate is the mean over loads (each load weighs the same).

The CI is the one-sample Student-t interval of the L load values (the t quantile from scipy): the
spread of the load values already holds the round-to-round spread (divided by the rounds of a load)
and the load-to-load spread, each counted once, with L − 1 degrees of freedom. Schema 2 resampled
loads and then rounds within them (a two-stage bootstrap), which counts the within-load spread a
second time, multiplied that by √(L/(L−1)) and took the hull with the sign-flip interval (with 6
loads: the min–max of the load values, a 96.9 % interval): 1.7–3× wider than the run-to-run spread
of the estimate and 97–99.8 % coverage in the calibration simulation. Per-engine median CIs use the
same load-level t interval on each arm's log block medians.

The loop (``interleave``) stops early only when a stricter interval is decisive, and that interval's SE
is at least ``se_within``, the SE the rounds' own spread implies (``within_floor_se``): with 6 load
values the sample SD is often far below its expectation by chance, and a stop triggered by that luck
biased the runs that stopped: of 2000 simulated runs of a true 1.05 at 30 % noise, 23 % stopped early
and their 95 % intervals covered 83.5 % (94.0 % over all runs). With the floor 5.9 % stop early and
the row covers 94.8 %, at unchanged power (89 % decided); the runs that still stop early cover 68.9 %
(verdict_calibration-2026-12-01-v2-2000; with the pooled load value of v3: 5.5 % stop early, 94.8 %
over all, 90.5 % decided, the early ones 65.8 %): an early decisive stop remains the least certain
case. The reported interval stays the plain t interval.

What no interval over L loads can see: a mode that only some loads fall into and that none of
these L did (a candidate 20 % slow in 10 % of process starts is missed by 6 loads with probability
0.9⁶ = 53 %). When the loads *show* such a mode — a minority of loads far from the rest, beyond
what the rounds' own spread explains (``load_mixture``) — the verdict is ``inconclusive`` with that
reason, whatever the interval says.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import Any, Sequence, Union

import numpy as np

from ..util.wording import plural
from .shape import (  # noqa: F401 - the distribution's shape, named here too (callers read it beside the speedup)
    HEAVY_TAIL_RATIO, KDE_GRID, KDE_MAX_SAMPLES, MODE_MIN_MASS, MODE_MIN_PROMINENCE, LatencyShape, distribution_shape)

CONFIDENCE = 0.95
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

METHOD = ("one-sample Student-t interval (loads−1 df) of the per-load values; a load's value is the mean over its "
          "A B rounds and its B A rounds of the log ratio of the arms' medians pooled over those rounds, a round "
          "beyond 5 pooled robust sigma whose block moved as a whole set aside; the estimate is their mean")
ENGINE_METHOD = ("pooled median; 95 % interval: the order-statistic (binomial) interval of the median of the "
                 "per-load medians (each load's median block median; one load: its block medians), widened to hold "
                 "the pooled median; not defined (NaN) with fewer than 6 such values")

# A mixture of loads: a minority (at most MIXTURE_MAX_SHARE of the loads, at least one) separated from
# the majority by an empty stretch of MIXTURE_SEPARATION robust spreads. The spread of one load value
# is the larger of the majority's own (1.4826 · MAD) and what the round pairs predict (√(within/pairs)):
# with six normal loads the farthest one sits ≤ 3 such spreads out in 99 % of A/A simulations, so 6
# spreads is not noise. Also it must exceed the margin: a mode smaller than the margin changes nothing.
MIXTURE_SEPARATION = 6.0
MIXTURE_MAX_SHARE = 1.0 / 3.0
MIXTURE_MIN_LOADS = 4  # with fewer loads there is no majority to compare against
# A round this many pooled robust σ from its load's median is a disturbed block, set aside (set_aside):
# a normal round lies beyond 5 σ with probability 6e-7.
ROUND_OUTLIER_Z = 5.0
# … and only when one of its blocks moved as a whole: its share of samples above the median of the arm's
# other blocks in the load is this many binomial σ from ½ (block_shifted). A bimodal block whose median
# jumped modes sits ~1.3 σ out (55/45, 85 iterations), a 30 % burst at 10 % noise ~9 σ.
BLOCK_SHIFT_Z = 3.0
MAX_LOG_HALF_WIDTH = 700.0  # exp() of more overflows a float: such an interval is (0, inf)

# Report the mean ratio beside the median ratio when they differ by more than this (relative).
MEAN_MEDIAN_DISAGREE = 0.01


@dataclass(frozen=True)
class Speedup:
    """``baseline / candidate`` latency: above 1 means the candidate is faster.

    ``estimate`` is the load-level estimate (geometric, paired by round); ``median_ratio`` and
    ``mean_ratio`` are the pooled-sample ratios, reported so a bimodal or heavy-tailed latency shows.
    ``mixture`` (when not empty) says which loads disagree with the rest: the verdict is then
    ``inconclusive`` whatever the CI says."""

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
    mixture: str = ""
    load_values: tuple[float, ...] = ()  # the per-load log ratios the interval is built on
    set_aside: int = 0  # disturbed rounds left out (``set_aside``)
    se_within: float = 0.0  # the SE that the round-to-round spread alone implies (``within_floor_se``)

    @property
    def verdict(self) -> str:
        if self.mixture:
            return INCONCLUSIVE
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
        if half > MAX_LOG_HALF_WIDTH:  # a factor beyond e^700 either way: no interval to speak of
            return 0.0, float("inf")
        return self.estimate * math.exp(-half), self.estimate * math.exp(half)

    def stop_interval(self, confidence: float) -> tuple[float, float]:
        """The interval an early stop is decided on: ``interval`` with the SE no smaller than
        ``se_within``, so that a run does not stop because its few load values happened to agree
        more closely than their own rounds allow (that selection biased the 95 % interval of the
        runs that stopped early: 83.5 % coverage of a true 1.05 at 30 % noise, 2000 simulations)."""
        return replace(self, se_log=max(self.se_log, self.se_within)).interval(confidence)

    def to_json(self) -> dict[str, Any]:
        return {"estimate": self.estimate, "ci_low": self.ci_low, "ci_high": self.ci_high,
                "confidence": self.confidence, "method": self.method, "margin": self.margin,
                "loads": self.loads, "rounds": self.rounds, "se_log": self.se_log, "df": self.df,
                "median_ratio": self.median_ratio, "mean_ratio": self.mean_ratio,
                "variance_components": dict(self.components), "mixture": self.mixture,
                "rounds_set_aside": self.set_aside, "se_within": self.se_within,
                "unseen_mode_share": unseen_mode_share(self.loads, self.confidence),
                "load_log_ratios": list(self.load_values)}


# Below this many loads the interval says so in words beside it: 2 loads leave the between-load part of
# the interval 1 degree of freedom (t = 12.7 at 95 %: a 2.26× estimate came out [0.186, 27.3] on the H200).
FEW_LOADS = 3


def few_loads_words(loads: int) -> str:
    """"" from ``FEW_LOADS`` loads on; else what so few loads mean for the interval, in words."""
    if loads >= FEW_LOADS:
        return ""
    df = max(loads - 1, 0)
    return (f"only {loads} load{'s' if loads != 1 else ''}: {df} degree{'s' if df != 1 else ''} of freedom behind "
            f"this interval, too few to trust its width ({FEW_LOADS}+ loads needed)")


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
# The load-level interval
# ---------------------------------------------------------------------------------------------


def round_pairs(values: Values) -> np.ndarray:
    """Consecutive rounds averaged in pairs (rounds 0+1, 2+3, …; the arm order flips between the two
    rounds of a pair, so an order effect cancels inside each pair). An unpaired last round stands alone."""
    v = np.asarray(values, dtype=np.float64)
    n = v.size // 2 * 2
    pairs = v[:n].reshape(-1, 2)
    finite = np.isfinite(pairs)
    # a round set aside (NaN) leaves its partner standing alone; a pair with both set aside stays NaN
    means = np.where(finite.any(axis=1), np.where(finite, pairs, 0.0).sum(axis=1) / np.maximum(finite.sum(axis=1), 1),
                     np.nan)
    return np.concatenate([means, v[n:]])


def load_value(baseline: Sequence[np.ndarray], candidate: Sequence[np.ndarray],
               keep: Sequence[bool] | np.ndarray | None = None) -> float:
    """One load's value: per round parity (even rounds run one arm order, odd rounds the other), the
    log ratio of the two arms' medians over the kept blocks of that parity pooled; the mean of the two.

    Each parity's ratio carries an order effect with opposite signs, so their mean cancels it (and
    linear drift alike). Why pooled medians and not a center of the rounds' log ratios: the median
    of ~85 iterations of a bimodal latency whose median lies on a mode's flank lands in the other
    mode in ~19 % of blocks (55/45 modes, simulated), a legitimate sampling swing of +22 % in one
    round. A median of round-couple means spreads such a round over half the couples of a 4-round
    load (+5 %); setting it aside (it is 18 σ out) truncates the sampling distribution and biased
    the estimate low (calibration: 87.7 % coverage). Pooled over the rounds of a parity the median
    has 2–3× the samples and jumps far less often, with the same precision otherwise (96.1 % coverage,
    verdict_calibration-2026-12-01-v3-2000; with no early stop while a load has no value, v4-2000, the
    other non-lopsided rows 94.3–95.7 %).
    ``keep[j]`` False: round ``j`` set aside (``set_aside``). A parity with no kept round is left out."""
    n = min(len(baseline), len(candidate))
    kept = np.ones(n, bool) if keep is None else np.asarray(keep, bool)[:n]
    parts = []
    for parity in (0, 1):
        rounds = [j for j in range(parity, n, 2) if kept[j]]
        if rounds:
            b = float(np.median(np.concatenate([np.asarray(baseline[j], np.float64) for j in rounds])))
            c = float(np.median(np.concatenate([np.asarray(candidate[j], np.float64) for j in rounds])))
            parts.append(math.log(b / c))
    return float(np.mean(parts)) if parts else float("nan")


def block_shifted(blocks: Sequence[np.ndarray], j: int) -> bool:
    """Did block ``j`` move as a whole against the arm's other blocks of its load? Its share of
    samples above their pooled median (ties count half) is ``BLOCK_SHIFT_Z`` binomial σ (½/√n) from
    ½, or every sample is on one side (a block of fewer than 10 samples cannot reach 3 σ).

    Why: a disturbance (a neighbour's burst while one arm ran) slows every iteration of its block;
    a median that jumped modes leaves the block's samples where they were — only which one is the
    middle changed (a 55/45 mixture: share ≈ 0.43, 1.3 σ, against ≥ 0.99 for a 30 % burst at 10 %
    noise, 9 σ)."""
    others = [np.asarray(b, np.float64) for k, b in enumerate(blocks) if k != j and len(b)]
    x = np.asarray(blocks[j], np.float64)
    if not others or x.size == 0:
        return True  # nothing to compare with: the log ratio alone decides
    m = float(np.median(np.concatenate(others)))
    share = (float(np.sum(x > m)) + 0.5 * float(np.sum(x == m))) / x.size
    return abs(share - 0.5) >= min(0.5, BLOCK_SHIFT_Z * 0.5 / math.sqrt(x.size))


def set_aside(per_load: Sequence[Values], baseline_blocks: Sequence[Sequence[np.ndarray]] | None = None,
              candidate_blocks: Sequence[Sequence[np.ndarray]] | None = None) -> tuple[list[np.ndarray], int]:
    """Rounds whose log ratio is ``ROUND_OUTLIER_Z`` robust σ from the median of their load's other
    rounds become NaN (their position kept, so A B / B A parity holds); σ is pooled over every load
    (1.4826 · the median absolute gap). With the blocks given, such a round is set aside only when
    one of its two blocks moved as a whole (``block_shifted``). Returns the rounds and how many were
    set aside.

    Why: a disturbed block (a neighbour's burst while one arm ran) moves its round by many σ. A
    median only half-removes it once the round is among few, and that half biases the load just
    enough to cost coverage without widening the interval (simulated: 91 % coverage with one 30 %
    round). Set aside, it costs nothing; a real difference moves every round of a load alike. But a
    round whose block median jumped to the other mode of a bimodal latency is far too and is not
    disturbed: setting those aside (19 % of rounds, all on one side) biased the estimate."""
    arrays = [np.asarray(v, dtype=np.float64) for v in per_load]
    # each round against the median of the OTHER rounds of its load: against a median that includes
    # it, a round of four looks closer than it is and σ comes out small (simulated: 11 % of stationary
    # replicates lost a sound round at "5 σ")
    gaps = [np.array([v[i] - np.median(np.delete(v, i)) for i in range(v.size)]) if v.size >= 3 else np.zeros(0)
            for v in arrays]
    pooled = np.abs(np.concatenate(gaps)) if gaps else np.empty(0)
    sigma = 1.4826 * float(np.median(pooled)) if pooled.size else 0.0
    if sigma == 0.0:
        return arrays, 0
    out, n = [], 0
    for i, (v, g) in enumerate(zip(arrays, gaps)):
        far = np.abs(g) > ROUND_OUTLIER_Z * sigma if g.size else np.zeros(v.size, bool)
        if baseline_blocks is not None and candidate_blocks is not None:
            b, c = baseline_blocks[i][: v.size], candidate_blocks[i][: v.size]
            far = np.array([bool(f) and (block_shifted(b, j) or block_shifted(c, j)) for j, f in enumerate(far)],
                           bool).reshape(v.shape)
        n += int(far.sum())
        out.append(np.where(far, np.nan, v))
    return out, n


def t_quantile(df: int, confidence: float = CONFIDENCE) -> float:
    """Student-t quantile (scipy.special.stdtrit: the same function scipy.stats.t.ppf calls, without
    importing scipy.stats, which took 2–3 s on the loaded 2-core machine — inside the time budget)."""
    from scipy import special

    return float(special.stdtrit(max(df, 1), 0.5 + confidence / 2))


def t_interval(values: Values, confidence: float = CONFIDENCE) -> tuple[float, float, float, int]:
    """The one-sample t interval of ``values`` (mean ± t(n−1) · sd/√n): (center, SE, half-width, df);
    with fewer than two values the half-width is infinite (nothing says how far the center may be off)."""
    x = np.asarray(values, dtype=np.float64)
    if x.size < 2:
        return float(x.mean()) if x.size else float("nan"), float("inf"), float("inf"), 0
    se = float(np.std(x, ddof=1)) / math.sqrt(x.size)
    df = x.size - 1
    return float(x.mean()), se, t_quantile(df, confidence) * se, df


def within_floor_se(kept: Sequence[np.ndarray]) -> float:
    """The SE of the mean of the load values that the round-to-round spread alone implies:
    √(within · mean(1/pairsᵢ) / L), ``within`` pooled over the loads' round pairs (rounds set aside
    left out). A load value's variance is between + within/pairs ≥ within/pairs, so the t interval's
    SE is floored here: that is the method-of-moments estimate with the between-load variance
    truncated at zero, as a negative variance estimate is no evidence that loads vary less than
    their rounds do."""
    pairs = [p[np.isfinite(p)] for p in (round_pairs(v) for v in kept)]
    dof = sum(p.size - 1 for p in pairs if p.size > 1)
    if dof == 0 or not pairs:
        return 0.0
    within = sum(float(np.sum((p - p.mean()) ** 2)) for p in pairs if p.size > 1) / dof
    inv_pairs = float(np.mean([1.0 / max(p.size, 1) for p in pairs]))
    return math.sqrt(within * inv_pairs / len(pairs))


def variance_components(loads: Sequence[Values]) -> dict[str, float]:
    """Method-of-moments split of the spread: ``within`` (pair to pair, inside a load) and
    ``between`` (load to load, beyond what the pairs explain). Drives where the loop adds effort."""
    pairs = [round_pairs(v) for v in loads if len(v)]
    within_parts = [np.var(p, ddof=1) for p in pairs if p.size > 1]
    within = float(np.mean(within_parts)) if within_parts else 0.0
    if len(pairs) < 2:
        return {"within": within, "between": 0.0}
    means = np.array([float(np.median(p)) for p in pairs])
    p_bar = float(np.mean([p.size for p in pairs]))
    between = max(0.0, float(np.var(means, ddof=1)) - within / p_bar)
    return {"within": within, "between": between}


def load_mixture(load_values: Values, within: float, pairs_per_load: float, margin: float) -> str:
    """Do the loads form a mixture: a minority far from the rest? ``""`` when not; else the reason.

    A minority of k loads (1 ≤ k ≤ ``MIXTURE_MAX_SHARE`` of them, taken from either end of the
    sorted values) is a separate mode when the empty stretch between it and the majority's nearest
    load is wider than ``MIXTURE_SEPARATION`` spreads of one load value and its mean is further
    than the margin (in log terms) from the majority's median."""
    x = np.sort(np.asarray(load_values, dtype=np.float64))
    n = x.size
    if n < MIXTURE_MIN_LOADS:
        return ""
    noise = math.sqrt(within / max(pairs_per_load, 1.0)) if within > 0 else 0.0
    for k in range(1, int(n * MIXTURE_MAX_SHARE) + 1):
        for minority, majority in ((x[:k], x[k:]), (x[n - k:], x[: n - k])):
            center = float(np.median(majority))
            spread = max(1.4826 * float(np.median(np.abs(majority - center))), noise)
            gap = abs(float(minority.mean()) - center)
            # the empty stretch between the minority and the majority's nearest load: a mode, not a tail
            edge = float(majority[0] - minority[-1]) if minority[0] < majority[0] else float(minority[0] - majority[-1])
            if gap > math.log1p(margin) and (spread == 0.0 or edge > MIXTURE_SEPARATION * spread):
                side = "slower" if float(minority.mean()) < center else "faster"
                return (f"{k} of {n} loads measured the candidate {math.expm1(gap):.1%} {side} than the other "
                        f"{n - k} did, far outside the usual spread of one load ({MIXTURE_SEPARATION:g} times it): the "
                        f"loads form two groups, so how often the slow one occurs is not known from {n} loads")
    return ""


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
) -> Speedup:
    """The speedup of ``candidate`` over ``baseline`` with its load-level CI.

    ``*_blocks[i][j]`` is the latency samples (ms) of load ``i``, round ``j``. With one load the
    interval has no load-to-load spread to use: that load's round pairs are the units then
    (df = pairs − 1) and the method says so — between-load differences are not in that interval.
    Pooled samples (no rounds) are refused: no rounds, no honest CI.
    """
    if len(baseline_blocks) and np.isscalar(baseline_blocks[0]):  # np.ndim would build an array: ragged rounds raise
        raise ValueError("speedup_ci needs blocks (loads → rounds → samples), not pooled samples")
    ratios = log_ratios(baseline_blocks, candidate_blocks)
    used = [i for i, v in enumerate(ratios) if v.size]
    per_load = [ratios[i] for i in used]
    if not per_load:
        raise ValueError("no rounds")
    n_rounds = int(sum(v.size for v in per_load))
    components = variance_components(per_load)
    kept, aside = set_aside(per_load, [baseline_blocks[i] for i in used], [candidate_blocks[i] for i in used])
    # a load whose every round was set aside says nothing
    live = [(i, v) for i, v in zip(used, kept) if np.isfinite(v).any()]
    kept = [v for _, v in live]
    values = np.array([load_value(baseline_blocks[i], candidate_blocks[i], np.isfinite(v)) for i, v in live])
    method, mixture = METHOD, ""
    se_within = 0.0
    if len(kept) >= 2:
        theta, se, half, df = t_interval(values, confidence)
        se_within = within_floor_se(kept)
        pairs_per_load = float(np.mean([round_pairs(v).size for v in per_load]))
        mixture = load_mixture(values, components["within"], pairs_per_load, margin)
    else:  # one load: its round pairs are the only units
        units = round_pairs(kept[0])
        theta, se, half, df = t_interval(units[np.isfinite(units)], confidence)
        if not math.isfinite(theta):
            theta = float(per_load[0].mean())
        method = "one load only (between-load differences NOT included): one-sample t interval of its round pairs' " \
                 "log ratios (rounds A B then B A, averaged), pairs−1 df"
    b_all = np.concatenate([np.concatenate(list(x)) for x in baseline_blocks if len(x)])
    c_all = np.concatenate([np.concatenate(list(x)) for x in candidate_blocks if len(x)])
    low, high = ((math.exp(theta - half), math.exp(theta + half)) if half <= MAX_LOG_HALF_WIDTH
                 else (0.0, float("inf")))
    return Speedup(
        estimate=math.exp(theta), ci_low=low, ci_high=high,
        confidence=confidence, method=method, margin=margin, loads=len(kept), rounds=n_rounds,
        se_log=se, df=df, median_ratio=float(np.median(b_all) / np.median(c_all)),
        mean_ratio=float(np.mean(b_all) / np.mean(c_all)), components=components, mixture=mixture,
        load_values=tuple(float(v) for v in values), set_aside=aside, se_within=se_within,
    )


def median_order_interval(values: Values, confidence: float = CONFIDENCE) -> tuple[float, float] | None:
    """The distribution-free interval of the median of ``values``' population from their order
    statistics: [x₍ᵣ₎, x₍ₙ₊₁₋ᵣ₎] with the largest r whose coverage 1 − 2·P(Binomial(n, ½) ≤ r − 1) is at
    least ``confidence`` (the binomial / sign-test interval). Its bounds are observed values, so it
    never leaves the observed range; None where even [min, max] covers less than ``confidence``
    (fewer than ``median_interval_units(confidence)`` values: no such interval exists)."""
    from fractions import Fraction

    x = np.sort(np.asarray(values, dtype=np.float64))
    n = int(x.size)
    alpha = Fraction(1.0 - confidence).limit_denominator(10 ** 6)
    total = 2 ** n
    tail, r = 0, 0  # tail: Σ C(n, i) for i < r + 1, compared exactly (2·tail/2ⁿ ≤ α)
    while r < (n + 1) // 2:
        tail += math.comb(n, r)
        if 2 * tail * alpha.denominator > alpha.numerator * total:
            break
        r += 1
    if r == 0:
        return None
    return float(x[r - 1]), float(x[n - r])


def median_interval_units(confidence: float = CONFIDENCE) -> int:
    """The fewest values with a ``median_order_interval`` at ``confidence``: 6 at 95 % (1 − 2·½⁶ = 0.969)."""
    n = 1
    while median_order_interval(np.arange(n, dtype=np.float64), confidence) is None:
        n += 1
    return n


def engine_median_ci(blocks: Sequence[Sequence[np.ndarray]], *, confidence: float = CONFIDENCE) -> tuple[float, float]:
    """CI of one engine's median latency that is honest in the same sense as the speedup's: it is made of
    loads, not iterations. Each load's unit is its median block median (one load: its blocks are the
    units); the interval is their order-statistic interval (``median_order_interval``), widened to hold the
    pooled median it is printed beside. Its bounds are observed medians, never a t interval's extrapolation
    (2 loads: t(1 df) = 12.7 made ``48.76 ms [0.665, 3575]``, issue 44). (NaN, NaN) where the units are too few
    for an interval at ``confidence`` (fewer than 6 at 95 %): the interval is not defined, and is not invented."""
    per_load = [[float(np.median(b)) for b in load] for load in blocks if len(load)]
    pooled = float(np.median(np.concatenate([np.concatenate(list(load)) for load in blocks if len(load)])))
    units = [float(np.median(v)) for v in per_load] if len(per_load) >= 2 else per_load[0]
    interval = median_order_interval(units, confidence)
    if interval is None:
        return math.nan, math.nan
    return min(interval[0], pooled), max(interval[1], pooled)


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
    if s.mixture:
        return s.mixture + "; more loads (a longer --time-budget-s) would show how often that mode occurs"
    more = rounds_to_decide(s)
    faster = s.estimate >= 1
    edge = 1 + s.margin if faster else 1 / (1 + s.margin)
    way = "faster" if faster else "slower"
    head = (f"the 95 % interval [{s.ci_low:.3f}, {s.ci_high:.3f}] holds values on both sides of {edge:.3f}× "
            f"({s.margin:.0%} {way}, the smallest difference that counts): this run cannot tell {way} from "
            f"about the same")
    if not math.isfinite(more):
        return head + "; the loads disagree more than the margin allows: more loads (a longer --time-budget-s), " \
                      "a quieter machine, or a wider --margin would decide it"
    more_rounds = max(1, int(math.ceil(more)))
    return (head + f"; about {plural(more_rounds, 'more round')} (~{more_rounds * round_s:.0f} s more --time-budget-s) "
                   "would decide it")


def unseen_mode_share(loads: int, confidence: float = CONFIDENCE) -> float:
    """The share of process starts below which a mode can go unseen by ``loads`` loads with
    probability above 1 − ``confidence``: 1 − (1 − confidence)^(1/loads) (none of the loads drew it:
    (1 − share)^loads; with 6 loads 39 %, with 20 loads 14 %)."""
    return 1.0 - (1.0 - confidence) ** (1.0 / loads) if loads >= 1 else 1.0


def loads_to_see(share: float, confidence: float = CONFIDENCE) -> int:
    """The fewest loads of which at least one draws a mode of ``share`` of process starts with
    probability ≥ ``confidence``: the smallest L with (1 − share)^L ≤ 1 − confidence (the inverse of
    ``unseen_mode_share``; a 20 % mode: 14 loads, a 10 % one: 29)."""
    return max(1, math.ceil(math.log(1.0 - confidence) / math.log1p(-share) - 1e-9))


def unseen_mode_note(s: Speedup, max_loads: int | None = None) -> str | None:
    """What a decisive verdict from L loads cannot promise: a mode of process starts (a load that
    lands slow) rarer than ``unseen_mode_share`` is missed by all of them too often to rule out; and
    how to guard a mode half that common (``--min-loads``, from ``loads_to_see``), or, when that
    takes more than ``max_loads``, what ``max_loads`` guards."""
    if s.loads < 2 or s.verdict == INCONCLUSIVE:
        return None
    share = unseen_mode_share(s.loads, s.confidence)
    note = (f"from {s.loads} loads: a mode of process starts rarer than {share:.0%} goes unseen by all of them "
            f"more than {1 - s.confidence:.0%} of the time")
    rarer = max(round(share / 2, 2), 0.01)
    loads = loads_to_see(rarer, s.confidence)
    if max_loads is not None and loads > max_loads:
        loads, rarer = max_loads, unseen_mode_share(max_loads, s.confidence)
    if loads <= s.loads:
        return note
    return note + f"; --min-loads {loads} sees a {rarer:.0%} mode {s.confidence:.0%} of the time"


def mean_median_note(s: Speedup) -> str | None:
    """When the mean ratio and the median ratio disagree, say both: the median answers "typical
    call", the mean "throughput over many calls", and a bimodal or heavy-tailed engine splits them."""
    if not (math.isfinite(s.mean_ratio) and math.isfinite(s.median_ratio)):
        return None
    if abs(s.mean_ratio / s.median_ratio - 1.0) <= MEAN_MEDIAN_DISAGREE:
        return None
    return (f"the median ratio is {s.median_ratio:.3f}× but the mean ratio is {s.mean_ratio:.3f}×: "
            "the typical call and the average call disagree (see the distribution shape)")
