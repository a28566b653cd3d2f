"""Regenerate costly.npz (seeded, deterministic): python make_costly.py

A relu block of d = 40, m = 70: 5,600 weights, far below the exact-work limit, but its §4
subset system has d²·m = 112,000 entries (> MAX_EXACT_COST = 100,000 in
absorb_formal/decide/concrete.py), so the large-block rules (modular functional, key count, spare
pairs) are tried before the exact width search. up and down: non-zero
integers in ±1..9 (int8); up_bias: integers in −5..5 (for the biased block).
"""

from pathlib import Path

import numpy as np

D, M, SEED = 40, 70, 19


def main() -> None:
    rng = np.random.default_rng(SEED)
    up = (rng.integers(1, 10, size=(M, D)) * rng.choice([-1, 1], size=(M, D))).astype(np.int8)
    down = (rng.integers(1, 10, size=(D, M)) * rng.choice([-1, 1], size=(D, M))).astype(np.int8)
    up_bias = rng.integers(-5, 6, size=M).astype(np.int8)
    np.savez_compressed(Path(__file__).with_name("costly.npz"), up=up, down=down,
                        up_bias=up_bias)


if __name__ == "__main__":
    main()
