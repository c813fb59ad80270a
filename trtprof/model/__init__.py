"""The model: loading ONNX files, input shapes and data, the user's inputs, the demo model, roofline numbers."""
