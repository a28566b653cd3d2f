"""Irrational constants (docs/rules.md §8 "Symbolic constants"): how many
claims on small random biased blocks whose answer needs σ at a rational point — gelu/silu
blocks with a constant neuron (u = 0, β ≠ 0), swiglu/geglu blocks — end decided. Counts, not
times (each run takes seconds). Run: python -m benchmarks.bench_symbolic [BLOCKS] [SEED]; run
it on two checkouts (PYTHONPATH) to compare."""

from __future__ import annotations

import collections
import json
import random
import sys
from fractions import Fraction
from typing import Any

import absorb_formal

GATED = ("swiglu", "geglu")


def _matrix(rows) -> str:
    return "[" + ", ".join("[" + ", ".join(str(x) for x in r) + "]" for r in rows) + "]"


def _vector(v) -> str:
    return "[" + ", ".join(str(x) for x in v) + "]"


def _weight(rng: random.Random):
    return rng.choice([-2, -1, 1, 2, Fraction(1, 2), 3])


def block(rng: random.Random, name: str, act: str, d: int, m: int, skip: str) -> str:
    """A biased block; ungated ones get the constant neuron u₁ = 0, β₁ ≠ 0."""
    up: list[list[Any]] = [[_weight(rng) if rng.random() < .8 else 0 for _ in range(d)]
                           for _ in range(m)]
    for row in up:
        row[0] = row[0] or 1
    up_bias: list[Any] = [rng.choice([0, 1, -1, 2]) for _ in range(m)]
    if act not in GATED:
        up[0], up_bias[0] = [0] * d, rng.choice([1, -1, 2, Fraction(1, 2)])
    down = [[_weight(rng) for _ in range(m)] for _ in range(d)]
    text = (f"block {name} {{ activation {act} dim {d} width {m} skip {skip} bias\n"
            f" up = {_matrix(up)} up_bias = {_vector(up_bias)}\n down = {_matrix(down)} "
            f"down_bias = {_vector([rng.choice([0, 1]) for _ in range(d)])}\n")
    if act in GATED:
        text += (f" gate = {_matrix([[_weight(rng) for _ in range(d)] for _ in range(m)])} "
                 f"gate_bias = {_vector([rng.choice([0, 1, -1]) for _ in range(m)])}\n")
    return text + "}\n"


def run(blocks: int, seed: int) -> dict[str, dict[str, int]]:
    rng = random.Random(seed)
    counts: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
    for k in range(blocks):
        act = rng.choice(["gelu", "silu", *GATED])
        d, m = rng.choice([1, 2, 2]), rng.choice([1, 2, 3])
        skip = rng.choice(["identity", "identity",
                           _matrix([[1] + [0] * (d - 1)] + [[0] * d] * (d - 1))])
        r = d if skip == "identity" else 1
        text = block(rng, "A", act, d, m, skip)
        top = m + (r if act in GATED else 2 * r)  # the construction's width
        claims = [("absorbable", "claim A is absorbable"),
                  ("at width", f"claim A is absorbable at width {top}"),
                  ("at width", f"claim A is absorbable at width {m + 1}"),
                  ("min width", f"claim min width of A is {m + 1}"),
                  ("query", "query A")]
        if act not in GATED:
            text += block(random.Random(k), "B", act, d, m, skip)
            claims += [("equals", "claim A equals A"), ("equals", "claim A equals B")]
        text += "\n".join(c for _, c in claims) + "\n"
        for (kind, _), result in zip(claims, absorb_formal.prove(text, timeout=20),
                                     strict=True):
            for key in (f"{act}: {kind}", f"all: {kind}"):
                counts[key][result.outcome] += 1
    return {key: dict(value) for key, value in sorted(counts.items())}


def main() -> None:
    blocks = int(sys.argv[1]) if len(sys.argv) > 1 else 400
    seed = int(sys.argv[2]) if len(sys.argv) > 2 else 7
    print(json.dumps(run(blocks, seed), indent=1))


if __name__ == "__main__":
    main()
