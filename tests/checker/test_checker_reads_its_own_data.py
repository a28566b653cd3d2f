"""The checker reads its own data: spec text and weight files, exactly, from their bytes
(`checker/readers/source.py`, `checker/readers/files.py`, `checker/readers/reading.py`), so
that a loader bug in the prover is caught, and `absorb-prove check` finds the spec from any
working directory."""

from __future__ import annotations

import json
import struct
import zipfile
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest

from absorb_formal.checker.readers.files import FileError, read_array
from absorb_formal.checker.readers.source import read_spec
from absorb_formal.cli.check import check_document
from absorb_formal.weights.arrays import Loaded

RELU = """block R {{
    activation relu
    dim 2  width 3
    up   = {up}
    down = [[-1, 0, 7/10], [0, -1, 3/10]]
}}
claim R is absorbable
"""
UP = "[[1, 0], [0, 1], [1, 1]]"


# ---- weight files: bit-exact against numpy --------------------------------------------------

def _want(array: np.ndarray) -> list[list[Fraction]]:
    if array.dtype.kind in "iub":
        return [[Fraction(int(v)) for v in row] for row in array.tolist()]
    return [[Fraction(*v.as_integer_ratio()) for v in row] for row in array]


def _random(rng: np.random.Generator, dtype: str) -> np.ndarray:
    shape = (3, 5)
    kind = np.dtype(dtype).kind
    if kind == "b":
        return rng.integers(0, 2, shape).astype(bool)
    if kind in "iu":
        info = np.iinfo(dtype)
        native = np.dtype(dtype).newbyteorder("=")
        return rng.integers(info.min, info.max, shape, dtype=native, endpoint=True).astype(dtype)
    scale = np.array([1e-6, 1.0, 3e4, 6e-8, 1e-310])[rng.integers(0, 5, shape)]
    values = (rng.standard_normal(shape) * scale).astype(dtype)  # subnormals included
    values[0, 0] = -0.0
    if values.dtype.itemsize > 8:  # long double: clear the padding (see files.py on binary128)
        values.view(np.uint8).reshape(values.size, -1)[:, 10:] = 0
    return values


DTYPES = ["<f2", "<f4", "<f8", ">f8", ">f4", np.dtype(np.longdouble).str, "<i1", "<i2", "<i4",
          "<i8", ">i8", "<u1", "<u2", "<u4", "<u8", ">u2", "|b1"]


@pytest.mark.parametrize("seed", range(3))
def test_npz_reader_agrees_with_numpy_on_every_dtype(tmp_path, seed):
    rng = np.random.default_rng(seed)
    arrays = {f"a{i}": _random(rng, d) for i, d in enumerate(DTYPES)}
    arrays["fortran"] = np.asfortranarray(_random(rng, "<f8"))
    np.savez(tmp_path / "w.npz", **arrays)
    np.savez_compressed(tmp_path / "c.npz", **arrays)
    for name, array in arrays.items():
        for file in ("w.npz", "c.npz"):
            got = read_array(tmp_path / file, name)
            assert got.shape == array.shape
            assert got.rows() == _want(array), (name, array.dtype)


def _safetensors(path: Path, tensors: dict[str, tuple[str, tuple[int, ...], bytes]]) -> None:
    header, data = {}, b""
    for name, (dtype, shape, raw) in tensors.items():
        header[name] = {"dtype": dtype, "shape": list(shape),
                        "data_offsets": [len(data), len(data) + len(raw)]}
        data += raw
    text = json.dumps(header).encode()
    path.write_bytes(struct.pack("<Q", len(text)) + text + data)


def test_safetensors_reader_agrees_with_numpy_on_every_dtype(tmp_path):
    rng = np.random.default_rng(7)
    names = {"F64": "<f8", "F32": "<f4", "F16": "<f2", "I64": "<i8", "I32": "<i4",
             "I16": "<i2", "I8": "<i1", "U64": "<u8", "U32": "<u4", "U16": "<u2", "U8": "<u1",
             "BOOL": "|b1"}
    arrays = {code: _random(rng, dtype) for code, dtype in names.items()}
    bf16 = rng.integers(0, 1 << 16, (4, 6), dtype=np.uint16)
    bf16[(bf16 & 0x7F80) == 0x7F80] = 0x3F80  # no NaN/inf: 1.0 instead
    tensors = {code: (code, a.shape, a.tobytes()) for code, a in arrays.items()}
    tensors["BF16"] = ("BF16", bf16.shape, bf16.tobytes())
    _safetensors(tmp_path / "w.safetensors", tensors)
    for code, array in arrays.items():
        assert read_array(tmp_path / "w.safetensors", code).rows() == _want(array), code
    widened = (bf16.astype(np.uint32) << 16).view(np.float32)
    assert read_array(tmp_path / "w.safetensors", "BF16").rows() == _want(widened)


def test_long_double_and_int64_beyond_2_53_are_read_exactly(tmp_path):
    """float64 cannot hold 1 + 2^-60 or 2^53 + 1: the checker's reader keeps them exact."""
    if np.finfo(np.longdouble).nmant != 63:
        pytest.skip("needs x86 80-bit long double to write the file")
    tiny = np.longdouble(2) ** -60
    longs = np.array([[1 + tiny, -(3 + tiny)]], dtype=np.longdouble)
    ints = np.array([[2**53 + 1, -(2**63)], [2**62 + 3, 5]], dtype=np.int64)
    np.savez(tmp_path / "w.npz", longs=longs, ints=ints)
    assert read_array(tmp_path / "w.npz", "longs").rows() == [
        [1 + Fraction(1, 2**60), -(3 + Fraction(1, 2**60))]]
    assert read_array(tmp_path / "w.npz", "ints").rows() == [
        [2**53 + 1, -(2**63)], [2**62 + 3, 5]]


def test_non_finite_values_and_foreign_long_doubles_are_refused(tmp_path):
    np.savez(tmp_path / "w.npz", nan=np.array([[1.0, np.nan]]),
             inf=np.array([[np.inf]], dtype=np.float16))
    for key in ("nan", "inf"):
        with pytest.raises(FileError, match="NaN or an infinity"):
            read_array(tmp_path / "w.npz", key)
    # IEEE binary128 1/3 (aarch64's long double) has the same descr '<f16' as x86 extended;
    # its low fraction bits make a non-canonical x86 value
    quad = ((0x3FFD << 112) | (0x5555555555555555555555555555 & ((1 << 112) - 1))).to_bytes(
        16, "little")
    header = "{'descr': '<f16', 'fortran_order': False, 'shape': (1, 1), }"
    blob = b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)) + header.encode() + quad
    with zipfile.ZipFile(tmp_path / "q.npz", "w") as archive:
        archive.writestr("q.npy", blob)
    with pytest.raises(FileError, match="refused rather than guessed"):
        read_array(tmp_path / "q.npz", "q")


def test_long_double_padding_is_ignored_as_numpy_does(tmp_path):
    """numpy leaves the 6 padding bytes of an x86 long double uninitialised: a genuine file
    with garbage there (and zeros) is read as numpy reads it, not refused."""
    values = np.array([[0, -(np.longdouble(1) + np.longdouble(2) ** -60)]], dtype=np.longdouble)
    if np.finfo(np.longdouble).nmant != 63:
        pytest.skip("the platform's long double is not x86 extended")
    values.view(np.uint8).reshape(values.size, -1)[:, 10:] = 0xAB
    np.savez(tmp_path / "w.npz", w=values)
    assert read_array(tmp_path / "w.npz", "w").rows() == [[0, -(1 + Fraction(1, 2**60))]]


# ---- spec text ------------------------------------------------------------------------------

def test_spec_reader_reads_literals_loads_transposes_and_biases():
    source = read_spec("""
# comment
block B {
    activation leaky_relu(-0.25)   dim 2 width 2  skip 2.5E+2
    bias
    layer 1 { up = load("w.npz", "k").T  down = [[1e-3, 7/10], [-2, 3]]  up_bias = [1, 0] }
}
claim B is generically not absorbable at width 4
claim min width of B is none
""")
    block = source.blocks["B"]
    assert block.activation == ("leaky_relu", "param", [Fraction(-1, 4)])
    assert block.skip == 250 and block.bias
    [layer] = block.layer_list()
    assert layer["up"].transpose and layer["up"].key == "k"
    assert layer["down"] == [[Fraction(1, 1000), Fraction(7, 10)], [-2, 3]]
    assert layer["up_bias"] == [1, 0]
    assert source.statements == {8: "B is generically not absorbable at width 4",
                                 9: "min width of B is none"}


# ---- end to end: check reads the data itself -------------------------------------------------

def _round_on_load(monkeypatch):
    """A planted prover bug: its loader rounds every weight to float16."""
    from absorb_formal.language import validate

    real = validate.load_array

    def rounding(path, key, vector=False):
        return Loaded(real(path, key, vector).array().astype(np.float16).astype(np.float64),
                      "plain")

    monkeypatch.setattr(validate, "load_array", rounding)


def test_a_rounding_loader_in_the_prover_is_caught(cli, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    np.savez("w.npz", up=np.array([[1, 0], [0, 1], [1, 1.0001]], dtype=np.float32))
    Path("s.mlp").write_text(RELU.format(up='load("w.npz", "up")'), encoding="utf-8")
    assert cli("--crosscheck", "0", "--certificates", "out", "s.mlp").code in (0, 1)
    _round_on_load(monkeypatch)
    assert cli("--crosscheck", "0", "--certificates", "out", "--update", "s.mlp").code in (0, 1)
    verdict, _ = check_document(tmp_path / "out" / "s.mlp.7.json")
    assert verdict.status == "invalid", verdict.reason
    assert "block 'R' differs" in verdict.reason and "layers[0].up[2][1]" in verdict.reason


def test_an_edited_spec_is_stale_when_checked_from_another_folder(cli, tmp_path, monkeypatch):
    (tmp_path / "work").mkdir()
    (tmp_path / "elsewhere").mkdir()
    spec = tmp_path / "work" / "s.mlp"
    spec.write_text(RELU.format(up=UP), encoding="utf-8")
    monkeypatch.chdir(tmp_path / "work")
    assert cli("--crosscheck", "0", "--certificates", "out", "s.mlp").code == 0
    monkeypatch.chdir(tmp_path / "elsewhere")
    assert cli("check", "../work/out").code == 0
    spec.write_text(RELU.format(up=UP).replace("7/10", "71/100"), encoding="utf-8")
    run = cli("check", "../work/out")
    assert run.code == 1 and "stale" in run.out and "changed since certification" in run.out
    assert "down[0][2]" in run.out, run.out


def test_a_missing_spec_is_said_not_silently_valid(cli, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    Path("s.mlp").write_text(RELU.format(up=UP), encoding="utf-8")
    assert cli("--crosscheck", "0", "--certificates", "out", "s.mlp").code == 0
    Path("s.mlp").rename("gone.mlp")
    run = cli("check", "out")
    assert run.code == 0 and ": valid — claim proved: " in run.out, run.out
    assert "not found" in run.out


def test_same_named_specs_in_two_folders_get_two_certificates(cli, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    for folder, up in (("a", UP), ("b", "[[1, 0], [0, 1], [2, 1]]")):
        Path(folder).mkdir()
        Path(folder, "x.mlp").write_text(RELU.format(up=up), encoding="utf-8")
    run = cli("--crosscheck", "0", "--certificates", "out", "a/x.mlp", "b/x.mlp")
    assert run.code == 0, run.err
    stored = sorted(p.relative_to("out").as_posix() for p in Path("out").rglob("*.json"))
    assert stored == ["a/x.mlp.7.json", "b/x.mlp.7.json"]
    assert cli("check", "out").code == 0


def test_certificate_names_colliding_in_one_run_are_refused(cli, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    for folder in ("a", "b"):
        Path(folder).mkdir()
        Path(folder, "x.mlp").write_text(RELU.format(up=UP), encoding="utf-8")
    run = cli("--crosscheck", "0", "--certificates", "out", "a", "b")
    assert run.code == 2 and "also the certificate name of" in run.err
    assert cli("check", "out").code == 0  # what was written is a's, and still right


@pytest.mark.parametrize("kind", ["f2", "bf16", "f4", "f8"])
def test_decoding_and_residues_in_bands_are_exact(kind, monkeypatch):
    """The IEEE decoder and residue_matrix work a band of entries at a time (compact dtypes,
    no full-size temporaries): with bands of 7 entries, every value of a 13 × 11 array with
    zeros, subnormals, extremes and signs is still the exact rational, and every residue
    (of the array and of its transpose) the residue of that rational."""
    from absorb_formal.checker.readers import files

    monkeypatch.setattr(files, "_BAND", 7)
    rng = np.random.default_rng(5)
    dtype = {"f2": np.float16, "bf16": np.float32, "f4": np.float32, "f8": np.float64}[kind]
    values = (rng.standard_normal((13, 11)) * 10.0 ** rng.integers(-3, 4, (13, 11)))
    values = values.astype(dtype)
    info = np.finfo(dtype)
    values.flat[:6] = [0, -0.0, info.tiny, info.smallest_subnormal, -info.max, info.max]
    if kind == "bf16":  # the top half of each float32
        values = (values.view(np.uint32) & np.uint32(0xFFFF0000)).view(np.float32)
        data = (values.view(np.uint32) >> 16).astype("<u2").tobytes()
        got = files.decode(data, "bf16", 2, "<", values.size).reshape((13, 11))
    else:
        got = files.decode(values.astype(values.dtype.newbyteorder("<")).tobytes(), "f",
                           values.dtype.itemsize, "<", values.size).reshape((13, 11))
    want = [[Fraction(float(v)) for v in row] for row in values.tolist()]
    assert got.fractions() == want
    p = 2_097_143
    residues = [[x.numerator * pow(x.denominator, -1, p) % p for x in row] for row in want]
    assert got.residue_matrix(p).tolist() == residues
    assert got.T.residue_matrix(p).tolist() == [list(c) for c in zip(*residues, strict=True)]
