"""Issue 36, deliverable 5: fix-fp16 prints its keep-list (the `reuse:` line with --layer-precisions)
as soon as the search ends, before the speed measurement; a Ctrl-C/SIGTERM after that keeps it (the
line, and the JSON with the search), and a full disk writing --out still leaves the line on stdout."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
FAULTS_DIR = REPO / "tests" / "faults"


def _argv(model: Path, tmp_path: Path, budget: str) -> list[str]:
    return [sys.executable, "-m", "trtprof", "fix-fp16", str(model), "--engines", str(tmp_path / "e"),
            "--backend", "onnxruntime", "--batch-size", "2", "--time-budget-s", budget, "--out", str(tmp_path / "fixout.json")]


def test_a_signal_after_the_search_keeps_the_keep_list(conv_model, tmp_path):
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]))
    proc = subprocess.Popen(_argv(conv_model, tmp_path, "60"), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, env=env)
    out: list[str] = []
    sent: list[bool] = []

    def watch() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            out.append(line)
            if line.startswith("reuse:") and not sent:
                proc.send_signal(signal.SIGTERM)  # during the measurement of a 60 s budget
                sent.append(True)

    errors: list[str] = []
    reader = threading.Thread(target=watch, daemon=True)
    err_reader = threading.Thread(target=lambda: errors.extend(proc.stderr), daemon=True)  # type: ignore[arg-type]
    reader.start()
    err_reader.start()
    try:
        proc.wait(timeout=240)  # not communicate(): it would read stdout beside the watcher
    except subprocess.TimeoutExpired:
        proc.kill()
        pytest.fail("fix-fp16 did not stop on SIGTERM")
    reader.join(timeout=10)
    err_reader.join(timeout=10)
    err = "".join(errors)
    assert sent, f"no reuse: line before the measurement: {''.join(out)} {err}"
    assert proc.returncode == 130, err
    assert "Traceback" not in err
    assert any(line.startswith("reuse: trtprof build") for line in out)
    data = json.loads((tmp_path / "fixout.json").read_text())
    assert data["fix_fp16"]["found"] is True and data.get("interrupted") is True


def test_a_full_disk_on_out_keeps_the_reuse_line(conv_model, tmp_path):
    env = dict(os.environ, TRTPROF_TEST_FAULT=f"enospc:{tmp_path / 'fixout.json'}",
               PYTHONPATH=os.pathsep.join([str(FAULTS_DIR), str(REPO), os.environ.get("PYTHONPATH", "")]))
    proc = subprocess.run(_argv(conv_model, tmp_path, "2"), capture_output=True, text=True, env=env, timeout=240)
    assert proc.returncode == 2, proc.stderr
    lines = [line for line in proc.stderr.splitlines() if line.strip() and not line.startswith("  ")]
    assert "Traceback" not in proc.stderr and "fixout.json" in lines[-1] and "No space left" in lines[-1], proc.stderr
    assert "keep-list is printed above" in lines[-1]
    assert any(line.startswith("reuse: trtprof build") for line in proc.stdout.splitlines()), proc.stdout
    assert not (tmp_path / "fixout.json").exists()
