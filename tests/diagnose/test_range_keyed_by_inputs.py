"""Issue 36, deliverable 6: the FP16 range analysis an FP16 build records is keyed by the inputs it ran
on. Was: a cache hit with other --inputs kept the earlier analysis (values of 1e38 read "0 overflow
risks", while a fresh build found them), and compare printed both."""
from __future__ import annotations

from pathlib import Path

import numpy as np


def _build(model: Path, engines: Path, data_path: Path | None):
    from trtprof.builder.pipeline import BuildSettings, build_engines
    from trtprof.model.user_inputs import load_inputs
    from trtprof.spec import Precision

    data = load_inputs(str(data_path)) if data_path is not None else None
    [outcome] = build_engines(model, [Precision.FP16], [2], BuildSettings(engines_dir=engines, backend="onnxruntime",
                                                                         data=data))
    return outcome


def _inputs_npz(path: Path, value: float) -> Path:
    np.savez(path, input=np.full((4, 3, 16, 16), value, np.float32))
    return path


def _overflow_findings(outcome) -> int:
    return outcome.record.backend_metadata["fp16_range"]["overflow_risks"]


def test_a_cache_hit_with_other_inputs_reruns_the_analysis(conv_model, tmp_path):
    engines = tmp_path / "e"
    calm = _build(conv_model, engines, _inputs_npz(tmp_path / "calm.npz", 0.5))
    assert calm.built
    assert "calm.npz" in calm.record.backend_metadata["fp16_range"]["inputs"]
    wild = _build(conv_model, engines, _inputs_npz(tmp_path / "wild.npz", 1e38))
    assert not wild.built  # the engine itself is the same: a cache hit
    assert "wild.npz" in wild.record.backend_metadata["fp16_range"]["inputs"]
    fresh = _build(conv_model, tmp_path / "fresh", tmp_path / "wild.npz")  # what a fresh build finds
    assert fresh.built and _overflow_findings(fresh) > 0
    assert _overflow_findings(wild) == _overflow_findings(fresh)
    lines = fresh.record.backend_metadata["fp16_range_lines"]
    assert lines and all(wild.record.notes.count(line) == 1 for line in lines)
    stale = [line for line in calm.record.backend_metadata["fp16_range_lines"] if line not in lines]
    assert not any(line in wild.record.notes for line in stale)


def test_the_same_inputs_again_reuse_the_recorded_analysis(conv_model, tmp_path, monkeypatch):
    from trtprof.convert import fp16range

    engines = tmp_path / "e"
    _build(conv_model, engines, _inputs_npz(tmp_path / "calm.npz", 0.5))
    calls = []
    real = fp16range.for_build
    monkeypatch.setattr(fp16range, "for_build", lambda *a, **k: calls.append(1) or real(*a, **k))
    again = _build(conv_model, engines, tmp_path / "calm.npz")
    assert not again.built and calls == []  # same bytes: nothing rerun
    random_inputs = _build(conv_model, engines, None)
    assert not random_inputs.built and calls == [1]  # random inputs are other inputs
    assert random_inputs.record.backend_metadata["fp16_range"]["inputs"] == "random inputs"
