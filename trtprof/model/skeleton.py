"""An ONNX model without the values of its weights: all that onnx's shape inference needs (it reads their types
and dims), without copying them. Shared by the converter's shape fixing (``convert.fixed_shapes``) and the
roofline's FLOP counts (``model.roofline``)."""
from __future__ import annotations

from typing import Any

WEIGHT_ELEMENTS = 1024  # a float initializer above this many elements is a weight: shape inference skips its values
FLOAT_TYPES = (1, 10, 11, 16)  # TensorProto FLOAT, FLOAT16, DOUBLE, BFLOAT16


def skeleton(model: Any) -> Any:
    """``model`` without the values of its float initializers of more than ``WEIGHT_ELEMENTS`` elements
    (name, type and dims kept): all shape inference needs, without copying the weights."""
    out = type(model)()
    out.ir_version = model.ir_version
    out.opset_import.extend(model.opset_import)
    out.functions.extend(model.functions)
    graph, source = out.graph, model.graph
    graph.name = source.name
    for field_name in ("node", "input", "output", "value_info"):
        getattr(graph, field_name).extend(getattr(source, field_name))
    for init in source.initializer:
        elements = 1
        for d in init.dims:
            elements *= d
        if init.data_type in FLOAT_TYPES and elements > WEIGHT_ELEMENTS:
            stub = graph.initializer.add()
            stub.name, stub.data_type = init.name, init.data_type
            stub.dims.extend(init.dims)
        else:
            graph.initializer.append(init)
    return out
