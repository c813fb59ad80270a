"""Contract tests of the TensorRT-RTX backend against the FAKE ``tensorrt_rtx`` (``flavour="rtx"``).

Which calls trtprof makes on the TensorRT-RTX API and how it reports each failure, on every machine.
The real library's answers are in tests/backends/test_tensorrt_rtx_real.py (marker ``tensorrt_rtx``, CI);
tests/backends/test_tensorrt_fake_surface.py keeps this fake's surface equal to the real module's.
"""
from __future__ import annotations

import re
import json
import sys
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import pytest

from trtprof import backends
from trtprof.backends.tensorrt import compat, targets
from trtprof.backends.tensorrt import device as trt_device
from trtprof.backends.tensorrt.rtx import TensorRTRTXBackend
from trtprof.builder.pipeline import BuildSettings, build_engines
from trtprof.errors import BackendUnavailable, BadInput, IncompatibleEngine, MissingDependency
from trtprof.spec import Precision

from ..fakes.fake_tensorrt import call_names, calls_named, make_fake_tensorrt

RTX_VERSION = "1.7.1.116"
RTX_GPU = trt_device.DeviceInfo(name="Fake RTX GPU (contract tests)", compute_capability="8.6")
H200_LIKE = trt_device.DeviceInfo(name="Fake data-center GPU (contract tests)", compute_capability="9.0")


def _install(monkeypatch, gpu: trt_device.DeviceInfo | None, version: str = RTX_VERSION):
    trt = make_fake_tensorrt(version, flavour="rtx")
    trt.behaviour.gpu_compute_capability = gpu.compute_capability if gpu else None
    monkeypatch.setitem(sys.modules, "tensorrt_rtx", trt)
    monkeypatch.setattr("trtprof.backends.tensorrt.rtx.rtx_installed", lambda: True)
    monkeypatch.setattr(trt_device, "device_count", lambda: (1, "") if gpu else (0, "no CUDA GPU (fake: no driver)"))
    monkeypatch.setattr(trt_device, "query_device", lambda index=0: gpu)
    return trt


@pytest.fixture
def rtx_nogpu(monkeypatch):
    return _install(monkeypatch, None)


@pytest.fixture
def rtx_gpu(monkeypatch):
    return _install(monkeypatch, RTX_GPU)


def _build(model: Path, tmp_path: Path, precisions, batches=(1, 4), **options):
    return build_engines(model, precisions, batches,
                         settings=BuildSettings(engines_dir=tmp_path / "engines", backend="tensorrt-rtx",
                                                options=options))


# ---- build ---------------------------------------------------------------------------------------

def test_build_without_a_gpu_strongly_typed_no_timing_cache(rtx_nogpu, conv_model, tmp_path):
    import onnx

    fp32, fp16 = _build(conv_model, tmp_path, [Precision.FP32, Precision.FP16])
    names = call_names(rtx_nogpu)
    assert calls_named(rtx_nogpu, "Builder.create_network") == [(0,), (0,)]  # no EXPLICIT_BATCH bit
    assert "IBuilderConfig.create_timing_cache" not in names and "IBuilderConfig.set_timing_cache" not in names
    assert not (tmp_path / "engines" / "timing.cache").exists()
    assert [a[0].name for a in calls_named(rtx_nogpu, "IBuilderConfig.clear_flag")] == ["TF32", "TF32"]
    assert calls_named(rtx_nogpu, "IBuilderConfig.set_flag") == []
    assert "IBuilderConfig.set_compute_capability" not in names  # the library's portable default
    parsed = rtx_nogpu.state["parsed_model"]  # the FP16 build parsed the converted ONNX
    assert {i.data_type for i in parsed.graph.initializer if i.data_type in (1, 10)} == {onnx.TensorProto.FLOAT16}
    for outcome, dtype in ((fp32, "fp32"), (fp16, "fp16")):
        meta = outcome.record.backend_metadata
        assert meta["library"] == "TensorRT-RTX" and meta["strongly_typed"]
        assert meta["timing_cache"].startswith("not used")
        assert meta["compute_capability_targets"] == "default"
        assert meta["supported_compute_capabilities"] == list(targets.DEFAULT_SUPPORTED)
        assert meta["built_on"] == "no GPU (ahead-of-time build)"
        assert meta["effective_precision"] == dtype
        assert meta["network_layers_by_dtype"].get(dtype, 0) > 0
        assert outcome.record.environment == {"backend": "tensorrt-rtx", "tensorrt_rtx_version": RTX_VERSION}
    assert "fp16" not in fp32.record.backend_metadata["network_layers_by_dtype"]
    assert "fp32" not in fp16.record.backend_metadata["network_layers_by_dtype"]


def test_tf32_sets_its_flag(rtx_nogpu, conv_model, tmp_path):
    [outcome] = _build(conv_model, tmp_path, [Precision.TF32])
    assert [a[0].name for a in calls_named(rtx_nogpu, "IBuilderConfig.set_flag")] == ["TF32"]
    assert outcome.record.backend_metadata["flags"] == ["TF32"]


def test_compute_capability_targets_are_set_keyed_and_recorded(rtx_nogpu, conv_model, tmp_path):
    [default] = _build(conv_model, tmp_path, [Precision.FP32])
    [two] = _build(conv_model, tmp_path, [Precision.FP32], compute_capability="SM89,sm86")
    [same] = _build(conv_model, tmp_path, [Precision.FP32], compute_capability="sm86,sm89")
    assert calls_named(rtx_nogpu, "IBuilderConfig.num_compute_capabilities") == [(2,)]
    set_calls = [(cc.name, i) for cc, i in calls_named(rtx_nogpu, "IBuilderConfig.set_compute_capability")]
    assert set_calls == [("SM86", 0), ("SM89", 1)]  # the second request was a cache hit
    assert two.built and not same.built and same.record.key == two.record.key != default.record.key
    assert two.record.spec.option("compute_capability") == "sm86,sm89"
    meta = two.record.backend_metadata
    assert meta["compute_capability_targets"] == ["sm86", "sm89"]
    assert meta["supported_compute_capabilities"] == ["8.6", "8.9"]


@pytest.mark.parametrize("value, message", [
    ("sm8.6", "expected smXY"), ("sm86,current", "cannot be combined"), ("sm99", "cannot target it"),
])
def test_bad_compute_capability_fails_before_writing(rtx_nogpu, conv_model, tmp_path, value, message):
    with pytest.raises(BadInput, match=message):
        _build(conv_model, tmp_path, [Precision.FP32], compute_capability=value)
    assert not list((tmp_path / "engines").glob("*.plan"))


def test_current_needs_a_gpu_and_becomes_its_architecture(monkeypatch, conv_model, tmp_path):
    _install(monkeypatch, None)
    with pytest.raises(BadInput, match="needs a GPU"):
        _build(conv_model, tmp_path, [Precision.FP32], compute_capability="current")
    trt = _install(monkeypatch, RTX_GPU)
    [current] = _build(conv_model, tmp_path, [Precision.FP32], compute_capability="current")
    assert current.record.spec.option("compute_capability") == "sm86"
    assert [(cc.name, i) for cc, i in calls_named(trt, "IBuilderConfig.set_compute_capability")] == [("SM86", 0)]
    assert current.record.backend_metadata["built_on"] == f"{RTX_GPU.name} (8.6)"
    [named] = _build(conv_model, tmp_path, [Precision.FP32], compute_capability="sm86")
    assert not named.built and named.record.key == current.record.key


def test_layer_precisions_go_through_the_fp16_keep_list_only(rtx_nogpu, conv_model, tmp_path):
    import onnx

    _build(conv_model, tmp_path, [Precision.FP16], layer_precisions="fc:fp32")
    parsed = rtx_nogpu.state["parsed_model"]
    assert next(i for i in parsed.graph.initializer if i.name == "fc.w").data_type == onnx.TensorProto.FLOAT
    assert "ILayer.precision" not in call_names(rtx_nogpu)
    with pytest.raises(BadInput, match="TensorRT-RTX builds strongly typed networks.*keep-list"):
        _build(conv_model, tmp_path, [Precision.FP16], layer_precisions="*:fp32")
    with pytest.raises(BadInput, match="apply to --fp16 builds only"):
        _build(conv_model, tmp_path, [Precision.FP32], layer_precisions="fc:fp32")
    with pytest.raises(BadInput, match="names no node of this model: nosuchnode"):
        _build(conv_model, tmp_path, [Precision.FP16], layer_precisions="nosuchnode:fp32")


def test_compute_capability_is_refused_by_enterprise_tensorrt(monkeypatch, conv_model, tmp_path):
    trt = make_fake_tensorrt("10.13.0.35")
    monkeypatch.setitem(sys.modules, "tensorrt", trt)
    monkeypatch.setattr(trt_device, "device_count", lambda: (1, ""))
    monkeypatch.setattr(trt_device, "query_device", lambda index=0: RTX_GPU)
    with pytest.raises(BadInput, match="TensorRT-RTX option"):
        build_engines(conv_model, [Precision.FP32], [1],
                      settings=BuildSettings(engines_dir=tmp_path / "e", backend="tensorrt",
                                             options={"compute_capability": "sm86"}))


def test_parse_errors_name_the_node(rtx_nogpu, conv_model, tmp_path):
    from trtprof.errors import BuildFailed

    rtx_nogpu.behaviour.parse_errors = [("conv1", "Conv", 2, "unsupported auto_pad")]
    with pytest.raises(BuildFailed, match=r"conv1 \(Conv\): unsupported auto_pad"):
        _build(conv_model, tmp_path, [Precision.FP32])


# ---- version gate, registry ----------------------------------------------------------------------

def test_version_gate_names_the_product(monkeypatch):
    monkeypatch.setitem(sys.modules, "tensorrt_rtx", make_fake_tensorrt("0.9.0", flavour="rtx"))
    with pytest.raises(MissingDependency, match=r"found TensorRT-RTX 0\.9\.0, older than TensorRT-RTX 1\.0") as info:
        compat.require_library(compat.TENSORRT_RTX)
    assert "trtprof[tensorrt-rtx]" in str(info.value)
    # an RTX version number is never read as an (old) enterprise TensorRT version
    monkeypatch.setitem(sys.modules, "tensorrt_rtx", make_fake_tensorrt(RTX_VERSION, flavour="rtx"))
    assert compat.require_library(compat.TENSORRT_RTX).__version__ == RTX_VERSION
    monkeypatch.setitem(sys.modules, "tensorrt", make_fake_tensorrt("8.5.3.1"))
    with pytest.raises(MissingDependency, match=r"found TensorRT 8\.5\.3\.1, older than TensorRT 8\.6"):
        compat.require_tensorrt()


def test_features_are_probed_not_read_from_the_version():
    rtx = compat.TrtFeatures.of(make_fake_tensorrt(RTX_VERSION, flavour="rtx"))
    assert (rtx.product, rtx.strongly_typed_only, rtx.explicit_batch_flag, rtx.timing_cache) == \
        ("TensorRT-RTX", True, False, False)
    assert rtx.compute_capability_targets and rtx.runtime_cache
    old = compat.TrtFeatures.of(make_fake_tensorrt("8.6.1.6"))
    assert old.explicit_batch_flag and old.fp16_builder_flag and not old.compute_capability_targets
    ten = compat.TrtFeatures.of(make_fake_tensorrt("10.13.0.35"))
    assert not ten.explicit_batch_flag and ten.fp16_builder_flag and ten.timing_cache


def test_registry_builds_without_a_gpu_but_auto_and_bench_need_one(rtx_nogpu):
    backend = backends.resolve_for_build("tensorrt-rtx")
    assert backend.name == "tensorrt-rtx"
    with pytest.raises(BackendUnavailable, match="cannot run here"):
        backends.resolve("tensorrt-rtx")
    assert backends.resolve("auto").name != "tensorrt-rtx"


def test_available_refuses_a_gpu_the_runtime_does_not_run(monkeypatch):
    _install(monkeypatch, H200_LIKE)
    av = TensorRTRTXBackend().available()
    assert not av.ok and "9.0" in av.reason
    _install(monkeypatch, RTX_GPU)
    assert TensorRTRTXBackend().available().ok


# ---- can't run here ------------------------------------------------------------------------------

def test_bench_without_a_gpu_exits_2_naming_no_gpu_and_the_targets(rtx_nogpu, conv_model, tmp_path, capsys):
    from trtprof.cli import main

    _build(conv_model, tmp_path, [Precision.FP32, Precision.FP16])
    capsys.readouterr()
    assert main(["bench", str(tmp_path / "engines"), "--out", str(tmp_path / "r.json")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "cannot run on this machine: no GPU" in err[0]
    assert "8.0, 8.6, 8.9, 12.0, 12.1" in err[0] and ".plan" in err[0]
    assert not (tmp_path / "r.json").exists()
    assert "Runtime.deserialize_cuda_engine" not in call_names(rtx_nogpu)


def test_bench_on_an_untargeted_gpu_names_its_compute_capability(monkeypatch, conv_model, tmp_path, capsys):
    from trtprof.cli import main

    _install(monkeypatch, None)
    _build(conv_model, tmp_path, [Precision.FP32], compute_capability="sm120")
    _install(monkeypatch, RTX_GPU)
    capsys.readouterr()
    assert main(["bench", str(tmp_path / "engines"), "--out", str(tmp_path / "r.json")]) == 2
    [line] = capsys.readouterr().err.strip().splitlines()
    assert "compute capability 8.6" in line and "runs on compute capability 12.0" in line


def test_library_validity_answer_is_the_last_word(monkeypatch, conv_model, tmp_path):
    """Metadata says the plan runs here, the library says it does not (another version wrote it): the
    refusal quotes the library's diagnostic instead of a None from deserialize."""
    _install(monkeypatch, None, version="1.6.0.1")
    [outcome] = _build(conv_model, tmp_path, [Precision.FP32])
    _install(monkeypatch, RTX_GPU)
    record = outcome.record
    record.environment = {**record.environment, "tensorrt_rtx_version": RTX_VERSION}
    with pytest.raises(IncompatibleEngine, match="version_mismatch"):
        TensorRTRTXBackend().load(record.artifact_path, record)


# ---- runtime: JIT and runtime cache (fake library, FAKE cuda buffers) ----------------------------

class _FakeBuffer:
    """FAKE trtprof.system.cuda buffer/stream for the runner's first inference: hands out fake addresses."""

    next_ptr = 0x1000

    def __init__(self, nbytes: int = 0, *args) -> None:
        _FakeBuffer.next_ptr += 0x1000
        self.ptr = self.handle = _FakeBuffer.next_ptr
        self.nbytes = nbytes

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        pass

    def array(self, shape, dtype):
        return np.zeros(shape, dtype)

    def synchronize(self) -> None:
        pass


@contextmanager
def _fake_cuda(monkeypatch):
    from trtprof.system import cuda

    monkeypatch.setattr(cuda, "Stream", _FakeBuffer)
    monkeypatch.setattr(cuda, "DeviceBuffer", _FakeBuffer)
    monkeypatch.setattr(cuda, "PinnedHostBuffer", _FakeBuffer)
    monkeypatch.setattr(cuda, "memcpy_htod_async", lambda *a: None)
    yield


def test_runner_jit_first_inference_and_runtime_cache(rtx_gpu, conv_model, tmp_path, monkeypatch):
    from trtprof.measure.bench import load_runner

    [outcome] = _build(conv_model, tmp_path, [Precision.FP16])
    record = outcome.record
    with _fake_cuda(monkeypatch):
        runner = load_runner(record)
        [(config,)] = calls_named(rtx_gpu, "ICudaEngine.create_execution_context")
        assert config.dynamic_shapes_kernel_specialization_strategy.name == "EAGER"
        assert config.get_runtime_cache() is not None
        compiled = len(rtx_gpu.state["compiled"])  # the context's JIT
        runner.prepare({"input": (4, 3, 16, 16)})
        assert len(rtx_gpu.state["compiled"]) == compiled + 1  # first inference of the shape, in prepare
        executes = len(calls_named(rtx_gpu, "IExecutionContext.execute_async_v3"))
        runner.prepare({"input": (4, 3, 16, 16)})  # same shape: no second first-inference
        assert len(calls_named(rtx_gpu, "IExecutionContext.execute_async_v3")) == executes
        report = runner.runtime_report()
        runner.close()
        assert report["jit_ms"] >= 0 and list(report["first_inference_ms"]) == ["input:4x3x16x16"]
        cache = report["runtime_cache"]
        assert cache["status"] == "miss (no cache file)" and cache["saved"]
        path = Path(cache["path"])
        assert path.parent == record.artifact_path.parent and path.name.endswith(".sm86.rtxcache")

        rtx_gpu.state["compiled"].clear()
        again = load_runner(record)
        again.prepare({"input": (4, 3, 16, 16)})
        report = again.runtime_report()
        again.close()
        assert rtx_gpu.state["compiled"] == [] and report["runtime_cache"]["status"] == "hit"

        rtx_gpu.behaviour.gpu_compute_capability = "8.9"  # the cache was written on another GPU
        monkeypatch.setattr(trt_device, "query_device",
                            lambda index=0: trt_device.DeviceInfo("Fake RTX 4090", "8.9"))
        other = load_runner(record)
        report = other.runtime_report()
        other.close()
        assert report["runtime_cache"]["status"] == "miss (no cache file)"  # per-architecture file name


def test_rejected_runtime_cache_is_a_miss_and_replaced(rtx_gpu, conv_model, tmp_path, monkeypatch):
    from trtprof.measure.bench import load_runner

    [outcome] = _build(conv_model, tmp_path, [Precision.FP32])
    with _fake_cuda(monkeypatch):
        runner = load_runner(outcome.record)
        path = Path(runner.runtime_report()["runtime_cache"]["path"])
        runner.close()
        path.write_bytes(b"not a runtime cache")
        runner = load_runner(outcome.record)
        runner.prepare({"input": (1, 3, 16, 16)})
        report = runner.runtime_report()
        runner.close()
    assert report["runtime_cache"]["status"].startswith("miss (cache rejected")
    assert path.read_bytes() != b"not a runtime cache"


def test_bench_result_carries_the_runtime_report(rtx_gpu, conv_model, tmp_path, monkeypatch, capsys):
    """bench_one puts the runner's JIT/runtime-cache report in the result config (timing loop faked:
    this checks the plumbing, not a measurement)."""
    from trtprof.measure import timing
    from trtprof.measure.bench import bench_one, load_runner
    from trtprof.measure.timing import Samples, TimingConfig

    [outcome] = _build(conv_model, tmp_path, [Precision.FP32])

    def fake_time_device(runner, feeds, config):  # FAKE loop: prepare (JIT) then fixed fake samples
        runner.prepare({n: a.shape for n, a in feeds.items()})
        return Samples(stages={"latency_ms": np.array([1.0, 1.0, 1.0]), "compute_ms": np.array([1.0, 1.0, 1.0])},
                       span_s=0.003, warmup_done=0, warmup_s=0.0)

    monkeypatch.setattr(timing, "time_device", fake_time_device)
    with _fake_cuda(monkeypatch):
        runner = load_runner(outcome.record)
        result = bench_one(outcome.record, runner, 2, TimingConfig(warmup=0, iterations=3))
        runner.close()
    runtime = result.config["runtime"]
    assert runtime["library"] == "TensorRT-RTX" and list(runtime["first_inference_ms"]) == ["input:2x3x16x16"]
    assert json.loads(json.dumps(runtime)) == runtime
    from trtprof.cli.bench import print_table
    from trtprof.measure.results import ResultSet

    print_table(ResultSet(environment={}, results=[result], created=""))
    out = capsys.readouterr().out
    assert re.search(r"jit: convnet fp32\b.* batch 2: context", out) and "runtime cache miss (no cache file)" in out


def test_cli_inspect_without_a_gpu_shows_the_stored_metadata(rtx_nogpu, conv_model, tmp_path, capsys):
    from trtprof.cli import main

    [outcome] = _build(conv_model, tmp_path, [Precision.FP16])
    capsys.readouterr()
    assert main(["inspect", str(outcome.record.artifact_path), "--json"]) == 0
    info = json.loads(capsys.readouterr().out)
    assert info["backend"] == "tensorrt-rtx" and info["metadata"]["network_layers_by_dtype"]["fp16"] > 0
    assert any("layer detail needs TensorRT and a GPU" in n for n in info["notes"])
    assert main(["inspect", str(outcome.record.artifact_path), "--profile-layers"]) == 2


def test_availability_does_not_import_tensorrt_rtx():
    """available()/buildable() stay cheap: find_spec and a CUDA query, never the library import."""
    import subprocess

    code = ("import sys; from trtprof import backends; b = backends.get('tensorrt-rtx'); b.available(); "
            "b.buildable(); print('tensorrt_rtx' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    assert out.stdout.strip() == "False"
