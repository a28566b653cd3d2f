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


def test_a_mistyped_key_suggests_the_nearest_name(tmp_path):
    tensors = {f"h.{i}.mlp.c_fc.weight": ("F64", np.eye(2)) for i in range(12)}
    write_safetensors(tmp_path / "w.safetensors", tensors)
    np.savez(tmp_path / "w.npz", **{"h.0.mlp.c_fc.weight": np.eye(2)})
    for file in ("w.safetensors", "w.npz"):
        text = f'block R {{ activation relu dim 2 width 2\n up = load("{file}", ' \
               '"h.0.mlp.c_fc.wieght")\n down = load("' + file + '", "nothing.like.it") }\n'
        with pytest.raises(Exception) as caught:
            load_text(text, "s.mlp", tmp_path)
        first, second = caught.value.diagnostics
        assert "did you mean 'h.0.mlp.c_fc.weight'?" in first.message, first.message
        assert "did you mean" not in second.message and "(it has: h.0" in second.message
        assert ("(12 in all)" in second.message) is (file == "w.safetensors")


def test_a_truncated_safetensors_file_is_said_to_be_truncated_by_both_readers(tmp_path):
    from absorb_formal.checker.readers.files import FileError
    from absorb_formal.checker.readers.files import read_array as checker_read
    from absorb_formal.weights.arrays import ArrayError, load_array

    path = tmp_path / "w.safetensors"
    write_safetensors(path, {"up": ("F64", np.eye(4)), "down": ("F64", np.eye(4))})
    whole = path.read_bytes()
    path.write_bytes(whole[:-40])  # the last 5 doubles lost
    with pytest.raises(ArrayError, match=r"'w.safetensors' is truncated: its header describes "
                                         r"256 data bytes, the file holds 216 \(40 missing\)"):
        load_array(path, "up")
    with pytest.raises(FileError, match=r"is truncated: its .safetensors header describes 256 "
                                        r"data bytes, the file holds 216"):
        checker_read(path, "up")
    path.write_bytes(whole[:20])  # cut inside the header
    with pytest.raises(ArrayError, match="is truncated: its header alone needs"):
        load_array(path, "up")
    with pytest.raises(FileError, match="is truncated: its .safetensors header alone needs"):
        checker_read(path, "up")
    path.write_bytes(whole + b"\0" * 8)  # bytes after the tensors: not a truncation
    with pytest.raises(ArrayError, match="8 more bytes follow them"):
        load_array(path, "up")
    with pytest.raises(FileError, match="8 more bytes follow them"):
        checker_read(path, "up")
