"""Issue 41, item 2: the compare result printed and the one saved are one value. ``CompareReport.to_json`` read
the clock (the budget spent) every time it was called, so the JSON the CLI printed from and the file it wrote a
moment later differed; once ``seal``ed it reads none."""
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
