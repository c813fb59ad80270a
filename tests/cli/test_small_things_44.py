"""Issue 44 item 6: the smaller things a user trips on. An all-NaN ``--inputs`` file is refused in one line
(it gave ``cosine 1.000000, SNR inf dB (exact)``); compare and profile default to the batch a model fixes
(they defaulted to 1 on a model fixed at batch 2 and failed); ``build --int8`` prints no raw ANSI-coloured
ORT warning; an A/B whose second model is missing or a directory fails before the first engine is built;
the NOT VALID advice for FP16-behind-casts does not suggest bf16, which trtprof refuses on the CPU."""
from __future__ import annotations

import numpy as np
import pytest

from trtprof.cli import main
from trtprof.errors import BadInput
from trtprof.model.inputs import fixed_batch
from trtprof.model.onnx_model import model_fixed_batch
from trtprof.model.user_inputs import InputData
from trtprof.spec import TensorSpec

from ..conftest import one_line_error, tree_snapshot


# --- an all-NaN --inputs file -------------------------------------------------------------------------

def _npz(path, array):
    np.savez(path, input=array)
    return path


@pytest.mark.parametrize("bad", [np.nan, np.inf])
def test_inputs_with_no_finite_value_are_refused(tmp_path, bad):
    path = _npz(tmp_path / "x.npz", np.full((2, 3, 4, 4), bad, np.float32))
    with pytest.raises(BadInput, match="input 'input' has no finite value"):
        InputData.load(path)


def test_inputs_with_one_finite_value_are_accepted(tmp_path):  # just inside: one finite value among NaNs
    array = np.full((2, 3, 4, 4), np.nan, np.float32)
    array[1, 2, 3, 3] = 0.5
    assert InputData.load(_npz(tmp_path / "x.npz", array)).samples == 2


def test_integer_inputs_are_not_checked_for_finiteness(tmp_path):
    assert InputData.load(_npz(tmp_path / "x.npz", np.zeros((2, 4), np.int64))).samples == 2


def test_compare_refuses_an_all_nan_inputs_file_before_building(conv_model, tmp_path, capsys):
    engines = tmp_path / "engines"
    nan = _npz(tmp_path / "nan.npz", np.full((2, 3, 16, 16), np.nan, np.float32))
    code = main(["compare", str(conv_model), "--inputs", str(nan), "--engines", str(engines),
                 "--out", str(tmp_path / "c.json")])
    one_line_error(code, capsys.readouterr().err, str(nan), "no finite value")
    assert tree_snapshot(engines) == {} and not (tmp_path / "c.json").exists()


# --- the batch a model fixes is the default ------------------------------------------------------------

def _spec(name, *shape):
    return TensorSpec(name=name, dtype="float32", shape=tuple(shape))


@pytest.mark.parametrize("inputs,expected", [
    ([_spec("x", 4, 3)], 4),                                 # fixed at 4
    ([_spec("x", 4, 3), _spec("m", 4)], 4),                  # every input fixes the same batch
    ([_spec("x", "batch", 3)], None),                        # dynamic
    ([_spec("x", 4, 3), _spec("m", "batch")], None),         # one dynamic input: no fixed batch
    ([_spec("x", 4, 3), _spec("m", 2)], None),               # two different ones: not a batch
    ([_spec("x", 4, 3), _spec("s")], 4),                     # a scalar input has no batch dim
    ([_spec("s")], None),                                    # no input with dims: the default 1
])
def test_fixed_batch(inputs, expected):
    assert fixed_batch(inputs) == expected


def test_model_fixed_batch_reads_the_onnx_file(static_batch_model, conv_model, tmp_path):
    assert model_fixed_batch(static_batch_model) == 2
    assert model_fixed_batch(conv_model) is None  # dynamic batch
    (tmp_path / "bad.onnx").write_bytes(b"not onnx")
    assert model_fixed_batch(tmp_path / "bad.onnx") is None  # the build's own check says what is wrong
    assert model_fixed_batch(tmp_path) is None and model_fixed_batch(tmp_path / "missing.onnx") is None


def test_model_fixed_batch_of_a_model_read_takes_its_inputs(static_batch_model, conv_model, tmp_path):
    """An ``OnnxModel`` already read (profile's): its inputs, as its file's; a TensorFlow model's conversion
    none, as that model's file (not an ONNX file) has none."""
    from dataclasses import replace

    from trtprof.model.onnx_model import OnnxModel

    static = OnnxModel.load(static_batch_model)
    assert model_fixed_batch(static) == 2 and model_fixed_batch(OnnxModel.load(conv_model)) is None
    assert model_fixed_batch(replace(static, origin=tmp_path / "saved_model")) is None


def test_compare_defaults_to_the_fixed_batch(static_batch_model, conv_model, capsys):
    from trtprof.cli.compare import default_batch_sizes

    assert default_batch_sizes([str(static_batch_model)]) == (2,)
    assert "the model fixes its batch to 2" in capsys.readouterr().out  # stdout: stderr is for the one-line error
    assert default_batch_sizes([str(conv_model)]) == ()  # dynamic: compare's own default (1)
    assert default_batch_sizes([str(static_batch_model), str(conv_model)]) == ()  # an A/B that disagrees


def test_profile_runs_a_model_fixed_at_batch_2_without_batch_size(static_batch_model, tmp_path, capsys):
    out = tmp_path / "layers.json"
    code = main(["profile", str(static_batch_model), "--precisions", "fp32,fp16", "--engines", str(tmp_path / "engines"),
                 "--backend", "onnxruntime", "--iterations", "2", "--warmup", "1", "--out", str(out)])
    got = capsys.readouterr()
    assert code == 0, got.err
    assert "batch size 2: the model fixes its batch to 2" in got.out and out.is_file()


def test_profile_still_refuses_an_explicit_batch_the_model_cannot_run(static_batch_model, tmp_path, capsys):
    code = main(["profile", str(static_batch_model), "--precisions", "fp32,fp16", "--batch-size", "1",
                 "--engines", str(tmp_path / "engines"), "--backend", "onnxruntime", "--out", str(tmp_path / "l.json")])
    one_line_error(code, capsys.readouterr().err, "static batch of 2", "--batch-size 2")


# --- build --int8: no raw ORT warning ------------------------------------------------------------------

def test_build_int8_prints_no_raw_ort_warning(tmp_path):
    """A model with an unused initializer: ORT's calibration session warned about it on stderr in ANSI colour."""
    import subprocess
    import sys

    import onnx
    from onnx import numpy_helper

    from trtprof.model.demo import make_demo_model

    model = make_demo_model(tmp_path / "unused.onnx", channels=8, image=16, classes=10)
    proto = onnx.load(str(model))
    proto.graph.initializer.append(numpy_helper.from_array(np.zeros(3, np.float32), "unused_w"))
    onnx.save(proto, str(model))
    proc = subprocess.run([sys.executable, "-m", "trtprof", "build", "--int8", str(model), "--engines",
                           str(tmp_path / "engines"), "--backend", "onnxruntime"], capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert " built " in proc.stdout
    assert "\x1b[" not in proc.stdout + proc.stderr and "[W:onnxruntime" not in proc.stderr, proc.stderr


def test_ort_default_logger_severity_is_restored_after_quantizing():
    """The quantizer's sessions log at ERROR; afterwards ORT's default (warning) again, for other callers."""
    from trtprof.convert import quantize

    seen = []
    import onnxruntime

    real = onnxruntime.set_default_logger_severity
    try:
        onnxruntime.set_default_logger_severity = seen.append
        quantize.ort_logger_severity(quantize.ORT_ERROR)
        quantize.ort_logger_severity(quantize.ORT_DEFAULT_SEVERITY)
    finally:
        onnxruntime.set_default_logger_severity = real
    assert seen == [3, 2]


# --- an A/B checks both models first -------------------------------------------------------------------

@pytest.mark.parametrize("second", ["missing.onnx", "empty_dir", "not_a_saved_model"])
def test_ab_with_a_bad_second_model_builds_nothing(conv_model, tmp_path, capsys, second):
    (tmp_path / "empty_dir").mkdir()
    (tmp_path / "not_a_saved_model").mkdir()
    (tmp_path / "not_a_saved_model" / "readme.txt").write_text("hi")
    engines = tmp_path / "engines"
    code = main(["compare", str(conv_model), str(tmp_path / second), "--engines", str(engines),
                 "--out", str(tmp_path / "ab.json")])
    one_line_error(code, capsys.readouterr().err, second)
    assert tree_snapshot(engines) == {} and not (tmp_path / "ab.json").exists()


def test_ab_check_accepts_an_engines_dir_and_a_model(conv_model, tmp_path):
    from trtprof.cli.compare import check_model_paths

    engines = tmp_path / "engines"
    engines.mkdir()
    (engines / "x.fp32.onnxruntime.0123.json").write_text("{}")  # an engines dir: its metadata JSON
    check_model_paths([str(conv_model), str(engines)])  # raises nothing


# --- the NOT VALID advice for FP16 behind casts --------------------------------------------------------

def test_fp16_behind_casts_advice_suggests_int8_not_bf16():
    from trtprof.system.validity import check_casts

    assert check_casts([]) is None  # just outside: no arm ran behind casts
    reason = check_casts(["fp16"])  # just inside: one arm
    assert reason is not None and "--precisions fp32,int8" in reason.advice
    assert "or bf16" not in reason.advice and "refuses bf16" in reason.advice
