"""Source positions, shared by the syntax tree and the model."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Pos:
    """A 1-based line and column in a spec file."""

    line: int
    column: int
