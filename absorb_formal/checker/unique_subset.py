"""The generic case decided both ways at scale (docs/rules.md §4, "the generic case at scale";
docs/certificates.md, "unique subset solution" and "own neurons, rows of J negated"),
re-checked from the checker's own exact reading of the weights.

Witness. Negating the rows of U (and their up biases) in J, keeping D, changes the block by
−2a Σ_J d_i ℓ_i(x) (lemma O(a): σ(−z) = σ(z) − 2az, re-proved by the caller through the
family); it equals B exactly when Σ_J d_i u_iᵀ = −S/(2a), tested here on every one of the d²
entries in exact rational arithmetic (python-flint fmpq_mat), the constant going to the down
bias. Nothing else is needed: the witness does not depend on keys.

Refutation. With the m rows of U on distinct residue keys (`modular.key_classes`), the block
is absorbable at width m iff some 0/1 vector c solves Σ_i c_i d_i u_iᵀ = −S/(2a).
`modlu.projected_system` builds that system seen through m rank-one functionals drawn from
seed 0, and `modlu.solve_floats` solves it mod q. Invertible mod q ⇒ at most one rational
solution, and it reduces to the solution mod q (q divides none of its denominators). So a
value ∉ {0, 1} mod q refutes; a 0/1 solution mod q leaves one candidate J, refuted by the
first entry (row-major) where its identity fails exactly.
"""

from __future__ import annotations

from fractions import Fraction
from typing import Any

import numpy as np

from . import modlu
from .exact import ZERO
from .modular import Layers, _depth_one, _prime, key_classes, require

CHECK = "own neurons, rows of J negated"
KIND = "unique subset solution"
MAX_PRIMES = 4  # a system singular mod four primes near 2^21 is taken as singular
SEED = 0  # the functionals' seed (fixed: any seed making A invertible gives one solution)


def check_witness(skip: list[list[Fraction]], width: int, layers: Layers, cert: dict[str, Any],
                  a: Fraction) -> None:
    require(cert["check"] == CHECK, "not the flip witness")
    require(a != 0 and isinstance(cert["a"], str) and Fraction(cert["a"]) == a,
            f"the stored a is not the re-proved a = {a}")
    up, down = _depth_one(layers)
    m, d = up.shape
    require(_whole(cert["width"], "width") == m and m <= width,
            f"the witness has width {m}, at most {width} and the block's own")
    flips = _flips(cert, m)
    require(_failure(skip, up, down, flips, a) is None,
            "the flipped neurons' terms do not sum to -S/(2a)")


def check_refutation(skip: list[list[Fraction]], width: int, layers: Layers,
                     cert: dict[str, Any], a: Fraction) -> None:
    require(cert.get("rule") == "§4 generic case", "the unique solution is §4's generic case")
    require(a != 0, "the generic case needs a != 0")
    up, down = _depth_one(layers)
    m = up.shape[0]
    require(width == m, "the generic-case argument decides the block's own width only")
    p = _prime(cert)
    distinct, _ = key_classes(up, down, p)
    require(distinct, f"two rows of U share a key mod {p} (or a row is 0)")
    primes = [_whole(q, "a solve prime") for q in cert["solve_primes"]]
    require(1 <= len(primes) <= MAX_PRIMES and primes == modlu.primes(len(primes)),
            f"the solve primes must be the {MAX_PRIMES} or fewer largest primes below 2^21, "
            "in decreasing order")
    solution: list[int] | None = None
    for q in primes:
        require(modlu.usable(q), f"{q} is not a prime the exact LU works with")
        work = modlu.projected_system(down.residue_matrix(q), up.residue_matrix(q),
                                      _target(skip, a, q), SEED, q)
        solution = modlu.solve_floats(work, q)
        if q != primes[-1]:
            require(solution is None, f"the system is not singular mod {q}: the primes after "
                                      "it are not needed")
    require(solution is not None, "the system is singular mod the last prime")
    assert solution is not None
    if "neuron" in cert:
        require("flips" not in cert and "coordinate" not in cert,
                "a refutation names a value or a failed candidate, not both")
        i = _whole(cert["neuron"], "neuron") - 1
        require(0 <= i < m, "the neuron is out of range")
        require(solution[i] == _whole(cert["value"], "value") and solution[i] > 1,
                f"the solution's entry {i + 1} is {solution[i]}, not the stored non-0/1 value")
        return
    require("value" not in cert, "a value without its neuron")
    require(all(v <= 1 for v in solution), "the solution is not 0/1: name a neuron instead")
    flips = _flips(cert, m)
    require(flips == [i for i, v in enumerate(solution) if v == 1],
            "the flips are not the solution's ones")
    stored = tuple(_whole(v, "a coordinate") for v in cert["coordinate"])
    failure = _failure(skip, up, down, flips, a)
    require(failure is not None, "the candidate's identity holds: the block is absorbable")
    require(stored == failure, f"the first entry where the identity fails is {failure}")


def _whole(value: Any, what: str) -> int:
    """A field that is an integer in the document (3.5 or true would pass `int`)."""
    require(type(value) is int, f"{what} is not an integer: {value!r}")
    return int(value)


def _flips(cert: dict[str, Any], m: int) -> list[int]:
    flips = [_whole(i, "a flip") - 1 for i in cert["flips"]]
    require(flips == sorted(set(flips)) and all(0 <= i < m for i in flips),
            "the flips are not increasing neuron numbers in range")
    return flips


def _target(skip: list[list[Fraction]], a: Fraction, q: int) -> np.ndarray | int:
    """−S/(2a) mod q: an integer for a multiple of I (the d² entries are not converted)."""
    d = len(skip)
    factor = -1 / (2 * a)
    diagonal = skip[0][0] if d else Fraction(0)
    # S = diagonal·I: each row's zeros counted in C (list.count; S = cI built by exact.eye
    # holds one shared zero, found by identity), not d² comparisons of Fractions in Python
    zeros = d if diagonal == 0 else d - 1
    if all(row.count(ZERO) == zeros and row[r] == diagonal for r, row in enumerate(skip)):
        return _residue(diagonal * factor, q)
    return np.array([[_residue(v * factor, q) for v in row] for row in skip], dtype=np.int64)


def _residue(value: Fraction, q: int) -> int:
    require(value.denominator % q != 0, f"a denominator is divisible by {q}")
    return value.numerator * pow(value.denominator, -1, q) % q


def _failure(skip: list[list[Fraction]], up: Any, down: Any, flips: list[int],
             a: Fraction) -> tuple[int, int] | None:
    """The first entry where Σ_J d_i u_iᵀ ≠ −S/(2a), exactly, or None."""
    import flint

    d = len(skip)

    def fq(v: Fraction) -> Any:
        return flint.fmpq(v.numerator, v.denominator)

    columns = [down.column(i) for i in flips]
    left = flint.fmpq_mat(d, len(flips), [fq(col[r]) for r in range(d) for col in columns])
    right = flint.fmpq_mat(len(flips), d, [fq(v) for i in flips for v in up.row(i)])
    total = left * right if flips else flint.fmpq_mat(d, d)
    target = flint.fmpq_mat(d, d, [fq(v) for row in skip for v in row]) * fq(-1 / (2 * a))
    if total == target:
        return None
    index = next(n for n, v in enumerate((total - target).entries()) if v != 0)
    return divmod(index, d)
