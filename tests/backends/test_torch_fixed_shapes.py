"""The torch backend at fixed shapes (issue 43) on CPU torch + onnx2torch: a graph with shape arithmetic
is folded at each batch size before conversion, the converted module has no host-side shape code and
runs under torch.export, one engine holds one module per batch size (its cache key keeps the batch
sizes, its JSON says what was folded), fp16 leaves no float32 tensor behind, other shapes convert the
unfolded graph. The machine is faked where the CLI asks for a GPU; modules, exports and files are real."""
from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import pytest

from tests.convert.shape_graphs import data_dependent_model, pad_cumsum_model, run_ort, shape_arithmetic_model
from trtprof.backends import torch as torch_backend
from trtprof.backends import torch_artifact
from trtprof.backends.base import Availability
from trtprof.errors import BadModel
from trtprof.spec import BuildSpec, Precision

pytestmark = pytest.mark.skipif(importlib.util.find_spec("torch") is None
                                or importlib.util.find_spec("onnx2torch") is None,
                                reason="torch or onnx2torch missing")
HOST_SHAPE_KINDS = {"OnnxShape", "OnnxConstantOfShape", "OnnxRange", "OnnxReshape", "OnnxSlice", "OnnxExpand",
                    "OnnxTile"}


@pytest.fixture
def fake_gpu_machine(monkeypatch):
    monkeypatch.setattr(torch_backend.TorchBackend, "available", lambda self: Availability(True))
    monkeypatch.setattr(torch_backend.TorchBackend, "environment",
                        lambda self: {"backend": "torch", "gpu": "fake-for-cpu-test", "torch": "cpu"})


def _build(engines: Path, model: Path, flag: str = "--fp32", batch_sizes: str = "1,3"):
    from trtprof.cli import main
    from trtprof.engines.cache import list_engines

    assert main(["build", "--backend", "torch", flag, str(model), "--engines", str(engines),
                 "--batch-sizes", batch_sizes]) == 0
    precision = flag.lstrip("-")
    return [r for r in list_engines(engines) if r.precision == precision]


def _x(batch: int) -> np.ndarray:
    return np.random.default_rng(batch).standard_normal((batch, 4, 8)).astype(np.float32)


def _never_convert(monkeypatch):
    onnx2torch = torch_backend.import_onnx2torch()
    monkeypatch.setattr(onnx2torch, "convert", lambda _m: pytest.fail("onnx2torch.convert was called on a load"))


def test_each_batch_size_gets_a_folded_exported_module_that_computes_the_graph(tmp_path, fake_gpu_machine,
                                                                             monkeypatch):
    model = shape_arithmetic_model(tmp_path / "shapes.onnx")  # with an If on the size: onnx2torch has no If
    (record,) = _build(tmp_path / "engines", tmp_path / "shapes.onnx")
    meta = record.backend_metadata
    assert meta["fixed_batches"] == [1, 3] and meta["module_loaded_by"] == torch_artifact.LOADED_EXPORTED
    for batch, fold in zip((1, 3), meta["fixed_shapes"]):
        assert fold["fixed_batch"] == batch and fold["input_shapes"] == {"x": [batch, 4, 8]}
        assert fold["remaining_shape_ops"] == {} and fold["host_shape_modules"] == {}
        assert {"Shape", "Range", "ConstantOfShape", "If", "Concat"} <= set(fold["folded"])
        assert fold["static_arguments"] == {"OnnxReshape": 2, "OnnxSlice": 1, "OnnxExpand": 1, "OnnxTile": 1,
                                            "OnnxGather": 1}
        assert fold["module_loaded_by"] == torch_artifact.LOADED_EXPORTED
        (note,) = [n for n in record.notes if n.startswith(f"batch {batch}: ")]
        assert f"shapes fixed at x {batch}x4x8 and folded (onnxruntime " in note
        assert note.endswith("torch.export program saved: loads read it without converting")
    saved = torch_artifact.read_artifact(record.artifact_path)
    assert saved.manifest["format"] == torch_artifact.FORMAT and [e.batch for e in saved.fixed] == [1, 3]
    assert all(e.shared == ("W", "B") for e in saved.fixed)  # the weights are stored once, in model.onnx
    _never_convert(monkeypatch)
    runner = torch_backend.runner_from_artifact(record.artifact_path, record, device="cpu")
    assert runner.module is None  # loaded when its shapes are met
    for batch in (3, 1):
        assert runner.prepare({"x": (batch, 4, 8)}) == {"out": (batch, 16)}
        assert runner.loaded_by == torch_artifact.LOADED_EXPORTED and runner.fixed_batch == batch
        want = run_ort(model, {"x": _x(batch)})[0]
        np.testing.assert_allclose(runner.infer({"x": _x(batch)})["out"], want, rtol=1e-5, atol=1e-5)


def test_the_folded_module_has_no_host_shape_code_and_exports_where_the_unfolded_one_does_not(tmp_path):
    import torch

    from trtprof.backends.torch_static import bake_constant_arguments, host_shape_modules
    from trtprof.convert.fixed_shapes import fold_shapes

    model = shape_arithmetic_model(with_if=False)  # onnx2torch converts it unfolded too
    x = torch.from_numpy(_x(2))
    unfolded = torch_backend.to_torch_module(model).eval()
    assert set(host_shape_modules(unfolded)) >= {"OnnxShape", "OnnxRange", "OnnxConstantOfShape", "OnnxReshape"}
    with pytest.raises(Exception):  # what issue 43 measured on ViT and BERT: the host code cannot be traced
        torch.export.export(unfolded, (x,))
    folded = torch_backend.to_torch_module(fold_shapes(model, {"x": (2, 4, 8)}).model).eval()
    baked = bake_constant_arguments(folded)
    assert baked and host_shape_modules(folded) == {}
    kinds = {type(m).__name__ for m in folded.modules()}
    assert not kinds & HOST_SHAPE_KINDS and "OnnxGather" not in kinds  # the scalar Gather is a select now
    with torch.no_grad():
        want, got = unfolded(x), folded(x)
    assert torch.equal(got, want)  # the same ATen ops on the same values
    program = torch.export.export(folded, (x,))
    called = {str(n.target) for n in program.graph.nodes if n.op == "call_function"}
    assert not any("item" in c or "_local_scalar_dense" in c for c in called)  # nothing read back to the host
    assert torch.equal(program.module()(x), want)


def test_fp16_from_a_folded_graph_leaves_no_float32_tensor(tmp_path, fake_gpu_machine):
    """The constants folding creates (the Sqrt(Cast(size)) scale, the expanded 0.5 mask) are float32
    initializers: the fp16 module holds them in float16 like every weight (issue 43 item 3)."""
    import torch

    shape_arithmetic_model(tmp_path / "shapes.onnx")
    (record,) = _build(tmp_path / "engines", tmp_path / "shapes.onnx", "--fp16", "2")
    assert record.backend_metadata["fixed_shapes"][0]["low_precision_tensors"]["tensors"] >= 4
    runner = torch_backend.runner_from_artifact(record.artifact_path, record, device="cpu")
    runner.prepare({"x": (2, 4, 8)})
    assert runner.loaded_by == torch_artifact.LOADED_EXPORTED

    def float32_tensors(module):
        found = [n for n, t in list(module.named_parameters()) + list(module.named_buffers()) if t.dtype == torch.float32]
        for sub_name, sub in module.named_modules():
            found += [f"{sub_name}.{k}" for k, v in vars(sub).items()
                      if isinstance(v, torch.Tensor) and v.dtype == torch.float32]
        return found

    exported = runner.module
    assert float32_tensors(exported) == []
    assert runner.use_converted_module("checking the conversion too")
    assert float32_tensors(runner.module) == []
    halves = [t for t in list(runner.module.buffers()) if t.is_floating_point()]
    assert halves and all(t.dtype == torch.float16 for t in halves)
    out = runner.infer({"x": _x(2)})["out"]
    want = run_ort(shape_arithmetic_model(), {"x": _x(2)})[0]
    assert np.abs(out - want).max() <= 2e-2 * np.abs(want).max()


def test_other_shapes_convert_the_unfolded_graph_and_say_so(tmp_path, fake_gpu_machine):
    model = shape_arithmetic_model(tmp_path / "plain.onnx", with_if=False)
    (record,) = _build(tmp_path / "engines", tmp_path / "plain.onnx", batch_sizes="2")
    runner = torch_backend.runner_from_artifact(record.artifact_path, record, device="cpu")
    assert runner.prepare({"x": (4, 4, 8)}) == {"out": (4, 16)}
    assert runner.loaded_by == ("onnx2torch (no fixed-shape module for these shapes: the engine has batch 2)")
    assert runner.fixed_batch is None
    np.testing.assert_allclose(runner.infer({"x": _x(4)})["out"], run_ort(model, {"x": _x(4)})[0], rtol=1e-5, atol=1e-5)
    runner.prepare({"x": (2, 4, 8)})
    assert runner.loaded_by == torch_artifact.LOADED_EXPORTED and runner.fixed_batch == 2


def test_other_shapes_of_a_graph_only_its_folds_convert_are_one_line(tmp_path, fake_gpu_machine):
    shape_arithmetic_model(tmp_path / "with_if.onnx")
    (record,) = _build(tmp_path / "engines", tmp_path / "with_if.onnx", batch_sizes="2")
    runner = torch_backend.runner_from_artifact(record.artifact_path, record, device="cpu")
    with pytest.raises(BadModel, match=r"built at fixed shapes for batch 2; the unfolded graph, which other shapes "
                                       r"need, does not convert \(.*If.*\): build it at this batch size"):
        runner.prepare({"x": (5, 4, 8)})


def test_per_layer_profiling_gets_the_folded_graph_one_submodule_per_node(tmp_path, fake_gpu_machine):
    from trtprof.layers.torch_profile import per_node_module

    shape_arithmetic_model(tmp_path / "shapes.onnx")
    (record,) = _build(tmp_path / "engines", tmp_path / "shapes.onnx", batch_sizes="3")
    runner = torch_backend.runner_from_artifact(record.artifact_path, record, device="cpu")
    runner.prepare({"x": (3, 4, 8)})
    module = per_node_module(runner)
    assert runner.loaded_by == "onnx2torch (per-layer ranges need one submodule per ONNX node)"
    names = {name for name, _ in module.named_children()}
    assert {"matmul", "reshape", "slice_half"} <= names and "shape" not in names and "if_on_size" not in names


def test_the_cache_key_keeps_the_batch_sizes_where_folding_applies(tmp_path, conv_model, fake_gpu_machine):
    import onnx

    from trtprof.builder.pipeline import key_spec

    shape_arithmetic_model(tmp_path / "shapes.onnx")
    folded_proto, plain_proto = onnx.load(str(tmp_path / "shapes.onnx")), onnx.load(str(conv_model))

    def spec(batches, precision=Precision.FP32):
        return BuildSpec.make(model_sha256="x", backend="torch", precision=precision, batch_sizes=batches)

    assert key_spec(spec([1]), folded_proto).batch_sizes == (1,)
    assert key_spec(spec([1, 64]), folded_proto).batch_sizes == (1, 64)
    assert key_spec(spec([1]), folded_proto) != key_spec(spec([1, 64]), folded_proto)
    assert key_spec(spec([1]), plain_proto) == key_spec(spec([1, 64]), plain_proto)  # no shape arithmetic
    assert key_spec(spec([1, 64]), plain_proto).batch_sizes == ()
    assert key_spec(spec([1, 64], Precision.FP8), folded_proto).batch_sizes == ()  # fp8 is not folded
    assert key_spec(BuildSpec.make(model_sha256="x", backend="onnxruntime", precision=Precision.FP32,
                                   batch_sizes=[1, 64]), folded_proto).batch_sizes == ()  # not a fixed-shape backend
    engines = tmp_path / "engines"
    (one,) = _build(engines, tmp_path / "shapes.onnx", batch_sizes="1")
    both = _build(engines, tmp_path / "shapes.onnx", batch_sizes="1,3")
    assert len(both) == 2 and {r.key for r in both} > {one.key}  # a second engine, not the batch-1 one reused
    again = _build(engines, tmp_path / "shapes.onnx", batch_sizes="1")
    assert {r.key for r in again} == {r.key for r in both}  # …and the batch-1 one is a cache hit
    first = _build(tmp_path / "plain", conv_model, batch_sizes="1")
    second = _build(tmp_path / "plain", conv_model, batch_sizes="1,3")
    assert [r.key for r in first] == [r.key for r in second]  # one engine serves every batch set there


def test_a_graph_whose_shapes_stay_dynamic_is_built_as_written_with_the_note(tmp_path, fake_gpu_machine):
    data_dependent_model(tmp_path / "nonzero.onnx")
    (record,) = _build(tmp_path / "engines", tmp_path / "nonzero.onnx", batch_sizes="2")
    note = record.backend_metadata["fixed_shapes_note"]
    assert note.startswith("shapes not folded at x 2x8: its shapes stay dynamic: data-dependent op(s) NonZero")
    assert note in record.notes and "fixed_shapes" not in record.backend_metadata
    assert not torch_artifact.read_artifact(record.artifact_path).fixed


def test_pad_and_cumsum_get_constant_arguments_and_cumsum_runs_in_onnx_order():
    """onnx2torch 1.5 reads CumSum without ``reverse`` as reversed (ONNX: forward): the backend writes the
    default out before converting, so the module computes what ONNX Runtime does; Pad's pads and fill
    and CumSum's axis become Python values (no host read of a buffer, torch.export captures it)."""
    import torch

    from trtprof.backends.torch_static import bake_constant_arguments, host_shape_modules

    model = pad_cumsum_model()
    x = np.random.default_rng(0).standard_normal((3, 6)).astype(np.float32)
    want = run_ort(model, {"x": x})[0]
    module = torch_backend.to_torch_module(model).eval()
    assert [a.i for n in model.graph.node if n.op_type == "CumSum" for a in n.attribute if a.name == "reverse"] == [0]
    assert set(host_shape_modules(module)) == {"OnnxPadDynamic", "OnnxCumSum"}
    with torch.no_grad():
        before = module(torch.from_numpy(x))
    np.testing.assert_allclose(before.numpy(), want, rtol=1e-6, atol=1e-6)
    assert bake_constant_arguments(module) == {"OnnxPadDynamic": 1, "OnnxCumSum": 1}
    assert host_shape_modules(module) == {}
    with torch.no_grad():
        after = module(torch.from_numpy(x))
    assert torch.equal(after, before)
    program = torch.export.export(module, (torch.from_numpy(x),))
    assert torch.equal(program.module()(torch.from_numpy(x)), before)
