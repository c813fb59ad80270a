"""compare.result.ComparisonResult: the typed per-batch result is its JSON (issue 32 #4).

Round trips against compare files written by real runs (benchmarks/results, committed with the date and
device in their folder names) and against one written here by the CLI: ``to_json(from_json(entry))``
gives the entry back byte for byte (json.dumps, so NaN and the key order count too)."""
from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from trtprof import schemas
from trtprof.compare.result import ArmLatency, ComparisonResult, SpeedupSummary

ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "benchmarks" / "results"
ALL_FILES = sorted([*RESULTS.rglob("compare*.json"), *RESULTS.rglob("compare*.json.gz")])  # large ones are kept gzipped


def read(path: Path) -> dict:
    return json.loads(gzip.decompress(path.read_bytes()) if path.suffix == ".gz" else path.read_text())


# real compare files of the current schema (schemas.COMPARE), written on the H200 and on the CPU machine
REAL_FILES = [p for p in ALL_FILES if read(p).get("schema") == schemas.COMPARE]
OLD_FILES = [p for p in ALL_FILES if read(p).get("schema") == schemas.COMPARE_V1]


def entries(path: Path) -> list[dict]:
    return read(path)["comparisons"]


def test_there_are_real_files_to_round_trip():
    assert len(REAL_FILES) >= 5 and OLD_FILES


@pytest.mark.parametrize("path", OLD_FILES, ids=lambda p: str(p.relative_to(ROOT / "benchmarks" / "results")))
def test_a_first_schema_file_reads_with_what_it_has(path):
    """compare/1 (still read by the pages): no verdict_note, shape or loads; what it has is kept."""
    for entry in entries(path):
        result = ComparisonResult.from_json(entry)
        assert result.loads == entry.get("loads", 1) and result.verdict_note == ""
        assert {k: v for k, v in result.to_json().items() if k in entry} == entry or \
            json.dumps({k: v for k, v in result.to_json().items() if k in entry}) == json.dumps(entry)


@pytest.mark.parametrize("path", REAL_FILES, ids=lambda p: str(p.relative_to(ROOT / "benchmarks" / "results")))
def test_a_real_compare_file_round_trips(path):
    for entry in entries(path):
        result = ComparisonResult.from_json(entry)
        assert json.dumps(result.to_json()) == json.dumps(entry)
        assert result.speedup.estimate == entry["speedup"]["estimate"]
        assert result.latency["candidate"].median_ms == entry["latency"]["candidate"]["median_ms"]
        assert [f.rule for f in result.diagnosis] == [f["rule"] for f in entry["diagnosis"]]


def test_what_compare_prints_is_what_it_saves(conv_model, tmp_path, capsys):
    """The CLI prints from the typed results of the JSON it writes: the printed line is the saved one."""
    from trtprof.cli import main

    out = tmp_path / "c.json"
    assert main(["compare", str(conv_model), "--engines", str(tmp_path / "e"), "--out", str(out),
                 "--backend", "onnxruntime", "--in-process", "--time-budget-s", "1"]) == 0
    printed = capsys.readouterr().out
    [entry] = entries(out)
    result = ComparisonResult.from_json(entry)
    assert json.dumps(result.to_json()) == json.dumps(entry)
    assert (f"batch 1: {result.candidate} vs {result.baseline}  speedup {result.speedup.estimate:.3f}× "
            f"[95% CI {result.speedup.ci_low:.3f}, {result.speedup.ci_high:.3f}]  {result.verdict.upper()}") in printed


def test_keys_a_newer_writer_adds_are_kept():
    entry = entries(REAL_FILES[0])[0]
    newer = {**entry, "clock_lock": {"locked": True}}
    newer["latency"] = {**entry["latency"], "baseline": {**entry["latency"]["baseline"], "clock_mhz": 1980}}
    result = ComparisonResult.from_json(newer)
    assert result.extra == {"clock_lock": {"locked": True}} and result.latency["baseline"].extra == {"clock_mhz": 1980}
    assert json.dumps(result.to_json()) == json.dumps(newer)


def test_an_entry_of_the_first_schema_reads_with_the_defaults_the_pages_assumed():
    """compare/1 had no loads, shape or latency: one load, rounds unknown, no latency sides."""
    old = {"batch_size": 4, "baseline": "fp32", "candidate": "fp16", "verdict": "faster",
           "speedup": {"estimate": 1.5, "ci_low": 1.4, "ci_high": 1.6}, "accuracy": None, "diagnosis": []}
    result = ComparisonResult.from_json(old)
    assert result.loads == 1 and result.rounds is None and result.latency == {} and result.nonfinite is None
    assert result.effective_label("candidate") == "fp16"


def test_the_effective_precision_shows_only_where_it_differs():
    lat = ArmLatency(precision="fp16", effective_precision="fp32+casts", median_ms=1.0, ci_low_ms=0.9,
                     ci_high_ms=1.1, n=10, cv=0.1)
    result = ComparisonResult(batch_size=1, baseline="fp32", candidate="fp16",
                              speedup=SpeedupSummary(1.0, 0.9, 1.1), verdict="equivalent",
                              latency={"candidate": lat})
    assert result.effective_label("candidate") == "fp16 (effective fp32+casts)"
    assert result.effective_label("baseline") == "fp32"


def test_the_result_is_frozen():
    import dataclasses

    result = ComparisonResult.from_json(entries(REAL_FILES[0])[0])
    with pytest.raises(dataclasses.FrozenInstanceError):
        result.verdict = "faster"  # type: ignore[misc]
