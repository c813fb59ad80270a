"""Model conversion: TensorFlow → ONNX (``tf``), ONNX FP32 → FP16 (``fp16``)."""
