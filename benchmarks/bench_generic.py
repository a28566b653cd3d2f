"""How the generic engine's time grows with d and m, beside the theory engine on the same
instances (random small-integer ReLU blocks, identity skip, half of them planted).

Run: python benchmarks/bench_generic.py [--seeds N]. Prints a markdown table of medians.
"""

from __future__ import annotations

import argparse
import random
import statistics
import time
from fractions import Fraction

from absorb_formal.decide import concrete
from absorb_formal.generic import engine
from absorb_formal.model import activations as acts
from absorb_formal.model import linalg
from absorb_formal.model.blocks import Block, Layer, Matrix, Skip
from absorb_formal.model.position import Pos


def block(d: int, m: int, seed: int, name: str) -> Block:
    rng = random.Random(seed)
    up = [[Fraction(rng.randint(-3, 3)) for _ in range(d)] for _ in range(m)]
    down = [[Fraction(rng.randint(-3, 3)) for _ in range(m)] for _ in range(d)]
    activation = acts.simple(name) if name != "z+z^2" else acts.poly(
        (Fraction(0), Fraction(1), Fraction(1)))
    skip = linalg.identity(d)
    if seed % 2 and name == "relu":  # planted: S = −Σ_J d_i u_iᵀ (a = 1/2)
        skip = linalg.zeros(d, d)
        for i in range(m):
            if rng.random() < 0.5:
                skip = linalg.add(skip, linalg.outer([r[i] for r in down], up[i]), Fraction(-1))
    return Block("B", activation, d, m, 1, Skip(d, matrix=Matrix(skip)),
                 (Layer(Matrix(up), Matrix(down)),), Pos(1, 1))


def timed(fn, *args) -> tuple[float, bool | None]:
    start = time.perf_counter()
    decision = fn(*args)
    return time.perf_counter() - start, decision.absorbable


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--seeds", type=int, default=4)
    args = parser.parse_args()
    print(f"median over {args.seeds} seeds; decided = both engines answered (and agreed)")
    print("| activation | d | m | theory s | generic s | generic decided | agree |")
    print("|---|---|---|---|---|---|---|")
    for name, sizes in (("relu", [(1, 1), (1, 2), (1, 3), (1, 4), (2, 1), (2, 2)]),
                        ("z+z^2", [(1, 1), (1, 2), (2, 1), (2, 2)])):
        for d, m in sizes:
            t_theory, t_generic, decided, agree = [], [], 0, 0
            for seed in range(args.seeds):
                b = block(d, m, seed, name)
                tt, theory = timed(concrete.at_width, b, m)
                tg, generic = timed(engine.at_width, b, m)
                t_theory.append(tt)
                t_generic.append(tg)
                decided += generic is not None
                agree += theory is None or generic is None or theory == generic
            print(f"| {name} | {d} | {m} | {statistics.median(t_theory):.3f} | "
                  f"{statistics.median(t_generic):.3f} | {decided}/{args.seeds} | "
                  f"{agree}/{args.seeds} |", flush=True)


if __name__ == "__main__":
    main()
