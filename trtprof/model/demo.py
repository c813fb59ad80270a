"""A small sample model for `trtprof demo`, written with onnx.helper (no framework, no download)."""
from __future__ import annotations

from pathlib import Path

import numpy as np

OPSET = 17
# The size `trtprof demo` makes. 64 channels give ONNX Runtime's CPU integer kernels (QLinearConv, U8S8)
# enough work per call that int8 beats fp32 by ~1.5-2x at batch 1 on a 2-core AVX2 CPU (busy or quiet),
# a difference the demo's suggested compare decides within its default budget; 32x32 pixels keep the
# demo's batch-32 bench short (benchmarks/demo_decisive_cpu.sh, docs/demo.md).
DEMO_CHANNELS = 64
DEMO_IMAGE = 32


def make_demo_model(path: Path, *, channels: int = 32, image: int = 64, classes: int = 100, seed: int = 0) -> Path:
    """Conv(3→C,s2)-Relu-Conv(C→2C,s2)-Relu-Conv(2C→4C,s2)-Relu-GlobalAveragePool-Flatten-Gemm.

    Dynamic batch ("batch"), input NCHW 3×image×image, He-initialised weights (seeded) so
    activations stay O(1) and FP16 accuracy checks are meaningful.
    """
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(seed)
    nodes, inits = [], []
    prev, cin = "input", 3
    for i, cout in enumerate((channels, channels * 2, channels * 4)):
        w = (rng.standard_normal((cout, cin, 3, 3)) * np.sqrt(2.0 / (cin * 9))).astype(np.float32)
        b = np.zeros(cout, np.float32)
        inits += [numpy_helper.from_array(w, f"conv{i}.w"), numpy_helper.from_array(b, f"conv{i}.b")]
        nodes.append(helper.make_node("Conv", [prev, f"conv{i}.w", f"conv{i}.b"], [f"c{i}"], name=f"conv{i}",
                                      kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1]))
        nodes.append(helper.make_node("Relu", [f"c{i}"], [f"r{i}"], name=f"relu{i}"))
        prev, cin = f"r{i}", cout
    nodes.append(helper.make_node("GlobalAveragePool", [prev], ["gap"], name="gap"))
    nodes.append(helper.make_node("Flatten", ["gap"], ["flat"], name="flatten", axis=1))
    fc = (rng.standard_normal((classes, cin)) * np.sqrt(1.0 / cin)).astype(np.float32)
    inits += [numpy_helper.from_array(fc, "fc.w"), numpy_helper.from_array(np.zeros(classes, np.float32), "fc.b")]
    nodes.append(helper.make_node("Gemm", ["flat", "fc.w", "fc.b"], ["logits"], name="fc", transB=1))
    graph = helper.make_graph(
        nodes, "trtprof_demo",
        [helper.make_tensor_value_info("input", TensorProto.FLOAT, ["batch", 3, image, image])],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["batch", classes])],
        inits,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)], producer_name="trtprof")
    model.ir_version = 8  # readable by older runtimes too
    onnx.checker.check_model(model)
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    onnx.save(model, str(path))
    return path
