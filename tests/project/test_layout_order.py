"""Issue 41, item 5: ``tools/check_imports.py --wings`` enforces the direction README's Layout states, not only
the absence of circles: its WING_ORDER is the README's list, and an import of a higher wing fails it."""
from __future__ import annotations

import re
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "tools"))

import check_imports  # noqa: E402


def readme_order() -> list[str]:
    """One level a bullet of README's Layout: the wings named before each " — " on it (``a/`` or ``a``)."""
    text = (REPO / "README.md").read_text(encoding="utf-8")
    block = text.split("## Layout", 1)[1].split("\n## ", 1)[0]
    return [" ".join(re.findall(r"`([a-z_]+)/?`(?= — |;| `)", line))
            for line in block.splitlines() if line.startswith("- ")]


def test_the_wing_order_is_the_readmes():
    assert readme_order() == list(check_imports.WING_ORDER)


def test_the_tree_has_no_upward_import():
    graph, _ = check_imports.build_graph(REPO / "trtprof", False)
    assert check_imports.upward_imports(graph) == []


def test_an_upward_import_is_found_and_fails_the_check(tmp_path):
    graph = {"trtprof.stats.speedup": {"trtprof.measure.timing", "trtprof.util.files"},
             "trtprof.measure.timing": {"trtprof.stats.latency"}, "trtprof.cli.main": {"trtprof"},
             "trtprof.newwing.x": {"trtprof.util.files"}, "trtprof.util.files": {"trtprof.newwing.x"}}
    assert check_imports.upward_imports(graph) == [("trtprof.stats.speedup", "trtprof.measure.timing"),
                                                   ("trtprof.util.files", "trtprof.newwing.x")]
