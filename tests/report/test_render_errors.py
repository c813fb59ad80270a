"""A results file that passes the readers' checks but holds a value of the wrong kind in a field no check
names (the results fuzz found ``latency.candidate.median_ms = "abc"`` after the pages grew) is one line with exit 2
through ``report`` (``cli._common.rendering``), not a traceback; the untouched file still renders."""
from __future__ import annotations

import gzip
import json
from pathlib import Path

from trtprof.cli import main

from ..conftest import one_line_error

EXAMPLE = (Path(__file__).resolve().parents[2] / "benchmarks/results/demo-decisive-cpu-2026-12-02"
           / "worked_example_compare.json.gz")


def test_a_wrong_kind_in_an_unchecked_field_is_one_line(tmp_path, capsys):
    data = json.loads(gzip.decompress(EXAMPLE.read_bytes()))
    good = tmp_path / "good.json"
    good.write_text(json.dumps(data))
    assert main(["report", str(good), "-o", str(tmp_path / "good.html")]) == 0
    data["comparisons"][0]["latency"]["candidate"]["median_ms"] = "abc"
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(data))
    capsys.readouterr()
    code = main(["report", str(bad), "-o", str(tmp_path / "bad.html")])
    one_line_error(code, capsys.readouterr().err, "bad.json")
    assert not (tmp_path / "bad.html").exists()
