"""Weight files, read and written: `.npz`, `.npy`, safetensors, GGUF-free raw formats and
PyTorch pickles (`arrays.py`, `pickles.py`), and ONNX models' stored tensors
(`onnx_file.py`), every value kept as the exact bits the file holds."""
