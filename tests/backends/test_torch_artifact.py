"""The torch backend's engine file (backends/torch_artifact.py) on CPU torch: the module converted once at
build and captured by torch.export, loaded without onnx2torch, computing what the conversion computes;
the fall-backs (export impossible, shapes the program refuses, a program this torch cannot read, per-layer
profiling) and the refusal of pickled tensors. The machine is faked where the CLI asks for a GPU (a named
stand-in: CPU-only CI has none); the modules, the export and the files are real."""
from __future__ import annotations

import importlib.util
import io
import json
import zipfile
from pathlib import Path

import numpy as np
import pytest

from trtprof.backends import torch as torch_backend
from trtprof.backends import torch_artifact
from trtprof.backends.base import Availability
from trtprof.errors import BadModel
from trtprof.spec import Precision

pytestmark = pytest.mark.skipif(importlib.util.find_spec("torch") is None
                                or importlib.util.find_spec("onnx2torch") is None,
                                reason="torch or onnx2torch missing")


@pytest.fixture
def fake_gpu_machine(monkeypatch):
    monkeypatch.setattr(torch_backend.TorchBackend, "available", lambda self: Availability(True))
    monkeypatch.setattr(torch_backend.TorchBackend, "environment",
                        lambda self: {"backend": "torch", "gpu": "fake-for-cpu-test", "torch": "cpu"})


def _build(tmp_path, model, precision_flag="--fp32", batch_sizes="2"):
    from trtprof.cli import main
    from trtprof.engines.cache import list_engines

    engines = tmp_path / f"engines{precision_flag}{batch_sizes}"
    assert main(["build", "--backend", "torch", precision_flag, str(model), "--engines", str(engines),
                 "--batch-sizes", batch_sizes]) == 0
    (record,) = list_engines(engines)
    return record


def _feeds(batch, seed=0):
    return {"input": np.random.default_rng(seed).standard_normal((batch, 3, 16, 16)).astype(np.float32)}


def _never_convert(monkeypatch):
    onnx2torch = torch_backend.import_onnx2torch()

    def refused(_model):
        raise AssertionError("onnx2torch.convert was called on a load of an exported engine")

    monkeypatch.setattr(onnx2torch, "convert", refused)


@pytest.mark.parametrize("flag,precision,tol", [("--fp32", Precision.FP32, 1e-5), ("--fp16", Precision.FP16, 0.0)])
def test_a_load_reads_the_saved_program_without_converting_and_computes_the_same(tmp_path, conv_model, fake_gpu_machine,
                                                                               monkeypatch, flag, precision, tol):
    record = _build(tmp_path, conv_model, flag, "1,4")
    assert record.artifact.endswith(".torch.zip")
    assert record.backend_metadata["module_loaded_by"] == torch_artifact.LOADED_EXPORTED
    assert any("torch.export program saved" in n for n in record.notes)
    saved = torch_artifact.read_artifact(record.artifact_path)
    converted = torch_backend.runner_from_proto(torch_backend.onnx_proto(saved.onnx_bytes, record.artifact_path),
                                                precision, tuple(record.inputs), tuple(record.outputs), device="cpu")
    if precision is Precision.FP16:
        # CPU half convolutions: compare at the precision's scale; the saved weights are the converted ones
        tol = 5e-3
    _never_convert(monkeypatch)
    runner = torch_backend.runner_from_artifact(record.artifact_path, record, device="cpu")
    assert runner.loaded_by == torch_artifact.LOADED_EXPORTED
    for batch in (1, 3, 4):  # dim 0 is dynamic: batch 1 and sizes never built still run the same program
        want, got = converted.infer(_feeds(batch)), runner.infer(_feeds(batch))
        np.testing.assert_allclose(got["logits"], want["logits"], rtol=tol, atol=tol)
    weights = [p for p in runner.module.parameters() if p.dim() == 4]
    assert weights and all(p.dtype.is_floating_point and str(p.dtype) == ("torch.float16" if precision is Precision.FP16
                                                                            else "torch.float32") for p in weights)


def test_an_export_that_fails_keeps_the_onnx_graph_and_says_loads_convert(tmp_path, conv_model, fake_gpu_machine,
                                                                         monkeypatch):
    import torch

    def cannot(*_a, **_k):  # what torch.export raises on data-dependent shapes, stood in for here
        raise RuntimeError("Could not guard on data-dependent expression u0 > 1\nlong C++ context")

    monkeypatch.setattr(torch.export, "export", cannot)
    record = _build(tmp_path, conv_model)
    assert record.backend_metadata["module_loaded_by"] == torch_artifact.LOADED_CONVERTED
    (note,) = [n for n in record.notes if "torch.export" in n]
    assert note == ("torch.export could not capture the module (RuntimeError: Could not guard on data-dependent "
                    "expression u0 > 1)")
    saved = torch_artifact.read_artifact(record.artifact_path)
    assert saved.exported is None and saved.manifest["loaded_by"] == torch_artifact.LOADED_CONVERTED
    runner = torch_backend.runner_from_artifact(record.artifact_path, record, device="cpu")
    assert runner.loaded_by == torch_artifact.LOADED_CONVERTED and runner.reconvert is None
    assert runner.infer(_feeds(2))["logits"].shape == (2, 10)


def test_a_program_that_computes_something_else_is_not_saved(tmp_path, conv_model, fake_gpu_machine, monkeypatch):
    real = torch_artifact.exported_module

    def off_by_a_little(torch, data, path=None):
        module = real(torch, data, path)
        return lambda *xs: module(*xs) * (1 + 2e-4)  # twice fp32's tolerance (MATCH_TOLERANCE 1e-4)

    monkeypatch.setattr(torch_artifact, "exported_module", off_by_a_little)
    record = _build(tmp_path, conv_model)
    assert record.backend_metadata["module_loaded_by"] == torch_artifact.LOADED_CONVERTED
    assert any("does not compute what onnx2torch's does (output 0: max |difference|" in n for n in record.notes)


def test_compare_outputs_threshold_just_inside_and_outside():
    import torch

    want = [torch.tensor([[1.0, -4.0]])]
    tol = torch_artifact.MATCH_TOLERANCE["float32"]
    assert torch_artifact.compare_outputs(torch, torch.tensor([[1.0, -4.0 + 4 * tol * 0.9]]), want, tol) == ""
    assert "max |difference|" in torch_artifact.compare_outputs(torch, torch.tensor([[1.0, -4.0 + 4 * tol * 1.1]]),
                                                                want, tol)
    assert "output 0: (1, 3)" in torch_artifact.compare_outputs(torch, torch.zeros(1, 3), want, tol)
    assert torch_artifact.compare_outputs(torch, (want[0], want[0]), want, tol) == "2 outputs, not 1"
    ints = [torch.tensor([1, 2])]
    assert torch_artifact.compare_outputs(torch, torch.tensor([1, 3]), ints, tol) == "output 0: integer values differ"


def test_shapes_the_program_refuses_swap_to_the_conversion_and_say_so(tmp_path, fake_gpu_machine):
    """A program exported with a static batch (the model's batch dim is fixed at 2) refuses batch 3 in
    its guard: the runner converts the graph instead of failing, and says why."""
    from trtprof.model.demo import make_demo_model
    import onnx

    path = tmp_path / "static.onnx"
    make_demo_model(path, channels=8, image=16, classes=10)
    proto = onnx.load(str(path))
    proto.graph.input[0].type.tensor_type.shape.dim[0].dim_value = 2
    proto.graph.output[0].type.tensor_type.shape.dim[0].dim_value = 2
    onnx.save(proto, str(path))
    record = _build(tmp_path, path)
    assert record.backend_metadata["module_loaded_by"] == torch_artifact.LOADED_EXPORTED
    runner = torch_backend.runner_from_artifact(record.artifact_path, record, device="cpu")
    assert runner.prepare({"input": (2, 3, 16, 16)}) == {"logits": (2, 10)}
    assert runner.loaded_by == torch_artifact.LOADED_EXPORTED
    assert runner.prepare({"input": (3, 3, 16, 16)}) == {"logits": (3, 10)}
    assert runner.loaded_by.startswith("onnx2torch (the saved program refused these shapes: ")


def test_per_layer_profiling_gets_one_submodule_per_onnx_node(tmp_path, conv_model, fake_gpu_machine):
    from trtprof.layers.torch_profile import per_node_module

    record = _build(tmp_path, conv_model)
    runner = torch_backend.runner_from_artifact(record.artifact_path, record, device="cpu")
    flat = {type(m).__name__ for m in runner.module.modules()}
    module = per_node_module(runner)
    assert runner.loaded_by == "onnx2torch (per-layer ranges need one submodule per ONNX node)"
    kinds = {type(m).__name__ for m in module.modules()}
    assert "Conv2d" in kinds and "Conv2d" not in flat  # onnx2torch's per-node modules, not the flat program
    assert per_node_module(runner) is module  # swapped once


def _pickled(exported: bytes) -> bytes:
    """The same archive with one weight marked ``use_pickle`` (what a crafted engine file would do)."""
    src = zipfile.ZipFile(io.BytesIO(exported))
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as dst:
        for name in src.namelist():
            data = src.read(name)
            if name.endswith("model_weights_config.json"):
                config = json.loads(data)
                first = next(iter(config["config"]))
                config["config"][first]["use_pickle"] = True
                data = json.dumps(config).encode()
            dst.writestr(name, data)
    return out.getvalue()


def test_a_program_with_pickled_tensors_is_refused_before_torch_opens_it(tmp_path, conv_model, fake_gpu_machine,
                                                                        monkeypatch):
    import torch

    record = _build(tmp_path, conv_model)
    saved = torch_artifact.read_artifact(record.artifact_path)
    torch_artifact.check_no_pickled_tensors(saved.exported)  # the real archive passes
    crafted = _pickled(saved.exported)
    monkeypatch.setattr(torch.export, "load", lambda *_a, **_k: pytest.fail("torch.export.load was reached"))
    with pytest.raises(BadModel, match=r"stores 1 tensor\(s\) as pickles .*never unpickles an engine file"):
        torch_artifact.exported_module(torch, crafted, record.artifact_path)


def test_damaged_and_foreign_engine_files_are_one_bad_model_line(tmp_path):
    legacy = tmp_path / "old.torch.onnx"
    legacy.write_bytes(b"\x08\x08")  # an older artifact: the ONNX bytes themselves
    assert torch_artifact.read_artifact(legacy).exported is None
    foreign = tmp_path / "x.torch.zip"
    with zipfile.ZipFile(foreign, "w") as z:
        z.writestr("model.onnx", b"")
    with pytest.raises(BadModel, match="not a trtprof torch engine"):
        torch_artifact.read_artifact(foreign)
    with zipfile.ZipFile(foreign, "w") as z:
        z.writestr("model.onnx", b"")
        z.writestr("manifest.json", json.dumps({"format": "trtprof.torch-artifact/99"}))
    with pytest.raises(BadModel, match="unknown torch engine format"):
        torch_artifact.read_artifact(foreign)
    with pytest.raises(BadModel, match="exported program in the torch engine is damaged"):
        torch_artifact.check_no_pickled_tensors(b"PK\x03\x04 not really")


def test_an_older_onnx_artifact_still_loads_by_converting(tmp_path, conv_model, fake_gpu_machine):
    record = _build(tmp_path, conv_model)
    legacy = tmp_path / "legacy.torch.onnx"
    legacy.write_bytes(torch_artifact.read_artifact(record.artifact_path).onnx_bytes)
    runner = torch_backend.runner_from_artifact(legacy, record, device="cpu")
    assert runner.loaded_by == torch_artifact.LOADED_CONVERTED
    assert runner.infer(_feeds(2))["logits"].shape == (2, 10)


def test_a_format_1_engine_without_fixed_shapes_still_loads(tmp_path, conv_model, fake_gpu_machine):
    """Format 2 added the fixed-shape modules (issue 43); an archive of format 1 is read as before."""
    record = _build(tmp_path, conv_model)
    old = tmp_path / "format1.torch.zip"
    with zipfile.ZipFile(record.artifact_path) as src, zipfile.ZipFile(old, "w") as dst:
        for name in src.namelist():
            data = src.read(name)
            if name == torch_artifact.MANIFEST_MEMBER:
                manifest = json.loads(data)
                assert manifest["format"] == torch_artifact.FORMAT == "trtprof.torch-artifact/2"
                data = json.dumps({**manifest, "format": "trtprof.torch-artifact/1"}).encode()
            dst.writestr(name, data)
    saved = torch_artifact.read_artifact(old)
    assert saved.fixed == () and saved.exported is not None
    runner = torch_backend.runner_from_artifact(old, record, device="cpu")
    assert runner.loaded_by == torch_artifact.LOADED_EXPORTED and runner.fixed is None
    assert runner.infer(_feeds(2))["logits"].shape == (2, 10)
