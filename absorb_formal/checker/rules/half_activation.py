"""The checker's own half-activation bound (docs/rules.md §9; docs/rules.md, "Depth ≥ 2: the
half-activation bound"): certificate kind `half-activation bound` and the family rule
`§9 half-activation bound`.

Everything is re-derived from the block the document embeds: σ = c·relu is re-proved with
sympy (ungated, H(1), σ(−p) = 0 for p > 0, σ(1) = c ≠ 0: an activation whose derivative never
vanishes is refused), every layer's norm sum is recomputed exactly, every one of its 2^m
patterns is enumerated again (rank modulo the prime 2^61 − 1 with python-flint; a pattern below
full rank there gets its exact rank over Q in Fractions), and so are the products across layers
when the certificate combines them that way. Nothing here imports the prover.
"""

from __future__ import annotations

import itertools
from fractions import Fraction
from typing import Any

from ..kernel import linalg as exact
from ..kernel.contract import Kind, require
from ..kernel.linalg import Rows, q, whole
from ..lemmas import relied as lemmas

RULE = "§9 half-activation bound"
PRIME = 2**61 - 1
MAX_PATTERN_BITS = 14
MAX_TUPLES = 4096
LAYER_FIELDS = {"norm": {"test", "norm", "sum"},
                "patterns": {"test", "least_rank", "least_pattern"}}



def slope(activation: dict[str, Any]) -> Fraction:
    """c with σ = c·relu, re-proved; Invalid for any other σ (leaky ReLU, GELU, SiLU: the
    derivative never vanishes, and Lemma H fails for them; gated blocks)."""
    found = lemmas.relu_multiple(activation)
    require(found is not None, f"{activation['name']}: the half-activation bound needs "
                               "sigma = c*relu (ungated, H(1), sigma(z) = 0 for z < 0); its "
                               "derivative must vanish on a half-line")
    assert found is not None
    return found


def check_family(block: dict[str, Any], width: int) -> None:
    """The family rule's preconditions: c·relu, S invertible, width < 2d (any depth, biases)."""
    slope(block["activation"])
    require(exact.skip_rank(block) == block["dim"], "§9 family rule needs S invertible")
    require(width < 2 * block["dim"], "§9 family rule needs width < 2d")


def check(block: dict[str, Any], width: int, cert: dict[str, Any]) -> None:
    """The block is not absorbable at `width`: every pattern product has rank ≥ r, 2r > width."""
    require(cert.get("kind") == Kind.HALF_ACTIVATION_BOUND, "not a half-activation bound")
    c = slope(block["activation"])
    layers = block["layers"]
    require(isinstance(layers, list) and len(layers) == block["depth"],
            "the half-activation bound needs the block's embedded layers")
    d = block["dim"]
    s = exact.skip_rows(block)
    entries = cert["layers"]
    require(isinstance(entries, list) and len(entries) == len(layers),
            "one entry per layer")
    ranks = []
    for n, (layer, entry) in enumerate(zip(layers, entries, strict=True), start=1):
        test = entry["test"]
        require(test in LAYER_FIELDS and set(entry) == LAYER_FIELDS[test],
                f"layer {n}: unknown test or fields")
        up, down = exact.mat(layer["up"]), exact.mat(layer["down"])
        if test == "norm":
            value = norm_sum(s, up, down, c, entry["norm"])
            require(value == q(entry["sum"]), f"layer {n}: the stored norm sum is wrong")
            require(value < 1, f"layer {n}: the norm sum is not below 1")
            ranks.append(d)
            continue
        require(len(up) <= MAX_PATTERN_BITS, f"layer {n}: too many patterns to re-enumerate")
        rank, pattern = least_pattern(s, up, down, c)
        require(whole(entry["least_rank"]) == rank,
                f"layer {n}: the least pattern rank is {rank}, not {entry['least_rank']}")
        require(entry["least_pattern"] == _indices(pattern),
                f"layer {n}: the first pattern of least rank is {_indices(pattern)}")
        ranks.append(rank)
    r = _combined(s, layers, c, ranks, cert)
    require(whole(cert["rank"]) == r, f"the combined rank bound is {r}, not {cert['rank']}")
    require(whole(cert["width"]) == width, f"the certificate is for width {cert['width']}, "
                                         f"not {width}")
    require(width < 2 * r, f"width {width} is not below 2 * {r}")


def _combined(s: Rows, layers: list[dict[str, Any]], c: Fraction, ranks: list[int],
              cert: dict[str, Any]) -> int:
    d, how = len(s), cert["combine"]
    full = all(r == d for r in ranks)
    if how == "non-singular":
        require(full, "a layer has a singular pattern")
        return d
    require(not full, f"every layer is non-singular: combine is 'non-singular', not {how!r}")
    if how == "one layer":
        require(len(ranks) == 1, "'one layer' needs depth 1")
        return ranks[0]
    require(len(ranks) >= 2, f"{how!r} needs depth >= 2")
    if how == "sylvester":  # rank(AB) >= rank A + rank B - d, for every tuple of patterns
        return max(0, sum(ranks) - (len(ranks) - 1) * d)
    require(how == "products", f"unknown combination {how!r}")
    ups = [exact.mat(layer["up"]) for layer in layers]
    downs = [exact.mat(layer["down"]) for layer in layers]
    require(_tuple_count(ups) <= MAX_TUPLES, "too many products to re-enumerate")
    rank, tuple_ = least_product(s, ups, downs, c)
    require(cert["least_patterns"] == [_indices(a) for a in tuple_],
            "the first tuple of least product rank differs")
    return rank


def _tuple_count(ups: list[Rows]) -> int:
    total = 1
    for up in ups:
        total *= 2 ** len(up)
    return total


def _indices(pattern: int) -> list[int]:
    return [i + 1 for i in range(pattern.bit_length()) if pattern >> i & 1]


def norm_sum(s: Rows, up: Rows, down: Rows, c: Fraction, norm: str) -> Fraction:
    """Σ_i |c|·‖S⁻¹d_i‖·‖u_i‖ in the named operator norm ("inf": ‖v‖∞‖w‖₁, "one": ‖v‖₁‖w‖∞)."""
    require(norm in ("inf", "one"), f"unknown norm {norm!r}")
    inverse = _inverse(s)
    total = Fraction(0)
    for i, u in enumerate(up):
        w = exact.matvec(inverse, [row[i] for row in down])
        big_w, sum_w = max((abs(x) for x in w), default=Fraction(0)), sum(map(abs, w), Fraction(0))
        big_u, sum_u = max((abs(x) for x in u), default=Fraction(0)), sum(map(abs, u), Fraction(0))
        total += abs(c) * (big_w * sum_u if norm == "inf" else sum_w * big_u)
    return total


def _inverse(s: Rows) -> Rows:
    d = len(s)
    reduced, pivots = exact.rref([list(row) + list(e) for row, e in zip(s, exact.eye(d),
                                                                         strict=True)])
    require(pivots[:d] == list(range(d)), "the norm test needs S invertible")
    return tuple(tuple(row[d:]) for row in reduced[:d])


def pattern_matrix(s: Rows, up: Rows, down: Rows, c: Fraction, pattern: int) -> Rows:
    out = s
    for i in range(len(up)):
        if pattern >> i & 1:
            out = exact.combine(out, exact.outer([row[i] for row in down], up[i]), c)
    return out


def _residues(rows: Rows) -> Any:
    import flint

    values = []
    for row in rows:
        for x in row:
            if x.denominator % PRIME == 0:
                return None
            values.append(x.numerator * pow(x.denominator, -1, PRIME) % PRIME)
    return flint.nmod_mat(len(rows), len(rows[0]) if rows else 0, values, PRIME)


def least_pattern(s: Rows, up: Rows, down: Rows, c: Fraction) -> tuple[int, int]:
    """(least rank over the 2^m patterns, the first pattern in binary order with it)."""
    d, m = len(s), len(up)
    steps = [_residues(exact.combine(exact.zeros(d, d), exact.outer([row[i] for row in down],
                                                                    up[i]), c))
             for i in range(m)]
    current = _residues(s)
    modular = current is not None and all(step is not None for step in steps)
    best = (d + 1, 0)
    pattern = 0
    for t in range(2 ** m):  # Gray code: one rank-one update mod p per pattern
        if t:
            j = (t & -t).bit_length() - 1
            pattern ^= 1 << j
            if modular:
                current = current + steps[j] if pattern >> j & 1 else current - steps[j]
        full = modular and current.rank() == d
        rank = d if full else exact.rank(pattern_matrix(s, up, down, c, pattern))
        best = min(best, (rank, pattern))
    return best


def _rank(matrix: Rows) -> int:
    """Exact rank; full rank modulo the prime already proves it (a non-zero minor mod p)."""
    residue = _residues(matrix)
    if residue is not None and residue.rank() == len(matrix):
        return len(matrix)
    return exact.rank(matrix)


def least_product(s: Rows, ups: list[Rows], downs: list[Rows],
                  c: Fraction) -> tuple[int, tuple[int, ...]]:
    """(least rank of M_L(a_L)⋯M_1(a_1) over every tuple, the first tuple with it)."""
    d = len(s)
    matrices = [[pattern_matrix(s, up, down, c, a) for a in range(2 ** len(up))]
                for up, down in zip(ups, downs, strict=True)]
    best: tuple[int, tuple[int, ...]] = (d + 1, ())
    for tuple_ in itertools.product(*(range(len(ms)) for ms in matrices)):
        product = matrices[0][tuple_[0]]
        for k in range(1, len(tuple_)):
            product = exact.matmul(matrices[k][tuple_[k]], product)
        best = min(best, (_rank(product), tuple_))
    return best
