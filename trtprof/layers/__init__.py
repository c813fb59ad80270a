"""Per-layer FP16-vs-FP32 attribution on every backend: which layers take the time, whether their
kernels use tensor cores, what casts and reformats cost.

Sources: ONNX Runtime session profiling (``ort``), torch.profiler/CUPTI with per-node ranges
(``torch_profile``), TensorRT's IProfiler + engine inspector (``tensorrt``); one table shape
(``table``); graph facts such as tensor-core eligibility (``graph``); diagnosis rules (``rules``).
Nothing heavy is imported here.
"""
from __future__ import annotations

from .table import SEPARATE_RUN_NOTE, KernelTime, LayerTable, LayerTiming, PrecisionProfile, format_table

__all__ = ["SEPARATE_RUN_NOTE", "KernelTime", "LayerTable", "LayerTiming", "PrecisionProfile", "format_table"]
