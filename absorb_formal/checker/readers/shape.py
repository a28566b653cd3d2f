"""The shape of a certificate document, checked before anything in it is used.

A document is read by two parts of the checker: `reading.py` ties it to the spec and weight
files it names, and `checker/dispatch.py` checks its certificate. Both assume the document is well
formed; this module makes sure of it first, so that a malformed field can never make either
part skip its work (a `line` that is not an integer once switched off every staleness test).

Embedded blocks are checked for consistency on their own, since a document whose spec is
gone is verified against them alone: the activation must be exactly what its name denotes
(read by the checker's own spec reader), the `bias` flag must match the layers' fields, and
every matrix must have the block's declared shape.
"""

from __future__ import annotations

import sys
from typing import Any

from ..kernel.contract import FORMAT
from .source import SourceError, activation_json, read_activation

# Every field of a document; `verdict`, `method` and `reason` are the prover's prose.
DOCUMENT_FIELDS = frozenset({"format", "spec", "files", "line", "statement", "claim", "blocks",
                             "outcome", "verdict", "method", "reason", "certificate"})
OUTCOMES = ("proved", "refuted", "unknown")
BLOCK_FIELDS = frozenset({"name", "activation", "dim", "width", "depth", "skip", "layers"})


def json_integer(text: str) -> int:
    """`parse_int` for the checker's json.loads: the integer, or ValueError with a short
    reason when it has more digits than Python converts (`sys.get_int_max_str_digits`)."""
    try:
        return int(text)
    except ValueError:
        raise ValueError(f"a JSON integer of more than {sys.get_int_max_str_digits()} "
                         "digits") from None


def _natural(value: Any) -> bool:
    return type(value) is int and value >= 1


def document_problem(doc: Any) -> str:
    """What is malformed about the document ("" when its shape is the format's)."""
    if not isinstance(doc, dict) or doc.get("format") != FORMAT:
        return "not a certificate document"
    if set(doc) != DOCUMENT_FIELDS:
        return "the document's fields are not the format's: " + ", ".join(
            f"{'no' if f in DOCUMENT_FIELDS else 'unknown'} field {f!r}"
            for f in sorted(set(doc) ^ DOCUMENT_FIELDS))
    spec, files = doc["spec"], doc["files"]
    if not (isinstance(spec, dict) and set(spec) == {"path", "sha256"}
            and all(isinstance(v, str) for v in spec.values())):
        return "malformed 'spec': expected {\"path\": text, \"sha256\": text}"
    if not (isinstance(files, dict) and all(isinstance(v, str) for v in files.values())):
        return "malformed 'files': expected {file: sha256 text}"
    if not _natural(doc["line"]):
        return f"malformed 'line': {doc['line']!r} is not a line number"
    for field in ("statement", "verdict", "method", "reason"):
        if not isinstance(doc[field], str):
            return f"malformed {field!r}: not text"
    if doc["outcome"] not in OUTCOMES:
        return f"unexpected outcome {doc['outcome']!r}"
    if not (doc["certificate"] is None or isinstance(doc["certificate"], dict)):
        return "malformed 'certificate': not an object"
    blocks = doc["blocks"]
    if not isinstance(blocks, dict) or not blocks:
        return "malformed 'blocks'"
    for name, block in blocks.items():
        problem = block_problem(name, block)
        if problem:
            return f"block '{name}': {problem}"
    return ""


def block_problem(name: str, block: Any) -> str:
    """What makes an embedded block inconsistent ("" when nothing does)."""
    if not isinstance(block, dict) or not BLOCK_FIELDS <= set(block) <= BLOCK_FIELDS | {
            "bias", "norm"}:
        return "not a block of the format"
    if block["name"] != name:
        return f"embedded under '{name}' but named {block['name']!r}"
    if "bias" in block and block["bias"] is not True:
        return "'bias' is present only as true"
    dim, width, depth = block["dim"], block["width"], block["depth"]
    if not (_natural(dim) and _natural(width) and _natural(depth)):
        return "dim, width and depth must be whole numbers >= 1"
    act = block["activation"]
    try:
        mine = activation_json(read_activation(act["name"]))
    except (SourceError, TypeError, KeyError):
        return f"activation {act.get('name') if isinstance(act, dict) else act!r} is unknown"
    if act != mine:
        return f"activation {act['name']!r} is embedded as {act}, but denotes {mine}"
    problem = _skip_problem(block["skip"], dim) or _norm_problem(block.get("norm", {}), dim)
    if problem:
        return problem
    layers = block["layers"]
    if layers is None:
        return ""
    if isinstance(layers, dict):  # stored by source: the checker reads the files itself
        sources = layers.get("sources")
        if set(layers) != {"weights", "sources"} or not (isinstance(sources, list)
                                                        and len(sources) == depth):
            return "malformed layers by source"
        return ""
    if not (isinstance(layers, list) and len(layers) == depth):
        return f"holds {len(layers) if isinstance(layers, list) else 'no'} layers, depth {depth}"
    gated, biased = act["gated"], block.get("bias", False)
    shapes: dict[str, tuple[int, ...]] = {"up": (width, dim), "down": (dim, width)}
    if gated:
        shapes["gate"] = (width, dim)
    if biased:
        shapes |= {"up_bias": (width,), "down_bias": (dim,)} | ({"gate_bias": (width,)}
                                                                if gated else {})
    for layer in layers:
        if not isinstance(layer, dict) or set(layer) != set(shapes):
            return (f"a layer holds {sorted(layer) if isinstance(layer, dict) else layer!r}, "
                    f"expected {sorted(shapes)}" + ("" if biased else
                                                    " (biases need \"bias\": true)"))
        for field, shape in shapes.items():
            if _shape(layer[field]) != shape:
                return f"{field} has shape {_shape(layer[field])}, expected {shape}"
    return ""


NORM_FIELDS = frozenset({"kind", "eps", "gamma", "beta"})


def _norm_problem(norm: Any, dim: int) -> str:
    """An embedded norm clause (absent: {}): a placement, and one norm (two for sandwich)
    of a known kind, each with ε text and γ, β of d strings or null (RMSNorm: no β)."""
    if norm == {}:
        return ""
    if not (isinstance(norm, dict) and set(norm) == {"placement", "norms"}
            and norm["placement"] in ("pre", "post", "sandwich")
            and isinstance(norm["norms"], list)
            and len(norm["norms"]) == (2 if norm["placement"] == "sandwich" else 1)):
        return "malformed norm"
    for part in norm["norms"]:
        if not (isinstance(part, dict) and set(part) == NORM_FIELDS
                and part["kind"] in ("layernorm", "rmsnorm") and isinstance(part["eps"], str)
                and all(part[v] is None or _shape(part[v]) == (dim,)
                        for v in ("gamma", "beta"))
                and (part["kind"] == "layernorm" or part["beta"] is None)):
            return "malformed norm"
    return ""


def _skip_problem(skip: Any, dim: int) -> str:
    if isinstance(skip, dict) and set(skip) == {"scale"} and isinstance(skip["scale"], str):
        return ""
    if isinstance(skip, dict) and set(skip) == {"matrix"} and _shape(skip["matrix"]) == (dim,
                                                                                       dim):
        return ""
    if isinstance(skip, dict) and set(skip) == {"source"} and isinstance(skip["source"], dict):
        return ""  # `skip load(...)` of a large block: check reads it from its file itself
    return "malformed skip"


def _shape(value: Any) -> tuple[int, ...] | None:
    """The shape of nested lists of strings, or None when ragged or not strings."""
    if isinstance(value, str):
        return ()
    if not isinstance(value, list) or not value:
        return None
    inner = {_shape(v) for v in value}
    if len(inner) != 1 or None in inner:
        return None
    return (len(value), *next(iter(inner)))  # type: ignore[misc]
