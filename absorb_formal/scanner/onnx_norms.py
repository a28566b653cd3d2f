"""The normalisation beside an MLP sublayer of an ONNX graph, read from the graph itself.

A norm is recognised as an op or as the subgraph exporters write for it:

- LayerNorm: the `LayerNormalization` op (axis -1; Scale γ, optional B β; `epsilon`, a
  float32 attribute, default 1e-5), or decomposed,
  `ReduceMean → Sub → Pow(2) | Mul(self) → ReduceMean → Add(ε) → Sqrt`, then a Div by the
  root or a Mul by its Reciprocal (or by 1/root), then `Mul(γ)` and `Add(β)` when present;
- RMSNorm: `SimplifiedLayerNormalization` (onnxruntime's) or `RMSNormalization` (opset 23),
  axis -1, Scale γ, `epsilon`; or decomposed, `Pow(2) | Mul(self) → ReduceMean → Add(ε) →
  Sqrt`, the Div or Mul as above, then `Mul(γ)`.

Every ReduceMean must reduce the last axis only (axes [-1]) keeping it; γ and β must be
stored tensors (initializers or Constant nodes) of the model's width; ε a stored scalar.
ε is given as the exact decimal of the stored float (a float32 1e-5 is
0.00000999999974737875163555145263671875): the graph computes with that value, and the
language takes exact decimals.

The placement is read by following the graph, never assumed:
- "pre": the MLP reads a norm's output, and the residual Add adds the norm's input to the
  MLP's output;
- "sandwich": as "pre", but the MLP's output goes through a second norm before that Add;
- "post": the residual Add adds the MLP's own input to its output, and a norm is all that
  reads the sum (a sum that the next residual Add reads too is a pre-norm model's stream,
  and the norm that reads it is the next sublayer's).
Anything else leaves the norm unknown (None) and says why in a note; so does a residual Add
of another value than the MLP's input when nothing between them is read as a norm.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

import numpy as np

from ..language.numbers import exact_decimal
from .found import FoundNorm, TensorRef

DEFAULT_EPS = Fraction(float(np.float32(1e-5)))  # the ops' epsilon attribute: a float32
INPUTS = {"Add": 2, "Sub": 2, "Mul": 2, "Div": 2, "Pow": 2}  # others: 1
NORM_OPS = {"LayerNormalization": "layernorm", "SimplifiedLayerNormalization": "rmsnorm",
            "RMSNormalization": "rmsnorm"}


@dataclass
class Norm:
    """A norm computed in the graph: `output` = N(`input`)."""

    kind: str
    input: str
    output: str
    eps: Fraction
    gamma: str | None
    beta: str | None
    node: Any  # the node it is named by (the op, or the decomposed subgraph's last node)
    inside: set[str] = field(default_factory=set)  # values it computes on the way


class Norms:
    """The norms of a graph (`onnx_graph.Graph`), by output and by input."""

    def __init__(self, graph: Any):
        self.graph = graph
        self.by_output: dict[str, Norm] = {}
        for node in graph.nodes:
            if node.output and node.op_type in ("Add", "Mul", "Div", *NORM_OPS):
                norm = self.at(node.output[0])
                if norm is not None:
                    self.by_output[norm.output] = norm
        inner: set[str] = set()  # the values a larger norm computes on its way
        for norm in self.by_output.values():
            inner |= norm.inside - {norm.output}
        self.by_input: dict[str, list[Norm]] = {}
        for norm in self.by_output.values():
            if norm.output not in inner:  # the outermost: γ and β included
                self.by_input.setdefault(norm.input, []).append(norm)

    # -- one norm ------------------------------------------------------------------------

    def node(self, value: str, *ops: str) -> Any:
        """The node of one of `ops` that computes `value`, its inputs all there."""
        node = self.graph.producer.get(self.graph.source(value))
        if node is None or node.op_type not in ops or node.domain not in ("", "ai.onnx"):
            return None
        need = INPUTS.get(node.op_type, 1)
        if len(node.input) < need or not all(node.input[:need]) or not node.output:
            return None
        return node

    def at(self, value: str) -> Norm | None:
        """The norm whose output is `value`, if one is."""
        value = self.graph.source(value)
        node = self.graph.producer.get(value)
        if node is None:
            return None
        if node.op_type in NORM_OPS and node.domain in ("", "ai.onnx"):
            return self._op(node, value)
        inside = {value}
        beta = None
        core = value
        add = self.node(core, "Add")
        if add is not None:
            split = self._stored_operand(add)
            if split is None:
                return None
            beta, core = split
            inside.add(self.graph.source(core))
        gamma = None
        mul = self.node(core, "Mul")
        if mul is not None:
            split = self._stored_operand(mul)
            if split is not None:
                gamma, core = split
                inside.add(self.graph.source(core))
        found = self._standardised(core, inside)
        if found is None:
            return None
        kind, x, eps = found
        if beta is not None and kind == "rmsnorm":
            return None  # an RMSNorm with a shift is no norm the language has
        return Norm(kind, x, value, eps, gamma, beta, node, inside)

    def _op(self, node: Any, value: str) -> Norm | None:
        attrs = {a.name: a for a in node.attribute}
        if "axis" in attrs and attrs["axis"].i != -1:
            return None
        if len(node.input) < 2 or value != node.output[0]:
            return None
        if "epsilon" in attrs and not math.isfinite(attrs["epsilon"].f):
            return None
        eps = Fraction(attrs["epsilon"].f) if "epsilon" in attrs else DEFAULT_EPS
        gamma = self._stored(node.input[1])
        beta = self._stored(node.input[2]) if len(node.input) > 2 and node.input[2] else None
        if gamma is None or (len(node.input) > 2 and node.input[2] and beta is None):
            return None
        return Norm(NORM_OPS[node.op_type], self.graph.source(node.input[0]), value, eps,
                    gamma, beta, node, {value})

    def _stored(self, value: str) -> str | None:
        value = self.graph.source(value)
        tensor = self.graph.stored(value)
        if tensor is None or len(tensor.dims) < 1 or any(int(n) != 1 for n in tensor.dims[:-1]):
            return None
        return value

    def _stored_operand(self, node: Any) -> tuple[str, str] | None:
        """(the stored vector, the other operand) of a binary node with one stored input."""
        for i in (0, 1):
            stored = self._stored(node.input[i])
            if stored is not None and self.graph.stored(node.input[1 - i]) is None:
                return stored, node.input[1 - i]
        return None

    def _standardised(self, value: str, inside: set[str]) -> tuple[str, str, Fraction] | None:
        """(kind, x, ε) when value = (x - mean x)/√(var x + ε) (layernorm) or x/√(mean x² + ε)
        (rmsnorm), over the last axis."""
        div = self.node(value, "Div", "Mul")
        if div is None:
            return None
        if div.op_type == "Div":
            numerator, root = div.input[0], self.node(div.input[1], "Sqrt")
        else:  # x·Reciprocal(√…), or x·(1/√…) (torch.onnx's rsqrt below opset 18)
            numerator = root = None
            for i in (0, 1):
                reciprocal = self.node(div.input[i], "Reciprocal")
                one = self.node(div.input[i], "Div")
                if reciprocal is not None:
                    numerator, root = div.input[1 - i], self.node(reciprocal.input[0], "Sqrt")
                    inside.add(self.graph.source(div.input[i]))
                elif one is not None and self._scalar(one.input[0]) == 1:
                    numerator, root = div.input[1 - i], self.node(one.input[1], "Sqrt")
                    inside.add(self.graph.source(div.input[i]))
        if root is None or numerator is None:
            return None
        add = self.node(root.input[0], "Add")
        if add is None:
            return None
        eps = None
        for i in (0, 1):
            const = self._scalar(add.input[i])
            if const is not None:
                eps, mean = const, add.input[1 - i]
        if eps is None:
            return None
        square = self._mean(mean)
        if square is None:
            return None
        squared = self._square(square)
        if squared is None or not self._same(squared, numerator):
            return None
        inside.update(self.graph.source(v) for v in (value, root.output[0], add.output[0],
                                                     mean, square))
        centred = self.node(numerator, "Sub")
        if centred is not None:
            x, average = centred.input[:2]
            if self._mean(average) is not None \
                    and self.graph.source(self._mean(average)) == self.graph.source(x):
                inside.update({self.graph.source(numerator), self.graph.source(average)})
                return "layernorm", self.graph.source(x), eps
        return "rmsnorm", self.graph.source(numerator), eps

    def _same(self, a: str, b: str) -> bool:
        """One value, or two Sub(x, ReduceMean(x)) nodes of one x (an exporter that centres
        twice)."""
        a, b = self.graph.source(a), self.graph.source(b)
        if a == b:
            return True
        subs = [self.node(v, "Sub") for v in (a, b)]
        if any(node is None for node in subs):
            return False
        xs = {self.graph.source(node.input[0]) for node in subs}
        means = [self._mean(node.input[1]) for node in subs]
        return len(xs) == 1 and all(m is not None and self.graph.source(m) in xs for m in means)

    def _scalar(self, value: str) -> Fraction | None:
        return self.graph.scalar(value)

    def _mean(self, value: str) -> str | None:
        """x when value = ReduceMean(x) over the last axis, keeping it."""
        node = self.node(value, "ReduceMean")
        if node is None:
            return None
        attrs = {a.name: a for a in node.attribute}
        if "keepdims" in attrs and attrs["keepdims"].i != 1:
            return None
        if "axes" in attrs:
            axes = list(attrs["axes"].ints)
        elif len(node.input) > 1 and node.input[1]:
            tensor = self.graph.stored(node.input[1])
            if tensor is None:
                return None
            from onnx import numpy_helper

            try:
                axes = numpy_helper.to_array(tensor).reshape(-1).tolist()
            except Exception:  # noqa: BLE001 - external or malformed: not read, no norm
                return None
        else:
            return None  # all axes
        return node.input[0] if axes == [-1] else None

    def _square(self, value: str) -> str | None:
        """x when value = Pow(x, 2) or Mul(x, x)."""
        node = self.node(value, "Pow", "Mul")
        if node is None:
            return None
        if node.op_type == "Mul":
            a, b = (self.graph.source(v) for v in node.input)
            return a if a == b else None
        return node.input[0] if self._scalar(node.input[1]) == 2 else None

    # -- beside a sublayer ---------------------------------------------------------------

    def residual_adds(self, value: str, other: str) -> list[Any]:
        """The Add nodes that add `other` to `value`."""
        graph = self.graph
        return [user for user in graph.users(value) if user.op_type == "Add"
                and {graph.source(v) for v in user.input} == {graph.source(value),
                                                              graph.source(other)}]

    def beside(self, mlp_in: str, mlp_out: str, dim: int, file: str
               ) -> tuple[FoundNorm | None, str]:
        """The norm of the sublayer that reads `mlp_in` and outputs `mlp_out`, with its
        placement; (None, why) when there is none or it cannot be told; (None, "") for a
        bare sublayer (its residual adds its own input, and no norm reads the sum)."""
        graph = self.graph
        first = self.at(mlp_in)
        placed: list[tuple[str, Norm, Norm | None]] = []
        if first is not None:
            if self.residual_adds(mlp_out, first.input):
                placed.append(("pre", first, None))
            for second in self.by_input.get(graph.source(mlp_out), []):
                if self.residual_adds(second.output, first.input):
                    placed.append(("sandwich", first, second))
        residual = self.residual_adds(mlp_out, mlp_in)
        if not placed:  # a post-norm sublayer may read the previous sublayer's norm
            for add in residual:
                placed += [("post", after, None)
                           for after in self.by_input.get(graph.source(add.output[0]), [])
                           if self._only_reader(after, add.output[0])]
        if len(placed) > 1:
            return None, ("norms in more than one placement around it "
                          f"({', '.join(p for p, _, _ in placed)}): its norm is not known")
        if placed:
            placement, norm, second = placed[0]
            wrong = [n for n in (norm, second) if n is not None and not self._fits(n, dim)]
            if wrong:
                return None, (f"a {wrong[0].kind} ({_named(wrong[0].node)}) whose scale or "
                              f"shift is not a vector of {dim}: its norm is not known")
            inner = self._found(second, placement, file, None) if second else None
            return self._found(norm, placement, file, inner), ""
        unread = self.node(mlp_in, *NORM_OPS)
        if first is None and unread is not None:
            return None, (f"the sublayer reads a {_named(unread)} that is not read as a norm "
                          "(an axis other than -1, a non-finite epsilon, or a scale or shift "
                          "that is no stored vector): its norm is not known")
        if first is not None:
            return None, (f"the sublayer reads the output of a {first.kind} "
                          f"({_named(first.node)}), but no residual Add of that norm's input "
                          "to the sublayer's output was found: its norm's placement is not "
                          "known")
        others = [user for user in graph.users(mlp_out) if user.op_type == "Add"
                  and not all(graph.stored(v) is not None for v in user.input
                              if graph.source(v) != graph.source(mlp_out))]
        if not residual and others:
            return None, ("the residual Add adds another value than the sublayer's input, and "
                          "what lies between them is not read as a norm: its norm is not "
                          "known")
        return None, ""

    def _only_reader(self, norm: Norm, value: str) -> bool:
        """Is `norm` all that reads `value`? (A post-norm's sum is read by its norm alone;
        a sum that the next residual Add reads too is the stream of a pre-norm model.)"""
        return all(any(out in norm.inside for out in user.output)
                   for user in self.graph.users(value))

    def _fits(self, norm: Norm, dim: int) -> bool:
        return all(int(self.graph.stored(name).dims[-1]) == dim
                   for name in (norm.gamma, norm.beta) if name is not None)

    def _found(self, norm: Norm, placement: str, file: str, second: FoundNorm | None
               ) -> FoundNorm:
        return FoundNorm(norm.kind, placement, exact_decimal(norm.eps),
                         TensorRef(file, norm.gamma) if norm.gamma else None,
                         TensorRef(file, norm.beta) if norm.beta else None, second,
                         source=f"{placement}: {_named(norm.node)}")


def _named(node: Any) -> str:
    return f"{node.op_type} node {node.name!r}" if node.name else f"a {node.op_type} node"
