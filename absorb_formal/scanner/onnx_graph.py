"""Find the MLP sublayers of an ONNX model by graph pattern.

The pattern: a linear layer (MatMul with a stored weight, then an Add of a stored bias; or
Gemm), an activation subgraph, a second linear layer:

    x → MatMul(W1) → Add(b1) → σ → MatMul(W2) → Add(b2)

or gated: σ(linear_gate(x)) ⊙ linear_up(x) → linear_down (swiglu, geglu, reglu, glu).
A stored tensor is an initializer or a Constant node's value (exporters write both; a
Constant's tensor is loaded by its output name). Identity nodes are followed everywhere; a
Transpose of a stored weight is read as the transposed tensor. Weights of MatMul(x, W) are
stored in×out, so `up` is W with `.T`; Gemm's transB says which way its B is stored.

The activation subgraph is read as an expression in the pre-activation and scalar
constants, whose values are read exactly (`language.onnx_file`), and recognised as:
relu; gelu (x·½·(1 + erf(x/√2)) in any order and grouping, x/√2 as a Div by √2 or a Mul by
1/√2; or the Gelu op); gelu_tanh (x·½·(1 + tanh(√(2/π)(x + 0.044715x³))), the cube as Pow
or as products, the constants apart or folded; or Gelu with approximate="tanh"); silu
(x·Sigmoid(c·x) with c = 1 exactly: a Mul by 1.0 is no change); tanh; sigmoid;
leaky_relu(α) (LeakyRelu, α the exact value of its float32 attribute); the com.microsoft
Gelu and FastGelu ops without a bias input. ½ and 1 must be exact; √2, 1/√2, √(2/π) and
0.044715 must each be within one unit in the last place of its own float format of the
true value (the exporter's rounding of it). Anything else — a subgraph that merely looks
alike — is skipped with the reason.

Scan asks whether a skip could be absorbed, so each MLP is a sublayer with an identity
skip; a block whose output is not seen feeding an Add (a residual) says so in its notes.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from fractions import Fraction
from pathlib import Path
from typing import Any

import numpy as np

from ..model import exactarray
from ..weights import onnx_file
from ..weights.arrays import Loaded
from .found import FoundBlock, FoundNorm, ScanError, Skipped, TensorRef
from .onnx_norms import Norms

# π to 40 digits, as an interval (the gelu_tanh constant √(2/π) is tested against it)
PI_LO = Fraction(31415926535897932384626433832795028841, 10**37)
PI_HI = PI_LO + Fraction(1, 10**37)
PRECISION = {1: 24, 11: 53, 10: 11, 16: 8}  # FLOAT, DOUBLE, FLOAT16, BFLOAT16: mantissa bits
C_TANH = Fraction(44715, 10**6)  # 0.044715
GATED = {"silu": "swiglu", "gelu": "geglu", "relu": "reglu", "sigmoid": "glu"}
KEYWORDS = {"absorbable", "activation", "always", "bias", "block", "claim", "depth", "dim",
            "down", "down_bias", "equals", "gate", "gate_bias", "generically", "is", "layer",
            "load", "min", "never", "none", "not", "of", "query", "skip", "sometimes", "up",
            "up_bias", "width", "at", "identity"}
MAX_NODES = 64  # nodes in one activation subgraph
DEFAULT_SLOPE = Fraction(float(np.float32(0.01)))  # LeakyRelu's alpha: a float32 attribute


class Mismatch(Exception):
    """The subgraph is not the pattern; the message says why (for Skipped)."""


# ---- the expression an activation subgraph computes -------------------------------------------

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


# ---- constants: exact, or the format's rounding of an irrational ------------------------------

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


# ---- recognising σ ----------------------------------------------------------------------------

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


# ---- the graph --------------------------------------------------------------------------------

@dataclass
class Linear:
    """x ↦ W·x + b with W read from an initializer: `weight` as up/down (out×in after its
    transpose)."""

    node: Any
    input: str
    output: str  # after the bias, if any
    weight: TensorRef
    fan_in: int
    fan_out: int
    bias: TensorRef | None = None
    nodes: list[Any] = field(default_factory=list)


class Graph:
    def __init__(self, path: Path):
        self.path = path
        self.file = path.name
        self.proto = onnx_file.read_proto(path)
        self.index = onnx_file.index(path, self.proto)
        graph = self.proto.graph
        self.nodes = [node for node in graph.node if _well_formed(node)]
        self.malformed = [node for node in graph.node if not _well_formed(node)]
        self.producer: dict[str, Any] = {}
        self.consumers: dict[str, list[Any]] = {}
        for node in self.nodes:
            for out in node.output:
                self.producer.setdefault(out, node)
            for name in node.input:
                self.consumers.setdefault(name, []).append(node)
        self.inputs = {i.name for i in graph.input}
        self.initializers = self.index.initializers
        self._norms: Norms | None = None

    def norms(self) -> Norms:
        """The graph's norms (found once, when a sublayer first asks)."""
        if self._norms is None:
            self._norms = Norms(self)
        return self._norms

    # -- values -------------------------------------------------------------------------

    def source(self, value: str) -> str:
        """The value an Identity chain passes on."""
        seen = 0
        while value in self.producer and self.producer[value].op_type == "Identity" \
                and self.producer[value].domain in ("", "ai.onnx") and seen < 100:
            value = self.producer[value].input[0]
            seen += 1
        return value

    def users(self, value: str) -> list[Any]:
        """The nodes reading a value, through Identity nodes (a malformed graph's Identity
        cycle is followed once)."""
        out, todo, seen = [], [value], {value}
        while todo:
            for node in self.consumers.get(todo.pop(), []):
                if node.op_type != "Identity":
                    out.append(node)
                elif node.output[0] not in seen:
                    seen.add(node.output[0])
                    todo.append(node.output[0])
        return out

    def constant(self, value: str) -> Const | None:
        """A scalar constant (an initializer or a Constant node's output), read exactly. An
        initializer that is also a graph input (older exporters list every initializer as
        one) is read as its stored value; a found block's notes say so for its weights."""
        value = self.source(value)
        if value in self.initializers:
            return self._tensor_const(self.initializers[value], value)
        node = self.producer.get(value)
        if node is None or node.op_type != "Constant":
            return None
        for attribute in node.attribute:
            if attribute.name in ("value_float", "value_floats") and not all(
                    math.isfinite(f) for f in [attribute.f, *attribute.floats]):
                raise Mismatch(f"a constant {value!r} that is not a finite number")
            if attribute.name == "value":
                return self._tensor_const(attribute.t, value)
            if attribute.name == "value_float":
                return Const(Fraction(attribute.f), 24, value)
            if attribute.name == "value_int":
                return Const(Fraction(attribute.i), None, value)
            if attribute.name in ("value_floats", "value_ints"):
                items = list(attribute.floats if attribute.name == "value_floats"
                             else attribute.ints)
                if len(items) != 1:
                    raise Mismatch(f"a constant {value!r} of {len(items)} values in an "
                                   "activation: not an elementwise scalar")
                bits = 24 if attribute.name == "value_floats" else None
                return Const(Fraction(items[0]), bits, value)
        raise Mismatch(f"a Constant node {value!r} of a kind that is not read")

    def scalar(self, value: str) -> Fraction | None:
        """The exact value of a scalar constant, None when the value is none."""
        try:
            const = self.constant(value)
        except Mismatch:
            return None
        return None if const is None else const.value

    def _tensor_const(self, tensor: Any, name: str) -> Const:
        count = 1
        for n in tensor.dims:
            count *= int(n)
        if count != 1:
            raise Mismatch(f"a constant {name!r} of {count} values in an activation: not an "
                           "elementwise scalar")
        try:
            bits, kind = onnx_file.tensor_bits(tensor, self.index, name)
        except onnx_file.OnnxError as error:
            raise Mismatch(f"a constant that cannot be read exactly: {error}") from None
        values = Loaded(bits.reshape(1, 1), kind).array()
        try:
            [[value]] = exactarray.fractions(values)
        except (ValueError, OverflowError):
            raise Mismatch(f"a constant {name!r} that is not a finite number") from None
        return Const(value, PRECISION.get(tensor.data_type), name)

    def weight(self, value: str) -> tuple[str, bool] | None:
        """(initializer, transposed by a Transpose node on the way) of a weight input."""
        flipped = False
        for _ in range(100):
            value = self.source(value)
            node = self.producer.get(value)
            if node is None or node.op_type != "Transpose":
                break
            perm = [list(a.ints) for a in node.attribute if a.name == "perm"]
            if perm and perm[0] != [1, 0]:
                return None
            flipped, value = not flipped, node.input[0]
        tensor = self.stored(value)
        if tensor is not None and len(tensor.dims) == 2:
            return value, flipped
        return None

    def stored(self, value: str) -> Any:
        """The tensor stored under a value's name (an initializer, or a Constant node's
        value, as `load` reads it), or None when the value is computed."""
        value = self.source(value)
        if value in self.initializers:
            return self.initializers[value]
        node = self.producer.get(value)
        if node is None or node.op_type != "Constant" or node.domain not in ("", "ai.onnx"):
            return None
        try:
            return onnx_file.constant_tensor(node, self.file)
        except onnx_file.OnnxError:
            return None

    def dims(self, name: str) -> list[int]:
        return [int(n) for n in self.stored(name).dims]

    # -- linear layers ---------------------------------------------------------------------

    def linear_node(self, node: Any) -> Linear | None:
        """A MatMul(x, W) or Gemm(x, W, C) node with a stored weight, before any Add."""
        if node.domain not in ("", "ai.onnx") or node.op_type not in ("MatMul", "Gemm"):
            return None
        if len(node.input) < 2:
            return None
        found = self.weight(node.input[1])
        if found is None or self.constant_like(node.input[0]):
            source = self.producer.get(self.source(node.input[1]))
            if found is None and source is not None and source.op_type == "Constant" \
                    and not self.constant_like(node.input[0]):
                try:
                    onnx_file.constant_tensor(source, self.file)
                except onnx_file.OnnxError as error:  # sparse, several attributes, ...
                    raise Mismatch(f"a {node.op_type} whose weight is not read: "
                                   f"{error}") from None
            return None
        name, flipped = found
        rows, cols = self.dims(name)
        attrs = {a.name: a for a in node.attribute}
        if node.op_type == "Gemm":
            if "transA" in attrs and attrs["transA"].i:
                raise Mismatch("a Gemm with transA")
            for scale in ("alpha", "beta"):
                if scale in attrs and attrs[scale].f != 1.0:
                    raise Mismatch(f"a Gemm with {scale} = {attrs[scale].f:.9g}, not 1")
            if "transB" in attrs and attrs["transB"].i:
                flipped = not flipped
        # B (after the flips) is in×out: stored W is in×out unless flipped once
        if flipped:
            ref, fan_in, fan_out = TensorRef(self.file, name, False), cols, rows
        else:
            ref, fan_in, fan_out = TensorRef(self.file, name, True), rows, cols
        linear = Linear(node, self.source(node.input[0]), node.output[0], ref, fan_in, fan_out,
                        nodes=[node])
        if node.op_type == "Gemm" and len(node.input) > 2 and node.input[2]:
            linear.bias = self.bias(node.input[2], fan_out)
        return linear

    def constant_like(self, value: str) -> bool:
        value = self.source(value)
        return value in self.initializers or (value in self.producer
                                              and self.producer[value].op_type == "Constant")

    def bias(self, value: str, length: int) -> TensorRef:
        value = self.source(value)
        if self.stored(value) is None:
            what = self.producer[value].op_type if value in self.producer else "graph input"
            raise Mismatch(f"a bias {value!r} that is a {what}, not a stored tensor: load(...) "
                           "reads initializers and Constant nodes")
        dims = self.dims(value)
        if dims not in ([length], [1, length]):
            raise Mismatch(f"a bias {value!r} of shape {dims}, not [{length}]")
        return TensorRef(self.file, value)

    def with_bias(self, linear: Linear) -> Linear:
        """The linear layer extended by an Add of a bias vector that follows it (if one)."""
        if linear.bias is not None:
            return linear
        users = self.users(linear.output)
        if len(users) != 1 or users[0].op_type != "Add":
            return linear
        add = users[0]
        other = [v for v in add.input if self.source(v) != self.source(linear.output)]
        if len(other) != 1 or not self.constant_like(other[0]):
            return linear
        linear.bias = self.bias(other[0], linear.fan_out)
        linear.output = add.output[0]
        linear.nodes.append(add)
        return linear

    def linear_at(self, value: str) -> Linear | None:
        """The linear layer (with its bias) whose output is `value`, if one is."""
        value = self.source(value)
        node = self.producer.get(value)
        if node is None:
            return None
        if node.op_type == "Add":
            for i, operand in enumerate(node.input):
                inner = self.producer.get(self.source(operand))
                if inner is None:
                    continue
                linear = self.linear_node(inner)
                if linear is not None and self.constant_like(node.input[1 - i]):
                    linear = self.with_bias(linear)
                    return linear if self.source(linear.output) == value else None
            return None
        linear = self.linear_node(node)
        if linear is None:
            return None
        return linear if linear.bias is not None or not self._biased(linear) else None

    def _biased(self, linear: Linear) -> bool:
        users = self.users(linear.output)
        return len(users) == 1 and users[0].op_type == "Add" and any(
            self.constant_like(v) for v in users[0].input if self.source(v) != linear.output)

    # -- the activation subgraph -------------------------------------------------------------

    def expression(self, value: str, budget: list[int]) -> Expr:
        value = self.source(value)
        const = self.constant(value)
        if const is not None:
            return Num(const)
        if self.linear_at(value) is not None:
            return Leaf(value)
        node = self.producer.get(value)
        if node is None:
            return Leaf(value)
        op, domain = node.op_type, node.domain or ""
        standard = domain in ("", "ai.onnx")
        known = (standard and op in ("Mul", "Add", "Div", "Erf", "Tanh", "Sigmoid", "Relu", "Pow",
                                     "Gelu", "LeakyRelu")) or (domain == "com.microsoft"
                                                  and op in ("Gelu", "FastGelu"))
        if not known:
            return Leaf(value)
        budget[0] -= 1
        if budget[0] < 0:
            raise Mismatch(f"an activation subgraph of more than {MAX_NODES} nodes")
        args = [self.expression(v, budget) for v in node.input if v]
        if op in ("Mul", "Add") and domain != "com.microsoft":
            kind = op.lower()
            flat: list[Expr] = []
            for a in args:
                flat += list(a.args) if isinstance(a, Op) and a.kind == kind else [a]
            return Op(kind, tuple(flat))
        if op == "Div" and domain != "com.microsoft":
            if not isinstance(args[1], Num):
                raise Mismatch("a Div by a value that is not a constant")
            return Op("mul", tuple(factors(args[0])) + (Num(args[1].const, True),))
        if op in ("Erf", "Tanh", "Sigmoid", "Relu") and domain != "com.microsoft":
            return Op(op.lower(), (args[0],))
        if op == "LeakyRelu" and domain != "com.microsoft":
            alpha = [a.f for a in node.attribute if a.name == "alpha"]
            if not all(math.isfinite(a) for a in alpha):
                raise Mismatch("a LeakyRelu whose alpha is not a finite number")
            slope = Fraction(alpha[0]) if alpha else DEFAULT_SLOPE
            return Op(f"leaky_relu({slope})", (args[0],))
        if op == "Pow" and domain != "com.microsoft":
            return Op("pow", (args[0], args[1]))
        if op == "Gelu":
            approx = [a.s.decode() for a in node.attribute if a.name == "approximate"]
            if len(args) != 1:
                raise Mismatch("a Gelu with a bias input (a fused op)")
            return Op("gelu_tanh" if approx == ["tanh"] else "gelu", (args[0],))
        if op == "FastGelu" and domain == "com.microsoft" and len(args) == 1:
            return Op("gelu_tanh", (args[0],))
        return Leaf(value)

    def activation(self, value: str) -> tuple[str, Linear] | None:
        """(σ, the linear layer before it) when `value` = σ(linear(x)); None when value is
        no activation of a linear layer; Mismatch when it is a near miss."""
        e = self.expression(value, [MAX_NODES])
        if isinstance(e, Leaf):
            return None
        names = leaves(e)
        if len(names) != 1:
            return None
        [h] = names
        before = self.linear_at(h)
        if before is None:
            return None
        return classify(e), before


# (inputs, outputs) that the ops this finder reads must have; other ops are never indexed
ARITY = {"Identity": (1, 1), "Transpose": (1, 1), "Erf": (1, 1), "Tanh": (1, 1),
         "Sigmoid": (1, 1), "Relu": (1, 1), "LeakyRelu": (1, 1), "Gelu": (1, 1),
         "FastGelu": (1, 1), "Mul": (2, 1), "Add": (2, 1), "Div": (2, 1), "Pow": (2, 1),
         "MatMul": (2, 1), "Gemm": (2, 1), "Constant": (0, 1)}


def _well_formed(node: Any) -> bool:
    """At least the inputs and outputs its op needs, the required ones named (Gemm's C and
    FastGelu's bias are optional)."""
    need = ARITY.get(node.op_type)
    if need is None:
        return True
    inputs, outputs = need
    return (len(node.input) >= inputs and all(node.input[:inputs])
            and len(node.output) >= outputs and all(node.output[:outputs])
            and (node.op_type in ("Gemm", "FastGelu", "Gelu") or len(node.input) == inputs))


# ---- the finder ----------------------------------------------------------------------------

def find_blocks(path: Path) -> tuple[list[FoundBlock], list[Skipped]]:
    """Every MLP sublayer of the ONNX model at `path` (tensors referenced by initializer name,
    `file` = the model's name), and what was passed over, with why. ScanError when the file
    is no ONNX model (or the onnx package is missing)."""
    try:
        graph = Graph(Path(path))
    except onnx_file.OnnxError as error:
        raise ScanError(f"{path}: {error}") from None
    found: list[FoundBlock] = []
    skipped = [Skipped(node.name or node.op_type, f"a malformed {node.op_type} node "
                       f"({len(node.input)} inputs, {len(node.output)} outputs)")
               for node in graph.malformed]
    used: set[str] = set()  # names of the linear nodes that are part of a found block
    mentioned: set[str] = set()
    for i, node in enumerate(graph.nodes):
        where = _where(node, i)
        try:
            down = graph.linear_node(node)
        except Mismatch as why:
            skipped.append(Skipped(where, str(why)))
            mentioned.add(where)
            continue
        if down is None:
            continue
        try:
            block = _block(graph, graph.with_bias(down), len(found), {b.name for b in found})
        except Mismatch as why:
            skipped.append(Skipped(where, str(why)))
            mentioned.add(where)
            continue
        if block is not None:
            found.append(block[0])
            used.update(block[1])
    # a layer tried as a second layer and passed over may be the first layer of a block
    # found later: a block is listed once, as found
    skipped = [s for s in skipped if s.where not in used]
    for i, node in enumerate(graph.nodes):
        where = _where(node, i)
        if where in used or where in mentioned:
            continue
        try:
            linear = graph.linear_node(node)
        except Mismatch:
            linear = None
        if linear is not None:
            skipped.append(Skipped(where, f"a linear layer ({linear.weight.key!r}, "
                                          f"{linear.fan_in} → {linear.fan_out}) in no MLP found: "
                                          "an attention, embedding or output projection, or "
                                          "the first layer of an MLP skipped above"))
    return found, skipped


def _where(node: Any, i: int) -> str:
    return node.name or f"node {i} ({node.op_type})"


def _block(graph: Graph, down: Linear, count: int, names: set[str]
           ) -> tuple[FoundBlock, list[str]] | None:
    gated = _gated(graph, down.input)
    notes: list[str] = []
    if gated is not None:
        sigma, gate, up = gated
        if sigma not in GATED:
            raise Mismatch(f"a gated MLP whose gate activation is {sigma}, which has no gated "
                           "activation in the language (swiglu, geglu, reglu, glu)")
        activation = GATED[sigma]
    else:
        plain = graph.activation(down.input)
        if plain is None:
            return None
        activation, up = plain
        gate = None
    d, m = up.fan_in, up.fan_out
    if down.fan_in != m:
        raise Mismatch(f"an MLP whose second layer reads {down.fan_in} values, the first "
                       f"gives {m}")
    if down.fan_out != d:
        raise Mismatch(f"an MLP mapping {d} values to {down.fan_out}: no identity skip to "
                       "absorb")
    for layer in [up, down] + ([gate] if gate is not None else []):
        for ref in (layer.weight, layer.bias):
            if ref is not None:
                _loadable(graph, ref.key)
                if ref.key in graph.inputs:
                    notes.append(f"initializer {ref.key!r} is also a graph input (a default "
                                 "that a runtime may override); its stored value is read")
    norm, why = graph.norms().beside(up.input, down.output, d, graph.file)
    if why:  # a norm it cannot place: the sublayer is not decided, never taken as bare
        notes.append(why)
        norm = FoundNorm("", "unknown", "", source=why)
    if not _residual(graph, down.output) and (norm is None or norm.placement != "sandwich"):
        notes.append("no residual Add around it was seen: decided as a sublayer with an "
                     "identity skip")
    if activation in ("gelu", "gelu_tanh", "geglu") and gated is None:
        notes.append(f"activation read as {activation} from its subgraph's constants")
    name, where = _name(_tensor_name(up), _tensor_name(down), count, names)
    nodes = [n for layer in [up, down] + ([gate] if gate else []) for n in layer.nodes]
    block = FoundBlock(name=name, where=where, activation=activation, dim=d, width=m,
                       up=up.weight, down=down.weight, gate=gate.weight if gate else None,
                       up_bias=up.bias, gate_bias=gate.bias if gate else None,
                       down_bias=down.bias, notes=tuple(notes), norm=norm)
    return block, [_where(n, graph.nodes.index(n)) for n in nodes]


def _gated(graph: Graph, value: str) -> tuple[str, Linear, Linear] | None:
    """(σ, gate, up) when value = σ(gate(x)) ⊙ up(x), in either order."""
    node = graph.producer.get(graph.source(value))
    if node is None or node.op_type != "Mul" or len(node.input) != 2:
        return None
    for a, b in ((0, 1), (1, 0)):
        up = graph.linear_at(node.input[b])
        if up is None:
            continue
        try:
            act = graph.activation(node.input[a])
        except Mismatch:
            continue
        if act is None or act[1].input != up.input or act[1].output == up.output:
            continue  # not two layers of one input (x·sigmoid(x) is silu, not a gate)
        if (act[1].fan_in, act[1].fan_out) != (up.fan_in, up.fan_out):
            raise Mismatch("a gated MLP whose gate and up layers differ in shape")
        return act[0], act[1], up
    return None


def _loadable(graph: Graph, key: str) -> None:
    try:
        tensor = onnx_file.tensor_of(graph.index, key)
    except onnx_file.OnnxError as error:
        raise Mismatch(str(error)) from None
    if tensor.data_type not in onnx_file.DTYPES:
        raise Mismatch(f"initializer {key!r} has {onnx_file.type_name(tensor.data_type)}, "
                       "not a number type load(...) reads")


def _residual(graph: Graph, output: str) -> bool:
    return any(user.op_type == "Add" and not all(graph.constant_like(v) for v in user.input
                                                 if graph.source(v) != graph.source(output))
               for user in graph.users(output))


TENSOR_SUFFIXES = {"weight", "bias", "w_0", "b_0", "w", "b", "kernel"}
GENERATED = re.compile(r"onnx::.*|val_\d+")  # torch.onnx's names of tensors it made


def _tensor_name(layer: Linear) -> str:
    """The name a layer's tensors give it: its weight's, or its bias's when the weight has
    only an exporter's generated name (`onnx::MatMul_123`, `val_4`: a pre-transposed
    nn.Linear weight)."""
    key = layer.weight.key
    if GENERATED.fullmatch(key) and layer.bias is not None:
        return layer.bias.key
    return key


def _name(up: str, down: str, count: int, taken: set[str]) -> tuple[str, str]:
    """(block name, where) from the layers' tensor names, never from node names: their
    common leading components (`h.0.mlp.c_fc.weight`, `h.0.mlp.c_proj.weight` → `h_0_mlp`,
    `h.0.mlp`), else the up layer's own name without its `weight` (`linear_0.w_0` →
    `linear_0`, where `linear_0.w_0 → linear_1.w_0`); `mlpN` when that is a generated
    name."""
    a, b = re.split(r"[./]", up), re.split(r"[./]", down)
    common = 0
    while common < min(len(a), len(b)) - 1 and a[common] == b[common]:
        common += 1
    if common:
        parts, where = a[:common], ".".join(a[:common])
    else:
        parts, where = a[:-1] if len(a) > 1 and a[-1] in TENSOR_SUFFIXES else a, f"{up} → {down}"
    name = re.sub(r"[^A-Za-z0-9_]+", "_", "_".join(parts)).strip("_")
    if not name or GENERATED.fullmatch(up) or name.startswith("onnx") or name[0].isdigit():
        name = f"mlp{count}"
    if name in KEYWORDS:
        name += "_mlp"
    base, n = name, 2
    while name in taken:
        name, n = f"{base}_{n}", n + 1
    return name, where
