"""The pages the CLI writes, made by the real commands (``cli_pages.make_pages``: compare, A/B, what-if,
fix-fp16, bench, serving, sweep, timeline on small generated models, ONNX Runtime on the CPU): what each
opens with, and that every one is drawn with the page kit's style sheet (issue 44 item 5, issue 41 item 5).
Their width in a 1280 px window: test_page_width.py."""
from __future__ import annotations

import json
import re
import shlex

import pytest

from trtprof.report import kit

from .cli_pages import KINDS

pytestmark = pytest.mark.slow


def text_of(path) -> str:
    return path.read_text(encoding="utf-8")


def opening(page: str) -> str:
    """What comes before the first number: the page up to its first section heading."""
    return page.split("<h2>Verdict</h2>")[0]


@pytest.mark.parametrize("kind", KINDS)
def test_every_page_is_drawn_with_the_kits_style_sheet(cli_pages, kind):
    page = text_of(cli_pages[kind])
    [css] = re.findall(r"<head>.*?<style>(.*?)</style></head>", page, re.S)
    assert css == kit.CSS, f"{kind}: a style sheet of its own"
    assert "pre.cmd" in css


def test_the_what_if_page_opens_with_what_was_padded(cli_pages):
    head = opening(text_of(cli_pages["what-if"]))
    assert "What-if: pad-channels" in head and "what-if experiment" in head
    assert "conv0: out_channels 12 → 16, in_channels 3 → 8" in head  # make_demo_model(channels=12)
    assert "Outputs checked identical before measuring" in head


def test_the_ab_page_opens_with_its_two_arms(cli_pages):
    head = opening(text_of(cli_pages["ab"]))
    assert "<h2>A/B</h2>" in head
    assert re.search(r"a: \S*a\.onnx on onnxruntime at fp32", head) and re.search(r"b: \S*b\.onnx on onnxruntime", head)


def test_the_fix_fp16_page_opens_with_the_keep_list_and_the_line_the_cli_prints(cli_pages):
    page = text_of(cli_pages["fix-fp16"])
    head = opening(page)
    data = json.loads((cli_pages["fix-fp16"].parent / "fix.json").read_text())
    keep = data["fix_fp16"]["keep"]
    assert keep and f"Found: {len(keep)} node(s) kept in FP32" in head and all(n in head for n in keep)
    [reuse] = re.findall(r'<pre class="cmd"><code>reuse: trtprof ([^<]*)</code>', head)
    assert shlex.split(reuse) == ["build", data["fix_fp16"]["model"], "--fp16", "--layer-precisions",
                                  ",".join(f"{n}:fp32" for n in keep)]


def test_the_compare_page_explains_the_verdict_above_its_tables(cli_pages):
    verdict = text_of(cli_pages["compare"]).split("<h2>Verdict</h2>")[1]
    assert verdict.index("alternating rounds") < verdict.index("<table")  # docs/report.md: above the table
    assert '<div class="intro">' not in text_of(cli_pages["compare"])  # a plain compare needs no intro


def test_the_bench_page_writes_each_explanation_once(cli_pages):
    page = text_of(cli_pages["bench"])
    notes = re.findall(r'<li id="note-\d+">(.*?)</li>', page)
    assert notes and len(notes) == len(set(notes))
    results = page.split("<h2>Results</h2>")[1]  # (the stamp at the top merges the rows' stamps)
    for note in notes:  # each note one item of the list, written nowhere else under the heading
        assert results.count(f">{note}</li>") == 1 and results.count(f"<td>{note}") == 0, note
    cells = results.split("</table>")[0]
    assert "(note 1)" in cells


def test_the_serving_page_says_once_why_energy_is_not_measured(cli_pages):
    page = text_of(cli_pages["serving"])
    table = page.split("Energy per inference: n/a at every point")[1].split("</table>")[0]
    assert "n/a (" not in table and table.count("<td>n/a</td>") == 8  # 2 precisions × 2 batches × 2 levels


def test_the_sweep_page_has_a_validity_box_and_no_json(cli_pages):
    page = text_of(cli_pages["sweep"])
    head = page.split("<h2>Verdict matrix</h2>")[0]
    assert re.search(r"2 measured cell\(s\): (NOT )?VALID", head)
    executor = page.split("<h2>Executor</h2>")[1]
    assert "<pre" not in executor and '{"' not in executor and "<h3>slots</h3>" in executor
    cell_pages = sorted((cli_pages["sweep"].parent / "sweep_cells").glob("*.html"))
    assert len(cell_pages) == 2 and all(f'href="sweep_cells/{p.name}"' in page for p in cell_pages)
