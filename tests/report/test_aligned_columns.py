"""Columns a person reads down: one number of decimals per column, text left, and a ratio axis with enough
plain ticks (issue 34: the train-compare page's table and its speedup plot).

The page is the real ``trtprof report`` of the committed H200 train-compare result; the tables are read
back from its HTML with the standard library's parser, not with trtprof's own code.
"""
from __future__ import annotations

import gzip
import json
from html.parser import HTMLParser
from pathlib import Path

import pytest

from trtprof.cli import main
from trtprof.report.kit import fixed_column

REPO = Path(__file__).resolve().parents[2]
TRAIN = REPO / "benchmarks" / "results" / "gpu_train-2026-11-30" / "train-resnet50.json.gz"


class Tables(HTMLParser):
    """Every <table> of a page as rows of cell texts (header row first)."""

    def __init__(self) -> None:
        super().__init__()
        self.tables: list[list[list[str]]] = []
        self._cell: list[str] | None = None

    def handle_starttag(self, tag, attrs):
        if tag == "table":
            self.tables.append([])
        elif tag == "tr" and self.tables:
            self.tables[-1].append([])
        elif tag in ("td", "th"):
            self._cell = []

    def handle_endtag(self, tag):
        if tag in ("td", "th") and self._cell is not None:
            self.tables[-1][-1].append("".join(self._cell))
            self._cell = None

    def handle_data(self, data):
        if self._cell is not None:
            self._cell.append(data)


def decimals(text: str) -> int:
    return len(text.split(".")[1]) if "." in text else 0


def test_fixed_column_gives_every_number_the_decimals_of_the_smallest():
    assert fixed_column([39.953, 130.96, 251.29, 25.99]) == ["39.95", "130.96", "251.29", "25.99"]
    assert fixed_column([0.6722, 0.558]) == ["0.6722", "0.5580"]
    assert fixed_column([1234.4, 99999.0]) == ["1,234", "99,999"]
    assert fixed_column([1e-9, 1.0]) == ["0.000000", "1.000000"]  # at most 6 decimals
    assert fixed_column([None, float("nan"), 2.5]) == ["–", "nan", "2.500"]
    assert fixed_column([0, 0]) == ["0", "0"] and fixed_column([]) == []
    # the edge of a decade: 9.999 needs 3 decimals for 4 digits, 10.0 needs 2
    assert fixed_column([9.999]) == ["9.999"] and fixed_column([10.0]) == ["10.00"]


@pytest.fixture(scope="module")
def train_page(tmp_path_factory) -> Tables:
    out = tmp_path_factory.mktemp("train") / "train.html"
    assert main(["report", str(TRAIN), "-o", str(out)]) == 0
    parsed = Tables()
    parsed.feed(out.read_text())
    return parsed


def test_train_page_has_a_speed_table_and_a_training_table_each_column_aligned(train_page):
    data = json.loads(gzip.decompress(TRAIN.read_bytes()))
    speed, steps = train_page.tables[0], train_page.tables[1]
    assert speed[0] == ["batch", "comparison", "speedup [95% CI]", "verdict", "baseline step ms", "candidate step ms"]
    assert steps[0] == ["batch", "comparison", "steps", "baseline loss", "candidate loss", "skipped steps",
                        "baseline peak MiB", "candidate peak MiB"]
    assert len(speed) == len(steps) == len(data["comparisons"]) + 1
    for table, numeric in ((speed, (4, 5)), (steps, (3, 4, 6, 7))):
        for col in numeric:
            cells = [row[col] for row in table[1:]]
            assert len({decimals(c) for c in cells}) == 1, (table[0][col], cells)  # one number of decimals
    first = data["comparisons"][0]
    assert speed[1][1] == f"{first['candidate']} vs {first['baseline']}"
    assert float(speed[1][4]) == pytest.approx(first["latency"]["baseline"]["median_ms"], abs=0.005)
    assert float(steps[1][3]) == pytest.approx(first["accuracy"]["baseline_loss_last"], abs=5e-5)
    assert steps[1][6] == f"{first['memory']['baseline']['peak_allocated_mib']:,.0f}"
    assert all("→" not in cell for row in steps for cell in row)  # base and candidate in their own columns


def test_train_page_aligns_text_left_and_never_breaks_an_interval(tmp_path):
    out = tmp_path / "train.html"
    assert main(["report", str(TRAIN), "-o", str(out)]) == 0
    html = out.read_text()
    assert ".train td:nth-child(2),.train th:nth-child(2){text-align:left;white-space:nowrap}" in html
    assert ".train.speed td:nth-child(3){white-space:nowrap}" in html
    assert 'class="train speed"' in html and 'class="train steps"' in html


@pytest.mark.parametrize("low,high,expect", [
    (0.9, 4.3, [1.0, 1.5, 2.0, 3.0, 4.0]),  # the train page's range: one tick ("10⁰") before
    (0.003, 141.0, [0.01, 0.1, 1.0, 10.0, 100.0]),
    (0.45, 2.2, [0.5, 1.0, 2.0]),  # 1, 2, 5 gives exactly the minimum (3): used
    (0.05, 20.0, [0.1, 1.0, 10.0]),  # powers of ten alone give exactly 3: used
    (0.5, 2.0, [0.5, 1.0, 2.0]),  # a span of exactly 4 (RATIO_DECADE_SPAN): multiples of powers of ten
    (0.5, 1.99, [0.5, 0.75, 1.0, 1.25, 1.5, 1.75]),  # just under it: evenly spaced, 1× among them
    (0.6, 1.4, [0.6, 0.8, 1.0, 1.2, 1.4]),  # step 0.25 gives 3 (not more than the minimum): the next, 0.2
    (0.97, 1.03, [0.97, 0.98, 0.99, 1.0, 1.01, 1.02, 1.03]),
])
def test_ratio_axis_gets_plain_ticks_enough_to_read(low, high, expect):
    pytest.importorskip("matplotlib")
    from trtprof.report import plots
    from trtprof.report.kit import pyplot

    fig, ax = pyplot().subplots()
    ax.set_yscale("log")
    ax.set_ylim(low, high)
    ticks = plots.ratio_ticks(ax)
    assert ticks == pytest.approx(expect)
    assert [t.get_text() for t in ax.get_yticklabels()] == [f"{t:g}×" for t in expect]
    assert ax.get_ylim() == pytest.approx((low, high))  # the limits are kept
    pyplot().close(fig)


def test_ratio_ticks_are_thinned_keeping_one_and_never_fewer_than_the_minimum():
    pytest.importorskip("matplotlib")
    from trtprof.report import plots
    from trtprof.report.kit import pyplot

    fig, ax = pyplot().subplots()
    ax.set_yscale("log")
    ax.set_ylim(1e-4, 1e4)  # 9 powers of ten: at the maximum, all kept
    assert len(plots.ratio_ticks(ax)) == 9 == plots.RATIO_TICKS_MAX
    ax.set_ylim(1e-5, 1e4)  # 10: thinned to every other one, 1× kept
    assert plots.ratio_ticks(ax) == pytest.approx([1e-4, 1e-2, 1.0, 1e2, 1e4])
    ax.set_ylim(0.97, 1.03)  # a narrow interval still gets at least the minimum
    assert len(plots.ratio_ticks(ax)) >= plots.RATIO_TICKS_MIN
    pyplot().close(fig)


@pytest.mark.parametrize("value,text", [
    (0.05, "0.05"), (1.0, "1"), (20.0, "20"), (10_000.0, "10,000"), (999_999.0, "999,999"),
    (1e6, "10⁶"), (2e7, "2·10⁷"), (0.001, "0.001"), (0.000999, "9.99·10⁻⁴"), (1e-6, "10⁻⁶"), (0.0, "0"),
])
def test_tick_labels_are_plain_numbers_never_scientific_notation(value, text):
    from trtprof.report.plots import plain_number

    assert plain_number(value) == text  # the edges: 1e-3 and 1e6 (PLAIN_TICKS_FROM/TO) just inside and outside


@pytest.mark.parametrize("entries,columns", [(1, 1), (5, 1), (6, 2), (13, 3)])
def test_a_long_legend_goes_into_columns_not_one_tall_strip(entries, columns):
    pytest.importorskip("matplotlib")
    from trtprof.report import plots
    from trtprof.report.kit import pyplot

    fig, ax = pyplot().subplots(layout="constrained")
    for i in range(entries):
        ax.plot([0, 1], [i, i], label=f"series {i}")
    plots.legend_below(fig, ax)
    assert fig.legends[0]._ncols == columns and plots.LEGEND_ROWS == 5
    pyplot().close(fig)
