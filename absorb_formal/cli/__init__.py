"""`absorb-prove`, the command line: one module per command (`prove.py`, `check.py`,
`scan.py`), on top of the Python API."""
