"""The serving command the lead runs on the H200 (benchmarks/serving_validity.sh, torch, ResNet-50) writes
`validity` in its JSON: the same script, the same trtprof commands, on ONNX Runtime on the CPU with a small
model (issue 34: "a serving run whose JSON carries validity")."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "benchmarks" / "serving_validity.sh"

pytest.importorskip("onnxruntime")
pytestmark = pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")


def test_the_serving_script_writes_validity_for_the_file_and_the_sweep(tmp_path):
    from trtprof.model.demo import make_demo_model
    from trtprof.system.validity import MIN_SERVING_ROUNDS

    model = make_demo_model(tmp_path / "net.onnx", channels=8, image=16, classes=10)
    env = {**os.environ, "MODEL": str(model), "WINDOW_S": "0.05", "BATCHES": "1,2", "OUT": str(tmp_path / "o"),
           "ENGINES": str(tmp_path / "e"), "PYTHON": sys.executable,
           "PYTHONPATH": os.pathsep.join([str(REPO), *filter(None, [os.environ.get("PYTHONPATH")])])}
    done = subprocess.run(["bash", str(SCRIPT), "onnxruntime"], cwd=REPO, env=env, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    data = json.loads((tmp_path / "o" / "serving_validity" / "serving.json").read_text())
    (sweep,) = data["serving"]
    for stamp in (data["validity"], sweep["validity"]):
        assert stamp["stamp"].startswith(("VALID", "NOT VALID"))
        assert stamp["valid"] == (stamp["stamp"] == "VALID")
    codes = [r["code"] for r in sweep["validity"]["reasons"]]
    assert sweep["settings"]["rounds"] == MIN_SERVING_ROUNDS and "too_few_rounds" not in codes  # 3: just enough
    assert "fp16_is_fp32" in codes  # the CPU's "fp16": named, as the GPU's would not be
    assert f"sweep 0: {sweep['validity']['stamp']}" in done.stdout and f"file: {data['validity']['stamp']}" in done.stdout
    # and the page opens with that stamp, before any section (issue 34: "at the top of the page")
    from trtprof.cli import main

    page = tmp_path / "serving.html"
    assert main(["report", str(tmp_path / "o" / "serving_validity" / "serving.json"), "-o", str(page)]) == 0
    body = page.read_text()
    top = body[:body.index("<h2>")]
    assert ("<b>NOT VALID</b>" if not data["validity"]["valid"] else "<b>VALID</b>") in top
