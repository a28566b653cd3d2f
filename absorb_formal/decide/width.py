"""Absorbability at width m′ and the minimal width, for O(a)+N depth-1 blocks (docs/rules.md §4).

A plain block equals B iff it has B's keys with B's coefficients and B's linear part Λ. A
key carried by one neuron adds `±ρ v ū^T` to the linear part (sign s_ℓ); by two neurons of
opposite orientation, any `c ū^T` (a *double*); absent keys come in *spare pairs*, each adding
any rank-one matrix. So B is absorbable at width m′ iff for some signs s, doubles Δ and k:

    p + |Δ| + 2k ≤ m′   and   rank(M_s Q_Δ) ≤ k,   M_s = Λ − ρ Σ_{ℓ single} s_ℓ v_ℓ ū_ℓ^T,

with Q_Δ a basis of the orthogonal complement of span{ū_ℓ : ℓ ∈ Δ} (rank(M Π_Δ) = rank(M Q_Δ)).
The search goes by increasing cost `p + |Δ| + 2k`; each (Δ, k) is one exact sub-problem:
k = 0 is a matrix subset-sum (`subset.py`), k ≥ 1 enumerates the signs.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

from ..certify import widths as cert
from ..checker.kernel.contract import MAX_ENUMERATION
from ..model import linalg
from ..model.blocks import Layer, Matrix
from . import progress, subset
from .canonical import CanonicalForm, form_of_layer, normalise

MAX_SIGN_ENUMERATION = 12  # k ≥ 1 sub-problems enumerate 2^singles sign vectors, always
# and up to MAX_ENUMERATION (the checker's cap, the contract's) when the matrices are small
MAX_SIGN_WORK = 2**14 * 27   # 2^n·d·b·min(d, b): d = 3 up to 14 signs (checker re-walk 2.7 s)
MAX_SUBPROBLEMS = 4000      # (Δ, k) pairs examined before the search gives up


@dataclass(frozen=True)
class Choice:
    """Signs of the single keys (key index → ±1), doubles Δ and spare pairs k."""

    signs: tuple[tuple[int, int], ...]
    delta: tuple[int, ...]
    k: int
    cost: int

    def as_json(self) -> dict[str, Any]:
        return {"negated_keys": [i + 1 for i, s in self.signs if s < 0],
                "doubles": [i + 1 for i in self.delta], "spare_pairs": self.k,
                "neurons": self.cost}


@dataclass
class Search:
    """The outcome of the search up to some width."""

    choice: Choice | None = None
    refuted: list[dict[str, Any]] = field(default_factory=list)
    incomplete: str = ""  # why some sub-problem was not decided ("" = none)
    lower: int = 0  # every cost below this is refuted
    upper: int = 0  # a choice of this cost is feasible


def complement(cf: CanonicalForm, delta: tuple[int, ...]) -> list[linalg.Vec]:
    """A basis of the vectors orthogonal to every ū_ℓ, ℓ ∈ Δ."""
    rows = [cf.keys[i][0] for i in delta]
    return linalg.nullspace(rows, cf.dim)


def m_matrix(cf: CanonicalForm, signs: dict[int, int]) -> linalg.Rows:
    """M_s = Λ − ρ Σ_{ℓ single} s_ℓ v_ℓ ū_ℓ^T."""
    if not signs:
        return cf.lam
    picked = list(signs)
    total = linalg.sum_of_outers([cf.keys[i][1] for i in picked],
                                 [cf.keys[i][0] for i in picked],
                                 [-cf.ridge.rho * signs[i] for i in picked])
    return linalg.add(cf.lam, total)


def times(m: linalg.Rows, basis: list[linalg.Vec]) -> linalg.Rows:
    """M Q, with the basis vectors as the columns of Q."""
    return tuple(tuple(linalg.dot(row, q) for q in basis) for row in m)


def feasible(cf: CanonicalForm, delta: tuple[int, ...], k: int
             ) -> tuple[str, Choice | None, dict[str, Any], str]:
    """Decide ∃ s: rank(M_s Q_Δ) ≤ k. Returns (status, choice, refutation, reason)."""
    singles = [i for i in range(cf.p) if i not in delta]
    basis = complement(cf, delta)
    cost = cf.p + len(delta) + 2 * k
    plus = {i: 1 for i in singles}
    if min(cf.dim, len(basis)) <= k:
        return "found", Choice(tuple(plus.items()), delta, k, cost), {}, ""
    if k == 0:
        # M_s Q = 0 with s_ℓ = 1 − 2[ℓ ∈ J]: Σ_{ℓ∈J} 2ρ v_ℓ ū_ℓ^T Q = −M_+ Q.
        # (c v ūᵀ) Q = c v (Qᵀū)ᵀ: d products per term instead of d³ (d = 16, m = 128: 4.6 s
        # of 8.5 s went to the full products; benchmarks/RESULTS.md, profiling).
        projected = (linalg.matmul([cf.keys[i][0] for i in singles], linalg.transpose(basis))
                     if delta else [cf.keys[i][0] for i in singles])  # Δ = ∅: Q = I
        terms = [linalg.outer(cf.keys[i][1], row, 2 * cf.ridge.rho)
                 for i, row in zip(singles, projected, strict=True)]
        target = times(m_matrix(cf, plus), basis)
        target = tuple(tuple(-x for x in row) for row in target)
        # the block's own orientation, as a reference for the dense regime's LLL search
        own = (tuple(j for j, i in enumerate(singles) if cf.signs[i] < 0)
               if cf.signs is not None else None)
        answer = subset.solve(terms, target, reference=own)
        if answer.status == "found":
            assert answer.subset is not None
            negated = {singles[j] for j in answer.subset}
            signs = tuple((i, -1 if i in negated else 1) for i in singles)
            return "found", Choice(signs, delta, 0, cost), {}, ""
        # The terms are W_ℓ Q for the singles, in this order, against −M_+ Q.
        refutation = cert.with_complement(answer.certificate, basis)
        return answer.status, None, refutation, answer.reason
    if not enumerable(len(singles), cf.dim, len(basis)):
        return "unknown", None, {}, (f"{len(singles)} single keys: too many sign vectors to "
                                     f"enumerate for rank <= {k}")
    trial = low_rank_signs(cf, singles, basis, k)
    if trial is not None:
        return "found", Choice(tuple(trial.items()), delta, k, cost), {}, ""
    return "none", None, cert.sign_enumeration(basis, len(singles), k), ""


def enumerable(n: int, d: int, b: int) -> bool:
    """Whether 2^n sign vectors of d×b matrices are few enough to walk (and re-walk in the
    checker, whose cap is 16 signs): up to 12 signs always, more while 2^n·d·b·min(d, b)
    stays under MAX_SIGN_WORK (d = b = 3: 14 signs, d = b = 2: 15)."""
    if n <= MAX_SIGN_ENUMERATION:
        return True
    return n <= MAX_ENUMERATION and 2**n * d * b * min(d, b) <= MAX_SIGN_WORK


def stall(cf: CanonicalForm) -> int | None:
    """The cost at which `search` must stop incomplete, or None: its first k ≥ 1 sub-problem
    (Δ = ∅, k = 1, examined first at cost p + 2) walks the 2^p sign vectors of d×d matrices,
    which `enumerable` refuses for many keys (always beyond 16; from 13 on unless d is small:
    a generic relu block of width 64 stalls at 66)."""
    if cf.p == 0 or cf.dim <= 1 or enumerable(cf.p, cf.dim, cf.dim):
        return None
    return cf.p + 2


def low_rank_signs(cf: CanonicalForm, singles: list[int], basis: list[linalg.Vec],
                   k: int) -> dict[int, int] | None:
    """Signs s with rank(M_s Q) ≤ k, or None: a Gray-code walk over the 2^n sign vectors, one
    exact rank-one update of M_s Q per step (flipping s_ℓ from + to − adds 2ρ v_ℓ (Qᵀū_ℓ)ᵀ)."""
    signs = {i: 1 for i in singles}
    current = linalg.to_flint(times(m_matrix(cf, signs), basis), len(basis))
    steps = [linalg.to_flint(linalg.outer(cf.keys[i][1],
                                          [linalg.dot(cf.keys[i][0], q) for q in basis],
                                          2 * cf.ridge.rho), len(basis)) for i in singles]
    for t in range(1, 2 ** len(singles) + 1):
        if current.rank() <= k:
            return dict(signs)
        if t == 2 ** len(singles):
            return None
        j = (t & -t).bit_length() - 1  # the bit that changes between Gray codes t−1 and t
        i = singles[j]
        current = current + steps[j] if signs[i] > 0 else current - steps[j]
        signs[i] = -signs[i]
    return None


def upper_bound(cf: CanonicalForm, layer: Layer | None = None) -> Choice:
    """A cheap feasible choice: all signs +, no doubles; doubles on independent keys; or,
    given the block's own layer, its neurons' orientations (cost <= m + 2 rank S)."""
    plus_all = {i: 1 for i in range(cf.p)}
    k = linalg.rank(cf.lam if not cf.keys else m_matrix(cf, plus_all))
    best = Choice(tuple(plus_all.items()), (), k, cf.p + 2 * k)
    if layer is not None:
        own = own_choice(cf, layer)
        if own.cost < best.cost:
            best = own
    independent: list[int] = []
    for i in range(cf.p):
        if linalg.rank([cf.keys[j][0] for j in [*independent, i]]) > len(independent):
            independent.append(i)
    if independent:
        delta = tuple(independent)
        signs = {i: 1 for i in range(cf.p) if i not in delta}
        basis = complement(cf, delta)
        kd = linalg.rank(times(m_matrix(cf, signs), basis)) if basis else 0
        other = Choice(tuple(signs.items()), delta, kd, cf.p + len(delta) + 2 * kd)
        if other.cost < best.cost:
            best = other
    return best


def own_choice(cf: CanonicalForm, layer: Layer) -> Choice:
    """The block's own neurons, read as a choice (docs/rules.md §4, "at most m + 2·rank(S)"): a key
    whose neurons all face one way is a single with that sign, a key with both orientations a
    double. Then M_s Π_Δ = (S + Σ_{keys that cancel} a Σ α_i d_i ū^T) Π_Δ: rank ≤ rank S plus
    the cancelled keys, each of which used ≥ 2 of the m neurons, as does each double."""
    index = cf.index()
    faces: dict[int, set[int]] = {}
    for i, u in enumerate(layer.up.rows):
        if any(u) and any(layer.down.column(i)):
            key, alpha = normalise(u, cf.ridge.family)
            beta = layer.up_bias[i] / alpha if layer.up_bias is not None else Fraction(0)
            if (key, beta) in index:
                faces.setdefault(index[key, beta], set()).add(1 if alpha > 0 else -1)
    delta = tuple(i for i in range(cf.p) if len(faces[i]) == 2)
    signs = {i: next(iter(faces[i])) for i in range(cf.p) if i not in delta}
    basis = complement(cf, delta)
    k = linalg.rank(times(m_matrix(cf, signs), basis)) if basis else 0
    return Choice(tuple(signs.items()), delta, k, cf.p + len(delta) + 2 * k)


def search(cf: CanonicalForm, limit: int, layer: Layer | None = None) -> Search:
    """The cheapest feasible choice of cost ≤ limit, with a refutation of every cheaper
    (Δ, k); stops early (incomplete) when a sub-problem is undecided or too many remain.
    `layer`: the block's own, for a tighter upper bound (fewer sub-problems)."""
    bound = upper_bound(cf, layer)
    out = Search(lower=cf.p, upper=bound.cost)
    shown = progress.bar("width search", " case")
    try:
        return _walk(cf, limit, bound, out, shown)
    finally:
        if shown is not None:
            shown.close()


def _walk(cf: CanonicalForm, limit: int, bound: Choice, out: Search, shown: Any) -> Search:
    examined = 0
    for cost in range(cf.p, min(limit, bound.cost) + 1):
        if shown is not None:
            shown.set_description_str(f"width search, width {cost}")
        out.lower = cost
        extra = cost - cf.p
        if cost == bound.cost and not out.incomplete:
            out.choice = bound
            return out
        for j in range(extra % 2, min(extra, cf.p) + 1, 2):
            k = (extra - j) // 2
            for delta in itertools.combinations(range(cf.p), j):
                examined += 1
                if examined > MAX_SUBPROBLEMS:
                    out.incomplete = (f"more than {MAX_SUBPROBLEMS} (doubles, spare pairs) "
                                      "sub-problems")
                    return out
                status, choice, refutation, reason = feasible(cf, delta, k)
                if shown is not None:
                    shown.update()
                if status == "found":
                    if not out.incomplete:
                        out.choice = choice
                    return out
                if status == "unknown":
                    out.incomplete = reason
                    return out
                out.refuted.append({"doubles": [i + 1 for i in delta], "spare_pairs": k,
                                    "refutation": refutation})
    if bound.cost <= limit and not out.incomplete:
        out.choice = bound
    else:
        out.lower = min(limit, bound.cost) + 1
    return out


def _gram_solve(basis: list[linalg.Vec], target: linalg.Vec) -> linalg.Vec:
    """c with Σ c_i basis_i = the orthogonal projection of target onto span(basis)."""
    gram = [[linalg.dot(a, b) for b in basis] for a in basis]
    rhs = [[linalg.dot(a, target)] for a in basis]
    solution = linalg.to_flint(gram).solve(linalg.to_flint(rhs))
    return tuple(row[0] for row in linalg.from_flint(solution))


def build(cf: CanonicalForm, choice: Choice, width: int) -> Layer:
    """Exact plain weights (skip none) realising `choice`, zero-padded to `width` neurons."""
    a, rho_unit = cf.ridge.a, cf.ridge.b if cf.ridge.b is not None else Fraction(1)
    signs = dict(choice.signs)
    # (u, d, β): with biases (§8.1) a key's neuron takes the key's β̄ with its own sign;
    # spare pairs take β = 0, and c′ matches the constant γ at the end.
    neurons: list[tuple[linalg.Vec, linalg.Vec, Fraction]] = []
    for i, s in signs.items():  # singles: u = s ū, b·|s|·d = v
        u, v = cf.keys[i]
        neurons.append((tuple(s * x for x in u), tuple(x / rho_unit for x in v),
                        s * cf.offset(i)))
    m = m_matrix(cf, signs)
    independent: list[int] = []
    for i in choice.delta:
        if linalg.rank([cf.keys[j][0] for j in [*independent, i]]) > len(independent):
            independent.append(i)
    dirs = [cf.keys[i][0] for i in independent]
    coeff = [_gram_solve(dirs, row) for row in m] if dirs else []
    residual = m
    for col, i in enumerate(independent):  # C ū^T: the linear part the doubles carry
        c = tuple(coeff[r][col] for r in range(cf.dim))
        residual = linalg.add(residual, linalg.outer(c, cf.keys[i][0]), Fraction(-1))
    for i in choice.delta:  # doubles: ū and −ū with d1 + d2 = v/β, a(d1 − d2) = c
        u, v = cf.keys[i]
        c = (tuple(coeff[r][independent.index(i)] for r in range(cf.dim))
             if i in independent else tuple(Fraction(0) for _ in range(cf.dim)))
        d1 = tuple((x / rho_unit + y / a) / 2 for x, y in zip(v, c, strict=True))
        d2 = tuple((x / rho_unit - y / a) / 2 for x, y in zip(v, c, strict=True))
        beta = cf.offset(i)
        neurons += [(u, d1, beta), (tuple(-x for x in u), d2, -beta)]
    for c, y in linalg.rank_factor(residual):  # spare pairs: ±y with ±c/(2a)
        half = tuple(x / (2 * a) for x in c)
        neurons += [(y, half, Fraction(0)),
                    (tuple(-x for x in y), tuple(-x for x in half), Fraction(0))]
    assert len(neurons) <= width, "witness larger than the width it was built for"
    zero = tuple(Fraction(0) for _ in range(cf.dim))
    # A neuron with a zero output column computes nothing: store it as zero, so that no
    # certificate field is left that the checker could not tie to the function.
    neurons = [(u, v, b) if any(v) else (zero, zero, Fraction(0)) for u, v, b in neurons]
    neurons += [(zero, zero, Fraction(0))] * (width - len(neurons))
    layer = _layer(cf, neurons)
    again = form_of_layer(cf.ridge, cf.dim, linalg.zeros(cf.dim, cf.dim), layer,
                          scalar=cf.scalar, symbolic=bool(cf.constants))
    if not again.equal(cf):  # never state a witness that is not one
        raise AssertionError("internal error: constructed witness has another canonical form")
    return layer


def _layer(cf: CanonicalForm, neurons: list[tuple[linalg.Vec, linalg.Vec, Fraction]]) -> Layer:
    """The plain layer of these neurons; biased forms (§8.1) get up_bias = the β's and
    down_bias c′ = γ − (the constant the neurons make) + Σ_β v_β σ(β) for the form's
    constant neurons with an irrational σ(β), exactly (`symbolic`: c′ holds silu(1) as such),
    so that the constants agree and no neuron is spent on a constant."""
    up = Matrix([u for u, _, _ in neurons])
    down = Matrix(linalg.transpose([d for _, d, _ in neurons]))
    if cf.gamma is None:
        return Layer(up, down)
    betas = tuple(b for _, _, b in neurons)
    unshifted = Layer(up, down, up_bias=betas, down_bias=(Fraction(0),) * cf.dim)
    made = form_of_layer(cf.ridge, cf.dim, linalg.zeros(cf.dim, cf.dim), unshifted)
    assert made.gamma is not None
    shift = tuple(g - h for g, h in zip(cf.constant(), made.gamma, strict=True))
    return Layer(up, down, up_bias=betas, down_bias=shift)


def key_count_refutation(cf: CanonicalForm, width: int) -> dict[str, Any]:
    return cert.key_count(cf.p, width, cf.as_json())


def refutation(cf: CanonicalForm, width: int, found: Search) -> dict[str, Any]:
    """Certificate that no plain block of width ≤ `width` equals B."""
    if width < max(cf.p, 1):
        return key_count_refutation(cf, width)
    return cert.width_search(width, cf.as_json(), found.refuted)


def witness_certificate(cf: CanonicalForm, choice: Choice, layer: Layer,
                        width: int) -> dict[str, Any]:
    return cert.canonical_forms_equal(layer, width)  # the checker recomputes both forms

