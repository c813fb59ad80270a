"""Accuracy deltas: known values by hand, and a real overflow through the FP16 build (ONNX Runtime)."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from trtprof.compare.accuracy import ATOL, RTOL, compare_output, compare_outputs


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
    from trtprof.compare.accuracy import run_outputs
    from trtprof.measure.bench import load_runner
    from trtprof.builder.pipeline import BuildSettings, build_engines
    from trtprof.model.inputs import make_inputs, resolve_shapes
    from trtprof.spec import Precision

    model = make_overflow_model(tmp_path / "overflow.onnx")
    outcomes = build_engines(model, [Precision.FP32, Precision.FP16], [2],
                             settings=BuildSettings(engines_dir=tmp_path / "engines", backend="onnxruntime"))
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


# -- metrics that survive near-zero references (issue 23) -------------------------------------------


def test_scale_relative_metrics_survive_near_zero_references():
    """A logit of 2e-3 makes the elementwise relative error explode; the metrics relative to the
    output's scale, SNR and cosine stay small/near 1 for the same tiny absolute error."""
    ref = np.array([10.0, -8.0, 2e-3, 5.0])
    cand = ref + np.array([0.0, 0.0, 0.01, 0.0])
    d = compare_output("logits", ref, cand)
    assert d.max_rel_err == pytest.approx(5.0)  # 0.01 / 2e-3: what the issue saw as "max rel 14.4"
    assert d.max_err_scaled == pytest.approx(0.01 / 10.0)
    rms = np.sqrt(np.mean(ref ** 2))
    assert d.mean_err_scaled == pytest.approx((0.01 / 4) / rms)
    assert d.snr_db == pytest.approx(10 * np.log10(np.sum(ref ** 2) / 0.01 ** 2))
    assert d.cosine == pytest.approx(float(ref @ cand / np.linalg.norm(ref) / np.linalg.norm(cand)))
    assert d.cosine > 0.999999


def test_snr_and_cosine_by_hand():
    d = compare_output("y", np.array([3.0, 4.0]), np.array([3.0, 4.1]))
    assert d.snr_db == pytest.approx(10 * np.log10(25 / 0.01))
    d = compare_output("y", np.array([1.0, 0.0]), np.array([1.0, 1.0]))
    assert d.cosine == pytest.approx(1 / np.sqrt(2))
    exact = compare_output("y", np.array([1.0, 2.0]), np.array([1.0, 2.0]))
    assert exact.snr_db == np.inf and exact.cosine == 1.0


def test_top1_and_top5_agreement_of_a_classifier_output():
    ref = np.tile(np.arange(10, dtype=np.float64), (4, 1))  # every sample: class 9 first, 8 second, …
    cand = ref.copy()
    cand[1, 9] = 7.5  # sample 1: top-1 becomes 8, ref's class 9 still in the top 5
    cand[2, 9] = -1.0  # sample 2: class 9 drops out of the top 5
    d = compare_output("probs", ref, cand)
    assert (d.top1, d.top5, d.samples) == (0.5, 0.75, 4)
    assert compare_output("flat", ref.ravel(), cand.ravel()).top1 is None  # 1-D: no classes
    assert compare_output("nchw", ref[:, :, None, None], cand[:, :, None, None]).top1 == 0.5
    few = compare_output("few", ref[:, :5], cand[:, :5])
    assert few.top1 is not None and few.top5 is None  # top-5 of 5 classes would always agree


def test_ties_count_as_agreement():
    """A flat output (a softmax of equal logits: 0.001 everywhere) has no ranking to disagree with."""
    flat = np.full((2, 1000), 0.001)
    d = compare_output("probs", flat, flat.copy())
    assert (d.top1, d.top5) == (1.0, 1.0)


def test_an_inf_score_never_agrees():
    ref = np.array([[0.0, 1.0, 2.0], [0.0, 1.0, 2.0]])
    assert compare_output("p", ref, np.array([[np.nan, 1.0, 2.0], [0.0, 1.0, 2.0]])).top1 == 0.5
    assert compare_output("p", ref, np.array([[-np.inf, 1.0, 2.0], [0.0, 1.0, 2.0]])).top1 == 0.5


# -- the accuracy verdict ---------------------------------------------------------------------------


def _delta(**kw):
    from trtprof.compare.accuracy import AccuracyDelta

    base = dict(max_abs_err=0.0, max_rel_err=0.0, mismatch_fraction=0.0, nonfinite=0, elements=10)
    return AccuracyDelta(**{**base, **kw})


def test_default_budget_each_threshold_just_inside_and_outside():
    from trtprof.compare.accuracy import DEGRADED, OK, AccuracyBudget, judge

    budget = AccuracyBudget.parse(None)
    assert budget.text == "cosine>=0.999,top1>=0.99"
    assert judge(_delta(cosine=0.99901, top1=1.0), budget)["verdict"] == OK
    assert judge(_delta(cosine=0.999, top1=0.99), budget)["verdict"] == OK  # the bounds themselves pass
    out = judge(_delta(cosine=0.99899, top1=1.0), budget)
    assert out["verdict"] == DEGRADED and out["reason"].startswith("cosine>=0.999 fails (0.99899)")
    assert judge(_delta(cosine=1.0, top1=0.9899), budget)["verdict"] == DEGRADED
    # no [N, classes] output: top1 does not apply, and says so
    out = judge(_delta(cosine=1.0, top1=None), budget)
    assert out["verdict"] == OK and out["not_applicable"] == ["top1>=0.99"]


def test_other_budget_metrics_just_inside_and_outside():
    from trtprof.compare.accuracy import DEGRADED, OK, AccuracyBudget, judge

    budget = AccuracyBudget.parse("snr_db>=40,max_err_scaled<=0.01,top5>=0.999,mean_err_scaled<=0.001,"
                                  "mismatch_fraction<=0.05")
    good = dict(snr_db=40.0, max_err_scaled=0.01, top5=0.999, mean_err_scaled=0.001, mismatch_fraction=0.05)
    assert judge(_delta(**good), budget)["verdict"] == OK
    for metric, worse in (("snr_db", 39.99), ("max_err_scaled", 0.0101), ("top5", 0.998),
                          ("mean_err_scaled", 0.00101), ("mismatch_fraction", 0.0501)):
        out = judge(_delta(**{**good, metric: worse}), budget)
        assert out["verdict"] == DEGRADED and out["reason"].startswith(metric), metric


def test_new_inf_is_broken_whatever_the_metrics():
    from trtprof.compare.accuracy import BROKEN, AccuracyBudget, judge

    out = judge(_delta(cosine=1.0, nonfinite=1), AccuracyBudget.parse(None))
    assert out["verdict"] == BROKEN and "1 non-finite" in out["reason"]


def test_predicted_overflow_beside_an_ok_observation():
    from trtprof.compare.accuracy import AccuracyBudget, judge

    predicted = {"findings": [{"kind": "overflow", "covered": False}], "skipped": None}
    out = judge(_delta(predicted=predicted, caveat="observed error is not FP16's"), AccuracyBudget.parse(None))
    assert (out["verdict"], out["predicted"], out["label"]) == ("OK", "BROKEN", "OK (predicted BROKEN)")
    covered = {"findings": [{"kind": "overflow", "covered": True}], "skipped": None}
    assert judge(_delta(predicted=covered), AccuracyBudget.parse(None))["label"] == "OK"


@pytest.mark.parametrize("text, cause", [("cosine<=0.9", "bounded with >="), ("top1>=x", "not a number"),
                                         ("accuracy>=0.9", "expected METRIC"), ("cosine>=inf", "finite")])
def test_bad_budgets_are_refused(text, cause):
    from trtprof.compare.accuracy import AccuracyBudget
    from trtprof.errors import BadInput

    with pytest.raises(BadInput, match=cause):
        AccuracyBudget.parse(text)


@pytest.mark.parametrize("text", ["top1>=2", "top1>=1.0001", "top5>=1.5", "cosine>=1.01", "mismatch_fraction<=-0.1",
                                  "max_err_scaled<=-1e-9", "mean_err_scaled<=-1"])
def test_a_budget_that_can_never_pass_is_refused(text):
    """Issue 36 item 9: ``--accuracy top1>=2`` failed every candidate instead of being refused."""
    from trtprof.compare.accuracy import AccuracyBudget
    from trtprof.errors import BadInput

    with pytest.raises(BadInput, match="can never pass"):
        AccuracyBudget.parse(text)


@pytest.mark.parametrize("text", ["top1>=1", "top5>=1.0", "cosine>=1", "cosine>=-1", "mismatch_fraction<=0",
                                  "max_err_scaled<=0", "snr_db>=1000"])
def test_a_budget_at_the_edge_of_what_a_metric_can_be_is_kept(text):
    from trtprof.compare.accuracy import AccuracyBudget

    assert AccuracyBudget.parse(text).text


def test_compare_refuses_an_impossible_budget_before_any_build(conv_model, tmp_path, capsys):
    from trtprof.cli import main

    code = main(["compare", str(conv_model), "--backend", "onnxruntime", "--in-process", "--engines",
                 str(tmp_path / "e"), "--accuracy", "top1>=2", "--out", str(tmp_path / "c.json")])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and "top1>=2" in err[0] and "never pass" in err[0]
    assert not (tmp_path / "e").exists() and not (tmp_path / "c.json").exists()


def test_summary_of_a_file_written_before_the_new_metrics_claims_none_of_them():
    from trtprof.compare.accuracy import summary_line

    old = {"max_abs_err": 0.5, "max_rel_err": 0.1, "mismatch_fraction": 0.0, "nonfinite": 0, "rtol": 0.01, "atol": 0.001}
    text = summary_line(old)
    assert text.startswith("max abs 0.5, max rel 0.1") and "cosine" not in text and "random" not in text


def test_an_output_that_does_not_agree_at_all_is_broken_not_degraded():
    """Cosine just below BROKEN_COSINE_FLOOR is BROKEN, just above it DEGRADED (the default budget
    asks 0.999); a constant output where the reference varies is BROKEN; a constant reference is not."""
    import numpy as np

    from trtprof.compare.accuracy import (BROKEN, BROKEN_COSINE_FLOOR, DEGRADED, DEFAULT_BUDGET, AccuracyBudget,
                                          compare_outputs, judge)

    budget = AccuracyBudget.parse(DEFAULT_BUDGET)
    ref = np.array([1.0, 0.0])

    def at_cosine(cos: float) -> dict:
        cand = np.array([cos, np.sqrt(1 - cos * cos)])  # unit vectors: the cosine is exactly ``cos``
        return judge(compare_outputs({"y": ref}, {"y": cand}), budget)

    inside, outside = at_cosine(BROKEN_COSINE_FLOOR + 1e-3), at_cosine(BROKEN_COSINE_FLOOR - 1e-3)
    assert inside["verdict"] == DEGRADED
    assert outside["verdict"] == BROKEN and "does not agree with the baseline's at all" in outside["reason"]
    assert at_cosine(0.0)["verdict"] == BROKEN

    varied = np.linspace(1, 2, 20)  # a constant 1.5 has cosine 0.99 with it: only the constant rule fires
    delta = compare_outputs({"y": varied}, {"y": np.full(20, 1.5)})
    assert delta.cosine > BROKEN_COSINE_FLOOR and delta.constant_outputs == ("y",)
    dead = judge(delta, budget)
    assert dead["verdict"] == BROKEN and "one constant value" in dead["reason"] and "cosine" not in dead["reason"]
    flat = np.full(20, 3.0)
    assert judge(compare_outputs({"y": flat}, {"y": flat}), budget)["verdict"] == "OK"
