"""Issue 36, deliverable 7: integer inputs beyond an embedding's rows are refused before any work in
every command, from --int-range and from --inputs alike (exit 2, one line naming the input, the Gather
and the file). Was: bench checked --int-range; compare, profile and fix-fp16 ran ONNX Runtime into an
index error (a traceback), and --inputs ids were checked nowhere. multi_io's embedding has 100 rows."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from ..cli.test_user_errors import assert_one_line, run_main as _run

ROWS = 100  # of multi_io_model's "emb"


def _npz(tmp_path: Path, ids, dtype=np.int64) -> Path:
    path = tmp_path / "data.npz"
    np.savez(path, x=np.zeros((4, 4), np.float32), ids=np.full((4, 3), 0, dtype) + np.asarray(ids, dtype))
    return path


def _argv(command: str, model: Path, tmp_path: Path, *extra: str) -> list[str]:
    out = ["--out", str(tmp_path / "o.json")]
    common = ["--engines", str(tmp_path / "e"), "--backend", "onnxruntime"]
    if command == "compare":
        return ["compare", str(model), *common, "--in-process", "--time-budget-s", "1", *out, *extra]
    if command == "profile":
        return ["profile", str(model), *common, *out, *extra]
    if command == "fix-fp16":
        return ["fix-fp16", str(model), *common, "--in-process", "--time-budget-s", "1", "--batch-size", "2", *out, *extra]
    raise AssertionError(command)


@pytest.mark.parametrize("command", ["compare", "profile", "fix-fp16"])
@pytest.mark.parametrize("ids,dtype", [(ROWS, np.int64), (150, np.int64), (-ROWS - 1, np.int64),
                                       (2**63 + 5, np.uint64)])
def test_inputs_ids_beyond_the_rows_are_refused(command, ids, dtype, multi_io_model, tmp_path, capsys):
    data = _npz(tmp_path, ids, dtype)
    code, _, err = _run(capsys, *_argv(command, multi_io_model, tmp_path, "--inputs", str(data)))
    assert_one_line(code, err, "data.npz", "'ids'", "gather", f"{ROWS} rows")
    assert not (tmp_path / "o.json").exists()


@pytest.mark.parametrize("ids", [ROWS - 1, -ROWS])
def test_ids_just_inside_the_rows_are_accepted(ids, multi_io_model, tmp_path, capsys):
    data = _npz(tmp_path, ids)
    code, _, err = _run(capsys, *_argv("compare", multi_io_model, tmp_path, "--inputs", str(data)))
    assert code == 0, err


@pytest.mark.parametrize("command", ["compare", "profile"])
def test_int_range_beyond_the_rows_is_refused(command, multi_io_model, tmp_path, capsys):
    code, _, err = _run(capsys, *_argv(command, multi_io_model, tmp_path, "--int-range", f"0,{ROWS + 1}"))
    assert_one_line(code, err, "--int-range", "'ids'", f"{ROWS} rows")
    code, _, err = _run(capsys, *_argv(command, multi_io_model, tmp_path, "--int-range", f"0,{ROWS}"))
    assert code == 0, err
