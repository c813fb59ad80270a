"""Per-node GPU kernel times on onnxruntime-cuda with cupti-python, on a real GPU (marked ``gpu``; skipped
without onnxruntime-gpu, a GPU, or cupti-python). Structure, no timing threshold: every Conv of the
report's network gets GPU kernels of its own in both precisions, nearly all the GPU's work tied to a node, the
profiled session took the timed session's provider options, and the tensor-core finding names fp16's CUDA-core
kernels. The command runs in a process of its own, as a user runs it: CUPTI is one per process, and an earlier
test's profiler (torch's Kineto) must not decide what this capture sees."""
from __future__ import annotations

import importlib.util
import json
import subprocess
import sys

import pytest

from trtprof import backends

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
    done = subprocess.run([sys.executable, "-m", "trtprof", "profile", str(report_model(tmp_path)), "--backend",
                           "onnxruntime-cuda", "--precisions", "fp32,fp16", "--batch-size", "10", "--iterations", "10",
                           "--engines", str(tmp_path / "e"), "--out", str(out)], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-2000:]
    data = json.loads(out.read_text())
    table = data["table"]
    shares = {p: table["profiles"][p]["config"]["attributed_share"] for p in ("fp32", "fp16")}
    for p in ("fp32", "fp16"):
        prof = table["profiles"][p]
        assert prof["config"]["provider_options"]["cudnn_conv_algo_search"] == "EXHAUSTIVE"
        assert prof["iteration_total_ms"] > 0
    rules = {f["rule"]: f for f in data["diagnosis"]}
    convs = [r for r in table["rows"] if r["op_type"] == "Conv"]
    assert len(convs) == 4
    # fp16's convolutions run cuDNN's CUDA-core kernel (implicit_convolve_sgemm<__half…>, H200 2026-12-03, three
    # runs): the tensor-core finding says so from the kernels, on either clock the table compares
    tc = rules["tensor_core_ineligible"]
    assert "use no tensor cores" in tc["message"] and len(tc["evidence"]["kernels"]["cuda_core_layers"]) == 4, tc
    # every GPU kernel tied to a node (the fit on kernel launches: 100 % in six captures replayed from this GPU, where
    # counting the session's copies had tied 84-92 % of fp32's work): GPU kernel times per conv, both precisions
    assert min(shares.values()) >= 0.95, (shares, done.stdout[-3000:])
    for row in convs:
        for p in ("fp32", "fp16"):
            assert row["time_ms"][p] > 0 and row["kernels"][p], (p, row)
            assert not any("ExecutionProvider)" == k["name"][-len("ExecutionProvider)"):] and
                           k["name"].startswith("Conv (") for k in row["kernels"][p])  # real kernels, not the op
    assert "layer_times_host_clock" not in rules
