"""Accuracy deltas: known values by hand, and a real overflow through the FP16 build (ONNX Runtime)."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from trtprof.accuracy import ATOL, RTOL, compare_output, compare_outputs


def make_overflow_model(path: Path) -> Path:
    """y = Transpose((x · 1e5) · 1e5): finite in FP32 (~1e10), inf once stored in FP16 (max 65504).

    The Transpose matters on ONNX Runtime's CPU provider: it has an FP16 kernel there, so the product
    is materialised as FP16 (Mul has none and runs in FP32 behind casts)."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    scale = numpy_helper.from_array(np.array(1e5, np.float32), "scale")
    nodes = [helper.make_node("Mul", ["x", "scale"], ["a"], name="mul1"),
             helper.make_node("Mul", ["a", "scale"], ["b"], name="mul2"),
             helper.make_node("Transpose", ["b"], ["y"], name="transpose", perm=[1, 0])]
    graph = helper.make_graph(nodes, "overflow", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 4])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4, "N"])], [scale])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.save(model, str(path))
    return path


def test_known_errors_by_hand():
    ref = np.array([1.0, 2.0, 3.0, 0.0], np.float32)
    cand = np.array([1.005, 2.0, 3.5, 5e-4], np.float32)
    d = compare_output("y", ref, cand)
    assert d.max_abs_err == pytest.approx(0.5)
    assert d.max_rel_err == pytest.approx(0.5 / 3)  # the element at 0.0 is below ATOL: no relative error
    # 3.5 vs 3 is beyond ATOL + RTOL·3; 1.005 vs 1 and 5e-4 vs 0 are within tolerance
    assert d.mismatches == 1
    assert d.nonfinite == 0 and d.nonfinite_baseline == 0


def test_new_non_finite_values_are_counted_and_flagged():
    ref = {"y": np.array([1.0, np.nan, 3.0]), "z": np.array([[1.0, 2.0]])}
    cand = {"y": np.array([np.inf, np.nan, 3.0]), "z": np.array([[1.0, -np.inf]])}
    acc = compare_outputs(ref, cand)
    assert acc.nonfinite == 2  # the NaN that the baseline has too is not the candidate's fault
    assert acc.flagged and acc.to_json()["nonfinite_flag"] is True
    assert acc.outputs[0].nonfinite_baseline == 1
    assert acc.mismatch_fraction == pytest.approx(2 / 5)
    assert acc.max_abs_err == 0.0  # over elements finite in both


def test_identical_outputs_are_exact():
    x = {"y": np.linspace(-3, 3, 50, dtype=np.float32)}
    acc = compare_outputs(x, {"y": x["y"].copy()})
    assert (acc.max_abs_err, acc.max_rel_err, acc.mismatch_fraction, acc.nonfinite) == (0.0, 0.0, 0.0, 0)
    assert (acc.rtol, acc.atol) == (RTOL, ATOL)


def test_shape_mismatch_is_an_error():
    with pytest.raises(ValueError):
        compare_output("y", np.zeros(3), np.zeros(4))


def test_fp16_overflow_through_the_real_build_is_flagged(tmp_path):
    pytest.importorskip("onnxruntime")
    from trtprof.accuracy import run_outputs
    from trtprof.bench import load_runner
    from trtprof.build import build_engines
    from trtprof.inputs import make_inputs, resolve_shapes
    from trtprof.spec import Precision

    model = make_overflow_model(tmp_path / "overflow.onnx")
    outcomes = build_engines(model, [Precision.FP32, Precision.FP16], [2], engines_dir=tmp_path / "engines",
                             backend="onnxruntime")
    runners = {o.record.precision: load_runner(o.record) for o in outcomes}
    try:
        feeds = make_inputs(runners["fp32"].inputs, resolve_shapes(runners["fp32"].inputs, 2))
        out = {name: run_outputs(r, feeds) for name, r in runners.items()}
    finally:
        for r in runners.values():
            r.close()
    assert np.isfinite(out["fp32"]["y"]).all()
    acc = compare_outputs(out["fp32"], out["fp16"])
    assert acc.flagged and acc.nonfinite > 0
