"""INT8 on ONNX Runtime's CPU provider, for real: static QDQ quantization, the census of which nodes
got integer kernels, and `trtprof compare --precisions fp32,int8` on a conv model and a matmul model.

No timing assertions: the checks are that INT8 kernels really run (from the graph ORT executes), that
the calibration is recorded in the cache key, and that the accuracy delta is measured (non-zero: INT8
rounds) beside a verdict.
"""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from trtprof.cli import main
from trtprof.convert import quantize
from trtprof.spec import BuildSpec, CacheKey, Precision

pytest.importorskip("onnxruntime")

FAST = ["--backend", "onnxruntime", "--time-budget-s", "0.5", "--round-iterations", "20"]
VERDICTS = ("faster", "slower", "equivalent", "inconclusive")


def make_mlp_model(path: Path, *, features: int = 64, hidden: int = 128, classes: int = 32, seed: int = 0) -> Path:
    """MatMul-Add-Relu-MatMul, dynamic batch, opset 17: the matmul model of the INT8/FP8 tests."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(seed)
    inits = [numpy_helper.from_array((rng.standard_normal((features, hidden)) / np.sqrt(features)).astype(np.float32), "w1"),
             numpy_helper.from_array((rng.standard_normal(hidden) * 0.1).astype(np.float32), "b1"),
             numpy_helper.from_array((rng.standard_normal((hidden, classes)) / np.sqrt(hidden)).astype(np.float32), "w2")]
    nodes = [helper.make_node("MatMul", ["x", "w1"], ["h"], name="mm1"),
             helper.make_node("Add", ["h", "b1"], ["hb"], name="add1"),
             helper.make_node("Relu", ["hb"], ["r"], name="relu1"),
             helper.make_node("MatMul", ["r", "w2"], ["y"], name="mm2")]
    graph = helper.make_graph(nodes, "mlp", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", features])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", classes])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    onnx.save(model, str(path))
    return path


@pytest.fixture
def mlp_model(tmp_path: Path) -> Path:
    return make_mlp_model(tmp_path / "mlp.onnx")


def _compare(model: Path, tmp_path: Path, capsys) -> tuple[dict, str]:
    out = tmp_path / "compare.json"
    assert main(["compare", str(model), "--precisions", "fp32,int8", "--engines", str(tmp_path / "engines"),
                 "--out", str(out), *FAST]) == 0
    return json.loads(out.read_text()), capsys.readouterr().out


def _int8_result(data: dict) -> dict:
    return next(r for r in data["results"] if r["precision"] == "int8")


def test_compare_fp32_int8_on_a_conv_model_runs_integer_convolutions(conv_model, tmp_path, capsys):
    data, printed = _compare(conv_model, tmp_path, capsys)
    (c,) = data["comparisons"]
    assert c["candidate"] == "int8" and c["verdict"] in VERDICTS
    assert c["latency"]["candidate"]["effective_precision"] == "int8"
    meta = _int8_result(data)["engine"]["backend_metadata"]
    census = meta["node_precision"]
    assert census["int8"]["QLinearConv"] == 3 and census["fp32"] == {}  # every conv is an integer kernel
    assert meta["int8_quantization"]["calibration_data"] == "random N(0,1), seed 0"
    acc = c["accuracy"]
    assert acc["nonfinite"] == 0 and 0 < acc["max_abs_err"] < 1  # INT8 rounds: never bit-exact, never wild
    assert "run INT8 kernels" in printed and "int8 vs fp32  speedup" in printed


def test_compare_fp32_int8_on_a_matmul_model(mlp_model, tmp_path, capsys):
    data, _ = _compare(mlp_model, tmp_path, capsys)
    (c,) = data["comparisons"]
    assert c["verdict"] in VERDICTS
    census = _int8_result(data)["engine"]["backend_metadata"]["node_precision"]
    integer_ops = set(census["int8"])
    assert integer_ops & {"QLinearMatMul", "MatMulInteger", "MatMulIntegerToFloat", "DynamicQuantizeMatMul"}
    assert "MatMul" not in census["fp32"]  # no matmul left in float between Q/DQ
    assert 0 < c["accuracy"]["max_abs_err"] and c["accuracy"]["nonfinite"] == 0


def test_calibration_is_part_of_the_cache_key():
    from trtprof.builder.pipeline import key_spec
    from trtprof.model.user_inputs import InputData

    def key(**options):
        spec = BuildSpec.make(model_sha256="0" * 64, backend="onnxruntime", precision=Precision.INT8,
                              batch_sizes=(1,), options=options)
        return CacheKey.derive(key_spec(spec), {"backend": "onnxruntime"}).hexdigest  # as build_engines keys it

    base = quantize.quantization_options(Precision.INT8)
    assert base["calibration"] == "minmax" and base["calibration_samples"] == quantize.CALIBRATION_SAMPLES
    assert key(**base) != key(**{**base, "calibration_samples": quantize.CALIBRATION_SAMPLES + 1})
    assert key(**base) != key(**quantize.quantization_options(Precision.INT8, seed=1))
    assert key(**base) != key(**quantize.quantization_options(Precision.INT8, batch=4))
    x = np.zeros((3, 2), np.float32)
    one = quantize.quantization_options(Precision.INT8, data=InputData("d.npz", {"x": x}))
    other = quantize.quantization_options(Precision.INT8, data=InputData("d.npz", {"x": x + 1}))
    assert one["calibration_data"].startswith("inputs d.npz (3 samples), sha256 ")
    assert key(**one) != key(**other) != key(**base)  # same path, other samples: another model
    assert quantize.quantization_options(Precision.FP16) == {}


def test_calibration_feeds_follow_the_spec(conv_model):
    from trtprof.model.onnx_model import inspect_model

    spec = BuildSpec.make(model_sha256="0" * 64, backend="onnxruntime", precision=Precision.INT8, batch_sizes=(2, 4),
                          options={**quantize.quantization_options(Precision.INT8, batch=2), "calibration_samples": 6})
    feeds = quantize.calibration_feeds(inspect_model(conv_model).inputs, spec)
    assert len(feeds) == 3 and feeds[0]["input"].shape == (2, 3, 16, 16)  # 6 samples in batches of 2
    assert not np.array_equal(feeds[0]["input"], feeds[1]["input"])  # seed, seed+1, …


def test_user_inputs_calibrate_all_samples_up_to_the_cap(conv_model):
    from trtprof.model.onnx_model import inspect_model
    from trtprof.model.user_inputs import InputData

    inputs = inspect_model(conv_model).inputs
    for samples, batches in ((5, 3), (2 * quantize.MAX_CALIBRATION_BATCHES + 1, quantize.MAX_CALIBRATION_BATCHES)):
        data = InputData("x.npz", {"input": np.ones((samples, 3, 16, 16), np.float64)})
        options = quantize.quantization_options(Precision.INT8, batch=2, data=data)
        spec = BuildSpec.make(model_sha256="0" * 64, backend="onnxruntime", precision=Precision.INT8,
                              batch_sizes=(2,), options=options)
        feeds = quantize.calibration_feeds(inputs, spec, data)
        assert len(feeds) == batches and options["calibration_samples"] == 2 * batches
        assert feeds[0]["input"].dtype == np.float32  # the model's dtype, not the file's


def test_compare_int8_calibrates_on_inputs(conv_model, tmp_path, capsys):
    samples = tmp_path / "in.npz"
    np.savez(samples, input=np.random.default_rng(3).uniform(0, 1, (6, 3, 16, 16)).astype(np.float32))
    out = tmp_path / "c.json"
    assert main(["compare", str(conv_model), "--precisions", "fp32,int8", "--inputs", str(samples), "--engines",
                 str(tmp_path / "engines"), "--out", str(out), *FAST]) == 0
    meta = _int8_result(json.loads(out.read_text()))["engine"]["backend_metadata"]
    assert meta["int8_quantization"]["calibration_data"].startswith(f"inputs {samples} (6 samples), sha256 ")
    assert meta["int8_quantization"]["calibration_batches"] == 6  # batch 1: every sample


def _qdq_conv_graph(fused: bool):
    """A graph as ORT might execute it: a QLinearConv (fused) or a float Conv between DQ and Q."""
    import onnx
    from onnx import TensorProto, helper

    u8 = TensorProto.UINT8
    if fused:
        nodes = [helper.make_node("QLinearConv", ["xq", "s", "z", "wq", "s", "z", "s", "z"], ["yq"], name="c")]
        vi = [helper.make_tensor_value_info("yq", u8, None)]
    else:
        nodes = [helper.make_node("DequantizeLinear", ["xq", "s", "z"], ["x"], name="dq"),
                 helper.make_node("Conv", ["x", "w"], ["y"], name="c"),
                 helper.make_node("QuantizeLinear", ["y", "s", "z"], ["yq"], name="q")]
        vi = [helper.make_tensor_value_info("x", TensorProto.FLOAT, None),
              helper.make_tensor_value_info("y", TensorProto.FLOAT, None)]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("xq", u8, [1, 1, 4, 4])],
                              [helper.make_tensor_value_info("yq", u8, None)],
                              [helper.make_tensor("s", TensorProto.FLOAT, [], [0.1]), helper.make_tensor("z", u8, [], [0]),
                               helper.make_tensor("wq", TensorProto.INT8, [1, 1, 1, 1], [1]),
                               helper.make_tensor("w", TensorProto.FLOAT, [1, 1, 1, 1], [1.0])], value_info=vi)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def test_census_tells_an_integer_kernel_from_a_float_conv_between_qdq():
    fused = quantize.count_quantized(_qdq_conv_graph(True))
    assert fused == {"int8": {"QLinearConv": 1}, "fp32": {}, "qdq": {}}
    assert quantize.effective_int8(fused) == "int8"
    unfused = quantize.count_quantized(_qdq_conv_graph(False))
    assert unfused == {"int8": {}, "fp32": {"Conv": 1}, "qdq": {"DequantizeLinear": 1, "QuantizeLinear": 1}}
    assert quantize.effective_int8(unfused) == "fp32+qdq"
    mixed = {"int8": {"QLinearConv": 2}, "fp32": {"Conv": 1}}
    assert quantize.effective_int8(mixed) == "mixed"


def test_int8_and_the_census_notes_on_the_build_line(conv_model, tmp_path, capsys):
    assert main(["build", str(conv_model), "--int8", "--engines", str(tmp_path / "e"), "--backend", "onnxruntime"]) == 0
    out = capsys.readouterr().out
    assert "compute nodes run INT8 kernels on CPUExecutionProvider" in out and "effective precision int8" in out
    assert "int8 calibration (minmax): 8 batches of 1 from random inputs (seed 0: input N(0,1)) — not your data" in out


def test_the_calibration_note_names_each_input_s_real_distribution(multi_io_model, tmp_path, capsys):
    """An int64 input is calibrated on uniform integers, not on "N(0,1)": the note says so per input."""
    import re

    import numpy as np

    from trtprof.convert.quantize import random_inputs_text

    assert main(["build", str(multi_io_model), "--int8", "--engines", str(tmp_path / "e"),
                 "--backend", "onnxruntime"]) == 0
    out = capsys.readouterr().out
    assert re.search(r"from random inputs \(seed 0: \w+ N\(0,1\), \w+ int64 uniform integers \d+\.\.\d+\)", out), out

    feeds = [{"a": np.zeros((1, 4), np.float32), "ids": np.array([[3, 0, 7]], np.int64)},
             {"a": np.ones((1, 4), np.float32), "ids": np.array([[1, 9, 2]], np.int64)}]
    assert random_inputs_text(feeds) == "a N(0,1), ids int64 uniform integers 0..9"


def test_fp8_is_refused_on_onnxruntime_with_one_line(conv_model, tmp_path, capsys):
    engines = tmp_path / "e"
    assert main(["build", str(conv_model), "--fp8", "--engines", str(engines), "--backend", "onnxruntime"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "fp8" in err[0] and "onnxruntime" in err[0]
    assert not engines.exists() or not any(engines.iterdir())
