"""Exports: witnesses written as weights, ONNX models, memory refusals."""
