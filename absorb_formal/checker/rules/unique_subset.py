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
`systems.projected_system` builds that system seen through m rank-one functionals drawn from
seed 0, and `modlu.solve_floats` solves it mod q. Invertible mod q ⇒ at most one rational
solution, and it reduces to the solution mod q (q divides none of its denominators). So a
value ∉ {0, 1} mod q refutes; a 0/1 solution mod q leaves one candidate J, refuted by the
first entry (row-major) where its identity fails exactly.
"""

from __future__ import annotations

from collections.abc import Callable
from fractions import Fraction
from typing import Any

import numpy as np

from ..kernel import modlu, systems
from ..kernel.contract import Check, require
from ..kernel.linalg import ZERO
from .modular import Layers, affine_keys_distinct, depth_one, key_classes, key_prime

MAX_PRIMES = 4  # a system singular mod four primes near 2^21 is taken as singular
SEED = 0  # the functionals' seed (fixed: any seed making A invertible gives one solution)


def check_witness(skip: list[list[Fraction]], width: int, layers: Layers, cert: dict[str, Any],
                  a: Fraction) -> None:
    require(cert["check"] == Check.ROWS_NEGATED, "not the flip witness")
    require(a != 0 and isinstance(cert["a"], str) and Fraction(cert["a"]) == a,
            f"the stored a is not the re-proved a = {a}")
    up, down = depth_one(layers)
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
    up, down = depth_one(layers)
    m = up.shape[0]
    require(width == m, "the generic-case argument decides the block's own width only")
    p = key_prime(cert)
    distinct, _ = key_classes(up, down, p)
    require(distinct, f"two rows of U share a key mod {p} (or a row is 0)")
    _conclusion(cert, m, lambda q: systems.projected_system(
        down.residue_matrix(q), up.residue_matrix(q), _target(skip, a, q), SEED, q),
        lambda flips: _failure(skip, up, down, flips, a))


def _conclusion(cert: dict[str, Any], m: int, build: Callable[[int], np.ndarray],
                failure: Callable[[list[int]], tuple[int, ...] | None]) -> None:
    """The stored conclusion from the unique solution of `build(q)` ([A | b] mod q): the
    solve primes, then a neuron whose value is not 0/1, or the 0/1 candidate's flips and the
    first entry where its identity fails exactly (`failure`)."""
    primes = [_whole(q, "a solve prime") for q in cert["solve_primes"]]
    require(1 <= len(primes) <= MAX_PRIMES and primes == modlu.primes(len(primes)),
            f"the solve primes must be the {MAX_PRIMES} or fewer largest primes below 2^21, "
            "in decreasing order")
    solution: list[int] | None = None
    for q in primes:
        require(modlu.usable(q), f"{q} is not a prime the exact LU works with")
        solution = modlu.solve_floats(build(q), q)
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
    found = failure(flips)
    require(found is not None, "the candidate's identity holds: the block is absorbable")
    require(stored == found, f"the first entry where the identity fails is {found}")


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
             a: Fraction, rows: list[list[Fraction]] | None = None) -> tuple[int, int] | None:
    """The first entry where Σ_J d_i v_iᵀ ≠ −S/(2a), exactly, or None; v_i the rows of U in
    J, or `rows` (one per flip: a §8.2 row's linear part)."""
    import flint

    d = len(skip)
    columns = [down.column(i) for i in flips]
    left = flint.fmpq_mat(d, len(flips), [_fq(col[r]) for r in range(d) for col in columns])
    vectors = rows if rows is not None else [up.row(i) for i in flips]
    right = flint.fmpq_mat(len(flips), d, [_fq(v) for row in vectors for v in row])
    total = left * right if flips else flint.fmpq_mat(d, d)
    target = flint.fmpq_mat(d, d, [_fq(v) for row in skip for v in row]) * _fq(-1 / (2 * a))
    if total == target:
        return None
    index = next(n for n, v in enumerate((total - target).entries()) if v != 0)
    return divmod(index, d)


def _fq(v: Fraction) -> Any:
    import flint

    return flint.fmpq(v.numerator, v.denominator)


# ---- §8.2 flip sets at scale (docs/rules.md §8.2, "Flip sets at scale") --------------------

RULES = {"relu^2": "§8.2 relu^2", "gated O(a)+N": "§8.2 gated O(a)+N", "Og(c)": "§8.2 Og(c)"}
MAX_QUADRATIC = 2 * 10**8  # products d·|J|·k² of the exact quadratic identity checked


def flip_rule(cert: dict[str, Any]) -> bool:
    """A §8.2 certificate of this module (its rule field names a row of §8.2's table)."""
    return cert.get("rule") in RULES.values()


class _Neurons:
    """The block's layer as this checker reads it: U, D (and G) exact matrices, the hidden
    biases β (and γ) as exact vectors (0 where the spec gives none)."""

    def __init__(self, block: dict[str, Any], layers: Layers, gated: bool) -> None:
        require(len(layers) == 1, "§8.2 decides depth-1 blocks")
        layer = layers[0]
        self.up, self.down = layer["up"], layer["down"]
        m, d = self.up.shape
        require(tuple(self.down.shape) == (d, m), "'down' is not d × m")
        require(gated == ("gate" in layer), "the gate matrix is missing or unexpected")
        self.gate = layer.get("gate")
        require(self.gate is None or tuple(self.gate.shape) == (m, d), "'gate' is not m × d")
        self.m, self.d = m, d
        self.beta = _bias(block, layer, "up_bias", m)
        self.gamma = _bias(block, layer, "gate_bias", m) if gated else []


def _bias(block: dict[str, Any], layer: dict[str, Any], name: str, n: int) -> list[Fraction]:
    """A hidden bias exactly: embedded in the document (strings), else as read from its
    source (a file's 1-D, 1×n or n×1 array, or the spec's literal vector); absent: 0."""
    from ..kernel.linalg import q
    from ..readers.files import Dyadic

    embedded = block["layers"]
    if isinstance(embedded, list):
        values = [q(v) for v in embedded[0].get(name, ["0"] * n)]
    elif name not in layer:
        values = [Fraction(0)] * n
    elif isinstance(layer[name], Dyadic):
        found = layer[name]
        require(len(found.shape) == 1 or (len(found.shape) == 2 and 1 in found.shape),
                f"{name} of shape {found.shape} is not a vector (1-D, 1×n or n×1)")
        values = found.reshape((int(np.prod(found.shape)),)).fractions()
    else:  # the spec's literal: a flat list (a nested one is a matrix, not a vector)
        values = list(layer[name].values)
    require(len(values) == n and all(isinstance(v, Fraction) for v in values),
            f"{name} is not a vector of {n} rationals")
    return values


def _flip_common(block: dict[str, Any], layers: Layers, cert: dict[str, Any],
                 rule: tuple[str, Fraction, bool]) -> _Neurons:
    name, value, _ = rule
    require(block["depth"] == 1, "§8.2 at scale: depth 1")
    # Without biases only glu: its row with β = γ = 0 is §5's condition (relu² and the gated
    # O(a)+N rows are then T1/T4's, never absorbable: no flip set to check).
    require(bool(block.get("bias")) or name == "Og(c)", "§8.2 at scale: a biased block, or glu")
    require(cert["rule"] == RULES[name], f"the rule re-derived from sigma is {RULES[name]}")
    require(isinstance(cert["constant"], str) and Fraction(cert["constant"]) == value,
            f"the stored constant is not the re-proved {value}")
    return _Neurons(block, layers, name != "relu^2")


def check_flip_witness(block: dict[str, Any], skip: list[list[Fraction]], width: int,
                       layers: Layers, cert: dict[str, Any],
                       rule: tuple[str, Fraction, bool]) -> None:
    """A §8.2 witness by its flips: J's quadratic part is 0 and its linear part S, exactly
    (then the flipped block of §8.2's row equals B: docs/rules.md §8.2)."""
    require(cert["check"] == Check.ROWS_NEGATED, "not the flip witness")
    n = _flip_common(block, layers, cert, rule)
    require(_whole(cert["width"], "width") == n.m and n.m <= width,
            f"the witness has width {n.m}, at most {width} and the block's own")
    flips = _flips(cert, n.m)
    require(_flip_failure(skip, n, rule, flips) is None,
            "the flipped neurons' terms do not give S x + a constant")


def check_flip_refutation(block: dict[str, Any], skip: list[list[Fraction]], width: int,
                          layers: Layers, cert: dict[str, Any],
                          rule: tuple[str, Fraction, bool]) -> None:
    """§8.2 at width m (hence at every w ≤ m): every neuron alive and alone on its key (mod
    p), then the unique solution of the projected system mod q is not 0/1, or its 0/1
    candidate fails exactly."""
    n = _flip_common(block, layers, cert, rule)
    require(width <= n.m == _whole(cert["width"], "width"),
            "§8.2 refutes the own width (stored) and narrower ones only")
    _alone(n, key_prime(cert))
    _conclusion(cert, n.m, lambda q: _flip_system(skip, n, rule, q),
                lambda flips: _flip_failure(skip, n, rule, flips))


def check_flip_key_count(block: dict[str, Any], width: int, layers: Layers,
                         cert: dict[str, Any], rule: tuple[str, Fraction, bool]) -> None:
    """§8.2's only-if at any width (docs/rules.md §8.2, "Key count"): every neuron alive and
    alone on its key, so a plain block equal to B puts a neuron on each of the m keys: none
    of width w < m absorbs B."""
    n = _flip_common(block, layers, cert, rule)
    require(_whole(cert["keys"], "keys") == n.m, f"the block has {n.m} keys, not {cert['keys']}")
    require(_whole(cert["width"], "width") == width < n.m,
            f"the key count refutes widths below {n.m} only")
    _alone(n, key_prime(cert))


def _alone(n: _Neurons, p: int) -> None:
    """Every neuron alive (D's column non-zero; gated: (u_i, β_i) ≠ 0) and alone on its key:
    the key rows (relu² [u_i | β_i], gated [g_i | γ_i]) on pairwise different lines mod p."""
    require(bool(n.down.nonzero().any(axis=0).all()), "a column of D is 0: a dead neuron")
    if n.gate is None:
        keyed, offsets = n.up, n.beta
    else:
        ups = np.asarray(n.up.nonzero()).any(axis=1) | np.array([b != 0 for b in n.beta])
        require(bool(ups.all()), "a neuron has a zero up row and up bias: a dead neuron")
        keyed, offsets = n.gate, n.gamma
    require(affine_keys_distinct(keyed, offsets, p),
            f"two key rows share a residue key mod {p} (or a row is 0): keys not distinct")


def _flip_system(skip: list[list[Fraction]], n: _Neurons, rule: tuple[str, Fraction, bool],
                 q: int) -> np.ndarray:
    """[A | b] mod q from this checker's reading: Og(c) §4's system with a = c; relu² and
    gated `systems.projected_flip_system` with λ, μ = 2β, 0 (g = u) or 2aγ, 2aβ, T = −S."""
    name, value, _ = rule
    down, up = n.down.residue_matrix(q), n.up.residue_matrix(q)
    if name == "Og(c)":
        return systems.projected_system(down, up, _target(skip, value, q), SEED, q)
    target = _target(skip, Fraction(1, 2), q)  # −S/(2·½) = −S
    beta = np.array([_residue(b, q) for b in n.beta], dtype=np.int64)
    if n.gate is None:
        return systems.projected_flip_system(down, up, up, 2 * beta % q, np.zeros_like(beta),
                                             target, SEED, q)
    gamma = np.array([_residue(g, q) for g in n.gamma], dtype=np.int64)
    scale = _residue(2 * value, q)
    return systems.projected_flip_system(down, up, n.gate.residue_matrix(q),
                                         scale * gamma % q, scale * beta % q, target, SEED, q)


def _flip_failure(skip: list[list[Fraction]], n: _Neurons, rule: tuple[str, Fraction, bool],
                  flips: list[int]) -> tuple[int, ...] | None:
    """The first entry where J's §8.2 identity fails, exactly: (r, s, t) of the quadratic
    part Σ_J d_{r,i}(g_i u_iᵀ + u_i g_iᵀ) on the pivot columns C of [G_J; U_J] (it is 0 iff
    it is 0 on C × C: each of these matrices is Rᵀ·(its C×C block)·R with R[:, C] = I), then
    (r, c) of the linear part Σ_J d_i v_iᵀ = −S/(2a); None when both hold."""
    import flint

    name, value, _ = rule
    if name == "Og(c)":
        return _failure(skip, n.up, n.down, flips, value)
    d = n.d
    ups = [n.up.row(i) for i in flips]
    gates = ups if n.gate is None else [n.gate.row(i) for i in flips]
    if flips:
        stacked = ups if n.gate is None else gates + ups
        bound = min(d, len(stacked))
        require(d * len(flips) * bound * bound <= MAX_QUADRATIC,
                "the candidate's quadratic identity is beyond what this checker computes")
        reduced, rank = flint.fmpq_mat(len(stacked), d, [_fq(v) for row in stacked
                                                         for v in row]).rref()
        pivots = [next(j for j in range(d) if reduced[i, j] != 0) for i in range(rank)]
        columns = [n.down.column(i) for i in flips]
        left = flint.fmpq_mat(d, len(flips), [_fq(c[r]) for r in range(d) for c in columns])
        terms = flint.fmpq_mat(len(flips), rank * rank, [
            _fq(g[s] * u[t] + u[s] * g[t]) for g, u in zip(gates, ups, strict=True)
            for s in pivots for t in pivots])
        entries = (left * terms).entries()
        index = next((k for k, v in enumerate(entries) if v != 0), None)
        if index is not None:
            r, rest = divmod(index, rank * rank)
            return r, pivots[rest // rank], pivots[rest % rank]
    if n.gate is None:  # 2 Σ_J β_i d_i u_iᵀ = −S: rows β_i u_i, a = 1
        rows = [[n.beta[i] * v for v in u] for i, u in zip(flips, ups, strict=True)]
        return _failure(skip, n.up, n.down, flips, Fraction(1), rows)
    rows = [[n.gamma[i] * x + n.beta[i] * y for x, y in zip(u, g, strict=True)]
            for i, u, g in zip(flips, ups, gates, strict=True)]
    return _failure(skip, n.up, n.down, flips, value, rows)
