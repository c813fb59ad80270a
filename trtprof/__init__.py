"""trtprof: is FP16 faster for my model on my GPU, by how much (with error bars), and if not, why.

This module imports nothing heavy: TensorFlow, TensorRT, torch and onnxruntime are imported inside
the backend or converter that needs them.
"""
from .spec import BuildSpec, CacheKey, Precision, TensorSpec

__version__ = "0.1.0"
__all__ = ["BuildSpec", "CacheKey", "Precision", "TensorSpec", "__version__"]
