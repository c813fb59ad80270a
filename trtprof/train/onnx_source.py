"""What training from an ONNX file loses, said before the numbers are read.

An ONNX file is usually an inference export. ``torch.onnx.export`` in eval mode (the default way to
export) folds BatchNormalization into the preceding convolution's weights and bias and removes
Dropout, so the "training step" rebuilt from it has neither: for a BatchNorm network that is a
different computation (BatchNorm runs in FP32 under AMP and is a large part of the step and of its
memory; FACTS.md: an ONNX-rebuilt ResNet-50 peaks at ~1.7 GiB at batch 32 against ~7.3 GiB for
torchvision's module). The graph cannot prove a fold happened; ``folded_batchnorm_suspected`` is a
heuristic, named as one:

* no BatchNormalization node, and
* at least ``FOLDED_BN_MIN_CONVS`` convolutions, at least ``FOLDED_BN_BIAS_SHARE`` of them with a bias
  (a BatchNorm network's convolutions have no bias of their own: the fold gives them one), and
* at least one residual ``Add`` fed by a convolution (the BN-era block structure).

A plain conv net with biases and no skips (the report's Conv2D+ELU net) is not flagged; a network
trained without BatchNorm but with biased convolutions and skips would be (a false alarm the message
allows for: "looks like").
"""
from __future__ import annotations

from typing import Any

FOLDED_BN_MIN_CONVS = 8  # fewer convolutions: too little structure to call it a BN architecture
FOLDED_BN_BIAS_SHARE = 0.9  # share of convolutions with a bias input


def training_layers(proto: Any) -> dict[str, Any]:
    """Counts of the training-only layers in the graph, the fold heuristic and the notes to print."""
    nodes = list(proto.graph.node)
    ops = [n.op_type for n in nodes]
    convs = [n for n in nodes if n.op_type == "Conv"]
    biased = sum(1 for n in convs if len(n.input) >= 3 and n.input[2])
    conv_outputs = {o for n in convs for o in n.output}
    residual = sum(1 for n in nodes if n.op_type == "Add" and any(i in conv_outputs for i in n.input))
    bn, dropout = ops.count("BatchNormalization"), ops.count("Dropout")
    suspected = (bn == 0 and len(convs) >= FOLDED_BN_MIN_CONVS and biased >= FOLDED_BN_BIAS_SHARE * len(convs)
                 and residual > 0)
    notes = [f"ONNX source: trained as onnx2torch rebuilds it; BatchNormalization nodes: {bn}, Dropout nodes: {dropout}"
             + ("" if bn or dropout else " (an eval-mode export has neither: the step trains without them)")]
    if suspected:
        notes.append(f"ONNX source looks like a BatchNorm network exported in eval mode (heuristic: {len(convs)} Conv, "
                     f"{biased} with a bias, {residual} residual Add, no BatchNormalization): BatchNorm was probably "
                     "folded into the convolutions, so this is not the model's training step; pass the module "
                     "instead: train-compare path/to/file.py:make")
    return {"batchnorm_nodes": bn, "dropout_nodes": dropout, "conv_nodes": len(convs), "conv_with_bias": biased,
            "residual_adds_after_conv": residual, "folded_batchnorm_suspected": suspected,
            "folded_batchnorm_method": (f"heuristic: no BatchNormalization, >= {FOLDED_BN_MIN_CONVS} Conv, "
                                        f">= {FOLDED_BN_BIAS_SHARE:.0%} with bias, a residual Add after a Conv"),
            "notes": notes}
