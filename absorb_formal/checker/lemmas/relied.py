"""The activation lemmas (docs/rules.md §2) the checker relies on, each re-proved by the
checker itself (`proofs.py`, sympy) and kept: in memory for the run, and on disk in
the checker's own entries (`cache.py`), so that a later check reads the result its own code
proved instead of importing sympy and proving it again (gelu_tanh's O(a) + N: about a
second). A lemma that is not re-proved makes the certificate invalid.
"""

from __future__ import annotations

import functools
import json
from fractions import Fraction
from typing import Any

from . import cache as proved


def key(activation: dict[str, Any]) -> str:
    """How an activation is named in a proof: its JSON text, keys sorted."""
    return json.dumps(activation, sort_keys=True)


def odd_slope(activation: dict[str, Any]) -> Fraction | None:
    """a with σ(z) − σ(−z) = 2az, re-derived and re-proved (None if there is none)."""
    return _proved("odd_slope", key(activation))


def holds(activation: dict[str, Any], name: str, value: Fraction | int | None = None) -> bool:
    """Re-prove one lemma: H (value k), E, Bd, F, O / Lin / N (value a), Og / OgN (value c),
    Sq (σ(z) + σ(−z) = v z², value v), An, zero (σ(0) = 0)."""
    return _proved("holds", key(activation), name, None if value is None else str(value))


def reflection(kind: str) -> tuple[Fraction, Fraction, int] | None:
    """(c, s, t) with σ(z) = c + s·z + t·σ(−z) for every real z (`lemma_proofs.reflection`)."""
    return _proved("reflection", kind)


def value_at_zero(activation: dict[str, Any]) -> Fraction | None:
    """σ(0) when it is rational."""
    return _proved("value_at_zero", key(activation))


def degree(activation: dict[str, Any]) -> int | None:
    """The proved homogeneity degree k of σ (None if σ is not homogeneous)."""
    return _proved("degree", key(activation))


def relu_multiple(activation: dict[str, Any]) -> Fraction | None:
    """c ≠ 0 with σ = c·relu (ungated, H(1), σ(z) = 0 for z < 0, σ(1) = c), else None."""
    return _proved("relu_multiple", key(activation))


def ridge_family(activation: dict[str, Any]) -> tuple[str, Fraction, Fraction | None] | None:
    """("relu", a, b) or ("analytic", a, None) for ungated O(a)+N activations with σ(0) = 0."""
    if activation["gated"]:
        return None
    a = odd_slope(activation)
    if a is None or not holds(activation, "N", a) or not holds(activation, "zero"):
        return None
    if activation["kind"] in ("relu", "leaky_relu", "relu_pow", "abs", "identity", "poly") \
            and holds(activation, "H", 1):
        from ..kernel.linalg import sigma

        b = sigma(activation, Fraction(1)) - a
        return ("relu", a, b) if b != 0 else None
    if holds(activation, "An"):
        return "analytic", a, None
    return None


@functools.cache
def _proved(function: str, *args: str | None) -> Any:
    """`lemma_proofs.FUNCTION(*args)`: from the checker's own entry on disk when there is a
    sound one, else proved now (sympy imported only here) and its entry written."""
    call = [function, *args]
    found = proved.read(call)
    if found is not proved.MISSING:
        return found
    from . import proofs as lemma_proofs

    value = getattr(lemma_proofs, function)(*args)
    proved.write(call, value)
    return value
