"""Sample points for cross-checks: Gaussian at several scales, and points on and near every
kink hyperplane `u·x = 0` (where piecewise activations change pieces). Seeded: the same
block gives the same points."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np

SCALES = (1e-3, 1e-1, 1.0, 10.0, 1e3)
OFFSETS = (0.0, 1e-9, -1e-9, 1e-5, -1e-5)
BATCH = 32768


def batches(dim: int, normals: list[np.ndarray], total: int, seed: int = 0,
            batch: int = BATCH) -> Iterator[np.ndarray]:
    """`total` points in batches of at most `batch` rows; ~40% on/near kinks when any."""
    rng = np.random.default_rng(seed)
    made = 0
    index = 0
    while made < total:
        size = min(batch, total - made)
        scale = np.array(SCALES)[rng.integers(len(SCALES), size=(size, 1))]
        x = rng.normal(size=(size, dim)) * scale
        if normals:
            kink = rng.random(size) < 0.4
            count = int(kink.sum())
            picks = [normals[(index + k) % len(normals)] for k in range(count)]
            index += count
            if count:
                u = np.array(picks)
                unit = u / np.linalg.norm(u, axis=1, keepdims=True)
                on = x[kink] - (x[kink] * unit).sum(axis=1, keepdims=True) * unit
                offset = np.array(OFFSETS)[rng.integers(len(OFFSETS), size=(count, 1))]
                x[kink] = on + offset * np.linalg.norm(on, axis=1, keepdims=True) * unit
        made += size
        yield x
