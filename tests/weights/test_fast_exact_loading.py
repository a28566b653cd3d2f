"""Reading weight files fast without losing exactness: values kept as their bits
until asked for, finiteness tested on bit patterns, `.T` as a view, one read per file
version — in the prover's loader and in the checker's own reader."""

from __future__ import annotations

import os
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest

from absorb_formal.checker.readers import files
from absorb_formal.language import load_text
from absorb_formal.language.errors import SpecError
from absorb_formal.weights.arrays import load_array

from .test_arrays_read_as_exact_rationals import write_safetensors

SPEC = ('block R {{ activation relu dim 2 width 3\n up = load("{f}", "up"){t}\n'
        ' down = load("{f}", "down") }}\n')
VALUES = np.array([[0.1, -2.5, 3e-5], [1 / 3, -7.0, 65504.0]])  # 2×3, read with .T as up


def _bits(values: np.ndarray, code: str) -> tuple[str, np.ndarray]:
    """(safetensors dtype, little-endian array) of `values` rounded to `code`."""
    if code == "BF16":
        top = (values.astype(np.float32).view(np.uint32) >> 16).astype("<u2")
        return "BF16", top
    return code, values.astype({"F16": "<f2", "F32": "<f4", "F64": "<f8"}[code])


def _exact(dtype: str, stored: np.ndarray) -> list[list[Fraction]]:
    """The rationals the stored bits denote, computed here independently of the loader."""
    if dtype == "BF16":
        stored = (stored.astype(np.uint32) << 16).view(np.float32)
    return [[Fraction(float(v)) for v in row] for row in stored]


@pytest.mark.parametrize("code", ["BF16", "F16", "F32", "F64"])
def test_every_float_format_is_read_exactly_and_transposed_as_a_view(tmp_path, code):
    dtype, stored = _bits(VALUES, code)
    write_safetensors(tmp_path / "w.safetensors", {"up": (dtype, stored),
                                                    "down": (dtype, stored)})
    spec = load_text(SPEC.format(f="w.safetensors", t=".T"), "s.mlp", tmp_path)
    layer = spec.blocks["R"].layers[0]
    exact = _exact(dtype, stored)
    assert layer.down.rows == tuple(tuple(r) for r in exact)
    assert layer.up.rows == tuple(zip(*exact, strict=True))  # `.T`: same values, transposed
    assert layer.up.exact_column(1) == tuple(exact[1])
    assert layer.up.shape == (3, 2) and layer.down.shape == (2, 3)


@pytest.mark.parametrize("code", ["BF16", "F16", "F32", "F64"])
@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_non_finite_values_are_positioned_errors(tmp_path, code, bad):
    values = VALUES.copy()
    values[1, 2] = bad
    write_safetensors(tmp_path / "w.safetensors", {"up": _bits(VALUES, code),
                                                    "down": _bits(values, code)})
    with pytest.raises(SpecError) as caught:
        load_text(SPEC.format(f="w.safetensors", t=".T"), "s.mlp", tmp_path)
    [diag] = caught.value.diagnostics
    assert (diag.pos.line, diag.pos.column) == (3, 9)
    assert "non-finite value at [1, 2]" in diag.message


def test_npz_float16_infinity_is_a_positioned_error(tmp_path):
    down = VALUES.astype(np.float16)
    down[0, 1] = np.inf
    np.savez(tmp_path / "w.npz", up=VALUES.T.astype(np.float16), down=down)
    with pytest.raises(SpecError) as caught:
        load_text(SPEC.format(f="w.npz", t=""), "s.mlp", tmp_path)
    assert "non-finite value at [0, 1]" in caught.value.diagnostics[0].message


def test_a_non_finite_value_beyond_the_first_chunk_is_found(tmp_path):
    big = np.zeros((600, 1000), dtype=np.float32)  # 600 000 entries: several chunks
    big[599, 998] = np.nan
    write_safetensors(tmp_path / "w.safetensors", {"a": _bits(big, "BF16")})
    with pytest.raises(ValueError, match=r"non-finite value at \[599, 998\]"):
        load_array(tmp_path / "w.safetensors", "a")


def _rewrite_keeping_size_and_mtime(path: Path, tensors: dict) -> None:
    before = path.stat()
    write_safetensors(path, tensors)
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))
    assert path.stat().st_size == before.st_size


def test_a_file_changed_between_two_loads_is_read_again(tmp_path):
    path = tmp_path / "w.safetensors"
    write_safetensors(path, {"up": _bits(VALUES.T, "F32"), "down": _bits(VALUES, "F32")})
    first = load_text(SPEC.format(f="w.safetensors", t=""), "s.mlp", tmp_path)
    assert first.blocks["R"].layers[0].down.rows[0][0] == Fraction(float(np.float32(0.1)))
    _rewrite_keeping_size_and_mtime(path, {"up": _bits(VALUES.T, "F32"),
                                           "down": _bits(VALUES * 2, "F32")})
    second = load_text(SPEC.format(f="w.safetensors", t=""), "s.mlp", tmp_path)
    assert second.blocks["R"].layers[0].down.rows[0][0] == 2 * Fraction(float(np.float32(0.1)))
    # the first spec keeps the values it read
    assert first.blocks["R"].layers[0].down.rows[0][0] == Fraction(float(np.float32(0.1)))


def test_one_key_loaded_twice_is_read_once_and_shared_read_only(tmp_path, monkeypatch):
    from absorb_formal.weights import common

    path = tmp_path / "w.safetensors"
    write_safetensors(path, {"a": _bits(VALUES, "BF16")})
    young, again = load_array(path, "a"), load_array(path, "a")
    assert young.bits is not again.bits  # changed under 2 s ago: read again, never served
    monkeypatch.setattr(common, "SETTLED_NS", -1)  # as if written long ago
    first, second = load_array(path, "a"), load_array(path, "a")
    assert first.bits is second.bits and not first.bits.flags.writeable
    assert np.array_equal(second.T.array(), first.array().T)


def test_a_loaded_matrix_is_not_widened_until_a_value_is_asked_for(tmp_path):
    write_safetensors(tmp_path / "w.safetensors", {"up": _bits(VALUES.T, "BF16"),
                                                    "down": _bits(VALUES, "BF16")})
    spec = load_text(SPEC.format(f="w.safetensors", t=""), "s.mlp", tmp_path)
    down = spec.blocks["R"].layers[0].down
    assert down._given is None  # only the bits are held
    assert down.rows == tuple(tuple(r) for r in _exact("BF16", _bits(VALUES, "BF16")[1]))


def test_the_checker_reads_a_changed_file_again(tmp_path):
    path = tmp_path / "w.safetensors"
    write_safetensors(path, {"a": _bits(VALUES, "F64")})
    hashed, read = files.sha256_file(path), files.read_array(path, "a").rows()
    assert files.sha256_file(path) == hashed  # the same version: served again
    _rewrite_keeping_size_and_mtime(path, {"a": _bits(-VALUES, "F64")})
    assert files.sha256_file(path) != hashed
    assert files.read_array(path, "a").rows() == [[-v for v in row] for row in read]


@pytest.mark.parametrize("code", ["<f2", "<f4", "<f8", "<i8", "<u8"])
def test_the_checkers_vectorised_residues_are_those_of_the_exact_values(code):
    rng = np.random.default_rng(1)
    if code[1] == "f":
        scale = {"<f2": 4, "<f4": 30, "<f8": 300}[code]
        values = (rng.standard_normal(2000) * 10.0 ** rng.integers(-scale, scale, 2000))
        values = values.astype(code)
        values[:3] = [0, -0.0, 1]
    else:
        values = rng.integers(np.iinfo(code).min, np.iinfo(code).max, 2000, dtype=code)
        values[0] = np.iinfo(code).min
    read = files.decode(values.tobytes(), code[1], values.itemsize, "<", values.size)
    exact = read.fractions()
    for p in (3, 1_000_003, 2**31 - 1, 2**61 - 1):
        assert read.residues(p) == [x.numerator * pow(x.denominator, -1, p) % p for x in exact]
    grid = read.reshape((40, 50))
    assert grid.residues(2**31 - 1, (slice(None), 7)) == [
        x.numerator * pow(x.denominator, -1, 2**31 - 1) % (2**31 - 1) for x in grid.column(7)]
