"""backends/torch_fuse (issue 43): the converted module gets back the Linear and the GELU that
``torch.onnx.export`` took apart, computing what ONNX Runtime computes from the same graph; anything that
is not exactly the pattern is left alone (a MatMul of two activations, a 2-D bias, a value read twice, a
constant off by more than the tolerance); per-layer profiling and training keep one submodule per node."""
from __future__ import annotations

import importlib.util

import numpy as np
import pytest

from tests.convert.shape_graphs import run_ort, shape_arithmetic_model

pytestmark = pytest.mark.skipif(importlib.util.find_spec("torch") is None
                                or importlib.util.find_spec("onnx2torch") is None,
                                reason="torch or onnx2torch missing")

ROOT2 = 2.0 ** 0.5


def _mlp(*, root2: float = ROOT2, bias_shape=(16,), second_matmul_reader: bool = False, activation_matmul=False):
    """x [2, 5, 8] → MatMul(W1) + B1 → GELU as the export writes it (Div √2, Erf, Add 1, Mul x, Mul 0.5)
    → MatMul(W2) + B2 → y [2, 5, 8]; the options spoil one pattern each."""
    import onnx
    from onnx import TensorProto as T, helper as h, numpy_helper as nh

    rng = np.random.default_rng(7)
    inits = [nh.from_array(rng.standard_normal((8, 16)).astype(np.float32), "W1"),
             nh.from_array(rng.standard_normal(bias_shape).astype(np.float32), "B1"),
             nh.from_array(rng.standard_normal((16, 8)).astype(np.float32) / 4, "W2"),
             nh.from_array(rng.standard_normal((8,)).astype(np.float32), "B2"),
             nh.from_array(np.array(root2, np.float32), "root2"), nh.from_array(np.array(1.0, np.float32), "one"),
             nh.from_array(np.array(0.5, np.float32), "half")]
    first = ["x", "xt"] if activation_matmul else ["x", "W1"]
    nodes = ([h.make_node("Transpose", ["x"], ["xt0"], perm=[0, 2, 1]),
              h.make_node("MatMul", ["xt0", "x"], ["xx"]),  # [2, 8, 8]
              h.make_node("Slice", ["W1", "s0", "s16", "s1"], ["w1_rows"]),
              h.make_node("MatMul", ["xx", "w1_rows"], ["xt"])] if activation_matmul else [])
    if activation_matmul:  # x [2,5,8] @ xt [2,8,16]: a MatMul of two activations, then + B1
        inits += [nh.from_array(np.array([0], np.int64), "s0"), nh.from_array(np.array([8], np.int64), "s16"),
                  nh.from_array(np.array([0], np.int64), "s1")]
    nodes += [h.make_node("MatMul", first, ["m1"], name="fc1_matmul"),
              h.make_node("Add", ["m1", "B1"], ["a1"], name="fc1_add"),
              h.make_node("Div", ["a1", "root2"], ["d"]), h.make_node("Erf", ["d"], ["e"]),
              h.make_node("Add", ["e", "one"], ["e1"]), h.make_node("Mul", ["a1", "e1"], ["g0"]),
              h.make_node("Mul", ["g0", "half"], ["g"]),
              h.make_node("MatMul", ["g", "W2"], ["m2"], name="fc2_matmul"),
              h.make_node("Add", ["B2", "m2"], ["y0"], name="fc2_add")]
    outputs = [h.make_tensor_value_info("y", T.FLOAT, [2, 5, 8])]
    if second_matmul_reader:  # fc2's MatMul output read by a second node too: not only its Add's
        nodes.append(h.make_node("Neg", ["m2"], ["neg"]))
        nodes.append(h.make_node("Add", ["y0", "neg"], ["y"]))
    else:
        nodes.append(h.make_node("Identity", ["y0"], ["y"]))
    graph = h.make_graph(nodes, "mlp", [h.make_tensor_value_info("x", T.FLOAT, [2, 5, 8])], outputs, inits)
    model = h.make_model(graph, opset_imports=[h.make_opsetid("", 17)])
    onnx.checker.check_model(model)
    return model


def _converted(model, fuse=True):
    from trtprof.backends.torch_convert import to_torch_module

    return to_torch_module(model, fuse=fuse).eval()


def _run(module, x):
    import torch

    with torch.no_grad():
        return module(torch.from_numpy(x)).numpy()


X = np.random.default_rng(3).standard_normal((2, 5, 8)).astype(np.float32)


def test_linear_and_gelu_are_put_back_and_compute_what_onnx_runtime_computes():
    import torch.nn.functional as F

    model = _mlp()
    module = _converted(model)
    assert module.trtprof_fusions == {"linear": 2, "gelu": 1}
    targets = [n.target for n in module.graph.nodes if n.op == "call_function"]
    assert targets.count(F.linear) == 2 and targets.count(F.gelu) == 1
    kinds = {type(m).__name__ for m in module.modules()}
    assert not kinds & {"OnnxMatMul", "OnnxErf", "OnnxBinaryMathOperation"}
    (want,) = run_ort(model, {"x": X})
    np.testing.assert_allclose(_run(module, X), want, rtol=1e-5, atol=1e-5)
    # the weights are stored once: the transposed copies, the original initializers dropped
    assert sum(b.numel() for b in module.buffers()) == 8 * 16 + 16 + 16 * 8 + 8


def test_unfused_conversion_keeps_one_submodule_per_node_and_the_same_numbers():
    model = _mlp()
    plain = _converted(model, fuse=False)
    assert plain.trtprof_fusions == {}
    kinds = [type(m).__name__ for m in plain.modules()]
    assert kinds.count("OnnxMatMul") == 2 and kinds.count("OnnxErf") == 1
    np.testing.assert_allclose(_run(plain, X), _run(_converted(model), X), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("root2, gelu", [(ROOT2 + 0.9e-6, 1), (ROOT2 + 1.1e-6, 0), (1.5, 0)])
def test_the_gelu_constant_must_be_root_two_to_the_tolerance(root2, gelu):
    from trtprof.backends.torch_fuse import CONSTANT_TOLERANCE

    assert CONSTANT_TOLERANCE == 1e-6
    model = _mlp(root2=root2)
    module = _converted(model)
    assert module.trtprof_fusions == {"linear": 2, "gelu": gelu}
    (want,) = run_ort(model, {"x": X})
    np.testing.assert_allclose(_run(module, X), want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("spoil, linear", [({"bias_shape": (1, 16)}, 1),  # a 2-D bias: fc1 stays MatMul + Add
                                           ({"second_matmul_reader": True}, 1),  # fc2's product read twice
                                           ({"activation_matmul": True}, 1)])  # fc1 multiplies two activations
def test_what_is_not_exactly_the_linear_pattern_is_left_alone(spoil, linear):
    model = _mlp(**spoil)
    module = _converted(model)
    assert module.trtprof_fusions["linear"] == linear
    (want,) = run_ort(model, {"x": X})
    np.testing.assert_allclose(_run(module, X), want, rtol=1e-4, atol=1e-4)


def test_training_converts_without_the_rewrites(tmp_path):
    import onnx
    from onnx import TensorProto as T, helper as h, numpy_helper as nh

    from trtprof.train.step import load_module

    rng = np.random.default_rng(1)
    inits = [nh.from_array(rng.standard_normal((8, 8)).astype(np.float32), n) for n in ("Wg", "W")]
    inits += [nh.from_array(rng.standard_normal((8,)).astype(np.float32), n) for n in ("Bg", "B")]
    nodes = [h.make_node("Gemm", ["x", "Wg", "Bg"], ["g"]), h.make_node("MatMul", ["g", "W"], ["m"]),
             h.make_node("Add", ["m", "B"], ["y"])]
    graph = h.make_graph(nodes, "g", [h.make_tensor_value_info("x", T.FLOAT, [2, 8])],
                         [h.make_tensor_value_info("y", T.FLOAT, [2, 8])], inits)
    onnx.save(h.make_model(graph, opset_imports=[h.make_opsetid("", 17)]), str(tmp_path / "g.onnx"))
    module, _, _ = load_module(tmp_path / "g.onnx")
    assert module.trtprof_fusions == {} and "OnnxMatMul" in {type(m).__name__ for m in module.modules()}
    assert _converted(onnx.load(str(tmp_path / "g.onnx"))).trtprof_fusions == {"linear": 1, "gelu": 0}


def test_per_layer_profiling_of_a_fused_engine_swaps_to_one_submodule_per_node(tmp_path, monkeypatch):
    from trtprof.backends import torch as torch_backend
    from trtprof.backends.base import Availability
    from trtprof.cli import main
    from trtprof.engines.cache import list_engines
    from trtprof.layers.torch_profile import per_node_module

    monkeypatch.setattr(torch_backend.TorchBackend, "available", lambda self: Availability(True))
    monkeypatch.setattr(torch_backend.TorchBackend, "environment",
                        lambda self: {"backend": "torch", "gpu": "fake-for-cpu-test", "torch": "cpu"})
    shape_arithmetic_model(tmp_path / "shapes.onnx")  # ends in MatMul + Add (its bias 1-D): fused on build
    assert main(["build", "--backend", "torch", "--fp32", str(tmp_path / "shapes.onnx"), "--engines",
                 str(tmp_path / "e"), "--batch-sizes", "3"]) == 0
    (record,) = list_engines(tmp_path / "e")
    assert record.backend_metadata["fixed_shapes"][0]["fused"] == {"linear": 1, "gelu": 0}
    runner = torch_backend.runner_from_artifact(record.artifact_path, record, device="cpu")
    runner.prepare({"x": (3, 4, 8)})
    names = {name for name, _ in per_node_module(runner).named_children()}
    assert {"matmul", "bias"} <= names
