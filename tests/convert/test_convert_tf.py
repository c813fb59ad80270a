"""TensorFlow → ONNX: the three input formats, the faithfulness check, the conversion cache, build +
bench on a TF model, and the one-line errors.

The TF tests share one module-scoped set of models (TF import + model making ~10 s once); tests that
need no TensorFlow (argument parsing, content hashing, TF missing) run without the ``tf`` extra.
"""
from __future__ import annotations

import shutil
import sys
from pathlib import Path

import numpy as np
import pytest

from trtprof.cli import main
from trtprof.convert.tf import args as tfargs
from trtprof.convert.tf import cache as tfcache
from trtprof.convert.tf import check as tfcheck
from trtprof.convert.tf import conversion as tfconv
from trtprof.errors import BadInput, BadModel

FAST = ["--warmup", "2", "--iterations", "5"]


def _one_error_line(capsys) -> str:
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1, err
    return err[0]


# ----------------------------------------------------------------------------- no TensorFlow needed


def test_parse_tensor_args():
    assert tfargs.parse_tensor_arg("image") == ("image", None)
    assert tfargs.parse_tensor_arg("image:0") == ("image:0", None)  # a TF output index, not a shape
    assert tfargs.parse_tensor_arg("image:0:?x128x128x3") == ("image:0", (None, 128, 128, 3))
    assert tfargs.parse_tensor_arg("x:[-1,4]") == ("x", (None, 4))
    assert tfargs.parse_tensor_list("a:?x4,b:[N,2,3],c:0") == [("a", (None, 4)), ("b", (None, 2, 3)), ("c:0", None)]
    with pytest.raises(BadInput):
        tfargs.parse_tensor_arg("x:0x4")


def test_content_hash_follows_content_not_location(tmp_path):
    model = tmp_path / "sm"
    (model / "variables").mkdir(parents=True)
    (model / "saved_model.pb").write_bytes(b"graph")
    (model / "variables" / "variables.data").write_bytes(b"weights")
    first = tfargs.content_sha256(model)
    copy = tmp_path / "copy"
    shutil.copytree(model, copy)
    assert tfargs.content_sha256(copy) == first
    (copy / "variables" / "variables.data").write_bytes(b"weightz")
    assert tfargs.content_sha256(copy) != first
    (copy / "variables" / "variables.data").rename(copy / "variables" / "other.data")
    (copy / "variables" / "other.data").write_bytes(b"weights")
    assert tfargs.content_sha256(copy) != first  # a renamed file is another model


@pytest.mark.parametrize("kind", ["text_file", "empty_dir", "dir_without_saved_model", "empty_keras"])
def test_not_a_tf_model_is_one_line_exit_2(kind, tmp_path, capsys):
    path = {
        "text_file": tmp_path / "notes.txt",
        "empty_dir": tmp_path / "empty",
        "dir_without_saved_model": tmp_path / "folder",
        "empty_keras": tmp_path / "m.keras",
    }[kind]
    if kind == "text_file":
        path.write_text("hello")
    elif kind == "empty_dir":
        path.mkdir()
    elif kind == "dir_without_saved_model":
        path.mkdir()
        (path / "weights.bin").write_bytes(b"x")
    else:
        path.touch()
    assert main(["convert", str(path), "-o", str(tmp_path / "out.onnx")]) == 2
    line = _one_error_line(capsys)
    assert str(path) in line
    assert not (tmp_path / "out.onnx").exists()


def test_tensorflow_missing_names_the_extra(tmp_path, capsys, monkeypatch):
    """sys.modules[name] = None makes ``import name`` raise ImportError, as when it is not installed."""
    model = tmp_path / "m.keras"
    model.write_bytes(b"not empty")
    monkeypatch.setitem(sys.modules, "tensorflow", None)
    assert main(["convert", str(model), "-o", str(tmp_path / "m.onnx")]) == 2
    line = _one_error_line(capsys)
    assert "tensorflow is not installed" in line and "trtprof[tf]" in line


def test_check_verdicts_against_a_perturbed_fake_reference():
    """Contract of the pass / warn / fail rule, with a fake TF reference that adds a known error."""
    import onnx
    from onnx import TensorProto, helper

    graph = helper.make_graph(
        [helper.make_node("Relu", ["x"], ["y"])], "relu",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 8])],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.checker.check_model(model)

    def fake_reference(offset):
        return lambda feeds, ins, outs: [np.maximum(feeds["x"], 0) + offset]

    atol, rtol = 1e-4, 0.0
    exact = tfcheck.check_against_tf(model, fake_reference(0.0), atol=atol, rtol=rtol)
    assert exact.status == "ok" and exact.max_abs_err == 0.0 and exact.batch_size == tfcheck.CHECK_BATCH_SIZE
    near = tfcheck.check_against_tf(model, fake_reference(0.5 * atol), atol=atol, rtol=rtol)
    assert near.status == "warn" and near.max_abs_err == pytest.approx(0.5 * atol, rel=1e-3)
    far = tfcheck.check_against_tf(model, fake_reference(10 * atol), atol=atol, rtol=rtol)
    assert far.status == "fail" and far.allowance_used == pytest.approx(10, rel=1e-3)


def test_tiny_outputs_are_judged_by_their_scale():
    """Random-weight MobileNetV2 logits are ~1e-11: an ONNX answer off by 2x is still within atol of
    them, and must fail (fake TF reference, contract test)."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    tiny = numpy_helper.from_array(np.array(1e-11, np.float32), "tiny")
    graph = helper.make_graph(
        [helper.make_node("Mul", ["x", "tiny"], ["y"])], "tiny",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 8])],
        [tiny],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    same = tfcheck.check_against_tf(model, lambda feeds, ins, outs: [feeds["x"] * np.float32(1e-11)])
    assert same.status == "ok" and same.min_output_scale < tfcheck.DEFAULT_ATOL
    double = tfcheck.check_against_tf(model, lambda feeds, ins, outs: [feeds["x"] * np.float32(2e-11)])
    assert double.max_abs_err < tfcheck.DEFAULT_ATOL  # the absolute rule alone would pass it
    assert double.status == "fail" and double.max_rel_err == pytest.approx(0.5, rel=1e-3)


# ----------------------------------------------------------------------------- with TensorFlow

tf_only = pytest.mark.tf


@pytest.fixture(scope="module")
def tf_models(tmp_path_factory):
    """The conv net (.keras + SavedModel), the MLP (.keras) and a frozen .pb of the conv net."""
    pytest.importorskip("tensorflow")
    pytest.importorskip("tf2onnx")
    from ..tf_helpers import load_make_models, make_frozen_graph

    out = tmp_path_factory.mktemp("tf_models")
    make_models = load_make_models()
    make_models.make("conv_elu_3x3_f32_256", out, ("keras", "savedmodel"))
    make_models.make("mlp", out, ("keras",))
    pb, pb_inputs, pb_outputs = make_frozen_graph(out / "conv_elu_3x3_f32_256_savedmodel", out / "conv_elu_3x3_f32_256_frozen.pb")
    return {
        "keras": out / "conv_elu_3x3_f32_256.keras",
        "savedmodel": out / "conv_elu_3x3_f32_256_savedmodel",
        "mlp": out / "mlp.keras",
        "pb": pb,
        "pb_inputs": pb_inputs,
        "pb_outputs": pb_outputs,
    }


def _tf_outputs(fmt: str, path: Path, x: np.ndarray) -> np.ndarray:
    """TensorFlow's own answer, computed here independently of trtprof's check."""
    import tensorflow as tf

    if fmt == "keras":
        import keras

        return np.asarray(keras.models.load_model(str(path), compile=False)(x, training=False))
    sig = tf.saved_model.load(str(path)).signatures["serving_default"]
    return np.asarray(next(iter(sig(tf.constant(x)).values())))


def _assert_valid_dynamic_onnx(onnx_path: Path) -> None:
    import onnx

    model = onnx.load(str(onnx_path))
    onnx.checker.check_model(model, full_check=True)
    onnx.shape_inference.infer_shapes(model, strict_mode=True)
    for value in [*model.graph.input, *model.graph.output]:
        batch = value.type.tensor_type.shape.dim[0]
        assert not batch.HasField("dim_value"), f"{value.name}: batch dim is static"


@tf_only
@pytest.mark.parametrize("fmt", ["keras", "savedmodel", "pb"])
def test_three_formats_convert_and_match_tf(fmt, tf_models, tmp_path, capsys):
    out = tmp_path / f"{fmt}.onnx"
    args = ["convert", str(tf_models[fmt]), "-o", str(out)]
    if fmt == "pb":
        args += ["--inputs", ",".join(tf_models["pb_inputs"]), "--outputs", ",".join(tf_models["pb_outputs"])]
    assert main(args) == 0
    line = capsys.readouterr().out.strip()
    assert line.startswith(f"{out}: converted in ") and "check ok: max abs err" in line
    _assert_valid_dynamic_onnx(out)

    import onnxruntime as ort

    x = np.random.default_rng(7).standard_normal((3, 128, 128, 3), dtype=np.float32)  # batch 3: not the check's 2
    session = ort.InferenceSession(str(out), providers=["CPUExecutionProvider"])
    got = session.run(None, {session.get_inputs()[0].name: x})[0]
    want = _tf_outputs("keras" if fmt == "keras" else "savedmodel", tf_models["savedmodel" if fmt == "pb" else fmt], x)
    np.testing.assert_allclose(got, want, atol=tfcheck.DEFAULT_ATOL, rtol=tfcheck.DEFAULT_RTOL)


@tf_only
def test_mlp_check_result_is_recorded(tf_models, tmp_path):
    result = tfconv.convert_tf(tf_models["mlp"], tmp_path / "mlp.onnx")
    assert result.check is not None and result.check.status == "ok"
    assert 0 <= result.check.max_abs_err <= result.check.atol
    assert result.source_format == "keras" and result.inputs[0][1][1:] == (256,)
    assert result.versions["tensorflow"] and result.versions["tf2onnx"]


@tf_only
def test_frozen_graph_needs_inputs_and_outputs(tf_models, tmp_path, capsys):
    assert main(["convert", str(tf_models["pb"]), "-o", str(tmp_path / "x.onnx")]) == 2
    assert "--inputs and --outputs" in _one_error_line(capsys)
    assert main(["convert", str(tf_models["pb"]), "-o", str(tmp_path / "x.onnx"), "--inputs", "nope",
                 "--outputs", ",".join(tf_models["pb_outputs"])]) == 2
    assert "nope:0 not in the graph" in _one_error_line(capsys)


@tf_only
def test_unconvertible_op_is_named(tf_models, tmp_path, capsys):
    from ..tf_helpers import make_lgamma_savedmodel

    model = make_lgamma_savedmodel(tmp_path / "lgamma_sm")
    assert main(["convert", str(model), "-o", str(tmp_path / "l.onnx")]) == 2
    line = _one_error_line(capsys)
    assert "cannot convert TensorFlow op(s): Lgamma" in line
    assert not (tmp_path / "l.onnx").exists()


@tf_only
@pytest.mark.parametrize("fmt", ["keras", "savedmodel"])
def test_build_and_bench_a_tf_model_reusing_the_onnx(fmt, tf_models, tmp_path, capsys, monkeypatch):
    engines = tmp_path / "engines"
    build = ["build", str(tf_models[fmt]), "--fp32", "--fp16", "--engines", str(engines), "--backend", "onnxruntime"]
    assert main(build) == 0
    out = capsys.readouterr().out
    assert out.count(" built ") == 2
    assert "converted " in out and "check ok" in out  # the conversion and its check are printed
    converted = sorted((engines / "onnx").glob("*.onnx"))
    assert len(converted) == 1
    before = converted[0].stat().st_mtime_ns

    def no_conversion(*args, **kwargs):
        raise AssertionError("the second build converted again instead of reusing the cached ONNX")

    monkeypatch.setattr(tfconv, "convert_tf", no_conversion)
    assert main(build) == 0
    out = capsys.readouterr().out
    assert "converted (cache hit)" in out
    assert sum(" cache hit " in line for line in out.splitlines() if not line.startswith("converted")) == 2
    assert converted[0].stat().st_mtime_ns == before

    results = tmp_path / "results.json"
    assert main(["bench", str(engines), *FAST, "--out", str(results)]) == 0
    assert "median ms" in capsys.readouterr().out
    import json

    entries = json.loads(results.read_text())["results"]
    assert sorted(e["precision"] for e in entries) == ["fp16", "fp32"]
    assert all(e["config"]["input_shapes"] for e in entries)


@tf_only
def test_changed_model_is_converted_again(tf_models, tmp_path):
    cache = tmp_path / "onnx"
    model = tmp_path / "sm"
    shutil.copytree(tf_models["savedmodel"], model)
    first = tfcache.convert_cached(model, cache)
    assert tfcache.convert_cached_result(model, cache).cached
    (model / "fingerprint.pb").unlink()  # any content change is another model
    second = tfcache.convert_cached_result(model, cache)
    assert not second.cached and second.onnx_path != first


@tf_only
def test_same_model_same_bytes_whatever_was_converted_before(tf_models, tmp_path):
    """Engine cache keys hash the ONNX bytes: a TF model must convert to the same file every time."""
    from trtprof.model.onnx_model import sha256_file

    first = tfconv.convert_tf(tf_models["mlp"], tmp_path / "a.onnx", check=False).onnx_path
    tfconv.convert_tf(tf_models["keras"], tmp_path / "other.onnx", check=False)
    again = tfconv.convert_tf(tf_models["mlp"], tmp_path / "b.onnx", check=False).onnx_path
    assert sha256_file(first) == sha256_file(again)


@tf_only
def test_build_a_frozen_graph_names_its_tensors(tf_models, tmp_path, capsys):
    engines = tmp_path / "engines"
    build = ["build", str(tf_models["pb"]), "--engines", str(engines), "--backend", "onnxruntime"]
    assert main(build) == 2  # a .pb has no signature: the tensors must be named
    assert "--inputs" in capsys.readouterr().err
    assert main([*build, "--tf-inputs", ",".join(tf_models["pb_inputs"]), "--tf-outputs", ",".join(tf_models["pb_outputs"])]) == 0
    out = capsys.readouterr().out
    assert "check ok" in out and out.count(" built ") == 1
