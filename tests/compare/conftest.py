"""Shared by the compare tests: the count of model parses (issue 41 item 3: one model value) and fix-fp16's
bisection run on the cancellation model (test_fix_fp16, test_one_model_value)."""
from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest


@pytest.fixture
def parses(monkeypatch):
    """Every file parsed outside a backend's build, in order (the real parse still runs): ``load_onnx`` calls
    and ``onnx.load`` calls made elsewhere (a raw ``onnx.load`` parses the file as much as ``load_onnx`` does);
    a backend's build of a new engine reads the file itself (its build takes a file) and is not counted."""
    import onnx

    import trtprof
    from trtprof.model import onnx_model

    seen: list[str] = []
    backends_dir = str(Path(trtprof.__file__).parent / "backends")
    load_onnx, onnx_load = onnx_model.load_onnx, onnx.load

    def outside(*, in_load_onnx: bool = False) -> bool:
        """No caller is a backend (nor ``load_onnx``, whose own ``onnx.load`` it counted already)."""
        frame = sys._getframe(2)
        while frame is not None:
            code = frame.f_code
            if code.co_filename.startswith(backends_dir) or (
                    in_load_onnx and code.co_filename == onnx_model.__file__ and code.co_name == "load_onnx"):
                return False
            frame = frame.f_back
        return True

    def counting_load_onnx(path, *args, **kwargs):
        if outside():
            seen.append(str(path))
        return load_onnx(path, *args, **kwargs)

    def counting_onnx_load(f, *args, **kwargs):
        if isinstance(f, (str, Path)) and outside(in_load_onnx=True):
            seen.append(str(f))
        return onnx_load(f, *args, **kwargs)

    monkeypatch.setattr(onnx_model, "load_onnx", counting_load_onnx)
    monkeypatch.setattr(onnx, "load", counting_onnx_load)
    monkeypatch.setattr(onnx, "load_model", counting_onnx_load)
    return seen


def bisection_run(tmp_path: Path, engines: Path | None = None) -> tuple[Path, Path, dict]:
    """``trtprof fix-fp16`` on ``cancellation_model`` with 24 samples of --inputs at batch 8 and a cosine budget
    of 0.9999 (the bisection's case: the range analysis finds nothing): (the model, the inputs, the JSON)."""
    from trtprof.cli import main

    from .test_fix_fp16 import FAST, cancellation_model

    model = cancellation_model(tmp_path / "m.onnx")
    npz = tmp_path / "x.npz"
    np.savez(npz, x=np.random.default_rng(3).standard_normal((24, 64)).astype(np.float32))
    out = tmp_path / "fix.json"
    assert main(["fix-fp16", str(model), "--engines", str(engines or tmp_path / "e"), "--batch-size", "8",
                 "--out", str(out), "--inputs", str(npz), "--accuracy", "cosine>=0.9999", *FAST]) == 0
    return model, npz, json.loads(out.read_text())
