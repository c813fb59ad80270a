"""torchvision's ResNet-50 *with BatchNorm*, for ``trtprof train-compare models/resnet50_factory.py:make``.

This is the model a PyTorch user trains (``torchvision.models.resnet50(weights=None)``: random
weights, BatchNorm layers in train mode), not an ONNX export of it (an eval-mode export folds the
BatchNorm into the convolutions: FACTS.md). torchvision is imported inside ``make``. Input
(BATCH, 3, 224, 224); the output is the 1000 logits, so ``--loss cross-entropy`` fits as well as
the default ``mean(|y - 1|)``.
"""
from __future__ import annotations

from typing import Any

BATCH = 32
IMAGE = 224


def make() -> tuple[Any, Any]:
    import torch
    import torchvision

    torch.manual_seed(0)
    return torchvision.models.resnet50(weights=None), torch.zeros(BATCH, 3, IMAGE, IMAGE)
