"""The checker's own reading of what a document names: spec text (`source.py`), weight files
from their bytes (`files.py`, `onnx_file.py`, `weights.py`), the comparison with what the
document embeds (`reading.py`), and the shape of a document before anything in it is used
(`shape.py`)."""
