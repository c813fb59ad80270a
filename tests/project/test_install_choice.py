"""Issue 42, item 2: the install can never end with both ONNX Runtime distributions. setup.py requires exactly
one: ``onnxruntime`` by default, ``onnxruntime-gpu`` with ``TRTPROF_ORT=cuda`` (the metadata pip installs from,
read here from a real ``egg_info`` run); an unknown choice stops the build in one line."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


def requires(tmp_path: Path, choice: str | None) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "TRTPROF_ORT"}
    if choice is not None:
        env["TRTPROF_ORT"] = choice
    return subprocess.run([sys.executable, "setup.py", "-q", "egg_info", "--egg-base", str(tmp_path)], cwd=REPO,
                          env=env, capture_output=True, text=True, timeout=300)


def base_requirements(tmp_path: Path) -> list[str]:
    text = (tmp_path / "trtprof.egg-info" / "requires.txt").read_text()
    return [line.split(">")[0].split("=")[0].strip() for line in text.split("\n\n")[0].splitlines() if line.strip()]


@pytest.mark.parametrize("choice, wanted, unwanted", [(None, "onnxruntime", "onnxruntime-gpu"),
                                                      ("cpu", "onnxruntime", "onnxruntime-gpu"),
                                                      ("cuda", "onnxruntime-gpu", "onnxruntime")])
def test_exactly_one_onnxruntime_is_required(tmp_path, choice, wanted, unwanted):
    proc = requires(tmp_path, choice)
    assert proc.returncode == 0, proc.stderr
    names = base_requirements(tmp_path)
    assert wanted in names and unwanted not in names


def test_an_unknown_choice_stops_in_one_line(tmp_path):
    proc = requires(tmp_path, "rocm")
    assert proc.returncode != 0
    assert "TRTPROF_ORT='rocm': choose cpu (onnxruntime) or cuda (onnxruntime-gpu)" in proc.stderr
    assert "Traceback" not in proc.stderr
