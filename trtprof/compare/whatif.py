"""What-if experiments: a changed copy of a model whose outputs must equal the original's, to be
measured against it as an A/B (``trtprof.compare.ab``).

Why: the diagnosis gives advice ("pad channels to multiples of 8 so FP16 runs on tensor cores"), and
advice that is never measured is a guess. ``pad-channels`` makes the advice concrete and checks it is
harmless: every Conv (group 1) and Gemm gets its channel dimensions zero-padded to a multiple of 8 —
the activation is padded with zero channels before it (``Pad``), the weights with zero filters and
zero input channels, and the result sliced back to the original channels after it (``Slice``) — so the
model computes exactly what it did, with every Conv/Gemm at tensor-core-friendly sizes. The local
Pad/Slice around each layer is the conservative version of the change (a hand-padded network would
carry the padded channels from layer to layer): its memory traffic is part of what is measured.
``check_identical`` runs both models on the same inputs (ONNX Runtime, FP32) and refuses a copy whose
outputs differ beyond rounding.

``channels-last`` changes no file: it is the torch backend's ``memory_format`` build option (module
and the 4-D inputs that feed a Conv in NHWC memory, cuDNN's NHWC tensor-core kernels), so the engines
differ in their cache key and record the layout. ``channels_last_targets`` refuses a model it cannot
change (no 4-D input, no 2-D Conv with initializer weights); ``check_channels_last`` runs the module
both ways through the torch runner (FP32, TF32 off) and refuses outputs that differ beyond rounding
(``CHANNELS_LAST_RTOL``).

``nhwc`` changes no file either: it is the runner option a backend names as its ``layout_option``
(ONNX Runtime's CUDA EP: ``prefer_nhwc``, set to "1"), applied at load and kept in the cache key, so
Conv, BatchNorm and pooling run cuDNN's NHWC kernels (FP16 tensor cores want NHWC). ``nhwc_targets``
refuses a model without such nodes; ``check_nhwc`` runs the model both ways on ORT's CUDA EP (FP32,
TF32 off) and refuses outputs that differ beyond rounding (``NHWC_RTOL``).

``keep-fp32`` changes no file: it is the FP16 engine built with a keep-list (the ``layer_precisions`` build
option every graph-converting backend reads, ``convert.keeplist``) that keeps in FP32 the layers the
``tensor_core_ineligible`` finding names — Conv/Gemm/MatMul nodes whose channel counts or GEMM dims are not
multiples of 8 at the run's shapes (``layers.graph.node_facts``). Padding (``pad-channels``) is one answer to
such layers; where it multiplies their work (3 channels padded to 8 on a large kernel: 7× the products),
keeping them FP32 is the other, and the one that shows whether FP16 kernels on those layers are what holds
FP16 back. ``keep_fp32_targets`` refuses a model with no such layer, and one whose such layers have no name
(a keep-list names nodes). No identity check: the kept layers compute in FP32, closer to the FP32 reference
than FP16 does; the accuracy pass judges the arm against FP32 as it judges every FP16 arm.

``ort-fusions`` writes a copy: the model run through ONNX Runtime's transformer optimizer
(``onnxruntime.transformers.optimizer``: Attention, SkipLayerNormalization, BiasGelu… fused into ORT's
contrib ops), for backends that run those ops. ``ort_fusions`` counts the fused ops before and after
(the caller refuses a copy in which nothing was fused); ``check_fused`` runs both on ORT's CPU provider
and refuses outputs that differ beyond what fused kernels' rounding explains (``ORT_FUSIONS_RTOL``).
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

import numpy as np

from ..errors import BadInput, BadModel, MissingDependency, TrtprofError
from ..model.onnx_model import OnnxModel
from ..util.thirdparty import third_party_warnings

PAD_MULTIPLE = 8  # FP16 tensor cores want channel counts in multiples of 8 (cuDNN, TensorRT docs)
PAD_CHANNELS = "pad-channels"
CHANNELS_LAST = "channels-last"
NHWC = "nhwc"
ORT_FUSIONS = "ort-fusions"
KEEP_FP32 = "keep-fp32"
WHAT_IFS = (PAD_CHANNELS, CHANNELS_LAST, NHWC, ORT_FUSIONS, KEEP_FP32)
# The finding whose advice each experiment tests (diagnose/layers rule names). channels-last: none —
# on torch cuDNN's NCHW↔NHWC transposes run inside each Conv's row of the layer table (kernels
# ``nchwToNhwc…``), so neither cast_reformat (rows of kind reformat) nor any other rule measures them.
# nhwc: diagnose.ort_rules' NCHW finding; ort-fusions: none yet (no rule counts the unfused patterns).
SUGGESTED_BY: dict[str, str | None] = {PAD_CHANNELS: "tensor_core_ineligible", CHANNELS_LAST: None, NHWC: "ort_nchw",
                                        ORT_FUSIONS: None, KEEP_FP32: "tensor_core_ineligible"}
# ``--what-if nhwc``: the value the backend's layout option (``Capabilities.layout_option``, ORT's
# ``prefer_nhwc``) takes in the changed arm, and the ops whose kernels it switches to NHWC (ORT's CUDA EP
# has NHWC kernels for these; a model with none of them has nothing to change)
NHWC_ON = "1"
NHWC_OPS = ("Conv", "ConvTranspose", "BatchNormalization", "MaxPool", "AveragePool", "GlobalAveragePool",
            "GlobalMaxPool")
# the what-if area inside an engines dir: the changed model copies and the engines built from them live
# here, apart from the user's own engines, so `trtprof bench ENGINES/` does not list an experiment as one
# of the user's engines (issue 34); a dot dir, so a glob of the engines dir and `ls` pass it by
WHATIF_DIR = ".whatif"


def whatif_dir(engines_dir: Path) -> Path:
    """Where a what-if's changed copies and engines go: ``<engines_dir>/.whatif``."""
    return Path(engines_dir) / WHATIF_DIR
# "Identical": the padded model adds zero products, which only changes summation order inside a
# kernel. Relative to the output's scale, FP32 reordering stays far below this.
IDENTICAL_RTOL = 1e-5
# channels-last vs NCHW, FP32 with TF32 off: cuDNN (autotuned) picks other algorithms per layout —
# implicit GEMM, Winograd, FFT — whose FP32 transforms and summation orders differ by up to ~1e-4 of
# the output's scale on a deep net; a layout mistake (channels read as width) moves outputs by O(1)
# of it. 1e-3 passes the first with room and is three orders below the second.
CHANNELS_LAST_RTOL = 1e-3
# prefer_nhwc 1 vs 0, FP32 with TF32 off: the same question as channels-last (cuDNN picks other algorithms
# per layout, whose FP32 summation orders differ by up to ~1e-4 of the output's scale), the same bound
NHWC_RTOL = CHANNELS_LAST_RTOL
# ``--what-if ort-fusions``: the ops ONNX Runtime's transformer optimizer writes when it fuses a pattern
# (attention, layer norms with or without the residual Add, Gelu with or without its bias, embeddings);
# counted before and after, a copy in which none grew fused nothing
FUSED_OPS = ("Attention", "MultiHeadAttention", "GroupQueryAttention", "PackedAttention", "EmbedLayerNormalization",
             "SkipLayerNormalization", "SkipSimplifiedLayerNormalization", "LayerNormalization",
             "SimplifiedLayerNormalization", "BiasGelu", "FastGelu", "Gelu", "GemmFastGelu", "QuickGelu",
             "BiasAdd", "BiasSplitGelu", "RotaryEmbedding", "GroupNorm", "SkipGroupNorm")
# the optimizer's own level 1 (its default for bert and vit): ORT's basic, provider-independent rewrites
# (constant folding, redundant nodes) before the fusions, run on the CPU provider (use_gpu False: the
# optimizer's own note says a CUDA session may leave Memcpy nodes in the saved graph; level 1 is the same
# on either provider)
FUSION_OPT_LEVEL = 1
# fused copy vs original, ORT CPU, FP32: fused kernels (one-pass layer norm, fused softmax in attention)
# change summation order, ~1e-6 of the output's scale per layer, ~1e-5 through a deep random-weight
# transformer; a fusion that changes the function (a mask read as lengths, a dropped bias) moves outputs
# by a large part of their scale. 1e-3 passes the first with room and stays well below the second.
ORT_FUSIONS_RTOL = 1e-3
MIN_OPSET = 11  # Pad takes its pads as an input from opset 11 on


@dataclass(frozen=True)
class PadReport:
    """What ``pad_channels`` changed: per padded node, its (old, new) channel counts."""

    padded: dict[str, dict[str, tuple[int, int]]]
    skipped: dict[str, str]  # node → why it was left alone

    def to_json(self) -> dict[str, Any]:
        return {"padded": {k: {d: list(v) for d, v in dims.items()} for k, dims in self.padded.items()},
                "skipped": dict(self.skipped), "multiple": PAD_MULTIPLE}


def keep_fp32_targets(source: OnnxModel, input_shapes: Mapping[str, tuple[int, ...]]) -> dict[str, list[str]]:
    """``--what-if keep-fp32``: the layers ``tensor_core_ineligible`` names at these input shapes (node name →
    why it cannot fill tensor cores), in graph order. A ``BadInput`` naming the file where there is none, or
    where such a layer has no name (a keep-list names nodes; ``layers.graph.node_key`` makes up the row's)."""
    from ..layers.graph import node_facts, tensor_core_ineligible_nodes

    try:
        facts = node_facts(source.proto, input_shapes)
    except (ValueError, KeyError) as err:
        raise BadInput(f"{source.path}: --what-if {KEEP_FP32}: the graph's shapes cannot be inferred ({err})") from err
    named = {n.name for n in source.proto.graph.node if n.name}
    bad = {name: list(f["tensor_core"]["reasons"]) for name, f in tensor_core_ineligible_nodes(facts).items()}
    if not bad:
        raise BadInput(f"{source.path}: --what-if {KEEP_FP32}: every Conv/Gemm/MatMul has channels and GEMM dims in "
                       f"multiples of {PAD_MULTIPLE} (tensor_core_ineligible names none); nothing to keep in FP32")
    unnamed = [name for name in bad if name not in named]
    if unnamed:
        raise BadInput(f"{source.path}: --what-if {KEEP_FP32}: {len(unnamed)} such layer(s) have no node name "
                       f"(e.g. {unnamed[0]}); a keep-list names nodes: name them in the ONNX file")
    return bad


def _round_up(n: int) -> int:
    return -(-n // PAD_MULTIPLE) * PAD_MULTIPLE


def pad_channels(source: OnnxModel, out: Path) -> tuple[PadReport, OnnxModel]:
    """Write ``out``: ``source`` (read once: an empty, truncated or non-ONNX file was refused in one line
    naming it, issue 34) with every group-1 Conv and every Gemm padded as the module docstring says, built
    from a copy of its graph; the report and the padded copy as the ``OnnxModel`` it is (not read back)."""
    import onnx
    from onnx import numpy_helper

    model = source.copy_proto()
    opset = max((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), default=0)
    if opset < MIN_OPSET:
        raise BadInput(f"{source.path}: --what-if {PAD_CHANNELS} needs ONNX opset ≥ {MIN_OPSET} (the model has "
                       f"{opset})")
    graph = model.graph
    inits = {i.name: i for i in graph.initializer}
    padded: dict[str, dict[str, tuple[int, int]]] = {}
    skipped: dict[str, str] = {}
    nodes = []
    for k, node in enumerate(graph.node):
        name = node.name or f"{node.op_type}_{k}"
        if node.op_type not in ("Conv", "Gemm"):
            nodes.append(node)
            continue
        why = _unpaddable(node, inits)
        if why:
            skipped[name] = why
            nodes.append(node)
            continue
        w = numpy_helper.to_array(inits[node.input[1]])
        if node.op_type == "Conv":
            new_nodes, dims = _pad_conv(node, name, w, inits, graph)
        else:
            new_nodes, dims = _pad_gemm(node, name, w, inits, graph)
        if not dims:
            skipped[name] = f"channels already multiples of {PAD_MULTIPLE}"
            nodes.append(node)
            continue
        padded[name] = dims
        nodes.extend(new_nodes)
    del graph.node[:]
    graph.node.extend(nodes)
    used = {name for n in graph.node for name in n.input}
    kept = [i for i in graph.initializer if i.name in used]  # the replaced weights go
    del graph.initializer[:]
    graph.initializer.extend(kept)
    onnx.checker.check_model(model)
    return PadReport(padded, skipped), OnnxModel.save(model, out)


def _attr(node: Any, name: str, default: Any) -> Any:
    from onnx import helper

    for a in node.attribute:
        if a.name == name:
            return helper.get_attribute_value(a)
    return default


def _unpaddable(node: Any, inits: Mapping[str, Any]) -> str:
    if len(node.input) < 2 or node.input[1] not in inits:
        return "weights are not an initializer"
    if len(node.input) > 2 and node.input[2] and node.input[2] not in inits:
        return "bias is not an initializer"
    if node.op_type == "Conv" and _attr(node, "group", 1) != 1:
        return "grouped convolution"
    if node.op_type == "Gemm" and (_attr(node, "transA", 0) or len(inits[node.input[1]].dims) != 2):
        return "transposed A or non-2D weights"
    return ""


def _const(graph: Any, name: str, values: np.ndarray) -> str:
    from onnx import numpy_helper

    graph.initializer.append(numpy_helper.from_array(values, name))
    return name


def _pad_conv(node: Any, name: str, w: np.ndarray, inits: Mapping[str, Any], graph: Any):
    """Pad(x: channels C→C') → Conv(W: [M', C', …], b: [M']) → Slice(channels :M)."""
    from onnx import helper, numpy_helper

    m, c = int(w.shape[0]), int(w.shape[1])
    m2, c2 = _round_up(m), _round_up(c)
    if (m2, c2) == (m, c):
        return [node], {}
    rank = w.ndim  # N, C and the spatial dims of the activation
    tag = f"{name}__pad{PAD_MULTIPLE}"
    x = node.input[0]
    nodes = []
    if c2 != c:
        pads = np.zeros(2 * rank, dtype=np.int64)
        pads[rank + 1] = c2 - c  # end of the channel axis
        nodes.append(helper.make_node("Pad", [x, _const(graph, f"{tag}_pads", pads)], [f"{tag}_x"], name=f"{tag}_Pad"))
        x = f"{tag}_x"
    w2 = np.zeros((m2, c2, *w.shape[2:]), dtype=w.dtype)
    w2[:m, :c] = w
    inputs = [x, _const(graph, f"{tag}_W", w2)]
    if len(node.input) > 2 and node.input[2]:
        b = numpy_helper.to_array(inits[node.input[2]])
        inputs.append(_const(graph, f"{tag}_B", np.concatenate([b, np.zeros(m2 - m, dtype=b.dtype)])))
    y = node.output[0] if m2 == m else f"{tag}_y"
    conv = helper.make_node("Conv", inputs, [y], name=f"{tag}_Conv")
    conv.attribute.extend(node.attribute)
    nodes.append(conv)
    if m2 != m:
        nodes.append(_slice(graph, tag, y, node.output[0], m))
    return nodes, {"out_channels": (m, m2), "in_channels": (c, c2)}


def _pad_gemm(node: Any, name: str, w: np.ndarray, inits: Mapping[str, Any], graph: Any):
    """Pad(A: K→K') → Gemm(B: [K', N'] or [N', K'], C: [N']) → Slice(columns :N)."""
    from onnx import helper, numpy_helper

    trans_b = bool(_attr(node, "transB", 0))
    k, n = (int(w.shape[1]), int(w.shape[0])) if trans_b else (int(w.shape[0]), int(w.shape[1]))
    k2, n2 = _round_up(k), _round_up(n)
    if (k2, n2) == (k, n):
        return [node], {}
    tag = f"{name}__pad{PAD_MULTIPLE}"
    a = node.input[0]
    nodes = []
    if k2 != k:
        pads = np.array([0, 0, 0, k2 - k], dtype=np.int64)
        nodes.append(helper.make_node("Pad", [a, _const(graph, f"{tag}_pads", pads)], [f"{tag}_a"], name=f"{tag}_Pad"))
        a = f"{tag}_a"
    w2 = np.zeros((n2, k2) if trans_b else (k2, n2), dtype=w.dtype)
    if trans_b:
        w2[:n, :k] = w
    else:
        w2[:k, :n] = w
    inputs = [a, _const(graph, f"{tag}_B", w2)]
    if len(node.input) > 2 and node.input[2]:
        c = numpy_helper.to_array(inits[node.input[2]])
        if c.size == n:  # a bias per output column: pad it; a scalar or full C stays broadcastable only if 1
            c = np.concatenate([c.reshape(-1), np.zeros(n2 - n, dtype=c.dtype)])
        inputs.append(_const(graph, f"{tag}_C", c))
    y = node.output[0] if n2 == n else f"{tag}_y"
    gemm = helper.make_node("Gemm", inputs, [y], name=f"{tag}_Gemm")
    gemm.attribute.extend(node.attribute)
    nodes.append(gemm)
    if n2 != n:
        nodes.append(_slice(graph, tag, y, node.output[0], n))
    return nodes, {"out_features": (n, n2), "in_features": (k, k2)}


def _slice(graph: Any, tag: str, x: str, y: str, keep: int) -> Any:
    from onnx import helper

    return helper.make_node("Slice", [x, _const(graph, f"{tag}_s0", np.array([0], dtype=np.int64)),
                                      _const(graph, f"{tag}_s1", np.array([keep], dtype=np.int64)),
                                      _const(graph, f"{tag}_ax", np.array([1], dtype=np.int64))], [y],
                            name=f"{tag}_Slice")


def max_relative_difference(ref: Mapping[str, np.ndarray], got: Mapping[str, np.ndarray]) -> float:
    """The largest |got − ref| over every output, relative to that output's largest |ref| (1 if 0)."""
    worst = 0.0
    for name, r in ref.items():
        scale = float(np.max(np.abs(r))) or 1.0
        worst = max(worst, float(np.max(np.abs(np.asarray(got[name], dtype=np.float64) - r))) / scale)
    return worst


def refuse_if_different(worst: float, rtol: float, experiment: str, original: Any, changed: Any) -> float:
    """``worst`` when it is within ``rtol``; otherwise the refusal: a what-if that changes the answer
    is not the same model made faster."""
    if worst > rtol:
        raise TrtprofError(f"{changed}: the {experiment} outputs differ from {original}'s by {worst:.2e} of "
                           f"their scale (> {rtol:g}): not the same model; nothing measured")
    return worst


def cpu_outputs(paths: tuple[Path, Path], feeds: Mapping[str, np.ndarray],
                warnings_out: list[str] | None = None) -> list[dict[str, np.ndarray]]:
    """Each model's outputs on ``feeds`` (ONNX Runtime, FP32, CPU provider). ORT's warnings about the
    models go to ``warnings_out`` (the what-if's JSON), not raw to the terminal."""
    try:
        import onnxruntime as ort
    except ImportError as err:  # pragma: no cover - onnxruntime is a base dependency
        raise TrtprofError("checking a what-if's outputs needs onnxruntime (pip install onnxruntime)") from err

    outs = []
    with third_party_warnings() as caught:
        for path in paths:
            session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
            names = [o.name for o in session.get_outputs()]
            outs.append(dict(zip(names, session.run(names, dict(feeds)))))
    if warnings_out is not None:
        warnings_out.extend(w for w in caught if w not in warnings_out)
    return outs


def check_identical(original: Path, changed: Path, feeds: Mapping[str, np.ndarray],
                    warnings_out: list[str] | None = None) -> float:
    """Run both models (ONNX Runtime, FP32, CPU) on ``feeds``; return the largest difference relative
    to the output's scale. Raises when it is beyond ``IDENTICAL_RTOL``."""
    outs = cpu_outputs((original, changed), feeds, warnings_out)
    return refuse_if_different(max_relative_difference(outs[0], outs[1]), IDENTICAL_RTOL, f"{PAD_CHANNELS} copy's",
                               original, changed)


def check_fused(original: Path, fused: Path, feeds: Mapping[str, np.ndarray],
                warnings_out: list[str] | None = None) -> float:
    """``check_identical`` for the fused copy of ``--what-if ort-fusions``, within ``ORT_FUSIONS_RTOL``
    (fused kernels change summation order; ORT's CPU provider runs the contrib ops too)."""
    outs = cpu_outputs((original, fused), feeds, warnings_out)
    return refuse_if_different(max_relative_difference(outs[0], outs[1]), ORT_FUSIONS_RTOL, f"{ORT_FUSIONS} copy's",
                               original, fused)


def channels_last_targets(source: OnnxModel) -> dict[str, list[str]]:
    """What channels-last would change: the 2-D Convs (4-D weights: NHWC kernels, and their
    activations) and the 4-D inputs that feed a Conv directly (converted to NHWC; ``inputs_left``:
    other 4-D inputs, e.g. NHWC inputs behind a Transpose, which already give the Conv channels-last
    memory). A model without a 2-D Conv is refused (nothing to change). The weights are looked up as
    the torch runner finds them: initializers, after its Identity pre-pass (onnx2torch loads Conv
    weights from initializers only, so a Conv whose weights a node computes — ConstantOfShape,
    Constant — is refused here, by what it is, rather than failing the build)."""

    from ..backends.torch import conv_fed_inputs, fold_identity_initializers

    model = source.copy_proto()  # the pre-pass changes it
    fold_identity_initializers(model)
    inits = {i.name: i for i in model.graph.initializer}
    conv_nodes = [(k, n) for k, n in enumerate(model.graph.node) if n.op_type == "Conv" and len(n.input) > 1]
    convs = [n.name or f"Conv_{k}" for k, n in conv_nodes if n.input[1] in inits and len(inits[n.input[1]].dims) == 4]
    four_d = [t.name for t in source.inputs if len(t.shape) == 4]
    if not four_d or not convs:
        lacks = " and ".join(w for w, have in (("no 4-D input", four_d),
                                               ("no 2-D Conv with constant 4-D weights (initializers)", convs))
                             if not have)
        why = (_computed_weights(model, [n for _, n in conv_nodes], inits) if not convs else "") or "nothing to change"
        raise BadInput(f"{source.path}: --what-if {CHANNELS_LAST}: the model has {lacks}; {why}")
    inputs = list(conv_fed_inputs(model))
    return {"inputs": inputs, "inputs_left": [n for n in four_d if n not in inputs], "convs": convs}


def _computed_weights(model: Any, convs: list[Any], inits: Mapping[str, Any]) -> str:
    """The refusal's reason when Conv weights exist but are not initializers: where they come from."""
    makers = {o: f"{n.op_type} nodes" for n in model.graph.node for o in n.output}
    computed = [c.input[1] for c in convs if c.input[1] not in inits]
    if not computed:
        return ""
    sources = " and ".join(sorted({makers.get(w, "graph inputs") for w in computed}))
    return (f"the weights of its {len(computed)} Conv(s) come from {sources}, and the torch runner "
            "(onnx2torch) loads Conv weights from initializers only")


def check_channels_last(source: OnnxModel, feeds: Mapping[str, np.ndarray], *, device: str = "cuda") -> float:
    """Run ``source`` through the torch runner in NCHW and in channels-last (FP32, TF32 off, on ``device``)
    on ``feeds``, each layout's module made from a copy of its graph (read once); return the largest
    difference relative to the output's scale, refused beyond ``CHANNELS_LAST_RTOL``. The runner checks
    the inputs it converts reach the module NHWC."""
    from ..backends.torch import (
        CHANNELS_LAST as NHWC,
        CONTIGUOUS,
        fold_identity_initializers,
        runner_from_proto,
    )
    from ..spec import Precision

    outs = []
    for layout in (CONTIGUOUS, NHWC):
        proto = source.copy_proto()
        fold_identity_initializers(proto)  # the torch backend's pre-pass (its artifact)
        runner = runner_from_proto(proto, Precision.FP32, source.inputs, source.outputs, memory_format=layout,
                                   device=device)
        try:
            outs.append(runner.infer(feeds))
        finally:
            runner.close()
    return refuse_if_different(max_relative_difference(outs[0], outs[1]), CHANNELS_LAST_RTOL,
                               f"{CHANNELS_LAST} module's", f"{source.path} (NCHW)", f"{source.path} ({CHANNELS_LAST})")


def nhwc_targets(source: OnnxModel, option: str) -> dict[str, int]:
    """What ``--what-if nhwc`` would change: per op type of ``NHWC_OPS``, how many nodes the model (read
    once) has. Refused in one line for a model with none of them (``option`` would change nothing)."""
    counts: dict[str, int] = {}
    for node in source.proto.graph.node:
        if node.op_type in NHWC_OPS and node.domain in ("", "ai.onnx"):
            counts[node.op_type] = counts.get(node.op_type, 0) + 1
    if not counts:
        raise BadInput(f"{source.path}: --what-if {NHWC}: the model has no {'/'.join(NHWC_OPS[:3])} or pooling node, "
                       f"whose kernels {option} switches to NHWC; nothing to change")
    return counts


def check_nhwc(source: Path, feeds: Mapping[str, np.ndarray], option: str,
               warnings_out: list[str] | None = None) -> float:
    """Run ``source`` on ONNX Runtime's CUDA EP twice, FP32 with TF32 off, ``option`` "0" and ``NHWC_ON``
    (the backend's own provider options otherwise, no CUDA graph), on ``feeds``; return the largest
    difference relative to the output's scale, refused beyond ``NHWC_RTOL``. ORT's warnings go to
    ``warnings_out``."""
    from ..backends.onnxruntime import ort_session
    from ..backends.onnxruntime_cuda import CUDA_OPTIONS
    from ..spec import Precision

    outs = []
    with third_party_warnings() as caught:
        for value in ("0", NHWC_ON):
            session = ort_session(Path(source), Precision.FP32, path=Path(source), device="cuda",
                                  cuda_options={**CUDA_OPTIONS, option: value, "enable_cuda_graph": "0"})
            names = [o.name for o in session.get_outputs()]
            outs.append(dict(zip(names, session.run(names, dict(feeds)))))
    if warnings_out is not None:
        warnings_out.extend(w for w in caught if w not in warnings_out)
    return refuse_if_different(max_relative_difference(outs[0], outs[1]), NHWC_RTOL, f"{NHWC} session's",
                               f"{source} ({option} 0)", f"{source} ({option} {NHWC_ON})")


@dataclass(frozen=True)
class FusionReport:
    """What ONNX Runtime's transformer optimizer did to a model: the model type it was run as, per op
    of ``FUSED_OPS`` the count before and after, the node counts, how it was run, and what it logged."""

    model_type: str
    before: dict[str, int]
    after: dict[str, int]
    nodes: tuple[int, int]
    settings: dict[str, Any]
    log: tuple[str, ...] = ()

    @property
    def fused(self) -> dict[str, int]:
        """Op → how many more the copy has: what the optimizer fused (empty: nothing)."""
        return {op: n - self.before.get(op, 0) for op, n in self.after.items() if n > self.before.get(op, 0)}

    def to_json(self) -> dict[str, Any]:
        return {"model_type": self.model_type, "fused": self.fused, "before": dict(self.before),
                "after": dict(self.after), "nodes_before": self.nodes[0], "nodes_after": self.nodes[1],
                "optimizer": dict(self.settings)}


def fused_op_counts(model: Any) -> dict[str, int]:
    """Per op of ``FUSED_OPS``, its nodes in ``model``'s main graph (any domain)."""
    counts: dict[str, int] = {}
    for node in model.graph.node:
        if node.op_type in FUSED_OPS:
            counts[node.op_type] = counts.get(node.op_type, 0) + 1
    return counts


def transformer_model_type(model: Any) -> str:
    """The optimizer's model type for a graph: "vit" when an input is a 4-D float tensor (an image: patch
    embedding, no attention mask), else "bert" (token ids or hidden states in)."""
    import onnx

    for value in model.graph.input:
        t = value.type.tensor_type
        if t.elem_type in (onnx.TensorProto.FLOAT, onnx.TensorProto.FLOAT16) and len(t.shape.dim) == 4:
            return "vit"
    return "bert"


def ort_fusions(source: OnnxModel, out: Path) -> FusionReport:
    """Run ``onnxruntime.transformers.optimizer.optimize_model`` on a copy of ``source``'s graph (the model
    read once: the optimizer takes the graph, not the file; model type by ``transformer_model_type``,
    ``FUSION_OPT_LEVEL``, on the CPU provider) and write the fused copy to ``out`` when it fused something. The attention mask stays a 2-D mask (the optimizer's BERT default turns it
    into per-row lengths, which is another function for a mask that is not a prefix of ones, as random
    inputs are). Refused in one line when the optimizer cannot be imported or fails on the model. What
    the optimizer and ORT log meanwhile is kept in ``log``."""
    try:
        from onnxruntime.transformers.fusion_options import AttentionMaskFormat, FusionOptions
        from onnxruntime.transformers.optimizer import optimize_model
    except ImportError as err:
        raise BadInput(f"--what-if {ORT_FUSIONS} needs onnxruntime.transformers.optimizer, which cannot be imported "
                       f"here ({type(err).__name__}: {err}); it ships with onnxruntime (and onnxruntime-gpu)") from err
    model = source.proto
    model_type = transformer_model_type(model)
    options = FusionOptions(model_type)
    options.attention_mask_format = AttentionMaskFormat.AttentionMask
    settings: dict[str, Any] = {"opt_level": FUSION_OPT_LEVEL, "use_gpu": False, "attention_mask_format": "2-D mask"}
    with third_party_warnings() as caught:
        try:
            optimized = optimize_model(source.copy_proto(), model_type=model_type,  # a copy: it changes its input
                                       opt_level=FUSION_OPT_LEVEL, use_gpu=False, optimization_options=options)
        except ModuleNotFoundError as err:
            if err.name != "torch":
                raise BadModel(f"--what-if {ORT_FUSIONS}: onnxruntime.transformers.optimizer failed on the model "
                               f"({type(err).__name__}: {err})", path=source.path) from err
            # its fusion passes import torch while they run (not at import): the what-if needs torch installed
            raise MissingDependency("torch", "torch", why=f"onnxruntime.transformers.optimizer imports it while it "
                                                          f"fuses: --what-if {ORT_FUSIONS} needs it") from err
        except Exception as err:  # noqa: BLE001 - the optimizer raises anything; one line naming it
            raise BadModel(f"--what-if {ORT_FUSIONS}: onnxruntime.transformers.optimizer failed on the model "
                           f"({type(err).__name__}: {' '.join(str(err).split())[:300]})", path=source.path) from err
    fused = optimized.model
    report = FusionReport(model_type, fused_op_counts(model), fused_op_counts(fused),
                          (len(model.graph.node), len(fused.graph.node)), settings, tuple(caught))
    if report.fused:
        out.parent.mkdir(parents=True, exist_ok=True)
        optimized.save_model_to_file(str(out))
    return report
