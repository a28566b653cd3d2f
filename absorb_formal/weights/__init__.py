"""Weight files, read and written, every value kept as the exact bits the file holds: one
module per format (`npz.py`, `safetensors.py`, `onnx_file.py` for ONNX models' stored
tensors, `pickles.py` for PyTorch pickles, copied to safetensors), `load(...)` over them
(`arrays.py`, with what its readers share in `common.py`), and checkpoints copied with some
tensors replaced (`copies.py`). The files `absorb-prove export` writes are `export/files.py`'s,
through these formats."""
