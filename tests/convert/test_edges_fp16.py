"""FP16's limits as trtprof defines them, tested on the representable values either side.

The range analysis uses the rounding boundaries of float32 → float16 (round to nearest, ties to even),
each checked against numpy's own conversion:
* overflow: FP16_MAX = 65504 is the largest finite FP16, but 65519.996 (the last float32 below 65520)
  still rounds to it; from FP16_INF_FROM = 65520 on (a tie, to the even 65536 = inf) a value is inf;
* underflow: FP16_MIN_SUBNORMAL = 2⁻²⁴ is the smallest subnormal, but the first float32 above 2⁻²⁵
  rounds up to it; up to FP16_ZERO_UPTO = 2⁻²⁵ (a tie, to the even 0) a value is 0, "lost"; values
  between 2⁻²⁴ and FP16_MIN_NORMAL = 2⁻¹⁴ are subnormals (kept, fewer bits), not an underflow risk;
* an underflow finding needs UNDERFLOW_SHARE (10 %) of the non-zero values *and* UNDERFLOW_MIN_VALUES (16).
"""
from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from trtprof.convert import fp16range as fr
from trtprof.convert.fp16_weights import FP16_MAX, FP16_MIN_NORMAL, FP16_MIN_SUBNORMAL

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

F32 = np.float32
ABOVE_MAX = float(np.nextafter(F32(FP16_MAX), F32(np.inf)))  # 65504.004: the next float32
AT_INF = fr.FP16_INF_FROM  # 65520: rounds to inf
BELOW_INF = float(np.nextafter(F32(AT_INF), F32(0)))  # 65519.996: rounds to 65504
AT_ZERO = fr.FP16_ZERO_UPTO  # 2⁻²⁵: rounds to 0
ABOVE_ZERO = float(np.nextafter(F32(AT_ZERO), F32(1)))  # rounds up to 2⁻²⁴
BELOW_SUBNORMAL = float(np.nextafter(F32(FP16_MIN_SUBNORMAL), F32(0)))
BELOW_NORMAL = float(np.nextafter(F32(FP16_MIN_NORMAL), F32(0)))


def test_the_limits_are_numpys_float16_limits():
    info = np.finfo(np.float16)
    assert FP16_MAX == float(info.max) == 65504.0
    assert FP16_MIN_NORMAL == float(info.smallest_normal) == 2.0 ** -14
    assert FP16_MIN_SUBNORMAL == float(info.smallest_subnormal) == 2.0 ** -24
    assert np.isfinite(np.float16(FP16_MAX)) and np.float16(FP16_MIN_SUBNORMAL) > 0


def test_the_rounding_boundaries_are_where_numpy_rounds_to_inf_and_to_zero():
    with np.errstate(over="ignore"):
        assert np.isinf(np.float16(F32(AT_INF))) and fr.FP16_INF_FROM == 65520.0
        assert np.float16(F32(BELOW_INF)) == FP16_MAX  # 65519.996 → 65504, finite
        assert np.float16(F32(AT_ZERO)) == 0.0 and fr.FP16_ZERO_UPTO == 2.0 ** -25
        assert np.float16(F32(ABOVE_ZERO)) == FP16_MIN_SUBNORMAL  # just above 2⁻²⁵ → 2⁻²⁴, kept
        assert np.float16(F32(BELOW_SUBNORMAL)) == FP16_MIN_SUBNORMAL


def test_the_analysis_agrees_with_numpy_just_inside_and_outside_each_boundary():
    """For each value either side of a boundary: a finding exactly when numpy's float16 gives inf or 0."""
    for v in (FP16_MAX, ABOVE_MAX, BELOW_INF, AT_INF, float(np.nextafter(F32(AT_INF), F32(np.inf)))):
        with np.errstate(over="ignore"):
            is_inf = bool(np.isinf(np.float16(F32(v))))
        assert bool(fr.findings_of([_range([v])], {})) == is_inf, v
    for v in (float(np.nextafter(F32(AT_ZERO), F32(0))), AT_ZERO, ABOVE_ZERO, BELOW_SUBNORMAL):
        r = _range([v] * 16)  # every value that tiny: the share is 100 % or 0 %
        assert (r.to_zero_share == 1.0) == (np.float16(F32(v)) == 0.0), v
        assert bool(fr.findings_of([r], {})) == (np.float16(F32(v)) == 0.0), v


def _range(values, name="t") -> fr.TensorRange:
    return fr.tensor_range(name, f"node_{name}", "Mul", np.asarray(values, dtype=np.float32))


def test_tensor_range_counts_below_normal_and_up_to_the_zero_boundary():
    r = _range([FP16_MIN_NORMAL, BELOW_NORMAL, FP16_MIN_SUBNORMAL, ABOVE_ZERO, -AT_ZERO, 0.0, -1.0, np.inf, np.nan])
    assert r.nonzero == 6 and r.nonfinite == 2 and r.elements == 9 and r.max_abs == 1.0
    assert r.below_normal_share == pytest.approx(4 / 6)  # BELOW_NORMAL, 2⁻²⁴, ABOVE_ZERO, 2⁻²⁵
    assert r.to_zero_share == pytest.approx(1 / 6)  # only 2⁻²⁵ itself (its sign does not matter)
    zeros = _range([0.0, np.nan])
    assert (zeros.nonzero, zeros.max_abs, zeros.below_normal_share, zeros.to_zero_share) == (0, 0.0, 0.0, 0.0)
    nonfinite = _range([np.nan, np.inf])
    assert (nonfinite.max_abs, nonfinite.nonfinite, nonfinite.below_normal_share) == (0.0, 2, 0.0)


def test_overflow_from_65520_on():
    below, at = _range([1.0, -BELOW_INF], "below"), _range([1.0, -AT_INF], "at")
    findings = fr.findings_of([below, at, _range([ABOVE_MAX], "above_max")], {})
    assert [(f.kind, f.tensor) for f in findings] == [(fr.OVERFLOW, "at")]
    assert findings[0].value == AT_INF and "max |x| 6.552e+04 ≥ 65520 → inf in FP16" in findings[0].message
    # a tenth more than the limit is not needed: 65520 is already a risk, 1.9 × 65504 certainly
    assert fr.findings_of([_range([1.9 * FP16_MAX])], {})[0].kind == fr.OVERFLOW


def _underflowing(lost: int, total: int, tiny: float = AT_ZERO) -> fr.TensorRange:
    """``total`` non-zero values, ``lost`` of them ``tiny``, the rest 1.0."""
    return _range([tiny] * lost + [1.0] * (total - lost), "u")


def test_underflow_share_from_ten_percent_on():
    assert fr.UNDERFLOW_SHARE == 0.10
    [finding] = fr.findings_of([_underflowing(20, 200)], {})  # exactly 10 %, 20 values
    assert finding.kind == fr.UNDERFLOW and finding.value == pytest.approx(0.10)
    assert "10.0% of its non-zero values at or below 2^-25 (2.98e-08) → 0 in FP16" in finding.message
    assert fr.findings_of([_underflowing(19, 200)], {}) == ()  # 9.5 %
    assert fr.findings_of([_underflowing(21, 200)], {})[0].value == pytest.approx(0.105)


def test_underflow_needs_sixteen_values():
    assert fr.UNDERFLOW_MIN_VALUES == 16
    assert len(fr.findings_of([_underflowing(16, 160)], {})) == 1  # 10 %, 16 values
    assert fr.findings_of([_underflowing(15, 150)], {}) == ()  # 10 %, 15 values


def test_subnormal_values_are_not_an_underflow_risk():
    """Values below 2⁻¹⁴ but above 2⁻²⁵ survive in FP16 as subnormals: no finding, even when
    every value is one (the 2⁻¹⁴ mistake would report them all)."""
    for tiny in (1e-6, FP16_MIN_SUBNORMAL, BELOW_SUBNORMAL, ABOVE_ZERO, BELOW_NORMAL):
        r = _underflowing(200, 200, tiny)
        assert r.below_normal_share == 1.0 and r.to_zero_share == 0.0
        assert fr.findings_of([r], {}) == ()


def test_a_finding_keeps_the_producer_and_its_readers_and_knows_when_a_keep_list_covers_them():
    from trtprof.convert.keeplist import KeepFp32

    r = _range([AT_INF], "t")
    [f] = fr.findings_of([r], {"t": ["reader1", "reader2", "node_t"]})
    assert f.keep_nodes == ("node_t", "reader1", "reader2") and not f.covered
    assert f.option == "--layer-precisions node_t:fp32,reader1:fp32,reader2:fp32"
    all_kept = KeepFp32(nodes=("node_t", "reader1", "reader2"))
    assert fr.findings_of([r], {"t": ["reader1", "reader2"]}, all_kept)[0].covered
    one_missing = KeepFp32(nodes=("node_t", "reader1"))
    assert not fr.findings_of([r], {"t": ["reader1", "reader2"]}, one_missing)[0].covered
    by_op = KeepFp32(ops=("Div",))
    assert fr.findings_of([r], {"t": ["reader1"]}, by_op, ops={"node_t": "Div", "reader1": "Div"})[0].covered
    assert not fr.findings_of([r], {"t": ["reader1"]}, by_op, ops={"node_t": "Div", "reader1": "Mul"})[0].covered


def _scale_model(k: float):
    """y = x · k with k a Constant node: the only analysed tensor is y (Constant outputs are weights)."""
    const = helper.make_node("Constant", [], ["k"], name="const_k",
                             value=numpy_helper.from_array(np.array(k, dtype=np.float32), "k"))
    mul = helper.make_node("Mul", ["x", "k"], ["y"], name="scale")
    graph = helper.make_graph([const, mul], "scale", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 1])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 1])])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def test_analyze_flags_a_tensor_at_65520_and_not_one_just_below_it():
    """The whole chain (ONNX Runtime in FP32, every tensor exposed) at the edge: x = 1, y = x · k."""
    x = {"x": np.ones((1, 1), dtype=np.float32)}
    assert fr.analyze(_scale_model(BELOW_INF), x).of_kind(fr.OVERFLOW) == []
    [finding] = fr.analyze(_scale_model(AT_INF), x).of_kind(fr.OVERFLOW)
    assert (finding.tensor, finding.node, finding.value) == ("y", "scale", AT_INF)


def test_runs_hold_up_to_max_run_elements_values():
    assert fr.MAX_RUN_ELEMENTS == 32_000_000  # ~128 MB of float32 per run
    half = fr.MAX_RUN_ELEMENTS // 2
    assert fr.plan_runs(["a", "b"], {"a": half, "b": fr.MAX_RUN_ELEMENTS - half}, 1) == [["a", "b"]]
    assert fr.plan_runs(["a", "b"], {"a": half, "b": fr.MAX_RUN_ELEMENTS - half + 1}, 1) == [["a"], ["b"]]
    assert fr.plan_runs(["big"], {"big": 3 * fr.MAX_RUN_ELEMENTS}, 1) == [["big"]]  # a bigger tensor runs alone
    # after a full run the count starts again from zero: the next run holds a full run's values too
    sizes = {"a": fr.MAX_RUN_ELEMENTS, "b": half, "c": fr.MAX_RUN_ELEMENTS - half}
    assert fr.plan_runs(["a", "b", "c"], sizes, 1) == [["a"], ["b", "c"]]
    assert fr.plan_runs(["a", "u"], {"a": 1}, fr.MAX_RUN_ELEMENTS - 1) == [["a", "u"]]  # unknown size as given


def test_up_to_max_runs_runs_every_tensor_and_beyond_it_samples():
    one_run_each = {f"t{i}": fr.MAX_RUN_ELEMENTS for i in range(fr.MAX_RUNS + 1)}
    names = list(one_run_each)
    assert len(fr.plan_runs(names[:fr.MAX_RUNS], one_run_each, 1)) == fr.MAX_RUNS == 8
    sampled = fr.plan_runs(names, one_run_each, 1)
    assert len(sampled) == fr.MAX_RUNS and sampled[0] == ["t0"] and sampled[-1] == [names[-1]]  # as many as fit
    # down to one tensor when only one run is allowed
    assert fr.plan_runs(["a", "b", "c"], {n: fr.MAX_RUN_ELEMENTS for n in "abc"}, 1, max_runs=1) == [["a"]]
    assert fr.plan_runs(["a", "b"], {n: fr.MAX_RUN_ELEMENTS for n in "ab"}, 1, max_runs=1) == [["a"]]


def test_first_samples_cuts_a_dynamic_batch_above_eight():
    from trtprof.spec import TensorSpec

    dynamic = [TensorSpec("x", "float32", ("N", 2))]
    nine, eight = np.zeros((9, 2), np.float32), np.zeros((8, 2), np.float32)
    assert fr.MAX_BATCH == 8
    assert fr.first_samples({"x": nine}, dynamic)["x"].shape == (8, 2)
    assert fr.first_samples({"x": eight}, dynamic)["x"].shape == (8, 2)
    assert fr.first_samples({"x": nine}, [])["x"].shape == (9, 2)  # no inputs known: fed whole


def test_five_findings_per_kind_are_listed_and_the_sixth_is_counted():
    def analysis(n):
        found = tuple(fr.RangeFinding(fr.OVERFLOW, f"t{i}", f"n{i}", "Mul", 1e6, (f"n{i}",)) for i in range(n))
        return fr.RangeAnalysis(findings=found, float_tensors=n, analysed=n, runs=1, input_shapes={"x": (1,)})

    assert fr.FINDINGS_SHOWN == 5
    five, six = analysis(5).lines(), analysis(6).lines()
    assert sum(line.startswith("overflow risk") for line in five) == 5 and not any("more overflow" in s for s in five)
    assert sum(line.startswith("overflow risk") for line in six) == 5
    assert "… and 1 more overflow risk (JSON: fp16_range)" in six


def test_the_json_keeps_the_ten_largest_tensors():
    tensors = tuple(_range([float(i + 1)], f"t{i}") for i in range(11))
    kept = fr.RangeAnalysis(tensors=tensors, float_tensors=11, analysed=11).to_json()["largest_tensors"]
    assert fr.LARGEST_KEPT == 10 and len(kept) == 10
    assert [t["name"] for t in kept][:2] == ["t10", "t9"] and "t0" not in {t["name"] for t in kept}
    thresholds = fr.RangeAnalysis().to_json()["thresholds"]
    assert thresholds == {"overflow_from": 65520.0, "min_normal": 2.0 ** -14, "zero_upto": 2.0 ** -25,
                          "underflow_share": 0.10, "underflow_min_values": 16}


def test_element_counts_come_from_the_fed_shapes_and_unknown_ones_are_left_out():
    graph = helper.make_graph([helper.make_node("Neg", ["x"], ["t"], name="neg"),
                               helper.make_node("Neg", ["t"], ["y"], name="neg2")], "two",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 3])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 3])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    assert fr._estimated_elements(model, {"x": (4, 3)}) == {"t": 12}  # intermediate tensors (value_info)
    assert fr._estimated_elements(model, {}) == {}  # N unknown: t's size is not guessed


def test_a_skipped_analysis_spent_no_time_and_found_nothing():
    skipped = fr.RangeAnalysis(skipped="no onnxruntime").to_json()
    assert skipped["seconds"] == 0.0 and skipped["findings"] == [] and skipped["skipped"] == "no onnxruntime"
    assert (skipped["float_tensors"], skipped["analysed_tensors"], skipped["runs"]) == (0, 0, 0)
    assert not skipped["sampled"]
    assert skipped["summary"] == "FP16 range analysis skipped: no onnxruntime"


def test_sampled_only_when_fewer_tensors_were_analysed_than_exist():
    assert fr.RangeAnalysis(float_tensors=4, analysed=3).sampled
    assert not fr.RangeAnalysis(float_tensors=4, analysed=4).sampled


# --- the converter's limits (convert/fp16.py passes them; fp16_weights counts what they did) ------

def _weights(values) -> "onnx.ModelProto":
    w = numpy_helper.from_array(np.asarray(values, np.float32), "w")
    graph = helper.make_graph([helper.make_node("Mul", ["x", "w"], ["y"], name="scale")], "weights",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", len(values)])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", len(values)])], [w])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def _converted_weights(values):
    from trtprof.convert.fp16 import convert_fp16

    conversion = convert_fp16(_weights(values))
    w = next(i for i in conversion.model.graph.initializer if i.name == "w")
    return numpy_helper.to_array(w).astype(np.float64), conversion.weights


def test_65504_converts_exactly_and_the_next_float32_is_clamped_and_counted():
    new, report = _converted_weights([FP16_MAX, -ABOVE_MAX, 3e4])
    assert list(new) == [65504.0, -65504.0, 30000.0]
    assert report.count("clamped") == 1 and report.count("raised") == 0 and report.max_abs == pytest.approx(ABOVE_MAX)


def test_2_to_the_minus_24_converts_exactly_and_a_smaller_weight_is_raised_to_it():
    new, report = _converted_weights([FP16_MIN_SUBNORMAL, BELOW_SUBNORMAL, -BELOW_SUBNORMAL, 0.0])
    assert list(new) == [FP16_MIN_SUBNORMAL, FP16_MIN_SUBNORMAL, -FP16_MIN_SUBNORMAL, 0.0]
    assert report.count("raised") == 2 and report.count("clamped") == 0


def test_subnormal_weights_are_counted_from_2_to_the_minus_24_up_to_below_2_to_the_minus_14():
    _, report = _converted_weights([FP16_MIN_SUBNORMAL, BELOW_NORMAL, FP16_MIN_NORMAL, BELOW_SUBNORMAL])
    assert report.subnormal_values == 2 and report.subnormal_tensors == 1
    assert any("stored as subnormals" in line for line in report.notes())


# --- the hooks compare uses: which candidate, which caveat -----------------------------------------

def _record(precision: str, inputs) -> object:
    """A fake engine record: just what fp16range reads (precision, inputs, spec, backend)."""
    from types import SimpleNamespace

    return SimpleNamespace(precision=precision, inputs=inputs, spec=None, backend="onnxruntime")


def test_for_compare_analyses_only_when_a_candidate_is_fp16_and_with_that_candidates_inputs(tmp_path):
    from trtprof.spec import TensorSpec

    path = tmp_path / "scale.onnx"
    onnx.save(_scale_model(2.0), str(path))
    feeds = {"x": np.ones((9, 1), np.float32)}
    static, dynamic = [TensorSpec("x", "float32", (9, 1))], [TensorSpec("x", "float32", ("N", 1))]
    assert fr.for_compare(path, {"a": _record("fp32", static), "b": _record("fp32", static)}, feeds) is None
    analysis = fr.for_compare(path, {"a": _record("fp32", static), "b": _record("fp16", dynamic)}, feeds)
    assert not analysis.skipped and analysis.input_shapes == {"x": (8, 1)}  # the fp16 record's dynamic batch, cut
    assert "not available" in fr.for_compare(None, {"b": _record("fp16", dynamic)}, feeds).skipped


def test_the_caveat_only_for_an_fp16_candidate_that_did_not_compute_in_fp16():
    assert fr.caveat("fp16", "fp16") is None
    assert fr.caveat("fp32", "fp32+casts") is None
    for effective in fr.NOT_FP16:
        assert f"the fp16 engine ran {effective}" in fr.caveat("fp16", effective)


def test_annotate_touches_only_fp16_candidates():
    from types import SimpleNamespace

    from trtprof.compare.accuracy import AccuracyDelta

    delta = AccuracyDelta(max_abs_err=0.1, max_rel_err=0.1, mismatch_fraction=0.0, nonfinite=0, elements=4)
    fp32 = SimpleNamespace(precision="fp32", engine={"effective_precision": "fp32"})
    assert fr.annotate(delta, fr.RangeAnalysis(), fp32) is delta
    fp16 = SimpleNamespace(precision="fp16", engine={"effective_precision": "fp32+casts"})
    annotated = fr.annotate(delta, fr.RangeAnalysis(skipped="x"), fp16)
    assert annotated.predicted["skipped"] == "x" and "fp32+casts" in annotated.caveat
    assert fr.annotate(None, fr.RangeAnalysis(), fp16) is None


def test_one_keep_list_for_all_is_offered_from_two_open_findings_on():
    def lines(n_open: int) -> list[str]:
        found = tuple(fr.RangeFinding(fr.OVERFLOW, f"t{i}", f"n{i}", "Mul", 1e6, (f"n{i}",)) for i in range(n_open))
        return fr.predicted_lines(fr.RangeAnalysis(findings=found, float_tensors=2, analysed=2).to_json())

    assert not any(line.startswith("to keep all of them FP32") for line in lines(1))
    assert "to keep all of them FP32: --layer-precisions n0:fp32,n1:fp32" in lines(2)
    assert lines(1)[-1].startswith("keep-lists are build options")


def test_count_precision_counts_compute_nodes_only():
    from trtprof.convert.fp16 import convert_fp16, count_precision

    converted = convert_fp16(_weights([1.0, 2.0])).model  # x → Cast → Mul(fp16) → Cast → y (float32 IO kept)
    assert count_precision(converted) == {"fp16": {"Mul": 1}, "fp32": {}}  # the two casts are not compute
    kept = convert_fp16(_weights([1.0, 2.0]), keep_fp32_nodes=["scale"]).model
    assert count_precision(kept) == {"fp16": {}, "fp32": {"Mul": 1}}
    ints = helper.make_graph([helper.make_node("Add", ["i", "i"], ["o"], name="add")], "ints",
                             [helper.make_tensor_value_info("i", TensorProto.INT64, [2])],
                             [helper.make_tensor_value_info("o", TensorProto.INT64, [2])])
    assert count_precision(helper.make_model(ints)) == {"fp16": {}, "fp32": {}}  # no float tensor: not counted


def test_a_refusal_names_the_node_when_the_message_does_and_says_how_otherwise():
    from trtprof.convert.fp16 import convert_fp16, refusal_message

    conversion = convert_fp16(_weights([1.0, 2.0]))
    named = refusal_message(conversion, "onnxruntime", "node with name 'scale' failed")
    assert named.endswith("; node scale (Mul): keep it in FP32 with --layer-precisions scale:fp32")
    assert "(the FP32 model itself loads)" in named
    vague = refusal_message(conversion, "onnxruntime", "something broke", fp32_loads=False)
    assert vague.endswith("keep the node it names in FP32 with --layer-precisions NODE:fp32 (or --keep-fp32-ops OP)")
    assert "itself loads" not in vague


def _chain_of_casts(n: int) -> "onnx.ModelProto":
    """x → Cast(to=FLOAT) × n → Relu → y: the model's own casts to float, which the converter
    leaves declaring FP16 while producing FP32 (the first reads the FP32 graph input and stays)."""
    nodes, prev = [], "x"
    for i in range(n):
        nodes.append(helper.make_node("Cast", [prev], [f"c{i}"], name=f"cast{i}", to=TensorProto.FLOAT))
        prev = f"c{i}"
    nodes.append(helper.make_node("Relu", [prev], ["y"], name="relu"))
    graph = helper.make_graph(nodes, "casts", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [3])])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def test_the_retyped_casts_note_names_five_and_marks_more():
    from trtprof.convert.fp16 import convert_fp16

    [five] = convert_fp16(_chain_of_casts(6)).fixes
    assert five.startswith("5 Cast(to=FLOAT)") and five.endswith("cast1, cast2, cast3, cast4, cast5")
    [six] = convert_fp16(_chain_of_casts(7)).fixes
    assert six.startswith("6 Cast(to=FLOAT)") and six.endswith("cast1, cast2, cast3, cast4, cast5 …")


def test_element_types_of_constants_whatever_their_attribute():
    from trtprof.convert.fp16 import tensor_elem_types

    nodes = [helper.make_node("Constant", [], ["a"], name="ka", value_float=2.0),
             helper.make_node("Constant", [], ["b"], name="kb",
                              value=numpy_helper.from_array(np.array([2.0], np.float16), "b")),
             helper.make_node("Mul", ["x", "a"], ["y"], name="m")]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [3])])
    types = tensor_elem_types(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]))
    assert types["a"] == TensorProto.FLOAT and types["b"] == TensorProto.FLOAT16 and types["y"] == TensorProto.FLOAT


def test_a_refusal_naming_a_tensor_blames_the_node_that_produces_it():
    from trtprof.convert.fp16 import blame_node, convert_fp16

    conversion = convert_fp16(_weights([1.0, 2.0]))
    assert blame_node(conversion, "Type of output arg (y) does not match") == ("scale", "Mul")
    assert blame_node(conversion, "tensor 'nowhere' has no producer") is None


def test_a_conversion_is_frozen():
    import dataclasses

    from trtprof.convert.fp16 import convert_fp16

    with pytest.raises(dataclasses.FrozenInstanceError):
        convert_fp16(_weights([1.0])).notes = ()


def test_the_analysis_records_are_frozen():
    import dataclasses

    for record in (_range([1.0]), fr.RangeFinding(fr.OVERFLOW, "t", "n", "Mul", 1e6, ("n",)), fr.RangeAnalysis()):
        with pytest.raises(dataclasses.FrozenInstanceError):
            record.name = "x"  # type: ignore[misc]


# --- the user's samples: MAX_SAMPLES, the batch split, the sample count ----------------------------


def _column(n: int):
    from trtprof.model.user_inputs import InputData

    return InputData("f.npz", {"x": np.arange(n, dtype=np.float32).reshape(n, 1)})


def _fed(batches) -> np.ndarray:
    return np.concatenate([b["x"][:, 0] for b in batches])


def test_up_to_512_samples_are_analysed_and_the_513th_is_left_out():
    from trtprof.spec import TensorSpec

    dynamic = [TensorSpec("x", "float32", ("N", 1))]
    assert fr.MAX_SAMPLES == 512
    assert list(_fed(fr.sample_batches(_column(512), dynamic, 1))) == list(range(512))
    assert list(_fed(fr.sample_batches(_column(513), dynamic, 1))) == list(range(512))


def test_a_dynamic_batch_splits_into_eights_and_the_rest_each_sample_once():
    from trtprof.spec import TensorSpec

    batches = fr.sample_batches(_column(19), [TensorSpec("x", "float32", ("N", 1))], 4)
    assert [len(b["x"]) for b in batches] == [8, 8, 3]  # MAX_BATCH, not the bench's batch size
    assert list(batches[-1]["x"][:, 0]) == [16, 17, 18] and list(_fed(batches)) == list(range(19))
    exact = fr.sample_batches(_column(16), [TensorSpec("x", "float32", ("N", 1))], 4)
    assert [len(b["x"]) for b in exact] == [8, 8]


def test_a_static_batch_is_fed_whole_filled_from_the_first_samples():
    from trtprof.spec import TensorSpec

    for inputs in ([TensorSpec("x", "float32", (4, 1))], []):  # a fixed batch, or no input known
        batches = fr.sample_batches(_column(10), inputs, 4)
        assert [list(b["x"][:, 0]) for b in batches] == [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9, 0, 1]], inputs


def test_the_samples_analysed_are_counted_along_the_batch_dimension():
    """x is N × 1: counting along dim 1 would say 2 samples, not 5."""
    batches = [{"x": np.ones((3, 1), np.float32)}, {"x": np.ones((2, 1), np.float32)}]
    analysis = fr.analyze(_scale_model(2.0), batches, inputs="inputs f.npz (5 samples)")
    assert analysis.samples == 5 and "in batches of x [3, 1]" in analysis.summary()
    assert fr.analyze(_scale_model(2.0), batches).samples == 0  # random inputs: no samples of the user's


def _no_input_model():
    """c = ConstantOfShape([2], 3.0), y = -c: a model without inputs."""
    shape = numpy_helper.from_array(np.array([2], dtype=np.int64), "shape")
    nodes = [helper.make_node("ConstantOfShape", ["shape"], ["c"], name="fill",
                              value=numpy_helper.from_array(np.array([3.0], dtype=np.float32), "v")),
             helper.make_node("Neg", ["c"], ["y"], name="neg")]
    graph = helper.make_graph(nodes, "no_inputs", [], [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])],
                              initializer=[shape])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def test_a_model_without_inputs_analyses_no_samples():
    analysis = fr.analyze(_no_input_model(), [{}], inputs="inputs f.npz (0 samples)")
    assert analysis.samples == 0 and analysis.analysed == 2 and analysis.input_shapes == {}


def test_compare_feeds_the_users_samples_at_the_static_batch_of_its_inputs(tmp_path):
    """A static fp16 candidate (batch 4, feeds 4 × 1): the user's samples go in batches of 4."""
    from trtprof.spec import TensorSpec

    path = tmp_path / "scale.onnx"
    onnx.save(_scale_model(2.0), str(path))
    static = [TensorSpec("x", "float32", (4, 1))]
    analysis = fr.for_compare(path, {"b": _record("fp16", static)}, {"x": np.ones((4, 1), np.float32)},
                              data=_column(10))
    assert not analysis.skipped and analysis.input_shapes == {"x": (4, 1)}
    assert analysis.inputs == "inputs f.npz (10 samples)"


# --- which keep-lists are built before they are suggested -------------------------------------------


def _negs(n: int):
    nodes = [helper.make_node("Neg", ["x" if i == 0 else f"t{i - 1}"], [f"t{i}" if i < n - 1 else "y"], name=f"n{i}")
             for i in range(n)]
    graph = helper.make_graph(nodes, "negs", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def test_every_printed_finding_of_each_kind_is_built_within_the_budget():
    """The combined keep-list takes 1 of MAX_CHECKED = 11 builds; the 10 left check the 5 printed
    findings of each kind, to the last build; a 6th of a kind (not printed) is not built."""
    assert fr.MAX_CHECKED == 11
    over = [fr.RangeFinding(fr.OVERFLOW, f"t{i}", f"n{i}", "Neg", 1e6, (f"n{i}",)) for i in range(5)]
    under = [fr.RangeFinding(fr.UNDERFLOW, f"t{i}", f"n{i}", "Neg", 0.5, (f"n{i}",)) for i in range(5, 11)]
    analysis = fr.RangeAnalysis(findings=tuple(over + under), float_tensors=12, analysed=12)
    checked = fr.check_suggestions(_negs(12), analysis, None)
    assert [f.built for f in checked.findings] == [True] * 10 + [None]
    assert checked.suggestion_error == ""


# --- the shared-weight note ------------------------------------------------------------------------


def _shared_weights(n: int):
    """keep{i} and half{i} both read weight w{i}: keeping keep0… in FP32 splits n weights."""
    nodes, inits, prev = [], [], "x"
    for i in range(n):
        inits.append(numpy_helper.from_array(np.full(2, i + 2.0, dtype=np.float32), f"w{i}"))
        nodes += [helper.make_node("Mul", [prev, f"w{i}"], [f"a{i}"], name=f"keep{i}"),
                  helper.make_node("Mul", [f"a{i}", f"w{i}"], [f"b{i}"], name=f"half{i}")]
        prev = f"b{i}"
    nodes.append(helper.make_node("Relu", [prev], ["y"], name="relu"))
    graph = helper.make_graph(nodes, "shared", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])], initializer=inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def test_the_shared_weights_note_names_five_and_marks_more():
    from trtprof.convert.fp16 import convert_fp16

    def note(n: int) -> str:
        fixes = convert_fp16(_shared_weights(n), keep_fp32_nodes=[f"keep{i}" for i in range(n)]).fixes
        [found] = [f for f in fixes if "weight(s) shared" in f]
        return found

    assert note(5).startswith("5 weight(s) shared") and note(5).endswith(": w0, w1, w2, w3, w4")
    assert note(6).startswith("6 weight(s) shared") and note(6).endswith(": w0, w1, w2, w3, w4 …")


def test_no_combined_keep_list_is_offered_when_it_did_not_build():
    found = tuple(fr.RangeFinding(fr.OVERFLOW, f"t{i}", f"n{i}", "Mul", 1e6, (f"n{i}",)) for i in range(2))
    ok = fr.RangeAnalysis(findings=found, float_tensors=2, analysed=2)
    assert ok.suggested_option == "--layer-precisions n0:fp32,n1:fp32" and ok.to_json()["suggestion_error"] is None
    refused = replace(ok, suggestion_error="type mismatch")
    assert refused.suggested_option == "" and refused.to_json()["suggestion_error"] == "type mismatch"
    assert not any(line.startswith("to keep all of them FP32") for line in fr.predicted_lines(refused.to_json()))


def test_a_tensor_of_unknown_size_counts_as_one_value_when_the_model_has_no_inputs():
    """fill's output c has an inferred size (2 values); the graph output y has none (shape inference
    types value_info only): with no input to size it by, y counts as 1 value, so c + y fill a run of 3."""
    model = _no_input_model()
    assert fr._estimated_elements(model, {}) == {"c": 2}
    assert fr.analyze(model, [{}], max_run_elements=3).runs == 1
    assert fr.analyze(model, [{}], max_run_elements=2).runs == 2


def test_build_analyses_the_users_samples_when_given(tmp_path):
    from types import SimpleNamespace

    from trtprof.spec import TensorSpec

    path = tmp_path / "scale.onnx"
    onnx.save(_scale_model(2.0), str(path))
    dynamic = [TensorSpec("x", "float32", ("N", 1))]
    spec = SimpleNamespace(backend="onnxruntime")
    users = fr.for_build(path, dynamic, 1, None, spec, data=_column(10))
    assert users.inputs == "inputs f.npz (10 samples)" and users.samples == 10 and users.input_shapes == {"x": (8, 1)}
    default = fr.for_build(path, dynamic, 1, None, spec)
    assert default.inputs == "random inputs" and default.samples == 0 and default.input_shapes == {"x": (1, 1)}
