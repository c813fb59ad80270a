"""The pages a person reads fit a 1280 px window: no horizontal scroll (issue 34, issue 44 item 5).

Each page is written by the real CLI and measured in headless Chromium by ``tools/page_width.py``
(``document.documentElement.scrollWidth``): every page kind the CLI writes (compare, A/B, what-if, fix-fp16,
bench, serving, sweep and its cell pages, timeline; ``cli_pages.make_pages`` runs the commands on small
generated models), the committed results of real runs, and a fix-fp16 file whose ``--layer-precisions``
list is over 1,100 characters. Skipped where chromium is missing; ``.ci/run`` installs it (Debian's
``chromium`` package) so CI measures them. ``tools/screenshots.sh`` makes the committed images.
"""
from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path

import numpy as np
import pytest

from trtprof.cli import main
from trtprof.measure.results import BenchResult, ResultSet

from .cli_pages import KINDS
from .long_tokens import long_keep_list_fix
from .test_report import synthetic_compare_json

REPO = Path(__file__).resolve().parents[2]
RESULTS = REPO / "benchmarks" / "results"
spec = importlib.util.spec_from_file_location("page_width", REPO / "tools" / "page_width.py")
assert spec is not None and spec.loader is not None
page_width = importlib.util.module_from_spec(spec)
sys.modules["page_width"] = page_width
spec.loader.exec_module(page_width)

# .ci/run installs chromium and sets TRTPROF_NEED_CHROMIUM: there a missing browser fails, never skips
NEED_CHROMIUM = bool(os.environ.get("TRTPROF_NEED_CHROMIUM"))
pytestmark = [pytest.mark.slow, pytest.mark.skipif(page_width.chromium() is None and not NEED_CHROMIUM,
                                                   reason="needs chromium (apt-get install -y chromium)")]
pytest.importorskip("matplotlib")

# committed result files of real runs (H200): a compare with --layers (the widest tables), a serving
# sweep, a train-compare
COMMITTED = {
    "compare-layers": RESULTS / "gpu_why-2026-11-30" / "run3" / "compare-resnet50-eager.json.gz",
    "compare-precisions": RESULTS / "gpu_precisions-2026-12-01" / "compare-resnet50.json.gz",
    "serving": RESULTS / "gpu_serving-2026-12-01" / "serving-resnet50.json.gz",
    "train-compare": RESULTS / "gpu_train-2026-11-30" / "train-resnet50.json.gz",
}


def long_label_compare(tmp_path: Path) -> Path:
    """A compare file whose candidate ran FP32 behind casts (the CPU case): its label, "fp16 (effective
    fp32+casts) vs fp32", is the longest a comparison gets, and it has every accuracy column."""
    path = synthetic_compare_json(tmp_path)
    text = path.read_text().replace('"effective_precision": "fp16"', '"effective_precision": "fp32+casts"')
    path.write_text(text)
    return path


def bench_json(tmp_path: Path) -> Path:
    """A bench file of engines whose warnings are long (the page puts them in a column beside the numbers)."""
    results = []
    for batch in (1, 8, 32):
        for precision, effective in (("fp32", "fp32"), ("fp16", "fp32+casts")):
            lat = (1.0 + batch) * np.exp(0.4 * np.random.default_rng(batch).standard_normal(300))
            results.append(BenchResult.from_samples(
                stages={"latency_ms": lat}, span_s=float(lat.sum()) / 1e3, batch_size=batch,
                model="a_model_with_a_rather_long_name_v2_final", precision=precision, backend="onnxruntime",
                engine={"effective_precision": effective}, config={}))
    path = tmp_path / "results.json"
    ResultSet(environment={}, results=results).write_json(path)
    return path


def page_of(result: Path, tmp_path: Path, name: str) -> Path:
    out = tmp_path / f"{name}.html"
    assert main(["report", str(result), "--out", str(out)]) == 0
    return out


@pytest.mark.parametrize("name", sorted(COMMITTED))
def test_page_of_a_committed_result_fits_1280_px(tmp_path, name):
    m = page_width.measure(page_of(COMMITTED[name], tmp_path, name))
    assert m["window"] == page_width.WINDOW_PX
    assert m["scroll_width"] <= page_width.WINDOW_PX, m["too_wide"]


@pytest.mark.parametrize("make", [long_label_compare, bench_json], ids=["compare-cpu-casts", "bench"])
def test_page_fits_1280_px(tmp_path, make):
    m = page_width.measure(page_of(make(tmp_path), tmp_path, make.__name__))
    assert m["scroll_width"] <= page_width.WINDOW_PX, m["too_wide"]


def fits(page: Path) -> None:
    m = page_width.measure(page)
    assert m["window"] == page_width.WINDOW_PX
    assert m["scroll_width"] <= page_width.WINDOW_PX, f"{page.name}: {m['scroll_width']} px: {m['too_wide']}"


@pytest.mark.parametrize("kind", KINDS)
def test_every_page_the_cli_writes_fits_1280_px(cli_pages, kind):
    fits(cli_pages[kind])
    if kind == "sweep":  # and the page of each cell the matrix links
        cells = sorted((cli_pages[kind].parent / "sweep_cells").glob("*.html"))
        assert cells
        for cell in cells:
            fits(cell)


def test_a_keep_list_of_1100_characters_fits_1280_px(tmp_path):
    """The case of issue 44: one unbroken keep-list made a compare page 9,941 px wide."""
    fits(page_of(long_keep_list_fix(tmp_path), tmp_path, "fix-long"))


def test_the_measurement_sees_a_page_that_is_too_wide(tmp_path):
    """The check can fail: a 1400 px table is reported wider than the window, and named."""
    page = tmp_path / "wide.html"
    page.write_text('<!DOCTYPE html><html><body><table style="width:1400px"><tr><td>x</td></tr></table>'
                    "</body></html>")
    m = page_width.measure(page)
    assert m["scroll_width"] > page_width.WINDOW_PX
    assert any(w.startswith("table") for w in m["too_wide"])
    inside = tmp_path / "inside.html"
    inside.write_text('<!DOCTYPE html><html><body style="margin:0"><div style="width:1280px">x</div></body></html>')
    assert page_width.measure(inside)["scroll_width"] == page_width.WINDOW_PX  # just inside: exactly the window
