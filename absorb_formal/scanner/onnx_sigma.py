"""The activation of an ONNX MLP, recognised in the expression its subgraph computes.

`onnx_graph.Graph.expression` reads the subgraph as an expression in the pre-activation and
scalar constants, whose values are read exactly (`weights/onnx_file.py`); `classify` names
it: relu; gelu (x·½·(1 + erf(x/√2)) in any order and grouping, x/√2 as a Div by √2 or a Mul
by 1/√2; or the Gelu op); gelu_tanh (x·½·(1 + tanh(√(2/π)(x + 0.044715x³))), the cube as
Pow or as products, the constants apart or folded; or Gelu with approximate="tanh"); silu
(x·Sigmoid(c·x) with c = 1 exactly: a Mul by 1.0 is no change); tanh; sigmoid;
leaky_relu(α) (LeakyRelu, α the exact value of its float32 attribute); the com.microsoft
Gelu and FastGelu ops without a bias input. ½ and 1 must be exact; √2, 1/√2, √(2/π) and
0.044715 must each be within one unit in the last place of its own float format of the
true value (the exporter's rounding of it). Anything else — a subgraph that merely looks
alike — is a Mismatch, and the finder skips it with the reason.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from typing import Any

# π to 40 digits, as an interval (the gelu_tanh constant √(2/π) is tested against it)
PI_LO = Fraction(31415926535897932384626433832795028841, 10**37)
PI_HI = PI_LO + Fraction(1, 10**37)
C_TANH = Fraction(44715, 10**6)  # 0.044715


class Mismatch(Exception):
    """The subgraph is not the pattern; the message says why (for Skipped)."""


@dataclass(frozen=True)
class Const:
    value: Fraction
    bits: int | None  # mantissa bits of its float format; None: an integer type
    name: str


@dataclass(frozen=True)
class Leaf:
    name: str  # a value the subgraph reads that it does not compute (the pre-activation)


@dataclass(frozen=True)
class Num:
    const: Const
    inverse: bool = False  # a Div by it

    @property
    def value(self) -> Fraction:
        return 1 / self.const.value if self.inverse else self.const.value


@dataclass(frozen=True)
class Op:
    kind: str  # mul, add (n-ary), erf, tanh, sigmoid, relu, gelu, gelu_tanh, pow
    args: tuple[Any, ...]


Expr = Leaf | Num | Op


def leaves(e: Expr) -> set[str]:
    if isinstance(e, Leaf):
        return {e.name}
    if isinstance(e, Op):
        return set().union(*(leaves(a) for a in e.args)) if e.args else set()
    return set()


def kinds(e: Expr) -> set[str]:
    if isinstance(e, Op):
        return {e.kind}.union(*(kinds(a) for a in e.args))
    return set()


def factors(e: Expr) -> list[Expr]:
    return list(e.args) if isinstance(e, Op) and e.kind == "mul" else [e]


def show(c: Const | Num) -> str:
    const = c.const if isinstance(c, Num) else c
    return f"{float(const.value):.9g} ({const.name})"


def near(c: Const, square: Fraction, pi_power: int = 0) -> bool:
    """Is c within one unit in the last place (of its own float format) of the positive t
    with t² = square·π^pi_power? Decided exactly, with π between PI_LO and PI_HI."""
    if c.bits is None or c.value <= 0:
        return False
    v = c.value
    e = v.numerator.bit_length() - v.denominator.bit_length()
    if Fraction(2) ** e > v:
        e -= 1
    elif Fraction(2) ** (e + 1) <= v:
        e += 1
    ulp = Fraction(2) ** (e - c.bits + 1)
    lo, hi = v - ulp, v + ulp
    if pi_power == 0:
        return (lo <= 0 or lo * lo <= square) and square <= hi * hi
    if pi_power == 1:  # t² = square·π
        return (lo <= 0 or lo * lo <= square * PI_LO) and square * PI_HI <= hi * hi
    return (lo <= 0 or lo * lo * PI_HI <= square) and square <= hi * hi * PI_LO  # square/π


def near_num(n: Num, square: Fraction, pi_power: int = 0) -> bool:
    """A Mul constant near t, or a Div constant near 1/t."""
    if n.inverse:
        return near(n.const, 1 / square, -pi_power)
    return near(n.const, square, pi_power)


def _others_one(nums: list[Num], used: list[Num]) -> bool:
    return all(n.value == 1 for n in nums if not any(n is u for u in used))


def classify(e: Expr) -> str:
    """The language's name of the activation that e computes of its single leaf."""
    if isinstance(e, Op) and (e.kind in ("relu", "gelu", "gelu_tanh", "tanh", "sigmoid")
                              or e.kind.startswith("leaky_relu(")) \
            and isinstance(e.args[0], Leaf):
        return e.kind
    found = kinds(e)
    if "erf" in found:
        return _gelu_erf(e)
    if "tanh" in found:
        return _gelu_tanh(e)
    if "sigmoid" in found:
        return _silu(e)
    raise Mismatch(f"an activation subgraph of {', '.join(sorted(found)) or 'no op'} that is "
                   "not relu, gelu, gelu_tanh, silu, tanh or sigmoid")


def _outer(e: Expr, inner: str) -> tuple[Op, list[Num]]:
    """e = ½ · x · (1 + INNER(...)): the (1 + INNER) factor and the constants, checked."""
    parts = factors(e)
    xs = [p for p in parts if isinstance(p, Leaf)]
    nums = [p for p in parts if isinstance(p, Num)]
    rest = [p for p in parts if isinstance(p, Op)]
    if len(xs) != 1 or len(rest) != 1 or rest[0].kind != "add":
        raise Mismatch(f"an {inner} subgraph that is not x·½·(1 + {inner}(...))")
    product = Fraction(1)
    for n in nums:
        product *= n.value
    if product != Fraction(1, 2):
        raise Mismatch(f"an {inner} subgraph x·c·(1 + {inner}(...)) with c = {float(product):.9g}"
                       ", not exactly 1/2: not gelu")
    terms = rest[0].args
    ones = [t for t in terms if isinstance(t, Num)]
    calls = [t for t in terms if isinstance(t, Op) and t.kind == inner]
    if len(terms) != 2 or len(ones) != 1 or len(calls) != 1:
        raise Mismatch(f"an {inner} subgraph whose sum is not 1 + {inner}(...): not gelu")
    if ones[0].value != 1:
        raise Mismatch(f"an {inner} subgraph c + {inner}(...) with c = {show(ones[0])}, not "
                       "exactly 1: not gelu")
    return calls[0], nums


def _gelu_erf(e: Expr) -> str:
    call, _ = _outer(e, "erf")
    inner = factors(call.args[0])
    nums = [p for p in inner if isinstance(p, Num)]
    if len([p for p in inner if isinstance(p, Leaf)]) != 1 or len(nums) + 1 != len(inner):
        raise Mismatch("an erf subgraph whose erf argument is not x/√2: not gelu")
    scale = [n for n in nums if near_num(n, Fraction(1, 2))]  # c ≈ 1/√2, or a Div by ≈ √2
    if len(scale) != 1 or not _others_one(nums, scale):
        shown = ", ".join(show(n) + (" (divides)" if n.inverse else "") for n in nums)
        raise Mismatch(f"an erf subgraph erf(c·x) with constants {shown or 'none'}: not x/√2 "
                       "within the float's rounding, so not gelu")
    return "gelu"


def _gelu_tanh(e: Expr) -> str:
    call, _ = _outer(e, "tanh")
    terms = _polynomial(call.args[0])
    if sorted(terms) != [1, 3] or any(len(v) != 1 for v in terms.values()):
        raise Mismatch("a tanh subgraph whose tanh argument is not a·(x + b·x³): not gelu_tanh")
    [linear], [cubic] = terms[1], terms[3]
    a = [n for n in linear if near_num(n, Fraction(2), -1)]  # √(2/π)
    if len(a) != 1 or not _others_one(linear, a):
        raise Mismatch("a tanh subgraph whose x coefficient is not √(2/π) within the float's "
                       f"rounding ({', '.join(show(n) for n in linear) or '1'}): not gelu_tanh")
    folded = [n for n in cubic if near_num(n, 2 * C_TANH**2, -1)]  # √(2/π)·0.044715
    apart = ([n for n in cubic if near_num(n, Fraction(2), -1)][:1],
             [n for n in cubic if near_num(n, C_TANH**2)][:1])
    if len(folded) == 1 and _others_one(cubic, folded):
        return "gelu_tanh"
    if all(len(p) == 1 for p in apart) and _others_one(cubic, apart[0] + apart[1]):
        return "gelu_tanh"
    raise Mismatch("a tanh subgraph whose x³ coefficient is not √(2/π)·0.044715 within the "
                   f"floats' rounding ({', '.join(show(n) for n in cubic) or '1'}): "
                   "not gelu_tanh")


def _polynomial(e: Expr) -> dict[int, list[list[Num]]]:
    """e as a sum of monomials: power of the leaf → the constant factors of each monomial."""
    if isinstance(e, Leaf):
        return {1: [[]]}
    if isinstance(e, Num):
        return {0: [[e]]}
    if e.kind == "add":
        out: dict[int, list[list[Num]]] = {}
        for arg in e.args:
            for power, monomials in _polynomial(arg).items():
                out.setdefault(power, []).extend(monomials)
        return out
    if e.kind == "mul":
        product: dict[int, list[list[Num]]] = {0: [[]]}
        for arg in e.args:
            term = _polynomial(arg)
            product = _times(product, term)
        return product
    if e.kind == "pow" and isinstance(e.args[1], Num) and not e.args[1].inverse \
            and e.args[1].value.denominator == 1 and 1 <= e.args[1].value <= 8:
        base = _polynomial(e.args[0])
        out = {0: [[]]}
        for _ in range(int(e.args[1].value)):
            out = _times(out, base)
        return out
    raise Mismatch(f"a {e.kind} inside a polynomial: not gelu_tanh")


def _times(a: dict[int, list[list[Num]]], b: dict[int, list[list[Num]]]
           ) -> dict[int, list[list[Num]]]:
    out: dict[int, list[list[Num]]] = {}
    for pa, ma in a.items():
        for pb, mb in b.items():
            for x in ma:
                for y in mb:
                    out.setdefault(pa + pb, []).append(x + y)
    if sum(len(v) for v in out.values()) > 16:
        raise Mismatch("a polynomial too large for gelu_tanh")
    return out


def _silu(e: Expr) -> str:
    parts = factors(e)
    xs = [p for p in parts if isinstance(p, Leaf)]
    sig = [p for p in parts if isinstance(p, Op) and p.kind == "sigmoid"]
    nums = [p for p in parts if isinstance(p, Num)]
    if len(xs) != 1 or len(sig) != 1 or len(parts) != 2 + len(nums):
        raise Mismatch("a sigmoid subgraph that is not x·sigmoid(x)")
    if not _others_one(nums, []):
        raise Mismatch(f"a sigmoid subgraph c·x·sigmoid(x) with c ≠ 1 "
                       f"({', '.join(show(n) for n in nums)}): not silu")
    argument = factors(sig[0].args[0])
    scale = [p for p in argument if isinstance(p, Num)]
    if len(argument) != len(scale) + 1 or not any(isinstance(p, Leaf) for p in argument):
        raise Mismatch("a sigmoid subgraph x·sigmoid(...) whose sigmoid argument is not c·x: "
                       "not silu")
    c = Fraction(1)
    for n in scale:
        c *= n.value
    if c != 1:  # x·sigmoid(1.702x) (quick gelu), swish with β ≠ 1
        raise Mismatch(f"x·sigmoid(c·x) with c = {float(c):.9g} "
                       f"(from {', '.join(repr(n.const.name) for n in scale)}) is not an "
                       "activation the language has exactly (silu needs c = 1)")
    return "silu"  # c = 1 exactly: x·sigmoid(x)
