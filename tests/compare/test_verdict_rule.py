"""One rule for what a verdict may say (issue 44, item 3), through the real CLI on ONNX Runtime CPU
where it is cheap: an engine that is not what it claims is NOT VALID with its census as the reason."""
from __future__ import annotations

import json

import pytest

pytest.importorskip("onnxruntime")

from trtprof.cli import main  # noqa: E402

QUICK = ["--backend", "onnxruntime", "--in-process", "--time-budget-s", "1"]


def codes(comparison: dict) -> list[str]:
    return [r["code"] for r in comparison["validity"]["reasons"]]


def test_a_mixed_fp16_with_its_heavy_ops_fp32_is_not_valid_by_its_census(mixed_fp16_model, tmp_path, capsys):
    """The issue's engine: ORT CPU runs the Concat in FP16 and every Conv, pool and Gemm FP32 behind casts
    (``effective mixed``): its comparison is NOT VALID as a measurement of fp16, the census the reason. The int8
    engine of the same model runs every heavy op on integer kernels: no such reason (the other side of it)."""
    out = tmp_path / "c.json"
    assert main(["compare", str(mixed_fp16_model), "--precisions", "fp32,fp16,int8", "--engines",
                 str(tmp_path / "e"), "--out", str(out), *QUICK]) == 0
    printed = capsys.readouterr().out
    fp16, int8 = json.loads(out.read_text())["comparisons"]
    assert fp16["latency"]["candidate"]["effective_precision"] == "mixed"
    assert "heavy_ops_fp32" in codes(fp16) and fp16["validity"]["valid"] is False
    [reason] = [r for r in fp16["validity"]["reasons"] if r["code"] == "heavy_ops_fp32"]
    assert "fp16 (effective mixed) ran 4 of its 4 heavy nodes in FP32 by its census (node_precision: " in reason["text"]
    assert "Conv×1" in reason["text"] and "not a measurement of FP16" in reason["text"]
    assert "heavy_ops_fp32" not in codes(int8) and "fp16_is_fp32" not in codes(int8)
    assert "to fix [heavy_ops_fp32]" in printed and "heavy nodes in FP32 by its census" in printed


def test_an_fp16_behind_casts_keeps_its_own_reason_once(conv_model, tmp_path):
    out = tmp_path / "c.json"
    assert main(["compare", str(conv_model), "--engines", str(tmp_path / "e"), "--out", str(out), *QUICK]) == 0
    [c] = json.loads(out.read_text())["comparisons"]
    assert "fp16_is_fp32" in codes(c) and "heavy_ops_fp32" not in codes(c)
