"""fix-fp16 on a GPU backend that computes in FP16 (torch CUDA): the search judges the backend's own
FP16 engines (evaluation "engine"), not the numpy emulation. Skipped without a CUDA device."""
from __future__ import annotations

import importlib.util
import json

import numpy as np
import pytest

from trtprof.system import cuda
from trtprof.cli import main

from ..convert.test_keeplists import shared_scale_model

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(cuda.device_count() == 0, reason="no CUDA device"),
    pytest.mark.skipif(importlib.util.find_spec("onnx2torch") is None, reason="onnx2torch missing"),
]


def test_fix_fp16_on_torch_cuda_judges_real_fp16_engines(tmp_path, capsys):
    model = shared_scale_model(tmp_path / "m.onnx")
    npz = tmp_path / "x.npz"
    np.savez(npz, x=np.random.default_rng(0).standard_normal((64, 8)).astype(np.float32))
    out = tmp_path / "fix.json"
    assert main(["fix-fp16", str(model), "--backend", "torch", "--engines", str(tmp_path / "e"), "--batch-size", "16",
                 "--inputs", str(npz), "--time-budget-s", "3", "--out", str(out)]) == 0
    data = json.loads(out.read_text())
    search = data["fix_fp16"]
    assert search["evaluation"] == "engine"
    assert search["trials"][0]["verdict"] == "BROKEN"  # half() arithmetic overflows t2 ≈ 1e9
    assert search["found"] and data["comparisons"][0]["accuracy"]["verdict"]["verdict"] == "OK"
    assert "reuse: trtprof build" in capsys.readouterr().out
