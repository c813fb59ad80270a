"""Shared fixtures: small ONNX models the tests make themselves (onnx.helper, seeded weights)."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

OPSET = 17


@pytest.fixture(autouse=True)
def _quick_budgets_measure(monkeypatch: pytest.MonkeyPatch) -> None:
    """The suite's compares run on tiny --time-budget-s values (0.2-4 s) to be quick, not to hold the minimum
    design: they measure fewer loads, as --allow-fewer-loads asks (issue 44 #2 made a given budget too small for
    the minimum stop with exit 2 otherwise). Tests of that refusal delete the variable."""
    monkeypatch.setenv("TRTPROF_ALLOW_FEWER_LOADS", "1")


def pytest_configure(config: pytest.Config) -> None:
    """The same for module- and session-scoped fixtures, which run before any function-level fixture (the
    results fuzz and the CLI pages make their files with 0.3-2 s budgets): set for the whole session,
    restored by nothing, and deleted by a refusal test through its own monkeypatch."""
    import os

    os.environ["TRTPROF_ALLOW_FEWER_LOADS"] = "1"


def _save(graph, path: Path, *, opsets=None) -> Path:
    import onnx
    from onnx import helper

    model = helper.make_model(graph, opset_imports=opsets or [helper.make_opsetid("", OPSET)])
    model.ir_version = 8
    onnx.save(model, str(path))
    return path


@pytest.fixture
def conv_model(tmp_path: Path) -> Path:
    from trtprof.model.demo import make_demo_model

    return make_demo_model(tmp_path / "convnet.onnx", channels=8, image=16, classes=10)


@pytest.fixture
def multi_io_model(tmp_path: Path) -> Path:
    """Two inputs (float32 [N,4], int64 [N,3]) and two outputs (float32 [N,2], int64 [N])."""
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(1)
    w = numpy_helper.from_array(rng.standard_normal((4, 2)).astype(np.float32), "w")
    emb = numpy_helper.from_array(rng.standard_normal((100, 2)).astype(np.float32), "emb")
    axes = numpy_helper.from_array(np.array([1], np.int64), "axes")
    nodes = [
        helper.make_node("MatMul", ["x", "w"], ["xw"], name="matmul"),
        helper.make_node("Gather", ["emb", "ids"], ["g"], name="gather", axis=0),  # [N,3,2]
        helper.make_node("ReduceSum", ["g", "axes"], ["gs"], name="rsum", keepdims=0),  # [N,2]
        helper.make_node("Add", ["xw", "gs"], ["scores"], name="add"),
        helper.make_node("ReduceMax", ["ids", "axes"], ["top"], name="rmax", keepdims=0),  # [N]
    ]
    graph = helper.make_graph(
        nodes, "multi_io",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 4]),
         helper.make_tensor_value_info("ids", TensorProto.INT64, ["N", 3])],
        [helper.make_tensor_value_info("scores", TensorProto.FLOAT, ["N", 2]),
         helper.make_tensor_value_info("top", TensorProto.INT64, ["N"])],
        [w, emb, axes],
    )
    return _save(graph, tmp_path / "multi_io.onnx", opsets=[helper.make_opsetid("", 18)])


@pytest.fixture
def static_batch_model(tmp_path: Path) -> Path:
    """Batch fixed to 2."""
    from onnx import TensorProto, helper

    graph = helper.make_graph(
        [helper.make_node("Relu", ["x"], ["y"], name="relu")], "static",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 8])],
    )
    return _save(graph, tmp_path / "static.onnx")


@pytest.fixture
def dynamic_seq_model(tmp_path: Path) -> Path:
    """Input [batch, seq, 4]: seq is dynamic too, so it needs --shape."""
    from onnx import TensorProto, helper

    graph = helper.make_graph(
        [helper.make_node("Relu", ["tokens"], ["y"], name="relu")], "dyn_seq",
        [helper.make_tensor_value_info("tokens", TensorProto.FLOAT, ["batch", "seq", 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", "seq", 4])],
    )
    return _save(graph, tmp_path / "dyn_seq.onnx")


@pytest.fixture
def unsupported_op_model(tmp_path: Path) -> Path:
    """A node of a custom domain that onnxruntime has no kernel for."""
    from onnx import TensorProto, helper

    graph = helper.make_graph(
        [helper.make_node("FancyOp", ["x"], ["y"], name="fancy", domain="com.example")], "custom",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 4])],
    )
    return _save(graph, tmp_path / "custom.onnx",
                 opsets=[helper.make_opsetid("", OPSET), helper.make_opsetid("com.example", 1)])


def tree_snapshot(root: Path) -> dict[str, tuple[int, int]]:
    """{relative path: (size, mtime_ns)} of every file under root (locks excluded)."""
    if not root.exists():
        return {}
    return {
        str(p.relative_to(root)): (p.stat().st_size, p.stat().st_mtime_ns)
        for p in sorted(root.rglob("*")) if p.is_file() and ".locks" not in p.parts
    }


def torch_gpu_marks() -> list:
    """The marks of a test module that needs a CUDA device and onnx2torch (the torch backend on a GPU)."""
    import importlib.util

    from trtprof.system import cuda

    return [pytest.mark.gpu,
            pytest.mark.skipif(cuda.device_count() == 0, reason="no CUDA device"),
            pytest.mark.skipif(importlib.util.find_spec("onnx2torch") is None, reason="onnx2torch missing")]


def report_model(tmp_path: Path) -> Path:
    """The report's literal network (models/conv_elu.py: report_conv_elu_k32_256) as ONNX in tmp_path."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("trtprof_conv_elu", Path(__file__).resolve().parents[1] / "models"
                                                  / "conv_elu.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.make_onnx("report_conv_elu_k32_256", tmp_path / "report.onnx")


def load_script(rel: str, name: str):
    """A script of this repository (``benchmarks/…``, ``models/…``) imported as module ``name`` by its path."""
    import importlib.util
    import sys

    spec = importlib.util.spec_from_file_location(name, Path(__file__).resolve().parents[1] / rel)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture
def mixed_fp16_model(tmp_path: Path) -> Path:
    """A small CNN whose ONNX Runtime CPU "fp16" is ``effective mixed`` with every heavy op FP32 (issue 44):
    the Concat on the input has an FP16 kernel there, the Conv, the pools and the Gemm after it do not."""
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(0)
    w = numpy_helper.from_array((0.2 * rng.standard_normal((8, 6, 3, 3))).astype(np.float32), "w")
    g = numpy_helper.from_array((0.2 * rng.standard_normal((16, 10))).astype(np.float32), "g")
    nodes = [
        helper.make_node("Concat", ["x", "x"], ["xx"], name="concat0", axis=1),
        helper.make_node("Conv", ["xx", "w"], ["c"], name="conv", pads=[1, 1, 1, 1]),
        helper.make_node("Concat", ["c", "c"], ["cc"], name="concat", axis=1),
        helper.make_node("MaxPool", ["cc"], ["p"], name="pool", kernel_shape=[2, 2], strides=[2, 2]),
        helper.make_node("GlobalAveragePool", ["p"], ["gp"], name="gap"),
        helper.make_node("Flatten", ["gp"], ["f"], name="flat"),
        helper.make_node("Gemm", ["f", "g"], ["y"], name="gemm"),
    ]
    graph = helper.make_graph(nodes, "mixed_cnn", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 3, 16, 16])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 10])], [w, g])
    return _save(graph, tmp_path / "mixed_cnn.onnx")


def one_line_error(code: int, err: str, *needles: str) -> str:
    """The CLI's bad-input contract: exit 2, one non-blank line on stderr holding every needle, no traceback;
    that line."""
    lines = [line for line in err.splitlines() if line.strip()]
    assert code == 2 and len(lines) == 1 and "Traceback" not in err, err
    for needle in needles:
        assert needle in lines[0], lines[0]
    return lines[0]
