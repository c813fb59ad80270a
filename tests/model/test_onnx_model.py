"""model.onnx_model.OnnxModel: the model read once (issue 32 #3), checked through the real CLI path."""
from __future__ import annotations

import json
from pathlib import Path

import onnx
import pytest

from trtprof.cli import main
from trtprof.model import onnx_model
from trtprof.model.onnx_model import OnnxModel, as_model, inspect_model


def test_the_loaded_model_has_the_file_s_hash_and_specs(conv_model):
    model = OnnxModel.load(conv_model)
    info = inspect_model(conv_model)
    assert model.sha256 == onnx_model.sha256_file(conv_model) == info.sha256
    assert model.inputs == info.inputs and model.outputs == info.outputs and model.path == conv_model
    assert len(model.proto.graph.node) == len(onnx.load(str(conv_model)).graph.node)
    assert as_model(model) is model and as_model(None) is None and as_model(conv_model).sha256 == model.sha256


def test_a_model_with_its_weights_beside_it_loads_them(tmp_path, conv_model):
    """External data: the bytes read once are the graph; the weights are read from beside it, as onnx.load does."""
    proto = onnx.load(str(conv_model))
    out = tmp_path / "ext" / "model.onnx"
    out.parent.mkdir()
    onnx.save_model(proto, str(out), save_as_external_data=True, all_tensors_to_one_file=True, location="w.bin",
                    size_threshold=0)
    loaded = OnnxModel.load(out)
    assert (out.parent / "w.bin").stat().st_size > 0
    assert [t.raw_data or t.float_data for t in loaded.proto.graph.initializer] == \
        [t.raw_data or t.float_data for t in onnx.load(str(out)).graph.initializer]


@pytest.mark.parametrize("content, cause", [(b"", "file is empty"), (b"not onnx at all", "not")])
def test_a_bad_file_is_one_bad_model_line(tmp_path, content, cause):
    from trtprof.errors import BadModel

    bad = tmp_path / "bad.onnx"
    bad.write_bytes(content)
    with pytest.raises(BadModel, match=cause):
        OnnxModel.load(bad)


def test_compare_reads_the_model_file_once(conv_model, tmp_path, monkeypatch):
    """`trtprof compare` with cached engines (fp32 and fp16: the FP16 range analysis runs; --layers at
    two batch sizes: the per-layer graph facts per batch size): the source file is read by
    OnnxModel.load once and by nothing else (no onnx.load, no hash of it, no second OnnxModel.load).
    The range analysis and the graph column are there, so none of them was skipped for want of the model."""
    engines, out = tmp_path / "e", tmp_path / "c.json"
    argv = ["compare", str(conv_model), "--batch-sizes", "1,2", "--engines", str(engines), "--out", str(out),
            "--backend", "onnxruntime", "--in-process", "--time-budget-s", "1", "--layers"]
    assert main(argv) == 0  # builds the engines (the backend's build reads the file: it takes a path)
    reads: list[str] = []
    real_load, real_hash, real_model_load = onnx.load, onnx_model.sha256_file, OnnxModel.load.__func__

    def counting_onnx_load(f, *a, **k):
        if Path(str(f)).resolve() == conv_model.resolve():
            reads.append("onnx.load")
        return real_load(f, *a, **k)

    def counting_hash(path):
        if Path(path).resolve() == conv_model.resolve():
            reads.append("sha256_file")
        return real_hash(path)

    def counting_model_load(cls, path):
        if Path(path).resolve() == conv_model.resolve():
            reads.append("OnnxModel.load")
        return real_model_load(cls, path)

    monkeypatch.setattr(onnx, "load", counting_onnx_load)
    monkeypatch.setattr(onnx_model, "sha256_file", counting_hash)
    monkeypatch.setattr(OnnxModel, "load", classmethod(counting_model_load))
    assert main(argv) == 0
    assert reads == ["OnnxModel.load"]
    data = json.loads(out.read_text())
    assert data["comparisons"][0]["accuracy"]["predicted"] is not None  # the range analysis ran on the model
    assert not data["comparisons"][0]["accuracy"]["predicted"].get("skipped")
    assert set(data["layers"]) == {"1", "2"}
    assert all(any(row["graph"] for row in t["rows"]) for t in data["layers"].values())  # graph facts per batch
