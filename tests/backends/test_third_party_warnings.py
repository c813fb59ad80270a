"""ONNX Runtime's coloured log lines and Python warnings are kept in the JSON, not printed raw (issue 34).

The model that makes ORT warn: one with an initializer no node uses ("Removing initializer
'unused_weight'. It is not used by any node ..."), written by ORT's C++ logger straight to fd 2, so the
tests read the terminal with ``capfd`` (file-descriptor level), not ``capsys``."""
from __future__ import annotations

import json
import os
import warnings
from pathlib import Path

import numpy as np
import pytest

from trtprof.cli import main
from trtprof.model.demo import make_demo_model
from trtprof.util.thirdparty import MAX_LINES, clean_lines, third_party_warnings

onnx = pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")

ORT_RAW = ("\x1b[0;93m2026-12-02 01:59:16.866140838 [W:onnxruntime:, graph.cc:5809 "
           "CleanUnusedInitializersAndNodeArgs] Removing initializer 'unused_weight'. It is not used by any node "
           "and should be removed from the model.\x1b[m\n")


def with_unused_initializer(tmp_path: Path) -> Path:
    src = make_demo_model(tmp_path / "net.onnx", channels=12, image=16, classes=10)
    model = onnx.load(str(src))
    model.graph.initializer.append(onnx.numpy_helper.from_array(np.ones(3, np.float32), "unused_weight"))
    out = tmp_path / "warns.onnx"
    onnx.save(model, str(out))
    return out


def test_an_ort_line_becomes_one_plain_line():
    assert clean_lines(ORT_RAW + ORT_RAW) == [
        "onnxruntime (CleanUnusedInitializersAndNodeArgs): Removing initializer 'unused_weight'. It is not used by "
        "any node and should be removed from the model."]
    assert clean_lines("plain text\n\n") == ["plain text"]


def test_lines_beyond_the_cap_are_counted_not_kept():
    text = "".join(f"line {i}\n" for i in range(MAX_LINES + 3))
    assert clean_lines(text)[-1] == "… and 3 more lines" and len(clean_lines(text)) == MAX_LINES + 1
    assert len(clean_lines("".join(f"line {i}\n" for i in range(MAX_LINES)))) == MAX_LINES  # at the cap: all kept


def test_fd2_writes_and_python_warnings_are_captured_and_fd2_restored(capfd):
    with third_party_warnings() as caught:
        os.write(2, ORT_RAW.encode())  # what C++ does: no Python stream involved
        warnings.warn("tiny weights truncated", UserWarning)
    assert caught[0].startswith("onnxruntime (CleanUnusedInitializersAndNodeArgs): Removing initializer")
    assert "UserWarning: tiny weights truncated" in caught
    os.write(2, b"after\n")
    assert capfd.readouterr().err == "after\n"  # nothing leaked; fd 2 is the terminal again


def test_build_keeps_ort_warnings_in_the_engine_metadata_not_on_the_terminal(tmp_path, capfd):
    model = with_unused_initializer(tmp_path)
    assert main(["build", str(model), "--engines", str(tmp_path / "e"), "--backend", "onnxruntime",
                 "--batch-sizes", "1", "--fp32"]) == 0
    captured = capfd.readouterr()
    err = captured.err
    assert "W:onnxruntime" not in err and "\x1b[" not in err
    assert "note: onnxruntime warned 1 time about this model (kept in the engine's metadata JSON" in captured.out
    meta = next(p for p in (tmp_path / "e").glob("warns.fp32.*.json"))
    kept = json.loads(meta.read_text())["backend_metadata"]["warnings"]
    assert any("Removing initializer 'unused_weight'" in w for w in kept)


def test_what_if_keeps_ort_warnings_in_its_json(tmp_path, capfd):
    model = with_unused_initializer(tmp_path)
    out = tmp_path / "wi.json"
    assert main(["compare", str(model), "--what-if", "pad-channels", "--engines", str(tmp_path / "e"),
                 "--out", str(out), "--backend", "onnxruntime", "--batch-sizes", "1", "--time-budget-s", "0.5",
                 "--round-iterations", "20"]) == 0
    captured = capfd.readouterr()
    assert "W:onnxruntime" not in captured.err + captured.out and "\x1b[" not in captured.err
    kept = json.loads(out.read_text())["ab"]["what_if"]["warnings"]
    assert any("Removing initializer 'unused_weight'" in w for w in kept)
