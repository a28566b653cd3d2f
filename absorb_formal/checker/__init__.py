"""The independent checker: verifies certificate documents in exact arithmetic.

It imports nothing from the prover (no `absorb_formal` module at all): it has its own exact
linear algebra (`exact.py`), its own formulas for σ and sympy proofs of the §2 lemmas
(`lemma_proofs.py`, kept on disk in entries of its own: `lemmas.py`, `proved.py`; sympy is
imported only by the checks that need it), its own canonical forms (`forms.py`) and
re-solves SMT queries with z3 and cvc5 (`smt.py`). `verify(document)` says whether the
certificate supports the outcome. It also reads its own data: spec text (`source.py`),
weight files bit-exactly from their bytes (`files.py`), and compares them with what a
document embeds (`reading.py`).

`verify` and `Verdict` are loaded on first use, so that importing a light module of the
package (`cachedir.py`, which the prover's disk cache uses) costs no import of the checks.
"""

from __future__ import annotations

import sys
import types
from typing import Any

__all__ = ["Verdict", "verify"]


def __getattr__(name: str) -> Any:
    if name in __all__:
        from .verify import Verdict, verify

        globals().update(Verdict=Verdict, verify=verify)
        return globals()[name]
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


class _Package(types.ModuleType):
    """This package, whose attribute `verify` stays the function `verify.verify` (as the
    eager `from .verify import verify` made it) when the submodule of that name is first
    imported: the import system then sets the attribute to the submodule."""

    def __setattr__(self, name: str, value: Any) -> None:
        if name == "verify" and isinstance(value, types.ModuleType):
            value = value.verify
        super().__setattr__(name, value)


sys.modules[__name__].__class__ = _Package
