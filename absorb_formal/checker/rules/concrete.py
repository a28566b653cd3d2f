"""Concrete blocks (docs/rules.md, "Depth (stacks)", "Names the tool prints"): the checker's
side of the prover's decide/concrete.py — what every witness with stored layers must satisfy,
the witnesses of stacks, and the certificates made of parts (`minimal width`, `minimal width
bounds`).

A witness with stored layers has a width between 1 and the claim's, the block's depth, every
field and shape of a plain layer (with biases exactly when the block has them), and no idle
neuron that is not all zero: otherwise its weights would be fields nobody checks. What the
layers must then satisfy is the witness's `check` (rules/width.py, linear.py, glu.py,
flips.py, generic.py, and `itself`, `stack_forms` here). The parts of a composite are
verified by the caller's `Verifier`s, as certificates of their own.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..kernel import linalg as exact
from ..kernel.contract import Invalid, Kind, require
from ..kernel.linalg import q, whole
from ..lemmas import relied as lemmas
from . import canonical as forms
from .modular import Layers

# verifies a part (a certificate) of a block at a width, with the block's read weights
Verifier = Callable[[dict[str, Any], int, dict[str, Any], Layers | None], None]


def stored_layers(block: dict[str, Any], width: int, cert: dict[str, Any], idle: bool) -> None:
    """The stored plain stack: width 1..`width`, the block's depth, each layer's fields and
    shapes, and (`idle`) every neuron that cannot affect the output all zero."""
    require(block["layers"] is not None, "a witness needs a concrete block")
    layers = cert["layers"]
    size = whole(cert["width"])
    require(1 <= size <= width, f"the witness has width {size}, not 1..{width}")
    require(len(layers) == block["depth"], "the witness has the wrong depth")
    for layer in layers:
        layer_shapes(block, layer, size)
        if idle:
            _idle_neurons_are_zero(block["activation"], layer)


def layer_shapes(block: dict[str, Any], layer: dict[str, Any], size: int) -> None:
    """A layer of `size` neurons for the block: its fields and every shape."""
    d = block["dim"]
    _bias_shapes(block, layer, size)
    up, down = layer["up"], layer["down"]
    require(len(up) == size and all(len(r) == d for r in up), "witness 'up' shape")
    require(len(down) == d and all(len(r) == size for r in down), "witness 'down' shape")
    if block["activation"]["gated"]:
        gate = layer["gate"]
        require(len(gate) == size and all(len(r) == d for r in gate), "witness 'gate' shape")


def _bias_shapes(block: dict[str, Any], layer: dict[str, Any], size: int) -> None:
    """A witness of a biased block carries every bias (docs/rules.md §8), of the right length;
    one of a bias-free block carries none."""
    keys = {"up", "down"} | ({"gate"} if block["activation"]["gated"] else set())
    if block.get("bias"):
        keys |= {f"{k}_bias" for k in keys}
    require(set(layer) == keys, f"witness layer fields {sorted(layer)}, expected {sorted(keys)}")
    for key in keys & {"up_bias", "gate_bias", "down_bias"}:
        length = block["dim"] if key == "down_bias" else size
        require(isinstance(layer[key], list) and len(layer[key]) == length,
                f"witness '{key}' shape")


def _idle_neurons_are_zero(act: dict[str, Any], layer: dict[str, Any]) -> None:
    """A neuron that cannot affect the output (zero down column; zero up row and up bias when
    gated or σ(0) = 0) must be all zero (its biases too): otherwise its weights would be
    fields nobody checks."""
    def nonzero(rows: list[list[Any]]) -> list[list[bool]]:  # algebraic entries are non-zero
        return [[not isinstance(v, str) or q(v) != 0 for v in row] for row in rows]

    up, down = nonzero(layer["up"]), nonzero(layer["down"])
    gate = nonzero(layer["gate"]) if "gate" in layer else None
    # §8: a neuron with u = 0 and a bias β ≠ 0 is a constant, not idle
    biases = [nonzero([layer[n]])[0] if n in layer else [False] * len(up)
              for n in ("up_bias", "gate_bias")]
    for i, u in enumerate(up):
        column = [row[i] for row in down]
        flat = not any(u) and not biases[0][i]
        idle = not any(column) or (flat and (gate is not None or lemmas.holds(act, "zero")))
        if idle:
            require(flat and not any(column) and (gate is None or not any(gate[i]))
                    and not biases[1][i], f"witness neuron {i + 1} is idle but not zero")


def itself(block: dict[str, Any], layers: list[dict[str, Any]]) -> None:
    """`the block itself (skip none), zero-padded`: the stored layers are the block's own,
    padded with zero neurons (and zero hidden biases)."""
    require(exact.skip_is_zero(block), "only a block with skip none is its own witness")
    for mine, theirs in zip(block["layers"], layers, strict=True):
        for name in ("up_bias", "gate_bias"):  # biased (docs/rules.md §8): padded with zeros
            if name in theirs:
                bias = exact.vec(mine.get(name) or ["0"] * block["width"])
                padded = exact.vec(theirs[name])
                require(padded[: len(bias)] == bias and not any(padded[len(bias):]),
                        f"padded '{name}'")
        if "down_bias" in theirs:
            require(exact.vec(theirs["down_bias"])
                    == exact.vec(mine.get("down_bias") or ["0"] * block["dim"]),
                    "the witness's 'down_bias' is not the block's")
        for name in ("up", "gate"):
            if name in mine:
                a, b = exact.mat(mine[name]), exact.mat(theirs[name])
                require(b[: len(a)] == a and exact.is_zero(b[len(a):]), f"padded '{name}'")
        a, b = exact.mat(mine["down"]), exact.mat(theirs["down"])
        m = len(a[0])
        require(all(rb[:m] == ra and not any(rb[m:]) for ra, rb in zip(a, b, strict=True)),
                "padded 'down'")


def stack_forms(block: dict[str, Any], layers: list[dict[str, Any]]) -> None:
    """`each layer's canonical form equals the block layer's` (stacks, §8.4 with biases)."""
    forms.same_forms(block, layers, single=False)


def per_layer(block: dict[str, Any], width: int, cert: dict[str, Any], layers: Layers | None,
              witness: Verifier) -> None:
    """A stack (depth ≥ 2) whose every layer, alone as a depth-1 block with the block's σ,
    S and biases, is absorbed at the certificate's width by its own certificate (checked
    here as any depth-1 witness): the plain layers, padded with zero neurons, compose to a
    plain stack equal to the block (docs/rules.md "Depth (stacks)"). `witness` checks a
    depth-1 witness."""
    depth = block["depth"]
    require(depth >= 2, "a stack of per-layer certificates needs depth >= 2")
    require(isinstance(block["layers"], list) and len(block["layers"]) == depth,
            "a stack of per-layer certificates needs a concrete block with embedded layers")
    size = whole(cert["width"], "width")
    require(1 <= size <= width, f"the witness has width {size}, not 1..{width}")
    parts = cert["per_layer"]
    require(isinstance(parts, list) and len(parts) == depth,
            f"per_layer holds {len(parts) if isinstance(parts, list) else 'no'} certificates "
            f"for {depth} layers")
    for n, part in enumerate(parts):
        require(isinstance(part, dict), f"per_layer[{n}] is not a certificate")
        single = dict(block, depth=1, layers=block["layers"][n:n + 1])
        try:
            witness(single, size, part, None if layers is None else layers[n:n + 1])
        except Invalid as error:
            raise Invalid(f"layer {n + 1}: {error}") from error


def min_width(block: dict[str, Any], cert: dict[str, Any], layers: Layers | None,
              witness: Verifier, refutation: Verifier) -> int:
    """A `minimal width` W: a witness at W and a refutation at W − 1 (none when W = 1)."""
    value = whole(cert["width"])
    witness(block, value, cert["witness"], layers)
    if value > 1:
        require(cert["below"] is not None, "no refutation below the minimal width")
        refutation(block, value - 1, cert["below"], layers)
    else:
        require(cert["below"] is None, "nothing lies below width 1")
    return value


def bounds(block: dict[str, Any], cert: dict[str, Any], layers: Layers | None,
           witness: Verifier, refutation: Verifier) -> tuple[int, int]:
    """`minimal width bounds` (lower, upper): a refutation at lower − 1 (none when lower is 1)
    and a witness at upper, both checked like a decided claim's."""
    require(cert.get("kind") == Kind.MINIMAL_WIDTH_BOUNDS, "not min width bounds")
    lo, hi = whole(cert["lower"]), whole(cert["upper"])
    require(1 <= lo < hi, "the bounds do not leave the min width open")
    if lo > 1:
        require(cert["below"] is not None, "no refutation below the lower bound")
        refutation(block, lo - 1, cert["below"], layers)
    else:
        require(cert["below"] is None, "nothing lies below width 1")
    require(whole(cert["above"]["width"]) == hi, "the witness is not at the upper bound")
    witness(block, hi, cert["above"], layers)
    return lo, hi
