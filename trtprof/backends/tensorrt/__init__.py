"""TensorRT backend package. Importing it never imports TensorRT (that happens on first build/load).

Layout: ``backend`` (the TensorRT Backend), ``rtx`` (the TensorRT-RTX Backend and its JIT-aware
runner), ``builder`` (ONNX → plan, for both libraries), ``runner`` (DeviceRunner), ``inspect`` (engine
inspector + per-layer profile), ``compat`` (every library / 8.6 / 10.x / 11.x difference, probed on
the module), ``targets`` (TensorRT-RTX compute-capability targets), ``device`` (GPU identity via the
CUDA runtime), ``tail_logger`` (a logger that keeps the last lines).
"""
from .backend import TensorRTBackend

__all__ = ["TensorRTBackend"]
