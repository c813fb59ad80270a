"""Per-node GPU kernel times on onnxruntime-cuda with cupti-python, on a real GPU (marked ``gpu``; skipped
without onnxruntime-gpu, a GPU, or cupti-python). Structure, no timing threshold: every Conv of the
report's network gets GPU kernels of its own in both precisions, nearly all the GPU's work is tied to a
node, the profiled session took the timed session's provider options, and the host-clock finding is gone."""
from __future__ import annotations

import importlib.util
import json

import pytest

from trtprof import backends
from trtprof.cli import main

from ..conftest import report_model

pytestmark = pytest.mark.gpu


def usable() -> bool:
    try:
        return backends.get("onnxruntime-cuda").available().ok and importlib.util.find_spec("cupti") is not None
    except Exception:  # noqa: BLE001
        return False


@pytest.mark.skipif(not usable(), reason="needs onnxruntime-gpu, a CUDA GPU and cupti-python")
def test_onnxruntime_cuda_profile_gives_gpu_kernel_times_per_conv(tmp_path):
    out = tmp_path / "layers.json"
    assert main(["profile", str(report_model(tmp_path)), "--backend", "onnxruntime-cuda", "--precisions", "fp32,fp16",
                 "--batch-size", "10", "--iterations", "10", "--engines", str(tmp_path / "e"), "--out", str(out)]) == 0
    data = json.loads(out.read_text())
    table = data["table"]
    for p in ("fp32", "fp16"):
        prof = table["profiles"][p]
        assert prof["kernel_times"] is True and prof["config"]["attributed_share"] >= 0.95, prof
        assert prof["config"]["provider_options"]["cudnn_conv_algo_search"] == "EXHAUSTIVE"
        assert prof["iteration_total_ms"] > 0
    convs = [r for r in table["rows"] if r["op_type"] == "Conv"]
    assert len(convs) == 4
    for row in convs:
        for p in ("fp32", "fp16"):
            assert row["time_ms"][p] > 0 and row["kernels"][p], (p, row)
            assert not any("ExecutionProvider)" == k["name"][-len("ExecutionProvider)"):] and
                           k["name"].startswith("Conv (") for k in row["kernels"][p])  # real kernels, not the op
    assert "layer_times_host_clock" not in {f["rule"] for f in data["diagnosis"]}
