"""The dense subset regime: many more neurons than the d² equations of
Σ_{i∈J} d_i u_iᵀ = −S/(2a). LLL (`decide/lattice.py`) finds planted subsets that CP-SAT's
search misses; what it finds is re-checked exactly and certified as a witness like any J; it
never refutes."""

from __future__ import annotations

import json
import random
from fractions import Fraction

import pytest

from absorb_formal.checker import verify
from absorb_formal.decide import budget, lattice, subset
from absorb_formal.decide.concrete import at_width
from absorb_formal.model import activations as acts
from absorb_formal.model import linalg
from absorb_formal.model.blocks import Block, Layer, Matrix, Skip
from absorb_formal.model.position import Pos


def _planted(d: int, m: int, k: int, seed: int) -> tuple[list[linalg.Rows], linalg.Rows,
                                                          list[int], list, list]:
    rng = random.Random(f"dense-test/{d}/{m}/{k}/{seed}")
    entry = lambda: Fraction(rng.randint(-9, 9), rng.randint(1, 4))  # noqa: E731
    up = [[entry() for _ in range(d)] for _ in range(m)]
    down = [[entry() for _ in range(m)] for _ in range(d)]
    terms = [linalg.outer([row[i] for row in down], up[i]) for i in range(m)]
    chosen = sorted(rng.sample(range(m), k))
    target = linalg.zeros(d, d)
    for i in chosen:
        target = linalg.add(target, terms[i], Fraction(1))
    return terms, target, chosen, up, down


def _rows(terms: list[linalg.Rows], target: linalg.Rows) -> list[list[int]]:
    return subset.integer_rows([linalg.vec(t) for t in terms], linalg.vec(target))


def _sums_to(terms: list[linalg.Rows], target: linalg.Rows, chosen: tuple[int, ...]) -> bool:
    total = linalg.zeros(len(target), len(target[0]))
    for i in chosen:
        total = linalg.add(total, terms[i], Fraction(1))
    return total == target


@pytest.mark.parametrize("seed", [0, 1])
def test_lll_finds_a_planted_subset_of_a_dense_system(seed):
    terms, target, _, _, _ = _planted(4, 64, 7, seed)
    with budget.limit(120):
        found = lattice.find(_rows(terms, target), len(terms), 120_000)
    assert found is not None and _sums_to(terms, target, found)


def test_lll_is_not_tried_beyond_its_size_limit():
    terms, target, _, _, _ = _planted(2, lattice.MAX_TERMS + 1, 3, 0)
    assert lattice.find(_rows(terms, target), len(terms), 120_000) is None


def test_a_wrong_lattice_candidate_is_an_internal_error(monkeypatch):
    terms, target, chosen, _, _ = _planted(4, 64, 7, 0)
    monkeypatch.setattr(subset, "CPSAT_NEAREST_WORK", 0.0)  # CP-SAT gives up at once
    monkeypatch.setattr(subset, "CPSAT_FIRST_WORK", 0.0)
    monkeypatch.setattr(lattice, "find", lambda *a: tuple(chosen[1:]))
    with budget.limit(120), pytest.raises(subset.WrongSubset):
        subset.solve(terms, target)


def test_the_dense_path_certifies_what_lll_finds(monkeypatch):
    # CP-SAT's first tries leave the system open (no work allowed), LLL finds J, and the
    # certificate is the usual witness, which the checker verifies from the block alone.
    monkeypatch.setattr(subset, "CPSAT_NEAREST_WORK", 0.0)
    monkeypatch.setattr(subset, "CPSAT_FIRST_WORK", 0.0)
    calls = []
    real = lattice.find
    monkeypatch.setattr(lattice, "find", lambda *a: calls.append(1) or real(*a))
    d, m = 4, 64
    terms, target, _, up, down = _planted(d, m, 7, 0)
    skip = tuple(tuple(-x for x in row) for row in target)  # S = −2a·T with a = 1/2
    block = Block("B", acts.simple("relu"), d, m, 1, Skip(d, matrix=Matrix(skip)),
                  (Layer(Matrix(up), Matrix(down)),), Pos(1, 1))
    with budget.limit(120):
        decision = at_width(block, m)
    assert calls and decision.absorbable is True
    doc = _document(block, decision.certificate)
    assert verify(doc).status == "valid"
    broken = json.loads(json.dumps(doc))
    broken["certificate"]["layers"][0]["up"][0][0] = "12345"
    assert verify(broken).status == "invalid"


def _document(block: Block, certificate: dict) -> dict:
    from absorb_formal.certify import bodies as cert
    layer = block.layers[0]
    return {
        "format": "absorb_formal certificate 2", "spec": {"path": "x.mlp", "sha256": "0"},
        "files": {}, "line": 1, "statement": "B is absorbable",
        "claim": {"kind": "absorbable", "block": "B", "other": None, "modality": "",
                  "width": block.width, "min_width": None},
        "blocks": {"B": {"name": "B", "activation": {"name": "relu", "kind": "relu",
                                                      "gated": False, "param": None,
                                                      "power": None, "coeffs": []},
                         "dim": block.dim, "width": block.width, "depth": 1,
                         "skip": {"matrix": cert.matrix(block.skip.rows())},
                         "layers": [{"up": cert.matrix(layer.up.rows),
                                     "down": cert.matrix(layer.down.rows)}]}},
        "outcome": "proved", "verdict": "", "method": "", "reason": "",
        "certificate": json.loads(json.dumps(certificate))}


def test_a_target_off_the_integer_lattice_gets_an_exact_lattice_functional():
    terms, target, _, _, _ = _planted(4, 40, 6, 0)
    columns = [linalg.vec(t) for t in terms]
    assert lattice.obstruction(columns, linalg.vec(target)) is None  # a subset reaches it
    moved = linalg.add(target, linalg.zeros(4, 4), Fraction(1))
    moved = (tuple(x + (Fraction(1, 10**6) if c == 1 else 0) for c, x in enumerate(moved[0])),
             *moved[1:])
    y = lattice.obstruction(columns, linalg.vec(moved))
    assert y is not None
    assert all(linalg.dot(y, c).denominator == 1 for c in columns)
    assert linalg.dot(y, linalg.vec(moved)).denominator != 1
    answer = subset.solve(terms, moved)
    assert answer.status == "none" and answer.certificate["method"] == "lattice functional"


def test_the_checker_refuses_a_functional_that_is_not_integral_on_the_terms():
    from absorb_formal.checker.kernel.contract import Invalid
    from absorb_formal.checker.rules.subset import refutation as subset_refutation
    terms, target, _, _, _ = _planted(4, 40, 6, 0)
    moved = (tuple(x + (Fraction(1, 10**6) if c == 1 else 0) for c, x in enumerate(target[0])),
             *target[1:])
    ref = subset.solve(terms, moved).certificate
    subset_refutation(terms, moved, ref)  # valid as stored
    halved = json.loads(json.dumps(ref))
    halved["Y"] = [[str(Fraction(v) / 2) for v in row] for row in ref["Y"]]
    halved["Y_dot_target"] = str(Fraction(ref["Y_dot_target"]) / 2)
    with pytest.raises(Invalid, match="not an integer|is an integer"):
        subset_refutation(terms, moved, halved)


def test_the_hermite_form_sees_what_no_single_equation_shows():
    # (1, 1) and (1, -1) span the even sublattice of Z²: each equation alone is solvable in
    # integers, but (1, 0) is no integer combination of them.
    columns = [(Fraction(1), Fraction(1)), (Fraction(1), Fraction(-1))]
    goal = (Fraction(1), Fraction(0))
    assert lattice.obstruction(columns, goal, hermite=False) is None
    y = lattice.obstruction(columns, goal)
    assert y is not None
    assert all(linalg.dot(y, c).denominator == 1 for c in columns)
    assert linalg.dot(y, goal).denominator != 1
    assert lattice.obstruction(columns, (Fraction(2), Fraction(0))) is None  # (1,1) + (1,-1)


def test_lll_looks_for_j_near_a_reference(monkeypatch):
    # Integer weights ±1..9 make the lattice dense: with half the neurons' keys oriented
    # against them, the J of the width search is not sparse, but it differs from the block's
    # own orientation R by the planted flips only; the search looks for J = R Δ F, F short.
    rng = random.Random("reference")
    d, m, k = 4, 64, 6
    entry = lambda: Fraction(rng.choice([-1, 1]) * rng.randint(1, 9))  # noqa: E731
    terms = [linalg.outer([entry() for _ in range(d)], [entry() for _ in range(d)])
             for _ in range(m)]
    reference = tuple(sorted(rng.sample(range(m), m // 2)))
    flips = set(rng.sample(range(m), k))
    chosen = sorted(set(reference) ^ flips)
    target = linalg.zeros(d, d)
    for i in chosen:
        target = linalg.add(target, terms[i], Fraction(1))
    monkeypatch.setattr(lattice, "MAX_TRIES", 1)  # one reduction: the reference's lattice
    with budget.limit(120):
        found = lattice.find(_rows(terms, target), m, 120_000, reference)
    assert found is not None and _sums_to(terms, target, found)


def test_a_wrong_lattice_functional_is_an_internal_error(monkeypatch):
    terms, target, _, _, _ = _planted(4, 40, 6, 0)  # reachable: no functional separates it
    monkeypatch.setattr(lattice, "obstruction",
                        lambda columns, goal, hermite=True: tuple(Fraction(1, 3) for _ in goal))
    with budget.limit(120), pytest.raises(subset.WrongSubset):
        subset.solve(terms, target)


def test_the_nearest_try_finds_a_planted_subset_where_presolve_hides_it(monkeypatch):
    # relu d = 8, m = 256, integer weights ±1..9, a skip planted from 11 neurons: CP-SAT with
    # presolve and LLL found nothing in 60 s (benchmarks/RESULTS.md §8). Minimising the
    # distance to the block's own orientation without presolve finds J at once; nothing else
    # is allowed to run, and the witness is checked from the block alone.
    monkeypatch.setattr(subset, "CPSAT_FIRST_WORK", 0.0)
    monkeypatch.setattr(lattice, "find", lambda *a: pytest.fail("LLL should not be needed"))
    rng = random.Random("nearest")
    d, m = 8, 256
    entry = lambda: Fraction(rng.choice([-1, 1]) * rng.randint(1, 9))  # noqa: E731
    up = [[entry() for _ in range(d)] for _ in range(m)]
    down = [[entry() for _ in range(m)] for _ in range(d)]
    skip = linalg.zeros(d, d)
    for i in rng.sample(range(m), 11):
        skip = linalg.add(skip, linalg.outer([row[i] for row in down], up[i]), Fraction(-1))
    block = Block("B", acts.simple("relu"), d, m, 1, Skip(d, matrix=Matrix(skip)),
                  (Layer(Matrix(up), Matrix(down)),), Pos(1, 1))
    with budget.limit(120):
        decision = at_width(block, m)
    assert decision.absorbable is True
    assert verify(_document(block, decision.certificate)).status == "valid"


def test_the_nearest_try_refutes_only_an_infeasible_system():
    # 30 terms equal to 1 never sum to 31, although 31 is an integer combination of them:
    # the nearest try's CP-SAT proves it (its objective changes which J, never whether).
    from absorb_formal.checker.rules.subset import refutation as subset_refutation
    terms = [((Fraction(1),),)] * 30
    with budget.limit(120):
        answer = subset.solve(terms, ((Fraction(31),),))
        assert subset.solve(terms, ((Fraction(30),),)).subset == tuple(range(30))
    assert answer.status == "none" and answer.certificate["method"] == "cp-sat"
    subset_refutation(terms, ((Fraction(31),),), answer.certificate)


@pytest.mark.parametrize("scale", [lattice.KERNEL_SCALE, 2])
def test_the_kernel_lattice_is_all_of_the_kernel(monkeypatch, scale):
    # Every basis vector (x, s) satisfies A x = s t, there are m + 1 − rank of them, and the
    # planted solution (1_J, 1) is an integer combination of them — also when the scale is
    # far too small at first (2: the LLL-reduced vectors keep non-zero equation parts, and
    # the scale must grow until the count is right).
    from flint import fmpq_mat, fmpz_mat
    monkeypatch.setattr(lattice, "KERNEL_SCALE", scale)
    terms, target, chosen, _, _ = _planted(3, 30, 5, 0)
    rows = _rows(terms, target)
    m = len(terms)
    basis = lattice._kernel(rows, m, deadline=float("inf"))
    assert basis is not None
    assert all(sum(r[j] * v[j] for j in range(m)) == v[m] * r[m] for v in basis for r in rows)
    assert len(basis) == m + 1 - fmpz_mat([r[:m] + [-r[m]] for r in rows]).rank()
    planted = [1 if j in chosen else 0 for j in range(m)] + [1]
    gram = fmpz_mat(basis) * fmpz_mat(basis).transpose()
    rhs = fmpz_mat(basis) * fmpz_mat([[x] for x in planted])
    coefficients = fmpq_mat(gram).solve(fmpq_mat(rhs))
    assert all(coefficients[i, 0].q == 1 for i in range(len(basis)))
    combined = fmpz_mat([[int(coefficients[i, 0].p) for i in range(len(basis))]]) \
        * fmpz_mat(basis)
    assert [int(x) for x in combined.entries()] == planted
