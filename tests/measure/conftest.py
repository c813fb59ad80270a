"""Fixtures of the measure tests."""
from __future__ import annotations

import pytest


@pytest.fixture
def fp32_record(conv_model, tmp_path):
    """The demo conv net built as an fp32 ONNX Runtime (CPU) engine at batch 1: a real engine for worker tests."""
    pytest.importorskip("onnxruntime")
    from trtprof.builder.pipeline import BuildSettings, build_engines
    from trtprof.spec import Precision

    (outcome,) = build_engines(conv_model, [Precision.FP32], [1],
                               settings=BuildSettings(engines_dir=tmp_path / "e", backend="onnxruntime"))
    return outcome.record
