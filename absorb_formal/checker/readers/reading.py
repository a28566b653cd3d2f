"""The checker's reading of the spec and weight files a certificate document names.

Where the files are: a document stores `spec.path`, the spec's path relative to the folder
of the certificate file itself (so `absorb-prove check` finds it from any working
directory, and the same spec and certificate location always give the same bytes); each
`load("file", ...)` is relative to the spec's folder, as docs/language.md says.

Staleness: the spec's bytes and every weight file's bytes must have the SHA-256 the
document records, and the checker's own reading of them (`source.py`, `files.py`) must give
exactly the blocks the document embeds: exact strings for blocks within the exact-work
limit, matrix sources (literal, or file, key, transpose and file SHA-256) beyond it, the
skip too when it is loaded from a file (`read_skips` then gives `verify` the values).
"""

from __future__ import annotations

import hashlib
import math
import os
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path
from typing import Any

import numpy as np

from ..rules.modular import Layers
from .files import Dyadic, FileError
from .source import (
    BlockSource,
    Load,
    SourceError,
    SpecSource,
    Value,
    activation_json,
    read_spec,
    skip_json,
)
from .weights import Version, read_array, sha256_file, version

MAX_SHOWN = 60  # characters of a differing value shown in a message


class Stale(Exception):
    """The files no longer read as the document says; the message says what changed."""


@dataclass(frozen=True)
class Rational:
    """A literal matrix from the spec, with the same reading interface as `Dyadic`."""

    values: list[list[Fraction]]

    @property
    def shape(self) -> tuple[int, int]:
        return len(self.values), len(self.values[0]) if self.values else 0

    def row(self, i: int) -> list[Fraction]:
        return list(self.values[i])

    def column(self, j: int) -> list[Fraction]:
        return [row[j] for row in self.values]

    def rows(self) -> list[list[Fraction]]:
        return [list(r) for r in self.values]

    def residues(self, p: int, index: Any) -> list[int]:
        items = self.row(index) if isinstance(index, int) else self.column(index[1])
        for x in items:
            if x.denominator % p == 0:
                raise FileError(f"a denominator is divisible by {p}")
        return [x.numerator * pow(x.denominator, -1, p) % p for x in items]

    def nonzero(self) -> np.ndarray:
        return np.array([[x != 0 for x in row] for row in self.values],
                        dtype=bool).reshape(self.shape)

    def residue_matrix(self, p: int) -> np.ndarray:
        return np.array([self.residues(p, i) for i in range(self.shape[0])],
                        dtype=np.int64).reshape(self.shape)

    def residue_block(self, p: int, rows: list[int] | None, cols: list[int] | None
                      ) -> np.ndarray:
        """The entries on rows × cols (None: all) mod p."""
        picked = self.values if rows is None else [self.values[r] for r in rows]
        if cols is not None:
            picked = [[row[c] for c in cols] for row in picked]
        return Rational(picked).residue_matrix(p).reshape(
            len(picked), len(cols) if cols is not None else self.shape[1])


Exact = Dyadic | Rational


def spec_location(doc: dict[str, Any], certificate: Path) -> Path:
    """Where the document's spec is: its stored path, relative to the certificate's folder."""
    return Path(os.path.normpath(certificate.parent / str(doc["spec"]["path"])))


class Reading:
    """One spec file as the checker reads it, with its weight files (read once each)."""

    def __init__(self, spec_file: Path):
        self.spec_file = spec_file
        self.folder = spec_file.parent
        data = spec_file.read_bytes()
        self.sha256 = hashlib.sha256(data).hexdigest()
        self._arrays: dict[tuple[str, str], Dyadic] = {}
        self._hashes: dict[str, str | None] = {}
        self._versions: dict[str, Version] = {}  # the version of each file that was hashed
        self.error = ""
        self.source = SpecSource()
        try:
            self.source = read_spec(data.decode("utf-8"))
        except (SourceError, UnicodeDecodeError) as error:
            self.error = f"the checker cannot read {spec_file}: {error}"
        except RecursionError:
            self.error = f"the checker cannot read {spec_file}: nested too deeply"

    # ---- files -----------------------------------------------------------------------------

    def file_hash(self, file: str) -> str | None:
        """SHA-256 of a weight file's bytes (None: not found)."""
        if file not in self._hashes:
            path = self.folder / file
            self._hashes[file] = None
            if path.is_file():
                try:
                    self._versions[file] = version(path)
                    self._hashes[file] = sha256_file(path)
                    changed = version(path) != self._versions[file]
                except FileError as error:
                    raise Stale(f"weight file {file!r} {error}") from None
                except OSError as error:
                    raise Stale(f"weight file {file!r} cannot be read ({error})") from None
                if changed:
                    raise Stale(f"weight file {file!r} changed while it was being hashed")
        return self._hashes[file]

    def matrix(self, value: Value, where: str) -> Exact:
        if not isinstance(value, Load):
            return Rational(value)
        if (value.file, value.key) not in self._arrays:
            path = self.folder / value.file
            try:
                self._arrays[(value.file, value.key)] = read_array(path, value.key)
                now = version(path)
            except FileError as error:
                raise Stale(f"{where}: {value.file!r} (key {value.key!r}) {error}") from None
            except OSError as error:
                raise Stale(f"{where}: {value.file!r} cannot be read ({error})") from None
            if self._versions.get(value.file, now) != now:  # values and hash of one version
                raise Stale(f"{where}: weight file {value.file!r} changed since it was hashed")
        array = self._arrays[(value.file, value.key)]
        return array.T if value.transpose else array

    def block(self, name: str) -> BlockSource:
        if name not in self.source.blocks:
            raise Stale(f"block '{name}' is no longer in {self.spec_file}")
        return self.source.blocks[name]

    def loads(self, names: list[str]) -> list[Load]:
        found = []
        for name in names:
            block = self.block(name)
            for layer in block.layer_list() or []:
                found += [v for v in layer.values() if isinstance(v, Load)]
            if isinstance(block.skip, Load):  # `skip load(...)`
                found.append(block.skip)
            for part in block.norm.parts if block.norm is not None else ():
                found += [v for v, _ in part.vectors.values() if isinstance(v, Load)]
        return found

    # ---- the blocks as documents embed them ------------------------------------------------

    def block_json(self, name: str, by_source: bool) -> dict[str, Any]:
        """The checker's version of the prover's embedded block (`proofs.block_json`)."""
        b = self.block(name)
        act = activation_json(b.activation)
        dim, width, depth = (_whole(x) for x in (b.dim, b.width, b.depth))
        layers = b.layer_list()
        if layers is None:
            stored: Any = None
        elif by_source:
            per_layer = dim * width * (3 if act["gated"] else 2)
            count = depth * per_layer + (dim * dim if isinstance(b.skip, list | Load) else 0)
            stored = {"weights": count,
                      "sources": [{k: self._source(v) for k, v in layer.items()}
                                  for layer in layers]}
        else:
            stored = [{k: self._strings(v, f"block '{name}' {k}") for k, v in layer.items()}
                      for layer in layers]
            if b.bias:
                stored = [_zero_biases(layer, act["gated"], dim, width) for layer in stored]
        biased = {"bias": True} if b.bias else {}  # absent: bias-free documents unchanged
        norm = {} if b.norm is None else {"norm": self._norm_json(b)}
        return {**biased, "name": b.name, "activation": act, "dim": dim, "width": width,
                "depth": depth, "skip": self._skip_json(b, by_source and layers is not None),
                "layers": stored, **norm}

    def _norm_json(self, b: BlockSource) -> dict[str, Any]:
        """The norm clause as the prover embeds it (`proofs.norm_json`): γ and β as exact
        strings, read from their files here, the number after `+` added."""
        assert b.norm is not None
        norms = []
        for n, part in enumerate(b.norm.parts):
            if part.eps is None:
                raise SourceError(f"block '{b.name}': norm {n + 1} has no eps")
            vectors: dict[str, Any] = {"gamma": None, "beta": None}
            for key, (value, offset) in part.vectors.items():
                read = self._strings(value, f"block '{b.name}' norm {key}", vector=True)
                if not (isinstance(read, list) and all(isinstance(v, str) for v in read)):
                    raise Stale(f"block '{b.name}' norm {key}: not a vector")
                vectors[key] = [str(Fraction(v) + offset) for v in read]
            norms.append({"kind": part.kind, "eps": str(part.eps), **vectors})
        return {"placement": b.norm.placement, "norms": norms}

    def _skip_json(self, b: BlockSource, by_source: bool) -> dict[str, Any]:
        """The skip as the prover embeds it; a loaded one is read from its file here, or, in a
        block stored by its sources, stored as its source too (`proofs._skip_json`)."""
        if not isinstance(b.skip, Load):
            return skip_json(b.skip)
        if by_source:
            return {"source": self._source(b.skip)}
        return {"matrix": self._strings(b.skip, f"block '{b.name}' skip")}

    def read_skips(self, doc: dict[str, Any]) -> dict[str, Any]:
        """The document with every skip stored by its source (`{"source": ...}`) replaced by
        the matrix the checker reads from that source itself, for `verify`. Call it after
        `stale` found nothing: the source is then the spec's own `skip load(...)`."""
        blocks = {}
        for name, stored in doc["blocks"].items():
            skip = stored.get("skip") if isinstance(stored, dict) else None
            if isinstance(skip, dict) and "source" in skip:
                b = self.block(name)
                if not isinstance(b.skip, Load):
                    raise Stale(f"block '{name}': the spec's skip is not loaded from a file")
                found = self.matrix(b.skip, f"block '{name}' skip")
                dim = _whole(b.dim)
                if tuple(found.shape) != (dim, dim):
                    raise Stale(f"block '{name}' skip: array {b.skip.key!r} has shape "
                                f"{tuple(found.shape)}, not {dim}×{dim}")
                stored = {**stored, "skip": {"matrix": _nested_str(found.rows())}}
            blocks[name] = stored
        return {**doc, "blocks": blocks}

    def _source(self, value: Value) -> dict[str, Any]:
        if not isinstance(value, Load):
            return {"literal": True}
        return {"file": value.file, "key": value.key, "transpose": value.transpose,
                "sha256": self.file_hash(value.file)}

    def _strings(self, value: Value, where: str, vector: bool = False) -> Any:
        if isinstance(value, Load):
            found = self.matrix(value, where)
            if vector or where.endswith("_bias"):  # 1-D, 1×n or n×1 (docs/rules.md §8)
                if len(found.shape) not in (1, 2) or (len(found.shape) == 2
                                                      and 1 not in found.shape):
                    raise Stale(f"{where}: array {value.key!r} of shape {found.shape} is "
                                "not a vector")
                assert isinstance(found, Dyadic)  # a load is read from a file
                found = found.reshape((math.prod(found.shape),))
            return _nested_str(found.rows())
        return _nested_str(value)

    def weights(self, doc: dict[str, Any]) -> dict[str, Layers]:
        """Exact matrices of the blocks the document stores by source (read by the checker)."""
        out: dict[str, Layers] = {}
        for name, stored in doc["blocks"].items():
            if isinstance(stored, dict) and isinstance(stored.get("layers"), dict):
                out[name] = [{k: self.matrix(v, f"block '{name}' {k}")
                              for k, v in layer.items()}
                             for layer in self.block(name).layer_list() or []]
        return out

    # ---- staleness -------------------------------------------------------------------------

    def stale(self, doc: dict[str, Any]) -> str:
        """What changed since the document was issued ("" if nothing did)."""
        changes = []
        if self.sha256 != doc["spec"]["sha256"]:
            certified = str(doc["spec"]["sha256"])[:12]
            changes.append(f"the spec {self.spec_file} changed since certification "
                           f"(SHA-256 {self.sha256[:12]}…, certified {certified}…)")
        if self.error:
            return "; ".join(changes + [self.error])
        names = list(doc["blocks"])
        try:
            changes += self._files(doc, names)
            line = int(doc["line"])
            if self.source.statements.get(line) != doc["statement"]:
                changes.append(f"line {line} of {self.spec_file} no longer states "
                               f"'{doc['statement']}'")
            for name in names:
                embedded = doc["blocks"][name]
                by_source = isinstance(embedded, dict) and isinstance(embedded.get("layers"),
                                                                      dict)
                mine = self.block_json(name, by_source)
                if mine != embedded:
                    changes.append(f"block '{name}' differs from the certified one: "
                                   f"{_difference(mine, embedded)}")
        except Stale as why:
            changes.append(str(why))
        except SourceError as why:
            changes.append(f"the checker cannot read {self.spec_file}: {why}")
        return "; ".join(changes)

    def _files(self, doc: dict[str, Any], names: list[str]) -> list[str]:
        recorded = doc["files"]
        loaded = sorted({load.file for load in self.loads(names)})
        changes = []
        if sorted(recorded) != loaded:
            changes.append(f"the blocks load {loaded or 'no file'}, the certificate records "
                           f"{sorted(recorded) or 'none'}")
        for file in sorted(set(recorded) & set(loaded)):
            now = self.file_hash(file)
            if now is None:
                changes.append(f"weight file {file!r} is not found")
            elif now != recorded[file]:
                changes.append(f"weight file {file!r} changed since certification "
                               f"(SHA-256 {now[:12]}…, certified {str(recorded[file])[:12]}…)")
        if changes:  # the blocks would be read from changed files: say only that
            raise Stale("; ".join(changes))
        return []


def _zero_biases(layer: dict[str, Any], gated: bool, dim: int, width: int) -> dict[str, Any]:
    """A biased layer with every bias present: the ones the spec omits are 0 (docs/rules.md §8)."""
    sizes = {"up_bias": width, "down_bias": dim, **({"gate_bias": width} if gated else {})}
    return {**{name: ["0"] * size for name, size in sizes.items()}, **layer}


def _whole(x: Fraction | None) -> int:
    if x is None or x.denominator != 1:
        raise SourceError(f"expected a whole number, got {x}")
    return int(x)


def _nested_str(value: Any) -> Any:
    return [_nested_str(v) for v in value] if isinstance(value, list) else str(value)


def _difference(mine: Any, certified: Any, at: str = "") -> str:
    """The first place where two embedded-block values differ, for the message."""
    if isinstance(mine, dict) and isinstance(certified, dict):
        for key in sorted(set(mine) | set(certified), key=str):
            if mine.get(key) != certified.get(key):
                return _difference(mine.get(key), certified.get(key), f"{at}.{key}".lstrip("."))
    if isinstance(mine, list) and isinstance(certified, list) and len(mine) == len(certified):
        for i, (a, b) in enumerate(zip(mine, certified, strict=True)):
            if a != b:
                return _difference(a, b, f"{at}[{i}]")
    return (f"{at or 'value'}: the spec gives {str(mine)[:MAX_SHOWN]}, the certificate "
            f"{str(certified)[:MAX_SHOWN]}")
