"""Issue 41, item 2: every results file trtprof reads is read once, into one typed value
(``compare.results_file.read_results``), whose ``to_json`` writes back every key it was given, those it
does not know included (a newer writer's), at the top level and nested."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from trtprof.compare.report_value import CompareDocument
from trtprof.compare.results_file import OtherResults, read_bench, read_results
from trtprof.errors import BadInput
from trtprof.measure.results import ResultSet
from trtprof.util import datafile

from ..cli.test_user_errors import assert_one_line, run_main
from ..report.test_report import synthetic_compare_json, synthetic_result


def dumped(data) -> str:
    return json.dumps(data, allow_nan=True)  # key order kept: a round trip writes the keys where they were


def with_unknown_keys(data: dict) -> dict:
    data["from_a_newer_writer"] = {"nested": [1, 2, {"deep": None}]}
    data["results"][0]["future_entry_field"] = [0.5, "x"]
    data["results"][0]["engine"]["future_engine_field"] = True
    return data


def compare_file(tmp_path: Path) -> tuple[Path, dict]:
    src = synthetic_compare_json(tmp_path)
    data = with_unknown_keys(json.loads(src.read_text()))
    data["comparisons"][0]["future_comparison_field"] = {"a": 1}
    data["comparisons"][1]["latency"]["baseline"]["future_arm_field"] = "kept"
    src.write_text(json.dumps(data))
    return src, data


def bench_file(tmp_path: Path) -> tuple[Path, dict]:
    src = tmp_path / "results.json"
    results = [synthetic_result(p, 2, m, seed=1) for p, m in (("fp32", 1.0), ("fp16", 0.6))]
    ResultSet(environment={"host": "h"}, results=results).write_json(src)
    data = with_unknown_keys(json.loads(src.read_text()))
    src.write_text(json.dumps(data))
    return src, data


def test_a_compare_file_reads_into_its_value_and_writes_back_every_key(tmp_path):
    src, data = compare_file(tmp_path)
    doc = read_results(src)
    assert isinstance(doc, CompareDocument)
    assert [c.batch_size for c in doc.comparisons] == [1, 16] and len(doc.results) == 4
    assert doc.comparisons[0].extra == {"future_comparison_field": {"a": 1}}
    assert doc.comparisons[1].latency["baseline"].extra == {"future_arm_field": "kept"}
    assert doc.results[0].extra == {"future_entry_field": [0.5, "x"]}
    assert doc.blocks["from_a_newer_writer"] == {"nested": [1, 2, {"deep": None}]}
    assert dumped(doc.to_json()) == dumped(data)  # every key, nested ones included, in the file's order
    doc.write_json(tmp_path / "again.json")
    assert dumped(json.loads((tmp_path / "again.json").read_text())) == dumped(data)
    assert doc.to_json() is not doc.to_json() and dumped(doc.to_json()) == dumped(doc.to_json())  # pure


def test_a_bench_file_reads_into_its_value_and_writes_back_every_key(tmp_path):
    src, data = bench_file(tmp_path)
    for value in (read_results(src), read_bench(src)):
        assert isinstance(value, ResultSet)
        assert value.extra == {"from_a_newer_writer": {"nested": [1, 2, {"deep": None}]}}
        assert value.results[0].extra == {"future_entry_field": [0.5, "x"]}
        assert value.to_json() == data


@pytest.mark.parametrize("kind", ["compare", "bench"])
def test_unknown_keys_in_a_result_s_stats_survive_read_and_write(tmp_path, kind):
    """A newer writer's key at the top level, in a result, and in a result's ``stats`` (``LatencyStats`` dropped
    the last): read into the value and written back, the file is what it was."""
    src, data = compare_file(tmp_path) if kind == "compare" else bench_file(tmp_path)
    data["results"][0]["stats"]["latency_ms"]["future_stat"] = {"p999": 1.5}
    data["results"][1]["stats"]["latency_ms"]["p9999"] = 2.0
    src.write_text(json.dumps(data))
    value = read_results(src)
    assert value.results[0].latency.extra == {"future_stat": {"p999": 1.5}}
    assert value.results[1].latency.extra == {"p9999": 2.0}
    value.write_json(tmp_path / "again.json")
    assert dumped(json.loads((tmp_path / "again.json").read_text())) == dumped(data)


def counting_reads(monkeypatch) -> list[Path]:
    """Every results/data file read from here on (``util.datafile.load_json``: every reader goes through it)."""
    reads: list[Path] = []
    load_json = datafile.load_json

    def counted(path, *args, **kwargs):
        reads.append(Path(path))
        return load_json(path, *args, **kwargs)

    monkeypatch.setattr(datafile, "load_json", counted)
    return reads


def import_two_runs(capsys, out: Path, after_first=None) -> None:
    """``import trtexec`` of the fp32 and fp16 ResNet-50 timings into ``out`` (the second with --append);
    ``after_first(out)`` runs between the two."""
    data_dir = Path(__file__).resolve().parents[1] / "data" / "trtexec"
    for i, precision in enumerate(("fp32", "fp16")):
        code, _, err = run_main(capsys, "import", "trtexec", "--times",
                                str(data_dir / f"resnet50-rtx3090-{precision}.timing.json.gz"), "--precision",
                                precision, "--batch-size", "32", "--model", "resnet50", "--out", str(out),
                                *(["--append"] if i else []))
        assert code == 0, err
        if not i and after_first is not None:
            after_first(out)


def test_import_append_keeps_a_newer_writer_s_keys_and_compare_reads_the_file_once(tmp_path, capsys, monkeypatch):
    """``import trtexec --append`` reads the results file it adds to through the same value, and writes it
    back with the keys it did not know; ``compare`` on the imported runs reads the file once."""
    out = tmp_path / "results.json"

    def newer_writer_keys(path: Path) -> None:
        first = json.loads(path.read_text())
        first["from_a_newer_writer"] = {"kept": 1}
        first["results"][0]["future_entry_field"] = 2
        path.write_text(json.dumps(first))

    import_two_runs(capsys, out, newer_writer_keys)
    data = json.loads(out.read_text())
    assert data["from_a_newer_writer"] == {"kept": 1} and data["results"][0]["future_entry_field"] == 2
    assert [r["precision"] for r in data["results"]] == ["fp32", "fp16"]
    reads = counting_reads(monkeypatch)
    code, printed, err = run_main(capsys, "compare", str(out), "--out", str(tmp_path / "cmp.json"))
    assert code == 0, err
    assert reads == [out] and "speedup" in printed


def test_other_schemas_are_kept_as_read_and_a_stranger_is_one_line(tmp_path):
    path = tmp_path / "sweep.json"
    path.write_text(json.dumps({"schema": "trtprof.sweep/1", "entries": [], "x": 1}))
    value = read_results(path)
    assert isinstance(value, OtherResults) and value.to_json() == {"schema": "trtprof.sweep/1", "entries": [], "x": 1}
    path.write_text(json.dumps({"schema": "someone.else/1"}))
    with pytest.raises(BadInput, match="not a trtprof compare or results file"):
        read_results(path)
    with pytest.raises(BadInput, match="not a trtprof results file"):
        read_bench(path)


@pytest.mark.parametrize("command", ["report", "plot"])
def test_each_command_reads_its_results_file_once(tmp_path, capsys, monkeypatch, command):
    pytest.importorskip("matplotlib")
    src, _ = compare_file(tmp_path) if command == "report" else bench_file(tmp_path)
    reads = counting_reads(monkeypatch)
    out = ["-o", str(tmp_path / "r.html")] if command == "report" else ["--out", str(tmp_path / "plots")]
    code, _, err = run_main(capsys, command, str(src), *out)
    assert code == 0, err
    assert reads == [src]


def test_a_malformed_compare_file_is_one_line_naming_the_field(tmp_path, capsys):
    src, data = compare_file(tmp_path)
    data["comparisons"][1]["speedup"]["estimate"] = "fast"
    src.write_text(json.dumps(data))
    code, _, err = run_main(capsys, "report", str(src), "-o", str(tmp_path / "r.html"))
    assert_one_line(code, err, str(src), "comparisons[1].speedup.estimate")
    assert not (tmp_path / "r.html").exists()


def printed_markdown(printed: str, out: Path) -> str:
    """The Markdown summary ``--md`` printed: after the blank line that follows the warnings, before the last
    line (``compare: OUT``)."""
    lines = printed.splitlines()
    assert lines[-1] == f"compare: {out}"
    start = max(i for i, line in enumerate(lines) if line.startswith("# trtprof: "))
    assert lines[start - 1] == ""
    return "\n".join(lines[start:-1]) + "\n"


def test_compare_md_is_the_document_s_summary_without_reading_the_file_back(conv_model, tmp_path, capsys,
                                                                             monkeypatch):
    """``compare --md`` made its Markdown by reading the file it had just written; now from the document it
    wrote: the same Markdown as the file read afterwards gives, and no read of the file."""
    pytest.importorskip("onnxruntime")
    from trtprof.report.compare_page import load, markdown_summary

    out = tmp_path / "compare.json"
    reads = counting_reads(monkeypatch)
    code, printed, err = run_main(capsys, "compare", str(conv_model), "--in-process", "--engines", str(tmp_path / "e"),
                                  "--out", str(out), "--batch-sizes", "1,2", "--backend", "onnxruntime",
                                  "--time-budget-s", "0.5", "--round-iterations", "20", "--md")
    assert code == 0, err
    assert out not in reads  # was: read once, for the Markdown
    md = printed_markdown(printed, out)
    assert "| batch |" in md and md.count("| fp16 ") + md.count("| fp32 ") >= 2
    assert md == markdown_summary(load(out))


def test_compare_md_on_imported_runs_reads_only_the_results_file(tmp_path, capsys, monkeypatch):
    results = tmp_path / "results.json"
    import_two_runs(capsys, results)
    out = tmp_path / "cmp.json"
    reads = counting_reads(monkeypatch)
    code, printed, err = run_main(capsys, "compare", str(results), "--out", str(out), "--md")
    assert code == 0, err
    assert reads == [results]  # was [results, out]
    from trtprof.report.compare_page import load, markdown_summary

    md = printed_markdown(printed, out)
    assert "resnet50" in md and md == markdown_summary(load(out))
    saved = read_results(out)
    assert saved.comparisons and all(  # the lines printed are the saved comparisons'
        f"\nbatch {c.batch_size}: {c.candidate} vs {c.baseline}  speedup {c.speedup.estimate:.3f}× " in printed
        for c in saved.comparisons)
