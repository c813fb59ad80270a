"""Issue 36, deliverable 1: outputs never destroy inputs. Every output path is resolved (symlinks and
hard links followed) before any work; it is refused (exit 2, one line) when it is an input of the
command, or an existing file that is not a trtprof output of that kind unless --force; folders
written into (plots, sweeps, a report's cells) get the same rule per file."""
from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest

from trtprof.cli import main

from .test_user_errors import assert_one_line, run_main as _run

FAST = ["--warmup", "1", "--iterations", "2"]
QUICK_COMPARE = ["--backend", "onnxruntime", "--in-process", "--time-budget-s", "2", "--round-iterations", "2",
                 "--min-loads", "2"]
NOTE = "my notes, not a trtprof file\n"


@pytest.fixture
def engines(conv_model, tmp_path) -> Path:
    out = tmp_path / "engines"
    assert main(["build", str(conv_model), "--fp32", "--batch-sizes", "1", "--engines", str(out),
                 "--backend", "onnxruntime"]) == 0
    return out


@pytest.fixture
def results_file(engines, tmp_path) -> Path:
    out = tmp_path / "results.json"
    assert main(["bench", str(engines), *FAST, "--out", str(out)]) == 0
    return out


def _unchanged(path: Path, before: bytes) -> None:
    assert path.read_bytes() == before, f"{path} was overwritten"


# --- an output that is an input of the command --------------------------------------------------

def test_compare_out_naming_the_model_is_refused(conv_model, tmp_path, capsys):
    before = conv_model.read_bytes()
    code, _, err = _run(capsys, "compare", str(conv_model), "--engines", str(tmp_path / "e"), *QUICK_COMPARE,
                        "--out", str(conv_model))
    assert_one_line(code, err, "--out", "is an input of this command")
    _unchanged(conv_model, before)
    assert not (tmp_path / "e").exists()  # refused before any build


def test_force_never_lets_an_output_replace_an_input(conv_model, tmp_path, capsys):
    before = conv_model.read_bytes()
    code, _, err = _run(capsys, "compare", str(conv_model), "--engines", str(tmp_path / "e"), *QUICK_COMPARE,
                        "--out", str(conv_model), "--force")
    assert_one_line(code, err, "is an input of this command")
    _unchanged(conv_model, before)


def test_compare_out_naming_the_inputs_npz_is_refused(conv_model, tmp_path, capsys):
    data = tmp_path / "data.npz"
    np.savez(data, input=np.zeros((2, 3, 16, 16), np.float32))
    before = data.read_bytes()
    code, _, err = _run(capsys, "compare", str(conv_model), "--engines", str(tmp_path / "e"), *QUICK_COMPARE,
                        "--inputs", str(data), "--out", str(data))
    assert_one_line(code, err, "is an input of this command")
    _unchanged(data, before)


@pytest.mark.parametrize("link", ["symlink", "hardlink"])
def test_an_output_linked_to_an_input_is_refused(link, conv_model, tmp_path, capsys):
    out = tmp_path / "out.json"
    (os.symlink if link == "symlink" else os.link)(conv_model, out)
    before = conv_model.read_bytes()
    code, _, err = _run(capsys, "compare", str(conv_model), "--engines", str(tmp_path / "e"), *QUICK_COMPARE,
                        "--out", str(out))
    assert_one_line(code, err, "is an input of this command")
    _unchanged(conv_model, before)


def test_report_out_naming_its_results_is_refused(results_file, capsys):
    before = results_file.read_bytes()
    code, _, err = _run(capsys, "report", str(results_file), "-o", str(results_file))
    assert_one_line(code, err, "is an input of this command")
    _unchanged(results_file, before)


# --- an existing file that is not a trtprof output of that kind --------------------------------

@pytest.mark.parametrize("option", ["--out", "--csv"])
def test_bench_over_a_users_file_is_refused_unless_force(option, engines, tmp_path, capsys):
    notes = tmp_path / "notes.txt"
    notes.write_text(NOTE)
    extra = ["--out", str(tmp_path / "r.json")] if option == "--csv" else []
    code, _, err = _run(capsys, "bench", str(engines), *FAST, *extra, option, str(notes))
    assert_one_line(code, err, option, "exists and is not a trtprof", "--force")
    assert notes.read_text() == NOTE
    code, _, err = _run(capsys, "bench", str(engines), *FAST, *extra, option, str(notes), "--force")
    assert code == 0, err
    assert notes.read_text() != NOTE


def test_rerunning_a_command_replaces_its_own_outputs(engines, tmp_path, capsys):
    """Just inside the rule: a trtprof output of the same kind is replaced without --force."""
    out, csv = tmp_path / "r.json", tmp_path / "r.csv"
    for _ in range(2):
        code, _, err = _run(capsys, "bench", str(engines), *FAST, "--out", str(out), "--csv", str(csv))
        assert code == 0, err
    code, _, err = _run(capsys, "report", str(out), "-o", str(tmp_path / "r.html"))
    assert code == 0, err
    code, _, err = _run(capsys, "report", str(out), "-o", str(tmp_path / "r.html"))
    assert code == 0, err


def test_an_output_of_another_kind_is_refused(results_file, conv_model, tmp_path, capsys):
    """Just outside: a trtprof results file is not a profile's JSON, so profile --out keeps it."""
    before = results_file.read_bytes()
    code, _, err = _run(capsys, "profile", str(conv_model), "--engines", str(tmp_path / "e"), "--backend",
                        "onnxruntime", "--out", str(results_file))
    assert_one_line(code, err, "exists and is not a trtprof profile JSON")
    _unchanged(results_file, before)


def test_report_over_a_users_html_is_refused(results_file, tmp_path, capsys):
    page = tmp_path / "index.html"
    page.write_text("<!DOCTYPE html><html><body>my page</body></html>")
    code, _, err = _run(capsys, "report", str(results_file), "-o", str(page))
    assert_one_line(code, err, "exists and is not a trtprof HTML page")
    assert "my page" in page.read_text()


def test_plot_into_a_folder_keeps_a_users_same_named_file(results_file, tmp_path, capsys):
    folder = tmp_path / "mydir"
    folder.mkdir()
    mine = folder / "latency_vs_batch.png"
    mine.write_bytes(b"\x89PNG\r\n\x1a\n my own figure")
    code, _, err = _run(capsys, "plot", str(results_file), "--out", str(folder))
    assert_one_line(code, err, "latency_vs_batch.png", "exists and is not a trtprof plot")
    assert mine.read_bytes().endswith(b"my own figure")
    assert sorted(p.name for p in folder.iterdir()) == ["latency_vs_batch.png"]  # nothing drawn before refusing
    mine.unlink()
    for _ in range(2):  # its own plots are replaced on a second run
        code, _, err = _run(capsys, "plot", str(results_file), "--out", str(folder))
        assert code == 0, err


def test_sweep_into_a_folder_with_a_users_sweep_json_is_refused(conv_model, tmp_path, capsys):
    out = tmp_path / "sw"
    out.mkdir()
    (out / "sweep.json").write_text('{"mine": true}')
    code, _, err = _run(capsys, "sweep", "--models", str(conv_model), "--engines", str(tmp_path / "e"), "--out",
                        str(out), "--batch-sizes", "1", "--backend", "onnxruntime", "--time-budget-s", "2")
    assert_one_line(code, err, "sweep.json", "exists and is not a trtprof sweep JSON")
    assert (out / "sweep.json").read_text() == '{"mine": true}'
    assert sorted(p.name for p in out.iterdir()) == ["sweep.json"]


def test_report_of_a_sweep_keeps_a_users_file_in_the_cells_folder(results_file, tmp_path, capsys):
    from trtprof.schemas import SWEEP

    sw = tmp_path / "sw"
    (sw / "cells").mkdir(parents=True)
    (sw / "cells" / "abc.json").write_bytes(results_file.read_bytes())
    entry = {"id": "abc", "name": "m bench batch 1", "status": "ok", "result_file": "cells/abc.json"}
    (sw / "sweep.json").write_text(json.dumps({"schema": SWEEP, "entries": [entry]}))
    cells = tmp_path / "page_cells"
    cells.mkdir()
    (cells / "abc.html").write_text("mine")
    code, _, err = _run(capsys, "report", str(sw / "sweep.json"), "-o", str(tmp_path / "page.html"))
    assert_one_line(code, err, "page_cells/abc.html", "exists and is not a trtprof HTML page")
    assert (cells / "abc.html").read_text() == "mine" and not (tmp_path / "page.html").exists()


# --- the recognisers, just inside and just outside ---------------------------------------------

@pytest.mark.parametrize("kind,content,ours", [
    ("COMPARE_JSON", {"schema": "trtprof.compare/2"}, True),
    ("COMPARE_JSON", {"schema": "trtprof.compare/1"}, True),
    ("COMPARE_JSON", {"schema": None, "fix_fp16": {}}, True),  # fix-fp16 without a comparison
    ("COMPARE_JSON", {"schema": "trtprof.results/1"}, False),
    ("COMPARE_JSON", {"schema": "trtprof.compare/3"}, False),
    ("COMPARE_JSON", [1, 2], False),
    ("RESULTS_JSON", {"schema": "trtprof.results/1"}, True),
    ("RESULTS_JSON", {"schema": ["trtprof.results/1"]}, False),
])
def test_json_kinds(kind, content, ours, tmp_path):
    from trtprof.util import outputs

    kind = getattr(outputs, kind)
    path = tmp_path / "x.json"
    path.write_text(json.dumps(content))
    assert kind.recognises(path) is ours


def test_text_kinds_by_their_tags(tmp_path):
    from trtprof.util import outputs
    from trtprof.report.kit import document

    page = tmp_path / "p.html"
    page.write_text(document("t", ["<p>x</p>"]))
    assert outputs.HTML_PAGE.recognises(page)
    page.write_text(document("t", ["<p>x</p>"]).replace(outputs.GENERATOR_META, ""))
    assert not outputs.HTML_PAGE.recognises(page)
    csv = tmp_path / "r.csv"
    csv.write_text("engine_label,model,precision,effective_precision\n")
    assert outputs.CSV_TABLE.recognises(csv)
    csv.write_text("engine,model,precision\n")
    assert not outputs.CSV_TABLE.recognises(csv)
    log = tmp_path / "cells.jsonl"
    log.write_text('{"id": "a"}\n{"id": "b"}\n')
    assert outputs.JSON_LINES.recognises(log)
    log.write_text('{"id": "a"}\nnot json\n')
    assert not outputs.JSON_LINES.recognises(log)


def test_a_json_larger_than_any_result_is_not_ours(tmp_path, monkeypatch):
    from trtprof.util import outputs

    path = tmp_path / "x.json"
    path.write_text(json.dumps({"schema": "trtprof.results/1"}))
    monkeypatch.setattr(outputs, "MAX_JSON_BYTES", path.stat().st_size)
    assert outputs.RESULTS_JSON.recognises(path)
    monkeypatch.setattr(outputs, "MAX_JSON_BYTES", path.stat().st_size - 1)
    assert not outputs.RESULTS_JSON.recognises(path)
