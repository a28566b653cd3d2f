"""Query timing: a random relu block, d = 16, m = 64, through the Python API.

    python benchmarks/bench_query.py [--timeout 5] [--d 16] [--m 64] [--seed 1]

Prints the seconds of `absorb_formal.prove` on `query B` (parsing included, imports and
numeric checks not) and the
verdict, so that the own-width part and the min-width part can be read off.
"""

from __future__ import annotations

import argparse
import random
import time

from absorb_formal.api import prove  # imports are not the query's time


def spec(d: int, m: int, seed: int) -> str:
    rng = random.Random(seed)

    def rows(n: int, k: int) -> str:
        return "[" + ", ".join("[" + ", ".join(f"{rng.randint(-9, 9)}/{rng.randint(1, 4)}"
                                               for _ in range(k)) + "]" for _ in range(n)) + "]"

    return (f"block B {{\n activation relu\n dim {d}\n width {m}\n up = {rows(m, d)}\n"
            f" down = {rows(d, m)}\n}}\nquery B\n")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--d", type=int, default=16)
    parser.add_argument("--m", type=int, default=64)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--timeout", type=float, default=0.0)
    args = parser.parse_args()
    text = spec(args.d, args.m, args.seed)
    start = time.perf_counter()
    [query] = prove(text, timeout=args.timeout)
    seconds = time.perf_counter() - start
    print(f"d = {args.d}, m = {args.m}, seed {args.seed}, timeout {args.timeout:g}: "
          f"{seconds:.2f} s, {query.outcome}: {query.verdict or query.reason}")


if __name__ == "__main__":
    main()
