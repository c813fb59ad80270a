"""compare's accuracy pass on the user's --inputs is bounded by the time budget and says so (issue 44 #2).

The pass runs the samples batch by batch, every arm on each batch before the next, and starts no batch
past its deadline (``RANGE_ANALYSIS_SHARE`` of a batch size's budget); the first batch always runs, the
batch that crosses the deadline is the last. Fake clocks throughout: no test depends on how fast
anything runs."""
from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from trtprof.compare import accuracy_pass
from trtprof.compare.accuracy_pass import ALL_SAMPLES, BUDGET_CUT, SampleCount, bounded_outputs, user_outputs
from trtprof.compare.options import CompareOptions
from trtprof.convert.fp16range import Deadline
from trtprof.measure.budget import RANGE_ANALYSIS_SHARE
from trtprof.measure.interleave import RoundPlan
from trtprof.model.user_inputs import InputData

SAMPLES = 10
BATCH = 2


class FakeClock:
    """A clock that moves only when told (``step`` seconds per inference of a ``FakeRunner``)."""

    def __init__(self, t: float = 0.0) -> None:
        self.t = t

    def __call__(self) -> float:
        return self.t


@dataclass
class FakeRunner:
    """Returns its input doubled (``y``: [N, 1]) and records the sample indices it saw (x holds them)."""

    clock: FakeClock
    step: float = 1.0
    seen: list[int] = field(default_factory=list)
    inputs: tuple = (SimpleNamespace(name="x", dtype="float32"),)

    def infer(self, feeds):
        self.clock.t += self.step
        x = feeds["x"]
        self.seen.extend(int(v) for v in x[:, 0])
        return {"y": 2 * x}


def data(samples: int = SAMPLES) -> InputData:
    return InputData("d.npz", {"x": np.arange(samples, dtype=np.float32).reshape(samples, 1)})


def run(deadline_at: float | None, *, wanted: int = SAMPLES, samples: int = SAMPLES):
    clock = FakeClock()
    runners = {"fp32": FakeRunner(clock), "fp16": FakeRunner(clock)}
    deadline = Deadline(at=deadline_at, clock=clock) if deadline_at is not None else None
    outputs, memory, count = bounded_outputs(runners, {}, data(samples), BATCH, wanted, deadline)
    return runners, outputs, memory, count


# Each batch: 2 arms × 1 s, so batch k ends at 2k s.
@pytest.mark.parametrize("at,batches", [
    (4.0, 3),    # batch 2 ends exactly at the deadline (just inside): batch 3 starts, crosses it, is the last
    (3.999, 2),  # batch 2 ends just past it (just outside): batch 2 is the last
    (-100.0, 1),  # past before the pass began: the first batch runs anyway
])
def test_no_batch_starts_past_the_deadline_and_the_one_that_crosses_it_is_the_last(at, batches):
    runners, outputs, _, count = run(at)
    assert count == SampleCount(ran=batches * BATCH, total=SAMPLES, seconds=2.0 * batches, cut=BUDGET_CUT)
    assert outputs["fp32"]["y"].shape == (batches * BATCH, 1)


def test_every_arm_sees_the_same_samples_and_its_outputs_are_theirs():
    runners, outputs, memory, count = run(5.0)  # 3 batches: 6 of 10 samples
    assert runners["fp32"].seen == runners["fp16"].seen == list(range(6))
    for arm in ("fp32", "fp16"):
        np.testing.assert_array_equal(outputs[arm]["y"], 2 * np.arange(6, dtype=np.float32).reshape(6, 1))
    assert set(memory) == {"fp32", "fp16"}  # read around each arm's first batch
    assert count.stop_line(BATCH) == ("accuracy pass at batch 2: 6 of 10 samples in 6.0 s (its share of the "
                                      "budget); the verdict rests on those")
    assert count.describe("d.npz") == "inputs d.npz (6 of 10 samples: its share of the budget)"


def test_without_a_deadline_every_sample_runs_and_nothing_is_cut():
    runners, outputs, _, count = run(None)
    assert count.ran == count.total == SAMPLES and count.cut == ""
    assert runners["fp32"].seen == runners["fp16"].seen == list(range(SAMPLES))
    assert count.describe("d.npz") == data().describe()  # the words of before when every sample ran


def test_a_deadline_never_reached_leaves_nothing_cut():
    _, _, _, count = run(1e9)
    assert count.ran == SAMPLES and count.cut == ""


def test_a_count_asked_runs_exactly_those_samples():
    runners, outputs, _, count = run(None, wanted=5)  # 3 batches of 2, the 6th sample dropped
    assert outputs["fp16"]["y"][:, 0].tolist() == [0, 2, 4, 6, 8]
    assert count.ran == 5 and count.cut == "--accuracy-samples 5"
    assert count.describe("d.npz") == "inputs d.npz (5 of 10 samples: --accuracy-samples 5)"


def options(budget_s: float, asked=None) -> CompareOptions:
    return CompareOptions(plan=RoundPlan(time_budget_s=budget_s), data=data(), accuracy_samples=asked)


@pytest.fixture
def clock(monkeypatch):
    clock = FakeClock(100.0)
    monkeypatch.setattr(accuracy_pass, "CLOCK", clock)
    return clock


def test_the_deadline_is_the_range_analysis_share_of_a_batch_sizes_budget(clock):
    deadline = accuracy_pass.pass_deadline(options(10.0))
    assert deadline is not None and deadline.at == 100.0 + RANGE_ANALYSIS_SHARE * 10.0
    assert accuracy_pass.pass_deadline(options(10.0, ALL_SAMPLES)) is None
    assert accuracy_pass.pass_deadline(options(10.0, 4)) is None


@pytest.mark.parametrize("budget_s,ran", [
    (4.001 / RANGE_ANALYSIS_SHARE, 6),  # a 4.001-s share: batch 2 ends inside it, batch 3 crosses it
    (3.999 / RANGE_ANALYSIS_SHARE, 4),  # a 3.999-s share: batch 2 crosses it
])
def test_the_budget_bounds_the_pass(clock, budget_s, ran):
    runners = {"fp32": FakeRunner(clock), "fp16": FakeRunner(clock)}
    _, _, count = user_outputs(runners, {}, data(), BATCH, options(budget_s))
    assert count.ran == ran and count.cut == BUDGET_CUT


@pytest.mark.parametrize("asked,ran", [(ALL_SAMPLES, SAMPLES), (3, 3), (SAMPLES + 5, SAMPLES)])
def test_a_count_asked_is_run_whatever_the_budget(clock, asked, ran):
    runners = {"fp32": FakeRunner(clock), "fp16": FakeRunner(clock)}
    _, _, count = user_outputs(runners, {}, data(), BATCH, options(0.0, asked))  # a budget of nothing
    assert count.ran == ran and runners["fp32"].seen == runners["fp16"].seen


def test_the_count_travels_with_the_accuracy_result():
    from trtprof.compare.measuring import accuracy_of

    ref = {"y": np.arange(6, dtype=np.float32).reshape(6, 1)}
    count = SampleCount(ran=6, total=10, seconds=1.0, cut=BUDGET_CUT)
    acc = accuracy_of(ref, ref, None, None, None, count.describe("d.npz"), count)
    doc = acc.to_json()
    assert (doc["samples"], doc["samples_total"]) == (6, 10)
    assert (doc["verdict"]["samples"], doc["verdict"]["samples_total"]) == (6, 10)
    assert doc["inputs"] == doc["verdict"]["inputs"] == "inputs d.npz (6 of 10 samples: its share of the budget)"
    random = accuracy_of(ref, ref, None, None, None, "random inputs (seed 0)").to_json()
    assert "samples" not in random and "samples_total" not in random and "samples" not in random["verdict"]


# ---------------------------------------------------------------------------------------------------
# The CLI: a small generated model, an --inputs file, the count on the terminal, in the JSON and the page
# ---------------------------------------------------------------------------------------------------

BATCH_CLI = 4
FILE_SAMPLES = 40


@pytest.fixture
def npz(tmp_path: Path) -> Path:
    path = tmp_path / "d.npz"
    rng = np.random.default_rng(0)
    np.savez(path, input=rng.standard_normal((FILE_SAMPLES, 3, 16, 16)).astype(np.float32))
    return path


def compare(conv_model: Path, npz: Path, tmp_path: Path, *extra: str) -> list[str]:
    from trtprof.cli import main

    out = tmp_path / "c.json"
    assert main(["compare", str(conv_model), "--inputs", str(npz), "--engines", str(tmp_path / "e"),
                 "--backend", "onnxruntime", "--in-process", "--batch-sizes", str(BATCH_CLI),
                 "--time-budget-s", "0.5", "--round-iterations", "3", "--out", str(out), *extra]) == 0
    return out


def ticking_clock(monkeypatch) -> FakeClock:
    """The pass's clock, moving 1 s at every reading."""
    clock = FakeClock()

    def tick() -> float:
        clock.t += 1.0
        return clock.t

    monkeypatch.setattr(accuracy_pass, "CLOCK", tick)
    return clock


def test_compare_on_inputs_reports_the_samples_its_verdict_rests_on(conv_model, npz, tmp_path, capsys, monkeypatch):
    """A fake clock that moves 1 s a reading: the pass's 0.075-s share is past at the first check, so one
    batch runs; the start-up says so as it stops, the verdict line, the JSON and the page give the count."""
    pytest.importorskip("onnxruntime")
    ticking_clock(monkeypatch)
    out = compare(conv_model, npz, tmp_path)
    text = capsys.readouterr().out
    acc = json.loads(out.read_text())["comparisons"][0]["accuracy"]
    assert (acc["samples"], acc["samples_total"]) == (BATCH_CLI, FILE_SAMPLES)
    assert acc["inputs"] == f"inputs {npz} ({BATCH_CLI} of {FILE_SAMPLES} samples: its share of the budget)"
    assert [o["samples"] for o in acc["outputs"]] == [BATCH_CLI]  # the metrics ran on those samples only
    assert re.search(rf"start-up, [\d.]+ s in: the accuracy pass: every engine loaded here once, run on your "
                     rf"--inputs, as many samples as 15 % of a batch size's budget allows \(0\.1 s each; "
                     rf"--accuracy-samples all: every one\), at batch {BATCH_CLI}\n", text)
    assert (f"accuracy pass at batch {BATCH_CLI}: {BATCH_CLI} of {FILE_SAMPLES} samples in 2.0 s (its share of the "
            "budget); the verdict rests on those") in text
    assert f"accuracy vs fp32: {acc['verdict']['label']} on {BATCH_CLI} of {FILE_SAMPLES} samples [" in text
    from trtprof.report.compare_page import load, render_html

    assert f"{BATCH_CLI} of {FILE_SAMPLES} samples: its share of the budget" in render_html(load(out))


def test_accuracy_samples_all_runs_every_sample(conv_model, npz, tmp_path, capsys, monkeypatch):
    pytest.importorskip("onnxruntime")
    ticking_clock(monkeypatch)
    out = compare(conv_model, npz, tmp_path, "--accuracy-samples", "all")
    text = capsys.readouterr().out
    acc = json.loads(out.read_text())["comparisons"][0]["accuracy"]
    assert (acc["samples"], acc["samples_total"]) == (FILE_SAMPLES, FILE_SAMPLES)
    assert acc["inputs"] == f"inputs {npz} ({FILE_SAMPLES} samples)"
    assert f"on all {FILE_SAMPLES} samples [" in text and "the verdict rests on those" not in text
    assert "run on your --inputs, every sample (--accuracy-samples all)" in text


@pytest.mark.parametrize("value,why", [
    ("0", "expected 'all' or a number of samples: '0' must be > 0"),
    ("2147483648", "expected 'all' or a number of samples: '2147483648': at most 2,147,483,647 (int32)"),
    ("some", "expected 'all' or a number of samples: 'some' is not an integer"),
])
def test_a_bad_count_is_exit_2_in_one_line(conv_model, tmp_path, capsys, value, why):
    from trtprof.cli import main

    assert main(["compare", str(conv_model), "--accuracy-samples", value, "--out", str(tmp_path / "c.json")]) == 2
    [line] = capsys.readouterr().err.strip().splitlines()
    assert f"argument --accuracy-samples: {why}" in line


def test_accuracy_samples_without_inputs_is_exit_2_in_one_line(conv_model, tmp_path, capsys):
    from trtprof.cli import main

    assert main(["compare", str(conv_model), "--accuracy-samples", "all", "--engines", str(tmp_path / "e"),
                 "--backend", "onnxruntime", "--out", str(tmp_path / "c.json")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].endswith("--accuracy-samples all: applies to --inputs only (without them the accuracy pass "
                            "runs one seeded batch per batch size)")
    assert not any("Traceback" in line for line in err)
    assert not (tmp_path / "e").exists()  # refused before any build
