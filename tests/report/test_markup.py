"""Issue 36, deliverable 2: stored markup. A crafted compare/sweep/bench JSON never puts markup into a
page (every value escaped by the kit's one helper, numbers checked as numbers first), and CSV cells
that a spreadsheet would run as a formula are written as text."""
from __future__ import annotations

import copy
import csv
import io
import json
from pathlib import Path

import pytest

from trtprof.cli import main

from ..cli.test_user_errors import assert_one_line, run_main as _run

PAYLOAD = '"><script>alert(1)</script>'


@pytest.fixture(scope="module")
def compare_json(tmp_path_factory) -> dict:
    from trtprof.model.demo import make_demo_model

    tmp = tmp_path_factory.mktemp("markup")
    model = make_demo_model(tmp / "convnet.onnx", channels=8, image=16, classes=10)
    out = tmp / "c.json"
    assert main(["compare", str(model), "--engines", str(tmp / "e"), "--backend", "onnxruntime", "--in-process",
                 "--time-budget-s", "2", "--round-iterations", "2", "--out", str(out)]) == 0
    return json.loads(out.read_text())


def _strings_replaced(value, keep=("schema",)):
    if isinstance(value, dict):
        return {k: (v if k in keep else _strings_replaced(v, keep)) for k, v in value.items()}
    if isinstance(value, list):
        return [_strings_replaced(v, keep) for v in value]
    return PAYLOAD if isinstance(value, str) else value


def _report(capsys, tmp_path: Path, data: dict) -> tuple[int, str, str]:
    src = tmp_path / "crafted.json"
    src.write_text(json.dumps(data))
    page = tmp_path / "page.html"
    code, _, err = _run(capsys, "report", str(src), "-o", str(page))
    return code, (page.read_text() if page.exists() else ""), err


def test_script_in_every_text_field_is_escaped(compare_json, tmp_path, capsys):
    code, page, err = _report(capsys, tmp_path, _strings_replaced(compare_json))
    if code == 2:  # refused as not a compare result: fine, as long as it is one line and no page
        assert_one_line(code, err)
        assert not page
        pytest.fail(f"the crafted file was refused instead of rendered escaped: {err}")  # we want to see the page
    assert code == 0, err
    assert "<script" not in page.lower() and "&lt;script&gt;" in page


@pytest.mark.parametrize("field", ["verdict", "batch_size", "loads", "rounds", "verdict_note", "stop_reason"])
def test_script_in_a_comparison_field_never_reaches_the_page(field, compare_json, tmp_path, capsys):
    data = copy.deepcopy(compare_json)
    data["comparisons"][0][field] = PAYLOAD
    code, page, err = _report(capsys, tmp_path, data)
    if field in ("batch_size", "loads", "rounds"):  # numbers: checked as numbers, refused naming the field
        assert_one_line(code, err, f"comparisons[0].{field}", "is not an integer")
        assert not page
    else:
        assert code == 0, err
        assert "<script" not in page.lower()


def test_the_verdicts_first_word_never_becomes_markup_in_the_class(compare_json, tmp_path, capsys):
    data = copy.deepcopy(compare_json)
    data["comparisons"][0]["verdict"] = 'x"onmouseover="alert(1) faster'
    code, page, err = _report(capsys, tmp_path, data)
    assert code == 0, err
    assert 'onmouseover="' not in page and 'class="v-x' not in page


@pytest.mark.parametrize("field,value", [("batch_size", None), ("batch_size", 0), ("batch_size", True),
                                         ("verdict", None), ("speedup", None), ("loads", -1), ("loads", 1.5)])
def test_mistyped_fields_are_one_line(field, value, compare_json, tmp_path, capsys):
    data = copy.deepcopy(compare_json)
    data["comparisons"][0][field] = value
    code, page, err = _report(capsys, tmp_path, data)
    assert_one_line(code, err, f"comparisons[0].{field}")
    assert not page


def test_just_inside_the_number_checks_renders(compare_json, tmp_path, capsys):
    data = copy.deepcopy(compare_json)
    data["comparisons"][0]["batch_size"] = 1
    data["comparisons"][0]["loads"] = 0
    code, page, err = _report(capsys, tmp_path, data)
    assert code == 0, err


def test_sweep_counts_are_checked_as_numbers(tmp_path, capsys):
    from trtprof.schemas import SWEEP

    sw = tmp_path / "sweep.json"
    for value, refused in ((PAYLOAD, True), (-1, True), (3, False)):
        sw.write_text(json.dumps({"schema": SWEEP, "entries": [], "cells_ok": value}))
        code, _, err = _run(capsys, "report", str(sw), "-o", str(tmp_path / "m.html"))
        if refused:
            assert_one_line(code, err, "cells_ok")
        else:
            assert code == 0, err
            assert "<script" not in (tmp_path / "m.html").read_text().lower()


@pytest.mark.parametrize("name", ["=cmd|' -C calc'!A0", "+1+1", "-2+3", "@SUM(A1)", "\tx", "\rx"])
def test_csv_cells_that_start_a_formula_are_text(name):
    from trtprof.sweep.rows import to_csv

    merged = {"entries": [{"model": name, "kind": "bench", "batch_size": 1, "status": "ok",
                           "summary": [{"speedup": -1.5}]}]}
    text = to_csv(merged)
    assert "'" + name in text and "\n" + name not in text and "," + name not in text
    if "\r" not in name:  # the csv module leaves a lone CR unquoted with "\n" line ends: read it raw above
        row = next(csv.DictReader(io.StringIO(text, newline="")))
        assert row["model"] == "'" + name
        assert row["speedup"] == "-1.5"  # a number stays a number


def test_bench_csv_of_a_model_named_like_a_formula(tmp_path, capsys):
    from trtprof.model.demo import make_demo_model

    model = make_demo_model(tmp_path / "=cmd|' -C calc'!A0.onnx", channels=8, image=16, classes=10)
    engines = tmp_path / "e"
    assert main(["build", str(model), "--fp32", "--batch-sizes", "1", "--engines", str(engines),
                 "--backend", "onnxruntime"]) == 0
    out = tmp_path / "r.csv"
    code, _, err = _run(capsys, "bench", str(engines), "--warmup", "1", "--iterations", "2", "--out",
                        str(tmp_path / "r.json"), "--csv", str(out))
    assert code == 0, err
    for row in csv.reader(io.StringIO(out.read_text())):
        assert not any(cell.startswith(("=", "+", "@", "\t", "\r")) for cell in row), row
        assert not any(cell.startswith("-") and not cell.lstrip("-").replace(".", "").isdigit() for cell in row), row


@pytest.mark.parametrize("field,value", [("predicted", float("nan")), ("verdict", "x"), ("predicted", {"findings": 5}),
                                         ("caveat", 3)])
def test_mistyped_accuracy_parts_are_one_line(field, value, compare_json, tmp_path, capsys):
    """Found by tests/report/test_fuzz_results.py: `accuracy.predicted: NaN` was an AttributeError."""
    data = copy.deepcopy(compare_json)
    data["comparisons"][0].setdefault("accuracy", {})[field] = value
    code, page, err = _report(capsys, tmp_path, data)
    assert_one_line(code, err, f"comparisons[0].accuracy.{field}")
    assert not page
