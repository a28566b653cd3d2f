"""`load("model.onnx", "KEY")`: one stored tensor of an ONNX model, kept as its bits.

KEY names an initializer of the main graph, or the output of a `Constant` node of the main
graph (exporters keep weights in Constant nodes too): its `value` tensor, or its
`value_float` (a float32 scalar), `value_floats` (a float32 vector), `value_int` (an int64
scalar) or `value_ints` (an int64 vector). A Constant's tensor is read exactly as an
initializer is.

The protobuf is parsed by the onnx package (never by hand: a second protobuf reader would be
a second meaning of the file). The tensor's values are then read here, from the field the
format assigns to its data type, without any conversion that could round:

- `raw_data`: little-endian bytes of the element type;
- typed fields: `float_data` (FLOAT: each entry a float32 value, kept as float32),
  `double_data` (DOUBLE), `int32_data` (INT8/16/32, UINT8/16, BOOL, and FLOAT16/BFLOAT16 as
  their 16-bit patterns), `int64_data` (INT64), `uint64_data` (UINT32/64); every entry must
  lie in its type's range (an out-of-range entry has two readings: wrapped, or refused);
- external data (`data_location: EXTERNAL`): `location` (relative to the model's folder,
  inside it), `offset`, `length` from the tensor's `external_data` entries; the range is read
  from that file directly and must hold exactly the tensor's bytes.

Ambiguous files are refused (the checker, `checker/readers/onnx_file.py`, refuses the same ones): an
initializer name occurring twice (sparse initializers included), a name that is both an
initializer and a node's output (a Constant node, say), a name that two nodes output, or
a Constant node and a graph input, a Constant node with other than one attribute or with
a sparse or string value, a tensor with both `raw_data` and a typed field, or with
external data and in-file data, or with `segment` set, or external data entries named
twice or unknown.

Dtypes read: FLOAT, DOUBLE, FLOAT16, BFLOAT16, INT8/16/32/64, UINT8/16/32/64, BOOL. Others
(strings, complex, 8-bit and 4-bit floats, 4-bit integers) are refused.
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

import numpy as np

from ..language.errors import did_you_mean, listed
from .common import Loaded, Stamp, settled

# data_type → (numpy dtype of the bits, the typed field that may hold them, kind)
# kind: "f" a float read as itself, "bf16" bfloat16 bits, "i"/"u" integers, "b" bool.
DTYPES: dict[int, tuple[str, str, str]] = {
    1: ("<f4", "float_data", "f"),        # FLOAT
    2: ("u1", "int32_data", "u"),         # UINT8
    3: ("i1", "int32_data", "i"),         # INT8
    4: ("<u2", "int32_data", "u"),        # UINT16
    5: ("<i2", "int32_data", "i"),        # INT16
    6: ("<i4", "int32_data", "i"),        # INT32
    7: ("<i8", "int64_data", "i"),        # INT64
    9: ("u1", "int32_data", "b"),         # BOOL (bytes 0 or 1)
    10: ("<f2", "int32_data", "f"),       # FLOAT16 (int32_data: bit patterns)
    11: ("<f8", "double_data", "f"),      # DOUBLE
    12: ("<u4", "uint64_data", "u"),      # UINT32
    13: ("<u8", "uint64_data", "u"),      # UINT64
    16: ("<u2", "int32_data", "bf16"),    # BFLOAT16 (bit patterns)
}
TYPED_FIELDS = ("float_data", "int32_data", "string_data", "int64_data", "double_data",
                "uint64_data")
EXTERNAL_KEYS = ("location", "offset", "length", "checksum")
DEFAULT, EXTERNAL = 0, 1


class OnnxError(ValueError):
    """An initializer that cannot be read as one exact array; the message is for the user."""


def onnx_module(doing: str = "reading") -> Any:
    try:
        import onnx
    except ImportError:
        raise OnnxError(f"{doing} .onnx files needs the onnx package "
                        "(pip install 'absorb_formal[onnx]')") from None
    return onnx


def type_name(code: int) -> str:
    try:
        return str(onnx_module().TensorProto.DataType.Name(code))
    except ValueError:
        return f"data type {code}"


@dataclass
class Model:
    """The parts of a parsed model that `load` reads: the main graph's initializers by name,
    the names that occur twice, what produces each node output, and the external files."""

    name: str
    folder: Path
    initializers: dict[str, Any]
    sparse: set[str]
    twice: list[str]
    produced: dict[str, str]  # node output name → the op type of its node
    externals: list[str]  # every external data location of the stored tensors (sorted)
    constants: dict[str, Any]  # a Constant node's output name → the node
    outputs_twice: set[str]  # node output names that two nodes produce
    inputs: set[str]  # the main graph's input names


def parse(path: Path) -> Model:
    return index(path, read_proto(path))


def read_proto(path: Path) -> Any:
    """The ModelProto, its external data not loaded (tensors keep their references)."""
    onnx = onnx_module()
    try:
        return onnx.load_model(str(path), format="protobuf", load_external_data=False)
    except Exception as error:  # protobuf's DecodeError, and whatever else a bad file raises
        raise OnnxError(f"{path.name!r} is not a readable ONNX model: truncated or not ONNX "
                        f"(the onnx package cannot parse it: {type(error).__name__}: "
                        f"{str(error)[:200]})") from None


def index(path: Path, model: Any) -> Model:
    graph = model.graph
    names = [t.name for t in graph.initializer] + [s.values.name for s in graph.sparse_initializer]
    twice = sorted(name for name, count in Counter(names).items() if count > 1)
    produced: dict[str, str] = {}
    outputs_twice: set[str] = set()
    constants: dict[str, Any] = {}
    for node in graph.node:
        for output in node.output:
            if output in produced:
                outputs_twice.add(output)
            produced.setdefault(output, node.op_type)
        if node.op_type == "Constant" and node.domain in ("", "ai.onnx") and node.output:
            constants.setdefault(node.output[0], node)
    externals = set()
    stored = [(t.name, t) for t in graph.initializer] + [
        (name, a.t) for name, node in constants.items() for a in node.attribute
        if a.name == "value"]
    for name, tensor in stored:
        if _is_external(tensor):
            location = _entries(tensor, path.name, name).get("location", "")
            external_path(path.parent, location, path.name, name)  # checked: inside
            externals.add(location)
    return Model(path.name, path.parent, {t.name: t for t in graph.initializer},
                 {s.values.name for s in graph.sparse_initializer}, twice, produced,
                 sorted(externals), constants, outputs_twice, {i.name for i in graph.input})


def _is_external(tensor: Any) -> bool:
    return tensor.HasField("data_location") and tensor.data_location == EXTERNAL


def _entries(tensor: Any, file: str, key: str) -> dict[str, str]:
    """The external_data key-value entries, each key once and known."""
    out: dict[str, str] = {}
    for entry in tensor.external_data:
        if entry.key in out:
            raise OnnxError(f"{file!r} is ambiguous: initializer {key!r} names "
                            f"external data {entry.key!r} twice; refused")
        if entry.key not in EXTERNAL_KEYS:
            raise OnnxError(f"{file!r}: initializer {key!r} has an unknown external "
                            f"data entry {entry.key[:40]!r} (known: {', '.join(EXTERNAL_KEYS)})")
        out[entry.key] = entry.value
    return out


def external_path(folder: Path, location: str, file: str, key: str) -> Path:
    """An external data file: relative, inside the model's folder (as onnx itself requires)."""
    posix = PurePosixPath(location.replace("\\", "/"))
    if not location:
        raise OnnxError(f"{file!r}: initializer {key!r} is EXTERNAL but names no location")
    if posix.is_absolute() or ".." in posix.parts or ":" in location:
        raise OnnxError(f"{file!r}: initializer {key!r} has external data at {location!r}, "
                        "which is not a relative path inside the model's folder; refused")
    return folder / Path(*posix.parts)


def tensor_of(model: Model, key: str) -> Any:
    """The tensor stored under `key` (an initializer, or a Constant node's value), once it
    is known to be the only meaning of that name."""
    if model.twice:
        raise OnnxError(f"{model.name!r} is ambiguous: initializer {model.twice[0]!r} occurs "
                        "twice, and readers differ on which they take; refused")
    if key in model.initializers and key in model.produced:
        raise OnnxError(f"{model.name!r} is ambiguous: {key!r} is both an initializer and the "
                        f"output of a {model.produced[key]} node; refused")
    if key in model.sparse:
        raise OnnxError(f"{model.name!r}: initializer {key!r} is a sparse tensor, which is not "
                        "read; store it dense")
    if key in model.initializers:
        return model.initializers[key]
    if key in model.outputs_twice or (key in model.constants and key in model.inputs):
        raise OnnxError(f"{model.name!r} is ambiguous: {key!r} is output by two nodes, or "
                        "by a Constant node and given as a graph input; refused")
    if key in model.constants:
        return constant_tensor(model.constants[key], model.name)
    if key in model.produced:
        raise OnnxError(f"{model.name!r} has no stored tensor {key!r}: it is computed, the "
                        f"output of a {model.produced[key]} node (load reads initializers "
                        "and Constant nodes)")
    names = sorted(set(model.initializers) | set(model.constants))
    raise OnnxError(f"{model.name!r} has no initializer {key!r}"
                    f"{did_you_mean(key, names)} (it has: {listed(names)})")


SCALAR_ATTRIBUTES = {"value_float": (1, "float_data"), "value_floats": (1, "float_data"),
                     "value_int": (7, "int64_data"), "value_ints": (7, "int64_data")}


def constant_tensor(node: Any, file: str) -> Any:
    """The tensor a Constant node outputs: its `value`, or a tensor made of its
    value_float(s) / value_int(s) (float32 / int64, the attribute's own types)."""
    name = node.output[0]
    if len(node.attribute) != 1:
        raise OnnxError(f"{file!r}: the Constant node of {name!r} has "
                        f"{len(node.attribute)} attributes, not one value; refused")
    [attribute] = node.attribute
    if attribute.name == "value":
        return attribute.t
    if attribute.name not in SCALAR_ATTRIBUTES:
        raise OnnxError(f"{file!r}: the Constant node of {name!r} holds {attribute.name}, "
                        "which is not read (value, value_float(s), value_int(s) are)")
    onnx = onnx_module()
    code, typed = SCALAR_ATTRIBUTES[attribute.name]
    if attribute.name == "value_float":
        values, dims = [attribute.f], []
    elif attribute.name == "value_int":
        values, dims = [attribute.i], []
    else:
        values = list(attribute.floats if code == 1 else attribute.ints)
        dims = [len(values)]
    tensor = onnx.TensorProto(data_type=code, dims=dims, name=name)
    getattr(tensor, typed).extend(values)
    return tensor


def tensor_bits(tensor: Any, model: Model, key: str | None = None) -> tuple[np.ndarray, str]:
    """(bits, kind): the values as stored (bfloat16 as uint16 patterns, kind "bf16"; every
    other type as its own numpy dtype, bool as bool after its bytes are checked to be 0 or
    1), shaped as `dims`. `key`: the name it is loaded by (a Constant's output name; by
    default the tensor's own name)."""
    key, file = (tensor.name if key is None else key), model.name
    if tensor.data_type not in DTYPES:
        raise OnnxError(f"initializer {key!r} in {file!r} has {type_name(tensor.data_type)}, "
                        "not a real number type that is read (FLOAT, DOUBLE, FLOAT16, "
                        "BFLOAT16, INT8-64, UINT8-64, BOOL)")
    code, typed, kind = DTYPES[tensor.data_type]
    dims = [int(n) for n in tensor.dims]
    if any(n < 0 for n in dims):
        raise OnnxError(f"initializer {key!r} in {file!r} has a negative dimension {dims}")
    count = math.prod(dims)
    filled = [f for f in TYPED_FIELDS if len(getattr(tensor, f))]
    external = _is_external(tensor)
    if tensor.HasField("segment"):
        raise OnnxError(f"initializer {key!r} in {file!r} is stored in segments, which are not "
                        "read; refused")
    if tensor.external_data and not external:
        raise OnnxError(f"{file!r} is ambiguous: initializer {key!r} has external data entries "
                        "but is not marked EXTERNAL; refused")
    stored = (["raw_data"] if tensor.HasField("raw_data") else []) + filled \
        + (["external data"] if external else [])
    if len(stored) > 1:
        raise OnnxError(f"{file!r} is ambiguous: initializer {key!r} holds its values twice "
                        f"({' and '.join(stored)}), and readers differ on which they take; "
                        "refused")
    if stored and stored[0] not in ("raw_data", "external data", typed):
        raise OnnxError(f"initializer {key!r} in {file!r} is {type_name(tensor.data_type)} "
                        f"but holds {stored[0]} (expected raw_data or {typed})")
    width = np.dtype(code).itemsize
    if external:
        bits = np.frombuffer(_external_bytes(tensor, model, count * width, key), dtype=code)
    elif stored == [typed]:
        bits = _typed(list(getattr(tensor, typed)), code, kind, key, file)
    else:  # raw_data (an empty tensor may hold nothing at all)
        raw = tensor.raw_data
        if len(raw) != count * width:
            raise OnnxError(f"initializer {key!r} in {file!r} holds {len(raw)} data bytes, "
                            f"{count} × {width} expected")
        bits = np.frombuffer(raw, dtype=code).copy()
    if bits.size != count:
        raise OnnxError(f"initializer {key!r} in {file!r} holds {bits.size} values, its dims "
                        f"{dims} need {count}")
    if kind == "b":
        if bits.size and int(bits.max()) > 1:
            raise OnnxError(f"initializer {key!r} in {file!r} holds a BOOL that is neither 0 "
                            "nor 1")
        bits = bits.astype(np.bool_)
    return bits.reshape(dims), ("bf16" if kind == "bf16" else "plain")


def _typed(values: list[Any], code: str, kind: str, key: str, file: str) -> np.ndarray:
    """A typed field's entries as the element type, exactly: float_data entries are float32
    values (the wire holds 32 bits), double_data entries are the doubles themselves,
    integers and 16-bit patterns must lie in their type's range."""
    dtype = np.dtype(code)
    if code == "<f8":
        return np.array(values, dtype=dtype)
    if code == "<f4":
        wide = np.array(values, dtype="<f8")
        narrow = wide.astype(dtype)
        if not np.array_equal(narrow.astype("<f8"), wide, equal_nan=True):
            raise OnnxError(f"initializer {key!r} in {file!r}: a float_data entry is not a "
                            "float32 value")
        return narrow
    integers = np.array(values, dtype=np.uint64 if code in ("<u4", "<u8") else np.int64)
    if code in ("<f2",) or kind == "bf16":
        low, high = 0, 0xFFFF  # bit patterns
    elif kind == "b":
        low, high = 0, 1
    else:
        info = np.iinfo(dtype)
        low, high = int(info.min), int(info.max)
    if integers.size and (int(integers.min()) < low or int(integers.max()) > high):
        raise OnnxError(f"initializer {key!r} in {file!r} has an entry outside "
                        f"{low}..{high} in its typed field; refused")
    if code == "<f2":
        return integers.astype("<u2").view(dtype)
    return integers.astype(dtype)


def _external_bytes(tensor: Any, model: Model, size: int, key: str) -> bytes:
    file = model.name
    entries = _entries(tensor, file, key)
    if "location" not in entries:
        raise OnnxError(f"{file!r}: initializer {key!r} is EXTERNAL but names no location")
    path = external_path(model.folder, entries["location"], file, key)
    try:
        offset = _natural(entries.get("offset", "0"))
        length = _natural(entries["length"]) if "length" in entries else None
    except ValueError:
        raise OnnxError(f"{file!r}: initializer {key!r} has a malformed external data offset "
                        "or length") from None
    if not path.is_file():
        raise OnnxError(f"{file!r}: the external data file {entries['location']!r} of "
                        f"initializer {key!r} does not exist")
    total = path.stat().st_size
    if length is None:
        length = total - offset
    if offset > total or offset + length > total:
        raise OnnxError(f"{file!r}: the external data of initializer {key!r} reaches past the "
                        f"end of {entries['location']!r}")
    if length != size:
        raise OnnxError(f"{file!r}: initializer {key!r} needs {size} bytes, its external data "
                        f"in {entries['location']!r} holds {length}")
    with open(path, "rb") as stream:
        stream.seek(offset)
        data = stream.read(length)
    if len(data) != size:
        raise OnnxError(f"{file!r}: the external data of initializer {key!r} is cut short")
    return data


def _natural(text: str) -> int:
    """A decimal integer >= 0, as onnx writes offsets and lengths (no sign, no spaces)."""
    if not text.isascii() or not text.isdigit():
        raise ValueError(text)
    return int(text)


# ---- one parse per file version ---------------------------------------------------------------

_MODELS: dict[str, tuple[Stamp, Model]] = {}


def model(path: Path, version: Stamp) -> Model:
    """The parsed model, kept for one file version at a time (a model can be large; a spec
    loads many initializers of one model)."""
    name = str(path.resolve())
    known = _MODELS.get(name)
    if known is not None and known[0] == version:
        return known[1]
    parsed = parse(path)
    if settled(version):
        _MODELS.clear()
        _MODELS[name] = (version, parsed)
    return parsed


def read(path: Path, key: str, version: Stamp) -> Loaded:
    """`load(...)`'s reader: the initializer or Constant `key`, as its bits."""
    found = model(path, version[:5])
    bits, kind = tensor_bits(tensor_of(found, key), found, key)
    return Loaded(bits, kind)
