"""Regenerate weights.npz and flip_neuron_1.mlp (seeded, deterministic): python make_weights.py

A relu block of d = 100, m = 1260: 2·d·m = 252,000 weights, just over the exact-work limit
(MAX_EXACT_WEIGHTS = 250,000 in absorb_formal/decide/concrete.py), so only the never-rules and
the generic-case modular functional (docs/certificates.md) may decide it.

- up (m×d), down (d×m): non-zero integers in ±1..9 (int8). The first two columns of up are m
  pairs with pairwise different ratios, so no two neurons share a key (each is alone on its
  own line: the generic case, which the modular functional needs).
- flip_neuron_1.mlp: the same weights with S = −d₁u₁ᵀ, a skip that makes the block
  absorbable (J = {1}: for relu a = 1/2, so Σ_{i∈J} d_i u_iᵀ = −S/(2a) = d₁u₁ᵀ, docs/rules.md §4).
  A skip cannot be load(...)ed, so it is written out as a literal d×d matrix.
- flip_twice.mlp, flip_twice.npz: S = −2·d₁u₁ᵀ from a file: in the span, but the unique
  solution is 2, not 0/1 (refuted at width m).
- down_decimal (d×m, float64): down with its first DECIMAL_COLUMNS columns divided by 10,
  entries such as 0.3 (the float nearest 3/10, taken as the exact dyadic rational it is);
  only a few columns, so that the file stays small.
"""

from fractions import Fraction
from pathlib import Path

import numpy as np

D, M, SEED = 100, 1260, 0
DECIMAL_COLUMNS = 20


def small_nonzero(rng: np.random.Generator, shape: tuple[int, int]) -> np.ndarray:
    values = rng.integers(1, 10, size=shape) * rng.choice([-1, 1], size=shape)
    return values.astype(np.int8)


def distinct_ratios(rng: np.random.Generator) -> np.ndarray:
    """M rows (x, y) of small non-zero integers whose ratios x/y are pairwise different."""
    by_ratio = {}
    for x in range(-99, 100):
        for y in range(1, 100):
            if x != 0:
                by_ratio.setdefault(Fraction(x, y), (x, y))
    pairs = np.array(sorted(by_ratio.values()))
    return pairs[rng.permutation(len(pairs))[:M]]


def main() -> None:
    rng = np.random.default_rng(SEED)
    up = small_nonzero(rng, (M, D))
    up[:, :2] = distinct_ratios(rng)
    down = small_nonzero(rng, (D, M))
    decimal = down.astype(np.float64)
    decimal[:, :DECIMAL_COLUMNS] /= 10
    flip = -np.outer(down[:, 0].astype(np.int64), up[0].astype(np.int64))
    np.savez_compressed(Path(__file__).with_name("weights.npz"), up=up, down=down,
                        down_decimal=decimal)
    write_flip_spec(flip)
    write_twice(flip)


TWICE_SPEC = """\
# Written by make_weights.py: the weights of large_relu.mlp (d = 100, m = 1260) with
# S = −2·d₁u₁ᵀ, loaded from a file. −S/(2a) = 2·d₁u₁ᵀ lies in the span of the terms, so no
# minor refutes; the subset system has one rational solution, c₁ = 2, which is not 0/1:
# not absorbable at width 1260 (docs/rules.md §4, the generic case at scale).
block T {
    activation relu
    dim 100  width 1260
    up   = load("weights.npz", "up")
    down = load("weights.npz", "down")
    skip load("flip_twice.npz", "skip")
}
claim T is not absorbable   # slow: 6 s
claim min width of T is 1261   # expect: unknown — min width is between 1261 and 1262 (slow: 6 s)
"""


def write_twice(flip: np.ndarray) -> None:
    folder = Path(__file__).parent
    np.savez_compressed(folder / "flip_twice.npz", skip=2 * flip)
    (folder / "flip_twice.mlp").write_text(TWICE_SPEC, encoding="utf-8")


FLIP_SPEC = """\
# Written by make_weights.py: the weights of large_relu.mlp (d = 100, m = 1260, over the
# exact-work limit) with S = −d₁u₁ᵀ. Absorbable by flipping neuron 1 (J = {{1}}, docs/rules.md §4):
# σ(z) − z = σ(−z) for relu, so d₁σ(u₁ᵀx) − d₁u₁ᵀx = d₁σ(−u₁ᵀx).
block F {{
    activation relu
    dim 100  width 1260
    up   = load("weights.npz", "up")
    down = load("weights.npz", "down")
    skip {skip}
}}
# At its own width the unique solution of the subset system mod q is J = {{1}}, and the identity
# d₁u₁ᵀ = −S/(2a) holds exactly (docs/rules.md §4, the generic case at scale).
claim F is absorbable   # slow: 6 s
# S has rank 1 (skeleton S = S[:,C]·S[R,C]⁻¹·S[R,:], |C| = 1): the own neurons plus one spare
# pair absorb it at m + 2·rank S = 1262 (docs/rules.md §4).
claim F is absorbable at width 1262   # slow: 6 s
# 1260 live keys (all rows on distinct lines) need 1260 neurons; the flip witness has 1260.
claim min width of F is 1260   # slow: 6 s
"""


def write_flip_spec(flip: np.ndarray) -> None:
    rows = ",\n          ".join("[" + ", ".join(str(int(v)) for v in row) + "]" for row in flip)
    Path(__file__).with_name("flip_neuron_1.mlp").write_text(
        FLIP_SPEC.format(skip="[" + rows + "]"), encoding="utf-8")


if __name__ == "__main__":
    main()
