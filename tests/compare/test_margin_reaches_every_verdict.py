"""Issue 41, item 3: one margin for every verdict of a run. ``--margin`` becomes ``RoundPlan.margin``
(cli.compare._plan); the loop judges every candidate under it, an A/B and a what-if run that same loop,
train-compare judges a graphed arm against its eager arm under the loop's margin, and the serving sweep's
throughput verdicts at the p99 target take ``ServingConfig.margin`` (the CLI fills it from --margin).

Each verdict is checked just inside and just outside the margin at a known ratio of exactly 1.03 (fake
runners on a fake clock, or windows of fixed rates: no real time), so a margin that did not reach it
would leave both sides with the default verdict."""
from __future__ import annotations

import json
import math

import numpy as np
import pytest

from trtprof.measure import interleave
from trtprof.measure.timing import Samples, TimingConfig
from trtprof.stats.speedup import EQUIVALENCE_MARGIN, EQUIVALENT, FASTER, verdict

RATIO = 1.03
JUST_INSIDE, JUST_OUTSIDE = 0.029, 0.031  # a margin just under the true 3 % difference, and just over it


class FixedRunner:
    """Fake: a cpu 'runner' whose every block is constant at ``median_ms``."""

    device = "cpu"

    def __init__(self, median_ms: float) -> None:
        self.median_ms = median_ms


def fixed_loop(medians: dict[str, float], margin: float) -> interleave.InterleavedOutcome:
    """run_interleaved over arms of constant latencies (baseline first), on a fake clock."""
    clock = [0.0]

    def measure(runner: FixedRunner, feeds, config: TimingConfig) -> Samples:
        lat = np.full(config.iterations, runner.median_ms)
        clock[0] += float(lat.sum()) / 1e3 + 0.001
        return Samples(stages={"latency_ms": lat}, span_s=float(lat.sum()) / 1e3, warmup_done=config.warmup,
                       warmup_s=0.0)

    def open_load(i: int) -> interleave.InProcessLoad:
        clock[0] += 0.1
        return interleave.InProcessLoad({name: (FixedRunner(ms), {}) for name, ms in medians.items()}, measure)

    plan = interleave.RoundPlan(round_iterations=20, time_budget_s=3.0, margin=margin)
    return interleave.run_interleaved(list(medians), open_load, plan, clock=lambda: clock[0])


def test_the_default_margin_is_below_the_ratio_these_tests_sit_at():
    assert EQUIVALENCE_MARGIN < JUST_INSIDE < RATIO - 1 < JUST_OUTSIDE


@pytest.mark.parametrize("margin, expected", [(JUST_INSIDE, FASTER), (JUST_OUTSIDE, EQUIVALENT)])
def test_the_plans_margin_decides_compares_precision_verdict(margin, expected):
    """compare's (and an A/B's, a what-if's: the same loop) verdict of every candidate, under the plan's margin."""
    s = fixed_loop({"fp32": RATIO, "fp16": 1.0}, margin).speedups["fp16"]
    assert s.estimate == pytest.approx(RATIO, rel=1e-6)
    assert s.margin == margin and s.verdict == expected


@pytest.mark.parametrize("margin, expected", [(JUST_INSIDE, FASTER), (JUST_OUTSIDE, EQUIVALENT)])
def test_train_compares_graphed_vs_eager_verdict_takes_the_loops_margin(margin, expected):
    """The graphed arm against its eager arm (not the loop's baseline): judged under the loop's margin,
    not the default (it was the default whatever the plan said)."""
    from trtprof.train.run import pair_speedup

    outcome = fixed_loop({"fp32": RATIO * RATIO, "amp": RATIO, "amp+graphed": 1.0}, margin)
    s = pair_speedup(outcome, "amp", "amp+graphed")
    assert s.estimate == pytest.approx(RATIO, rel=1e-6)
    assert s.margin == margin and s.verdict == expected
    assert pair_speedup(outcome, "fp32", "amp") is outcome.speedups["amp"]


def _points(base_rate: float, cand_rate: float, rounds: int = 4) -> list:
    """Two arms' one point each, ``rounds`` windows of fixed request rates (1 request = 1 sample), p99 1 ms."""
    from trtprof.serving.driver import Window
    from trtprof.serving.sweep import Point

    points = []
    for arm, rate in (("fp32", base_rate), ("fp16", cand_rate)):
        p = Point(arm=arm, precision=arm, backend="fake", model="m", batch_size=1, concurrency=1)
        for _ in range(rounds):
            n = 1000
            p.windows.append(Window(latencies_ms=np.full(n, 1.0), wall_s=n / rate, per_worker=[n]))
        points.append(p)
    return points


@pytest.mark.parametrize("margin, expected", [(JUST_INSIDE, FASTER), (JUST_OUTSIDE, EQUIVALENT)])
def test_the_serving_configs_margin_decides_the_throughput_verdict_at_the_target(monkeypatch, margin, expected):
    """The sweep's verdicts at the p99 target, as the sweep makes them (``ServingConfig.margin``)."""
    from trtprof.serving import sweep as serving_sweep
    from trtprof.serving.driver import ServingConfig

    monkeypatch.setattr(serving_sweep, "serving_validity", lambda *a, **k: None)  # the stamp is not under test
    config = ServingConfig(concurrency=(1,), window_s=0.05, rounds=4, slo_ms=5.0, margin=margin)
    result = serving_sweep._finished(config, {"fp32": None, "fp16": None}, {
        (p.arm,): p for p in _points(1000.0, 1000.0 * RATIO)}, None, False)
    (v,) = result.slo["verdicts"]
    assert v["estimate"] == pytest.approx(RATIO, rel=1e-9) and result.slo["margin"] == margin
    assert v["verdict"] == expected


def test_what_if_margin_reaches_every_comparison_and_its_line(tmp_path):
    """Through the CLI: an A/B run (here a what-if, through compare_ab) under ``--margin 0.2`` judges every
    comparison with 0.2, and the what-if line says that verdict."""
    pytest.importorskip("onnxruntime")
    from trtprof.cli import main
    from trtprof.model.demo import make_demo_model

    src = make_demo_model(tmp_path / "net.onnx", channels=12, image=16, classes=10)
    out = tmp_path / "wi.json"
    assert main(["compare", str(src), "--what-if", "pad-channels", "--engines", str(tmp_path / "e"),
                 "--backend", "onnxruntime", "--time-budget-s", "0.5", "--round-iterations", "20",
                 "--margin", "0.2", "--out", str(out)]) == 0
    data = json.loads(out.read_text())
    assert data["settings"]["equivalence_margin"] == 0.2
    for c in data["comparisons"]:
        s = c["speedup"]
        assert s["margin"] == 0.2 and c["verdict"] == verdict(s["ci_low"], s["ci_high"], 0.2)
    changed = data["comparisons"][-1]
    assert changed["candidate"] == "fp16+pad-channels"
    assert f"({changed['verdict']}): " in data["ab"]["what_if"]["lines"][0]  # the verdict, then what it made of the finding
    assert not math.isnan(changed["speedup"]["estimate"])
