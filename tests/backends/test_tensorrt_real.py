"""Real TensorRT: build, run, bench and inspect a small model on a GPU.

Skipped unless ``import tensorrt`` works and a CUDA GPU is present; neither is true anywhere in the
workplace these tests were written in, so they have not been run there. Run them on a machine with
``pip install 'trtprof[tensorrt]'`` and a GPU: ``pytest -m tensorrt``.
"""
from __future__ import annotations

import json

import numpy as np
import pytest



def _skip_reason() -> str | None:
    try:
        import tensorrt
    except ImportError as err:
        return f"tensorrt not importable ({err})"
    if not hasattr(tensorrt, "__version__"):
        return "the importable tensorrt is not TensorRT (tensorrt-stubs namespace?)"
    if getattr(tensorrt, "IS_FAKE", False):
        return "the fake tensorrt is installed"
    from trtprof.system import cuda

    if cuda.device_count() == 0:
        return "no CUDA GPU"
    return None


_REASON = _skip_reason()
# a mark, not a module-level skip: `pytest -m tensorrt_rtx` then deselects these instead of reporting a
# skip at collection (CI fails on any skip in that run)
pytestmark = [pytest.mark.tensorrt, pytest.mark.gpu, pytest.mark.skipif(_REASON is not None, reason=str(_REASON))]

from trtprof.builder.pipeline import BuildSettings, build_engines  # noqa: E402
from trtprof.spec import Precision  # noqa: E402

BATCHES = [1, 4]
# FP32 with TF32 cleared: only summation order differs from ONNX Runtime's CPU FP32.
FP32_TOLERANCE = dict(rtol=1e-4, atol=1e-4)
# FP16: ~3 decimal digits per op; the demo model's logits are O(1).
FP16_TOLERANCE = dict(rtol=5e-2, atol=5e-2)


def _reference(model, feeds):
    import onnxruntime as ort

    session = ort.InferenceSession(str(model), providers=["CPUExecutionProvider"])
    return dict(zip([o.name for o in session.get_outputs()], session.run(None, dict(feeds))))


@pytest.fixture
def engines(conv_model, tmp_path):
    outcomes = build_engines(conv_model, [Precision.FP32, Precision.FP16], BATCHES,
                             settings=BuildSettings(engines_dir=tmp_path / "engines", backend="tensorrt"))
    return {o.record.precision: o.record for o in outcomes}


def test_build_writes_plans_with_metadata(engines):
    import tensorrt as trt

    for precision, record in engines.items():
        assert record.artifact_path.stat().st_size > 0
        meta = record.backend_metadata
        assert meta["tensorrt_version"] == trt.__version__ == record.environment["tensorrt_version"]
        assert meta["num_layers"] > 0 and sum(meta["layers_by_precision"].values()) == meta["num_layers"]
        assert meta["profile"]["input"]["min"][0] == min(BATCHES)
        assert meta["profile"]["input"]["max"][0] == max(BATCHES)
    assert engines["fp32"].backend_metadata["layers_by_precision"].get("fp16", 0) == 0
    assert (engines["fp32"].artifact_path.parent / "timing.cache").stat().st_size > 0


@pytest.mark.parametrize("precision, tolerance", [("fp32", FP32_TOLERANCE), ("fp16", FP16_TOLERANCE)])
def test_infer_matches_onnxruntime(engines, conv_model, precision, tolerance):
    from trtprof.backends.tensorrt import TensorRTBackend
    from trtprof.model.inputs import make_inputs

    record = engines[precision]
    runner = TensorRTBackend().load(record.artifact_path, record)
    try:
        for batch in BATCHES:
            feeds = make_inputs(runner.inputs, {"input": (batch, 3, 16, 16)}, seed=batch)
            got = runner.infer(feeds)
            want = _reference(conv_model, feeds)
            assert got["logits"].shape == want["logits"].shape
            np.testing.assert_allclose(got["logits"], want["logits"], **tolerance)
    finally:
        runner.close()


@pytest.mark.parametrize("cuda_graph", [False, True])
def test_shared_timing_loop_runs_the_engine(engines, cuda_graph):
    from trtprof.measure.bench import bench_one, load_runner
    from trtprof.measure.timing import TimingConfig

    record = engines["fp16"]
    runner = load_runner(record)
    try:
        result = bench_one(record, runner, 4, TimingConfig(warmup=3, iterations=20, cuda_graph=cuda_graph))
    finally:
        runner.close()
    assert result.backend == "tensorrt" and result.batch_size == 4
    assert result.stats["compute_ms"].n == 20 and result.stats["compute_ms"].min > 0
    assert result.config["cuda_graph"] is cuda_graph


def test_inspect_with_layer_profile(engines, capsys):
    from trtprof.cli import main

    record = engines["fp16"]
    assert main(["inspect", str(record.artifact_path), "--json", "--profile-layers",
                 "--batch-size", "4", "--iterations", "5"]) == 0
    info = json.loads(capsys.readouterr().out)
    layers = info["inspection"]["layers"]
    assert layers and all(layer["type"] for layer in layers)
    assert info["inspection"]["counts_by_precision"].get("fp16", 0) > 0
    profile = info["layer_profile"]
    assert profile["batch_size"] == 4 and profile["iterations"] == 5
    assert profile["layers"] and all(t["samples"] == 5 and t["median_ms"] >= 0 for t in profile["layers"])


def test_load_refuses_another_tensorrt_version(engines):
    from trtprof.backends.tensorrt import TensorRTBackend
    from trtprof.errors import IncompatibleEngine

    record = engines["fp32"]
    record.environment = {**record.environment, "tensorrt_version": "0.0.0"}
    with pytest.raises(IncompatibleEngine, match="--rebuild"):
        TensorRTBackend().load(record.artifact_path, record)
