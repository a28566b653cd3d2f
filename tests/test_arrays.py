"""load(...): npz and safetensors matrices become the exact rationals they store."""

from __future__ import annotations

import json
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest

from absorb_formal.language import load_text


def write_safetensors(path: Path, tensors: dict[str, tuple[str, np.ndarray]]) -> None:
    """A minimal safetensors writer (dtype name, little-endian array) for the tests."""
    header, blobs, offset = {}, [], 0
    for name, (dtype, array) in tensors.items():
        raw = array.tobytes()
        header[name] = {"dtype": dtype, "shape": list(array.shape),
                        "data_offsets": [offset, offset + len(raw)]}
        blobs.append(raw)
        offset += len(raw)
    head = json.dumps(header).encode()
    path.write_bytes(len(head).to_bytes(8, "little") + head + b"".join(blobs))


SPEC = ('block R {{ activation relu dim 2 width 2\n up = load("{f}", "up")\n'
        ' down = load("{f}", "down") }}\n')


def test_npz_float32_is_taken_exactly(tmp_path):
    up = np.array([[0.1, 2], [3, -4]], dtype=np.float32)
    down = np.array([[1, 2], [3, 4]], dtype=np.int64)
    np.savez(tmp_path / "w.npz", up=up, down=down)
    spec = load_text(SPEC.format(f="w.npz"), "s.mlp", tmp_path)
    layer = spec.blocks["R"].layers[0]
    assert layer.up.rows[0][0] == Fraction(float(np.float32(0.1)))
    assert layer.up.rows[0][0] != Fraction(1, 10)
    assert layer.down.rows == ((1, 2), (3, 4))


def test_large_int64_is_not_rounded(tmp_path):
    big = 2**62 + 1
    np.savez(tmp_path / "w.npz", up=np.array([[big, 0], [0, 1]], dtype=np.int64),
             down=np.eye(2, dtype=np.int64))
    spec = load_text(SPEC.format(f="w.npz"), "s.mlp", tmp_path)
    assert spec.blocks["R"].layers[0].up.rows[0][0] == big


def test_safetensors_f32_f64_and_bf16(tmp_path):
    up = np.array([[0.5, -1.25], [3.0, 1e-3]], dtype=np.float32)
    down = np.array([[1.0, 2.0], [-3.0, 4.5]], dtype=np.float32)
    bf16 = (down.view(np.uint32) >> 16).astype("<u2")  # exact: these values fit in bf16
    write_safetensors(tmp_path / "w.safetensors", {"up": ("F32", up), "down": ("BF16", bf16)})
    spec = load_text(SPEC.format(f="w.safetensors"), "s.mlp", tmp_path)
    layer = spec.blocks["R"].layers[0]
    assert layer.up.rows[1][1] == Fraction(float(np.float32(1e-3)))
    assert layer.down.rows == ((1, 2), (-3, Fraction(9, 2)))


def test_safetensors_missing_key_is_positioned(tmp_path):
    write_safetensors(tmp_path / "w.safetensors",
                      {"up": ("F64", np.eye(2)), "other": ("F64", np.eye(2))})
    with pytest.raises(Exception) as caught:
        load_text(SPEC.format(f="w.safetensors"), "s.mlp", tmp_path)
    [diag] = caught.value.diagnostics
    assert (diag.pos.line, diag.pos.column) == (3, 9)
    assert "no tensor 'down'" in diag.message
