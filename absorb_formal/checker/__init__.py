"""The independent checker: verifies certificate documents in exact arithmetic.

It imports nothing from the prover (no `absorb_formal` module at all): it has its own exact
linear algebra (`exact.py`), its own formulas for σ and sympy proofs of the §2 lemmas
(`lemma_proofs.py`, kept on disk in entries of its own: `lemmas.py`, `proved.py`; sympy is
imported only by the checks that need it), its own canonical forms (`forms.py`) and
re-solves SMT queries with z3 and cvc5 (`smt.py`). `verify(document)` says whether the
certificate supports the outcome. It also reads its own data: spec text (`source.py`),
weight files bit-exactly from their bytes (`files.py`), and compares them with what a
document embeds (`reading.py`).
"""

from .verify import Verdict, verify

__all__ = ["Verdict", "verify"]
