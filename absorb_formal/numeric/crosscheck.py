"""Witness cross-check: every absorbable verdict's plain weights are evaluated against the
block at N sampled points in float64. Exact proofs are the verdict; this is the independent
sanity check, and a figure above tolerance means a bug (the outcome becomes an error)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, TextIO

import numpy as np

from ..model import Block
from .backends import Backend
from .floatblock import FloatBlock, from_block, plain_from_json, with_layers
from .points import batches

TOLERANCE = 1e-8  # on |P(x) − B(x)| / (1 + |B(x)|), float64
DEFAULT_POINTS = 100_000


@dataclass(frozen=True)
class CrossCheck:
    points: int
    max_abs_error: float
    max_rel_error: float
    backend: str
    device: str

    @property
    def ok(self) -> bool:
        return bool(self.max_rel_error <= TOLERANCE)

    def as_json(self) -> dict[str, Any]:
        return {"points": self.points, "max_abs_error": float(f"{self.max_abs_error:.3g}"),
                "max_rel_error": float(f"{self.max_rel_error:.3g}"),
                "backend": self.backend, "device": self.device, "tolerance": TOLERANCE}

    def phrase(self) -> str:
        return (f"cross-check {self.points} points, max error {self.max_abs_error:.2g} "
                f"(rel {self.max_rel_error:.2g})")


def pairs(block: Block, certificate: Any) -> list[tuple[FloatBlock, FloatBlock]]:
    """(reference, witness) for every witness inside a certificate. A family's example
    member is the reference for the witness stored beside it."""
    found: list[tuple[FloatBlock, FloatBlock]] = []

    def walk(node: Any, reference: FloatBlock | None) -> None:
        if isinstance(node, dict):
            if "example" in node and isinstance(node["example"], dict):
                example = with_layers(block, node["example"]["layers"])
                walk(node["example"].get("witness"), example)
            if node.get("kind") == "witness" and reference is not None:
                found.append((reference, plain_from_json(block, node["layers"])))
            for key, value in node.items():
                if key != "example":
                    walk(value, reference)
        elif isinstance(node, list):
            for value in node:
                walk(value, reference)

    walk(certificate, from_block(block) if block.is_concrete else None)
    return found


def compare(reference: FloatBlock, witness: FloatBlock, total: int, engine: Backend,
            progress: TextIO | None = None) -> CrossCheck:
    normals = reference.normals() + witness.normals()
    bar = _bar(total, progress)
    worst_abs = worst_rel = 0.0
    for x in batches(reference.dim, normals, total):
        want, got = engine.evaluate(reference, x), engine.evaluate(witness, x)
        diff = np.abs(got - want)
        worst_abs = max(worst_abs, float(diff.max(initial=0.0)))
        worst_rel = max(worst_rel, float((diff / (1.0 + np.abs(want))).max(initial=0.0)))
        if bar is not None:
            bar.update(len(x))
    if bar is not None:
        bar.close()
    return CrossCheck(total, worst_abs, worst_rel, engine.name, engine.device)


def _bar(total: int, stream: TextIO | None) -> Any:
    """A tqdm progress bar on long runs, only on an interactive stream."""
    if stream is None or total < 1_000_000 or not getattr(stream, "isatty", lambda: False)():
        return None
    from tqdm import tqdm

    return tqdm(total=total, unit="pt", file=stream, leave=False, desc="cross-check")


def crosscheck(block: Block, certificate: Any, total: int, engine: Backend,
               progress: TextIO | None = None) -> CrossCheck | None:
    """The worst figures over every witness in the certificate (None when there is none)."""
    found = pairs(block, certificate)
    if not found:
        return None
    results = [compare(ref, wit, total, engine, progress) for ref, wit in found]
    return CrossCheck(sum(r.points for r in results), max(r.max_abs_error for r in results),
                      max(r.max_rel_error for r in results), engine.name, engine.device)
