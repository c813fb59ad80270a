"""Contract tests of the TensorRT backend against a FAKE, recording ``tensorrt`` module.

TensorRT cannot be installed here. These tests check how trtprof drives the TensorRT API — which
calls, with which arguments, in which order, on 8.6 / 10.x / 11.x — and how it reports every failure.
They say nothing about TensorRT's results; tests/backends/test_tensorrt_real.py does that on a GPU machine.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest

from trtprof import backends
from trtprof.backends.tensorrt import TensorRTBackend, compat
from trtprof.backends.tensorrt import device as trt_device
from trtprof.builder.pipeline import BuildSettings, build_engines
from trtprof.errors import BadInput, BuildFailed, CacheCorrupt, IncompatibleEngine, MissingDependency
from trtprof.spec import BuildSpec, Precision

from ..fakes.fake_tensorrt import FAKE_TIMING_CACHE, PLAN_MAGIC, call_names, calls_named, make_fake_tensorrt

FAKE_GPU = trt_device.DeviceInfo(name="Fake GPU (contract tests)", compute_capability="9.0")


def _install(monkeypatch, version: str, gpu: trt_device.DeviceInfo = FAKE_GPU):
    trt = make_fake_tensorrt(version)
    monkeypatch.setitem(sys.modules, "tensorrt", trt)
    monkeypatch.setattr(trt_device, "device_count", lambda: (1, ""))
    monkeypatch.setattr(trt_device, "query_device", lambda index=0: gpu)
    return trt


@pytest.fixture(params=["10.13.0.35", "11.0.0.9"])
def fake_trt(request, monkeypatch):
    return _install(monkeypatch, request.param)


@pytest.fixture
def trt10(monkeypatch):
    return _install(monkeypatch, "10.13.0.35")


@pytest.fixture
def trt11(monkeypatch):
    return _install(monkeypatch, "11.0.0.9")


@pytest.fixture
def trt86(monkeypatch):
    return _install(monkeypatch, "8.6.1.6")


def _spec(model: Path, precision: Precision, batches=(1, 4), **options) -> BuildSpec:
    from trtprof.model.onnx_model import sha256_file

    return BuildSpec.make(model_sha256=sha256_file(model), backend="tensorrt", precision=precision,
                          batch_sizes=batches, options=options)


def _build(model: Path, tmp_path: Path, precision: Precision, **kw):
    out = tmp_path / "engines" / f"e.{precision.value}.plan"
    out.parent.mkdir(parents=True, exist_ok=True)
    spec = _spec(model, precision, **kw)
    report = TensorRTBackend().build(model, spec, out)
    return report, out, spec


def _flag_calls(trt, name: str) -> list:
    return [args[0].name for args in calls_named(trt, f"IBuilderConfig.{name}")]


# ---- availability -------------------------------------------------------------------------------

def test_unavailable_without_tensorrt_names_the_extra():
    if compat_real_tensorrt():
        pytest.skip("a real tensorrt is installed here")
    av = TensorRTBackend().available()
    assert not av.ok and "pip install 'trtprof[tensorrt]'" in av.reason


def compat_real_tensorrt() -> bool:
    import importlib.util

    spec = importlib.util.find_spec("tensorrt")
    return spec is not None and spec.origin is not None


def test_stub_only_namespace_package_is_not_tensorrt(tmp_path, monkeypatch):
    """tensorrt-stubs installs a tensorrt/ folder of .pyi files: importable as an empty namespace."""
    if compat_real_tensorrt():
        pytest.skip("a real tensorrt is installed here")
    (tmp_path / "tensorrt").mkdir()
    (tmp_path / "tensorrt" / "__init__.pyi").write_text("from typing import Any\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "tensorrt", raising=False)
    from trtprof.backends.tensorrt.backend import tensorrt_installed

    assert not tensorrt_installed()
    assert not TensorRTBackend().available().ok
    try:
        with pytest.raises(MissingDependency, match="is not TensorRT"):
            compat.require_tensorrt()
    finally:
        sys.modules.pop("tensorrt", None)  # the namespace module that import just created


def test_no_gpu_is_reported_without_crashing(monkeypatch):
    """With TensorRT importable but no driver/GPU, availability says so (real CUDA runtime query)."""
    if trt_device.device_count()[0] > 0:
        pytest.skip("this machine has a GPU")
    monkeypatch.setitem(sys.modules, "tensorrt", make_fake_tensorrt("10.13.0.35"))
    av = TensorRTBackend().available()
    assert not av.ok and "GPU" in av.reason


def test_build_cli_without_tensorrt_exits_2_naming_the_extra(conv_model, tmp_path, capsys):
    if compat_real_tensorrt():
        pytest.skip("a real tensorrt is installed here")
    from trtprof.cli import main

    code = main(["build", str(conv_model), "--fp16", "--backend", "tensorrt", "--engines", str(tmp_path / "e")])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1
    assert "trtprof[tensorrt]" in err[0]
    assert not (tmp_path / "e").exists() or not any((tmp_path / "e").glob("*.plan"))


def test_importing_the_backend_does_not_import_tensorrt():
    """available() must stay cheap: find_spec and a CUDA query, never the TensorRT import."""
    import subprocess

    code = ("import sys; from trtprof import backends; backends.get('tensorrt').available(); "
            "print('tensorrt' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    assert out.stdout.strip() == "False"


# ---- build: calls, arguments, order -------------------------------------------------------------

def test_fp32_build_on_10x_clears_tf32_and_sets_profile(trt10, conv_model, tmp_path):
    report, out, spec = _build(conv_model, tmp_path, Precision.FP32, batches=(1, 4, 8),
                               workspace_mb=256, builder_optimization_level=4)
    names = call_names(trt10)
    order = ["Builder", "Builder.create_network", "OnnxParser", "OnnxParser.parse_from_file",
             "Builder.create_builder_config", "IBuilderConfig.set_memory_pool_limit",
             "IBuilderConfig.builder_optimization_level", "IBuilderConfig.profiling_verbosity",
             "IBuilderConfig.clear_flag", "IOptimizationProfile.set_shape", "IBuilderConfig.add_optimization_profile",
             "IBuilderConfig.create_timing_cache", "IBuilderConfig.set_timing_cache",
             "Builder.build_serialized_network", "ITimingCache.serialize"]
    positions = [names.index(n) for n in order]
    assert positions == sorted(positions), names
    assert calls_named(trt10, "Builder.create_network") == [(0,)]
    assert calls_named(trt10, "OnnxParser.parse_from_file") == [(str(conv_model),)]
    assert _flag_calls(trt10, "clear_flag") == ["TF32"] and _flag_calls(trt10, "set_flag") == []
    pool, size = calls_named(trt10, "IBuilderConfig.set_memory_pool_limit")[0]
    assert pool.name == "WORKSPACE" and size == 256 * 2**20
    assert calls_named(trt10, "IBuilderConfig.builder_optimization_level") == [(4,)]
    assert [a[0].name for a in calls_named(trt10, "IBuilderConfig.profiling_verbosity")] == ["DETAILED"]
    [(name, low, opt, high)] = calls_named(trt10, "IOptimizationProfile.set_shape")
    assert name == "input" and (low[0], opt[0], high[0]) == (1, 8, 8) and low[1:] == opt[1:] == high[1:] == (3, 16, 16)
    assert out.read_bytes().startswith(PLAN_MAGIC)
    assert (out.parent / "timing.cache").read_bytes() == FAKE_TIMING_CACHE
    meta = report.metadata
    assert meta["tensorrt_version"] == trt10.__version__ and meta["gpu_name"] == FAKE_GPU.name
    assert meta["compute_capability"] == FAKE_GPU.compute_capability and meta["flags"] == ["-TF32"]
    assert meta["profile"]["input"] == {"min": list(low), "opt": list(opt), "max": list(high)}
    assert meta["effective_precision"] == "fp32" and meta["layers_by_precision"] == {"fp32": meta["num_layers"]}


def test_opt_batch_option_sets_the_profile_opt(trt10, conv_model, tmp_path):
    _build(conv_model, tmp_path, Precision.FP32, batches=(1, 4, 8), opt_batch=4)
    [(_, low, opt, high)] = calls_named(trt10, "IOptimizationProfile.set_shape")
    assert (low[0], opt[0], high[0]) == (1, 4, 8)


def test_tf32_build_sets_the_flag(fake_trt, conv_model, tmp_path):
    report, _, _ = _build(conv_model, tmp_path, Precision.TF32)
    assert _flag_calls(fake_trt, "set_flag") == ["TF32"] and _flag_calls(fake_trt, "clear_flag") == []
    assert report.metadata["flags"] == ["TF32"]


def test_fp16_on_10x_uses_the_builder_flag_and_the_fp32_onnx(trt10, conv_model, tmp_path):
    import onnx

    report, _, _ = _build(conv_model, tmp_path, Precision.FP16)
    assert _flag_calls(trt10, "set_flag") == ["FP16"] and _flag_calls(trt10, "clear_flag") == ["TF32"]
    assert "OnnxParser.parse" not in call_names(trt10)
    parsed = trt10.state["parsed_model"]
    assert {i.data_type for i in parsed.graph.initializer} == {onnx.TensorProto.FLOAT}
    meta = report.metadata
    assert meta["effective_precision"] == "fp16" and meta["layers_by_precision"]["fp16"] > 0
    assert meta["reformat_layers"] >= 1 and not meta["strongly_typed"]


def test_fp16_on_11x_feeds_fp16_types_and_sets_no_fp16_flag(trt11, conv_model, tmp_path):
    import onnx

    assert not hasattr(trt11.BuilderFlag, "FP16")
    report, _, _ = _build(conv_model, tmp_path, Precision.FP16, precision_constraints="obey")
    assert _flag_calls(trt11, "set_flag") == [] and _flag_calls(trt11, "clear_flag") == ["TF32"]
    assert calls_named(trt11, "Builder.create_network") == [(0,)]
    [(nbytes, path)] = calls_named(trt11, "OnnxParser.parse")
    assert path == str(conv_model) and nbytes > 0
    parsed = trt11.state["parsed_model"]
    float_inits = {i.data_type for i in parsed.graph.initializer if i.data_type in (1, 10)}
    assert float_inits == {onnx.TensorProto.FLOAT16}
    assert parsed.graph.input[0].type.tensor_type.elem_type == onnx.TensorProto.FLOAT  # IO kept FP32
    meta = report.metadata
    assert meta["strongly_typed"] and meta["fp16_conversion"] == "onnxconverter-common"
    assert sum(meta["onnx_nodes_by_precision"]["fp16"].values()) > 0
    assert any("--precision-constraints ignored" in n for n in report.notes)


def test_fp32_on_11x_parses_the_file_unchanged(trt11, conv_model, tmp_path):
    _build(conv_model, tmp_path, Precision.FP32)
    assert calls_named(trt11, "OnnxParser.parse_from_file") == [(str(conv_model),)]
    assert calls_named(trt11, "Builder.create_network") == [(0,)]


def test_8_6_asks_for_explicit_batch(trt86, conv_model, tmp_path):
    _build(conv_model, tmp_path, Precision.FP32)
    flag = trt86.NetworkDefinitionCreationFlag.EXPLICIT_BATCH
    assert calls_named(trt86, "Builder.create_network") == [(1 << int(flag),)]


def test_fp16_precision_constraints_and_layer_precisions_on_10x(trt10, conv_model, tmp_path):
    report, _, _ = _build(conv_model, tmp_path, Precision.FP16, precision_constraints="obey",
                          layer_precisions="conv0:fp32,fc:fp32")
    assert _flag_calls(trt10, "set_flag") == ["FP16", "OBEY_PRECISION_CONSTRAINTS"]
    set_on = {(name, value.name) for name, value in calls_named(trt10, "ILayer.precision")}
    assert set_on == {("conv0", "FLOAT"), ("fc", "FLOAT")}
    assert report.metadata["layer_precisions"] == ["conv0:fp32", "fc:fp32"]


def test_layer_precisions_wildcard_and_default_prefer(trt10, conv_model, tmp_path):
    report, _, _ = _build(conv_model, tmp_path, Precision.FP16, layer_precisions="*:fp32,conv1:fp16")
    assert "PREFER_PRECISION_CONSTRAINTS" in _flag_calls(trt10, "set_flag")
    set_on = dict((name, value.name) for name, value in calls_named(trt10, "ILayer.precision"))
    assert set_on["conv1"] == "HALF" and set_on["conv0"] == "FLOAT"
    assert any("prefer" in n for n in report.notes)


def test_layer_precisions_naming_no_layer_is_an_error(trt10, conv_model, tmp_path):
    with pytest.raises(BadInput, match="nosuchlayer"):
        _build(conv_model, tmp_path, Precision.FP16, layer_precisions="nosuchlayer:fp32")


def test_layer_precisions_on_11x_keep_named_nodes_fp32(trt11, conv_model, tmp_path):
    import onnx

    _build(conv_model, tmp_path, Precision.FP16, layer_precisions="fc:fp32")
    parsed = trt11.state["parsed_model"]
    fc_w = next(i for i in parsed.graph.initializer if i.name == "fc.w")
    assert fc_w.data_type == onnx.TensorProto.FLOAT
    with pytest.raises(BadInput, match="strongly typed"):
        _build(conv_model, tmp_path, Precision.FP16, layer_precisions="*:fp32")


@pytest.mark.parametrize("options, message", [
    ({"workspace_mb": 0}, "--workspace-mb"),
    ({"builder_optimization_level": 9}, "--builder-opt-level"),
    ({"precision_constraints": "strict"}, "--precision-constraints"),
    ({"layer_precisions": "conv0:int8"}, "--layer-precisions"),
    ({"opt_batch": 16}, "--opt-batch"),
])
def test_bad_options_fail_before_building(trt10, conv_model, tmp_path, options, message):
    with pytest.raises(BadInput, match=message):
        _build(conv_model, tmp_path, Precision.FP16, **options)
    assert "Builder.build_serialized_network" not in call_names(trt10)


def test_layer_precisions_need_fp16_on_10x(trt10, conv_model, tmp_path):
    with pytest.raises(BadInput, match="needs --fp16"):
        _build(conv_model, tmp_path, Precision.FP32, layer_precisions="conv0:fp32")


def test_timing_cache_is_loaded_and_a_mismatched_one_replaced(trt10, conv_model, tmp_path):
    report, out, _ = _build(conv_model, tmp_path, Precision.FP32)
    assert report.metadata["timing_cache"] == "new"
    report, _, _ = _build(conv_model, tmp_path, Precision.TF32)
    assert report.metadata["timing_cache"] == "loaded"
    assert calls_named(trt10, "IBuilderConfig.create_timing_cache")[-1] == (FAKE_TIMING_CACHE,)
    (out.parent / "timing.cache").write_bytes(b"from another GPU")
    report, _, _ = _build(conv_model, tmp_path, Precision.FP16)
    assert report.metadata["timing_cache"] == "mismatched, replaced"
    assert (out.parent / "timing.cache").read_bytes() == FAKE_TIMING_CACHE


# ---- error paths --------------------------------------------------------------------------------

def test_parse_failure_lists_every_error_with_node_names(trt10, conv_model, tmp_path):
    trt10.behaviour.parse_errors = [("conv1", "Conv", 2, "unsupported auto_pad"), ("fc", "Gemm", 7, "bad transB")]
    with pytest.raises(BuildFailed) as info:
        _build(conv_model, tmp_path, Precision.FP32)
    text = str(info.value)
    assert "2 error(s)" in text and "conv1 (Conv): unsupported auto_pad" in text and "fc (Gemm): bad transB" in text
    assert "Builder.build_serialized_network" not in call_names(trt10)


def test_parse_failure_on_8_6_names_node_indices(trt86, conv_model, tmp_path):
    trt86.behaviour.parse_errors = [("conv1", "Conv", 2, "unsupported auto_pad")]
    with pytest.raises(BuildFailed, match=r"node #2: unsupported auto_pad"):
        _build(conv_model, tmp_path, Precision.FP32)


def test_build_returning_none_raises_with_the_log_tail(fake_trt, conv_model, tmp_path):
    fake_trt.behaviour.build_returns_none = True
    with pytest.raises(BuildFailed) as info:
        _build(conv_model, tmp_path, Precision.FP32)
    assert fake_trt.behaviour.build_error_log in str(info.value)
    assert "starting" not in str(info.value)  # INFO lines are not part of the tail
    assert not (tmp_path / "engines" / "e.fp32.plan").exists()


def _cached_engine(conv_model, tmp_path, precision=Precision.FP32):
    [outcome] = build_engines(conv_model, [precision], [1, 4],
                              settings=BuildSettings(engines_dir=tmp_path / "engines", backend="tensorrt"))
    return outcome.record


def test_build_engines_end_to_end_caches_a_plan(fake_trt, conv_model, tmp_path):
    record = _cached_engine(conv_model, tmp_path)
    assert record.artifact_path.suffix == ".plan" and record.environment["tensorrt_version"] == fake_trt.__version__
    assert record.environment == TensorRTBackend().environment()
    [again] = build_engines(conv_model, [Precision.FP32], [1, 4],
                            settings=BuildSettings(engines_dir=tmp_path / "engines", backend="tensorrt"))
    assert not again.built


def test_deserialize_returning_none_is_a_clear_error(trt10, conv_model, tmp_path):
    record = _cached_engine(conv_model, tmp_path)
    trt10.behaviour.deserialize_returns_none = True
    with pytest.raises(CacheCorrupt, match="--rebuild"):
        TensorRTBackend().load(record.artifact_path, record)


@pytest.mark.parametrize("key, value, label", [
    ("tensorrt_version", "10.0.1.6", "TensorRT"),
    ("gpu_name", "Another GPU", "GPU"),
])
def test_load_refuses_an_engine_from_another_setup(trt10, conv_model, tmp_path, key, value, label):
    record = _cached_engine(conv_model, tmp_path)
    record.environment = {**record.environment, key: value}
    trt10.calls.clear()
    with pytest.raises(IncompatibleEngine) as info:
        TensorRTBackend().load(record.artifact_path, record)
    assert label in str(info.value) and "--rebuild" in str(info.value)
    assert "Runtime.deserialize_cuda_engine" not in call_names(trt10)


# ---- runner -------------------------------------------------------------------------------------

def test_runner_prepare_and_enqueue(fake_trt, conv_model, tmp_path):
    record = _cached_engine(conv_model, tmp_path)
    runner = TensorRTBackend().load(record.artifact_path, record)
    assert runner.device == "cuda"
    assert [s.name for s in runner.inputs] == ["input"] and [s.name for s in runner.outputs] == ["logits"]
    assert runner.inputs[0].shape[0] is None and runner.inputs[0].dtype == "float32"
    out_shapes = runner.prepare({"input": (4, 3, 16, 16)})
    assert out_shapes == {"logits": (4, 10)}
    assert calls_named(fake_trt, "IExecutionContext.set_input_shape") == [("input", (4, 3, 16, 16))]
    fake_trt.calls.clear()
    buffers = {"input": 0x1000, "logits": 0x2000}
    runner.enqueue(buffers, 77)
    assert fake_trt.calls == [("IExecutionContext.set_tensor_address", ("input", 0x1000)),
                              ("IExecutionContext.set_tensor_address", ("logits", 0x2000)),
                              ("IExecutionContext.execute_async_v3", (77,))]
    fake_trt.calls.clear()
    runner.enqueue(buffers, 77)  # unchanged pointers: one call per iteration
    assert call_names(fake_trt) == ["IExecutionContext.execute_async_v3"]
    fake_trt.calls.clear()
    runner.enqueue({"input": 0x1000, "logits": 0x3000}, 78)
    assert fake_trt.calls == [("IExecutionContext.set_tensor_address", ("logits", 0x3000)),
                              ("IExecutionContext.execute_async_v3", (78,))]
    runner.close()


def test_memory_report_reads_device_memory_per_context_and_counts_forks(fake_trt, conv_model, tmp_path):
    from ..fakes.fake_tensorrt import FAKE_DEVICE_MEMORY_PER_LAYER

    record = _cached_engine(conv_model, tmp_path)
    runner = TensorRTBackend().load(record.artifact_path, record)
    per_context = FAKE_DEVICE_MEMORY_PER_LAYER * max(1, runner.engine.num_layers)
    report = runner.memory_report()
    assert report["kind"] == "tensorrt" and report["contexts"] == 1
    assert report["context_device_memory_bytes"] == per_context == report["in_use_bytes"]
    assert "device_memory_size_v2" in report["method"]
    fake_trt.calls.clear()
    fork = runner.fork()
    assert call_names(fake_trt) == ["ICudaEngine.create_execution_context"]
    assert fork.context is not runner.context and fork.engine is runner.engine
    assert runner.memory_report()["in_use_bytes"] == 2 * per_context
    # a fork binds its own addresses on its own context; the parent's stay untouched
    runner.prepare({"input": (1, 3, 16, 16)})
    fork.prepare({"input": (4, 3, 16, 16)})
    fork.enqueue({"input": 0x1000, "logits": 0x2000}, 5)
    assert fork.context.addresses == {"input": 0x1000, "logits": 0x2000} and runner.context.addresses == {}
    assert runner.context.shapes == {"input": (1, 3, 16, 16)}
    fork.close()
    fork.close()  # twice: counted once
    assert runner.engine is not None and runner.contexts == 1  # closing a fork leaves the engine to its owner
    runner.close()


def test_memory_report_falls_back_to_device_memory_size(trt10, conv_model, tmp_path, monkeypatch):
    record = _cached_engine(conv_model, tmp_path)
    runner = TensorRTBackend().load(record.artifact_path, record)
    monkeypatch.delattr(type(runner.engine), "device_memory_size_v2")
    monkeypatch.setattr(type(runner.engine), "device_memory_size", 1234, raising=False)
    report = runner.memory_report()
    assert report["context_device_memory_bytes"] == 1234 and "ICudaEngine.device_memory_size " in report["method"]
    monkeypatch.delattr(type(runner.engine), "device_memory_size")
    assert runner.memory_report()["kind"] == "n/a"


def test_runner_rejects_shapes_outside_the_profile(trt10, conv_model, tmp_path):
    record = _cached_engine(conv_model, tmp_path)
    runner = TensorRTBackend().load(record.artifact_path, record)
    with pytest.raises(BadInput, match="outside the engine's profile"):
        runner.prepare({"input": (8, 3, 16, 16)})
    with pytest.raises(BadInput, match="no shape"):
        runner.prepare({})


# ---- inspect ------------------------------------------------------------------------------------

def test_inspect_reads_both_inspector_schemas(fake_trt, conv_model, tmp_path):
    record = _cached_engine(conv_model, tmp_path, Precision.FP16)
    runner = TensorRTBackend().load(record.artifact_path, record)
    inspection = runner.inspect()
    assert set(inspection.io_tensors) == {"input", "logits"}
    raw_keys = set(inspection.raw)
    assert ("I/O Tensors" in raw_keys) == (compat.parse_version(fake_trt.__version__)[0] >= 11)
    counts = inspection.counts_by_precision()
    assert sum(counts.values()) == len(inspection.layers) and counts.get("fp16", 0) > 0
    assert all(layer.tactic for layer in inspection.layers if not layer.is_reformat)
    assert len(inspection.reformat_layers()) == record.backend_metadata["reformat_layers"]


def test_cli_inspect_json_on_a_tensorrt_engine(fake_trt, conv_model, tmp_path, capsys):
    from trtprof.cli import main

    record = _cached_engine(conv_model, tmp_path, Precision.FP16)
    assert main(["inspect", str(record.artifact_path), "--json"]) == 0
    info = json.loads(capsys.readouterr().out)
    assert info["backend"] == "tensorrt" and info["precision"] == "fp16"
    layers = info["inspection"]["layers"]
    assert {layer["name"] for layer in layers} >= {"conv0", "relu0", "fc"}
    assert info["inspection"]["counts_by_precision"] == record.backend_metadata["layers_by_precision"]


def test_cli_inspect_table_on_a_tensorrt_engine(trt10, conv_model, tmp_path, capsys):
    from trtprof.cli import main

    record = _cached_engine(conv_model, tmp_path, Precision.FP16)
    assert main(["inspect", str(record.artifact_path)]) == 0
    out = capsys.readouterr().out
    assert "reformat" in out and "conv0" in out and "fake_tactic_" in out


def test_cli_inspect_on_an_onnxruntime_engine_prints_its_metadata(conv_model, tmp_path, capsys):
    from trtprof.cli import main

    [outcome] = build_engines(conv_model, [Precision.FP16], [1],
                              settings=BuildSettings(engines_dir=tmp_path / "e", backend="onnxruntime"))
    capsys.readouterr()
    assert main(["inspect", str(outcome.record.artifact_path), "--json"]) == 0
    info = json.loads(capsys.readouterr().out)
    assert info["backend"] == "onnxruntime"
    assert info["metadata"] == outcome.record.backend_metadata
    assert main(["inspect", str(outcome.record.artifact_path), "--profile-layers"]) == 2
    assert "needs a TensorRT engine" in capsys.readouterr().err


def test_cli_inspect_tensorrt_engine_without_tensorrt_shows_stored_metadata(trt10, conv_model, tmp_path, capsys,
                                                                             monkeypatch):
    from trtprof.cli import main

    record = _cached_engine(conv_model, tmp_path, Precision.FP16)
    monkeypatch.delitem(sys.modules, "tensorrt")  # now the machine has no TensorRT
    monkeypatch.setattr(trt_device, "device_count", lambda: (0, "no CUDA GPU"))
    if compat_real_tensorrt():
        pytest.skip("a real tensorrt is installed here")
    capsys.readouterr()
    assert main(["inspect", str(record.artifact_path)]) == 0
    out = capsys.readouterr().out
    assert "layers_by_precision" in out and "layer detail needs TensorRT" in out


def test_profiler_subclass_collects_layer_times(trt10):
    from trtprof.backends.tensorrt.inspect import make_profiler, summarize_layer_times

    sink: dict[str, list[float]] = {"a": [], "b": []}
    profiler = make_profiler(sink)
    assert isinstance(profiler, trt10.IProfiler)
    data = {"b": [3.0, 1.0, 2.0], "a": [0.5, 0.7]}
    for name, values in data.items():
        for v in values:
            profiler.report_layer_time(name, v)
    times = summarize_layer_times(sink, order=["a", "b"])
    assert [t.name for t in times] == ["a", "b"]
    assert [t.median_ms for t in times] == [float(np.median(data["a"])), float(np.median(data["b"]))]
    assert [t.samples for t in times] == [2, 3]


# ---- compat (pure functions) --------------------------------------------------------------------

@pytest.mark.parametrize("text, expected", [("10.13.0.35", (10, 13, 0, 35)), ("11.0.0b1", (11, 0, 0)),
                                            ("8.6.1.post1", (8, 6, 1))])
def test_parse_version(text, expected):
    assert compat.parse_version(text) == expected


def test_inspector_dtype_parsing_both_schemas():
    assert compat.tensor_dtype({"Format/Datatype": "Channel major FP16 format where channel % 8 == 0"}) == "fp16"
    assert compat.tensor_dtype({"Format/Datatype": "Row major linear FP32"}) == "fp32"
    assert compat.tensor_dtype({"Format": "Row major linear", "DataType": "Half"}) == "fp16"
    assert compat.tensor_dtype({"Format": "Row major linear", "DataType": "Float"}) == "fp32"
    assert compat.io_tensor_names({"Bindings": ["x", "y"]}) == ["x", "y"]
    assert compat.io_tensor_names({"I/O Tensors": [{"Name": "x"}, {"Name": "y"}]}) == ["x", "y"]


def test_registry_auto_picks_tensorrt_when_available(fake_trt):
    assert backends.resolve("auto").name == "tensorrt"


# ---- serving: one execution context per stream ---------------------------------------------------

class _FakeCuda:
    """FAKE trtprof.system.cuda for the serving driver's set-up: handles are counters, memory is host memory,
    every call is recorded. Nothing runs on a device."""

    def __init__(self):
        import itertools

        self.calls: list[str] = []
        self.ids = itertools.count(0x7000)
        fake = self

        class Res:
            def __enter__(self):
                return self

            def __exit__(self, *exc):
                fake.calls.append(f"close {type(self).__name__}")

        class Stream(Res):
            def __init__(self):
                self.handle = next(fake.ids)
                self.raw = self.handle
                fake.calls.append("Stream")

            def synchronize(self):
                pass

        class PinnedHostBuffer(Res):
            def __init__(self, nbytes):
                self.data = np.zeros(max(nbytes, 1), np.uint8)

            def array(self, shape, dtype):
                return self.data.view(dtype)[: int(np.prod(shape))].reshape(shape)

        class DeviceBuffer(Res):
            def __init__(self, nbytes):
                self.ptr = next(fake.ids)

        class Event(Res):
            def __init__(self, blocking_sync=True, timing=True):
                self.raw = next(fake.ids)

        self.Stream, self.PinnedHostBuffer, self.DeviceBuffer, self.Event = Stream, PinnedHostBuffer, DeviceBuffer, Event

    def runtime(self):
        import types

        kinds = types.SimpleNamespace(cudaMemcpyHostToDevice=1, cudaMemcpyDeviceToHost=2)
        return types.SimpleNamespace(cudaMemcpyKind=kinds, cudaMemcpyAsync=None, cudaEventRecord=None)

    def ok(self, result, what=""):
        pass

    def memcpy_htod_async(self, ptr, view, stream):
        self.calls.append("upload")


def test_serving_gives_every_stream_its_own_execution_context(fake_trt, conv_model, tmp_path, monkeypatch):
    from trtprof.system import cuda
    from trtprof.serving.driver import gpu_sessions

    fake_cuda = _FakeCuda()
    for name in ("Stream", "PinnedHostBuffer", "DeviceBuffer", "Event", "runtime", "ok", "memcpy_htod_async"):
        monkeypatch.setattr(cuda, name, getattr(fake_cuda, name))
    record = _cached_engine(conv_model, tmp_path)
    runner = TensorRTBackend().load(record.artifact_path, record)
    fake_trt.calls.clear()
    feeds = {"input": np.zeros((4, 3, 16, 16), np.float32)}
    with gpu_sessions(runner, 3, feeds) as (sessions, info):
        assert len(sessions) == 3 and info["contexts"] == 3 and info["per_stream_context"] is True
        assert runner.memory_report()["contexts"] == 3  # the engine's activation memory counted per context
        assert call_names(fake_trt).count("ICudaEngine.create_execution_context") == 2  # 2 forks + the runner's own
        assert calls_named(fake_trt, "IExecutionContext.set_input_shape") == [("input", (4, 3, 16, 16))] * 3
        assert fake_cuda.calls.count("Stream") == 3 and fake_cuda.calls.count("upload") == 3
    assert runner.memory_report()["contexts"] == 1  # the forks were closed with the sessions
    runner.close()


def test_int8_on_10x_sets_the_int8_flag_and_parses_the_qdq_model(trt10, conv_model, tmp_path):
    """Weakly typed TensorRT runs a Q/DQ network only with the INT8 flag (explicit quantization);
    the graph it parses is trtprof's QDQ model (fake library: what is called, not what it builds)."""
    from trtprof.convert.quantize import quantization_options

    report, _, _ = _build(conv_model, tmp_path, Precision.INT8, **quantization_options(Precision.INT8))
    assert _flag_calls(trt10, "set_flag") == ["INT8"] and report.metadata["flags"] == ["-TF32", "INT8"]
    ops = {n.op_type for n in trt10.state["parsed_model"].graph.node}
    assert {"QuantizeLinear", "DequantizeLinear"} <= ops
    assert report.metadata["int8_quantization"]["activations"] == "int8 symmetric"


def test_int8_on_11x_sets_no_flag(trt11, conv_model, tmp_path):
    from trtprof.convert.quantize import quantization_options

    _build(conv_model, tmp_path, Precision.INT8, **quantization_options(Precision.INT8))
    assert _flag_calls(trt11, "set_flag") == []  # strongly typed: the Q/DQ nodes carry the types
    assert "QuantizeLinear" in {n.op_type for n in trt11.state["parsed_model"].graph.node}


# ---- the cycle collector and TensorRT's callbacks (a deadlock seen with TensorRT-RTX in CI) -------

def test_the_collector_is_paused_inside_parse_and_build_and_resumed_after(trt10, conv_model, tmp_path, monkeypatch):
    """Inside native calls that call back into Python (the logger), a cycle collection could free an
    earlier build's TensorRT objects, whose destructor waits for the lock the running call holds."""
    import gc

    seen: dict[str, bool] = {}
    parse, build = trt10.OnnxParser.parse_from_file, trt10.Builder.build_serialized_network

    def parse_from_file(self, model):
        seen["parse"] = gc.isenabled()
        return parse(self, model)

    def build_serialized_network(self, network, config):
        seen["build"] = gc.isenabled()
        return build(self, network, config)

    monkeypatch.setattr(trt10.OnnxParser, "parse_from_file", parse_from_file)
    monkeypatch.setattr(trt10.Builder, "build_serialized_network", build_serialized_network)
    assert gc.isenabled()
    _build(conv_model, tmp_path, Precision.FP32)
    assert seen == {"parse": False, "build": False} and gc.isenabled()
    gc.disable()  # a caller that had it off: left off
    try:
        _build(conv_model, tmp_path / "again", Precision.FP32)
        assert not gc.isenabled()
    finally:
        gc.enable()


def test_a_failed_parse_does_not_keep_the_builder_alive_in_its_traceback(trt10, conv_model, tmp_path, monkeypatch):
    import weakref

    made: list[weakref.ref] = []
    init = trt10.Builder.__init__

    def remembering_init(self, logger):
        init(self, logger)
        made.append(weakref.ref(self))

    monkeypatch.setattr(trt10.Builder, "__init__", remembering_init)
    trt10.behaviour.parse_errors = [("conv1", "Conv", 2, "unsupported auto_pad")]
    with pytest.raises(BuildFailed) as info:
        _build(conv_model, tmp_path, Precision.FP32)
    assert info.value.__traceback__ is not None and made  # the exception and its frames are still held here
    assert all(ref() is None for ref in made)  # but no Builder is: freed when the parse failed
