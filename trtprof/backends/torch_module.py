"""An ONNX graph to a torch module on a device, in an engine's precision and memory format: what a torch
engine's load does when it converts (``backends.torch`` and ``backends.torch_fixed`` both call it; a module
of its own so those two do not import each other)."""
from __future__ import annotations

from pathlib import Path
from typing import Any

from ..errors import BadModel
from ..spec import Precision
from .torch_convert import LOW_DTYPES, follow_precision, import_torch, to_torch_module

# The build option naming the layout the runner uses, and its values (torch's names for them).
MEMORY_FORMAT_OPTION = "memory_format"
CONTIGUOUS = "contiguous"  # torch's default, NCHW for 4-D tensors
CHANNELS_LAST = "channels_last"  # NHWC in memory, the logical shape unchanged
MEMORY_FORMATS = (CONTIGUOUS, CHANNELS_LAST)


def onnx_proto(data: bytes, path: Path) -> Any:
    """The ONNX graph an engine file holds (``torch_artifact``), parsed."""
    import onnx

    try:
        return onnx.load_from_string(data)
    except Exception as err:  # noqa: BLE001 - protobuf raises DecodeError and friends
        raise BadModel(f"cannot read the torch engine's ONNX graph: {err}", path=path) from err


def conv_fed_inputs(proto: Any) -> tuple[str, ...]:
    """The graph inputs a channels-last runner converts: those a Conv takes as its data input (4-D,
    NCHW by ONNX's Conv definition). An input that reaches a Conv through other nodes is left alone."""
    initializers = {i.name for i in proto.graph.initializer}
    fed = {n.input[0] for n in proto.graph.node if n.op_type == "Conv" and n.input}
    return tuple(i.name for i in proto.graph.input if i.name in fed and i.name not in initializers
                 and len(i.type.tensor_type.shape.dim) == 4)


def channels_last_weights(module: Any) -> int:
    """How many 4-D parameters (2-D convolution filters) the module holds: what channels-last changes."""
    return sum(1 for p in module.parameters() if p.dim() == 4)


def check_memory_format(name: str, module: Any, precision: Precision) -> str:
    """The memory format a build asks for, refused when unknown, on fp8's module (no convolutions), or
    when the module has no 2-D convolution for it to change."""
    if name not in MEMORY_FORMATS:
        raise BadModel(f"unknown memory format {name!r} (known: {', '.join(MEMORY_FORMATS)})")
    if name == CHANNELS_LAST and (precision is Precision.FP8 or channels_last_weights(module) == 0):
        raise BadModel("channels_last changes nothing here: the module has no 2-D convolution (4-D weights)")
    return name


def module_from_proto(proto: Any, precision: Precision, *, converted: bool = False, memory_format: str = CONTIGUOUS,
                      device: str = "cuda", bake: bool = False, fuse: bool = True) -> Any:
    """An ONNX graph converted (onnx2torch; fp8: torch_fp8's chain) into a module on ``device`` in the
    precision's dtype and the memory format; ``bake``: its constant shape arguments as Python ints
    (``torch_static``, for a graph folded at fixed shapes); ``fuse``: with ``torch_fuse``'s rewrites
    (off for per-layer profiling, which needs one submodule per ONNX node)."""
    torch = import_torch()
    if precision is Precision.FP8:
        from .torch_fp8 import fp8_module, mlp_chain

        module = fp8_module(mlp_chain(proto), torch).eval().to(device)
    else:
        module = to_torch_module(proto, fuse=fuse)
        if bake:
            from .torch_static import bake_constant_arguments

            bake_constant_arguments(module)
        module = module.eval().to(device)
    if precision in LOW_DTYPES and not converted:
        follow_precision(torch, module, getattr(torch, LOW_DTYPES[precision]))
    if check_memory_format(memory_format, module, precision) == CHANNELS_LAST:
        module = module.to(memory_format=torch.channels_last)
    if device == "cuda":
        torch.cuda.synchronize()
    return module
