"""Small rational test points for concrete certificates, in a fixed order (deterministic)."""

from __future__ import annotations

import random
from collections.abc import Iterator
from fractions import Fraction

Point = tuple[Fraction, ...]


def candidates(dim: int, first: int | None = None, count: int = 40) -> Iterator[Point]:
    """e_first, then ±e_j, then e_i + e_j, then seeded random small-integer points."""
    zero = [Fraction(0)] * dim
    seen: set[Point] = set()

    def unit(j: int, c: int = 1) -> Point:
        x = list(zero)
        x[j] = Fraction(c)
        return tuple(x)

    order = ([unit(first)] if first is not None else []) + \
        [unit(j, s) for j in range(min(dim, 8)) for s in (1, -1)] + \
        [tuple(Fraction(1) if k in (i, j) else Fraction(0) for k in range(dim))
         for i in range(min(dim, 4)) for j in range(i + 1, min(dim, 4))]
    rng = random.Random(0)
    order += [tuple(Fraction(rng.randint(-3, 3)) for _ in range(dim)) for _ in range(count)]
    for x in order:
        if x not in seen and any(x):
            seen.add(x)
            yield x
