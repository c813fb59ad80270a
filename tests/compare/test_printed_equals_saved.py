"""Issue 41, item 2: the compare result printed and the one saved are one value. ``CompareReport.to_json`` read
the clock (the budget spent) every time it was called, so the JSON the CLI printed from and the file it wrote a
moment later differed; once ``seal``ed it reads none. ``fix-fp16`` likewise prints the one document it saves."""
from __future__ import annotations

import json
import time
from pathlib import Path

from trtprof.compare import core as cmp
from trtprof.measure.interleave import RoundPlan
from trtprof.measure.budget import TimeBudget
from trtprof.util.clock import CommandClock


def report() -> cmp.CompareReport:
    now = time.perf_counter()
    budget = TimeBudget.for_command(5.0, CommandClock(started=now, imported=now), grows=False)
    return cmp.CompareReport(model="m", backend="onnxruntime", plan=RoundPlan(), comparisons=[], results=[],
                             environment={}, budget={"time_budget_s": 5.0}, time_budget=budget)


def test_unsealed_reports_read_the_clock_and_sealed_ones_do_not(tmp_path: Path):
    r = report()
    first = r.to_json()["budget"]["spent_s"]
    time.sleep(0.02)
    assert r.to_json()["budget"]["spent_s"] > first  # the defect the seal removes
    r.seal()
    sealed = r.to_json()
    time.sleep(0.02)
    assert r.to_json() == sealed
    r.write_json(tmp_path / "c.json")
    assert json.loads((tmp_path / "c.json").read_text()) == json.loads(json.dumps(sealed))


def test_seal_is_fixed_once():
    r = report().seal()
    spent = r.spent_s
    time.sleep(0.02)
    assert r.seal().spent_s == spent


def dumped(data) -> str:
    """JSON text, keys sorted: equal for equal documents (NaN, which compare writes for an interval it could
    not define, compares equal to itself here, unlike in ``==``)."""
    return json.dumps(data, sort_keys=True, allow_nan=True)


def test_the_cli_prints_and_saves_one_value(conv_model, tmp_path, capsys, monkeypatch):
    """Through ``trtprof compare`` on ONNX Runtime CPU: one document is made, each comparison printed is that
    document's, and the file saved holds that document as it was when it was printed (budget spent
    included); the file read back is the same value, and prints the same lines."""
    import pytest

    pytest.importorskip("onnxruntime")
    from trtprof.cli import compare as cli_compare
    from trtprof.cli import main
    from trtprof.compare.report_value import CompareReport
    from trtprof.compare.results_file import read_results

    made, printed = [], []
    document, print_comparison = CompareReport.document, cli_compare.print_comparison

    def spy_document(self):
        doc = document(self)
        made.append((doc, dumped(doc.to_json())))  # the value as it was when made, before anything is printed
        return doc

    def spy_print(c):
        printed.append(c)
        print_comparison(c)

    monkeypatch.setattr(CompareReport, "document", spy_document)
    monkeypatch.setattr(cli_compare, "print_comparison", spy_print)
    out = tmp_path / "compare.json"
    assert main(["compare", str(conv_model), "--in-process", "--engines", str(tmp_path / "e"), "--out", str(out),
                 "--batch-sizes", "1,2", "--backend", "onnxruntime", "--time-budget-s", "0.5",
                 "--round-iterations", "20"]) == 0
    stdout = capsys.readouterr().out
    assert len(made) == 1  # one value for the printing and the saving
    doc, at_print = made[0]
    assert printed and all(p is c for p, c in zip(printed, doc.comparisons)) and len(printed) == len(doc.comparisons)
    saved = json.loads(out.read_text())
    assert "spent_s" in saved["budget"]  # the field the clock used to change between printing and saving
    assert dumped(saved) == at_print
    back = read_results(out)
    assert dumped(back.to_json()) == at_print
    for c in back.comparisons:  # the lines the file gives are the lines the run printed
        print_comparison(c)
    again = capsys.readouterr().out
    assert again.strip() and again in stdout


class DriftingComparison:
    """A live comparison whose ``result()`` differs on every call, as one that read a clock would: what
    ``fix-fp16`` prints and what it saves agree only when both come from one call, one value. (Its
    ``speedup``/``accuracy``/``verdict`` are the live attributes the CLI printed from before that.)"""

    batch_size = 4
    validity = None

    def __init__(self) -> None:
        import numpy as np

        from trtprof.compare.accuracy import AccuracyBudget, compare_outputs, judge

        self.calls = 0
        acc = compare_outputs({"y": np.ones(10)}, {"y": np.ones(10) * 1.00001})
        self.accuracy_delta = acc.__class__(**{**acc.__dict__, "verdict": judge(acc, AccuracyBudget.parse(None))})

    def summary(self):
        from trtprof.compare.result import SpeedupSummary

        est = 1.0 + self.calls / 8
        return SpeedupSummary(est, est - 0.0625, est + 0.0625, {"method": "test"})

    @property
    def speedup(self):
        return self.summary()

    @property
    def accuracy(self):
        return self.accuracy_delta

    verdict = "faster"

    def result(self):
        from trtprof.compare.result import ArmLatency, ComparisonResult

        self.calls += 1
        arm = {"baseline": ArmLatency("fp32", "fp32", 2.0, 1.9, 2.1, 60, 0.01),
               "candidate": ArmLatency("fp16", "fp16", 2.0 / self.summary().estimate, 1.0, 1.9, 60, 0.01)}
        return ComparisonResult(batch_size=4, baseline="fp32", candidate="fp16", speedup=self.summary(),
                                verdict=self.verdict, accuracy=self.accuracy_delta.to_json(), latency=arm, loads=6,
                                rounds=10, stop_reason="decisive", min_loads=6)


def test_fix_fp16_prints_the_value_it_saves(conv_model, tmp_path, capsys, monkeypatch):
    """``fix-fp16`` printed the live comparison (``c.result()``, its speedup and accuracy) and saved a JSON made
    by another call: now one document (``Fix.document``), printed and saved. The numbers printed are the
    file's, and the file read back prints the same lines."""
    from trtprof.cli import main
    from trtprof.cli.compare import print_comparison
    from trtprof.compare import fix_fp16 as fix_module
    from trtprof.compare.fix_fp16 import Fix, Search, Trial
    from trtprof.compare.results_file import read_results

    live = DriftingComparison()
    search = Search(budget="cosine>=0.9999", evaluation="engine", inputs="random inputs", nodes=5, max_builds=24,
                    trials=[Trial("seed", ("conv0",), "OK", "meets the budget", 0.999999, None)], keep=("conv0",))
    report = cmp.CompareReport(model="m", backend="onnxruntime", plan=RoundPlan(), comparisons=[live], results=[],
                               environment={})
    fix = Fix(search=search, report=report)

    def fake_fix_fp16(model, batch_size, options, settings, *, max_builds, on_trial, on_search_done):
        on_search_done(fix)
        return fix

    monkeypatch.setattr(fix_module, "fix_fp16", fake_fix_fp16)
    out = tmp_path / "fix.json"
    assert main(["fix-fp16", str(conv_model), "--engines", str(tmp_path / "e"), "--backend", "onnxruntime",
                 "--batch-size", "4", "--out", str(out)]) == 0
    stdout = capsys.readouterr().out
    assert live.calls == 1  # one value: the live comparison made into its result once
    saved = json.loads(out.read_text())
    s = saved["comparisons"][0]["speedup"]
    assert s["estimate"] == 1.125 and saved["fix_fp16"]["keep"] == ["conv0"]
    assert f"speedup {s['estimate']:.3f}× [95% CI {s['ci_low']:.3f}, {s['ci_high']:.3f}]" in stdout
    assert f"fp16 with 1 node(s) in fp32: {s['estimate']:.3g}× [{s['ci_low']:.3g}, {s['ci_high']:.3g}] faster than" \
        in stdout
    assert f"accuracy {saved['comparisons'][0]['accuracy']['verdict']['label']}, cosine " in stdout
    back = read_results(out)
    print_comparison(back.comparisons[0])
    again = capsys.readouterr().out
    assert again.strip() and again in stdout
