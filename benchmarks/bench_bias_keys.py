"""docs/rules.md §8.1: a planted biased relu block (d = 8, m = 128), decided at its own width by
§4's width search over affine keys; compare with the bias-free planted instance of
suite_absorb.py (target < 1 s, as bias-free). Run: python -m benchmarks.bench_bias_keys"""

from __future__ import annotations

import random
import time
from dataclasses import replace
from fractions import Fraction

from absorb_formal.decide.concrete import at_width
from benchmarks.instances import absorb_block


def biased(d: int, m: int, seed: int):
    block = absorb_block("relu", d, m, seed, planted=True)
    rng = random.Random(f"bias/{d}/{m}/{seed}")
    layer = block.layers[0]
    up_bias = tuple(Fraction(rng.randint(-50, 50), 10) for _ in range(m))
    down_bias = tuple(Fraction(rng.randint(-50, 50), 10) for _ in range(d))
    return block, replace(block, biased=True,
                          layers=(replace(layer, up_bias=up_bias, down_bias=down_bias),))


def main() -> None:
    for seed in range(3):
        for label, block in zip(("bias-free", "biased"), biased(8, 128, seed), strict=True):
            start = time.perf_counter()
            decision = at_width(block, 128)
            took = time.perf_counter() - start
            print(f"relu d=8 m=128 planted seed={seed} {label}: {decision.absorbable} "
                  f"in {took:.3f} s")


if __name__ == "__main__":
    main()
