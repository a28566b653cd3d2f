"""The checker's trusted kernel: the exact primitives both sides use.

Everything a verdict finally rests on is computed here or re-derived by the checker from
these primitives: exact rationals and linear algebra (`linalg.py`), the modular LU on
float64 BLAS with its no-rounding bound (`modlu.py`), symbolic values beyond Q
(`symbolic.py`). It imports nothing from the rest of the package and nothing heavy at import
time, so that the prover can import it directly.
"""
