"""Weight files read exactly: npz, safetensors, ONNX, skips loaded from files."""
