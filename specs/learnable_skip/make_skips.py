"""Regenerate skips.npz (seeded, deterministic): python make_skips.py

Learnable skips read with `skip load("skips.npz", KEY)` (docs/language.md, Skip connections):
- S (2×2): the skip [[2, 0], [1, 1]] of matrix_skips.mlp's block G; S_T (2×2): its transpose,
  stored input × output, read back with `.T`.
- flip (100×100, int16): −d₁u₁ᵀ for the weights of ../large/weights.npz (d = 100, m = 1260, over
  the exact-work limit): the block with this skip is absorbable by flipping neuron 1
  (J = {1}, docs/rules.md §4), and at width m + 2·rank S = 1262 by spare pairs.
- generic (100×100, int8): small random integers, stored transposed (read with `.T`): a
  generic skip, not absorbable at the block's own width (modular functional).
"""

from pathlib import Path

import numpy as np

SEED = 0


def main() -> None:
    here = Path(__file__).parent
    weights = np.load(here.parent / "large" / "weights.npz")
    up, down = weights["up"].astype(np.int64), weights["down"].astype(np.int64)
    flip = -np.outer(down[:, 0], up[0])
    assert np.abs(flip).max() < 2**15
    rng = np.random.default_rng(SEED)
    generic = rng.integers(-9, 10, size=(100, 100))
    s = np.array([[2, 0], [1, 1]], dtype=np.int8)
    np.savez_compressed(here / "skips.npz", S=s, S_T=s.T.copy(), flip=flip.astype(np.int16),
                        generic=generic.T.astype(np.int8))


if __name__ == "__main__":
    main()
