"""Every note a verdict carries is in plain words: no formula (issue 34: "spans the ±1% margin edge
1/(1+margin)"). A formula may follow as an "Exactly:" detail, never before it."""
from __future__ import annotations

import math

import numpy as np
import pytest

from trtprof.stats import speedup as sp
from trtprof.stats.throughput import METHOD_BLOCKS, METHOD_MEDIAN, Throughput

# what reads as a formula rather than a sentence
FORMULA_MARKS = ("1/(1", "(1+", "(1 +", "margin)", "√", "σ", "·", " / ", "(>", "> ", "<", "≤", "≥", "^", "log(",
                 "exp(", "df")


def words(note: str) -> str:
    """The part of a note a person reads first: everything before an "Exactly:" detail."""
    return note.split("Exactly:", 1)[0]


def decided(loads: int, mean: float = 1.05, median: float = 1.05) -> sp.Speedup:
    return sp.Speedup(estimate=1.05, ci_low=1.04, ci_high=1.06, loads=loads, rounds=4 * loads, se_log=0.004,
                      df=loads - 1, median_ratio=median, mean_ratio=mean, components={"between": 0.0})


def notes() -> dict[str, str]:
    rng = np.random.default_rng(3)
    base = [[1.0 + 0.2 * rng.standard_normal(20) ** 2 for _ in range(4)] for _ in range(3)]
    cand = [[0.99 * (1.0 + 0.2 * rng.standard_normal(20) ** 2) for _ in range(4)] for _ in range(3)]
    inconclusive = sp.speedup_ci(base, cand)
    assert inconclusive.verdict == sp.INCONCLUSIVE
    wide = sp.Speedup(estimate=1.0, ci_low=0.5, ci_high=2.0, loads=3, rounds=12, se_log=float("inf"), df=2)
    shape = sp.LatencyShape(modes=2, mode_ms=(1.0, 2.0), tail_ratio=sp.HEAVY_TAIL_RATIO + 1, p99_over_median=60.0)
    out = {
        "few loads": sp.few_loads_words(2),
        "inconclusive": sp.inconclusive_hint(inconclusive, 0.1),
        "inconclusive, loads disagree": sp.inconclusive_hint(wide, 0.1),
        "unseen mode": sp.unseen_mode_note(decided(3), max_loads=60) or "",
        "mean vs median": sp.mean_median_note(decided(6, mean=1.3, median=1.0)) or "",
        "mixture": sp.load_mixture([0.0] * 5 + [0.2], 0.0004, 4.0, 0.01),
        "shape": shape.describe(),
    }
    for method in (METHOD_BLOCKS, METHOD_MEDIAN):
        out[f"throughput {method}"] = Throughput(per_s=1000.0, method=method, wall_per_s=500.0, blocks=9).note or ""
    return out


@pytest.mark.parametrize("name", sorted(notes()))
def test_a_verdict_note_has_no_formula_before_exactly(name):
    note = notes()[name]
    assert note, f"{name}: the case made no note (the test would check nothing)"
    found = [m for m in FORMULA_MARKS if m in words(note)]
    assert not found, f"{name}: {found} in {note!r}"


def test_the_check_sees_a_formula():
    """The marks catch the old wording, and an "Exactly:" detail is allowed after the words."""
    old = "the CI spans the ±1% margin edge 1/(1+margin)"
    assert any(m in words(old) for m in FORMULA_MARKS)
    assert not any(m in words("about the same. Exactly: 1/(1+margin)") for m in FORMULA_MARKS)
    assert math.isfinite(sp.HEAVY_TAIL_RATIO)
