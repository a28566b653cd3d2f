"""`absorb-prove scan`: sublayers found by name and in ONNX graphs, and their norms."""
