"""benchmarks/reference_report_net.py, the independent plain-PyTorch loop the report's net is checked
against on the GPU, computes what models/conv_elu.py's ONNX file computes (checked through ONNX Runtime,
with the file's own weights): a reference of another network would agree or disagree by accident."""
from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import pytest

from ..conftest import load_script

ROOT = Path(__file__).resolve().parents[2]




@pytest.mark.skipif(importlib.util.find_spec("torch") is None, reason="torch missing")
def test_the_reference_loop_is_the_report_net_of_the_onnx_file(tmp_path, monkeypatch):
    import onnxruntime as ort
    import torch

    monkeypatch.syspath_prepend(str(ROOT / "benchmarks"))
    ref = load_script("benchmarks/reference_report_net.py", "reference_report_net")
    conv_elu = load_script("models/conv_elu.py", "conv_elu_for_ref")
    name = "report_conv_elu_k32_256"
    path = conv_elu.make_onnx(name, tmp_path / "report.onnx")
    weights = conv_elu.seeded_weights(name)
    net = ref.ReportNet().eval()
    convs = [m for m in net.body if isinstance(m, torch.nn.Conv2d)]
    assert len(convs) == 4
    for i, conv in enumerate(convs):
        conv.weight.data = torch.from_numpy(np.ascontiguousarray(weights[2 * i].transpose(3, 2, 0, 1)))
        conv.bias.data = torch.from_numpy(weights[2 * i + 1])
    x = np.random.default_rng(1).standard_normal((2, 128, 128, 3)).astype(np.float32)
    want = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"]).run(None, {"image": x})[0]
    with torch.no_grad():
        got = net(torch.from_numpy(x)).numpy()
    assert got.shape == want.shape == (2, 8, 8, 3)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-6)
