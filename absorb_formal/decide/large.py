"""Large concrete blocks at every width: docs/rules.md §4 (and §8.1 with biases) bounds that read
the weights only through residues mod p and exact zero tests, in O(m·d) vectorised work.

Depth 1, ungated, σ = a·z + e(z) with a ≠ 0 and e non-polynomial (relu, leaky_relu, gelu,
gelu_tanh, silu: `ridge(activation)`), with or without biases.

- Residue keys (§4 keys mod p): row u_i scaled by the inverse of its first non-zero entry, mod
  p. Parallel rows — one relu key (a line), or u and −u (one gelu key) — have one residue
  key, so different residue keys are different lines, hence different keys in both families
  (§8.1: different affine keys too). Sound only if every non-zero entry of U is non-zero mod
  p, which is tested (else nothing is concluded).
- Below: a row alone on its residue key, with d_i ≠ 0, is a live key of the canonical form
  (alone on its key, its coefficient is d_i or b·|α|·d_i ≠ 0). Each live key needs a neuron of
  the plain block (§4: p + |Δ| + 2k ≤ m′), so width W < L (L such rows) is not absorbable.
  At width m with all m rows alone the modular functional decides (`modular.py`, §7).
- Above: the block's own neurons plus, per rank-one term p_k q_kᵀ of S, the spare pair
  p_k/(2a)·(σ(q_k·x) − σ(−q_k·x)) = p_k·(q_k·x) (O(a): σ(z) − σ(−z) = 2az); the down bias is
  unchanged. S = cI: q_k = e_k (d terms, = rank S); a matrix S: an exact skeleton
  S = S[:,C]·S[R,C]⁻¹·S[R,:] with |C| = rank S. So the block is absorbable at width
  m + 2·rank S, the bound of §4. The certificate names the construction, C (and R); the
  checker re-derives the lemma and the skeleton identity.
- Above, cheaper when d < 2·rank S: doubles (§4: a key carrying two neurons adds any c ūᵀ).
  For any neuron i, (d_i − w)σ(ℓ_i) + w σ(−ℓ_i) = d_i σ(ℓ_i) − 2a w ℓ_i (O(a)): moving w off
  its down column onto one new neuron (up −u_i, bias −β_i) adds −2a w u_iᵀ to the linear
  part and a constant, which the down bias absorbs. With d neurons Δ whose rows U_Δ are
  independent, W = −S U_Δ⁻¹/(2a) gives −2a W U_Δ = S: width m + d. The certificate names Δ,
  a prime p < 2^21 and det U_Δ mod p (non-zero: U_Δ is invertible over Q), no weights; the
  checker recomputes the determinant from its own reading of U.
- Gated blocks with biases (docs/rules.md §8, "linear neurons"): a neuron with gate row 0 and gate
  bias γ computes σ(γ)·(u·x + β). With σ(γ) ≠ 0 (reglu, bilinear: γ = 1; glu: γ = 0,
  σ(0) = 1/2; swiglu, geglu: γ = 1 and the symbolic σ(1) = silu(1), gelu(1), docs/rules.md
  §8 "Symbolic constants"), the own neurons plus one linear neuron p_k/σ(γ)·σ(γ)(q_k·x)
  per rank-one term absorb the block at width m + rank S. Below it, only the own-width flip
  sets (§8.2, concrete.py) bound the min width.
- relu² and square with biases (docs/rules.md §8): σ(z) + σ(−z) = v z² (v = 1, 2), so
  p·ℓ = p/(4v)·(σ(ℓ+1) + σ(−ℓ−1) − σ(ℓ−1) − σ(−ℓ+1)) with ℓ = q·x: four neurons per
  rank-one term, width m + 4·rank S. No lower bound (lo = 1).
- A polynomial σ of degree exactly 2 (square, poly[c0, c1, c2]) needs only pairs (docs/rules.md §8,
  x = ((x+1)² − (x−1)²)/4): σ(ℓ + t) − σ(t − ℓ) = k·ℓ with k = 4·c2·t + 2·c1, so
  p/k·(σ(q·x + t) − σ(−q·x + t)) = p (q·x); t = 1, or −1 when 4c2 + 2c1 = 0. Width
  m + 2·rank S, the down bias unchanged.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import numpy as np

from ..model import exactarray, linalg, symbolic
from ..model.blocks import Block, Layer, Matrix
from ..numeric import accelerated
from . import modular, unique_subset
from .canonical import ridge
from .decision import Decision, undecided
from .lemmas import properties

PRIME = modular.PRIME  # one prime for keys and minor: the checker reads both from it
METHOD = "§4 key count + spare pairs (large block)"
METHOD_DOUBLES = "§4 key count + doubles (large block)"
CONSTRUCTION = "own neurons + spare pairs"
DOUBLES = "own neurons + doubles"
DOUBLES_PRIME = modular.MINOR_PRIMES[0]  # below 2^21: det U_Δ by checker/kernel/modlu.py's exact LU
# W = −S U_Δ⁻¹/(2a) is built exactly (python-flint) only up to this d: its entries have about
# d times the bits of a weight (d = 768: gigabytes). Export does not need it: it rounds W
# from enclosures at any d (`enclosed_doubles`), and solves rows exactly only where a ball
# touches a rounding midpoint (any number of them up to this d, a few beyond it).
EXACT_DOUBLES = 160
LINEAR = "own neurons + linear neurons"
QUADRUPLES = "own neurons + square quadruples"
SQUARE_PAIRS = "own neurons + square pairs"
# The constructions whose whole witness `witness_layer` builds from the certificate.
BUILT = (CONSTRUCTION, DOUBLES, LINEAR, QUADRUPLES, SQUARE_PAIRS)
METHOD_GATED = "§8 linear neurons / square quadruples"  # any size: see concrete.py


def gate_constant(block: Block) -> tuple[Fraction, symbolic.Number] | None:
    """(γ, σ(γ)) with σ(γ) ≠ 0 proved, for a biased depth-1 gated block; else None. σ(γ) is
    rational (reglu, bilinear: γ = 1; glu: γ = 0, σ(0) = 1/2) or, for a σ irrational on
    Q \\ {0} with σ(0) = 0 (swiglu, geglu), the symbolic σ(1) (`symbolic.atom`, its sign
    proved by an arb enclosure). A bias-free block has no gate bias: γ = 0 only, when
    σ(0) ≠ 0 (glu: the gate row 0 alone makes a linear neuron ½·(u·x))."""
    if not block.activation.gated or block.depth != 1 or block.layers is None:
        return None
    if not block.biased:
        at_zero = properties(block.activation).sigma_at_zero
        return (Fraction(0), at_zero) if at_zero else None
    scalar = block.activation.scalar
    if scalar.is_rational:
        at_one = scalar.exact(Fraction(1))
        return (Fraction(1), at_one) if at_one != 0 else None
    at_zero = properties(block.activation).sigma_at_zero
    if at_zero:
        return Fraction(0), at_zero
    if scalar.kind not in symbolic.KINDS:
        return None
    at_one = symbolic.atom(scalar.kind, Fraction(1))
    return (Fraction(1), at_one) if symbolic.nonzero(at_one) else None


def square_constant(block: Block) -> Fraction | None:
    """v with σ(z) + σ(−z) = v z² (relu²: 1, square: 2, a polynomial whose even part is c2·z²:
    2·c2), for a biased depth-1 ungated block."""
    if (block.activation.gated or not block.biased or block.depth != 1
            or block.layers is None):
        return None
    scalar = block.activation.scalar
    if scalar.kind == "relu_pow" and scalar.power == 2:
        return Fraction(1)
    if scalar.kind == "poly":  # square and kin: even part c2·z² exactly, so v = 2·c2
        c = [Fraction(x) for x in scalar.coeffs] + [Fraction(0)] * 3
        if c[0] == 0 and c[2] != 0 and all(x == 0 for x in c[4::2]):
            return 2 * c[2]
    return None


def pair_constant(block: Block) -> tuple[Fraction, Fraction] | None:
    """(t, k) with σ(z + t) − σ(t − z) = k·z, k ≠ 0, for a biased depth-1 ungated block whose
    σ is a polynomial of degree exactly 2 (k = 4·c2·t + 2·c1; t = 1, else −1)."""
    if (block.activation.gated or not block.biased or block.depth != 1
            or block.layers is None or block.activation.scalar.kind != "poly"):
        return None
    c = [Fraction(x) for x in block.activation.scalar.coeffs]
    while c and c[-1] == 0:
        c.pop()
    if len(c) != 3:
        return None
    t = Fraction(1) if 2 * c[2] + c[1] != 0 else Fraction(-1)
    return t, 4 * c[2] * t + 2 * c[1]


def construction(block: Block) -> dict[str, Any] | None:
    """The certificate of the construction that absorbs this large block at its width, if
    any: spare pairs (O(a)+N), linear neurons (biased gated), square pairs (degree-2
    polynomials), square quadruples (relu²)."""
    if applies(block):
        return spare_certificate(block)
    if gate_constant(block) is not None:
        return linear_certificate(block)
    if pair_constant(block) is not None:
        return square_pairs_certificate(block)
    if square_constant(block) is not None:
        return square_certificate(block)
    return None


def applies(block: Block) -> bool:
    found = ridge(block.activation)
    return (block.depth == 1 and block.layers is not None and not block.activation.gated
            and found is not None and found.a != 0)


@dataclass(frozen=True)
class KeyClasses:
    """distinct: every row of U non-zero and alone on its residue key; live: rows alone on
    their residue key whose column of D is non-zero (each a live key of the canonical form)."""

    distinct: bool
    live: int


def key_classes(up: Matrix, down: Matrix, p: int = PRIME) -> KeyClasses | None:
    """Residue-key classes of the rows of U; None when p divides a denominator or a non-zero
    entry (then residue keys could split one exact key)."""
    m, d = up.shape
    nonzero = up.nonzero()
    found = _alone(up.residues(range(m), range(d), p), nonzero, p)
    if found is None:
        return None
    present = nonzero.any(axis=1)
    live = down.nonzero().any(axis=0)
    return KeyClasses(bool(present.all() and found.all()), int((found & live).sum()))


def affine_keys_distinct(rows: Matrix, offsets: tuple[Fraction, ...], p: int = PRIME
                         ) -> bool | None:
    """Whether the affine functions x ↦ r_i·x + o_i (rows r_i of `rows`, offsets o_i) lie
    on pairwise different lines of Q^{d+1} — different keys up to a non-zero factor, hence
    up to sign too (docs/rules.md §8.2) — by residue keys of the rows [r_i | o_i] mod p;
    every r_i must be non-zero (else False). None when p divides a denominator or a non-zero
    entry (then residue keys could split one exact key, and nothing is concluded)."""
    m, d = rows.shape
    res = rows.residues(range(m), range(d), p)
    offset = [linalg.residue(o, p) for o in offsets]
    if res is None or any(v is None for v in offset):
        return None
    nonzero = rows.nonzero()
    if not nonzero.any(axis=1).all():
        return False
    found = _alone(np.hstack([res, np.array(offset, dtype=np.int64).reshape(m, 1)]),
                   np.hstack([nonzero, np.array([o != 0 for o in offsets]).reshape(m, 1)]), p)
    return None if found is None else bool(found.all())


def _alone(res: np.ndarray | None, nonzero: np.ndarray, p: int) -> np.ndarray | None:
    """Which rows are non-zero and alone on their residue key (the row over its first
    non-zero entry, mod p); None when `res` is None or a non-zero entry is 0 mod p."""
    if res is None or not np.array_equal(res != 0, nonzero):
        return None
    m, d = res.shape
    present = nonzero.any(axis=1)
    first = res[np.arange(m), nonzero.argmax(axis=1)]
    inverse = _inverse(np.where(present, first, 1), p)
    keys = np.ascontiguousarray(res * inverse[:, None] % p)
    rows = keys.view(np.dtype((np.void, keys.dtype.itemsize * d))).ravel()
    _, where, counts = np.unique(rows[present], return_inverse=True, return_counts=True)
    alone = np.zeros(m, dtype=bool)
    alone[present] = counts[where.ravel()] == 1
    return alone


def _inverse(values: np.ndarray, p: int) -> np.ndarray:
    """values^(p−2) mod p element-wise (Fermat), square and multiply in int64 (p < 2^31)."""
    out, base, power = np.ones_like(values), values.astype(np.int64) % p, p - 2
    while power:
        if power & 1:
            out = out * base % p
        base = base * base % p
        power >>= 1
    return out


@dataclass(frozen=True)
class Factorisation:
    """S = Σ_k p_k q_kᵀ. Matrix skip: a skeleton S = S[:,C]·S[R,C]⁻¹·S[R,:] with |C| = |R| =
    rank S (p_k = S[:,C_k], q_k = row k of S[R,C]⁻¹·S[R,:]); S = cI: C = every column,
    p_k = c·e_k, q_k = e_k, rows None."""

    columns: list[int]
    rows: list[int] | None


def factorisation(block: Block) -> Factorisation:
    if block.skip.matrix is None:
        return Factorisation(list(range(block.dim)) if block.skip.scale else [], None)
    rows = [list(r) for r in block.skip.matrix.rows]
    return Factorisation(_pivots(rows), _pivots([list(c) for c in zip(*rows, strict=True)]))


def _pivots(rows: list[list[Fraction]]) -> list[int]:
    """The pivot columns of the reduced row echelon form (exact, python-flint fmpq_mat)."""
    reduced, rank = _fmpq(rows).rref()
    found = []
    for i in range(rank):
        found.append(next(j for j in range(reduced.ncols()) if reduced[i, j] != 0))
    return found


def _fmpq(rows: list[list[Fraction]]) -> Any:
    import flint

    return flint.fmpq_mat(len(rows), len(rows[0]) if rows else 0,
                          [flint.fmpq(v.numerator, v.denominator) for r in rows for v in r])


def rank_one_terms(block: Block) -> list[tuple[list[Fraction], list[Fraction]]]:
    """The (p_k, q_k) of `factorisation`, exactly."""
    found, d = factorisation(block), block.dim
    if found.rows is None:
        c, zero, one = Fraction(block.skip.scale or 0), Fraction(0), Fraction(1)
        # one shared zero: d² entries for S = cI, of which d are not zero
        return [([c if r == k else zero for r in range(d)],
                 [one if r == k else zero for r in range(d)]) for k in found.columns]
    assert block.skip.matrix is not None
    s = [list(r) for r in block.skip.matrix.rows]
    core = _fmpq([[s[r][c] for c in found.columns] for r in found.rows]).inv()
    q = core * _fmpq([s[r] for r in found.rows])
    return [([s[r][c] for r in range(d)],
             [Fraction(int(q[k, j].p), int(q[k, j].q)) for j in range(d)])
            for k, c in enumerate(found.columns)]


def upper_bound(block: Block) -> int:
    """The spare-pair construction's width, m + 2·rank S."""
    return block.width + 2 * len(factorisation(block).columns)


def doubles_width(block: Block) -> int | None:
    """m + d when doubles would be narrower than spare pairs (d < 2·rank S, m ≥ d), else None
    (reads only shapes and S)."""
    m, d = block.width, block.dim
    if not applies(block) or m < d or d >= 2 * len(factorisation(block).columns):
        return None
    return m + d


@dataclass(frozen=True)
class Doubles:
    """d neurons whose rows of U are independent: det U_Δ ≡ det ≠ 0 mod prime."""

    neurons: list[int]
    prime: int
    det: int


def find_doubles(up: Matrix, p: int = DOUBLES_PRIME) -> Doubles | None:
    """The first d rows of U independent mod p: rows 0..d−1 when their determinant is not 0
    mod p (one LU of order d), else the pivot rows of Uᵀ (one LU of d × m). None when U has
    rank < d mod p (then, most likely, over Q too) or p divides a denominator."""
    m, d = up.shape
    if m < d:
        return None
    first = up.residues(range(d), range(d), p)
    if first is None:
        return None
    det = accelerated.det_mod(first, p)
    if det:
        return Doubles(list(range(d)), p, det)
    whole = up.residues(range(m), range(d), p)
    assert whole is not None  # its first rows had residues
    rows = accelerated.pivot_columns(whole.T, p)
    if len(rows) < d:
        return None
    det = accelerated.det_mod(whole[rows], p)
    assert det, "pivot rows mod p have a non-zero determinant mod p"
    return Doubles(rows, p, det)


def doubles_certificate(block: Block, found: Doubles) -> dict[str, Any]:
    ridge_ = ridge(block.activation)
    assert ridge_ is not None
    return {"kind": "witness", "check": DOUBLES, "width": block.width + len(found.neurons),
            "a": str(ridge_.a), "neurons": found.neurons, "prime": found.prime,
            "det_mod_p": found.det,
            "argument": "the block's own neurons, up and down biases kept, except that each "
                        "listed neuron i gives w_i of its down column to one new neuron with up "
                        "row -u_i and up bias -b_i: (d_i - w_i) sigma(l_i) + w_i sigma(-l_i) = "
                        "d_i sigma(l_i) - 2a w_i l_i (lemma O(a)); the listed rows U_D of U "
                        "have det U_D = det_mod_p != 0 mod prime, so W = -S U_D^-1/(2a) "
                        "exists and -2a W U_D = S; the constant S U_D^-1 b_D moves into the "
                        "down bias"}


def narrowest(block: Block) -> tuple[int, dict[str, Any]]:
    """(width, certificate) of the narrowest construction proved for an O(a)+N block: doubles
    at m + d when d < 2·rank S and d rows of U are independent mod p, else spare pairs."""
    if doubles_width(block) is not None:
        found = _doubles(block)
        if found is not None:
            return block.width + len(found.neurons), doubles_certificate(block, found)
    return upper_bound(block), spare_certificate(block)


def construction_method(certificate: dict[str, Any]) -> str:
    """The method a large construction's certificate is printed under."""
    return {CONSTRUCTION: METHOD, DOUBLES: METHOD_DOUBLES}.get(certificate.get("check", ""),
                                                               METHOD_GATED)


def _construction_certificate(block: Block, check: str, per_term: int,
                              **fields: str) -> dict[str, Any]:
    """A construction's witness: the block's own neurons plus `per_term` neurons per
    rank-one term of S's factorisation (columns, and rows for a matrix skip)."""
    found = factorisation(block)
    cert: dict[str, Any] = {
        "kind": "witness", "check": check, "width": block.width + per_term * len(found.columns),
        "columns": found.columns, **fields}
    if found.rows is not None:
        cert["rows"] = found.rows
    return cert


def linear_certificate(block: Block) -> dict[str, Any]:
    gamma = gate_constant(block)
    assert gamma is not None
    return _construction_certificate(
        block, LINEAR, 1, gamma=str(gamma[0]), sigma_gamma=symbolic.text(gamma[1]),
        argument="the block's own neurons, biases unchanged, plus for each rank-one term "
                 "p q^T of S a linear neuron: gate row 0, gate bias gamma, up row q, up "
                 "bias 0, down p/sigma(gamma); factorisation as for spare pairs")


def square_certificate(block: Block) -> dict[str, Any]:
    v = square_constant(block)
    assert v is not None
    return _construction_certificate(
        block, QUADRUPLES, 4, v=str(v),
        argument="the block's own neurons, biases unchanged, plus for each rank-one term "
                 "p q^T of S the neurons p/(4v)·(σ(ℓ+1) + σ(−ℓ−1) − σ(ℓ−1) − σ(−ℓ+1)) "
                 "= p ℓ, ℓ = q·x (lemma σ(z) + σ(−z) = v z²); factorisation as for spare "
                 "pairs")


def square_pairs_certificate(block: Block) -> dict[str, Any]:
    found = pair_constant(block)
    assert found is not None
    t, k = found
    return _construction_certificate(
        block, SQUARE_PAIRS, 2, t=str(t), k=str(k),
        argument="the block's own neurons, biases unchanged, plus for each rank-one term "
                 "p q^T of S the pair p/k·(σ(q·x + t) − σ(−q·x + t)) = p q·x (lemma "
                 "σ(z + t) − σ(t − z) = k z for σ of degree 2); factorisation as for spare "
                 "pairs")


def spare_certificate(block: Block) -> dict[str, Any]:
    ridge_ = ridge(block.activation)
    assert ridge_ is not None
    return _construction_certificate(
        block, CONSTRUCTION, 2, a=str(ridge_.a),
        argument="the block's own neurons, up and down biases unchanged, plus for each "
                 "rank-one term p q^T of S the pair p/(2a)·(σ(q·x) − σ(−q·x)) = p q·x "
                 "(lemma O(a)); S = cI: q = e_k for the listed columns; a matrix S: the "
                 "skeleton S = S[:,columns]·S[rows,columns]^-1·S[rows,:]")


def key_count_certificate(keys: KeyClasses, size: int) -> dict[str, Any]:
    return {"kind": "key count", "prime": PRIME, "keys": keys.live, "width": size,
            "argument": "rows of U alone on their residue key mod p (row over its first "
                        "non-zero entry) with a non-zero column of D are live keys, each "
                        "needing its own neuron (docs/rules.md §4: p + |Δ| + 2k ≤ m′)"}


class TooWide(Exception):
    """The doubles witness is not built exactly beyond EXACT_DOUBLES, or (export) cannot be
    rounded from enclosures (its certificate, which stores no weights, is unaffected)."""


def added_neurons(block: Block, certificate: dict[str, Any] | None = None
                  ) -> dict[str, np.ndarray]:
    """The neurons the construction adds to the block's own (docs/rules.md §4 spare pairs or
    doubles, §8 linear neurons or square quadruples), as exact object arrays of Fractions:
    "up" (k×d), "down" (d×k), and "up_bias", "gate", "gate_bias" (k, k×d, k) where the
    witness has them. The own neurons are kept as they are, so a large witness never converts
    the block's weights — except for doubles (`certificate` with check DOUBLES; None: the
    block's `construction`), which also change some own down columns and the down bias:
    "columns" (the own neurons changed, an int array), "own_down" (d × k, their new down
    columns) and "down_bias" (d, the new down bias; only when the block has biases)."""
    assert block.layers is not None
    if certificate is not None and certificate.get("check") == DOUBLES:
        return _doubled(block, [int(i) for i in certificate["neurons"]])
    layer, d = block.layers[0], block.dim
    terms = rank_one_terms(block)
    zero = Fraction(0)
    if applies(block):  # p/(2a)·(σ(q·x) − σ(−q·x)) = p (q·x)
        a = ridge(block.activation).a  # type: ignore[union-attr]
        ups = [u for _, q in terms for u in (q, _scaled(q, Fraction(-1)))]
        downs = [c for p, _ in terms
                 for c in (_scaled(p, 1 / (2 * a)), _scaled(p, -1 / (2 * a)))]
        biases = [zero] * len(ups)
        gates: list[list[Fraction]] | None = None
        gate_biases: list[Fraction] = []
    elif (gamma := gate_constant(block)) is not None:  # gate row 0, gate bias γ: σ(γ)(q·x)
        ups = [q for _, q in terms]
        downs = [_scaled(p, 1 / gamma[1]) for p, _ in terms]
        biases = [zero] * len(ups)
        gates, gate_biases = [[zero] * d for _ in ups], [gamma[0]] * len(ups)
    elif (pair := pair_constant(block)) is not None:  # p/k·(σ(ℓ + t) − σ(−ℓ + t)) = p ℓ
        t, k = pair
        ups = [u for _, q in terms for u in (q, _scaled(q, Fraction(-1)))]
        downs = [c for p, _ in terms for c in (_scaled(p, 1 / k), _scaled(p, -1 / k))]
        biases, gates, gate_biases = [t] * len(ups), None, []
    else:  # p/(4v)·(σ(ℓ+1) + σ(−ℓ−1) − σ(ℓ−1) − σ(−ℓ+1)) = p ℓ, ℓ = q·x
        v = square_constant(block)
        assert v is not None
        ups, downs, biases, gates, gate_biases = [], [], [], None, []
        for p_, q in terms:
            for sign, offset, weight in ((1, 1, 1), (-1, -1, 1), (1, -1, -1), (-1, 1, -1)):
                ups.append(_scaled(q, Fraction(sign)))
                biases.append(Fraction(offset))
                downs.append(_scaled(p_, weight / (4 * v)))
    out = {"up": _object(ups, (len(ups), d)), "down": _object(downs, (len(ups), d)).T}
    if layer.up_bias is not None or any(biases):
        out["up_bias"] = _object(biases, (len(ups),))
    if gates is not None:
        out["gate"] = _object(gates, (len(ups), d))
        if layer.gate_bias is not None or any(gate_biases):  # bias-free glu: none
            out["gate_bias"] = _object(gate_biases, (len(ups),))
    return out


def _doubled(block: Block, neurons: list[int]) -> dict[str, np.ndarray]:
    """Doubles on `neurons` (U_Δ invertible): W = −S U_Δ⁻¹/(2a), solved exactly over Q
    (python-flint); new neurons (−u_i, −β_i, w_i); own columns d_i − w_i; down bias
    c + 2a·W β_Δ (= c − S U_Δ⁻¹ β_Δ)."""
    assert block.layers is not None
    layer, d, k = block.layers[0], block.dim, len(neurons)
    if k > EXACT_DOUBLES:
        raise TooWide(f"the doubles witness needs W = -S U^-1/(2a) for a {k}×{k} matrix U of "
                      f"the block's rows, built exactly only up to {EXACT_DOUBLES}")
    ridge_ = ridge(block.activation)
    assert ridge_ is not None
    a = ridge_.a
    ups = _exact_rows(layer.up, neurons)
    target = _fmpq([[-v / (2 * a) for v in row] for row in zip(*block.skip.rows(), strict=True)])
    solved = _fmpq(ups).transpose().solve(target)  # U_Δᵀ Wᵀ = −Sᵀ/(2a)
    w = [[Fraction(int(solved[j, r].p), int(solved[j, r].q)) for j in range(k)]
         for r in range(d)]  # d × k
    own = [list(layer.down.exact_column(i)) for i in neurons]
    betas = [layer.up_bias[i] if layer.up_bias is not None else Fraction(0) for i in neurons]
    out = {"up": _object([_scaled(u, Fraction(-1)) for u in ups], (k, d)),
           "down": _object(w, (d, k)),
           "columns": np.array(neurons, dtype=np.int64),
           "own_down": _object([[own[j][r] - w[r][j] for j in range(k)] for r in range(d)],
                               (d, k))}
    if layer.up_bias is not None:
        out["up_bias"] = _object([-b for b in betas], (k,))
    if layer.down_bias is not None:
        out["down_bias"] = _object([c + 2 * a * sum((w[r][j] * betas[j] for j in range(k)),
                                                     Fraction(0))
                                    for r, c in enumerate(layer.down_bias)], (d,))
    return out


def _exact_rows(matrix: Matrix, rows: list[int]) -> list[list[Fraction]]:
    """The listed rows exactly, without converting the rest of a loaded array."""
    if matrix.loaded is not None:
        return exactarray.fractions(matrix.loaded[rows])
    return [list(matrix.rows[i]) for i in rows]


def _scaled(vector: list[Fraction], factor: Fraction) -> list[Fraction]:
    """factor·vector; zero entries (most of them, for S = cI) skip Fraction arithmetic."""
    return [v * factor if v else v for v in vector]


def _object(values: list[Any], shape: tuple[int, ...]) -> np.ndarray:
    out = np.empty(shape, dtype=object)
    if values:
        out[...] = values
    return out


def witness_fields(block: Block, size: int | None = None,
                   certificate: dict[str, Any] | None = None) -> dict[str, np.ndarray]:
    """The whole witness as exact object arrays of Fractions, by field name (up, down,
    gate, up_bias, gate_bias, down_bias), width max(size, the construction's): the own
    neurons (doubles: some down columns and the down bias changed), then `added_neurons`,
    then zero neurons. `certificate`: the construction's (None: the block's `construction`).
    Costs m′·d Fractions: small blocks and tests; export rounds the own and added parts
    separately."""
    assert block.layers is not None
    layer = block.layers[0]
    added = added_neurons(block, certificate)
    m, d = layer.up.shape
    k = added["up"].shape[0]
    width = max(size or 0, m + k)
    out: dict[str, np.ndarray] = {}
    for name, own, rows in (("up", layer.up, True), ("gate", layer.gate, True),
                            ("down", layer.down, False)):
        if own is None:
            continue
        full = np.full((width, d) if rows else (d, width), Fraction(0), dtype=object)
        extra = added.get(name, np.full((k, d), Fraction(0), dtype=object))
        if rows:
            full[:m], full[m:m + k] = np.array(own.rows, dtype=object), extra
        else:
            full[:, :m], full[:, m:m + k] = np.array(own.rows, dtype=object), extra
            if "columns" in added:  # doubles: the own columns that gave w_i away
                full[:, added["columns"]] = added["own_down"]
        out[name] = full
    for name, own_bias in (("up_bias", layer.up_bias), ("gate_bias", layer.gate_bias)):
        if own_bias is None and name not in added:
            continue
        full = np.full(width, Fraction(0), dtype=object)
        full[:m] = list(own_bias or (Fraction(0),) * m)
        if name in added:
            full[m:m + k] = added[name]
        out[name] = full
    if layer.down_bias is not None:
        out["down_bias"] = added.get("down_bias", np.array(list(layer.down_bias), dtype=object))
    return out


def witness_arrays(block: Block, size: int | None = None,
                   certificate: dict[str, Any] | None = None
                   ) -> tuple[np.ndarray, np.ndarray, np.ndarray | None, np.ndarray | None]:
    """(up, down, up_bias, down_bias) of `witness_fields` (ungated constructions)."""
    f = witness_fields(block, size, certificate)
    return f["up"], f["down"], f.get("up_bias"), f.get("down_bias")


def gated_witness_arrays(block: Block, size: int | None = None) -> tuple[
        np.ndarray, np.ndarray, np.ndarray, np.ndarray | None, np.ndarray | None,
        np.ndarray | None]:
    """(gate, up, down, gate_bias, up_bias, down_bias) of the linear-neuron witness."""
    f = witness_fields(block, size)
    return (f["gate"], f["up"], f["down"], f.get("gate_bias"), f.get("up_bias"),
            f.get("down_bias"))


def square_witness_arrays(block: Block, size: int | None = None
                          ) -> tuple[np.ndarray, np.ndarray, np.ndarray | None, np.ndarray | None]:
    """(up, down, up_bias, down_bias) of the square-quadruple witness (relu², square)."""
    return witness_arrays(block, size)


def witness_layer(block: Block, size: int | None = None,
                  certificate: dict[str, Any] | None = None) -> Layer:
    """`witness_fields` as a plain `Layer` (rows of Fractions; large: costs m′·d Fractions)."""
    f = witness_fields(block, size, certificate)

    def vector(name: str) -> tuple[Fraction, ...] | None:
        return None if name not in f else tuple(f[name].tolist())

    return Layer(Matrix(f["up"].tolist()), Matrix(f["down"].tolist()),
                 Matrix(f["gate"].tolist()) if "gate" in f else None,
                 up_bias=vector("up_bias"), gate_bias=vector("gate_bias"),
                 down_bias=vector("down_bias"))


@dataclass
class _Analysis:
    """What a block's residues give, kept for the blocks decided last: its key classes, and
    the modular-functional refutation at its own width once asked for (None: none exists)."""

    block: Block
    keys: KeyClasses | None
    own: Decision | None = None
    own_done: bool = False
    doubles: Doubles | None = None  # `find_doubles` of U, once asked for
    doubles_done: bool = False


_RECENT: list[_Analysis] = []  # newest first
RECENT = 4  # blocks remembered (each holds its arrays alive)


def _analysed(block: Block, own_width: bool) -> tuple[KeyClasses | None, Decision | None]:
    """(residue-key classes, modular-functional refutation at width m or None; computed only when
    `own_width`). Several claims on one block, a query (its width, then its min width
    bounds) and repeated API calls on a block read again from the same files share this
    work: the LU is most of it. A block is the same as a remembered one when it is
    that object, or when σ, S, the values of U and D and the biases are equal (compared
    exactly: the residues and the minor depend on nothing else, but the unique solution's
    witness, `unique_subset.flipped`, carries the block's own biases)."""
    found = _entry(block)
    if own_width and not found.own_done:
        found.own = _own_width(block, found.keys)
        found.own_done = True
    return found.keys, found.own


def _entry(block: Block) -> _Analysis:
    """The remembered analysis of this block (made, with its key classes, when new), moved
    to the front."""
    found = next((a for a in _RECENT if a.block is block), None) or \
        next((a for a in _RECENT if _same_block(a.block, block)), None)
    if found is None:
        assert block.layers is not None
        layer = block.layers[0]
        found = _Analysis(block, key_classes(layer.up, layer.down))
    else:
        _RECENT.remove(found)
    _RECENT.insert(0, found)
    del _RECENT[RECENT:]
    return found


def _doubles(block: Block) -> Doubles | None:
    """`find_doubles` of the block's U, computed once per block's values."""
    found = _entry(block)
    if not found.doubles_done:
        assert block.layers is not None
        found.doubles, found.doubles_done = find_doubles(block.layers[0].up), True
    return found.doubles


def _own_width(block: Block, keys: KeyClasses | None) -> Decision | None:
    """The decision at width m: the modular functional refutes when S is separated from the
    terms mod q; otherwise, with m distinct live keys, the unique solution mod q decides both ways
    (`unique_subset`, docs/rules.md §4). None when neither applies."""
    if keys is None:
        return None
    m, d = block.width, block.dim
    both_ways = keys.distinct and keys.live == m and m <= d * d
    # the unique solution decides both ways: then a zero minor is not retried (each retry
    # costs one LU of order m + 1) but handed over at once
    found = modular.decide(block, m, keys.distinct, retries=not both_ways)
    if found is not None or not both_ways:
        return found
    return unique_subset.decide(block)


def _same_block(a: Block, b: Block) -> bool:
    if a.activation != b.activation or a.depth != b.depth or a.layers is None \
            or b.layers is None or a.width != b.width or a.dim != b.dim:
        return False
    if (a.skip.matrix is None) != (b.skip.matrix is None) or a.skip.scale != b.skip.scale:
        return False
    mine, theirs = a.layers[0], b.layers[0]
    if mine.up_bias != theirs.up_bias or mine.down_bias != theirs.down_bias:
        return False  # the flip witness of one would carry the other's biases
    pairs = [(mine.up, theirs.up), (mine.down, theirs.down)]
    if a.skip.matrix is not None and b.skip.matrix is not None:
        pairs.append((a.skip.matrix, b.skip.matrix))
    return all(_same_values(x, y) for x, y in pairs)


def _same_values(x: Matrix, y: Matrix) -> bool:
    """Equal entries, exactly: loaded arrays compare as the numbers they hold (a float equals
    another exactly when the rationals do); otherwise only the same object."""
    if x is y:
        return True
    if x.shape != y.shape or x.loaded is None or y.loaded is None:
        return False
    # one dtype: numpy would compare int64 with float64 after rounding the integers
    return x.loaded.dtype == y.loaded.dtype and bool(np.array_equal(x.loaded, y.loaded))


def decide(block: Block, size: int) -> Decision:
    """Absorbable at width `size`: refuted below the live-key count (or at width m by the
    modular functional), proved at m + 2·rank S and above (spare pairs) and, when
    d < 2·rank S, at m + d and above (doubles), else undecided."""
    assert block.layers is not None and applies(block)
    # S = cI: hi is m + 2d at no cost; a matrix S needs its exact rank (rref), so the own
    # width goes first there (it may decide every width ≥ m)
    cheap = block.skip.matrix is None
    keys, own = _analysed(block, block.width <= size
                          and (not cheap or size < upper_bound(block)))
    if size == block.width and own is not None and own.absorbable is False:
        return own
    if own is not None and own.absorbable is True and size >= block.width:
        return own  # the witness has width m; zero neurons fill any wider width
    if keys is not None and size < keys.live:
        return Decision(False, METHOD, key_count_certificate(keys, size),
                        detail=f"{keys.live} live keys need {keys.live} neurons")
    spare = upper_bound(block)
    if size >= spare:  # spare pairs: nothing to compute, and the checker reads no weight
        return Decision(True, METHOD, spare_certificate(block),
                        detail=f"the block's {block.width} neurons + {spare - block.width} in "
                               "spare pairs")
    hi, above = narrowest(block)
    if size >= hi:
        return Decision(True, METHOD_DOUBLES, above,
                        detail=f"the block's {block.width} neurons, {hi - block.width} of them "
                               "doubled")
    if size == block.width and own is not None:
        return own  # undecided, saying why (e.g. the minor does not fit in memory)
    lo = keys.live if keys is not None else 0
    name = "doubles" if above["check"] == DOUBLES else "spare-pair"
    return undecided(f"a large block: width {size} lies between the live-key count {lo} and "
                     f"the {name} construction's {hi} (docs/rules.md §4), where only the exact "
                     "width search (limited to small blocks) decides")


def decide_construction(block: Block, size: int) -> Decision:
    """Blocks with a construction but no lower-bound rule (biased gated, relu², square):
    absorbable at the construction's width and above, else undecided."""
    found = construction(block)
    assert found is not None
    hi = int(found["width"])
    if size >= hi:
        return Decision(True, METHOD_GATED, found,
                        detail=f"the block's {block.width} neurons + {hi - block.width} added")
    kind = "biased " if block.biased else ""
    return undecided(f"a {kind}{block.activation} block: width {size} is below the "
                     f"construction's {hi} (docs/rules.md §8), and no rule decides it there")


@dataclass(frozen=True)
class Bounds:
    """lo ≤ min width ≤ hi, with a refutation at lo − 1 (None when lo = 1) and a witness."""

    lo: int
    hi: int
    below: dict[str, Any] | None
    above: dict[str, Any]


def bounds(block: Block) -> Bounds:
    if not applies(block):
        found = construction(block)
        assert found is not None
        return Bounds(1, int(found["width"]), None, found)
    assert block.layers is not None and applies(block)
    keys, own = _analysed(block, True)
    lo, below = 1, None
    if own is not None and own.absorbable is False:
        lo, below = block.width + 1, own.certificate
    elif keys is not None and keys.live > 1:
        lo, below = keys.live, key_count_certificate(keys, keys.live - 1)
    if own is not None and own.absorbable is True:  # the flip witness at width m
        assert own.certificate is not None
        return Bounds(lo, block.width, below, own.certificate)
    hi, above = narrowest(block)
    return Bounds(lo, hi, below, above)


def bounds_certificate(found: Bounds) -> dict[str, Any]:
    return {"kind": "minimal width bounds", "lower": found.lo, "upper": found.hi,
            "below": found.below, "above": found.above}
