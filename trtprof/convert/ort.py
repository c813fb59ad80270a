"""ONNX Runtime as the conversion steps use it (the FP16 range analysis runs the FP32 model in it): its import
with the one-line error, and the cause in one of its error messages. Below ``backends/`` so that
``convert/`` needs no backend; ``backends.onnxruntime`` re-exports both."""
from __future__ import annotations

import re

from ..errors import MissingDependency


def import_ort():
    try:
        import onnxruntime
    except ImportError as err:
        raise MissingDependency("onnxruntime", None) from err
    return onnxruntime


def ort_cause(text: str) -> str:
    """The cause in an ORT error, without its nested prefixes and C++ source locations.

    "[ONNXRuntimeError] : 1 : FAIL : /onnxruntime_src/…/graph.cc:1483 onnxruntime::Graph::Graph(…)
    [ONNXRuntimeError] : 1 : FAIL : Tensor element type mismatch. 10 != 1" → the last part."""
    parts = [p.strip() for p in re.split(r"\[ONNXRuntimeError\] : \d+ : \w+ : ", text) if p.strip()]
    cause = parts[-1] if parts else text.strip()
    cause = re.sub(r"^/\S+:\d+ \S+\(.*?\)\s*", "", cause)  # a leading "file.cc:123 Function(args)"
    return " ".join(cause.split())[:300]
