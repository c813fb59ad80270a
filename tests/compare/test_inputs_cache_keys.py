"""``compare --inputs X.npz`` never writes engines keyed by a sample count (issue 44, item 4).

Before: the arrays' shapes stood in for ``--shape`` with dim 0 their sample count, and went into the
build spec, so a model fixed at ``[1, 3, 16, 16]`` compared on a 4-sample file got a second fp32 and fp16
engine keyed ``[4, 3, 16, 16]``; ``cache ls`` showed twins, ``bench engines/`` measured both. Now the
batch comes from the batch sizes, the inputs feed them: the build keys only the overrides that fix a dim
the model leaves open besides the batch, with that batch dim as 1 (``builder.pipeline.key_shapes``)."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("onnxruntime")

from trtprof.builder.pipeline import key_shapes  # noqa: E402
from trtprof.cli import main  # noqa: E402
from trtprof.spec import TensorSpec  # noqa: E402

QUICK = ["--backend", "onnxruntime", "--in-process", "--time-budget-s", "1"]


def entries(engines: Path) -> list[dict]:
    return [json.loads(p.read_text()) for p in sorted(engines.glob("*.json"))]


def keys(engines: Path) -> set[str]:
    return {e["key"] for e in entries(engines)}


@pytest.fixture
def batch_one_model(conv_model: Path, tmp_path: Path) -> Path:
    """The demo network with its batch fixed to 1 (the issue's "model fixed at batch 1")."""
    import onnx

    model = onnx.load(str(conv_model))
    model.graph.input[0].type.tensor_type.shape.dim[0].dim_value = 1
    path = tmp_path / "fixed1.onnx"
    onnx.save(model, str(path))
    return path


def samples(tmp_path: Path, name: str, shape: tuple[int, ...], input_name: str = "input") -> Path:
    path = tmp_path / name
    np.savez(path, **{input_name: np.random.default_rng(len(shape)).standard_normal(shape).astype(np.float32)})
    return path


def test_compare_with_inputs_finds_the_engines_compare_without_them_built(batch_one_model, tmp_path, capsys):
    engines = tmp_path / "engines"
    out = tmp_path / "c.json"
    assert main(["compare", str(batch_one_model), "--engines", str(engines), "--out", str(out), *QUICK]) == 0
    without = keys(engines)
    assert len(without) == 2  # fp32 and fp16
    four = samples(tmp_path, "four.npz", (4, 3, 16, 16))
    assert main(["compare", str(batch_one_model), "--inputs", str(four), "--engines", str(engines),
                 "--out", str(out), *QUICK]) == 0
    assert keys(engines) == without  # the same two engines: none keyed by the 4 samples
    assert all(e["spec"]["shapes"] == {} for e in entries(engines))
    assert json.loads(out.read_text())["comparisons"][0]["accuracy"]["inputs"].endswith("(4 samples)")
    capsys.readouterr()
    assert main(["cache", "ls", str(engines)]) == 0
    listed = capsys.readouterr().out
    assert "2 items" in listed and listed.count("fixed1 ") == 2
    # ... and bench engines/ measures each of them once
    results = tmp_path / "r.json"
    assert main(["bench", str(engines), "--warmup", "1", "--iterations", "3", "--out", str(results)]) == 0
    measured = [(r["precision"], r["batch_size"]) for r in json.loads(results.read_text())["results"]]
    assert sorted(measured) == [("fp16", 1), ("fp32", 1)]


def test_the_first_compare_with_inputs_builds_what_the_plain_one_finds(conv_model, tmp_path):
    """The other order, on a model with a dynamic batch: --inputs first builds, the plain run finds them."""
    engines = tmp_path / "engines"
    out = tmp_path / "c.json"
    five = samples(tmp_path, "five.npz", (5, 3, 16, 16))
    assert main(["compare", str(conv_model), "--inputs", str(five), "--batch-sizes", "2", "--engines", str(engines),
                 "--out", str(out), *QUICK]) == 0
    first = keys(engines)
    assert main(["compare", str(conv_model), "--batch-sizes", "2", "--engines", str(engines), "--out", str(out),
                 *QUICK]) == 0
    assert keys(engines) == first and len(first) == 2


def test_key_shapes_keep_only_dims_the_model_leaves_open_with_the_batch_dim_as_one():
    fixed = (TensorSpec("input", "float32", (1, 3, 16, 16)),)
    dynamic_batch = (TensorSpec("input", "float32", ("N", 3, 16, 16)),)
    seq = (TensorSpec("tokens", "float32", ("batch", "seq", 4)),)
    # every dim but the batch fixed by the model: an override adds nothing, whatever its sample count
    assert key_shapes(fixed, {"input": (4, 3, 16, 16)}) == {}
    assert key_shapes(dynamic_batch, {"input": (4, 3, 16, 16)}) == {}
    # a dim left open: kept, the batch dim as 1, so sample counts 4 and 5 are one key ...
    assert key_shapes(seq, {"tokens": (4, 7, 4)}) == {"tokens": (1, 7, 4)} == key_shapes(seq, {"tokens": (5, 7, 4)})
    # ... and a different open dim another one (a different engine where the backend bakes it in)
    assert key_shapes(seq, {"tokens": (4, 8, 4)}) == {"tokens": (1, 8, 4)}
    assert key_shapes(seq, None) == {}


def test_inputs_with_an_open_dim_key_it_as_the_same_shape_given_by_hand(dynamic_seq_model, tmp_path):
    """A model whose seq dim is open: --inputs fixes it (7), keyed as ``--shape tokens:1x7x4`` is; 4 or 5
    samples make no difference; a file of seq 8 is another engine."""
    engines = tmp_path / "engines"
    assert main(["build", str(dynamic_seq_model), "--shape", "tokens:1x7x4", "--fp32", "--fp16",
                 "--engines", str(engines), "--backend", "onnxruntime"]) == 0
    by_hand = keys(engines)
    out = tmp_path / "c.json"
    for n in (4, 5):
        data = samples(tmp_path, f"seq7_{n}.npz", (n, 7, 4), "tokens")
        assert main(["compare", str(dynamic_seq_model), "--inputs", str(data), "--engines", str(engines),
                     "--out", str(out), *QUICK]) == 0
        assert keys(engines) == by_hand
    assert {json.dumps(e["spec"]["shapes"]) for e in entries(engines)} == {'{"tokens": [1, 7, 4]}'}
    eight = samples(tmp_path, "seq8.npz", (4, 8, 4), "tokens")
    assert main(["compare", str(dynamic_seq_model), "--inputs", str(eight), "--engines", str(engines),
                 "--out", str(out), *QUICK]) == 0
    assert len(keys(engines) - by_hand) == 2
