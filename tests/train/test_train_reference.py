"""The independent training reference (benchmarks/train_reference.py) and its driver
(benchmarks/train_vs_reference.py): the driver's CPU smoke mode end to end, its ratio CI, and the
reference's hand-written report net against the repo's factory."""
from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import numpy as np
import pytest

from ..conftest import load_script

ROOT = Path(__file__).resolve().parents[2]
needs_torch = pytest.mark.skipif(importlib.util.find_spec("torch") is None, reason="torch missing")




def test_ratio_ci_brackets_a_known_ratio():
    drv = load_script("benchmarks/train_vs_reference.py", "train_vs_reference")
    rng = np.random.default_rng(0)
    ref = list(10.0 * (1 + 0.01 * rng.standard_normal(12)))
    ours = list(11.0 * (1 + 0.01 * rng.standard_normal(12)))
    est, low, high = drv.ratio_ci(ours, ref)
    assert low < 1.1 < high and low <= est <= high and high - low < 0.05
    assert np.isnan(drv.ratio_ci([1.0], [1.0])[1])  # one round: no interval


@needs_torch
def test_reference_report_net_is_the_factory_net():
    """Written independently, the same function: with the factory's weights copied in, equal outputs."""
    import torch

    ref = load_script("benchmarks/train_reference.py", "train_reference")
    sys.path.insert(0, str(ROOT / "models"))
    import report_net

    mine, example = report_net.make()
    theirs = ref.ReportNet()
    assert sum(p.numel() for p in theirs.parameters()) == sum(p.numel() for p in mine.parameters()) == 783372
    theirs.load_state_dict({f"layers.{k}": v for k, v in mine.state_dict().items()})
    x = torch.randn(2, 3, 128, 128)
    with torch.no_grad():
        assert torch.allclose(theirs(x), mine(x))


@needs_torch
def test_driver_smoke_mode_on_cpu(tmp_path):
    """CPU plumbing: both sides run as separate processes, every row gets a ratio and a CI, the
    files are written (the ratios themselves mean nothing on a CPU)."""
    drv = load_script("benchmarks/train_vs_reference.py", "train_vs_reference_smoke")
    assert drv.main(["--smoke", "--out-dir", str(tmp_path)]) == 0
    doc = json.loads((tmp_path / "table.json").read_text())
    assert doc["plan"] == "smoke" and [(r["model"], r["arm"]) for r in doc["rows"]] == [("tiny", "fp32"), ("tiny", "amp-bf16")]
    for r in doc["rows"]:
        assert "missing" not in r, r
        assert r["ratio"] == pytest.approx(r["trtprof_ms"] / r["reference_ms"])
        assert r["ci_low"] <= r["round_ratio"] <= r["ci_high"] and r["rounds_reference"] == drv.SMOKE.ref_rounds
    ref = json.loads((tmp_path / "reference-tiny.json").read_text())
    assert ref["cudnn_benchmark"] is True
    ours = json.loads((tmp_path / "trtprof-tiny-b2.json").read_text())
    assert ours["environment"]["backend"]["source"]["factory"] == "benchmarks/train_reference.py:make_tiny"
    assert "| tiny | 2 | fp32 |" in (tmp_path / "table.md").read_text()
    fp32, bf16 = doc["rows"]
    assert bf16["trtprof_speedup"] == pytest.approx(fp32["trtprof_ms"] / bf16["trtprof_ms"])
    assert bf16["speedup_ratio"] == pytest.approx(bf16["trtprof_speedup"] / bf16["reference_speedup"])
