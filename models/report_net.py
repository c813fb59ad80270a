"""The report's Keras net as a PyTorch module, for ``trtprof train-compare models/report_net.py:make``.

The report's code, read literally (``models/conv_elu.py`` explains the reading):
``Conv2D(3, 32, 2, 'same', activation='elu')`` then kernel sizes 64, 128, 256 — three filters each,
stride 2, TensorFlow 'same' padding, ELU — on a 128×128×3 input, ``reduce_mean(|y - 1|)`` loss and
Adam (train-compare's defaults). PyTorch layout: NCHW input (N, 3, 128, 128).

TF 'same' padding for stride 2 pads ``(ceil(in/2) - 1)·2 + k - in`` in total, the odd pixel after;
for these sizes (128→64→32→16→8 with k = 32, 64, 128, 256) every total is even (30, 62, 126, 254),
so the padding is symmetric, ``k/2 - 1`` on each side, and a plain ``nn.Conv2d(padding=k//2 - 1)``
is exactly TF's 'same'. Weights: Keras's defaults (glorot-uniform kernels, zero biases) drawn by
``conv_elu.seeded_weights`` so this module, the ONNX file and the Keras model hold the same numbers.

``BATCH`` is the report's batch (10); ``--batch-sizes`` overrides it.
"""
from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from conv_elu import IMAGE, NETWORKS, seeded_weights, tf_same_pads  # noqa: E402

NAME = "report_conv_elu_k32_256"
BATCH = 10


def build(seed: int = 0) -> Any:
    import numpy as np
    import torch
    from torch import nn

    filters, kernels = NETWORKS[NAME]
    weights = seeded_weights(NAME, seed)
    layers: list[nn.Module] = []
    size, cin = IMAGE, 3
    for i, (f, k) in enumerate(zip(filters, kernels)):
        before, after = tf_same_pads(size, k, 2)
        if before != after:  # not the case for this net (see the docstring); refuse rather than differ
            raise ValueError(f"layer {i}: asymmetric 'same' padding {before}/{after}")
        conv = nn.Conv2d(cin, f, k, stride=2, padding=before)
        with torch.no_grad():
            conv.weight.copy_(torch.from_numpy(np.ascontiguousarray(weights[2 * i].transpose(3, 2, 0, 1))))
            conv.bias.copy_(torch.from_numpy(weights[2 * i + 1]))
        layers += [conv, nn.ELU()]
        size, cin = -(-size // 2), f
    return nn.Sequential(*layers)


def make() -> tuple[Any, Any]:
    import torch

    return build(), torch.zeros(BATCH, 3, IMAGE, IMAGE)
