"""Float sanity figures for refutation certificates: the size of the violation they exhibit,
computed in float64 on the block itself (an evaluation path independent of the exact one).

A figure is not a certificate: it goes into the output beside one (`sanity`), labelled by the
kind of certificate it measures, and nothing checks or stores it."""

from __future__ import annotations

from fractions import Fraction
from typing import Any

import numpy as np

from ..checker.kernel.contract import Kind
from ..model.blocks import Block
from .backends import Backend
from .floatblock import from_block, to_float


def _vector(values: list[str]) -> np.ndarray:
    return np.array([to_float(Fraction(v)) for v in values], dtype=np.float64)


def sanity(block: Block, certificate: Any, engine: Backend) -> dict[str, Any] | None:
    """A JSON-ready figure for a not-absorbable certificate of a concrete block, or None."""
    if not isinstance(certificate, dict) or not block.is_concrete:
        return None
    kind = certificate.get("kind")
    if kind == Kind.HOMOGENEITY_POINT:
        x0, t = _vector(certificate["x0"]), to_float(Fraction(certificate["t"]))
        both = engine.evaluate(from_block(block), np.array([t * x0, x0]))
        gap = float(np.abs(both[0] - t ** certificate["degree"] * both[1]).max())
        return {"kind": kind, "violation": float(f"{gap:.6g}"),
                "meaning": "max |B(t x0) - t^K B(x0)| in float64"}
    if kind == Kind.PARITY_POINT:
        x0 = _vector(certificate["x0"])
        both = engine.evaluate(from_block(block), np.array([x0, -x0]))
        gap = float(np.abs(both[0] - both[1]).max())
        return {"kind": kind, "violation": float(f"{gap:.6g}"),
                "meaning": "max |B(x0) - B(-x0)| in float64"}
    if kind == Kind.LEMMA_DIRECTION and certificate.get("rule") in ("T3", "T4"):
        t = 1e6 if certificate["rule"] == "T3" else 1e-6
        e = np.zeros(block.dim)
        e[certificate["direction"]["index"]] = 1.0
        slope = engine.evaluate(from_block(block), np.array([t * e]))[0] / t
        return {"kind": kind, "B_t_e_over_t": float(f"{np.abs(slope).max():.6g}"), "t": t,
                "meaning": "max |B(t e)/t| ≈ |S^L e| != 0, while every plain stack gives ~0 "
                           "(T4, t -> 0) or is bounded (T3, t -> oo)"}
    if kind == Kind.SUBSET_SEARCH and certificate.get("cases"):
        values = [abs(to_float(Fraction(c["refutation"]["Y_dot_target"])))
                  for c in certificate["cases"] if "Y_dot_target" in c["refutation"]]
        if values:
            return {"kind": Kind.SEPARATING_FUNCTIONAL, "min_abs_Y_dot_T": min(values),
                    "meaning": "smallest |<Y, T>| over the refuted cases (0 would be no proof)"}
    return None
