"""The exact modular LU of a matrix larger than the memory it may use: out of core.

The modular functional (`decide/modular.py`, docs/rules.md §4) needs one LU mod q of the
minor of order m + 1. In memory that is 8·(m+1)² bytes: order 20,481 (Pythia-12B) is 3.4 GB,
order 57,345 (BLOOM-176B) 26 GB. Here the matrix lives in a memory-mapped file and only
panels that fit the budget are in memory: a blocked, right-looking LU with row exchanges.
For each panel of w columns (k0 ≤ j < k1):
1. the panel A[k0:, k0:k1], already brought up to date by the panels before, is read and
   factored with row exchanges by the kernel's rank-revealing LU (`modlu.factor`): its
   multipliers (L) below the diagonal, U on and above, its row order;
2. that row order is applied to the columns on the left (the L of earlier panels), a tile of
   columns at a time;
3. each tile of columns on the right is read, its rows put in that order, its top rows
   solved with the panel's unit-lower triangle (U12 = L11⁻¹·A12) and the rest updated
   (A22 −= L21·U12), and written back.
Every arithmetic step is one of the kernel's (`checker/kernel/modlu.py`): products cut into
pieces of inner dimension at most inner_limit(p), each exact in float64 by the bound
k·(p−1)² + p < 2^53 that the kernel raises on, and reduced to magnitude ≤ p − 1. Nothing is
rounded; moving rows and writing tiles copy integers. The result is the in-memory LU's in
all but the row order chosen (a panel pivots over all rows below it, the in-memory LU first
without exchanges): the functional is the same vector up to a non-zero factor, and the
determinant the same.

Memory: a panel of (n − k0)·w and a tile of (n − k0)·w float64 entries, their reordered
copies, and the panel's triangle; disk: the 8·n² bytes of the matrix, in a temporary folder.
Tested against the in-memory LU and FLINT (tests/decide/test_out_of_core_lu.py).
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path

import numpy as np

from ..checker.kernel import modlu
from ..model.memory import shown
from ..numeric import accelerated

Rows = Callable[[int, int], np.ndarray]  # rows [start, stop) of the matrix, float64 residues
MIN_WIDTH = 16  # the narrowest panel worth the passes over the matrix it costs


class DoesNotFit(Exception):
    """Neither the memory budget nor the disk can hold what the LU needs; the message gives
    the figures."""


def panel_width(n: int, memory: int) -> int:
    """The widest panel (a multiple of 16, at most n) whose working set fits `memory` bytes:
    about five arrays of n × w float64 entries (panel, tile, their reordered copies, the
    kernel's scratch)."""
    width = memory // (5 * 8 * max(n, 1))
    width = min(n, width - width % 16)
    return width


def disk_needed(n: int) -> int:
    return 8 * n * n


def check_fits(n: int, memory: int, folder: Path) -> int:
    """The panel width for an LU of order n under `memory` bytes, with its file in `folder`;
    DoesNotFit (before any work) when the panel or the file cannot fit."""
    width, narrowest = panel_width(n, memory), min(MIN_WIDTH, n)
    if width < narrowest:
        raise DoesNotFit(f"an LU of order {n} out of core needs panels of at least "
                         f"{narrowest} columns, {shown(5 * 8 * n * narrowest)} of memory, "
                         f"and {shown(memory)} are allowed")
    free = shutil.disk_usage(folder).free
    if disk_needed(n) > free:
        raise DoesNotFit(f"an LU of order {n} out of core needs {shown(disk_needed(n))} of "
                         f"disk in {folder} and {shown(free)} are free")
    return width


def _factor_in_file(a: np.ndarray, p: int, width: int) -> np.ndarray | None:
    """a[order] = L·U in place (a: the memory-mapped n × n matrix of residues): the row order,
    or None when a is singular mod p. Tiles of `width` columns."""
    xp = accelerated.Threaded
    n = a.shape[0]
    order = np.arange(n)
    for k0 in range(0, n, width):
        k1 = min(k0 + width, n)
        panel = np.array(a[k0:, k0:k1])
        try:
            pivots, rows = modlu.factor(panel, p, xp, True)
        except modlu.Singular:
            return None
        if len(pivots) < k1 - k0:
            return None
        a[k0:, k0:k1] = panel
        order[k0:] = order[k0:][rows]
        for c0 in range(0, k0, width):  # the earlier panels' L, in the new row order
            c1 = min(c0 + width, k0)
            a[k0:, c0:c1] = np.array(a[k0:, c0:c1])[rows]
        lower, below = panel[:k1 - k0], panel[k1 - k0:]
        for c0 in range(k1, n, width):  # U12 = L11⁻¹·A12, A22 −= L21·U12
            c1 = min(c0 + width, n)
            tile = np.array(a[k0:, c0:c1])[rows]
            modlu.solve_lower(lower, tile[:k1 - k0], p, xp)
            modlu.sub_product(tile[k1 - k0:], below, tile[:k1 - k0], p, xp)
            a[k0:, c0:c1] = tile
        a.flush()
    return order


def _in_file(rows: Rows, n: int, p: int, memory: int, folder: Path | None,
             finish: Callable[[np.ndarray, np.ndarray], object]) -> object:
    """The matrix written to a temporary memory-mapped file row band by row band, factored,
    and `finish(a, order)` (or None when singular mod p); the file is removed after."""
    if not modlu.usable(p):
        raise ValueError(f"{p} is not a prime the exact LU works with")
    where = Path(folder) if folder is not None else Path(tempfile.gettempdir())
    width = check_fits(n, memory, where)
    scratch = Path(tempfile.mkdtemp(prefix="absorb-lu-", dir=where))
    try:
        a = np.lib.format.open_memmap(scratch / "matrix.npy", mode="w+", dtype=np.float64,
                                      shape=(n, n))
        band = max(1, (5 * width) // 2)
        for start in range(0, n, band):
            stop = min(start + band, n)
            values = rows(start, stop)
            if values.shape != (stop - start, n) or not modlu.Numpy.integers_below(values, p):
                raise ValueError(f"rows {start}..{stop} are not {stop - start} rows of "
                                 f"{n} integers of magnitude below {p}")
            a[start:stop] = values
        with accelerated.blas_threads():
            order = _factor_in_file(a, p, width)
            return None if order is None else finish(a, order)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def functional(rows: Rows, n: int, p: int, memory: int, folder: Path | None = None
               ) -> tuple[list[int], int] | None:
    """(y, c) with yᵀ·M ≡ (0, …, 0, c) mod p and c ≠ 0, as `modlu.functional_floats`, for the
    n × n matrix M given by `rows`, under `memory` bytes; None when M is singular mod p."""
    def finish(a: np.ndarray, order: np.ndarray) -> tuple[list[int], int]:
        v = modlu.last_row_of_inverse(a, p, accelerated.Threaded).tolist()
        y = [0] * n
        for position, row in enumerate(order.tolist()):
            y[row] = int(v[position])
        return y, int(a[n - 1, n - 1]) % p

    return _in_file(rows, n, p, memory, folder, finish)  # type: ignore[return-value]


def determinant(rows: Rows, n: int, p: int, memory: int, folder: Path | None = None) -> int:
    """det M mod p for the n × n matrix given by `rows`, under `memory` bytes."""
    def finish(a: np.ndarray, order: np.ndarray) -> int:
        det = modlu.parity(order.tolist()) % p
        for start in range(0, n, 4096):
            stop = min(start + 4096, n)
            for value in np.diagonal(a[start:stop, start:stop]).tolist():
                det = det * int(value) % p
        return det

    found = _in_file(rows, n, p, memory, folder, finish)
    return 0 if found is None else int(found)  # type: ignore[arg-type]
