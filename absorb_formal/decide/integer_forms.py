"""`claim A equals B` at real size: §4 canonical forms (docs/rules.md §4, §8.1) in exact integers.

The forms are those of `canonical.py`, with the same identifications, computed without a
`Fraction` per weight so that two GPT-2-size blocks (d = 768, m = 3072) compare in seconds:

- every matrix is `ints · scale` with integer entries (int64 where a bound proves it fits,
  else Python ints) and one rational scale: a loaded float array is exactly an integer
  mantissa times a power of two per entry, so with the smallest exponent as scale every
  entry is an integer; a literal matrix takes the lcm of its denominators;
- a key row u_i = scale·r_i (r_i integer) is normalised to its primitive vector p_i
  (r_i divided by the gcd of its entries, signed so that its first non-zero entry is
  positive). Relu family: rows on one line have the same p_i, so p_i names the key ū
  (ū = p_i / lead) and α_i = lead(r_i)·scale; analytic family: the key is u_i signed, i.e.
  (p_i, gcd·scale). With biases the key also holds β̄ = β_i / α_i (relu) or ±β_i;
- v of a key is `v_scale · W` with W the integer sum of |lead(r_i)|·D_i (relu; v_scale =
  b·scale_U·scale_D) or of D_i (analytic; v_scale = scale_D); keys whose W is 0 vanish;
- Λ = S + a·D U from one exact integer product of the integer matrices (python-flint's
  fmpz_mat), as an integer matrix over one denominator;
- γ (biases) = c + a·Σ d_i β_i over key neurons + Σ d_i σ(β_i) over neurons with u_i = 0
  (σ(β) kept formally, keyed by β, when σ is not rational on Q), as in `canonical.py`.

Two forms are compared key by key (the keys are exact integers and rationals, hashed);
a difference is reported as one entry (of Λ, of some key's v, of γ) or one key that only
one side has, which the checker verifies on its own forms (docs/certificates.md,
"integer canonical forms").
"""

from __future__ import annotations

from dataclasses import dataclass, field
from fractions import Fraction
from math import lcm
from typing import Any

import numpy as np

from ..certify import bodies as cert
from ..certify import widths
from ..model import exactarray, symbolic
from ..model.blocks import Block, Matrix
from . import linear
from .canonical import Ridge, ridge
from .decision import BIASED

METHOD = "§4 canonical forms (exact integers)"
INT64_BITS = 62  # an int64 entry is used only where |x| < 2^62 is proved


@dataclass(frozen=True)
class Ints:
    """An exact rational array: `ints · scale`; ints int64 (|x| < 2^62 proved) or Python ints."""

    ints: np.ndarray
    scale: Fraction


def ints_of_matrix(matrix: Matrix) -> Ints:
    array = matrix.loaded
    if array is None:
        return ints_of_fractions(np.array(matrix.rows, dtype=object).reshape(matrix.shape))
    return ints_of_array(np.asarray(array))


def ints_of_fractions(values: np.ndarray) -> Ints:
    """Rationals (an object array of Fractions) over the lcm of their denominators."""
    flat = [Fraction(x) for x in values.ravel().tolist()]
    den = lcm(*(x.denominator for x in flat)) if flat else 1
    ints = np.empty(len(flat), dtype=object)
    ints[:] = [x.numerator * (den // x.denominator) for x in flat]
    return Ints(ints.reshape(values.shape), Fraction(1, den))


def ints_of_array(array: np.ndarray) -> Ints:
    """A loaded array (floats: dyadic rationals; integers) as integers times 2^e0, e0 the
    smallest exponent of a non-zero entry once each mantissa is made odd."""
    mantissas, exponents = exactarray.parts(array)
    if mantissas.dtype == object or (mantissas == np.iinfo(np.int64).min).any():
        return _ints_of_parts_slow(mantissas, exponents)
    nonzero = mantissas != 0
    if not nonzero.any():
        return Ints(np.zeros(array.shape, dtype=np.int64), Fraction(1))
    low = np.where(nonzero, mantissas & -mantissas, 1)  # the lowest set bit, a power of two
    zeros = _bit_length(low) - 1  # 2^k has bit length k + 1
    odd = mantissas >> zeros
    exps = exponents.astype(np.int64) + zeros
    e0 = int(exps[nonzero].min())
    shift = np.where(nonzero, exps - e0, 0)
    length = _bit_length(np.abs(odd))  # |odd| < 2^63: abs of an int64 other than its minimum
    if int((length + shift).max()) <= INT64_BITS:
        ints = odd << shift
    else:
        ints = odd.astype(object) << shift.astype(object)
    return Ints(ints, Fraction(2) ** e0)


def _bit_length(values: np.ndarray) -> np.ndarray:
    """The bit length of each non-negative int64, in integer arithmetic (six halvings)."""
    out = np.zeros(values.shape, dtype=np.int64)
    rest = values.astype(np.int64, copy=True)
    for step in (32, 16, 8, 4, 2, 1):
        big = rest >= (np.int64(1) << np.int64(step))
        out += np.where(big, step, 0)
        rest = np.where(big, rest >> np.int64(step), rest)
    return out + (rest > 0)


def _ints_of_parts_slow(mantissas: np.ndarray, exponents: np.ndarray) -> Ints:
    pairs = list(zip(mantissas.ravel().tolist(), exponents.ravel().tolist(), strict=True))
    live = [e for m, e in pairs if m != 0]
    e0 = min(live) if live else 0
    ints = np.empty(len(pairs), dtype=object)
    ints[:] = [int(m) << (int(e) - e0) if m else 0 for m, e in pairs]
    return Ints(ints.reshape(mantissas.shape), Fraction(2) ** e0)


def _vector(values: tuple[Fraction, ...] | None, n: int) -> list[Fraction]:
    return list(values) if values is not None else [Fraction(0)] * n


def _flint(ints: np.ndarray) -> Any:
    import flint

    rows, cols = ints.shape
    return flint.fmpz_mat(rows, cols, ints.ravel().tolist())  # Python ints, either dtype


@dataclass
class IntForm:
    """One block's form: Λ = lam / lam_den (an fmpz_mat), keys {key: (first neuron, W)} with
    v = v_scale·W, γ (biased) and the formal constants {β: Σ d} (σ(β) not rational)."""

    family: str  # "relu", "analytic" or "linear"
    ridge: Ridge | None
    lam: Any
    lam_den: int
    keys: dict[tuple[Any, ...], tuple[int, np.ndarray]]
    v_scale: Fraction
    gamma: list[Fraction] | None = None
    constants: dict[Fraction, list[Fraction]] = field(default_factory=dict)


def _key_bytes(row: np.ndarray) -> Any:
    """A canonical hashable name of a primitive integer row: its int64 bytes where every
    entry fits, else the tuple of Python ints (so equal rows always get equal names)."""
    if row.dtype != object:
        return row.astype(np.int64).tobytes()
    values = [int(x) for x in row.tolist()]
    if all(-(1 << 63) <= x < (1 << 63) for x in values):
        return np.array(values, dtype=np.int64).tobytes()
    return tuple(values)


def form(block: Block, biased: bool) -> tuple[IntForm | None, str]:
    """The integer form of a concrete depth-1 block, or (None, why not)."""
    if block.depth != 1 or block.layers is None:
        return None, ("canonical forms cover depth-1 blocks with O(a)+N or linear "
                      "activations only")
    a = linear.slope(block)
    found = ridge(block.activation) if a is None else None
    if a is None and found is None:
        return None, ("canonical forms cover depth-1 blocks with O(a)+N or linear "
                      "activations only")
    if a is not None and biased:
        return None, BIASED + ": §8.1 compares depth-1 O(a)+N blocks"
    slope = a if a is not None else found.a  # type: ignore[union-attr]
    layer = block.layers[0]
    up, down = ints_of_matrix(layer.up), ints_of_matrix(layer.down)
    width = block.width
    down_f = _flint(down.ints)
    lam, lam_den = _lam(block, slope, up, down, down_f)
    if found is None:
        return IntForm("linear", None, lam, lam_den, {}, Fraction(1)), ""
    live = (down.ints != 0).any(axis=0)
    has_u = (up.ints != 0).any(axis=1)
    key_rows = np.flatnonzero(live & has_u)
    rows = up.ints[key_rows]
    # |gcd|: numpy's reduce returns a single entry (d = 1) as it is, sign included
    g = np.abs(np.gcd.reduce(rows, axis=1)) if len(key_rows) else np.zeros(0, dtype=np.int64)
    lead_at = np.argmax(rows != 0, axis=1)
    lead = rows[np.arange(len(key_rows)), lead_at]
    sign = np.where(lead > 0, 1, -1)
    prim = rows // g[:, None] * sign[:, None]
    betas = _vector(layer.up_bias, width)
    names: list[tuple[Any, ...]] = []
    for n, i in enumerate(key_rows.tolist()):
        name: tuple[Any, ...] = (_key_bytes(prim[n]),)
        if found.family == "relu":
            alpha = int(lead[n]) * up.scale
        else:
            alpha = Fraction(int(sign[n]))
            name += (int(g[n]) * up.scale,)
        if biased:
            name += (betas[i] / alpha,)
        names.append(name)
    if found.family == "relu":
        weight = np.abs(lead).astype(object)
        v_scale = found.b * up.scale * down.scale  # type: ignore[operator]
    else:
        weight = np.ones(len(key_rows), dtype=object)
        v_scale = down.scale
    columns = down.ints[:, key_rows].astype(object) * weight[None, :]
    keys: dict[tuple[Any, ...], tuple[int, np.ndarray]] = {}
    for n, name in enumerate(names):
        if name in keys:
            first, total = keys[name]
            keys[name] = (first, total + columns[:, n])
        else:
            keys[name] = (int(key_rows[n]), columns[:, n])
    keys = {k: v for k, v in keys.items() if any(x != 0 for x in v[1].tolist())}
    out = IntForm(found.family, found, lam, lam_den, keys, v_scale)
    if biased:
        out.gamma, out.constants = _gamma(block, slope, down, down_f, key_rows, live, has_u,
                                          betas)
    return out, ""


def _lam(block: Block, a: Fraction, up: Ints, down: Ints, down_f: Any) -> tuple[Any, int]:
    """Λ = S + a·D U as (integer fmpz_mat X, denominator q > 0): Λ = X / q."""
    product = down_f * _flint(up.ints)
    c1 = a * down.scale * up.scale
    skip = block.skip
    if skip.matrix is not None:
        s = ints_of_matrix(skip.matrix)
        x = product * (c1.numerator * s.scale.denominator) \
            + _flint(s.ints) * (s.scale.numerator * c1.denominator)
        return x, c1.denominator * s.scale.denominator
    c = Fraction(skip.scale or 0)
    x = product * (c1.numerator * c.denominator)
    add = c.numerator * c1.denominator
    if add:
        for i in range(block.dim):
            x[i, i] += add
    return x, c1.denominator * c.denominator


def _gamma(block: Block, a: Fraction, down: Ints, down_f: Any, key_rows: np.ndarray,
           live: np.ndarray, has_u: np.ndarray, betas: list[Fraction]
           ) -> tuple[list[Fraction], dict[Fraction, list[Fraction]]]:
    """γ = c + a·Σ_{key neurons} d_i β_i + Σ_{u_i = 0} d_i σ(β_i) (σ rational on Q), and the
    formal constants {β: Σ d_i} where σ(β) is not rational (docs/rules.md §8.1)."""
    import flint

    layer = block.layers[0]  # type: ignore[index]
    dim, width = block.dim, block.width
    keyed = set(key_rows.tolist())
    chosen = [betas[i] if i in keyed else Fraction(0) for i in range(width)]
    den = lcm(*(x.denominator for x in chosen)) if chosen else 1
    column = flint.fmpz_mat(width, 1, [x.numerator * (den // x.denominator) for x in chosen])
    summed = down_f * column
    factor = a * down.scale / den
    gamma = [c + factor * int(summed[r, 0])
             for r, c in enumerate(_vector(layer.down_bias, dim))]
    constants: dict[Fraction, list[Fraction]] = {}
    scalar = block.activation.scalar
    for i in np.flatnonzero(live & ~has_u).tolist():
        beta = betas[i]
        if beta == 0:
            continue  # σ(0) = 0
        d = [down.scale * int(x) for x in down.ints[:, i].tolist()]
        if scalar.is_rational:
            value = scalar.exact(beta)
            gamma = [g + value * x for g, x in zip(gamma, d, strict=True)]
        else:
            acc = constants.setdefault(beta, [Fraction(0)] * dim)
            constants[beta] = [s + x for s, x in zip(acc, d, strict=True)]
    constants = {b: v for b, v in constants.items() if any(v)}
    return gamma, constants


@dataclass(frozen=True)
class Equality:
    equal: bool | None
    certificate: dict[str, Any] | None = None
    reason: str = ""


def decide(left: Block, right: Block) -> Equality:
    """Equal as functions? The verdict of `equivalence.decide`, from integer forms."""
    biased = left.biased or right.biased
    fl, why_l = form(left, biased)
    fr, why_r = form(right, biased)
    if fl is None or fr is None:
        return Equality(None, reason=why_l or why_r)
    if fl.ridge is not None and fr.ridge is not None and not fl.ridge.same_e(fr.ridge) \
            and (fl.keys or fr.keys):
        return Equality(None, reason=f"{left.activation} and {right.activation} have "
                                     "different even parts; their canonical forms do not "
                                     "compare")
    difference = _difference(fl, fr, left)
    if difference is not None and difference["part"] == "constant" and "row" not in difference:
        return Equality(None, reason="the canonical forms differ only in constants σ(β) "
                                     "that are not proved different")
    equal = difference is None
    return Equality(equal, widths.integer_canonical_forms(equal, [len(fl.keys), len(fr.keys)],
                                                          difference))


def _difference(fl: IntForm, fr: IntForm, left: Block) -> dict[str, Any] | None:
    """The first difference of two forms (None: equal); Λ, keys, v, γ, then constants."""
    gap = fl.lam * fr.lam_den - fr.lam * fl.lam_den
    if not gap.is_zero():
        entries = gap.entries()
        at = next(n for n, x in enumerate(entries) if x != 0)
        r, c = divmod(at, gap.ncols())
        return {"part": "Lambda", "row": r, "col": c,
                "left": cert.q(Fraction(int(fl.lam[r, c]), fl.lam_den)),
                "right": cert.q(Fraction(int(fr.lam[r, c]), fr.lam_den))}
    for side, mine, theirs in (("left", fl, fr), ("right", fr, fl)):
        for name in sorted(mine.keys, key=lambda k: mine.keys[k][0]):
            if name not in theirs.keys:
                return {"part": "key", "side": side, "neuron": mine.keys[name][0]}
    if fl.keys:
        order = sorted(fl.keys, key=lambda k: fl.keys[k][0])
        w_l = np.stack([fl.keys[k][1] for k in order])
        w_r = np.stack([fr.keys[k][1] for k in order])
        x = fl.v_scale.numerator * fr.v_scale.denominator
        y = fr.v_scale.numerator * fl.v_scale.denominator
        differs = (w_l * x) != (w_r * y)
        if differs.any():
            n, r = (int(t) for t in np.argwhere(differs)[0])
            return {"part": "v", "neuron": fl.keys[order[n]][0], "row": r,
                    "left": cert.q(fl.v_scale * int(w_l[n, r])),
                    "right": cert.q(fr.v_scale * int(w_r[n, r]))}
    if fl.gamma is None or fr.gamma is None:
        return None
    for r, (x, y) in enumerate(zip(fl.gamma, fr.gamma, strict=True)):
        if x != y and not (fl.constants or fr.constants):
            return {"part": "gamma", "row": r, "left": cert.q(x), "right": cert.q(y)}
    if (fl.gamma, fl.constants) == (fr.gamma, fr.constants):
        return None
    # only the constants differ, formally: different numbers only where proved so
    scalar = left.activation.scalar
    for r in range(len(fl.gamma)):
        value = [f.gamma[r] + sum((v[r] * symbolic.sigma_at(scalar, beta)
                                   for beta, v in sorted(f.constants.items()) if v[r]),
                                  start=Fraction(0))
                 for f in (fl, fr)]
        if symbolic.nonzero(value[0] - value[1]):
            return {"part": "constant", "row": r}
    return {"part": "constant"}
