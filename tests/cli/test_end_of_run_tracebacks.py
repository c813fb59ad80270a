"""Issue 45 item 8 (round 5, the tracebacks of its item 9): each was a traceback on 4b0e977 —

- a model whose only input is rank-0 (a scalar; an ``If`` condition is one): `compare` died in the
  roofline count (dim 0 of a shape with no dims), `fix-fp16` in joining the emulated FP16 outputs;
- `import trtexec --precision fp99`: the precision's BadInput escaped argparse;
- `compare/profile --out X --trace-dir X`: the traces made X a folder, then the JSON's rename (profile)
  or the trace folder's mkdir (compare) failed after all the work.
"""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from trtprof.cli import main

from .test_user_errors import assert_one_line, run_main

QUICK = ["--backend", "onnxruntime", "--time-budget-s", "3", "--min-loads", "2", "--round-iterations", "3"]


@pytest.fixture
def scalar_model(tmp_path: Path) -> Path:
    """y = s * s with s a rank-0 float input: no input has a batch dim."""
    import onnx
    from onnx import TensorProto, helper

    s = helper.make_tensor_value_info("s", TensorProto.FLOAT, [])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [])
    model = helper.make_model(helper.make_graph([helper.make_node("Mul", ["s", "s"], ["y"], name="mul")], "g", [s], [y]),
                              opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    path = tmp_path / "only_scalar.onnx"
    onnx.save(model, str(path))
    return path


def test_compare_of_a_model_whose_input_is_rank_0(scalar_model, tmp_path, capsys):
    out = tmp_path / "c.json"
    code, stdout, err = run_main(capsys, "compare", str(scalar_model), "--engines", str(tmp_path / "e"), *QUICK,
                                 "--batch-sizes", "1,4", "--out", str(out))
    assert code == 0 and "Traceback" not in err, err
    data = json.loads(out.read_text())
    assert [c["batch_size"] for c in data["comparisons"]] == [1, 4]


def test_fix_fp16_of_a_model_whose_input_is_rank_0(scalar_model, tmp_path, capsys):
    out = tmp_path / "f.json"
    code, stdout, err = run_main(capsys, "fix-fp16", str(scalar_model), "--engines", str(tmp_path / "e"),
                                 "--backend", "onnxruntime", "--time-budget-s", "3", "--round-iterations", "3",
                                 "--out", str(out))
    assert code == 0 and "Traceback" not in err, err
    assert json.loads(out.read_text())["fix_fp16"]


def test_the_roofline_batch_of_rank_0_inputs():
    from trtprof.model.roofline import graph_cost
    import onnx
    from onnx import TensorProto, helper

    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 4])
    s = helper.make_tensor_value_info("s", TensorProto.FLOAT, [])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 4])
    model = helper.make_model(helper.make_graph([helper.make_node("Mul", ["x", "s"], ["y"])], "g", [s, x], [y]),
                              opset_imports=[helper.make_opsetid("", 17)])
    assert graph_cost(model, {"s": (), "x": (8, 4)}).batch_size == 8  # the scalar listed first has no dim 0
    assert graph_cost(model, {"s": ()}).batch_size == 1


def test_join_batches_of_rank_0_outputs():
    from trtprof.model.user_inputs import join_batches

    assert join_batches([np.float32(1.0), np.float32(2.0)], 4, 8).tolist() == [1.0, 2.0]
    assert join_batches([np.ones((4, 2)), np.zeros((4, 2))], 4, 6).shape == (6, 2)


def test_import_trtexec_with_an_unknown_precision_is_one_line(tmp_path, capsys):
    times = tmp_path / "t.json"
    times.write_text("[]")
    code, _, err = run_main(capsys, "import", "trtexec", "--times", str(times), "--precision", "fp99",
                            "--batch-size", "1", "--out", str(tmp_path / "r.json"))
    assert_one_line(code, err, "--precision", "unknown precision 'fp99'", "fp16")
    assert not (tmp_path / "r.json").exists()


@pytest.mark.parametrize("command", ["compare", "profile"])
@pytest.mark.parametrize("spelling", ["X", "./X/"])
def test_out_and_trace_dir_naming_one_path_is_refused_before_any_build(command, spelling, conv_model, tmp_path,
                                                                       capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    extra = QUICK if command == "compare" else ["--backend", "onnxruntime", "--iterations", "2", "--warmup", "1"]
    code, _, err = run_main(capsys, command, str(conv_model), "--engines", str(tmp_path / "e"), *extra,
                            "--out", "X", "--trace-dir", spelling)
    assert_one_line(code, err, "--trace-dir", "same file as --out")
    assert not (tmp_path / "X").exists() and not (tmp_path / "e").exists()
