"""Certificate files: one self-contained JSON document per claim, written deterministically.

A document embeds everything the independent checker needs — the claim, the blocks (exact
weights as strings), the outcome and its certificate — so `absorb_formal.checker` can verify
it without importing the prover, and `absorb-prove check` can tell when the evidence is stale.

Where the evidence comes from (format 2):
- `spec`: `{"path", "sha256"}`: the spec's path relative to the folder of the certificate
  file (POSIX, `..` allowed), so `check` finds it from any working directory and the same
  spec certified to the same place always gives the same bytes; SHA-256 of its bytes.
- `files`: `{FILE: sha256}` for every weight file the claim's blocks `load(...)`, FILE as
  written in the spec (relative to the spec's folder). An ONNX model whose initializers keep
  data in external files has one digest for all its files (`sha256_file`).
- a block beyond the exact-work limit (`MAX_EXACT_WEIGHTS`) stores, instead of its weights,
  `layers = {"weights": COUNT, "sources": [per layer {NAME: SOURCE}]}` with SOURCE
  `{"literal": true}` (the checker reads it from the spec) or
  `{"file", "key", "transpose", "sha256"}`; a skip loaded from a file is then stored the same
  way, as `skip = {"source": SOURCE}`.
The checker re-reads all of it with its own reader (`checker/readers/reading.py`).
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import tempfile
from pathlib import Path
from typing import Any

from ..checker.kernel.contract import FORMAT
from ..language.parse import parse_text
from ..language.syntax import (
    BlockDecl,
    LoadExpr,
    MatrixLit,
    NormExpr,
    SkipExpr,
    SpecSyntax,
    VectorLit,
    WeightDecl,
)
from ..model.blocks import MAX_EXACT_WEIGHTS, Block, Claim, Normalisation, Spec, weight_count
from ..model.result import Result
from ..weights.arrays import external_files, settled, version
from . import bodies as cert

_UMASK = os.umask(0)  # read once: mkstemp makes 0600 files, certificates are ordinary files
os.umask(_UMASK)


def sha256_file(path: Path) -> str:
    """SHA-256 of a file's bytes; cached per version of the file (size, mtime, ctime, inode,
    device, as `load` reads it), once it has settled: a run certifies many claims over the
    same weight files.

    An ONNX model with external data depends on more files than its own: its digest is then
    the SHA-256 of the text `onnx model with external data` and one line per file —
    `model HEX` for the model's bytes, then `external HEX LOCATION` for each external file,
    sorted by location (as the model writes it) — each line ending in a newline. So a change
    to any of them makes a certificate stale. The checker computes the same text itself."""
    try:
        now = version(path)
    except ValueError as error:  # a model that no longer parses (ArrayError, OnnxError)
        raise OSError(str(error)) from None
    if not settled(now):
        return _sha256.__wrapped__((str(path.resolve()), now))
    return _sha256((str(path.resolve()), now))


@functools.lru_cache(maxsize=64)
def _sha256(key: tuple[str, tuple[int, ...]]) -> str:
    path = Path(key[0])
    externals = external_files(path)
    if not externals:
        return _bytes_sha256(path)
    lines = ["onnx model with external data", f"model {_bytes_sha256(path)}"]
    lines += [f"external {_bytes_sha256(file)} {location}" for location, file in externals]
    return hashlib.sha256("".join(line + "\n" for line in lines).encode()).hexdigest()


def _bytes_sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as stream:
        for chunk in iter(lambda: stream.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


class Sources:
    """The spec's own text: which literal or `load(...)` gives each block's matrices."""

    def __init__(self, spec_file: Path):
        data = spec_file.read_bytes()
        self.folder = spec_file.parent
        self.sha256 = hashlib.sha256(data).hexdigest()
        syntax: SpecSyntax = parse_text(data.decode("utf-8"), str(spec_file))
        self.blocks = {item.name.text: item for item in syntax.items
                       if isinstance(item, BlockDecl)}

    def layers(self, name: str) -> list[tuple[WeightDecl, ...]]:
        decl = self.blocks[name]
        if decl.weights:
            return [decl.weights]
        return [layer.weights for layer in sorted(decl.layers, key=lambda x: x.number.value)]

    def loads(self, name: str) -> list[LoadExpr]:
        skip = self.skip_load(name)
        return [w.value for ws in self.layers(name) for w in ws
                if isinstance(w.value, LoadExpr)] + ([skip] if skip is not None else []) \
            + self.norm_loads(name)

    def norm_loads(self, name: str) -> list[LoadExpr]:
        """The `load(...)`s of a block's norm clause (γ, β read from files)."""
        return [item.value for f in self.blocks[name].fields
                if f.name == "norm" and isinstance(f.value, NormExpr)
                for norm in f.value.norms for item in norm.items
                if isinstance(item.value, LoadExpr)]

    def skip_load(self, name: str) -> LoadExpr | None:
        """The `skip load("file", "key")` of a block, if its skip is read from a file."""
        for f in self.blocks[name].fields:
            if f.name == "skip" and isinstance(f.value, SkipExpr):
                return f.value.load
        return None

    def source(self, value: LoadExpr | MatrixLit | VectorLit) -> dict[str, Any]:
        if not isinstance(value, LoadExpr):
            return {"literal": True}
        return {"file": value.file, "key": value.key, "transpose": value.transpose,
                "sha256": sha256_file(self.folder / value.file)}


def _by_source(block: Block, sources: Sources) -> dict[str, Any]:
    """Weights too many to embed (beyond the exact-work limit): where they are read from.
    Certificates for such blocks read no weight (never-rules) or have the checker read them
    from these sources itself (modular functional)."""
    return {"weights": weight_count(block),
            "sources": [{w.name: sources.source(w.value) for w in ws}
                        for ws in sources.layers(block.name)]}


def activation_json(block: Block) -> dict[str, Any]:
    scalar = block.activation.scalar
    return {"name": block.activation.name, "kind": scalar.kind, "gated": block.activation.gated,
            "param": None if scalar.param is None else cert.q(scalar.param),
            "power": scalar.power, "coeffs": cert.vector(scalar.coeffs)}


def block_json(block: Block, sources: Sources) -> dict[str, Any]:
    skip_load = sources.skip_load(block.name)
    if block.layers is not None and weight_count(block) > MAX_EXACT_WEIGHTS:
        layers: Any = _by_source(block, sources)
    else:
        layers = None if block.layers is None else cert.layers(block.layers)
        skip_load = None  # embedded like the weights
    biased = {"bias": True} if block.biased else {}  # absent: bias-free documents unchanged
    return {
        **biased,
        "name": block.name,
        "activation": activation_json(block),
        "dim": block.dim, "width": block.width, "depth": block.depth,
        "skip": _skip_json(block, sources, skip_load),
        "layers": layers,
        **({} if block.norm is None else {"norm": norm_json(block.norm)}),
    }


def norm_json(norm: Normalisation) -> dict[str, Any]:
    """A norm clause as documents embed it: placement, and each norm's kind, ε, γ and β as
    exact strings (None: ones, zeros). Always embedded (d entries each), whatever the size."""
    return {"placement": norm.placement,
            "norms": [{"kind": n.kind, "eps": cert.q(n.eps),
                       "gamma": None if n.gamma is None else cert.vector(n.gamma),
                       "beta": None if n.beta is None else cert.vector(n.beta)}
                      for n in norm.norms]}


def _skip_json(block: Block, sources: Sources, by_source: LoadExpr | None) -> dict[str, Any]:
    """`{"scale": c}`, `{"matrix": rows}`, or, for a block stored by its sources whose skip is
    loaded from a file, `{"source": {"file", "key", "transpose", "sha256"}}`: the checker
    reads that skip from the file itself, like the weights."""
    if by_source is not None:
        return {"source": sources.source(by_source)}
    if block.skip.matrix is not None:
        return {"matrix": cert.matrix(block.skip.matrix.rows)}
    return {"scale": cert.q(block.skip.scale or 0)}


def spec_path(spec_file: Path, certificate: Path) -> str:
    """The spec's path relative to the certificate file's folder (where `check` looks)."""
    return Path(os.path.relpath(spec_file.resolve(), certificate.parent.resolve())).as_posix()


def claim_json(claim: Claim, block: Block) -> dict[str, Any]:
    width = claim.width if claim.width is not None else block.width
    return {"kind": claim.kind, "block": claim.block, "other": claim.other,
            "modality": claim.modality, "width": width, "min_width": claim.min_width}


def document(spec: Spec, claim: Claim, result: Result, spec_file: Path,
             certificate: Path) -> dict[str, Any]:
    """The certificate document of one decided claim, to be stored at `certificate`;
    `spec_file` is where the spec was read from."""
    names = [claim.block] + ([claim.other] if claim.other else [])
    sources = Sources(spec_file)
    files = {load.file: sha256_file(sources.folder / load.file)
             for name in names for load in sources.loads(name)}
    return {
        "format": FORMAT,
        "spec": {"path": spec_path(spec_file, certificate), "sha256": sources.sha256},
        "files": dict(sorted(files.items())),
        "line": claim.pos.line,
        "statement": claim.statement,
        "claim": claim_json(claim, spec.blocks[claim.block]),
        "blocks": {name: block_json(spec.blocks[name], sources) for name in names},
        "outcome": result.outcome,
        "verdict": result.verdict,
        "method": result.method,
        "reason": result.reason,
        "certificate": result.certificate,
    }


def encode(doc: dict[str, Any]) -> bytes:
    """Canonical bytes: sorted keys, fixed indentation, UTF-8, final newline."""
    return (json.dumps(doc, sort_keys=True, indent=1, ensure_ascii=False) + "\n").encode()


def file_name(relative_spec: str, line: int) -> str:
    """`paper/relu.mlp` line 11 → `paper/relu.mlp.11.json`."""
    return f"{relative_spec}.{line}.json"


def folder_problem(folder: Path) -> str:
    """Why documents cannot go into `folder` ("" when they can, as far as can be told before
    writing): the folder, or a folder above it, exists and is not a folder."""
    for place in (folder, *folder.parents):
        if place.exists():
            return "" if place.is_dir() else f"{place} is not a folder"
    return ""


def write(path: Path, data: bytes, update: bool) -> str:
    """Write atomically; "written", "unchanged", or "differs" (left alone without --update)."""
    if path.exists():
        if path.read_bytes() == data:
            return "unchanged"
        if not update:
            return "differs"
    path.parent.mkdir(parents=True, exist_ok=True)
    handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(handle, "wb") as stream:
            stream.write(data)
        os.chmod(temporary, 0o666 & ~_UMASK)
        os.replace(temporary, path)  # atomic: a killed run leaves the old file or the new one
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
    return "written"
