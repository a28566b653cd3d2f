"""Certificates, the prover's side: the JSON bodies of every certificate kind (`bodies.py`)
and the self-contained documents written for each claim (`documents.py`). Their format is
docs/certificates.md; the checker re-verifies them."""
