"""The spare-pair witness of large blocks (docs/rules.md §4, §8.1: min width ≤ m + 2·rank S),
checked without the block's weights.

The witness is the block's own neurons (same up, biases, down; down bias unchanged) plus, for
each rank-one term p_k q_kᵀ of S, the pair p_k/(2a)·(σ(q_k·x) − σ(−q_k·x)). With the lemma
O(a), σ(z) − σ(−z) = 2az (re-proved from σ's formula by `lemmas`, through the caller's
family), the pairs add Σ_k p_k (q_k·x) = S x when the terms sum to S:
- S = cI (c ≠ 0): the listed columns are every column, p_k = c e_k, q_k = e_k;
- a matrix S: columns C and rows R with S[R,C] invertible and S = S[:,C]·S[R,C]⁻¹·S[R,:]
  (a skeleton: p_k = S[:,C_k], q_k = row k of S[R,C]⁻¹·S[R,:]), checked exactly with
  python-flint's fmpq_mat.
So the plain block equals B, and its width is m + 2·#columns.

Biased gated blocks (docs/rules.md §8, linear neurons): a neuron with gate row 0 and gate bias γ
computes σ(γ)(u·x + β) (a bias-free block: γ = β = 0, so only σ(0) ≠ 0, as for glu); with
σ(γ) ≠ 0, one such neuron per rank-one term, up row q_k and down p_k/σ(γ), adds Σ_k p_k q_k·x.
Width m + #columns. σ(γ) is re-derived from σ's formula with sympy: a rational, or else the
atom σ(γ) (swiglu, geglu: silu(1), gelu(1); `symbolic`), and σ(γ) ≠ 0 is proved by an arb
enclosure of the formula at γ that excludes 0.

relu² and square with biases (docs/rules.md §8): with the lemma σ(z) + σ(−z) = v z² (re-proved by
`lemmas`, v ≠ 0), four neurons per rank-one term, p_k/(4v)·(σ(ℓ+1) + σ(−ℓ−1) − σ(ℓ−1) −
σ(−ℓ+1)) with ℓ = q_k·x, add p_k·v((ℓ+1)² − (ℓ−1)²)/(4v) = p_k ℓ. Width m + 4·#columns.

σ a polynomial of degree 2 with biases (docs/rules.md §8, square pairs): the identity
σ(z + t) − σ(t − z) = k·z (re-derived here by expanding σ's formula with sympy, k ≠ 0) makes
p_k/k·(σ(q_k·x + t) − σ(−q_k·x + t)) = p_k (q_k·x): two neurons per rank-one term, width
m + 2·#columns; t is 1, or −1 when t = 1 gives k = 0 (one value, so the field is checked).
"""

from __future__ import annotations

from fractions import Fraction
from typing import Any

from ..kernel import symbolic
from ..kernel.contract import Check, Invalid, require
from ..kernel.linalg import q, skip_rows, whole
from ..lemmas import values


def check(block: dict[str, Any], width: int, cert: dict[str, Any],
          family: tuple[str, Fraction, Fraction | None]) -> None:
    require(cert["check"] == Check.SPARE_PAIRS, "not the spare-pair construction")
    require(block["depth"] == 1 and not block["activation"]["gated"], "depth-1 ungated only")
    kind, a, _ = family
    require(kind in ("relu", "analytic") and a != 0, "spare pairs need O(a) with a != 0")
    require(q(cert["a"]) == a, f"the stored a is not the re-proved a = {a}")
    columns = _factorisation(block, cert)
    m = int(block["width"])
    size = whole(cert["width"])
    require(size == m + 2 * len(columns), "the width is not m + 2·#columns")
    require(size <= width, f"the witness has width {size} > {width}")


def check_linear(block: dict[str, Any], width: int, cert: dict[str, Any]) -> None:
    """The linear-neuron witness of a biased gated block."""
    import sympy as sp

    from ..lemmas.proofs import Z, formula

    require(cert["check"] == Check.LINEAR_NEURONS, "not the linear-neuron construction")
    require(block["depth"] == 1 and block["activation"]["gated"],
            "linear neurons need a depth-1 gated block")
    gamma, stored = q(cert["gamma"]), symbolic.parse(cert["sigma_gamma"])
    require(bool(block.get("bias")) or gamma == 0,
            "a bias-free block has no gate bias: gamma must be 0")
    at = sp.simplify(formula(block["activation"]).subs(Z, sp.Rational(gamma.numerator,
                                                                      gamma.denominator)))
    if at.is_Rational:  # σ(γ) rational: the stored value is it
        value = Fraction(int(at.p), int(at.q))
        want = symbolic.rational(value)
    else:  # σ irrational at γ (swiglu, geglu: silu(1), gelu(1)): the atom σ(γ) itself
        want = values.atom(block["activation"]["kind"], gamma)
    require(stored == want, f"σ({gamma}) is not {cert['sigma_gamma']}")
    require(values.sign(want) not in (0, None), f"σ({gamma}) != 0 is not proved")
    columns = _factorisation(block, cert)
    size = whole(cert["width"])
    require(size == int(block["width"]) + len(columns), "the width is not m + #columns")
    require(size <= width, f"the witness has width {size} > {width}")


def check_square(block: dict[str, Any], width: int, cert: dict[str, Any]) -> None:
    """The square-quadruple witness of a biased relu² or square block."""
    from ..lemmas.relied import holds

    require(cert["check"] == Check.SQUARE_QUADRUPLES, "not the square-quadruple construction")
    require(block["depth"] == 1 and not block["activation"]["gated"] and bool(block.get("bias")),
            "square quadruples need a depth-1 ungated block with biases (offsets ±1)")
    v = q(cert["v"])
    require(v != 0 and holds(block["activation"], "Sq", v), f"σ(z) + σ(−z) = {v} z² fails")
    columns = _factorisation(block, cert)
    size = whole(cert["width"])
    require(size == int(block["width"]) + 4 * len(columns), "the width is not m + 4·#columns")
    require(size <= width, f"the witness has width {size} > {width}")


def check_square_pairs(block: dict[str, Any], width: int, cert: dict[str, Any]) -> None:
    """The square-pair witness of a biased block whose σ is a polynomial of degree 2."""
    import sympy as sp

    from ..lemmas.proofs import Z, formula

    require(cert["check"] == Check.SQUARE_PAIRS, "not the square-pair construction")
    require(block["depth"] == 1 and not block["activation"]["gated"] and bool(block.get("bias")),
            "square pairs need a depth-1 ungated block with biases (offset t)")
    sigma = formula(block["activation"])

    def slope(t: int) -> sp.Expr | None:
        """k with σ(z + t) − σ(t − z) = k·z identically, or None."""
        diff = sp.expand(sigma.subs(Z, Z + t) - sigma.subs(Z, t - Z))
        k = sp.simplify(diff / Z)
        return k if k.is_Rational and sp.expand(diff - k * Z) == 0 else None

    first = slope(1)
    t = 1 if first is not None and first != 0 else -1
    k = first if t == 1 else slope(-1)
    if k is None or k == 0:
        raise Invalid("σ(z + t) − σ(t − z) is not k·z with k != 0")
    require(q(cert["t"]) == t and q(cert["k"]) == Fraction(int(k.p), int(k.q)),
            f"the stored t, k are not {t}, {k}")
    columns = _factorisation(block, cert)
    size = whole(cert["width"])
    require(size == int(block["width"]) + 2 * len(columns), "the width is not m + 2·#columns")
    require(size <= width, f"the witness has width {size} > {width}")


def _factorisation(block: dict[str, Any], cert: dict[str, Any]) -> list[int]:
    """The listed columns, after checking that the rank-one terms they name sum to S."""
    d = int(block["dim"])
    columns = [whole(k) for k in cert["columns"]]
    require(all(0 <= k < d for k in columns) and columns == sorted(set(columns)),
            "the columns are not increasing indices below d")
    skip = block["skip"]
    if "matrix" in skip or "source" in skip:  # source: skip_rows says it is not read here
        _skeleton([list(row) for row in skip_rows(block)], columns,
                  [whole(r) for r in cert["rows"]])
    else:
        require("rows" not in cert, "S = cI needs no rows")
        require((q(skip["scale"]) == 0 and not columns) or columns == list(range(d)),
                "S = cI with c != 0 needs every column, S = 0 none")
    return columns


def _skeleton(s: list[list[Fraction]], columns: list[int], rows: list[int]) -> None:
    """S[R,C] invertible and S = S[:,C]·S[R,C]⁻¹·S[R,:], in exact rational arithmetic."""
    import flint

    d = len(s)
    require(len(rows) == len(columns) and rows == sorted(set(rows))
            and all(0 <= r < d for r in rows), "the rows are not |C| increasing indices below d")

    def mat(entries: list[list[Fraction]], n: int, k: int) -> Any:
        return flint.fmpq_mat(n, k, [flint.fmpq(v.numerator, v.denominator)
                                     for row in entries for v in row])

    def pivots(matrix: Any) -> list[int]:
        reduced, rank = matrix.rref()
        return [next(j for j in range(matrix.ncols()) if reduced[i, j] != 0)
                for i in range(rank)]

    # The first independent columns and rows (pivots of S and of Sᵀ), as the prover picks
    # them: any other valid skeleton would be accepted too, and a field that two values
    # satisfy is not checked.
    require(columns == pivots(mat(s, d, d)), "the columns are not the pivot columns of S")
    require(rows == pivots(mat([list(c) for c in zip(*s, strict=True)], d, d)),
            "the rows are not the pivot rows of S")
    r = len(rows)
    if r == 0:
        require(all(v == 0 for row in s for v in row), "S is not 0 but no term is listed")
        return
    core = mat([[s[i][j] for j in columns] for i in rows], r, r)
    require(core.det() != 0, "S[rows, columns] is singular")
    left = mat([[s[i][j] for j in columns] for i in range(d)], d, r)
    right = mat([s[i] for i in rows], r, d)
    require(left * core.inv() * right == mat(s, d, d), "S != S[:,C] S[R,C]^-1 S[R,:]")
