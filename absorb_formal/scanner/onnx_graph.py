"""An ONNX model's main graph, read for the finder (`onnx_find.py`): values, stored tensors,
linear layers and activation subgraphs.

A stored tensor is an initializer or a Constant node's value (exporters write both; a
Constant's tensor is loaded by its output name). Identity nodes are followed everywhere; a
Transpose of a stored weight is read as the transposed tensor. Weights of MatMul(x, W) are
stored in×out, so `up` is W with `.T`; Gemm's transB says which way its B is stored. A
linear layer is a MatMul or Gemm with a stored weight, with the Add of a stored bias that
follows it. An activation subgraph is read as an expression (`onnx_sigma.py` names it).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from fractions import Fraction
from pathlib import Path
from typing import Any

import numpy as np

from ..model import exactarray
from ..weights import onnx_file
from ..weights.common import Loaded
from .found import TensorRef
from .onnx_norms import Norms
from .onnx_sigma import Const, Expr, Leaf, Mismatch, Num, Op, classify, factors, leaves

PRECISION = {1: 24, 11: 53, 10: 11, 16: 8}  # FLOAT, DOUBLE, FLOAT16, BFLOAT16: mantissa bits
MAX_NODES = 64  # nodes in one activation subgraph
DEFAULT_SLOPE = Fraction(float(np.float32(0.01)))  # LeakyRelu's alpha: a float32 attribute


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
