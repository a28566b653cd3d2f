"""Claims about normalised sublayers (docs/rules.md, "Normalised sublayers"): a block with a
norm clause denotes the sublayer the model computes, and the checker re-derives which
question that is.

- post-norm (`N(S x + F(x))`, ε > 0, γ without a zero entry, depth 1): by Lemma P the claim
  is the same claim about a reduced block, which the checker builds itself: the bare block
  for RMSNorm, the projected block `(ΠS, ΠD, Πc)` for LayerNorm. The certificate
  `normalised sublayer` names the reduction (checked) and holds the reduced block's own
  certificate, which is verified against the checker's reduced block like any other.
- pre-norm and sandwich: never-proofs, `ray limit` or `gated pre-norm jacobian`
  (checker/ray_limit.py), for every width: an absorbable claim is refuted, a not-absorbable
  claim proved, and the min width is none.
"""

from __future__ import annotations

from collections.abc import Callable
from fractions import Fraction
from typing import Any

from . import ray_limit
from .exact import q, skip_rows, vec
from .ray_limit import Invalid, require

KIND = "normalised sublayer"
PROJECTED, BARE = "projected block", "bare block"
NEVER = {"never": True, "generically not": True, "sometimes": False, "always": False}


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


def reduced(block: dict[str, Any]) -> dict[str, Any]:
    """The block the claim is about: bare (RMSNorm), or projected (LayerNorm), without its
    norm clause. A projected block's weights must be embedded."""
    how = reduction(block)
    bare = {k: v for k, v in block.items() if k != "norm"}
    if how == BARE:
        return bare
    require(isinstance(block["layers"], list),
            "a projected block is built from embedded weights (this one is stored by source)")
    layers = []
    for layer in block["layers"]:
        out = dict(layer, down=_centre_columns([list(vec(r)) for r in layer["down"]]))
        if "down_bias" in layer:
            out["down_bias"] = [r[0] for r in _centre_columns([[q(v)] for v in
                                                              layer["down_bias"]])]
        layers.append(out)
    skip = {"matrix": _centre_columns([list(r) for r in skip_rows(block)])}
    return {**bare, "skip": skip, "layers": layers}


def verify(doc: dict[str, Any], weights: dict[str, Any],
           verify_reduced: Callable[[dict[str, Any], dict[str, Any]], Any]) -> str:
    """Check a document about a block with a norm clause; returns a note ("" for none), or
    the reduced document's verdict through `verify_reduced`."""
    claim, cert = doc["claim"], doc["certificate"]
    proved = doc["outcome"] == "proved"
    require(claim["kind"] != "equals", "'equals' on blocks with a norm clause is not decided")
    name = claim["block"]
    block = doc["blocks"][name]
    require("norm" in block, "only the claim's block may carry a norm clause")
    kind = cert.get("kind")
    if kind == KIND:
        require(set(cert) == {"kind", "reduction", "certificate"},
                "normalised sublayer fields: kind, reduction, certificate")
        require(cert["reduction"] == reduction(block),
                f"the reduction is the {reduction(block)}, not {cert['reduction']!r}")
        require(claim["kind"] in ("absorbable", "min_width"),
                "a reduced sublayer answers absorbable and min width claims")
        inner = cert["certificate"]
        require(isinstance(inner, dict), "the reduced block's certificate is not an object")
        return verify_reduced({**doc, "blocks": {name: reduced(block)}, "certificate": inner},
                              weights)
    require(doc["outcome"] in ("proved", "refuted"), "a never-proof decides its claim")
    note = ""
    if kind == ray_limit.KIND:
        layer = (block["layers"][0] if isinstance(block["layers"], list)
                 else (weights.get(name) or [None])[0])
        require(layer is not None, "the block's weights are not embedded: the checker reads "
                                   "them from the files the certificate names (absorb-prove "
                                   "check)")
        ray_limit.check(block, layer, cert)
        if ray_limit.keeps_norm_refuted(block, vec(cert["x0"])):
            note = "keeping the norm does not help either: S x0 ≠ 0"
    elif kind == ray_limit.GATED_KIND:
        ray_limit.check_gated(block, cert)
    else:
        raise Invalid(f"a {kind!r} certificate does not decide a normalised sublayer")
    # A never-proof: no plain stack of any width or depth equals the sublayer.
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
    return note
