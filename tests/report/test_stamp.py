"""The validity stamp at the top of the pages and of the Markdown summary (trtprof.report.stamp)."""
from __future__ import annotations

import numpy as np
import pytest

from trtprof.measure.results import BenchResult, ResultSet, stamp_result
from trtprof.report.stamp import page_validity, validity_html
from trtprof.system.validity import Facts, assess

pytest.importorskip("matplotlib")


def result(precision: str, effective: str) -> BenchResult:
    lat = 1.0 + 0.01 * np.random.default_rng(0).standard_normal(50)
    return BenchResult.from_samples(stages={"latency_ms": lat}, span_s=0.05, batch_size=1, model="net",
                                    precision=precision, backend="onnxruntime",
                                    engine={"effective_precision": effective}, config={})


def test_the_box_says_valid_plainly_and_not_valid_with_each_reason_and_what_to_do():
    ok = assess(Facts(loads=6, min_loads=6))
    assert "<b>VALID</b>" in validity_html(ok) and "warn" not in validity_html(ok)
    bad = assess(Facts(loads=2, min_loads=6, casts=("fp16",)))
    box = validity_html(bad.to_json(), "serving")
    assert box.startswith('<div class="warn"><b>serving: NOT VALID</b>') and box.count("<li>") == 2
    assert "To fix:</i> give it time" in box
    assert validity_html(None) == ""


def test_a_file_without_stamps_shows_none_rather_than_a_valid_nobody_checked():
    assert page_validity({"results": [{"samples_ms": [1.0]}]}) is None


def test_a_bench_page_and_its_markdown_open_with_the_stamp(tmp_path):
    from trtprof.report.compare_page import load, markdown_summary, render_html

    fp32, fp16 = result("fp32", "fp32"), result("fp16", "fp32+casts")
    cpu = {"load_average": [0.0], "usable_cores": 4, "governor": "performance"}
    for r in (fp32, fp16):
        stamp_result(r, cpu, host_timed=True)
    path = tmp_path / "results.json"
    ResultSet(environment={}, results=[fp32, fp16]).write_json(path)
    data = load(path)
    page = render_html(data)
    head = page[:page.index("<h2>")]  # before the first section: the stamp is at the top
    assert "NOT VALID" in head and "ran FP32 kernels behind casts" in head
    md = markdown_summary(data)
    assert md.splitlines()[2].startswith("**NOT VALID: fp16 ran FP32 kernels behind casts")


def test_bench_prints_the_stamp_first_and_each_result_carries_its_own(conv_model, tmp_path, capsys):
    import json

    from trtprof.cli import main

    engines, out = tmp_path / "e", tmp_path / "r.json"
    assert main(["build", str(conv_model), "--fp32", "--fp16", "--batch-sizes", "1", "--engines", str(engines),
                 "--backend", "onnxruntime"]) == 0
    capsys.readouterr()
    assert main(["bench", str(engines), "--iterations", "5", "--warmup", "1", "--out", str(out)]) == 0
    text = capsys.readouterr().out.splitlines()
    data = json.loads(out.read_text())
    by_precision = {r["precision"]: r["validity"] for r in data["results"]}
    assert "fp16_is_fp32" in [r["code"] for r in by_precision["fp16"]["reasons"]]
    assert "fp16_is_fp32" not in [r["code"] for r in by_precision["fp32"]["reasons"]]
    assert text[0] == data["validity"]["stamp"] and text[0].startswith("NOT VALID: ")
    assert any(line.endswith(by_precision["fp16"]["stamp"]) and "batch 1: " in line for line in text)


def test_the_speedup_plot_is_log_scaled_dodged_and_has_the_1x_line():
    from trtprof.report.compare_page import DODGE_OCTAVES, speedup_axes
    from trtprof.report.kit import pyplot

    from trtprof.compare.result import ComparisonResult

    def c(cand, batch, est, low, high):  # the page reads the typed results (compare.result)
        return ComparisonResult.from_json({
            "batch_size": batch, "baseline": "fp32", "candidate": cand, "verdict": "inconclusive",
            "speedup": {"estimate": est, "ci_low": low, "ci_high": high},
            "latency": {"baseline": {"precision": "fp32"}, "candidate": {"precision": cand}}})

    comparisons = [c("fp16", 8, 1.5, 0.003, 141.0), c("int8", 8, 1.2, 1.1, float("inf")), c("fp16", 16, 2.0, 1.9, 2.1)]
    fig, ax = speedup_axes(comparisons)
    try:
        assert ax.get_yscale() == "log" and ax.get_xscale() == "log"
        xs = [line.get_xdata() for line in ax.lines if len(line.get_xdata()) and line.get_marker() == "o"]
        at8 = sorted(x[0] for x in xs)
        assert len(at8) == 2 and at8[1] / at8[0] == pytest.approx(2 ** DODGE_OCTAVES)  # side by side, not on top
        one = [line for line in ax.lines if list(line.get_ydata()) == [1.0, 1.0]]
        assert one and "1×" in one[0].get_label()
        low, high = ax.get_ylim()
        assert 0 < low and np.isfinite(high)  # an infinite CI end is clipped, not drawn to infinity
    finally:
        pyplot().close(fig)


def test_a_bench_page_puts_each_result_s_warnings_and_stamp_in_its_row(tmp_path):
    from trtprof.report.compare_page import load, render_html

    fp16 = result("fp16", "fp32+casts")
    fp16.warnings.append("latency CV is 1230.9 % (> 10 %): the CPU numbers are noisy")
    stamp_result(fp16, {"load_average": [0.0], "usable_cores": 4}, host_timed=True)
    fp32 = result("fp32", "fp32")
    path = tmp_path / "results.json"
    ResultSet(environment={}, results=[fp32, fp16]).write_json(path)
    page = render_html(load(path))
    rows = page[page.index("<h2>Results</h2>"):].split("</tr>")
    fp16_row = next(r for r in rows if "fp16" in r and "<td>" in r)
    # the row says each caveat in its own words and names its note; the note under the table says the rest
    # once (issue 44: no paragraph repeated in every row)
    assert "latency CV is 1230.9 % (&gt; 10 %) (note " in fp16_row and "NOT VALID (note " in fp16_row
    notes = page[page.index('<ol class="notes">'):].split("</ol>")[0]
    assert "fp16 ran FP32 kernels behind casts" in notes and "the CPU numbers are noisy" in notes
    fp32_row = next(r for r in rows if "net fp32" in r)
    assert "latency CV" not in fp32_row and "NOT VALID" not in fp32_row
