"""Each schema string is written once (trtprof/schemas.py) and the readers accept what the writers write."""

from __future__ import annotations

import gzip
import json
import re
from pathlib import Path

import pytest

from trtprof import schemas
from trtprof.errors import BadInput
from trtprof.report.compare_page import load
from trtprof.measure.results import ResultSet

PACKAGE = Path(__file__).resolve().parents[2] / "trtprof"
SCHEMA_LITERAL = re.compile(r"""["']trtprof\.[a-z_]+/\d+["']""")


def test_every_schema_string_lives_in_schemas_py():
    """A copy of a schema string anywhere else in the package is the drift this module exists to stop."""
    copies = [
        f"{path.relative_to(PACKAGE.parent)}: {match.group(0)}"
        for path in sorted(PACKAGE.rglob("*.py"))
        if path.name != "schemas.py"
        for match in SCHEMA_LITERAL.finditer(path.read_text(encoding="utf-8"))
    ]
    assert copies == []
    assert SCHEMA_LITERAL.search((PACKAGE / "schemas.py").read_text(encoding="utf-8"))


def test_writers_use_the_shared_strings():
    from trtprof.compare import report_value as compare
    from trtprof.sweep import store
    from trtprof.train import page, run

    assert compare.SCHEMA == schemas.COMPARE
    assert store.SCHEMA == schemas.SWEEP
    assert run.SCHEMA == page.SCHEMA == schemas.TRAIN_COMPARE
    assert ResultSet(environment={}, results=[]).to_json()["schema"] == schemas.RESULTS


@pytest.mark.parametrize("schema, kind", [
    (schemas.COMPARE, "compare"), (schemas.COMPARE_V1, "compare"), (schemas.RESULTS, "bench"),
])
def test_report_reads_what_compare_and_bench_write(tmp_path, schema, kind):
    path = tmp_path / "r.json"
    path.write_text(json.dumps({"schema": schema, "results": [], "comparisons": []}))
    assert load(path)["kind"] == kind


def test_report_refuses_a_newer_compare_schema(tmp_path):
    path = tmp_path / "r.json"
    version = int(schemas.COMPARE.rsplit("/", 1)[1])
    path.write_text(json.dumps({"schema": f"trtprof.compare/{version + 1}", "results": []}))
    with pytest.raises(BadInput, match="schema"):
        load(path)


def test_the_committed_compare_and_results_files_are_still_readable():
    """A schema string is the files' promise, not a module path: the wings move renamed the modules and
    must not rename the schemas (it did once: "trtprof.compare.core/2" refused every file written before)."""
    results = Path(__file__).resolve().parents[2] / "benchmarks" / "results"
    files = sorted([*results.rglob("compare*.json"), *results.rglob("compare*.json.gz")])  # large ones gzipped

    def schema(path: Path) -> str:
        raw = gzip.decompress(path.read_bytes()) if path.suffix == ".gz" else path.read_bytes()
        return json.loads(raw).get("schema", "")

    schemas_seen = {schema(p) for p in files}
    assert {"trtprof.compare/1", "trtprof.compare/2"} <= schemas_seen
    assert schemas.COMPARE == "trtprof.compare/2" and schemas.RESULTS == "trtprof.results/1"
    for path in files:
        if schema(path).startswith("trtprof.compare/"):
            assert load(path)["kind"] == "compare"
