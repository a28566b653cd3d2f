"""The checker's own reading of an ONNX model's stored tensors: exact values, and its files.

A key names an initializer of the main graph or the output of a main-graph `Constant` node:
its `value` tensor, or its `value_float` / `value_floats` (float32 values, each held in a
double) / `value_int` / `value_ints` (int64), as a scalar or a vector.

The protobuf is parsed by the onnx package (trusted for that: docs/certificates.md); every
value is then decoded here, apart from the prover's reader, into exact dyadic rationals:

- `raw_data` and external data: little-endian bytes, decoded by `files.decode` (IEEE bit
  fields with integer operations);
- `float_data` / `double_data`: each entry is a Python float (a double) holding a float32
  or float64 value; its 8 bytes (`struct`, bit for bit) are decoded as a float64, the same
  rational exactly;
- `int32_data` (INT8/16/32, UINT8/16, BOOL, and FLOAT16/BFLOAT16 bit patterns),
  `int64_data`, `uint64_data`: integers, each within its type's range.

Refused, as the prover refuses them: an initializer name twice (sparse ones included); a
name that is an initializer and a node's output; a name two nodes output, or a node and
a graph input; a Constant node
with other than one attribute, or with a value that is not a dense number tensor; a tensor
with its values in two places (raw_data, a typed field, external data), in the wrong typed
field, or in segments;
external data entries named twice or unknown, or a location outside the model's folder;
dtypes other than FLOAT, DOUBLE, FLOAT16, BFLOAT16, INT8-64, UINT8-64, BOOL.
"""

from __future__ import annotations

import struct
from collections import Counter
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

from .files import Dyadic, FileError, decode

# data_type → (kind for `decode`, bytes per value, the typed field allowed to hold it)
TYPES: dict[int, tuple[str, int, str]] = {
    1: ("f", 4, "float_data"), 11: ("f", 8, "double_data"),
    10: ("f", 2, "int32_data"), 16: ("bf16", 2, "int32_data"),
    3: ("i", 1, "int32_data"), 5: ("i", 2, "int32_data"), 6: ("i", 4, "int32_data"),
    7: ("i", 8, "int64_data"), 2: ("u", 1, "int32_data"), 4: ("u", 2, "int32_data"),
    12: ("u", 4, "uint64_data"), 13: ("u", 8, "uint64_data"), 9: ("b", 1, "int32_data"),
}
FIELDS = ("float_data", "int32_data", "string_data", "int64_data", "double_data",
          "uint64_data")
ENTRY_KEYS = {"location", "offset", "length", "checksum"}
EXTERNAL = 1


@dataclass
class Parsed:
    folder: Path
    tensors: dict[str, Any]
    sparse: set[str]
    repeated: list[str]
    outputs: dict[str, str]  # node output → op type
    locations: list[str]  # external data files of the stored tensors, sorted
    constants: dict[str, Any]  # a Constant node's output → the node
    doubled: set[str]  # node outputs that two nodes produce, or a node and a graph input


_PARSED: dict[str, tuple[tuple[int, ...], Parsed]] = {}


def _onnx() -> Any:
    try:
        import onnx
    except ImportError:
        raise FileError("is an ONNX model, and reading it needs the onnx package "
                        "(pip install 'absorb_formal[onnx]')") from None
    return onnx


def parsed(path: Path, version: tuple[int, ...], keep: bool) -> Parsed:
    """The model's main graph as far as initializers go, parsed once per `version` of the
    file (when `keep`: the file has settled)."""
    name = str(path.resolve())
    known = _PARSED.get(name)
    if known is not None and known[0] == version:
        return known[1]
    try:
        model = _onnx().load_model(str(path), format="protobuf", load_external_data=False)
    except FileError:
        raise
    except Exception as error:  # protobuf's DecodeError, and whatever else a bad file raises
        raise FileError(f"is not a readable ONNX model: truncated or not ONNX "
                        f"({type(error).__name__})") from None
    graph = model.graph
    names = [t.name for t in graph.initializer] + [s.values.name for s in graph.sparse_initializer]
    outputs: dict[str, str] = {}
    doubled: set[str] = set()
    constants: dict[str, Any] = {}
    given = {i.name for i in graph.input}
    for node in graph.node:
        for out in node.output:
            if out in outputs or out in given:
                doubled.add(out)
            outputs.setdefault(out, node.op_type)
        if node.op_type == "Constant" and node.domain in ("", "ai.onnx") and len(node.output):
            constants.setdefault(node.output[0], node)
    locations = set()
    held = [(t.name, t) for t in graph.initializer]
    for out, node in constants.items():
        held += [(out, a.t) for a in node.attribute if a.name == "value"]
    for name, tensor in held:
        if _external(tensor):
            location = _entries(tensor, name).get("location", "")
            _inside(path.parent, location, name)
            locations.add(location)
    found = Parsed(path.parent, {t.name: t for t in graph.initializer},
                   {s.values.name for s in graph.sparse_initializer},
                   sorted(n for n, c in Counter(names).items() if c > 1), outputs,
                   sorted(locations), constants, doubled)
    if keep:
        _PARSED.clear()  # one model at a time: models can be large
        _PARSED[name] = (version, found)
    return found


def _external(tensor: Any) -> bool:
    return tensor.HasField("data_location") and tensor.data_location == EXTERNAL


def _entries(tensor: Any, name: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for entry in tensor.external_data:
        if entry.key in out:
            raise FileError(f"is ambiguous: initializer {name!r} names external data "
                            f"{entry.key!r} twice")
        if entry.key not in ENTRY_KEYS:
            raise FileError(f"has an unknown external data entry {entry.key[:40]!r} in "
                            f"initializer {name!r}")
        out[entry.key] = entry.value
    return out


def _inside(folder: Path, location: str, name: str) -> Path:
    parts = PurePosixPath(location.replace("\\", "/"))
    if not location:
        raise FileError(f"keeps initializer {name!r} in external data with no location")
    if ":" in location or parts.is_absolute() or ".." in parts.parts:
        raise FileError(f"keeps initializer {name!r} at {location!r}, outside the model's "
                        "folder")
    return folder / Path(*parts.parts)


def external_paths(path: Path, version: tuple[int, ...], keep: bool) -> list[tuple[str, Path]]:
    """(location, path) of each external data file the initializers name, by location."""
    model = parsed(path, version, keep)
    return [(location, _inside(model.folder, location, "")) for location in model.locations]


def read(path: Path, key: str, version: tuple[int, ...], keep: bool) -> Dyadic:
    model = parsed(path, version, keep)
    if model.repeated:
        raise FileError(f"is ambiguous: initializer {model.repeated[0]!r} occurs twice")
    if key in model.tensors and key in model.outputs:
        raise FileError(f"is ambiguous: {key!r} is an initializer and the output of a "
                        f"{model.outputs[key]} node")
    if key in model.sparse:
        raise FileError(f"holds {key!r} as a sparse initializer, which is not read")
    if key in model.tensors:
        return _values(model.tensors[key], model, key)
    if key in model.doubled:
        raise FileError(f"is ambiguous: {key!r} is the output of two nodes, or of a node "
                        "and a graph input")
    if key in model.constants:
        return _constant(model.constants[key], model, key)
    if key in model.outputs:
        raise FileError(f"has no stored tensor {key!r}: it is the output of a "
                        f"{model.outputs[key]} node")
    names = sorted(set(model.tensors) | set(model.constants))
    raise FileError(f"has no initializer {key!r} (it has: "
                    f"{', '.join(names[:10]) or 'none'})")


def _constant(node: Any, model: Parsed, key: str) -> Dyadic:
    """A Constant node's value: its tensor, or its value_float(s) / value_int(s)."""
    if len(node.attribute) != 1:
        raise FileError(f"has a Constant node for {key!r} with {len(node.attribute)} "
                        "attributes, not one value")
    [attribute] = node.attribute
    if attribute.name == "value":
        return _values(attribute.t, model, key)
    if attribute.name in ("value_float", "value_floats"):
        floats = [attribute.f] if attribute.name == "value_float" else list(attribute.floats)
        data = struct.pack(f"<{len(floats)}d", *floats)  # float32 values held in doubles
        values = decode(data, "f", 8, "<", len(floats))
    elif attribute.name in ("value_int", "value_ints"):
        ints = [attribute.i] if attribute.name == "value_int" else list(attribute.ints)
        data = b"".join(int(v).to_bytes(8, "little", signed=True) for v in ints)
        values = decode(data, "i", 8, "<", len(ints))
    else:
        raise FileError(f"has a Constant node for {key!r} holding {attribute.name}, which is "
                        "not read")
    if attribute.name in ("value_float", "value_int"):
        return values.reshape(())
    return values


def _values(tensor: Any, model: Parsed, name: str) -> Dyadic:
    if tensor.data_type not in TYPES:
        raise FileError(f"initializer {name!r} has data type {tensor.data_type}, which the "
                        "checker does not read")
    kind, width, field = TYPES[tensor.data_type]
    shape = tuple(int(n) for n in tensor.dims)
    if min(shape, default=0) < 0:
        raise FileError(f"initializer {name!r} has a negative dimension")
    count = 1
    for n in shape:
        count *= n
    if tensor.HasField("segment"):
        raise FileError(f"initializer {name!r} is stored in segments")
    external = _external(tensor)
    if len(tensor.external_data) and not external:
        raise FileError(f"is ambiguous: initializer {name!r} has external data entries but "
                        "is not EXTERNAL")
    places = [f for f in FIELDS if len(getattr(tensor, f))]
    if tensor.HasField("raw_data"):
        places.append("raw_data")
    if external:
        places.append("external")
    if len(places) > 1:
        raise FileError(f"is ambiguous: initializer {name!r} holds its values in "
                        f"{' and '.join(sorted(places))}")
    if places and places[0] not in ("raw_data", "external", field):
        raise FileError(f"initializer {name!r} holds {places[0]}, not raw_data or {field}")
    if external:
        data = _external_range(tensor, model, count * width, name)
    elif places == [field]:
        entries = list(getattr(tensor, field))
        if len(entries) != count:
            raise FileError(f"initializer {name!r} holds {len(entries)} values in {field}, "
                            f"its dims need {count}")
        data = _typed_bytes(entries, field, kind, width, name)
        if field == "float_data":  # float32 values, each held in a double: read as that
            kind, width = "f", 8   # double, which is the same rational exactly
    else:
        data = bytes(tensor.raw_data)
    try:
        values = decode(data, kind, width, "<", count)
    except FileError as error:
        raise FileError(f"initializer {name!r} {error}") from None
    return values.reshape(shape)


def _typed_bytes(entries: list[Any], field: str, kind: str, width: int, name: str) -> bytes:
    """A typed field's entries as the little-endian bytes of the element type."""
    if field in ("float_data", "double_data"):
        return struct.pack(f"<{len(entries)}d", *entries)  # the doubles, bit for bit
    if kind in ("bf16", "f"):  # FLOAT16 / BFLOAT16: 16-bit patterns
        low, high, signed = 0, 0xFFFF, False
    elif kind == "b":
        low, high, signed = 0, 1, False
    elif kind == "i":
        low, high, signed = -(1 << (8 * width - 1)), (1 << (8 * width - 1)) - 1, True
    else:
        low, high, signed = 0, (1 << (8 * width)) - 1, False
    out = bytearray()
    for value in entries:
        if not low <= value <= high:
            raise FileError(f"initializer {name!r} has an entry outside {low}..{high} in "
                            f"{field}")
        out += int(value).to_bytes(width, "little", signed=signed)
    return bytes(out)


def _external_range(tensor: Any, model: Parsed, size: int, name: str) -> bytes:
    entries = _entries(tensor, name)
    if "location" not in entries:
        raise FileError(f"initializer {name!r} is EXTERNAL and names no location")
    path = _inside(model.folder, entries["location"], name)
    numbers = [entries.get("offset", "0"), entries.get("length", "0")]
    if not all(n.isascii() and n.isdigit() for n in numbers):
        raise FileError(f"initializer {name!r} has a malformed external offset or length")
    offset = int(numbers[0])
    if not path.is_file():
        raise FileError(f"keeps initializer {name!r} in {entries['location']!r}, which does "
                        "not exist")
    with open(path, "rb") as stream:
        stream.seek(0, 2)
        end = stream.tell()
        length = int(numbers[1]) if "length" in entries else end - offset
        if offset > end or offset + length > end:
            raise FileError(f"keeps initializer {name!r} past the end of "
                            f"{entries['location']!r}")
        if length != size:
            raise FileError(f"keeps initializer {name!r} in {length} bytes of "
                            f"{entries['location']!r}, {size} expected")
        stream.seek(offset)
        data = stream.read(length)
    if len(data) != size:
        raise FileError(f"keeps initializer {name!r} in a range cut short")
    return data

