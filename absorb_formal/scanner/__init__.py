"""`absorb-prove scan`: find every MLP sublayer of a checkpoint and decide it.

The top of the pipeline, beside the command line: it reads tensor names and shapes (never
the values: the prover reads those through the spec's `load(...)`), recognises MLP sublayers
by naming convention (`find.py`, with the norms beside them in `norms.py`) or, for ONNX, by
graph pattern (`onnx_find.py` over `onnx_graph.py`, `onnx_sigma.py`, `onnx_norms.py`), and
writes each as a block of a generated `.mlp` spec that the ordinary prover decides
(`run.py`); `found.py` holds what is found and skipped.
"""
