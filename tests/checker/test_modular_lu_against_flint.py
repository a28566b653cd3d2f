"""The exact LU mod p on float64 BLAS (checker/kernel/modlu.py, and the systems built on it,
checker/kernel/systems.py) against FLINT's nmod_mat, the reference: random and adversarial
matrices (every entry p − 1, equal rows, rank-deficient blocks, sizes that are not multiples
of the base block, primes whose exactness limit forces the inner dimension to be cut, zero
pivots that send the LU without row exchanges to the pivoting one at the first or a later
block), determinants, ranks and the functionals y with yᵀ·M = (0, …, 0, c ≠ 0). The prover's
thread-controlled and CUDA paths (numeric/accelerated.py) give the same residues as the plain
numpy path the checker runs."""

from __future__ import annotations

import zlib

import flint
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from absorb_formal.checker.kernel import modlu, systems
from absorb_formal.numeric import accelerated

P21 = modlu.primes(2)  # the minor's primes
P_SMALL_LIMIT = 21_219_997  # (p−1)² ≈ 2^48.7: products are cut every inner_limit(p) = 20
SIZES = [1, 2, 3, 15, 16, 17, 31, 33, 64, 100, 129]


def flint_det(a: np.ndarray, p: int) -> int:
    return int(flint.nmod_mat(a.tolist(), p).det()) if a.size else 1


def flint_rank(a: np.ndarray, p: int) -> int:
    return flint.nmod_mat(a.tolist(), p).rank() if a.size else 0


def test_the_primes_are_the_largest_below_2_21_and_usable():
    from absorb_formal.decide.modular import MINOR_PRIMES

    assert P21 == [2_097_143, 2_097_133] == MINOR_PRIMES
    assert modlu.inner_limit(P21[0]) == 2048
    assert all(modlu.usable(p) for p in P21)
    assert modlu.is_prime(P_SMALL_LIMIT) and modlu.inner_limit(P_SMALL_LIMIT) == 20
    assert not modlu.usable(2**26 - 5)  # limit below one base block
    assert not modlu.usable(2_097_151)  # 2^21 − 1 = 7² · 127 · 337
    assert [p for p in range(60) if modlu.is_prime(p)] == [
        2, 3, 5, 7, 11, 13, 17, 19, 23, 29, 31, 37, 41, 43, 47, 53, 59]


def test_a_product_beyond_the_bound_is_refused():
    with pytest.raises(ArithmeticError):
        modlu.product_bound(2049, P21[0])
    modlu.product_bound(2048, P21[0])
    with pytest.raises(ValueError):
        modlu.det_mod(np.eye(3, dtype=np.int64), 2**26 - 5)
    p = P21[0]
    for bad in (np.full((3, 3), float(p)), np.full((3, 3), 0.5), np.full((3, 3), -float(p))):
        with pytest.raises(ValueError):
            modlu.det_floats(bad, p)
    assert modlu.det_floats(np.full((1, 1), float(1 - p)), p) == 1


def adversarial(n: int, p: int, kind: str, rng: np.random.Generator) -> np.ndarray:
    a = rng.integers(0, p, (n, n))
    if kind == "p-1":
        a[:] = p - 1
        a += np.eye(n, dtype=np.int64)  # p − 1 everywhere, p ≡ 0 on the diagonal
    elif kind == "top p-1":  # every entry p − 1 or p − 2: the largest products
        a = p - 1 - rng.integers(0, 2, (n, n))
    elif kind == "equal rows" and n > 2:
        a[n - 1] = a[n // 2]
    elif kind == "rank deficient":  # rank about n/2, pivots missing inside blocks
        r = max(1, n // 2)
        a = (rng.integers(0, p, (n, r)) @ rng.integers(0, 50, (r, n))) % p
    elif kind == "zero column":
        a[:, n // 2] = 0
    elif kind == "late pivots":  # the first rows are zero in their leading columns
        a[: n // 2, : n // 3] = 0
    elif kind == "negative":  # integers outside [0, p): reduced exactly first
        a = rng.integers(-10 * p, 10 * p, (n, n))
    return a


KINDS = ["random", "p-1", "top p-1", "equal rows", "rank deficient", "zero column",
         "late pivots", "negative"]


@pytest.mark.parametrize("p", [P21[0], P21[1], P_SMALL_LIMIT, 101, 17])
@pytest.mark.parametrize("kind", KINDS)
def test_determinant_and_rank_agree_with_flint(p, kind):
    rng = np.random.default_rng(zlib.crc32(f"{p} {kind}".encode()))
    for n in SIZES:
        if not modlu.usable(p):
            continue
        a = adversarial(n, p, kind, rng)
        assert modlu.det_mod(a, p) == flint_det(a % p, p), (n, kind)
        assert modlu.rank_mod(a, p) == flint_rank(a % p, p), (n, kind)


@pytest.mark.parametrize("shape", [(5, 40), (40, 5), (33, 70), (70, 33), (1, 9), (9, 1)])
def test_rank_of_rectangular_matrices(shape):
    rng = np.random.default_rng(7)
    p = P21[0]
    a = rng.integers(0, p, shape)
    assert modlu.rank_mod(a, p) == flint_rank(a, p)
    r = min(shape) // 2
    low = (rng.integers(0, p, (shape[0], r)) @ rng.integers(0, 9, (r, shape[1]))) % p
    assert modlu.rank_mod(low, p) == flint_rank(low, p)


def flint_pivots(a: np.ndarray, p: int) -> list[int]:
    """The pivot columns of FLINT's reduced row echelon form mod p."""
    if not a.size:
        return []
    reduced, rank = flint.nmod_mat(a.tolist(), p).rref()
    return [next(j for j in range(a.shape[1]) if int(reduced[i, j])) for i in range(rank)]


@pytest.mark.parametrize("shape", [(5, 40), (40, 5), (33, 70), (70, 33), (1, 9), (9, 1),
                                   (20, 200)])
@pytest.mark.parametrize("kind", ["random", "low rank", "repeated columns", "zero columns"])
def test_pivot_columns_agree_with_flint(shape, kind):
    """The first independent columns (doubles pick the first independent rows of U this way)."""
    rng = np.random.default_rng(zlib.crc32(f"{shape} {kind}".encode()))
    p = P21[0]
    a = rng.integers(0, p, shape)
    if kind == "low rank":
        r = max(1, min(shape) // 2)
        a = (rng.integers(0, p, (shape[0], r)) @ rng.integers(0, 9, (r, shape[1]))) % p
    elif kind == "repeated columns":
        a[:, 1::2] = a[:, ::2][:, : a[:, 1::2].shape[1]]
    elif kind == "zero columns":
        a[:, : shape[1] // 2] = 0
    assert modlu.pivot_columns(a, p) == flint_pivots(a % p, p)


def test_small_primes_make_singular_minors_common():
    """mod 17 about one random matrix in 17 is singular: both outcomes are exercised."""
    rng = np.random.default_rng(3)
    dets = []
    for _ in range(60):
        a = rng.integers(0, 17, (20, 20))
        dets.append(modlu.det_mod(a, 17))
        assert dets[-1] == flint_det(a, 17)
    assert 0 in dets and any(dets)


@settings(max_examples=60, deadline=None)
@given(st.integers(1, 40), st.sampled_from([P21[0], P_SMALL_LIMIT, 65_521]),
       st.integers(0, 2**32 - 1), st.integers(0, 3))
def test_random_determinants_agree_with_flint(n, p, seed, rank_cut):
    rng = np.random.default_rng(seed)
    a = rng.integers(0, p, (n, n))
    if rank_cut and n > rank_cut:
        a[-rank_cut:] = (rng.integers(0, 5, (rank_cut, n - rank_cut)) @ a[: n - rank_cut]) % p
    assert modlu.det_mod(a, p) == flint_det(a, p)
    assert modlu.rank_mod(a, p) == flint_rank(a, p)


def test_product_minor_is_the_grid_of_outer_products():
    rng = np.random.default_rng(1)
    p, k, m = P21[0], 4, 12
    left, right = rng.integers(0, p, (k, m)), rng.integers(0, p, (m, k))
    rows, cols = rng.integers(0, k, m + 1), rng.integers(0, k, m + 1)
    last = rng.integers(0, p, m + 1)
    got = systems.product_minor(left, right, rows, cols, last, p).astype(np.int64)
    want = np.array([[left[rows[t], i] * right[i, cols[t]] % p for i in range(m)]
                     + [last[t]] for t in range(m + 1)])
    assert np.array_equal(got, want)


def test_a_larger_determinant_crosses_the_recursion_levels():
    rng = np.random.default_rng(11)
    p = P21[0]
    a = rng.integers(0, p, (300, 300))
    assert modlu.det_mod(a, p) == flint_det(a, p)
    a[299] = (a[5] + 3 * a[200]) % p
    assert modlu.det_mod(a, p) == 0 and modlu.rank_mod(a, p) == 299


def check_functional(a: np.ndarray, p: int) -> None:
    """functional_floats against FLINT: None exactly when det ≡ 0, else yᵀ·a ≡ (0, …, 0, c)
    with c ≠ 0, checked in Python integers."""
    found = modlu.functional_floats((a % p).astype(np.float64), p)
    if flint_det(a % p, p) == 0:
        assert found is None
        return
    assert found is not None
    y, c = found
    assert len(y) == a.shape[0] and all(0 <= v < p for v in y) and 0 < c < p
    product = [sum(v * int(x) for v, x in zip(y, column, strict=True)) % p
               for column in (a % p).T.tolist()]
    assert product == [0] * (a.shape[0] - 1) + [c]


@pytest.mark.parametrize("p", [P21[0], P_SMALL_LIMIT, 101, 17])
@pytest.mark.parametrize("kind", KINDS)
def test_functionals_agree_with_flint(p, kind):
    rng = np.random.default_rng(zlib.crc32(f"functional {p} {kind}".encode()))
    for n in SIZES:
        check_functional(adversarial(n, p, kind, rng), p)


def late_zero_pivot(n: int, at: int, p: int, rng: np.random.Generator) -> np.ndarray:
    """Non-singular (almost surely) with a singular leading minor of order at + 1: row `at`
    agrees with a combination of the rows above it on its first at + 1 columns, so the LU
    without row exchanges meets a zero pivot in column `at`."""
    a = rng.integers(0, p, (n, n))
    mix = rng.integers(0, p, at)
    a[at, : at + 1] = (mix @ a[:at, : at + 1]) % p
    return a


@pytest.mark.parametrize("block", [4, 16, 128])
def test_a_zero_pivot_in_a_later_block_hands_over_to_the_pivoting_lu(block, monkeypatch):
    monkeypatch.setattr(modlu, "BLOCK", block)
    rng = np.random.default_rng(block)
    p = P21[0]
    for n, at in [(9, 0), (9, 5), (40, 4), (40, 17), (300, 130), (300, 255), (300, 256)]:
        a = late_zero_pivot(n, at, p, rng)
        work = (a % p).astype(np.float64)
        assert modlu._crout(work.copy(), p, modlu.Numpy) == at - at % min(block, n)
        assert modlu.det_mod(a, p) == flint_det(a, p), (n, at)
        check_functional(a, p)
        a[n - 1] = a[0]  # and singular: no functional
        assert modlu.det_mod(a, p) == 0
        check_functional(a, p)


@pytest.mark.parametrize("block", [3, 8, 128])
def test_every_block_size_gives_flints_determinant(block, monkeypatch):
    """Block columns of any width, sizes that are not multiples of it."""
    monkeypatch.setattr(modlu, "BLOCK", block)
    rng = np.random.default_rng(block + 1)
    for p in (P21[0], P_SMALL_LIMIT):
        for n in (1, 2, 7, 8, 9, 25, 130):
            a = rng.integers(0, p, (n, n))
            assert modlu.det_mod(a, p) == flint_det(a, p)
            check_functional(a, p)


@settings(max_examples=40, deadline=None)
@given(st.integers(1, 30), st.sampled_from([P21[0], P_SMALL_LIMIT, 65_521, 17]),
       st.integers(0, 2**32 - 1), st.integers(1, 9))
def test_random_functionals_agree_with_flint(n, p, seed, block):
    rng = np.random.default_rng(seed)
    a = rng.integers(0, p, (n, n))
    if n > 3 and seed % 3 == 0:
        a = late_zero_pivot(n, seed % (n - 1), p, rng)
    old = modlu.BLOCK
    modlu.BLOCK = block
    try:
        check_functional(a, p)
    finally:
        modlu.BLOCK = old


def test_functional_values_are_the_pairings_with_the_terms():
    """⟨Y, d_i u_iᵀ⟩ mod p for every i, against Python integers; inputs outside [0, p) and
    grids beyond the bound are refused."""
    rng = np.random.default_rng(2)
    p = P21[0]
    rows, cols, m = 5, 7, 30
    grid = rng.integers(0, p, (rows, cols))
    left, right = rng.integers(-p, p, (rows, m)), rng.integers(-p, p, (m, cols))
    got = systems.functional_values(grid.astype(np.float64), left, right, p).tolist()
    want = [sum(int(grid[a, b]) * int(left[a, i]) * int(right[i, b])
                for a in range(rows) for b in range(cols)) % p for i in range(m)]
    assert got == want
    with pytest.raises(ValueError):
        systems.functional_values(grid.astype(np.float64) + p, left, right, p)
    with pytest.raises(ArithmeticError):
        systems.functional_values(np.zeros((2049, 1)), np.zeros((2049, 1)), np.zeros((1, 1)), p)


def test_residues_beyond_the_product_bound_are_refused():
    """The block elimination's delayed reduction assumes every block fits the bound."""
    with pytest.raises(ArithmeticError):
        modlu._eliminate_block(np.zeros((2049, 2049)), P21[0], modlu.Numpy)


def test_the_gpu_path_agrees_where_a_gpu_exists():
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("no CUDA device")
    rng = np.random.default_rng(5)
    for p in (P21[0], P_SMALL_LIMIT):
        for n in (17, 300, 2100):
            a = rng.integers(0, p, (n, n))
            if n == 300:
                a[7] = a[9]
            work = (a % p).astype(np.float64)
            assert accelerated.det_floats_gpu(work.copy(), p) == modlu.det_floats(work.copy(), p)
            on_gpu = torch.from_numpy(work.copy()).to("cuda")
            assert modlu.functional_floats(on_gpu, p, accelerated.torch_backend()) == \
                modlu.functional_floats(work, p)


def test_the_blas_thread_count_is_restored_after_the_lu():
    """The prover's LU runs small (or, on a busy machine, all) products on one BLAS thread;
    the count numpy's OpenBLAS had is restored afterwards, whatever the LU chose, and the
    results are the plain path's."""
    blas = accelerated._blas()
    if blas.get is None:
        pytest.skip("numpy's BLAS exposes no thread count")
    before = blas.get()
    rng = np.random.default_rng(3)
    a = rng.integers(0, P21[0], (300, 300))
    assert accelerated.det_mod(a, P21[0]) == flint_det(a, P21[0]) == modlu.det_mod(a, P21[0])
    assert blas.get() == before
    tall = rng.integers(0, P21[0], (40, 300))
    assert accelerated.pivot_columns(tall, P21[0]) == modlu.pivot_columns(tall, P21[0])
    work = np.hstack([a, rng.integers(0, P21[0], (300, 1))]).astype(np.float64)
    assert accelerated.solve_floats(work.copy(), P21[0]) == modlu.solve_floats(work, P21[0])
    assert accelerated.det_auto(a.astype(np.float64), P21[0]) == flint_det(a, P21[0])
    assert blas.get() == before


@pytest.mark.parametrize("n", [1, 2, 15, 16, 17, 33, 100])
@pytest.mark.parametrize("kind", ["random", "extreme", "singular"])
def test_solve_agrees_with_flint(n, kind):
    """x with A x = b mod p, against FLINT's nmod_mat.solve; singular A gives None."""
    p = P21[0]
    rng = np.random.default_rng(zlib.crc32(f"solve{n}{kind}".encode()))
    a = rng.integers(0, p, (n, n))
    if kind == "extreme":
        a = np.where(rng.random((n, n)) < 0.7, p - 1, a)
        a[np.arange(n), np.arange(n)] = rng.integers(1, p, n)
    if kind == "singular" and n > 1:
        a[-1] = a[0]
    b = rng.integers(0, p, n)
    found = modlu.solve_mod(a, b, p)
    reference = flint.nmod_mat(a.tolist(), p)
    if reference.det() == 0:
        assert found is None
        return
    expected = reference.solve(flint.nmod_mat([[int(v)] for v in b], p))
    assert found == [int(expected[i, 0]) for i in range(n)]
    assert (a @ np.array(found) - b) % p == pytest.approx(np.zeros(n))  # A x ≡ b


@pytest.mark.parametrize("block", [4, 128])
def test_solve_crosses_blocks_and_zero_pivots(block, monkeypatch):
    """solve_floats runs the block LU (and its hand-over to row exchanges at a zero pivot in a
    later block): against FLINT."""
    monkeypatch.setattr(modlu, "BLOCK", block)
    rng = np.random.default_rng(block)
    p = P21[0]
    for n, at in [(40, 17), (300, 130), (300, 256)]:
        a = late_zero_pivot(n, at, p, rng)
        b = rng.integers(0, p, n)
        expected = flint.nmod_mat(a.tolist(), p).solve(flint.nmod_mat([[int(v)] for v in b], p))
        assert modlu.solve_mod(a, b, p) == [int(expected[i, 0]) for i in range(n)]


def test_the_projected_system_refuses_primes_whose_products_are_not_exact():
    with pytest.raises(ArithmeticError):
        systems.projected_system(np.ones((2, 3), dtype=np.int64), np.ones((3, 2), dtype=np.int64),
                               1, 0, 2**26 + 15)  # a prime above 2^26: p² ≥ 2^52


def _nmod(a: np.ndarray, p: int) -> flint.nmod_mat:
    return flint.nmod_mat([[int(v) for v in row] for row in np.asarray(a)], p)


def _entries(a: flint.nmod_mat) -> list[list[int]]:
    return [[int(a[i, j]) for j in range(a.ncols())] for i in range(a.nrows())]


@pytest.mark.parametrize("extreme", [False, True])
@pytest.mark.parametrize("kind", ["plain", "relu2", "gated"])
@pytest.mark.parametrize("matrix_target", [False, True])
def test_the_projected_systems_agree_with_flint(extreme, kind, matrix_target):
    """The float64 projected systems (`projected_system`, `projected_flip_system`) against
    FLINT's nmod_mat products of the same functionals, at d = 64, m = 96 and the largest
    solve prime, with random residues or residues all at p − 1 (the bounds' worst case), and
    negative and unreduced integer weights (reduced in int64 first)."""
    p, d, m = modlu.primes(1)[0], 64, 96
    rng = np.random.default_rng(7)

    def weights(*shape: int) -> np.ndarray:
        if extreme:
            return np.full(shape, p - 1, dtype=np.int64) + p * rng.integers(-3, 3, shape)
        return rng.integers(-5 * p, 5 * p, shape)

    down, up, gate = weights(d, m), weights(m, d), weights(m, d)
    lam, mu = weights(m), weights(m)
    target = weights(d, d) if matrix_target else -(p + 2)
    big_p, big_q, big_b = (_nmod(systems.random_residues(0, s, m, d, p).astype(np.int64), p)
                           for s in (0, 1, 2))
    t = _nmod(target % p if matrix_target else (target % p) * np.eye(d, dtype=np.int64), p)
    rhs = _entries(big_p * t * big_q.transpose())
    by_down = _entries(big_p * _nmod(down % p, p))
    if kind == "plain":
        work = systems.projected_system(down, up, target, 0, p)
        by_up = _entries(big_q * _nmod((up % p).T, p))
        want = [[by_down[j][i] * by_up[j][i] % p for i in range(m)] for j in range(m)]
    else:
        g, nu = (up, np.zeros(m, dtype=np.int64)) if kind == "relu2" else (gate, mu)
        work = systems.projected_flip_system(down, up, g, lam, nu, target, 0, p)
        lines = (lam % p)[:, None] * (up % p) + (nu % p)[:, None] * (g % p)
        b_up, b_gate = (_entries(big_b * _nmod((w % p).T, p)) for w in (up, g))
        q_lines = _entries(big_q * _nmod((lines % p).T, p))
        want = [[by_down[j][i] * (b_up[j][i] * b_gate[j][i] + q_lines[j][i]) % p
                 for i in range(m)] for j in range(m)]
    assert work.dtype == np.float64 and ((work >= 0) & (work < p)).all()
    assert [[int(v) for v in row[:m]] for row in work] == want
    assert [int(v) for v in work[:, m]] == [rhs[j][j] for j in range(m)]
