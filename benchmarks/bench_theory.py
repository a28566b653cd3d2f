"""Time the theory engine on random and planted ReLU blocks (issue: d = 8, m = 64 < 1 s).

Run: python benchmarks/bench_theory.py [--seeds N]. Prints a markdown table of medians.
"""

from __future__ import annotations

import argparse
import platform
import random
import statistics
import time
from fractions import Fraction

from absorb_formal import activations as acts
from absorb_formal import linalg
from absorb_formal.decide import concrete
from absorb_formal.model import Block, Layer, Matrix, Skip
from absorb_formal.position import Pos


def random_block(d: int, m: int, seed: int, planted: bool) -> Block:
    rng = random.Random(seed)
    up = [[Fraction(rng.randint(-9, 9), rng.randint(1, 4)) for _ in range(d)] for _ in range(m)]
    down = [[Fraction(rng.randint(-9, 9), rng.randint(1, 4)) for _ in range(m)] for _ in range(d)]
    skip = Skip(d, scale=Fraction(1))
    if planted:  # S = −2a Σ_J d_i u_iᵀ = −Σ_J d_i u_iᵀ for relu, with a random J
        s = linalg.zeros(d, d)
        for i in [i for i in range(m) if rng.random() < 0.5]:
            s = linalg.add(s, linalg.outer([row[i] for row in down], up[i]), Fraction(-1))
        skip = Skip(d, matrix=Matrix(s))
    layer = Layer(Matrix(up), Matrix(down))
    return Block("B", acts.simple("relu"), d, m, 1, skip, (layer,), Pos(1, 1))


def measure(d: int, m: int, planted: bool, seeds: int) -> tuple[float, str]:
    times, verdicts = [], set()
    for seed in range(seeds):
        block = random_block(d, m, seed, planted)
        start = time.perf_counter()
        decision = concrete.at_width(block, m)
        times.append(time.perf_counter() - start)
        verdicts.add({True: "absorbable", False: "not absorbable", None: "unknown"}
                     [decision.absorbable])
    return statistics.median(times), "/".join(sorted(verdicts))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--seeds", type=int, default=5)
    args = parser.parse_args()
    print(f"machine: {platform.machine()}, {platform.python_implementation()} "
          f"{platform.python_version()}; median of {args.seeds} seeds")
    print("| d | m | kind | median seconds | verdicts |\n|---|---|---|---|---|")
    for d, m in [(2, 8), (2, 32), (4, 16), (4, 64), (8, 32), (8, 64), (8, 128)]:
        for planted in (False, True):
            seconds, verdicts = measure(d, m, planted, args.seeds)
            kind = "planted" if planted else "random"
            print(f"| {d} | {m} | {kind} | {seconds:.3f} | {verdicts} |", flush=True)


if __name__ == "__main__":
    main()
