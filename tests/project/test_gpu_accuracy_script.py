"""benchmarks/gpu_accuracy.py's pipeline on the CPU (--smoke: a small CNN through ONNX Runtime): the
calibrated weights give non-flat logits, and compare --inputs writes top-1 agreement and a verdict.
The GPU run itself (ResNet-50, torch backend) is the lead's, on the H200."""
from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("torch")
pytest.importorskip("onnxruntime")
ROOT = Path(__file__).resolve().parents[2]


def _script():
    spec = importlib.util.spec_from_file_location("gpu_accuracy", ROOT / "benchmarks" / "gpu_accuracy.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules["gpu_accuracy"] = module
    spec.loader.exec_module(module)
    return module


def test_natural_images_are_normalised_and_smooth():
    images = _script().natural_images(4, 32, seed=0)
    assert images.shape == (4, 3, 32, 32) and images.dtype == np.float32
    raw = images * np.array([0.229, 0.224, 0.225])[None, :, None, None] + np.array([0.485, 0.456, 0.406])[None, :, None, None]
    assert raw.min() >= -1e-5 and raw.max() <= 1 + 1e-5
    # neighbouring pixels agree far more than independent noise would (std of a difference ≈ √2·std)
    assert np.diff(images, axis=3).std() < 0.5 * images.std()


def test_calibration_gives_non_flat_logits():
    script = _script()
    model = script.SmallNet.make()
    script.calibrate(model, script.natural_images(32, 32, seed=1), batch=16)
    facts = script.logits_facts(model, script.natural_images(32, 32, seed=2))
    assert facts["logit_std"] == pytest.approx(script.LOGIT_STD, rel=0.5)
    assert facts["distinct_top1"] > 1 and facts["median_top1_top2_margin"] > 0


@pytest.mark.slow
def test_smoke_run_writes_top1_and_a_verdict(tmp_path):
    assert _script().main(["--smoke", "--out-dir", str(tmp_path), "--samples", "16", "--calibration", "16",
                           "--batch-sizes", "8", "--time-budget-s", "0.3"]) == 0
    [c] = json.loads((tmp_path / "compare.json").read_text())["comparisons"]
    assert c["accuracy"]["top1"] is not None and c["accuracy"]["verdict"]["verdict"] in ("OK", "DEGRADED")
    assert c["accuracy"]["inputs"].endswith("(16 samples)") and (tmp_path / "report.html").is_file()
