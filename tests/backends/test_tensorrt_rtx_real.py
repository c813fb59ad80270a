"""The TensorRT build path against the REAL library: TensorRT for RTX (``tensorrt_rtx``), on the CPU.

TensorRT-RTX builds ahead of time without a GPU, so these run in CI (``.ci/run`` installs
tensorrt-rtx-cu13 and fails if any test marked ``tensorrt_rtx`` is skipped). What they cannot do is run
a plan: that needs an RTX-class GPU (compute capability 7.5/8.x/12.x); here they check the refusal.
"""
from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

pytestmark = pytest.mark.tensorrt_rtx

trt = pytest.importorskip("tensorrt_rtx", reason="tensorrt_rtx not installed: pip install 'trtprof[tensorrt-rtx]'")
if getattr(trt, "IS_FAKE", False):  # pragma: no cover - a contract test leaked its fake
    pytest.skip("the fake tensorrt_rtx is installed", allow_module_level=True)

from trtprof.system import cuda  # noqa: E402
from trtprof.builder.pipeline import BuildSettings, build_engines  # noqa: E402
from trtprof.cli import main  # noqa: E402
from trtprof.errors import BadInput, BuildFailed  # noqa: E402
from trtprof.spec import Precision  # noqa: E402

from ..conftest import tree_snapshot  # noqa: E402

NO_GPU = cuda.device_count() == 0


def _build(model, tmp_path, precisions, batches=(1, 4), **kw):
    return build_engines(model, precisions, batches,
                         settings=BuildSettings(engines_dir=tmp_path / "engines", backend="tensorrt-rtx", **kw))


@pytest.fixture
def layer_log(monkeypatch):
    """Every message TensorRT-RTX logs during a build, VERBOSE included: its builder prints the built
    engine's layers with their tensors' types ("Datatype: Half") — the plan's own account, readable
    without the GPU that deserializing (and so the engine inspector) would need."""
    from trtprof.backends.tensorrt import builder, tail_logger

    messages: list[str] = []

    def recording_logger(tail, module=None):
        inner = tail_logger.make_logger(tail, module)

        class Recorder(trt.ILogger):
            def __init__(self) -> None:
                trt.ILogger.__init__(self)

            def log(self, severity, msg) -> None:
                messages.append(str(msg))
                inner.log(severity, msg)

        return Recorder()

    monkeypatch.setattr(builder, "make_logger", recording_logger)
    return messages


def _engine_layer_dtypes(messages: list[str]) -> dict[str, int]:
    """Counts of tensor datatypes in the built engine's layer report (the "Layers:" log entry)."""
    [report] = [m for m in messages if "LayerType:" in m and "Datatype:" in m] or [""]
    counts: dict[str, int] = {}
    for dtype in re.findall(r"Datatype: (\w+)", report):
        counts[dtype] = counts.get(dtype, 0) + 1
    return counts


def test_conv_fp32_tf32_fp16_plans_and_fp16_really_has_fp16_tensors(conv_model, tmp_path, layer_log):
    reports = {}
    for precision in (Precision.FP32, Precision.TF32, Precision.FP16):
        layer_log.clear()
        [outcome] = _build(conv_model, tmp_path, [precision])
        reports[precision.value] = (outcome.record, _engine_layer_dtypes(layer_log))
    for name, (record, dtypes) in reports.items():
        meta = record.backend_metadata
        assert record.artifact_path.stat().st_size > 0 and record.environment["tensorrt_rtx_version"] == trt.__version__
        assert meta["library"] == "TensorRT-RTX" and meta["strongly_typed"] and meta["effective_precision"] == name
        assert dtypes, f"{name}: the builder logged no layer report"
    assert reports["fp32"][0].backend_metadata["flags"] == ["-TF32"]
    assert reports["tf32"][0].backend_metadata["flags"] == ["TF32"]
    fp32_types, fp16_types = reports["fp32"][1], reports["fp16"][1]
    assert "Half" not in fp32_types and fp32_types.get("Float", 0) > 0
    # the FP16 engine computes in FP16: most tensors are Half; Float only at the kept FP32 inputs/outputs
    assert fp16_types.get("Half", 0) > fp16_types.get("Float", 0) > 0
    fp16_meta = reports["fp16"][0].backend_metadata
    assert fp16_meta["network_layers_by_dtype"].get("fp16", 0) > 0 and "fp32" not in fp16_meta["network_layers_by_dtype"]
    assert sum(fp16_meta["onnx_nodes_by_precision"]["fp16"].values()) > 0
    assert not (tmp_path / "engines" / "timing.cache").exists()  # no timing cache with TensorRT-RTX
    assert all(r.backend_metadata["timing_cache"].startswith("not used") for r, _ in reports.values())


def test_profiles_from_batch_sizes_two_inputs_with_int64(multi_io_model, tmp_path):
    fp32, fp16 = _build(multi_io_model, tmp_path, [Precision.FP32, Precision.FP16], batches=(1, 4, 16))
    for outcome in (fp32, fp16):
        profile = outcome.record.backend_metadata["profile"]
        assert profile["x"] == {"min": [1, 4], "opt": [16, 4], "max": [16, 4]}
        assert profile["ids"] == {"min": [1, 3], "opt": [16, 3], "max": [16, 3]}
        assert outcome.record.backend_metadata["network_layers_by_dtype"].get("int64", 0) > 0
    assert [t.dtype for t in fp16.record.inputs] == ["float32", "int64"]


def test_opt_batch_and_shape_overrides(dynamic_seq_model, tmp_path):
    with pytest.raises(BadInput, match="seq"):
        _build(dynamic_seq_model, tmp_path, [Precision.FP32], batches=(1, 8))
    [outcome] = _build(dynamic_seq_model, tmp_path, [Precision.FP32], batches=(1, 8),
                       shapes={"tokens": (1, 7, 4)}, options={"opt_batch": 4})
    assert outcome.record.backend_metadata["profile"]["tokens"] == {"min": [1, 7, 4], "opt": [4, 7, 4], "max": [8, 7, 4]}


def test_parser_error_names_the_node_and_writes_nothing(unsupported_op_model, tmp_path):
    with pytest.raises(BuildFailed) as info:
        _build(unsupported_op_model, tmp_path, [Precision.FP32])
    text = str(info.value)
    assert "TensorRT-RTX's ONNX parser rejected the model" in text and "fancy (FancyOp)" in text
    assert not list((tmp_path / "engines").glob("*.plan")) and not list((tmp_path / "engines").glob("*.json"))


def test_rebuild_is_a_cache_hit(conv_model, tmp_path):
    first = _build(conv_model, tmp_path, [Precision.FP32, Precision.FP16])
    before = tree_snapshot(tmp_path / "engines")
    second = _build(conv_model, tmp_path, [Precision.FP32, Precision.FP16])
    assert [o.built for o in first] == [True, True] and [o.built for o in second] == [False, False]
    assert tree_snapshot(tmp_path / "engines") == before


def test_compute_capability_targets_are_in_the_key(conv_model, tmp_path):
    [default] = _build(conv_model, tmp_path, [Precision.FP16])
    [one] = _build(conv_model, tmp_path, [Precision.FP16], options={"compute_capability": "sm86"})
    [two] = _build(conv_model, tmp_path, [Precision.FP16], options={"compute_capability": "sm120,sm86"})
    assert len({default.record.key, one.record.key, two.record.key}) == 3
    assert one.record.backend_metadata["compute_capability_targets"] == ["sm86"]
    assert two.record.backend_metadata["supported_compute_capabilities"] == ["8.6", "12.0"]
    assert default.record.backend_metadata["compute_capability_targets"] == "default"
    plans = {o.record.artifact_path.read_bytes() for o in (default, one, two)}
    assert len(plans) == 3  # the library built three different plans


def test_layer_precisions_keep_named_nodes_fp32(conv_model, tmp_path):
    [outcome] = _build(conv_model, tmp_path, [Precision.FP16], options={"layer_precisions": "fc:fp32"})
    by_dtype = outcome.record.backend_metadata["network_layers_by_dtype"]
    assert by_dtype.get("fp16", 0) > 0 and by_dtype.get("fp32", 0) > 0


@pytest.mark.skipif(not NO_GPU, reason="checks the no-GPU refusal; this machine has a GPU")
def test_bench_and_compare_refuse_without_a_gpu(conv_model, tmp_path, capsys):
    engines = tmp_path / "engines"
    assert main(["build", str(conv_model), "--backend", "tensorrt-rtx", "--fp32", "--fp16",
                 "--engines", str(engines)]) == 0
    capsys.readouterr()
    assert main(["bench", str(engines), "--out", str(tmp_path / "r.json")]) == 2
    [line] = capsys.readouterr().err.strip().splitlines()
    assert "cannot run on this machine: no GPU" in line and "8.6" in line and "12.0" in line
    assert main(["compare", str(engines), "--out", str(tmp_path / "c.json")]) == 2
    [line] = capsys.readouterr().err.strip().splitlines()
    assert "cannot run on this machine: no GPU" in line
    assert not (tmp_path / "r.json").exists() and not (tmp_path / "c.json").exists()


def test_cli_bad_compute_capability_exits_2(conv_model, tmp_path, capsys):
    assert main(["build", str(conv_model), "--backend", "tensorrt-rtx", "--compute-capability", "sm99",
                 "--engines", str(tmp_path / "e")]) == 2
    [line] = capsys.readouterr().err.strip().splitlines()
    assert "sm99" in line and "cannot target it" in line
    assert not list((tmp_path / "e").glob("*.plan"))


@pytest.mark.skipif(not NO_GPU, reason="checks the no-GPU refusal; this machine has a GPU")
def test_model_zoo_graph_build_cache_hit_and_refusal(zoo_dynamic_model, tmp_path, capsys):
    """The issue's "done when", on a model-zoo graph trtprof's authors did not write."""
    engines = tmp_path / "engines"
    argv = ["build", "--backend", "tensorrt-rtx", "--fp32", "--fp16", "--batch-sizes", "1,8", str(zoo_dynamic_model),
            "--engines", str(engines)]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert out.count(" built ") == 2, out
    assert main(argv) == 0
    assert capsys.readouterr().out.count(" cache hit ") == 2
    metas = [json.loads(p.read_text()) for p in sorted(engines.glob("*.json"))]
    assert sorted(m["spec"]["precision"] for m in metas) == ["fp16", "fp32"]
    assert all(m["backend_metadata"]["profile"]["data_0"]["max"][0] == 8 for m in metas)
    assert main(["bench", str(engines), "--out", str(tmp_path / "r.json")]) == 2
    [line] = capsys.readouterr().err.strip().splitlines()
    assert "cannot run on this machine: no GPU" in line


@pytest.fixture
def zoo_dynamic_model(tmp_path) -> Path:
    """light_squeezenet from the onnx package's model-zoo test data, with its batch dim made symbolic
    ("N"; the graph has no Reshape, so nothing else depends on it). Nothing else is changed."""
    import onnx

    source = Path(onnx.__file__).parent / "backend" / "test" / "data" / "light" / "light_squeezenet.onnx"
    if not source.is_file():  # pragma: no cover - every onnx wheel checked ships it
        pytest.fail(f"this onnx build does not ship {source}")
    model = onnx.load(str(source))
    weights = {i.name for i in model.graph.initializer}
    for value in [*model.graph.input, *model.graph.output]:
        if value.name in weights:
            continue
        dim = value.type.tensor_type.shape.dim[0]
        dim.ClearField("dim_value")
        dim.dim_param = "N"
    path = tmp_path / "squeezenet_dynamic.onnx"
    onnx.save(model, str(path))
    return path


@pytest.mark.skipif(not NO_GPU, reason="checks the no-GPU answer; this machine has a GPU")
def test_the_librarys_own_validity_answer_is_read(conv_model, tmp_path):
    """``Runtime.get_engine_validity`` of the real library, as ``load`` asks it before deserializing."""
    from trtprof.backends.tensorrt.rtx import refuse_invalid_plan
    from trtprof.backends.tensorrt.tail_logger import LogTail
    from trtprof.errors import IncompatibleEngine

    [outcome] = _build(conv_model, tmp_path, [Precision.FP16], options={"compute_capability": "sm89"})
    plan = outcome.record.artifact_path.read_bytes()
    with pytest.raises(IncompatibleEngine) as info:
        refuse_invalid_plan(trt, plan, outcome.record, LogTail())
    text = str(info.value)
    assert "TensorRT-RTX says this engine cannot run on this machine" in text
    assert "no GPU" in text and "runs on compute capability 8.9" in text
