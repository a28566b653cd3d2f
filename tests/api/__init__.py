"""The Python API: `absorb_formal.prove`, `check`, `scan`, `build` and the pytest plugin."""
