"""The independent checker: verifies certificate documents in exact arithmetic.

It imports nothing from the prover. Its parts, bottom to top:
- `kernel/`: the trusted exact primitives — rationals and linear algebra over Q, the modular
  LU, symbolic values, the certificate contract, the cache-folder rule. The prover imports
  the kernel (and nothing else of the checker), never the other way round.
- `readers/`: its own reading of spec text and weight files, bit-exactly from their bytes,
  and the shape of a document.
- `lemmas/`: its own sympy proofs of the activation lemmas (docs/rules.md §2), kept on disk
  in entries of its own, and the SMT re-solves.
- `rules/`: the checks, one module per rule of docs/rules.md, named as the prover's module
  that produces the certificate (decide/width.py ↔ rules/width.py, …), each re-deriving what
  a certificate kind claims.
- `dispatch.py`: `verify(document)` and its registry, from a certificate's kind (and a
  witness's check) to the rule that checks it, what it shows, the fields it may have
  (`fields.py`) and whether it may be about blocks with biases (`biases.py`); the prover's
  `decide/dispatch.py` routes a claim to its rule, this routes a certificate to its check.
  `document.py`: one document checked, guarded against every failure.

Importing this package is cheap: `verify` and `Verdict` load on first use.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

__all__ = ["Verdict", "verify"]

if TYPE_CHECKING:
    from .dispatch import Verdict, verify


def __getattr__(name: str) -> Any:
    """`verify` and `Verdict`, loaded on first use."""
    if name not in __all__:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    from . import dispatch as module
    globals().update(Verdict=module.Verdict, verify=module.verify)
    return globals()[name]
