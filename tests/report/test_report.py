"""The HTML report is one self-contained file; the Markdown summary carries the verdict table."""
from __future__ import annotations

import base64
import json
import re

import numpy as np
import pytest

from trtprof.compare import core as cmp
from trtprof.compare.accuracy import compare_outputs
from trtprof.cli import main
from trtprof.diagnose.findings import Finding
from trtprof.measure.interleave import RoundPlan
from trtprof.report.compare_page import load, markdown_summary, render_html
from trtprof.measure.results import BenchResult, ResultSet
from trtprof.stats.speedup import speedup_ci

pytest.importorskip("matplotlib")


def synthetic_result(precision: str, batch: int, median_ms: float, seed: int) -> BenchResult:
    lat = median_ms * np.exp(0.05 * np.random.default_rng(seed).standard_normal(400))
    return BenchResult.from_samples(stages={"latency_ms": lat}, span_s=float(lat.sum()) / 1e3, batch_size=batch,
                                    model="net", precision=precision, backend="onnxruntime",
                                    engine={"effective_precision": precision}, config={})


def as_blocks(result: BenchResult, loads: int = 2, rounds: int = 4) -> list[list[np.ndarray]]:
    """The pooled samples cut into loads × rounds blocks (the shape compare measures in)."""
    parts = np.array_split(np.asarray(result.samples_ms["latency_ms"]), loads * rounds)
    return [parts[i * rounds:(i + 1) * rounds] for i in range(loads)]


def synthetic_compare_json(tmp_path, *, overflow: bool = False):
    """A compare file built by the real Comparison/CompareReport code from synthetic samples."""
    comparisons, results = [], []
    for i, batch in enumerate((1, 16)):
        base = synthetic_result("fp32", batch, 1.0 * batch, seed=i)
        cand = synthetic_result("fp16", batch, 0.6 * batch, seed=10 + i)
        results += [base, cand]
        ref = {"y": np.ones(10)}
        out = {"y": np.where(np.arange(10) == 0, np.inf, 1.0) if overflow else np.ones(10) * 1.001}
        acc = compare_outputs(ref, out)
        comparisons.append(cmp.Comparison(
            batch_size=batch, baseline="fp32", candidate="fp16",
            speedup=speedup_ci(as_blocks(base), as_blocks(cand)), accuracy=acc,
            diagnosis=[Finding("gpu_underutilised", "<b>not html</b> fixed cost", {"intercept_ms": 0.1})],
            baseline_result=base, candidate_result=cand, rounds=8, stop_reason="decisive", loads=2,
            round_ratios=[1.6] * 8, half_widths={"fp32": 0.005, "fp16": 0.004},
        ))
    report = cmp.CompareReport(model="net", backend="onnxruntime", plan=RoundPlan(), comparisons=comparisons,
                               results=results, environment={"host": {"cpu": "test"}},
                               warnings=["fp16 produced 1 non-finite output values"] if overflow else [])
    path = tmp_path / "compare.json"
    report.write_json(path)
    return path


def assert_self_contained(page: str) -> None:
    srcs = re.findall(r'src="([^"]*)"', page)
    assert srcs and all(s.startswith("data:image/png;base64,") for s in srcs)
    for s in srcs:  # every embedded image decodes to a PNG
        assert base64.b64decode(s.split(",", 1)[1])[:8] == b"\x89PNG\r\n\x1a\n"
    assert "<link" not in page and "<script" not in page
    # the one href allowed is the method paragraph's link to the docs: a link the reader may follow,
    # nothing the page loads
    assert re.findall(r'<(\w+)[^>]*\bhref="([^"]*)"', page) in ([], [("a", "docs/method.md")])


def test_compare_report_is_self_contained_with_verdicts_and_escaped_text(tmp_path):
    data = load(synthetic_compare_json(tmp_path))
    page = render_html(data)
    assert_self_contained(page)
    assert page.count("<img") == 1 + 2 * 2  # speedup plot + histogram and ECDF per batch size
    assert "faster" in page and "&lt;b&gt;not html&lt;/b&gt;" in page
    md = markdown_summary(data)
    assert md.count("| fp16 vs fp32 |") == 2 and "faster" in md


def test_overflow_warning_is_loud_in_both_outputs(tmp_path):
    data = load(synthetic_compare_json(tmp_path, overflow=True))
    assert 'class="warn"' in render_html(data)
    md = markdown_summary(data)
    assert "**WARNING:**" in md and "1 ⚠" in md


def test_cli_report_writes_html_and_prints_markdown(tmp_path, capsys):
    src = synthetic_compare_json(tmp_path)
    out = tmp_path / "sub" / "report.html"
    assert main(["report", str(src), "-o", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "| batch |" in printed and str(out) in printed
    assert_self_contained(out.read_text())


def test_bench_results_file_is_accepted(tmp_path):
    rs = ResultSet(environment={}, results=[synthetic_result("fp32", b, b, seed=b) for b in (1, 2)])
    rs.write_json(tmp_path / "results.json")
    data = load(tmp_path / "results.json")
    page = render_html(data)
    assert_self_contained(page)
    assert "Latency vs batch size" in page


def test_wrong_files_are_one_line_errors(tmp_path, capsys):
    bad = tmp_path / "x.json"
    bad.write_text(json.dumps({"schema": "other"}))
    assert main(["report", str(bad)]) == 2
    assert main(["report", str(tmp_path / "missing.json")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 2 and all(line.startswith("trtprof report: error:") for line in err)


def test_a_bimodal_engine_is_named_beside_its_histogram_and_in_the_verdict_note(tmp_path):
    rng = np.random.default_rng(3)
    lat = np.where(rng.random(2000) < 0.55, 1.0, 1.3) * np.exp(0.02 * rng.standard_normal(2000))
    base = BenchResult.from_samples(stages={"latency_ms": lat}, span_s=float(lat.sum()) / 1e3, batch_size=1,
                                    model="net", precision="fp32", backend="onnxruntime", engine={}, config={})
    cand = synthetic_result("fp16", 1, 1.15, seed=4)
    c = cmp.Comparison(batch_size=1, baseline="fp32", candidate="fp16",
                       speedup=speedup_ci(as_blocks(base, 4, 5), as_blocks(cand, 4, 5)), accuracy=None,
                       diagnosis=[], baseline_result=base, candidate_result=cand, rounds=20, stop_reason="decisive",
                       round_ratios=[], half_widths={}, loads=4)
    assert "2 modes" in c.verdict_note and "mean ratio" in c.verdict_note
    path = tmp_path / "c.json"
    cmp.CompareReport(model="net", backend="onnxruntime", plan=RoundPlan(), comparisons=[c],
                      results=[base, cand], environment={}).write_json(path)
    data = load(path)
    page = render_html(data)
    assert "fp32: 2 modes" in page and "mean ratio" in page
    assert "2 modes" in markdown_summary(data)


def test_a_schema_1_compare_file_still_renders(tmp_path):
    path = synthetic_compare_json(tmp_path)
    data = json.loads(path.read_text())
    data["schema"] = "trtprof.compare/1"
    for c in data["comparisons"]:
        c["verdict"] = "no measurable difference"
        for key in ("loads", "verdict_note", "shape"):
            c.pop(key)
    path.write_text(json.dumps(data))
    page = render_html(load(path))
    assert "no measurable difference" in page and 'class="v-no"' in page


def test_verdict_is_two_tables_that_keep_every_column(tmp_path):
    """The 13-column verdict table was wider than a 1280 px window (issue 34): the page splits it into a
    speed and an accuracy table, each led by batch and comparison, and loses no column; the Markdown
    summary keeps the one wide row."""
    from trtprof.report.compare_page import ACCURACY_HEADERS, SPEED_HEADERS, VERDICT_HEADERS

    page = render_html(load(synthetic_compare_json(tmp_path)))
    tables = re.findall(r"<table>.*?</table>", page.split("<h2>Verdict</h2>", 1)[1].split("<h2>", 1)[0], re.S)
    assert len(tables) == 2
    heads = [re.findall(r"<th>(.*?)</th>", t) for t in tables]
    assert heads == [list(SPEED_HEADERS), list(ACCURACY_HEADERS)]
    assert set(SPEED_HEADERS) | set(ACCURACY_HEADERS) == set(VERDICT_HEADERS)
    for t in tables:  # each comparison once in each table
        assert t.count("<td>fp16 vs fp32</td>") == 2
    assert "faster" in tables[0] and "faster" not in tables[1] and "1.000000" in tables[1]  # cosine
