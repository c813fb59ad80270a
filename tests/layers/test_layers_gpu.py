"""The torch backend's per-layer profile (torch.profiler/CUPTI) and autotune switch on a real GPU.

Structure only (no timing thresholds): every Conv node of the report's network gets a row with CUDA
kernels behind it, the FP16 run has its casts as rows, and the autotune setting is recorded."""
from __future__ import annotations

import json

import pytest

from trtprof.cli import main

from ..conftest import report_model, torch_gpu_marks

pytestmark = torch_gpu_marks()


@pytest.mark.parametrize("autotune", [True, False])
def test_torch_profile_attributes_kernels_to_every_conv(tmp_path, capsys, autotune):
    out = tmp_path / "layers.json"
    args = ["profile", str(report_model(tmp_path)), "--backend", "torch", "--precisions", "fp32,fp16",
            "--batch-size", "2", "--iterations", "5", "--engines", str(tmp_path / "e"), "--out", str(out)]
    assert main(args + ([] if autotune else ["--no-autotune"])) == 0
    data = json.loads(out.read_text())
    table = data["table"]
    assert data["autotune"] is autotune and table["profiles"]["fp16"]["config"]["autotune"] is autotune
    rows = {r["name"]: r for r in table["rows"]}
    for i in range(4):
        conv = rows[f"conv{i}"]
        assert conv["op_type"] == "Conv" and conv["kind"] == "compute"
        for p in ("fp32", "fp16"):
            assert conv["time_ms"][p] > 0 and conv["kernels"][p], (p, conv)
        # NVIDIA's multiple-of-8 rule from the graph: 3 input and 3 output channels
        assert conv["graph"]["tensor_core"]["eligible"] is False
    assert rows["(input cast)"]["kind"] == "cast" and rows["(input cast)"]["time_ms"]["fp32"] is None
    assert rows["(output copy)"]["kind"] == "cast"  # fp16 output copied into float32 buffers
    rules = {f["rule"] for f in data["diagnosis"]}
    assert "tensor_core_ineligible" in rules


def test_compare_records_autotune_in_config(tmp_path):
    out = tmp_path / "c.json"
    assert main(["compare", str(report_model(tmp_path)), "--backend", "torch", "--precisions", "fp32,fp16",
                 "--batch-sizes", "1", "--time-budget-s", "0.2", "--round-iterations", "5", "--no-autotune",
                 "--engines", str(tmp_path / "e"), "--out", str(out)]) == 0
    data = json.loads(out.read_text())
    assert data["settings"]["autotune"] is False
    assert all(r["config"]["autotune"] is False for r in data["results"])
    assert any(f["rule"] == "heuristic_kernels" for c in data["comparisons"] for f in c["diagnosis"])
