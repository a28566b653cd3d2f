"""Witness cross-check: every absorbable verdict's plain weights are evaluated against the
block at N sampled points in float64. Exact proofs are the verdict; this is the independent
sanity check, and a figure above tolerance means a bug (the outcome becomes an error).

The error is measured against the size of what float evaluation sums, not of the result:
`x + 3e23 relu(x) - (3e23/7) relu(7x)` is exactly `x`, yet its float value is off by about
1e7 |x|. Against that scale, rounding is at most about eps x (number of terms) per output, so
a figure above TOLERANCE is a real difference, and one below it is all float64 can tell."""

from __future__ import annotations

from dataclasses import dataclass, replace
from fractions import Fraction
from typing import Any, TextIO

import numpy as np

from ..checker.kernel.contract import CONSTRUCTIONS, FLIP_RULES, Check, Kind
from ..decide import progress
from ..model.blocks import Block
from .backends import CHUNK, Backend
from .floatblock import (
    FloatBlock,
    from_block,
    layer_floats,
    plain_from_json,
    to_float,
    with_layers,
)
from .points import BATCH, batches

TOLERANCE = 1e-8  # on |P(x) − B(x)| / (size of the terms summed for P(x) and B(x)), float64
ROUNDING = 16 * float(np.finfo(np.float64).eps)  # per term summed, with room to spare
DEFAULT_POINTS = 100_000
# Points × weights of one comparison (about 2 s on one core): a witness of millions of
# weights (a large block's construction) is checked at fewer points, never fewer than
# MIN_POINTS; the points actually used are reported.
WORK = 2_000_000_000
MIN_POINTS = 1_000


def affordable(total: int, weights: int, floor: int = MIN_POINTS) -> int:
    """`total` points, fewer (at least `floor`) when points × weights would pass WORK."""
    return min(total, max(floor, WORK // max(1, weights)))


def weight_count(block: FloatBlock) -> int:
    return sum(int(array.size) for layer in block.layers for array in layer.values())


@dataclass(frozen=True)
class CrossCheck:
    points: int
    max_abs_error: float
    max_rel_error: float
    backend: str
    device: str
    tolerance: float = TOLERANCE

    @property
    def ok(self) -> bool:
        return bool(self.max_rel_error <= self.tolerance)

    def as_json(self) -> dict[str, Any]:
        return {"points": self.points, "max_abs_error": float(f"{self.max_abs_error:.3g}"),
                "max_rel_error": float(f"{self.max_rel_error:.3g}"),
                "backend": self.backend, "device": self.device,
                "tolerance": float(f"{self.tolerance:.3g}")}

    def phrase(self) -> str:
        return (f"cross-check {self.points} points, max error {self.max_abs_error:.2g} "
                f"(rel {self.max_rel_error:.2g})")


_WEIGHTS = ("up", "gate", "down")  # matrices: nothing below them holds a witness


def pairs(block: Block, certificate: Any) -> list[tuple[FloatBlock, FloatBlock]]:
    """(reference, witness) for every witness inside a certificate. A family's example
    member is the reference for the witness stored beside it. The block itself is converted
    only when a witness needs it (a refutation's block may be beyond float range)."""
    found: list[tuple[FloatBlock, FloatBlock]] = []
    itself: list[FloatBlock] = []  # the block in floats, once converted

    def own() -> FloatBlock | None:
        if block.is_concrete and not itself:
            itself.append(from_block(block))
        return itself[0] if itself else None

    def walk(node: Any, example: FloatBlock | None, of: Block) -> None:
        if isinstance(node, dict):
            if node.get("check") == Check.LAYERS_ABSORBED and of.layers is not None \
                    and isinstance(node.get("per_layer"), list):
                # each layer's own certificate, against that layer alone (equal layers
                # compose to equal stacks)
                for layer, part in zip(of.layers, node["per_layer"], strict=False):
                    single = replace(of, depth=1, layers=(layer,))
                    walk(part, from_block(single), single)
                return
            if "example" in node and isinstance(node["example"], dict):
                walk(node["example"].get("witness"),
                     with_layers(of, node["example"]["layers"]), of)
            if node.get("kind") == Kind.WITNESS:
                # large blocks' witnesses store no layers: rebuilt from the block (doubles:
                # Δ; the unique solution's flips: J; the other constructions: nothing more)
                reference = example or own()
                if reference is not None and "layers" in node:
                    found.append((reference, plain_from_json(of, node["layers"])))
                elif reference is not None and node.get("check") == Check.DOUBLES:
                    found.append((reference, doubled(of, reference, node)))
                elif reference is not None and node.get("check") == Check.ROWS_NEGATED:
                    found.append((reference, flipped(of, reference, node)))
                elif reference is not None and node.get("check") in CONSTRUCTIONS:
                    found.append((reference, construction(of, reference)))
            for key, value in node.items():
                if key != "example" and key not in _WEIGHTS:
                    walk(value, example, of)
        elif isinstance(node, list):
            for value in node:
                walk(value, example, of)

    walk(certificate, None, block)
    return found


def doubled(block: Block, reference: FloatBlock, certificate: dict[str, Any]) -> FloatBlock:
    """The doubles construction of a large block (decide/doubles.py) in floats, from the
    certificate's neurons Δ: W = −S U_Δ⁻¹/(2a) by a float64 solve (any d; `doubles` builds it
    exactly only for export), own down columns d_i − w_i, new neurons (−u_i, −β_i, w_i), down
    bias c + 2a·W β_Δ. Float error about cond(U_Δ)·eps, far below the tolerance for the
    well-conditioned U_Δ of trained and random blocks; a wrong Δ or sign is off by O(1)."""
    assert block.layers is not None
    layer = layer_floats(block.layers[0])
    neurons = np.array([int(i) for i in certificate["neurons"]], dtype=np.int64)
    a = to_float(Fraction(certificate["a"]))
    skip = (reference.skip_matrix if reference.skip_matrix is not None
            else reference.skip_scale * np.eye(reference.dim))
    rows = layer["up"][neurons]
    try:
        w = np.linalg.solve(rows.T, -skip.T / (2 * a)).T  # W U_Δ = −S/(2a)
    except np.linalg.LinAlgError:  # a singular U_Δ (a prover bug): the figure will say so
        w = np.linalg.lstsq(rows.T, -skip.T / (2 * a), rcond=None)[0].T
    out = dict(layer)
    out["up"] = np.concatenate([layer["up"], -rows])
    down = layer["down"].copy()
    down[:, neurons] -= w
    out["down"] = np.concatenate([down, w], axis=1)
    if "up_bias" in layer:
        betas = layer["up_bias"][neurons]
        out["up_bias"] = np.concatenate([layer["up_bias"], -betas])
        out["down_bias"] = layer["down_bias"] + 2 * a * (w @ betas)
    return FloatBlock(reference.scalar, reference.gated, reference.dim, 0.0, None, (out,))


def flipped(block: Block, reference: FloatBlock, node: dict[str, Any]) -> FloatBlock:
    """The §4 flip witness in floats: rows of U (and up biases) in J negated, D kept, the
    down bias c + 2a·Σ_J β_i d_i, skip 0 (decide/unique_subset.flipped, exactly). Built on
    every neuron of the block (J numbers the block's neurons; the reference may have dropped
    neurons whose down column is 0 in floats)."""
    assert block.layers is not None
    own = layer_floats(block.layers[0])
    flips = [int(i) - 1 for i in node["flips"]]
    if "rule" in node:
        return FloatBlock(reference.scalar, reference.gated, reference.dim, 0.0, None,
                          (flip_set(own, node["rule"], float(Fraction(node["constant"])),
                                    flips),))
    a = float(Fraction(node["a"]))
    layer = dict(own)
    layer["up"] = own["up"].copy()
    layer["up"][flips] *= -1
    if "up_bias" in own:
        beta = own["up_bias"]
        layer["up_bias"] = beta.copy()
        layer["up_bias"][flips] *= -1
        shift = 2 * a * (own["down"][:, flips] @ beta[flips])
        layer["down_bias"] = own.get("down_bias", np.zeros(reference.dim)) + shift
    return FloatBlock(reference.scalar, reference.gated, reference.dim, 0.0, None, (layer,))


def flip_set(own: dict[str, np.ndarray], rule: str, value: float, flips: list[int]
             ) -> dict[str, np.ndarray]:
    """§8.2's witness at scale in floats (decide/flips_large.flipped, exactly): relu² negates
    the rows of U, β_i and d_i (c′ = c + Σ_J β_i² d_i); gated O(a)+N the gate rows and γ_i
    (c′ = c + 2a Σ_J γ_i β_i d_i); Og(c) the gate rows, γ_i and d_i (c′ = c + 2c Σ_J β_i d_i;
    bias-free glu: the gate rows and d_i, no bias)."""
    layer = {name: array.copy() for name, array in own.items()}
    keyed = "up" if rule == FLIP_RULES["relu^2"] else "gate"
    layer[keyed][flips] *= -1
    if rule != FLIP_RULES["gated O(a)+N"]:
        layer["down"][:, flips] *= -1
    if "up_bias" not in own:  # a bias-free glu block (§5): its witness has no biases either
        return layer
    beta = own["up_bias"][flips]
    layer[keyed + "_bias"][flips] *= -1
    if rule == FLIP_RULES["relu^2"]:
        factor = beta * beta
    elif rule == FLIP_RULES["Og(c)"]:
        factor = 2 * value * beta
    else:
        factor = 2 * value * own["gate_bias"][flips] * beta
    layer["down_bias"] = own["down_bias"] + own["down"][:, flips] @ factor
    return layer


def construction(block: Block, reference: FloatBlock) -> FloatBlock:
    """The plain block of a large block's construction (decide/spare.py): the reference's own
    (live) neurons, then `large.added_neurons`, skip 0."""
    from ..decide import large

    # By object identity: the d² entries for S = cI are a few shared Fractions (hashing a
    # Fraction costs more than converting it); the arrays keep every object alive meanwhile.
    memo: dict[int, float] = {}

    def floats(values: np.ndarray) -> np.ndarray:
        flat = [memo[id(v)] if id(v) in memo else memo.setdefault(id(v), to_float(v))
                for v in values.ravel().tolist()]
        return np.array(flat, dtype=np.float64).reshape(values.shape)

    added = {name: floats(values) for name, values in large.added_neurons(block).items()}
    [own] = reference.layers
    k = added["up"].shape[0]
    layer = dict(own)
    for name in ("up", "gate", "up_bias", "gate_bias"):
        extra = added.get(name)
        if name not in own and extra is None:
            continue
        mine = own.get(name, np.zeros(own["up"].shape[0]))
        if extra is None:
            extra = np.zeros((k,) + mine.shape[1:])
        layer[name] = np.concatenate([mine, extra])
    layer["down"] = np.concatenate([own["down"], added["down"]], axis=1)
    return FloatBlock(reference.scalar, reference.gated, reference.dim, 0.0, None, (layer,))


def compare(reference: FloatBlock, witness: FloatBlock, total: int, engine: Backend,
            progress: TextIO | None = None) -> CrossCheck:
    """Worst |P − B| and worst |P − B| / (scale of P + scale of B) over `total` points."""
    normals = reference.normals() + witness.normals()
    bar = _bar(total, progress)
    worst_abs = worst_rel = 0.0
    rows = max(1, min(BATCH, CHUNK // max(1, reference.dim)))  # bounded memory for wide d
    for x in batches(reference.dim, normals, total, batch=rows):
        want, want_size = engine.evaluate_scaled(reference, x)
        got, got_size = engine.evaluate_scaled(witness, x)
        diff = np.abs(got - want)
        worst_abs = max(worst_abs, float(diff.max(initial=0.0)))
        # both sizes are 0 only where every term is 0, and then so is diff
        size = np.maximum(want_size + got_size, np.finfo(np.float64).tiny)
        worst_rel = max(worst_rel, float((diff / size).max(initial=0.0)))
        if bar is not None:
            bar.update(len(x))
    if bar is not None:
        bar.close()
    terms = max(reference.terms, witness.terms) * len(reference.layers + witness.layers)
    return CrossCheck(total, worst_abs, worst_rel, engine.name, engine.device,
                      max(TOLERANCE, ROUNDING * terms))


def _bar(total: int, stream: TextIO | None) -> Any:
    """A tqdm progress bar on long runs, only on an interactive stream."""
    if stream is None or total < 1_000_000:
        return None
    return progress.bar("cross-check", "pt", total, stream, delay=0.0)


def crosscheck(block: Block, certificate: Any, total: int, engine: Backend,
               progress: TextIO | None = None) -> CrossCheck | None:
    """The worst figures over every witness in the certificate (None when there is none)."""
    found = pairs(block, certificate)
    if not found:
        return None
    results = [compare(ref, wit, affordable(total, weight_count(ref) + weight_count(wit)),
                       engine, progress) for ref, wit in found]
    worst = max(results, key=lambda r: r.max_rel_error / r.tolerance)
    return CrossCheck(sum(r.points for r in results), max(r.max_abs_error for r in results),
                      worst.max_rel_error, engine.name, engine.device, worst.tolerance)
