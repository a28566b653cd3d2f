"""`load("model.onnx", "INITIALIZER")`: the prover's reader (`weights/onnx_file.py`) and the
checker's own (`checker/readers/onnx_file.py`) read the same exact values from every way ONNX stores
a tensor (raw_data, the typed fields, external data), refuse the same ambiguous files, and
a certificate over a model with external data goes stale when an external file changes."""

from __future__ import annotations

import hashlib
import json
import shutil
from fractions import Fraction
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

import absorb_formal  # noqa: E402
from absorb_formal.certify.documents import sha256_file as prover_sha256  # noqa: E402
from absorb_formal.checker.readers.files import FileError  # noqa: E402
from absorb_formal.checker.readers.weights import read_array  # noqa: E402
from absorb_formal.checker.readers.weights import sha256_file as checker_sha256  # noqa: E402
from absorb_formal.model import exactarray  # noqa: E402
from absorb_formal.weights.arrays import ArrayError, load_array  # noqa: E402


def model(path: Path, tensors: list[Any], nodes: list[Any] | None = None,
          sparse: list[Any] | None = None, **save: Any) -> Path:
    graph = helper.make_graph(nodes or [], "g", [], [], tensors, sparse_initializer=sparse)
    onnx.save(helper.make_model(graph), str(path), **save)
    return path


def prover(path: Path, key: str) -> Any:
    try:
        return exactarray.fractions(load_array(path, key).array())
    except ArrayError as error:
        return f"refused: {error}"


def checker(path: Path, key: str) -> Any:
    try:
        return read_array(path, key).rows()
    except FileError as error:
        return f"refused: {error}"


def both(path: Path, key: str) -> Any:
    mine, theirs = prover(path, key), checker(path, key)
    if isinstance(mine, str) or isinstance(theirs, str):
        assert isinstance(mine, str) and isinstance(theirs, str), (mine, theirs)
        return "refused"
    assert mine == theirs
    return mine


def F(x: Any) -> Fraction:  # noqa: N802 - the exact value of a float
    return Fraction(float(x))


# ---- every storage of every dtype reads alike, exactly ---------------------------------------

VALUES = [[0.1, -2.5], [1e-40, 3.0]]  # 0.1 rounds differently in each format; 1e-40 is small


def typed_and_raw() -> dict[str, tuple[Any, list[list[Fraction]]]]:
    """name → (tensor, the exact values it must read as)."""
    out: dict[str, tuple[Any, list[list[Fraction]]]] = {}
    for code, dtype in ((TensorProto.FLOAT, np.float32), (TensorProto.DOUBLE, np.float64),
                        (TensorProto.FLOAT16, np.float16)):
        exact = np.array(VALUES, dtype=dtype)
        want = [[F(v) for v in row] for row in exact.tolist()]
        out[f"typed{code}"] = (helper.make_tensor(f"typed{code}", code, [2, 2],
                                                  exact.astype(np.float64).ravel().tolist()),
                               want)
        out[f"raw{code}"] = (numpy_helper.from_array(exact, f"raw{code}"), want)
    bf16 = [0x3DCD, 0xC020, 0x0001, 0x4040]  # bfloat16 bit patterns: ~0.1, -2.5, 2^-133, 3
    want_bf16 = [[F(np.array([b << 16], np.uint32).view(np.float32)[0]) for b in bf16[:2]],
                 [F(np.array([b << 16], np.uint32).view(np.float32)[0]) for b in bf16[2:]]]
    typed = TensorProto(name="bf16typed", data_type=TensorProto.BFLOAT16, dims=[2, 2])
    typed.int32_data.extend(bf16)
    raw = TensorProto(name="bf16raw", data_type=TensorProto.BFLOAT16, dims=[2, 2],
                      raw_data=np.array(bf16, dtype="<u2").tobytes())
    out["bf16typed"], out["bf16raw"] = (typed, want_bf16), (raw, want_bf16)
    for code, dtype, values in ((TensorProto.INT8, np.int8, [[-128, 127], [0, -1]]),
                                (TensorProto.UINT8, np.uint8, [[255, 0], [1, 2]]),
                                (TensorProto.INT16, np.int16, [[-32768, 5], [6, 7]]),
                                (TensorProto.UINT16, np.uint16, [[65535, 5], [6, 7]]),
                                (TensorProto.INT32, np.int32, [[-2**31, 5], [6, 7]]),
                                (TensorProto.INT64, np.int64, [[-2**63, 2**63 - 1], [1, 2]]),
                                (TensorProto.UINT32, np.uint32, [[2**32 - 1, 5], [6, 7]]),
                                (TensorProto.UINT64, np.uint64, [[2**64 - 1, 5], [6, 7]]),
                                (TensorProto.BOOL, np.bool_, [[1, 0], [0, 1]])):
        want = [[Fraction(int(v)) for v in row] for row in values]
        field = {TensorProto.INT64: "int64_data", TensorProto.UINT32: "uint64_data",
                 TensorProto.UINT64: "uint64_data"}.get(code, "int32_data")
        typed = TensorProto(name=f"typed{code}", data_type=code, dims=[2, 2])
        getattr(typed, field).extend(int(v) for row in values for v in row)
        out[f"typed{code}"] = (typed, want)
        out[f"raw{code}"] = (numpy_helper.from_array(np.array(values, dtype=dtype),
                                                     f"raw{code}"), want)
    return out


def test_every_dtype_and_storage_reads_the_same_exact_values(tmp_path):
    cases = typed_and_raw()
    path = model(tmp_path / "m.onnx", [tensor for tensor, _ in cases.values()])
    stored = onnx.load(str(path))
    assert {t.name for t in stored.graph.initializer if t.HasField("raw_data")} == \
        {n for n in cases if n.startswith("raw") or n == "bf16raw"}
    for name, (_, want) in cases.items():
        assert both(path, name) == want, name
    # float_data holds float32 values: 0.1 is read as the float32 nearest 0.1, not 1/10
    assert both(path, f"typed{TensorProto.FLOAT}")[0][0] == Fraction(13421773, 134217728)


def test_external_data_reads_alike_and_is_hashed_with_the_model(tmp_path):
    cases = typed_and_raw()
    path = model(tmp_path / "m.onnx", [tensor for tensor, _ in cases.values()],
                 save_as_external_data=True, all_tensors_to_one_file=True,
                 location="m.onnx.data", size_threshold=0)
    stored = onnx.load(str(path), load_external_data=False)
    external = [t.name for t in stored.graph.initializer if t.data_location == 1]
    assert len(external) >= 10  # the raw_data tensors moved out
    for name, (_, want) in cases.items():
        assert both(path, name) == want, name
    digest = prover_sha256(path)
    assert digest == checker_sha256(path)
    assert digest != hashlib.sha256(path.read_bytes()).hexdigest()  # the data file counts
    plain = model(tmp_path / "p.onnx", [cases["raw1"][0]])
    assert prover_sha256(plain) == checker_sha256(plain) == \
        hashlib.sha256(plain.read_bytes()).hexdigest()  # no external data: the file's own


def test_a_large_random_matrix_reads_alike(tmp_path):
    rng = np.random.default_rng(7)
    weights = {"w32": rng.standard_normal((64, 48)).astype(np.float32),
               "w16": rng.standard_normal((48, 64)).astype(np.float16),
               "w64": rng.standard_normal((8, 8)) * 1e-300}
    path = model(tmp_path / "r.onnx", [numpy_helper.from_array(a, k) for k, a in weights.items()])
    for key, array in weights.items():
        got = both(path, key)
        assert got == [[F(v) for v in row] for row in array.astype(np.float64).tolist()]


# ---- ambiguous and malformed files: both refuse -----------------------------------------------

W = numpy_helper.from_array(np.array([[1, 2], [3, 4]], dtype=np.float32), "W")


def _with(**fields: Any) -> Any:
    tensor = TensorProto()
    tensor.CopyFrom(W)
    for name, value in fields.items():
        if isinstance(value, list):
            getattr(tensor, name).extend(value)
        elif name == "segment":
            tensor.segment.CopyFrom(value)
        else:
            setattr(tensor, name, value)
    return tensor


def _ext(tensor_name: str, entries: list[tuple[str, str]]) -> Any:
    tensor = TensorProto(name=tensor_name, data_type=TensorProto.FLOAT, dims=[2, 2],
                         data_location=TensorProto.EXTERNAL)
    for key, value in entries:
        tensor.external_data.add(key=key, value=value)
    return tensor


def refused_models(folder: Path) -> dict[str, Path]:
    (folder / "data.bin").write_bytes(np.arange(4, dtype="<f4").tobytes() * 2)
    const = helper.make_node("Constant", [], ["W"], value=numpy_helper.from_array(
        np.zeros((2, 2), np.float32)))
    other = helper.make_node("Relu", ["x"], ["W"])
    sparse = helper.make_sparse_tensor(
        numpy_helper.from_array(np.array([5.0], np.float32), "W"),
        numpy_helper.from_array(np.array([1], np.int64), "W_indices"), [2, 2])
    float_typed = helper.make_tensor("W", TensorProto.FLOAT, [2, 2], [1, 2, 3, 4])
    cases: dict[str, Any] = {
        "name twice": ([W, W], []),
        "name twice, other key": ([W, _with(name="V"), _with(name="V")], []),
        "Constant node and initializer": ([W], [const]),
        "a node output and initializer": ([W], [other]),
        "raw and float_data": ([_with(float_data=[1.0, 2.0, 3.0, 4.0])], []),
        "raw and int32_data": ([_with(int32_data=[1, 2, 3, 4])], []),
        "float_data and double_data": ([_with_typed(float_typed, double_data=[1.0] * 4)], []),
        "wrong typed field": ([_with_typed(TensorProto(name="W", data_type=TensorProto.FLOAT,
                                                       dims=[2, 2]), int32_data=[1] * 4)], []),
        "external and raw": ([_ext_on(_with(data_location=TensorProto.EXTERNAL),
                                      [("location", "data.bin"), ("length", "16")])], []),
        "external without location": ([_ext("W", [("length", "16")])], []),
        "external entries without EXTERNAL": ([_ext_on(W, [("location", "data.bin")])], []),
        "external key twice": ([_ext("W", [("location", "data.bin"), ("offset", "0"),
                                           ("offset", "16")])], []),
        "external unknown key": ([_ext("W", [("location", "data.bin"), ("base", "x")])], []),
        "external outside the folder": ([_ext("W", [("location", "../data.bin")])], []),
        "external absolute": ([_ext("W", [("location", str(folder / "data.bin"))])], []),
        "external too long": ([_ext("W", [("location", "data.bin")])], []),  # 32 bytes, 16 due
        "external past the end": ([_ext("W", [("location", "data.bin"), ("offset", "24"),
                                              ("length", "16")])], []),
        "external missing file": ([_ext("W", [("location", "nowhere.bin"),
                                              ("length", "16")])], []),
        "external malformed offset": ([_ext("W", [("location", "data.bin"),
                                                  ("offset", "-4"), ("length", "16")])], []),
        "unrelated external outside": ([W, _ext("V", [("location", "../v.bin")])], []),
        "segment": ([_with(segment=TensorProto.Segment(begin=0, end=4))], []),
        "string": ([helper.make_tensor("W", TensorProto.STRING, [1, 1], [b"a"])], []),
        "complex": ([helper.make_tensor("W", TensorProto.COMPLEX64, [1, 1], [1 + 2j])], []),
        "float8": ([TensorProto(name="W", data_type=TensorProto.FLOAT8E4M3FN, dims=[1, 2],
                                raw_data=b"\x01\x02")], []),
        "int8 out of range": ([_typed("W", TensorProto.INT8, int32_data=[128])], []),
        "uint16 negative": ([_typed("W", TensorProto.UINT16, int32_data=[-1])], []),
        "float16 pattern too big": ([_typed("W", TensorProto.FLOAT16, int32_data=[65536])], []),
        "bf16 pattern negative": ([_typed("W", TensorProto.BFLOAT16, int32_data=[-16512])], []),
        "uint32 too big": ([_typed("W", TensorProto.UINT32, uint64_data=[2**32])], []),
        "bool 2 typed": ([_typed("W", TensorProto.BOOL, int32_data=[2])], []),
        "bool 2 raw": ([TensorProto(name="W", data_type=TensorProto.BOOL, dims=[1, 1],
                                    raw_data=b"\x02")], []),
        "raw too short": ([TensorProto(name="W", data_type=TensorProto.FLOAT, dims=[2, 2],
                                       raw_data=b"\0" * 12)], []),
        "typed too short": ([_with_typed(TensorProto(name="W", data_type=TensorProto.FLOAT,
                                                     dims=[2, 2]), float_data=[1.0, 2.0])],
                            []),
        "no data": ([TensorProto(name="W", data_type=TensorProto.FLOAT, dims=[2, 2])], []),
        "NaN raw": ([numpy_helper.from_array(np.array([[np.nan, 1]], np.float32), "W")], []),
        "inf typed": ([_typed("W", TensorProto.DOUBLE, double_data=[float("inf")])], []),
        "missing key": ([_with(name="V")], []),
        "a computed value": ([], [helper.make_node("Relu", ["x"], ["W"])]),
        "two nodes output it": ([], [const, const]),
        "a Constant and a graph input": ([], [const], ["W"]),
        "an initializer, a node output and a graph input": ([W], [other], ["W"]),
        "a Constant of two attributes": ([], [_two_attributes(const)]),
        "a sparse Constant": ([], [helper.make_node("Constant", [], ["W"],
                                                    sparse_value=sparse)]),
        "a string Constant": ([], [helper.make_node("Constant", [], ["W"],
                                                    value_string="a")]),
        "a Constant of a string tensor": ([], [helper.make_node(
            "Constant", [], ["W"], value=helper.make_tensor("s", TensorProto.STRING, [1, 1],
                                                            [b"a"]))]),
    }
    paths = {}
    for i, (name, (tensors, nodes, *named_inputs)) in enumerate(cases.items()):
        inputs = [helper.make_tensor_value_info(n, TensorProto.FLOAT, [2, 2])
                  for n in (named_inputs[0] if named_inputs else [])]
        graph = helper.make_graph(nodes, "g", inputs, [], tensors)
        paths[name] = folder / f"bad{i}.onnx"
        paths[name].write_bytes(helper.make_model(graph).SerializeToString())
    graph = helper.make_graph([], "g", [], [], [], sparse_initializer=[sparse])
    paths["sparse"] = folder / "sparse.onnx"
    paths["sparse"].write_bytes(helper.make_model(graph).SerializeToString())
    paths["not onnx"] = folder / "junk.onnx"
    paths["not onnx"].write_bytes(b"\xff\xff\xff garbage, not a protobuf \x00\x01")
    return paths


def _two_attributes(node: Any) -> Any:
    out = helper.make_node("Constant", [], list(node.output))
    out.attribute.extend(node.attribute)
    out.attribute.append(helper.make_attribute("value_float", 1.0))
    return out


def _with_typed(tensor: Any, **fields: list[Any]) -> Any:
    out = TensorProto()
    out.CopyFrom(tensor)
    for name, values in fields.items():
        getattr(out, name).extend(values)
    return out


def _typed(name: str, code: int, **fields: list[Any]) -> Any:
    count = len(next(iter(fields.values())))
    return _with_typed(TensorProto(name=name, data_type=code, dims=[1, count]), **fields)


def _ext_on(tensor: Any, entries: list[tuple[str, str]]) -> Any:
    out = TensorProto()
    out.CopyFrom(tensor)
    for key, value in entries:
        out.external_data.add(key=key, value=value)
    return out


def test_both_readers_refuse_the_same_ambiguous_or_malformed_files(tmp_path):
    paths = refused_models(tmp_path)
    for case, path in paths.items():
        mine, theirs = prover(path, "W"), checker(path, "W")
        assert isinstance(mine, str) and mine.startswith("refused"), (case, mine)
        assert "not a matrix" not in mine, (case, mine)  # refused for its own reason
        assert isinstance(theirs, str) and theirs.startswith("refused"), (case, theirs)
    ambiguous = [c for c in paths if "twice" in c or " and " in c or "without EXTERNAL" in c
                 or "two nodes" in c]
    for case in ambiguous:
        assert "ambiguous" in prover(paths[case], "W"), case
        assert "ambiguous" in checker(paths[case], "W"), case


def test_the_refusals_are_not_blanket_the_same_files_made_sound_read_fine(tmp_path):
    (tmp_path / "data.bin").write_bytes(np.arange(4, dtype="<f4").tobytes() * 2)
    good = {
        "one name": [W],
        "external, offset and length": [_ext("W", [("location", "data.bin"), ("offset", "16"),
                                                   ("length", "16")])],
        "typed float_data": [_typed("W", TensorProto.FLOAT, float_data=[1.0, 2.0, 3.0, 4.0])],
    }
    for i, (case, tensors) in enumerate(good.items()):
        path = model(tmp_path / f"good{i}.onnx", tensors)
        assert both(path, "W") != "refused", case
    const = helper.make_node("Constant", [], ["W"], value=W)
    path = model(tmp_path / "const.onnx", [], [const])  # a Constant alone: one meaning
    assert both(path, "W") == [[1, 2], [3, 4]]


def test_a_missing_initializer_names_the_file_the_key_and_some_that_exist(tmp_path):
    names = [f"layer{i}.weight" for i in range(14)]
    path = model(tmp_path / "m.onnx", [_with(name=n) for n in names])
    message = prover(path, "layer1.wieght")
    assert "'m.onnx' has no initializer 'layer1.wieght'" in message
    assert "layer0.weight" in message and "14 in all" in message
    assert "has no initializer 'layer1.wieght'" in checker(path, "layer1.wieght")
    assert "did you mean 'layer1.weight'?" in message
    assert "did you mean" not in prover(path, "unrelated")
    computed = model(tmp_path / "c.onnx", [], [helper.make_node("Relu", ["x"], ["K"])])
    assert "no stored tensor 'K': it is computed, the output of a Relu node" in \
        prover(computed, "K")
    assert "output of a Relu node" in checker(computed, "K")


def test_a_truncated_model_is_said_to_be_truncated_or_not_onnx_by_both_readers(tmp_path):
    path = model(tmp_path / "m.onnx", [W])
    path.write_bytes(path.read_bytes()[:-5])
    assert "'m.onnx' is not a readable ONNX model: truncated or not ONNX" in prover(path, "W")
    assert "is not a readable ONNX model: truncated or not ONNX" in checker(path, "W")


# ---- tensors held in Constant nodes -------------------------------------------------------------

def constant_nodes(cases: dict[str, tuple[Any, Any]]) -> list[Any]:
    """Each case's tensor as the value of a Constant node whose output is the case's name
    (the tensor itself named otherwise, as exporters leave it)."""
    nodes = []
    for name, (tensor, _) in cases.items():
        value = TensorProto()
        value.CopyFrom(tensor)
        value.name = f"{name}_value"
        nodes.append(helper.make_node("Constant", [], [name], value=value))
    return nodes


@pytest.mark.parametrize("external", [False, True])
def test_tensors_in_constant_nodes_read_alike_exactly_by_their_output_name(tmp_path, external):
    cases = typed_and_raw()
    scalars = [helper.make_node("Constant", [], ["floats"], value_floats=[0.1, -2.5]),
               helper.make_node("Constant", [], ["ints"], value_ints=[3, -(2**40)]),
               helper.make_node("Constant", [], ["float"], value_float=0.1)]
    graph = helper.make_graph(constant_nodes(cases) + scalars, "g", [], [], [])
    path = tmp_path / "c.onnx"
    if external:  # the Constants' tensors moved to a data file too
        onnx.save(helper.make_model(graph), str(path), save_as_external_data=True,
                  all_tensors_to_one_file=True, location="c.data", size_threshold=0,
                  convert_attribute=True)
        stored = onnx.load(str(path), load_external_data=False)
        assert any(a.t.data_location == 1 for n in stored.graph.node for a in n.attribute)
        assert prover_sha256(path) == checker_sha256(path) != \
            hashlib.sha256(path.read_bytes()).hexdigest()  # the data file counts
    else:
        onnx.save(helper.make_model(graph), str(path))
    for name, (_, want) in cases.items():
        assert both(path, name) == want, name
    assert exactarray.fractions(load_array(path, "floats", vector=True).array()[None]) == \
        [[F(np.float32(0.1)), F(-2.5)]]
    assert read_array(path, "floats").fractions() == [F(np.float32(0.1)), F(-2.5)]
    assert read_array(path, "ints").fractions() == [3, -(2**40)]
    assert load_array(path, "ints", vector=True).array().tolist() == [3, -(2**40)]
    assert read_array(path, "float").fractions() == F(np.float32(0.1))


# ---- in a spec, and through certificates ------------------------------------------------------

SPEC = """block R {
    activation relu  dim 2  width 3
    up   = load("m.onnx", "fc1.weight")
    down = load("m.onnx", "fc2.weight").T
}
claim R is absorbable
"""


def relu_model(folder: Path, external: bool, constants: bool = False) -> Path:
    """The weights as initializers, or (`constants`) as Constant nodes named alike."""
    up = np.array([[1, 0], [0, 1], [1, 1]], dtype=np.float32)  # W_down[:, J] W_up[J, :] = -I
    down = np.array([[-1, 0, 0.5], [0, -1, 0.25]], dtype=np.float32).T  # stored m×d
    tensors = [numpy_helper.from_array(up, "fc1.weight"),
               numpy_helper.from_array(np.ascontiguousarray(down), "fc2.weight")]
    save = dict(save_as_external_data=True, all_tensors_to_one_file=True,
                location="weights.bin", size_threshold=0,
                convert_attribute=True) if external else {}
    if constants:
        return model(folder / "m.onnx", [], constant_nodes({t.name: (t, None) for t in tensors}),
                     **save)
    return model(folder / "m.onnx", tensors, **save)


@pytest.mark.parametrize("external, constants", [(False, False), (True, False), (False, True),
                                                 (True, True)])
def test_a_spec_loading_onnx_is_decided_certified_and_checked(cli, tmp_path, external,
                                                               constants):
    relu_model(tmp_path, external, constants)
    spec = tmp_path / "r.mlp"
    spec.write_text(SPEC, encoding="utf-8")
    run = cli("--certificates", tmp_path / "certs", spec)
    assert run.code == 0, run.out + run.err
    assert "proved: R is absorbable" in run.out
    [document] = (tmp_path / "certs").glob("*.json")
    doc = json.loads(document.read_text())
    assert set(doc["files"]) == {"m.onnx"}
    assert doc["files"]["m.onnx"] == checker_sha256(tmp_path / "m.onnx")
    [result] = absorb_formal.check(document)
    assert result.status == "valid", result.reason
    # a changed weight: in the data file when external, in the model otherwise
    changed = tmp_path / ("weights.bin" if external else "m.onnx")
    data = bytearray(changed.read_bytes())
    at = data.find(np.float32(0.25).tobytes())
    assert at >= 0
    data[at:at + 4] = np.float32(0.5).tobytes()
    changed.write_bytes(bytes(data))
    [result] = absorb_formal.check(document)
    assert result.status == "stale", result
    assert "m.onnx" in result.reason


def test_a_forged_certificate_hash_over_a_changed_external_file_is_stale_not_valid(
        cli, tmp_path):
    """The document records the model file's own SHA-256 (as if external data were not
    covered) after the data file changed: the checker's digest covers the data file, so
    the recorded value cannot match."""
    relu_model(tmp_path, True)
    spec = tmp_path / "r.mlp"
    spec.write_text(SPEC, encoding="utf-8")
    assert cli("--certificates", tmp_path / "certs", spec).code == 0
    [document] = (tmp_path / "certs").glob("*.json")
    doc = json.loads(document.read_text())
    doc["files"]["m.onnx"] = hashlib.sha256((tmp_path / "m.onnx").read_bytes()).hexdigest()
    document.write_text(json.dumps(doc))
    [result] = absorb_formal.check(document)
    assert result.status == "stale"


def test_a_missing_initializer_in_a_spec_is_a_positioned_error(cli, tmp_path):
    relu_model(tmp_path, False)
    spec = tmp_path / "r.mlp"
    spec.write_text(SPEC.replace("fc1.weight", "fc1.wieght"), encoding="utf-8")
    run = cli(spec)
    assert run.code == 2
    assert "r.mlp:3:12: error: 'm.onnx' has no initializer 'fc1.wieght'; did you mean " \
        "'fc1.weight'? (it has: fc1.weight, fc2.weight)" in run.err, run.err


def test_an_ambiguous_model_is_a_positioned_error_and_a_moved_model_still_checks(cli, tmp_path):
    relu_model(tmp_path, True)
    spec = tmp_path / "r.mlp"
    spec.write_text(SPEC, encoding="utf-8")
    assert cli("--certificates", tmp_path / "certs", spec).code == 0
    moved = tmp_path / "moved"
    shutil.copytree(tmp_path, moved, ignore=shutil.ignore_patterns("certs"))
    shutil.copytree(tmp_path / "certs", moved / "certs")
    [document] = (moved / "certs").glob("*.json")
    [result] = absorb_formal.check(document)
    assert result.status == "valid", result.reason
    (moved / "weights.bin").unlink()
    [result] = absorb_formal.check(document)
    assert result.status != "valid"
    stored = onnx.load(str(tmp_path / "m.onnx"), load_external_data=False)
    stored.graph.initializer.append(stored.graph.initializer[0])
    (tmp_path / "m.onnx").write_bytes(stored.SerializeToString())
    run = cli(spec)
    assert run.code == 2 and "r.mlp:3:12: error: 'm.onnx' is ambiguous" in run.err, run.err


# ---- fuzz: flipped bytes in a model --------------------------------------------------------------

def _fuzz_base(folder: Path) -> bytes:
    """Every case as an initializer, and as a Constant node's value named `const_CASE`."""
    tensors = [tensor for tensor, _ in typed_and_raw().values()]
    constants = constant_nodes({f"const_{k}": v for k, v in typed_and_raw().items()})
    graph = helper.make_graph([helper.make_node("Relu", ["x"], ["y"]), *constants], "g", [],
                              [], tensors)
    return helper.make_model(graph).SerializeToString()


@settings(max_examples=60, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(flips=st.lists(st.tuples(st.integers(0, 10**6), st.integers(1, 255)), min_size=1,
                      max_size=3),
       key=st.sampled_from(sorted(typed_and_raw()) + [f"const_{k}" for k in typed_and_raw()]))
def test_both_readers_agree_on_models_with_flipped_bytes(tmp_path, flips, key):
    """Whatever a corrupted model holds, the two readers read the same values or both
    refuse it (a tensor that is no longer 2-D: the prover refuses it as a matrix, the
    checker's reader returns it and its shape check refuses it later)."""
    data = bytearray(_fuzz_base(tmp_path))
    for at, xor in flips:
        data[at % len(data)] ^= xor
    path = tmp_path / "f.onnx"
    path.write_bytes(bytes(data))
    mine = prover(path, key)
    try:
        theirs: Any = read_array(path, key)
    except FileError as error:
        theirs = f"refused: {error}"
    if not isinstance(theirs, str) and len(theirs.shape) != 2:
        assert isinstance(mine, str) and "not a matrix" in mine, (mine, theirs.shape)
        return
    if isinstance(theirs, str) or isinstance(mine, str):
        assert isinstance(mine, str) and isinstance(theirs, str), (mine, theirs)
    else:
        assert mine == theirs.rows()


def test_the_docs_onnx_example_is_what_its_script_writes(tmp_path):
    import runpy

    from ..conftest import ROOT

    script = ROOT / "docs" / "examples" / "make_onnx_example.py"
    runpy.run_path(str(script))["main"](tmp_path)
    assert (tmp_path / "gpt2_mlp.onnx").read_bytes() == \
        (script.parent / "gpt2_mlp.onnx").read_bytes()


def test_without_the_onnx_package_both_readers_say_how_to_install_it(tmp_path, monkeypatch):
    import builtins

    path = model(tmp_path / "m.onnx", [W])
    real = builtins.__import__

    def no_onnx(name: str, *args: Any, **kwargs: Any) -> Any:
        if name == "onnx" or name.startswith("onnx."):
            raise ImportError(name)
        return real(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_onnx)
    assert "pip install 'absorb_formal[onnx]'" in prover(path, "W")
    assert "pip install 'absorb_formal[onnx]'" in checker(path, "W")
