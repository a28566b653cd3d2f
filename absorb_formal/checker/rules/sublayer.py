"""Claims about normalised sublayers (docs/rules.md, "Normalised sublayers"): a block with a
norm clause denotes the sublayer the model computes, and the checker re-derives which
question that is.

- post-norm (`N(S x + F(x))`, ε > 0, γ without a zero entry, depth 1): by Lemma P the claim
  is the same claim about a reduced block, which the checker builds itself: the bare block
  for RMSNorm, the projected block `(ΠS, ΠD, Πc)` for LayerNorm. The certificate
  `normalised sublayer` names the reduction (checked) and holds the reduced block's own
  certificate, which is verified against the checker's reduced block like any other.
- pre-norm and sandwich: never-proofs, `ray limit` or `gated pre-norm jacobian`
  (checker/rules/ray_limit.py), for every width: an absorbable claim is refuted, a not-absorbable
  claim proved, and the min width is none.
"""

from __future__ import annotations

from collections.abc import Callable
from fractions import Fraction
from typing import Any

from ..kernel.contract import Invalid, require
from ..kernel.integers import integers
from ..kernel.linalg import q, skip_rows, vec
from . import ray_limit
from .truths import NEVER

PROJECTED, BARE = "projected block", "bare block"


def reduction(block: dict[str, Any]) -> str:
    """Which block a post-norm claim is about (Lemma P), after its preconditions."""
    placement, parts = ray_limit.norm_parts(block)
    require(placement == "post", f"a {placement}-norm sublayer is not reduced to a block")
    require(block["depth"] == 1, "a norm clause is on a block of depth 1")
    ray_limit.usable(parts[0], block["dim"])
    return BARE if parts[0]["kind"] == "rmsnorm" else PROJECTED


def _centre_columns(rows: list[list[Fraction]]) -> list[list[str]]:
    """Π M: each column minus its mean."""
    d = len(rows)
    means = [sum(col, Fraction(0)) / d for col in zip(*rows, strict=True)]
    return [[str(v - mu) for v, mu in zip(row, means, strict=True)] for row in rows]


class Projected:
    """Π M for an exact d × m matrix M that the checker read from a file (each column minus
    its mean), with the reading interface of `modular.ExactMatrix`; every value is derived
    exactly from M's own (residues: M mod p minus the column sums times d⁻¹ mod p)."""

    def __init__(self, base: Any):
        self.base = base
        self.shape = tuple(base.shape)
        self._sums: list[Fraction] | None = None

    def _means(self) -> list[Fraction]:
        if self._sums is None:
            ints, den = integers(self.base)
            self._sums = [Fraction(int(v), den) for v in ints.sum(axis=0)]
        return [s / self.shape[0] for s in self._sums]

    def column(self, j: int) -> list[Fraction]:
        col = list(self.base.column(j))
        mean = sum(col, Fraction(0)) / len(col)
        return [v - mean for v in col]

    def row(self, i: int) -> list[Fraction]:
        return [v - mu for v, mu in zip(self.base.row(i), self._means(), strict=True)]

    def residue_matrix(self, p: int) -> Any:
        d = self.shape[0]
        require(d % p != 0, f"{p} divides d: Π has no residue mod {p}")
        whole = self.base.residue_matrix(p)
        sums = whole.sum(axis=0) % p  # d·p < 2^63 for p < 2^31, d < 2^32
        return (whole - sums * pow(d, -1, p) % p) % p

    def residue_block(self, p: int, rows: list[int] | None, cols: list[int] | None) -> Any:
        import numpy as np

        index = np.ix_(range(self.shape[0]) if rows is None else rows,
                       range(self.shape[1]) if cols is None else cols)
        return self.residue_matrix(p)[index]

    def residues(self, p: int, index: Any) -> list[int]:
        whole = self.residue_matrix(p)
        picked = whole[index] if isinstance(index, int) else whole[:, index[1]]
        return [int(v) for v in picked]

    def nonzero(self) -> Any:
        ints, den = integers(self.base)
        d = self.shape[0]
        return ((ints * d - ints.sum(axis=0)) != 0).astype(bool)  # d·M − 1·(1ᵀM), exactly


def reduced_weights(layers: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The weights of a block stored by source, projected: down ← ΠD (read lazily)."""
    return [{**layer, "down": Projected(layer["down"])} for layer in layers]


def reduced(block: dict[str, Any]) -> dict[str, Any]:
    """The block the claim is about: bare (RMSNorm), or projected (LayerNorm), without its
    norm clause. A projected block stored by source keeps its sources: its weights are
    projected by `reduced_weights` as the checker reads them."""
    how = reduction(block)
    bare = {k: v for k, v in block.items() if k != "norm"}
    if how == BARE:
        return bare
    skip = {"matrix": _centre_columns([list(r) for r in skip_rows(block)])}
    if not isinstance(block["layers"], list):
        return {**bare, "skip": skip}
    layers = []
    for layer in block["layers"]:
        out = dict(layer, down=_centre_columns([list(vec(r)) for r in layer["down"]]))
        if "down_bias" in layer:
            out["down_bias"] = [r[0] for r in _centre_columns([[q(v)] for v in
                                                              layer["down_bias"]])]
        layers.append(out)
    return {**bare, "skip": skip, "layers": layers}


def reduce(doc: dict[str, Any], weights: dict[str, Any], cert: dict[str, Any],
           verify_reduced: Callable[[dict[str, Any], dict[str, Any]], Any]) -> Any:
    """A `normalised sublayer` (post-norm, Lemma P): the reduced block's document, with the
    inner certificate, verified by `verify_reduced` (its verdict is returned)."""
    claim = doc["claim"]
    name = claim["block"]
    block = doc["blocks"][name]
    require(cert["reduction"] == reduction(block),
            f"the reduction is the {reduction(block)}, not {cert['reduction']!r}")
    require(claim["kind"] in ("absorbable", "min_width")
            or (claim["kind"] == "family" and cert["reduction"] == BARE),
            "a reduced sublayer answers absorbable and min width claims (and family "
            "claims when it is the bare block)")
    inner = cert["certificate"]
    require(isinstance(inner, dict), "the reduced block's certificate is not an object")
    small = reduced(block)
    if name in weights and cert["reduction"] == PROJECTED:
        weights = {**weights, name: reduced_weights(weights[name])}
    return verify_reduced({**doc, "blocks": {name: small}, "certificate": inner}, weights)


def ray(doc: dict[str, Any], weights: dict[str, Any], cert: dict[str, Any]) -> str:
    """A `ray limit` (pre-norm, sandwich): never absorbable; the claim's answer follows. A note
    ("" for none) when keeping the norm does not help either."""
    _decided(doc)
    name = doc["claim"]["block"]
    block = doc["blocks"][name]
    layer = (block["layers"][0] if isinstance(block["layers"], list)
             else (weights.get(name) or [None])[0])
    require(layer is not None, "the block's weights are not embedded: the checker reads "
                               "them from the files the certificate names (absorb-prove "
                               "check)")
    ray_limit.check(block, layer, cert)
    _never(doc)
    if ray_limit.keeps_norm_refuted(block, vec(cert["x0"])):
        return "keeping the norm does not help either: S x0 ≠ 0"
    return ""


def gated(doc: dict[str, Any], cert: dict[str, Any]) -> str:
    """A `gated pre-norm jacobian`: never absorbable; the claim's answer follows."""
    _decided(doc)
    ray_limit.check_gated(doc["blocks"][doc["claim"]["block"]], cert)
    _never(doc)
    return ""


def _decided(doc: dict[str, Any]) -> None:
    require(doc["outcome"] in ("proved", "refuted"), "a never-proof decides its claim")


def _never(doc: dict[str, Any]) -> None:
    """A never-proof: no plain stack of any width or depth equals the sublayer, so the claim's
    outcome must be the one that follows."""
    claim = doc["claim"]
    proved = doc["outcome"] == "proved"
    if claim["kind"] == "family":
        truth = NEVER[claim["modality"]]
        require(truth == proved, f"the certificate shows '{claim['modality']}' is {truth}")
    elif claim["kind"] == "absorbable":
        require(proved == (claim["modality"] == "not"),
                "the certificate shows the sublayer is not absorbable at any width")
    elif claim["kind"] == "min_width":
        require(proved == (claim["min_width"] is None),
                "the certificate shows min width none")
    else:
        raise Invalid(f"unknown claim kind {claim['kind']!r}")
