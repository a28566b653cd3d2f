"""The checker's trusted kernel: the exact primitives a verdict finally rests on, and the only
part of the checker the prover may import (tests/architecture/test_import_layers.py). It imports
nothing from the rest of the checker.

- `contract.py`: the names both sides spell alike (the document format, every certificate
  kind and witness check) and the checker's `Invalid`;
- `linalg.py`: exact rationals and linear algebra over Q, exact evaluation of a block;
- `integers.py`: exact integer views of exact matrices;
- `modlu.py`: the exact LU modulo a prime on float64 BLAS, with its no-rounding bound;
- `systems.py`: the certificates' systems built from its products (modular functional,
  unique subset solution);
- `symbolic.py`: symbolic values σ(β) read formally;
- `cachedir.py`: where the cache lives, and the key that signs its entries.
"""
