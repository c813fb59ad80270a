"""Issue 41, item 3: one model value. The user's file becomes one ``OnnxModel`` once (``builder.pipeline.
load_model``: parsed by ``onnx_model.load_onnx``), and that value travels through the build, compare, the
serving sweep after it and fix-fp16's builds, under the name ``model``; nothing downstream parses the file
again. The count of ``load_onnx`` calls outside the backends is the check (it parsed the file twice in a
compare with a serving sweep, three times in a fix-fp16 run); a backend's build of a new engine reads the
file itself (its build takes a file: ``backends/*``) and is not counted."""
from __future__ import annotations

import inspect
import json
from pathlib import Path

import numpy as np
import pytest

import trtprof
from trtprof.cli import main
from trtprof.model import onnx_model

pytest.importorskip("onnxruntime")


@pytest.fixture
def parses(monkeypatch):
    """Every file ``load_onnx`` parses outside a backend's build, in order (the real parse still runs)."""
    seen: list[str] = []
    real = onnx_model.load_onnx
    backends_dir = str(Path(trtprof.__file__).parent / "backends")

    def counting(path, *args, **kwargs):
        if not any(frame.filename.startswith(backends_dir) for frame in inspect.stack()[1:]):
            seen.append(str(path))
        return real(path, *args, **kwargs)

    monkeypatch.setattr(onnx_model, "load_onnx", counting)
    return seen


def test_a_compare_with_a_serving_sweep_parses_the_model_once(conv_model, tmp_path, parses):
    out = tmp_path / "c.json"
    assert main(["compare", str(conv_model), "--engines", str(tmp_path / "e"), "--backend", "onnxruntime",
                 "--batch-sizes", "1", "--time-budget-s", "0.5", "--round-iterations", "5", "--in-process",
                 "--concurrency", "1", "--window-s", "0.05", "--serving-rounds", "2", "--out", str(out)]) == 0
    data = json.loads(out.read_text())
    assert data["serving"]["points"] and {p["precision"] for p in data["serving"]["points"]} == {"fp32", "fp16"}
    assert parses == [str(conv_model)]


def test_fix_fp16_parses_the_model_once(tmp_path, parses):
    from .test_fix_fp16 import FAST, cancellation_model

    model = cancellation_model(tmp_path / "m.onnx")
    npz = tmp_path / "x.npz"
    np.savez(npz, x=np.random.default_rng(3).standard_normal((24, 64)).astype(np.float32))
    out = tmp_path / "fix.json"
    assert main(["fix-fp16", str(model), "--engines", str(tmp_path / "e"), "--batch-size", "8", "--out", str(out),
                 "--inputs", str(npz), "--accuracy", "cosine>=0.9999", *FAST]) == 0
    data = json.loads(out.read_text())
    assert data["fix_fp16"]["keep"] == ["shift", "unshift"] and data["comparisons"]  # found, then measured
    assert parses == [str(model)]


def test_a_model_read_once_builds_and_finds_what_its_path_does(conv_model, tmp_path):
    """``build_model_engines`` on the ``OnnxModel`` a build returned finds the engine that ``build_engines`` on
    the path built (one key, one name), and hands that same value on."""
    from trtprof.builder.pipeline import BuildSettings, build_engines, build_model_engines, load_model
    from trtprof.spec import Precision

    settings = BuildSettings(engines_dir=tmp_path / "e", backend="onnxruntime")
    (first,) = build_engines(conv_model, [Precision.FP32], [1], settings)
    (again,) = build_model_engines(first.model, [Precision.FP32], [1], settings)
    assert first.built and not again.built and again.model is first.model
    assert (again.record.key, again.record.model, again.record.model_path) == \
        (first.record.key, "convnet", str(conv_model.resolve()))
    loaded = load_model(conv_model, settings)
    assert loaded.origin is None and loaded.user_path == conv_model and loaded.sha256 == first.model.sha256
