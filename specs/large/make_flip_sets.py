"""Regenerate flip_sets.npz (seeded, deterministic): python make_flip_sets.py

Weights of flip_sets.mlp: biased blocks over the exact-work limit (MAX_EXACT_WEIGHTS =
250,000 in absorb_formal/decide/concrete.py) whose own width §8.2's flip sets decide at scale
(docs/rules.md §8.2, "Flip sets at scale"). Every entry is a non-zero integer in ±1..9 (int8),
so every key row is generic and the products are exact.

- gate, up, down, g, b, c (d = 64, m = 1,400: 268,800 weights): a swiglu block (S = I) and a
  glu block whose skip S_glu = −(d_2 u_2ᵀ + d_4 u_4ᵀ) makes J = {2, 4} a flip set
  (Σ_J d_i u_iᵀ = −S/(2c), c = σ(0) = 1/2).
- relu_up, relu_down, relu_b, relu_c (d = 100, m = 1,260: 252,000 weights): neuron 4 repeats
  neuron 2's row of U with the opposite down column and an up bias 3 larger (another key:
  the affine keys [u | β] differ), and S_relu2 = −2(β_2 − β_4)·d_2 u_2ᵀ: J = {2, 4} cancels
  the quadratic parts and leaves the linear part S.
"""

from pathlib import Path

import numpy as np

SEED = 21


def small(rng: np.random.Generator, *shape: int) -> np.ndarray:
    return (rng.integers(1, 10, size=shape) * rng.choice([-1, 1], size=shape)).astype(np.int8)


def main() -> None:
    rng = np.random.default_rng(SEED)
    d, m = 64, 1400
    gated = {"gate": small(rng, m, d), "up": small(rng, m, d), "down": small(rng, d, m),
             "g": small(rng, m), "b": small(rng, m), "c": small(rng, d)}
    up, down = gated["up"].astype(np.int64), gated["down"].astype(np.int64)
    s_glu = -(np.outer(down[:, 1], up[1]) + np.outer(down[:, 3], up[3]))
    d, m = 100, 1260
    relu = {"relu_up": small(rng, m, d), "relu_down": small(rng, d, m),
            "relu_b": rng.integers(-5, 6, size=m).astype(np.int8), "relu_c": small(rng, d)}
    relu["relu_up"][3] = relu["relu_up"][1]
    relu["relu_down"][:, 3] = -relu["relu_down"][:, 1]
    relu["relu_b"][3] = relu["relu_b"][1] + 3
    beta = relu["relu_b"].astype(np.int64)
    s_relu2 = -2 * (beta[1] - beta[3]) * np.outer(relu["relu_down"][:, 1].astype(np.int64),
                                                  relu["relu_up"][1].astype(np.int64))
    np.savez_compressed(Path(__file__).with_name("flip_sets.npz"), **gated, **relu,
                        S_glu=s_glu.astype(np.int16), S_relu2=s_relu2.astype(np.int16))


if __name__ == "__main__":
    main()
