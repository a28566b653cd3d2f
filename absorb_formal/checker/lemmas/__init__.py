"""The activation lemmas the checker relies on (docs/rules.md §2): proved by its own sympy
code (`proofs.py`), listed with what each gates (`relied.py`), kept on disk in entries only
the checker writes (`cache.py`); σ at rational points beyond the formal values, atoms by
proved reflections and signs by arb enclosures of σ's formula (`values.py`); and the SMT
re-solves with z3, cvc5 and CP-SAT (`smt.py`)."""
