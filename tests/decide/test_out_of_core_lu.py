"""The exact modular LU out of core (decide/outofcore.py): the matrix in a memory-mapped
file, panels that fit a memory budget; the same determinant as FLINT and the in-memory LU,
and the same functional up to a non-zero factor."""

from __future__ import annotations

import tracemalloc
from collections import namedtuple

import flint
import numpy as np
import pytest

from absorb_formal.checker.kernel import modlu
from absorb_formal.decide import outofcore

P = modlu.primes(1)[0]


def rows_of(matrix: np.ndarray):
    return lambda start, stop: matrix[start:stop].astype(np.float64)


def flint_det(matrix: np.ndarray) -> int:
    return int(flint.nmod_mat(matrix.tolist(), P).det())


def budget(n: int, width: int) -> int:
    """The memory that gives panels of `width` columns."""
    return 5 * 8 * n * width


def random_matrix(rng: np.random.Generator, n: int) -> np.ndarray:
    return rng.integers(0, P, size=(n, n), dtype=np.int64)


def needs_row_exchanges(rng: np.random.Generator, n: int) -> np.ndarray:
    """Random rows in a shuffled order with zeros placed so that the leading minors vanish:
    an LU without row exchanges would stop at once."""
    matrix = np.triu(rng.integers(1, P, size=(n, n), dtype=np.int64))
    return matrix[rng.permutation(n)]


@pytest.mark.parametrize("n,width", [(1, 16), (17, 16), (100, 16), (257, 32), (300, 64)])
def test_the_determinant_is_flints(n, width):
    rng = np.random.default_rng(n)
    for matrix in (random_matrix(rng, n), needs_row_exchanges(rng, n)):
        expected = flint_det(matrix)
        assert outofcore.determinant(rows_of(matrix), n, P, budget(n, width)) == expected
        assert modlu.det_mod(matrix, P) == expected


@pytest.mark.parametrize("n,width", [(2, 16), (65, 16), (200, 32)])
def test_the_functional_vanishes_on_every_column_but_the_last(n, width):
    rng = np.random.default_rng(1000 + n)
    for matrix in (random_matrix(rng, n), needs_row_exchanges(rng, n)):
        y, c = outofcore.functional(rows_of(matrix), n, P, budget(n, width))
        products = (np.array(y, dtype=object) @ matrix.astype(object)) % P
        assert c != 0 and list(products) == [0] * (n - 1) + [c]
        y_memory, c_memory = modlu.functional_floats(matrix.astype(np.float64), P)
        # the same vector up to a non-zero factor: y = t·y_memory for t = c / c_memory
        t = c * pow(c_memory, -1, P) % P
        assert [v * t % P for v in y_memory] == y


def test_a_singular_matrix_has_no_functional_and_determinant_zero():
    rng = np.random.default_rng(7)
    matrix = random_matrix(rng, 90)
    matrix[:, 40] = (3 * matrix[:, 2] + matrix[:, 70]) % P
    assert outofcore.functional(rows_of(matrix), 90, P, budget(90, 16)) is None
    assert outofcore.determinant(rows_of(matrix), 90, P, budget(90, 16)) == 0 == flint_det(matrix)


def test_the_whole_matrix_is_never_in_memory():
    n, width = 768, 32
    matrix = random_matrix(np.random.default_rng(3), n)
    whole = 8 * n * n
    tracemalloc.start()
    try:
        tracemalloc.reset_peak()
        det = outofcore.determinant(lambda a, b: matrix[a:b].astype(np.float64), n, P,
                                    budget(n, width))
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert det == flint_det(matrix)
    assert peak < whole / 3, (peak, whole)  # panels of 32 of 768 columns, not the matrix


def test_a_budget_below_one_panel_is_refused_with_the_figures():
    with pytest.raises(outofcore.DoesNotFit, match="of memory, and"):
        outofcore.functional(rows_of(np.eye(1000, dtype=np.int64)), 1000, P, 100_000)


def test_a_disk_too_small_is_refused_before_any_work(monkeypatch):
    usage = namedtuple("usage", "total used free")
    monkeypatch.setattr(outofcore.shutil, "disk_usage", lambda folder: usage(1, 1, 1000))
    called = []

    def rows(start, stop):
        called.append(start)
        return np.zeros((stop - start, 50))

    with pytest.raises(outofcore.DoesNotFit, match="of disk in"):
        outofcore.functional(rows, 50, P, budget(50, 16))
    assert called == []


def test_rows_that_are_not_residues_are_refused():
    bad = np.full((20, 20), float(P))
    with pytest.raises(ValueError, match="magnitude below"):
        outofcore.determinant(lambda a, b: bad[a:b], 20, P, budget(20, 16))


def test_memory_given_on_the_command_line_reaches_the_lu_and_the_processes_it_starts(
        monkeypatch, cli):
    from absorb_formal.model import memory

    monkeypatch.delenv(memory.ENV, raising=False)
    try:
        memory.set_limit(12_345_678)
        assert memory.limit() == 12_345_678
        memory._LIMIT.clear()  # a child process: only the environment is inherited
        assert memory.limit() == 12_345_678
    finally:
        memory.set_limit(None)
    assert memory.ENV not in __import__("os").environ
    run = cli("--memory", "4XB", "specs/examples")
    assert run.code == 2 and "is not a size" in run.err
