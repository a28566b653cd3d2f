"""Which certificates may be about blocks with biases (docs/rules.md §8, "Blocks with
biases"): the paper's rules change with biases (T1, T2 and T4 fail), so a claim about a biased
block stands only on a certificate whose check re-derives it with the biases kept. Each
registry entry (checker/dispatch.py) gives its reasons (`Bias`); `allowed` says under which
conditions each reason counts, and how the parts of a minimal width may pair up.
"""

from __future__ import annotations

from collections.abc import Callable
from enum import Enum
from typing import Any

from .kernel.contract import Kind
from .rules import families, flips, unique_subset


class Bias(Enum):
    """Why a certificate may be about blocks with biases (docs/rules.md §8): its check re-derives
    the claim with biases kept. `allowed` says under which conditions each reason counts; a
    certificate with none is refused for biased blocks."""

    KEYS = "§8.1: affine keys and γ (ungated blocks)"
    FLIPS = "§8.2: flip sets"
    CONSTRUCTION = "§8: linear neurons, square pairs and quadruples"
    ITSELF = "§8: a plain block is its own witness"
    RULES = "§8, §8.3: T3, T2∞ and the family table with biases"
    GENERIC = "§8.4: the generic engine (absorbable and min width claims)"
    STACK = "§8.4: a stack of per-layer certificates"
    DEPTH = "§9: the half-activation bound, any depth"


Reasons = Callable[[dict[str, Any]], frozenset[Bias]]


def none(cert: dict[str, Any]) -> frozenset[Bias]:
    return frozenset()


def always(*reasons: Bias) -> Reasons:
    return lambda cert: frozenset(reasons)


def section(*reasons: Bias) -> Reasons:
    """The reasons, and FLIPS when the certificate is a §8.2 one (its `section`)."""
    return lambda cert: frozenset(reasons) | (
        {Bias.FLIPS} if cert.get("section") == flips.SECTION else set())


def flip_rule(*reasons: Bias) -> Reasons:
    """The reasons, and FLIPS when the certificate names a §8.2 row as its rule."""
    return lambda cert: frozenset(reasons) | (
        {Bias.FLIPS} if unique_subset.flip_rule(cert) else set())


def family_rule(cert: dict[str, Any]) -> frozenset[Bias]:
    """RULES for the family rules that hold with biases (rules/families.py)."""
    return frozenset({Bias.RULES} if cert.get("rule") in families.BIASED_FAMILY_RULES else ())


def allowed(doc: dict[str, Any], reasons: Callable[[Any], frozenset[Bias]]) -> bool:
    """docs/rules.md §8: a claim about biased blocks stands only on a certificate whose check
    re-derives biases — one with a reason (`Bias`) that holds here: KEYS for ungated blocks,
    FLIPS for absorbable claims (or as a part), GENERIC for absorbable and min width claims,
    STACK when every layer's certificate is one, and a minimal width (or its bounds) when
    its parts are, as docs/rules.md §8 pairs them."""
    claim, cert = doc["claim"], doc["certificate"]
    ungated = not any(b["activation"]["gated"] for b in doc["blocks"].values())
    kind = cert.get("kind")
    if kind in (Kind.MINIMAL_WIDTH, Kind.MINIMAL_WIDTH_BOUNDS):
        above = cert["witness" if kind == Kind.MINIMAL_WIDTH else "above"]
        below = cert["below"]
        return ((ungated and all(Bias.KEYS in reasons(part) for part in (above, below)
                                 if part))  # §8.1 both ways
                or ((below is None or Bias.DEPTH in reasons(below))  # stacks over §9
                    and Bias.STACK in reasons(above) and _layers_ok(doc, above, reasons))
                or ((bool({Bias.CONSTRUCTION, Bias.FLIPS} & reasons(above)))  # §8 above a
                    and (below is None or Bias.FLIPS in reasons(below)))  # §8.2 refutation
                or (claim["kind"] == "min_width" and kind == Kind.MINIMAL_WIDTH
                    and Bias.GENERIC in reasons(above)
                    and (below is None or Bias.GENERIC in reasons(below))))
    own = reasons(cert)
    absorbable = claim["kind"] == "absorbable"
    return ((absorbable and Bias.FLIPS in own) or (ungated and Bias.KEYS in own)
            or (Bias.STACK in own and _layers_ok(doc, cert, reasons))
            or bool({Bias.ITSELF, Bias.CONSTRUCTION, Bias.RULES} & own)
            or (absorbable and claim["modality"] in ("", "not") and Bias.GENERIC in own))


def _layers_ok(doc: dict[str, Any], cert: dict[str, Any],
               reasons: Callable[[Any], frozenset[Bias]]) -> bool:
    """A stack's per-layer certificates, each one accepted for a biased depth-1 block as
    that layer's own absorbable claim (docs/rules.md §8.4)."""
    parts = cert.get("per_layer")
    claim = dict(doc["claim"], kind="absorbable", modality="")
    return isinstance(parts, list) and all(
        isinstance(part, dict) and allowed(dict(doc, certificate=part, claim=claim), reasons)
        for part in parts)
