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
- Gated blocks with biases (docs/rules.md §8, "linear neurons"): a neuron with gate row 0 and gate
  bias γ computes σ(γ)·(u·x + β). When σ(γ) is rational and ≠ 0 (reglu, bilinear: γ = 1;
  glu: γ = 0, σ(0) = 1/2), the own neurons plus one linear neuron p_k/σ(γ)·σ(γ)(q_k·x) per
  rank-one term absorb the block at width m + rank S. swiglu and geglu have no rational
  σ(γ) ≠ 0 at a rational γ: unknown. No lower bound is proved for gated blocks (lo = 1).
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

from ..model import Block, Layer, Matrix
from ..properties import properties
from . import modular
from .canonical import ridge
from .decision import Decision, undecided

PRIME = modular.PRIME  # one prime for keys and minor: the checker reads both from it
METHOD = "§4 key count + spare pairs (large block)"
CONSTRUCTION = "own neurons + spare pairs"
LINEAR = "own neurons + linear neurons"
QUADRUPLES = "own neurons + square quadruples"
SQUARE_PAIRS = "own neurons + square pairs"
METHOD_GATED = "§8 linear neurons / square quadruples"  # any size: see concrete.py


def gate_constant(block: Block) -> tuple[Fraction, Fraction] | None:
    """(γ, σ(γ)) with σ(γ) rational and ≠ 0, for a biased depth-1 gated block; else None."""
    if (not block.activation.gated or not block.biased or block.depth != 1
            or block.layers is None):
        return None
    if block.activation.is_rational and block.activation.scalar.exact(Fraction(1)) != 0:
        return Fraction(1), block.activation.scalar.exact(Fraction(1))
    at_zero = properties(block.activation).sigma_at_zero
    return (Fraction(0), at_zero) if at_zero else None


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
    res = up.residues(range(m), range(d), p)
    nonzero = up.nonzero()
    if res is None or not np.array_equal(res != 0, nonzero):
        return None
    present = nonzero.any(axis=1)
    first = res[np.arange(m), nonzero.argmax(axis=1)]
    inverse = _inverse(np.where(present, first, 1), p)
    keys = np.ascontiguousarray(res * inverse[:, None] % p)
    rows = keys.view(np.dtype((np.void, keys.dtype.itemsize * d))).ravel()
    _, where, counts = np.unique(rows[present], return_inverse=True, return_counts=True)
    alone = np.zeros(m, dtype=bool)
    alone[present] = counts[where.ravel()] == 1
    live = down.nonzero().any(axis=0)
    return KeyClasses(bool(present.all() and alone.all()), int((alone & live).sum()))


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
    return block.width + 2 * len(factorisation(block).columns)


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
        block, LINEAR, 1, gamma=str(gamma[0]), sigma_gamma=str(gamma[1]),
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


def added_neurons(block: Block) -> dict[str, np.ndarray]:
    """The neurons the construction adds to the block's own (docs/rules.md §4 spare pairs, §8
    linear neurons or square quadruples), as exact object arrays of Fractions: "up" (k×d),
    "down" (d×k), and "up_bias", "gate", "gate_bias" (k, k×d, k) where the witness has them.
    The own neurons are kept as they are (`own_layer`), so a large witness never converts
    the block's weights."""
    assert block.layers is not None
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
        out["gate_bias"] = _object(gate_biases, (len(ups),))
    return out


def _scaled(vector: list[Fraction], factor: Fraction) -> list[Fraction]:
    """factor·vector; zero entries (most of them, for S = cI) skip Fraction arithmetic."""
    return [v * factor if v else v for v in vector]


def _object(values: list[Any], shape: tuple[int, ...]) -> np.ndarray:
    out = np.empty(shape, dtype=object)
    if values:
        out[...] = values
    return out


def witness_fields(block: Block, size: int | None = None) -> dict[str, np.ndarray]:
    """The whole witness as exact object arrays of Fractions, by field name (up, down,
    gate, up_bias, gate_bias, down_bias), width max(size, the construction's): the own
    neurons, then `added_neurons`, then zero neurons. Costs m′·d Fractions: small blocks and
    tests; export rounds the own and added parts separately."""
    assert block.layers is not None
    layer = block.layers[0]
    added = added_neurons(block)
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
        out["down_bias"] = np.array(list(layer.down_bias), dtype=object)
    return out


def witness_arrays(block: Block, size: int | None = None
                   ) -> tuple[np.ndarray, np.ndarray, np.ndarray | None, np.ndarray | None]:
    """(up, down, up_bias, down_bias) of `witness_fields` (ungated constructions)."""
    f = witness_fields(block, size)
    return f["up"], f["down"], f.get("up_bias"), f.get("down_bias")


def gated_witness_arrays(block: Block, size: int | None = None) -> tuple[
        np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray | None, np.ndarray | None]:
    """(gate, up, down, gate_bias, up_bias, down_bias) of the linear-neuron witness."""
    f = witness_fields(block, size)
    return f["gate"], f["up"], f["down"], f["gate_bias"], f.get("up_bias"), f.get("down_bias")


def square_witness_arrays(block: Block, size: int | None = None
                          ) -> tuple[np.ndarray, np.ndarray, np.ndarray | None, np.ndarray | None]:
    """(up, down, up_bias, down_bias) of the square-quadruple witness (relu², square)."""
    return witness_arrays(block, size)


def witness_layer(block: Block, size: int | None = None) -> Layer:
    """`witness_fields` as a plain `Layer` (rows of Fractions; large: costs m′·d Fractions)."""
    f = witness_fields(block, size)

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


_RECENT: list[_Analysis] = []  # newest first
RECENT = 4  # blocks remembered (each holds its arrays alive)


def _analysed(block: Block, own_width: bool) -> tuple[KeyClasses | None, Decision | None]:
    """(residue-key classes, modular-functional refutation at width m or None; computed only when
    `own_width`). Several claims on one block, a query (its width, then its min width
    bounds) and repeated API calls on a block read again from the same files share this
    work: the determinant is most of it. A block is the same as a remembered one when it is
    that object, or when σ, S and the values of U and D are equal (compared exactly: the
    residues and the minor depend on nothing else; biases never enter them)."""
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
    if own_width and not found.own_done:
        keys = found.keys
        found.own = None if keys is None else modular.decide(block, block.width, keys.distinct)
        found.own_done = True
    return found.keys, found.own


def _same_block(a: Block, b: Block) -> bool:
    if a.activation != b.activation or a.depth != b.depth or a.layers is None \
            or b.layers is None or a.width != b.width or a.dim != b.dim:
        return False
    if (a.skip.matrix is None) != (b.skip.matrix is None) or a.skip.scale != b.skip.scale:
        return False
    pairs = [(a.layers[0].up, b.layers[0].up), (a.layers[0].down, b.layers[0].down)]
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
    modular functional), proved at m + 2·rank S and above, else undecided."""
    assert block.layers is not None and applies(block)
    keys, own = _analysed(block, size == block.width)
    if size == block.width and own is not None and own.absorbable is False:
        return own
    if keys is not None and size < keys.live:
        return Decision(False, METHOD, key_count_certificate(keys, size),
                        detail=f"{keys.live} live keys need {keys.live} neurons")
    hi = upper_bound(block)
    if size >= hi:
        return Decision(True, METHOD, spare_certificate(block),
                        detail=f"the block's {block.width} neurons + {hi - block.width} in "
                               "spare pairs")
    if size == block.width and own is not None:
        return own  # undecided, saying why (e.g. the minor does not fit in memory)
    lo = keys.live if keys is not None else 0
    return undecided(f"a large block: width {size} lies between the live-key count {lo} and "
                     f"the spare-pair construction's {hi} (docs/rules.md §4), where only the exact "
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
    return undecided(f"a biased {block.activation} block: width {size} is below the "
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
    return Bounds(lo, upper_bound(block), below, spare_certificate(block))


def bounds_certificate(found: Bounds) -> dict[str, Any]:
    return {"kind": "minimal width bounds", "lower": found.lo, "upper": found.hi,
            "below": found.below, "above": found.above}
