"""TensorRT backend package. Importing it never imports TensorRT (that happens on first build/load).

Layout: ``backend`` (the Backend), ``builder`` (ONNX → plan), ``runner`` (DeviceRunner),
``inspect`` (engine inspector + per-layer profile), ``compat`` (every 8.6 / 10.x / 11.x difference),
``device`` (GPU identity via the CUDA runtime), ``tail_logger`` (a logger that keeps the last lines).
"""
from .backend import TensorRTBackend

__all__ = ["TensorRTBackend"]
