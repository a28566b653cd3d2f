"""Exact rational arithmetic for the checker: parsing, elimination, and block evaluation."""

from __future__ import annotations

import numbers
import re
import sys
from collections.abc import Callable, Sequence
from fractions import Fraction
from typing import Any

Vec = tuple[Fraction, ...]
Rows = tuple[Vec, ...]
ZERO, ONE = Fraction(0), Fraction(1)


def q(text: Any) -> Fraction:
    if not isinstance(text, str | int):
        raise ValueError(f"expected a rational as a string, got {text!r}")
    try:
        return Fraction(text)
    except ValueError:
        limit = sys.get_int_max_str_digits()  # Python converts no longer integer
        if isinstance(text, str) and 0 < limit < len(text):
            raise ValueError(f"a rational of more than {limit} digits") from None
        raise


def vec(items: Sequence[Any]) -> Vec:
    return tuple(q(x) for x in items)


def mat(rows: Sequence[Sequence[Any]]) -> Rows:
    return tuple(vec(r) for r in rows)


def transpose(rows: Sequence[Sequence[Fraction]]) -> Rows:
    return tuple(zip(*rows, strict=True)) if rows else ()


def dot(x: Sequence[Fraction], y: Sequence[Fraction]) -> Fraction:
    if len(x) != len(y):
        raise ValueError("length mismatch")
    return sum((a * b for a, b in zip(x, y, strict=True)), ZERO)


def matmul(a: Sequence[Sequence[Fraction]], b: Sequence[Sequence[Fraction]]) -> Rows:
    cols = transpose(b)
    return tuple(tuple(dot(row, col) for col in cols) for row in a)


def matvec(a: Sequence[Sequence[Fraction]], x: Sequence[Fraction]) -> Vec:
    return tuple(dot(row, x) for row in a)


def combine(a: Rows, b: Rows, scale: Fraction) -> Rows:
    """a + scale·b."""
    return tuple(tuple(x + scale * y for x, y in zip(ra, rb, strict=True))
                 for ra, rb in zip(a, b, strict=True))


def outer(u: Sequence[Fraction], v: Sequence[Fraction]) -> Rows:
    return tuple(tuple(x * y for y in v) for x in u)


def eye(n: int, c: Fraction = ONE) -> Rows:
    return tuple(tuple(c if i == j else ZERO for j in range(n)) for i in range(n))


def zeros(n: int, m: int) -> Rows:
    return tuple((ZERO,) * m for _ in range(n))


def rref(rows: Sequence[Sequence[Fraction]]) -> tuple[list[list[Fraction]], list[int]]:
    """Gauss–Jordan elimination over Q: reduced rows and pivot columns."""
    work = [list(r) for r in rows]
    pivots: list[int] = []
    ncols = len(work[0]) if work else 0
    r = 0
    for c in range(ncols):
        pivot = next((i for i in range(r, len(work)) if work[i][c] != 0), None)
        if pivot is None:
            continue
        work[r], work[pivot] = work[pivot], work[r]
        lead = work[r][c]
        work[r] = [x / lead for x in work[r]]
        for i in range(len(work)):
            if i != r and work[i][c] != 0:
                factor = work[i][c]
                work[i] = [x - factor * y for x, y in zip(work[i], work[r], strict=True)]
        pivots.append(c)
        r += 1
        if r == len(work):
            break
    return work, pivots


def nullspace(rows: Sequence[Sequence[Fraction]], ncols: int) -> list[Vec]:
    """The basis of {x : A x = 0} read off the RREF, one vector per free column. The RREF is
    unique, so this basis is too: a stored basis is compared with it exactly."""
    if not rows:
        return [tuple(ONE if i == j else ZERO for j in range(ncols)) for i in range(ncols)]
    reduced, pivots = rref(rows)
    basis = []
    for f in (j for j in range(ncols) if j not in pivots):
        x = [ZERO] * ncols
        x[f] = ONE
        for i, p in enumerate(pivots):
            x[p] = -reduced[i][f]
        basis.append(tuple(x))
    return basis


def rank(rows: Sequence[Sequence[Fraction]]) -> int:
    if not rows or not rows[0]:
        return 0
    return len(rref(rows)[1])


def is_zero(rows: Sequence[Sequence[Fraction]]) -> bool:
    return all(x == 0 for r in rows for x in r)


# ---- blocks ------------------------------------------------------------------------------

RATIONAL_KINDS = {"relu", "leaky_relu", "relu_pow", "abs", "identity", "poly"}


def sigma(activation: dict[str, Any], z: Fraction) -> Fraction:
    kind = activation["kind"]
    if kind == "relu":
        return max(z, ZERO)
    if kind == "leaky_relu":
        return z if z >= 0 else q(activation["param"]) * z
    if kind == "relu_pow":
        return z ** int(activation["power"]) if z > 0 else ZERO
    if kind == "abs":
        return abs(z)
    if kind == "identity":
        return z
    if kind == "poly":
        return sum((q(c) * z**i for i, c in enumerate(activation["coeffs"])), ZERO)
    raise ValueError(f"{kind} has no exact values on Q")


def _skip(block: dict[str, Any]) -> dict[str, Any]:
    """The block's skip, `{"scale": c}` or `{"matrix": rows}`. A skip stored by its source
    (`{"source": ...}`, a large block's loaded skip) is read from its file by `absorb-prove
    check` (`reading.Reading.read_skips`) before anything here sees it."""
    skip = block["skip"]
    if isinstance(skip, dict) and "source" in skip:
        raise ValueError("the skip is stored by its source (a weight file): the checker reads "
                         "it from the file, which needs the spec (absorb-prove check)")
    return skip


def skip_rows(block: dict[str, Any]) -> Rows:
    skip = _skip(block)
    if "matrix" in skip:
        return mat(skip["matrix"])
    return eye(block["dim"], q(skip["scale"]))


def skip_entry(block: dict[str, Any]) -> Callable[[int, int], Fraction]:
    """S's entry at (r, c), without building the d×d rationals of S = cI (GPT-2: d² = 589,824)."""
    skip = _skip(block)
    if "matrix" in skip:
        rows = mat(skip["matrix"])
        return lambda r, c: rows[r][c]
    scale = q(skip["scale"])
    return lambda r, c: scale if r == c else ZERO


def evaluate(block: dict[str, Any], layers: Sequence[dict[str, Any]], x: Sequence[Fraction],
             skip: Rows | None = None) -> Vec:
    """The stack at x; `skip` overrides the block's S (None → the block's own)."""
    s = skip_rows(block) if skip is None else skip
    act = block["activation"]
    value = tuple(x)
    for layer in layers:
        pre = _plus(matvec(mat(layer["up"]), value), layer.get("up_bias"))
        if act["gated"]:
            gate = _plus(matvec(mat(layer["gate"]), value), layer.get("gate_bias"))
            hidden = tuple(sigma(act, g) * h for g, h in zip(gate, pre, strict=True))
        else:
            hidden = tuple(sigma(act, h) for h in pre)
        out = _plus(matvec(mat(layer["down"]), hidden), layer.get("down_bias"))
        value = tuple(a + b for a, b in zip(matvec(s, value), out, strict=True))
    return value


def _plus(values: Vec, bias: Sequence[Any] | None) -> Vec:
    """values + bias (docs/rules.md §8); a layer without the field has no bias."""
    if bias is None:
        return values
    return tuple(v + b for v, b in zip(values, vec(bias), strict=True))


def skip_power_column(block: dict[str, Any], power: int, index: int) -> Vec:
    """S^power e_index, without building c·I for scalar skips."""
    skip = _skip(block)
    d = block["dim"]
    if not 0 <= index < d:
        raise ValueError("direction index out of range")
    if "scale" in skip:
        c = q(skip["scale"]) ** power
        return tuple(c if i == index else ZERO for i in range(d))
    s = mat(skip["matrix"])
    column = tuple(ONE if i == index else ZERO for i in range(d))
    for _ in range(power):
        column = matvec(s, column)
    return column


def skip_rank(block: dict[str, Any]) -> int:
    skip = _skip(block)
    if "scale" in skip:
        return block["dim"] if q(skip["scale"]) != 0 else 0
    return rank(mat(skip["matrix"]))


def skip_is_zero(block: dict[str, Any]) -> bool:
    skip = _skip(block)
    return q(skip["scale"]) == 0 if "scale" in skip else is_zero(mat(skip["matrix"]))


_INTEGER_TEXT = re.compile(r"-?(0|[1-9][0-9]*)")


def whole(value: Any, what: str = "an integer field") -> int:
    """An integer field of a certificate, exactly: a JSON integer (a bool, 1.5 or 2.0 is not
    one) or its canonical decimal text. Anything else is malformed (ValueError) — int() would
    read 1.5 as 1, True as 1, and accept a value the certificate never meant."""
    if isinstance(value, numbers.Integral) and not isinstance(value, bool):
        return int(value)
    if isinstance(value, str) and _INTEGER_TEXT.fullmatch(value):
        return int(value)
    raise ValueError(f"{what} is not an integer: {value!r}")
