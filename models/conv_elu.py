"""The 4-layer Conv2D+ELU networks of the "mixed precision is slower" report, as ONNX without TensorFlow.

    python models/conv_elu.py [OUT_DIR]     # writes <name>.onnx for both, prints their sha256

Two networks, named for what they are:

* ``report_conv_elu_k32_256`` — the report's code read literally, in Keras's positional order
  ``Conv2D(filters, kernel_size, strides, padding)``: ``Conv2D(3, 32, 2, 'same', activation=elu)``,
  then kernel 64, 128, 256: **3 filters** with 32…256-wide kernels, stride 2, on a 128×128×3 input
  (783,372 parameters; every layer has 3 input and 3 output channels).
* ``conv_elu_3x3_f32_256`` — what trtprof's sample set built under the name "convnet" before: 32, 64,
  128, 256 filters of 3×3, stride 2, 'same' (388,416 parameters). It is the network the report's
  prose seems to describe, not the one its code builds.

Keras semantics, expressed honestly in ONNX:

* Layout: the input is NHWC (``image``: N×128×128×3) as in Keras; a ``Transpose`` to NCHW opens the
  graph and one back to NHWC closes it (tf2onnx emits the same pair). Weights are stored as Keras
  holds them (kh, kw, cin, cout) and transposed to ONNX's (cout, cin, kh, kw) when the file is built.
* ``padding='same'`` with stride 2 and even kernels: TensorFlow pads
  ``total = max((ceil(in / s) - 1) · s + k - in, 0)`` per spatial axis, ``total // 2`` before and the
  rest after (the extra pixel goes to the bottom/right). That is written as explicit ONNX ``pads``,
  not ``auto_pad=SAME_UPPER``, so the file says exactly what it does. For the report's network the
  totals are 30, 62, 126 and 254 (all even: symmetric); for the 3×3 network 1, 1, 1, 1 (0 before,
  1 after — where a PyTorch ``padding=1`` conv would differ).
* ``activation='elu'``: ONNX ``Elu`` with alpha 1.0 (Keras's default).
* Weights: Keras's defaults, glorot-uniform kernels (limit √(6 / (fan_in + fan_out)), fan = kh·kw·c)
  and zero biases, drawn from a seeded NumPy generator, so the file is reproducible without TF.
  ``make_onnx(..., weights=...)`` takes a Keras model's own weights instead (the TF test uses that to
  check this ONNX against the Keras model built literally).
"""
from __future__ import annotations

import hashlib
import math
import sys
from pathlib import Path
from typing import Any, Sequence

import numpy as np

SEED = 0
IMAGE = 128
CHANNELS = 3
STRIDE = 2
OPSET = 17

# name → (filters per layer, kernel size per layer)
NETWORKS: dict[str, tuple[tuple[int, ...], tuple[int, ...]]] = {
    "report_conv_elu_k32_256": ((3, 3, 3, 3), (32, 64, 128, 256)),
    "conv_elu_3x3_f32_256": ((32, 64, 128, 256), (3, 3, 3, 3)),
}
DESCRIPTIONS = {
    "report_conv_elu_k32_256": "Conv2D(3, k, 2, 'same', elu) for k in 32, 64, 128, 256 (the report's code, "
                               "literally: 3 filters, k×k kernels), NHWC 128×128×3",
    "conv_elu_3x3_f32_256": "Conv2D(f, 3, 2, 'same', elu) for f in 32, 64, 128, 256 (3×3 kernels), NHWC 128×128×3",
}


def tf_same_pads(size: int, kernel: int, stride: int) -> tuple[int, int]:
    """TensorFlow's 'same' padding of one spatial axis: (before, after), the odd pixel after."""
    out = math.ceil(size / stride)
    total = max((out - 1) * stride + kernel - size, 0)
    return total // 2, total - total // 2


def seeded_weights(name: str, seed: int = SEED) -> list[np.ndarray]:
    """[kernel (kh, kw, cin, cout), bias (cout,)] per layer, Keras's default initialisers, seeded."""
    filters, kernels = NETWORKS[name]
    rng = np.random.default_rng(seed)
    out: list[np.ndarray] = []
    cin = CHANNELS
    for f, k in zip(filters, kernels):
        limit = math.sqrt(6.0 / (k * k * cin + k * k * f))
        out.append(rng.uniform(-limit, limit, size=(k, k, cin, f)).astype(np.float32))
        out.append(np.zeros(f, np.float32))
        cin = f
    return out


def make_onnx(name: str, path: Path, *, weights: Sequence[np.ndarray] | None = None, seed: int = SEED) -> Path:
    """Write network ``name`` as ONNX (dynamic batch ``N``, NHWC input ``image``, output ``output``)."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    filters, kernels = NETWORKS[name]
    weights = list(weights) if weights is not None else seeded_weights(name, seed)
    if len(weights) != 2 * len(filters):
        raise ValueError(f"{name} needs {2 * len(filters)} weight arrays (kernel, bias per layer), got {len(weights)}")
    nodes = [helper.make_node("Transpose", ["image"], ["x0"], name="to_nchw", perm=[0, 3, 1, 2])]
    inits = []
    size, cin, prev = IMAGE, CHANNELS, "x0"
    for i, (f, k) in enumerate(zip(filters, kernels)):
        kernel, bias = np.asarray(weights[2 * i], np.float32), np.asarray(weights[2 * i + 1], np.float32)
        if kernel.shape != (k, k, cin, f) or bias.shape != (f,):
            raise ValueError(f"layer {i}: expected kernel {(k, k, cin, f)} and bias {(f,)}, got {kernel.shape}, {bias.shape}")
        inits += [numpy_helper.from_array(np.ascontiguousarray(kernel.transpose(3, 2, 0, 1)), f"conv{i}.weight"),
                  numpy_helper.from_array(bias, f"conv{i}.bias")]
        before, after = tf_same_pads(size, k, STRIDE)
        nodes.append(helper.make_node("Conv", [prev, f"conv{i}.weight", f"conv{i}.bias"], [f"c{i}"], name=f"conv{i}",
                                      kernel_shape=[k, k], strides=[STRIDE, STRIDE],
                                      pads=[before, before, after, after]))
        nodes.append(helper.make_node("Elu", [f"c{i}"], [f"e{i}"], name=f"elu{i}", alpha=1.0))
        size, cin, prev = math.ceil(size / STRIDE), f, f"e{i}"
    nodes.append(helper.make_node("Transpose", [prev], ["output"], name="to_nhwc", perm=[0, 2, 3, 1]))
    graph = helper.make_graph(
        nodes, name,
        [helper.make_tensor_value_info("image", TensorProto.FLOAT, ["N", IMAGE, IMAGE, CHANNELS])],
        [helper.make_tensor_value_info("output", TensorProto.FLOAT, ["N", size, size, cin])],
        inits,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)], producer_name="trtprof models/conv_elu.py")
    model.ir_version = 8
    onnx.checker.check_model(model)
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    onnx.save(model, str(path))
    return path


def keras_model(name: str, keras: Any) -> Any:
    """The same network in Keras, written as the report writes it (positional Conv2D arguments)."""
    filters, kernels = NETWORKS[name]
    inputs = keras.Input((IMAGE, IMAGE, CHANNELS), name="image")
    x = inputs
    for f, k in zip(filters, kernels):
        x = keras.layers.Conv2D(f, k, STRIDE, "same", activation="elu")(x)
    return keras.Model(inputs, x, name=name)


def parameters(name: str) -> int:
    return int(sum(w.size for w in seeded_weights(name)))


def file_sha256(path: Path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    out = Path(argv[0]) if argv else Path(__file__).resolve().parent / "build"
    for name in NETWORKS:
        path = make_onnx(name, out / f"{name}.onnx")
        print(f"{name}: {path} sha256 {file_sha256(path)} ({parameters(name)} parameters)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
