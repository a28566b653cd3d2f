"""Find the MLP sublayers of an ONNX model by graph pattern.

The pattern: a linear layer (MatMul with a stored weight, then an Add of a stored bias; or
Gemm), an activation subgraph, a second linear layer:

    x → MatMul(W1) → Add(b1) → σ → MatMul(W2) → Add(b2)

or gated: σ(linear_gate(x)) ⊙ linear_up(x) → linear_down (swiglu, geglu, reglu, glu).
The graph is read by `onnx_graph.py` (stored tensors, linear layers), σ recognised by
`onnx_sigma.py`, the norms around a sublayer placed by `onnx_norms.py`. A block is named
after its tensors, never after its nodes.

Scan asks whether a skip could be absorbed, so each MLP is a sublayer with an identity
skip; a block whose output is not seen feeding an Add (a residual) says so in its notes.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from ..weights import onnx_file
from .found import FoundBlock, FoundNorm, ScanError, Skipped
from .onnx_graph import Graph, Linear
from .onnx_sigma import Mismatch

GATED = {"silu": "swiglu", "gelu": "geglu", "relu": "reglu", "sigmoid": "glu"}
KEYWORDS = {"absorbable", "activation", "always", "bias", "block", "claim", "depth", "dim",
            "down", "down_bias", "equals", "gate", "gate_bias", "generically", "is", "layer",
            "load", "min", "never", "none", "not", "of", "query", "skip", "sometimes", "up",
            "up_bias", "width", "at", "identity"}


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
