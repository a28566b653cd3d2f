"""The checker's `integer canonical forms` (docs/certificates.md): `claim A equals B` for blocks of
any size, the §4 forms (docs/rules.md §4, §8.1) recomputed here in exact integers from the
checker's own reading of the weights (embedded strings, or the files a large block names).

Each matrix is read as integers over one rational scale (the smallest exponent of a float
file, or the lcm of the denominators). A key row r (integer) names its key by the primitive
vector r / gcd(r), signed so that its first non-zero entry is positive: relu family, one key
per line (α = first non-zero entry of r times the scale); analytic family, the key also holds
gcd(r)·scale (u and −u share a key, u and 2u do not). With biases the key holds β/α (relu)
or ±β (analytic). v = Σ b|α_i| d_i (relu) or Σ d_i (analytic), kept as integer columns over
one scale. Λ = S + a·D U comes from one exact integer product (python-flint's fmpz_mat).
Nothing is taken from the certificate but the verdict and the one difference it names,
both of which must hold of the forms computed here.
"""

from __future__ import annotations

from fractions import Fraction
from math import lcm
from typing import Any

import numpy as np

from ..kernel import linalg as exact
from ..kernel import symbolic
from ..kernel.contract import Invalid, require
from ..kernel.linalg import q, whole
from ..lemmas import values

# ---- reading integers ----------------------------------------------------------------------

def _over_lcm(values: list[Fraction], shape: tuple[int, ...]) -> tuple[np.ndarray, Fraction]:
    den = lcm(*(x.denominator for x in values)) if values else 1
    out = np.empty(len(values), dtype=object)
    out[:] = [x.numerator * (den // x.denominator) for x in values]
    return out.reshape(shape), Fraction(1, den)


def integers(value: Any, shape: tuple[int, int]) -> tuple[np.ndarray, Fraction]:
    """(N, s) with the matrix = N·s exactly: N an object array of Python ints. `value`: the
    embedded strings, or the checker's reading of a file (`files.Dyadic`) or a literal
    (`reading.Rational`)."""
    if hasattr(value, "mag"):  # files.Dyadic: (-1)^neg · mag · 2^exp
        mag = value.mag.astype(object)
        live = value.mag != 0
        if not live.any():
            return np.zeros(shape, dtype=object), Fraction(1)
        low = int(value.exp[live].min())
        shift = np.where(live, value.exp.astype(np.int64) - low, 0).astype(object)
        ints = mag << shift
        ints = np.where(value.neg, -ints, ints)
        require(ints.shape == shape, f"a weight matrix has shape {ints.shape}, not {shape}")
        return ints, Fraction(2) ** low
    rows = value.values if hasattr(value, "values") else exact.mat(value)  # reading.Rational
    flat = [Fraction(x) for r in rows for x in r]
    require(len(rows) == shape[0] and len(flat) == shape[0] * shape[1],
            f"a weight matrix is not {shape[0]}×{shape[1]}")
    return _over_lcm(flat, shape)


def _vector(value: Any, n: int) -> list[Fraction]:
    """A bias as n rationals (absent: zeros)."""
    if value is None:
        return [Fraction(0)] * n
    if hasattr(value, "mag"):
        found = value.reshape((int(np.prod(value.shape)),)).fractions()
    elif hasattr(value, "values"):
        found = [Fraction(x) for x in np.asarray(value.values, dtype=object).ravel().tolist()]
    else:
        found = list(exact.vec(value))
    require(len(found) == n, f"a bias has {len(found)} entries, not {n}")
    return found


def _fmpz(ints: np.ndarray) -> Any:
    import flint

    return flint.fmpz_mat(ints.shape[0], ints.shape[1], ints.ravel().tolist())  # Python ints


# ---- the form --------------------------------------------------------------------------------

class Form:
    """Λ = lam / den; keys {name: (first neuron, integer column W)} with v = v_scale·W; γ and
    the formal constants {β: Σ d} of a biased form."""

    def __init__(self, lam: Any, den: int, keys: dict[Any, tuple[int, list[int]]],
                 v_scale: Fraction, gamma: list[Fraction] | None,
                 constants: dict[Fraction, list[Fraction]]):
        self.lam, self.den, self.keys, self.v_scale = lam, den, keys, v_scale
        self.gamma, self.constants = gamma, constants

    def lam_at(self, r: int, c: int) -> Fraction:
        return Fraction(int(self.lam[r, c]), self.den)

    def v_at(self, name: Any, r: int) -> Fraction:
        return self.v_scale * self.keys[name][1][r]


def form(block: dict[str, Any], layer: dict[str, Any],
         family: tuple[str, Fraction, Fraction | None], biased: bool) -> Form:
    """The form of x ↦ Sx + D σ(Ux + b) + c read from `layer` ({name: weights})."""
    import flint

    kind, a, b = family
    d, m = block["dim"], block["width"]
    up, su = integers(layer["up"], (m, d))
    down, sd = integers(layer["down"], (d, m))
    down_f = _fmpz(down)
    lam, den = _lam(block, a * sd * su, down_f * _fmpz(up))
    if kind == "linear":
        require(not biased, "a linear σ with biases has no canonical form here")
        return Form(lam, den, {}, Fraction(1), None, {})
    betas = _vector(layer.get("up_bias"), m) if biased else [Fraction(0)] * m
    keys: dict[Any, tuple[int, list[int]]] = {}
    keyed = [Fraction(0)] * m
    gamma_rest = [Fraction(0)] * d
    constants: dict[Fraction, list[Fraction]] = {}
    act = block["activation"]
    live = (down != 0).any(axis=0)
    # each row's gcd (math.gcd on Python ints: ≥ 0), and its primitive vector signed so that
    # its first non-zero entry is positive
    g = np.abs(np.gcd.reduce(up, axis=1)) if d else np.zeros(m, dtype=object)
    first = np.argmax(up != 0, axis=1)
    leads = up[np.arange(m), first]
    signs = np.where(leads < 0, -1, 1).astype(object)
    prims = up // np.where(g == 0, 1, g)[:, None] * signs[:, None]
    for i in range(m):
        if not live[i]:
            continue
        column = down[:, i].tolist()
        if not g[i]:  # a constant neuron d_i σ(β_i)
            beta = betas[i]
            if beta == 0:
                continue
            values = [sd * x for x in column]
            if act["kind"] in exact.RATIONAL_KINDS:
                s = exact.sigma(act, beta)
                gamma_rest = [g + s * x for g, x in zip(gamma_rest, values, strict=True)]
            else:
                acc = constants.setdefault(beta, [Fraction(0)] * d)
                constants[beta] = [x + y for x, y in zip(acc, values, strict=True)]
            continue
        keyed[i] = betas[i]
        lead, sign = int(leads[i]), int(signs[i])
        name: tuple[Any, ...] = (tuple(prims[i].tolist()),)
        if kind == "relu":
            alpha = lead * su
            weight = abs(lead)
        else:
            alpha = Fraction(sign)
            name += (int(g[i]) * su,)
            weight = 1
        if biased:
            name += (betas[i] / alpha,)
        scaled = [weight * x for x in column]
        if name in keys:
            first, total = keys[name]
            keys[name] = (first, [x + y for x, y in zip(total, scaled, strict=True)])
        else:
            keys[name] = (i, scaled)
    keys = {k: v for k, v in keys.items() if any(v[1])}
    v_scale = b * su * sd if kind == "relu" and b is not None else sd
    gamma = None
    if biased:
        bden = lcm(*(x.denominator for x in keyed))
        summed = down_f * flint.fmpz_mat(m, 1, [x.numerator * (bden // x.denominator)
                                                for x in keyed])
        c = _vector(layer.get("down_bias"), d)
        gamma = [c[r] + gamma_rest[r] + a * sd * Fraction(int(summed[r, 0]), bden)
                 for r in range(d)]
    return Form(lam, den, keys, v_scale, gamma, {k: v for k, v in constants.items() if any(v)})


def _lam(block: dict[str, Any], c1: Fraction, product: Any) -> tuple[Any, int]:
    """S + c1·product over one denominator."""
    skip = block["skip"]
    d = block["dim"]
    if "matrix" in skip:
        s_ints, s_scale = _over_lcm([x for r in exact.mat(skip["matrix"]) for x in r], (d, d))
        return (product * (c1.numerator * s_scale.denominator)
                + _fmpz(s_ints) * (s_scale.numerator * c1.denominator),
                c1.denominator * s_scale.denominator)
    c = q(skip["scale"])
    lam = product * (c1.numerator * c.denominator)
    for i in range(d):
        lam[i, i] += c.numerator * c1.denominator
    return lam, c1.denominator * c.denominator


# ---- the check -------------------------------------------------------------------------------

def check(left: dict[str, Any], right: dict[str, Any], layer_l: dict[str, Any],
          layer_r: dict[str, Any], families: tuple[Any, Any], cert: dict[str, Any]) -> bool:
    """Whether the blocks are equal, from forms computed here; the certificate's verdict, key
    counts and difference must agree with them (Invalid otherwise)."""
    require(isinstance(cert["equal"], bool), "the verdict is not true or false")
    biased = bool(left.get("bias") or right.get("bias"))
    fam_l, fam_r = families
    fl = form(left, layer_l, fam_l, biased)
    fr = form(right, layer_r, fam_r, biased)
    comparable = (fam_l[0] == fam_r[0] == "relu" or "linear" in (fam_l[0], fam_r[0])
                  or left["activation"]["kind"] == right["activation"]["kind"]
                  or not (fl.keys or fr.keys))
    require(comparable, "the two activations' even parts differ: forms do not compare")
    require([whole(x) for x in cert["keys"]] == [len(fl.keys), len(fr.keys)],
            "the stored key counts differ from the recomputed ones")
    lam_equal = (fl.lam * fr.den - fr.lam * fl.den).is_zero()
    same_keys = set(fl.keys) == set(fr.keys)
    x = fl.v_scale.numerator * fr.v_scale.denominator  # v_l = v_r ⇔ W_l·x = W_r·y
    y = fr.v_scale.numerator * fl.v_scale.denominator
    v_equal = same_keys and all(all(s * x == t * y for s, t in
                                    zip(fl.keys[k][1], fr.keys[k][1], strict=True))
                                for k in fl.keys)
    equal = lam_equal and same_keys and v_equal
    if equal and biased:
        equal = _constants_equal(fl, fr, left["activation"])
    require(equal == cert["equal"], "the stored verdict disagrees with the forms")
    require(equal == ("difference" not in cert),
            "a difference is stored exactly when the forms differ")
    if not equal:
        _difference(fl, fr, cert["difference"], left, right)
    return equal


def _value(f: Form, r: int, act: dict[str, Any]) -> symbolic.Poly:
    assert f.gamma is not None
    out = symbolic.rational(f.gamma[r])
    for beta, v in f.constants.items():
        if v[r]:
            out = symbolic.add(out, values.atom(act["kind"], beta), v[r])
    return out


def _constants_equal(fl: Form, fr: Form, act: dict[str, Any]) -> bool:
    """Formally equal constants are equal; formally different ones are different only when
    an enclosure shows some entry of the difference ≠ 0 (else nothing is proved)."""
    if (fl.gamma, fl.constants) == (fr.gamma, fr.constants):
        return True
    if not (fl.constants or fr.constants):
        return False
    assert fl.gamma is not None
    for r in range(len(fl.gamma)):
        gap = symbolic.add(_value(fl, r, act), _value(fr, r, act), Fraction(-1))
        if values.sign(gap) not in (0, None):
            return False
    raise Invalid("the forms differ only in constants σ(β) not proved different")


def _difference(fl: Form, fr: Form, diff: dict[str, Any], left: dict[str, Any],
                right: dict[str, Any]) -> None:
    """The difference the certificate names holds of the recomputed forms."""
    part = diff["part"]
    d = left["dim"]
    if part == "Lambda":
        require(set(diff) == {"part", "row", "col", "left", "right"}, "malformed difference")
        r, c = whole(diff["row"]), whole(diff["col"])
        require(0 <= r < d and 0 <= c < d, "the difference is outside Λ")
        x, y = fl.lam_at(r, c), fr.lam_at(r, c)
        require(x != y and (q(diff["left"]), q(diff["right"])) == (x, y),
                "the stored Λ entries are not the recomputed, different ones")
    elif part == "key":
        require(set(diff) == {"part", "side", "neuron"}, "malformed difference")
        side = diff["side"]
        require(side in ("left", "right"), "the difference names no side")
        mine, theirs = (fl, fr) if side == "left" else (fr, fl)
        n = whole(diff["neuron"])
        found = [k for k, (first, _) in mine.keys.items() if first == n]
        require(len(found) == 1 and found[0] not in theirs.keys,
                "the neuron named is not on a key of its side's form only")
    elif part == "v":
        require(set(diff) == {"part", "neuron", "row", "left", "right"}, "malformed difference")
        n, r = whole(diff["neuron"]), whole(diff["row"])
        found = [k for k, (first, _) in fl.keys.items() if first == n]
        require(len(found) == 1 and found[0] in fr.keys and 0 <= r < d,
                "the neuron named is not on a key of both forms")
        x, y = fl.v_at(found[0], r), fr.v_at(found[0], r)
        require(x != y and (q(diff["left"]), q(diff["right"])) == (x, y),
                "the stored v entries are not the recomputed, different ones")
    elif part == "gamma":
        require(set(diff) == {"part", "row", "left", "right"}, "malformed difference")
        r = whole(diff["row"])
        require(fl.gamma is not None and fr.gamma is not None and 0 <= r < d
                and not (fl.constants or fr.constants), "no rational γ to differ")
        assert fl.gamma is not None and fr.gamma is not None
        x, y = fl.gamma[r], fr.gamma[r]
        require(x != y and (q(diff["left"]), q(diff["right"])) == (x, y),
                "the stored γ entries are not the recomputed, different ones")
    elif part == "constant":
        require(set(diff) == {"part", "row"}, "malformed difference")
        r = whole(diff["row"])
        require(fl.gamma is not None and 0 <= r < d, "no constant to differ")
        gap = symbolic.add(_value(fl, r, left["activation"]),
                           _value(fr, r, left["activation"]), Fraction(-1))
        require(values.sign(gap) not in (0, None),
                "the constants at the row named are not proved different")
    else:
        raise Invalid(f"unknown difference part {part!r}")
