"""Regenerate bf16.safetensors and bf16_down.npz (seeded, deterministic): python make_bf16.py

The weights of bf16_keys.mlp: d = 1000, m = 126, so 2·d·m = 252,000 weights, just over the
exact-work limit (MAX_EXACT_WEIGHTS = 250,000 in absorb_formal/decide/concrete.py).

- up: stored d × m (Hugging Face Conv1D layout, read with `.T`) as bfloat16 in a safetensors
  file. Rows 0 and 1 of up agree on their first 8 entries, so every pair among the first
  columns has a repeated ratio u[c0]:u[c1] (the former 6-pair key test ended unknown), yet
  all 126 rows lie on different lines: distinct keys, the generic case (docs/rules.md §4).
- down: d × m non-zero integers in ±1..9 (int8, compressed .npz: a small file).
"""

import json
from pathlib import Path

import numpy as np

D, M, SEED = 1000, 126, 0
HERE = Path(__file__).parent


def bf16_bits(values: np.ndarray) -> np.ndarray:
    """float32 → bfloat16 by truncation; the bits the file holds are the exact weights."""
    return (np.asarray(values, dtype=np.float32).view(np.uint32) >> 16).astype("<u2")


def write_safetensors(path: Path, name: str, bits: np.ndarray) -> None:
    raw = bits.tobytes()
    head = json.dumps({name: {"dtype": "BF16", "shape": list(bits.shape),
                              "data_offsets": [0, len(raw)]}}).encode()
    head += b" " * (-len(head) % 8)
    path.write_bytes(len(head).to_bytes(8, "little") + head + raw)


def main() -> None:
    rng = np.random.default_rng(SEED)
    up = rng.standard_normal((M, D)) * 0.05
    up[1, :8] = up[0, :8]
    write_safetensors(HERE / "bf16.safetensors", "c_fc.weight", bf16_bits(up.T.copy()))
    down = rng.integers(1, 10, size=(D, M)) * rng.choice([-1, 1], size=(D, M))
    np.savez_compressed(HERE / "bf16_down.npz", down=down.astype(np.int8))


if __name__ == "__main__":
    main()
