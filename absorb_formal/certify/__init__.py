"""Certificates, the prover's side, and its only producer of them: the JSON bodies of every
certificate kind (`bodies.py` for the shared ones and the generic engine's, `never.py`,
`widths.py`, `large.py`, `sublayers.py` by the rules they serve) and the self-contained
documents written for each claim (`documents.py`). The kind, check and format names are the
contract's (`checker/kernel/contract.py`); the format is docs/certificates.md, and the
checker re-verifies every certificate."""
