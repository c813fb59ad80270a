"""models/conv_elu.py: the report's literal network and the 3×3 variant as ONNX without TensorFlow.

Without TF: TF's 'same' padding arithmetic on known cases, shapes and parameter counts, the file is
reproducible. With TF (marked ``tf``): the ONNX file, built from a Keras model's own weights, gives
Keras's outputs on the CPU — the Keras model written as the report writes it."""
from __future__ import annotations

import numpy as np
import pytest

from ..tf_helpers import load_model_script


def _conv_elu():
    return load_model_script("conv_elu")


def test_tf_same_padding_puts_the_odd_pixel_after():
    ce = _conv_elu()
    assert ce.tf_same_pads(128, 32, 2) == (15, 15)  # out 64: (63·2 + 32 − 128) = 30
    assert ce.tf_same_pads(16, 256, 2) == (127, 127)  # kernel far wider than the input
    assert ce.tf_same_pads(128, 3, 2) == (0, 1)  # total 1: nothing before, one after (TF), not 1/1
    assert ce.tf_same_pads(5, 1, 2) == (0, 0)


def test_networks_shapes_parameters_and_reproducible_bytes(tmp_path):
    import onnx
    import onnxruntime as ort

    ce = _conv_elu()
    assert ce.parameters("report_conv_elu_k32_256") == 783_372
    assert ce.parameters("conv_elu_3x3_f32_256") == 388_416  # the Keras "convnet" manifest entry's count
    for name, channels in (("report_conv_elu_k32_256", 3), ("conv_elu_3x3_f32_256", 256)):
        a = ce.make_onnx(name, tmp_path / "a" / f"{name}.onnx")
        b = ce.make_onnx(name, tmp_path / "b" / f"{name}.onnx")
        assert a.read_bytes() == b.read_bytes()
        model = onnx.load(str(a))
        convs = [n for n in model.graph.node if n.op_type == "Conv"]
        assert len(convs) == 4
        session = ort.InferenceSession(str(a), providers=["CPUExecutionProvider"])
        y = session.run(None, {"image": np.ones((2, 128, 128, 3), np.float32)})[0]
        assert y.shape == (2, 8, 8, channels) and np.isfinite(y).all()


@pytest.mark.tf
@pytest.mark.parametrize("name", ["report_conv_elu_k32_256", "conv_elu_3x3_f32_256"])
def test_onnx_matches_the_literal_keras_model(name, tmp_path):
    pytest.importorskip("tensorflow")
    import keras
    import onnxruntime as ort

    ce = _conv_elu()
    keras.utils.set_random_seed(0)
    model = ce.keras_model(name, keras)
    if name == "report_conv_elu_k32_256":  # the report's positional order: 3 filters, kernel 32…256
        assert [(layer.filters, layer.kernel_size, layer.strides, layer.padding) for layer in model.layers[1:]] == \
            [(3, (k, k), (2, 2), "same") for k in (32, 64, 128, 256)]
    rng = np.random.default_rng(1)
    # biases are zero by Keras's default: give them values so a bias mix-up cannot pass
    weights = [w if w.ndim > 1 else rng.standard_normal(w.shape).astype(np.float32) * 0.1 for w in model.get_weights()]
    model.set_weights(weights)
    path = ce.make_onnx(name, tmp_path / f"{name}.onnx", weights=model.get_weights())
    x = rng.standard_normal((2, 128, 128, 3)).astype(np.float32)
    want = np.asarray(model(x, training=False))
    got = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"]).run(None, {"image": x})[0]
    assert got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5 * float(np.abs(want).max()))
