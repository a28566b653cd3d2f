"""Certificate files: one self-contained JSON document per claim, written deterministically.

A document embeds everything the independent checker needs — the claim, the blocks (exact
weights as strings), the outcome and its certificate — so `absorb_formal.checker` can verify
it without importing the prover, and `absorb-prove check` can tell when the spec has changed
since (the embedded blocks no longer match).
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any

from . import certificates as cert
from .decide.concrete import MAX_EXACT_WEIGHTS, weight_count
from .model import Block, Claim, Spec
from .result import Result

FORMAT = "absorb_formal certificate 1"

_UMASK = os.umask(0)  # read once: mkstemp makes 0600 files, certificates are ordinary files
os.umask(_UMASK)


def _digest(block: Block) -> dict[str, Any]:
    """Weights too many to embed (beyond the exact-work limit): their SHA-256 and count.
    Certificates for such blocks read no weight (never-rules) or read them from arrays the
    checker authenticates by this digest (modular rank)."""
    from .checker.modular import digest

    return {"sha256": digest(float_layers(block)), "weights": weight_count(block)}


def float_layers(block: Block) -> list[dict[str, Any]]:
    """Each layer's matrices as float64 arrays (exact for loaded float weights)."""
    assert block.layers is not None
    return [{name: m.floats for name, m in
             (("gate", layer.gate), ("up", layer.up), ("down", layer.down)) if m is not None}
            for layer in block.layers]


def block_json(block: Block) -> dict[str, Any]:
    scalar = block.activation.scalar
    if block.layers is not None and weight_count(block) > MAX_EXACT_WEIGHTS:
        layers: Any = _digest(block)
    else:
        layers = None if block.layers is None else cert.layers(block.layers)
    return {
        "name": block.name,
        "activation": {"name": block.activation.name, "kind": scalar.kind,
                       "gated": block.activation.gated,
                       "param": None if scalar.param is None else cert.q(scalar.param),
                       "power": scalar.power, "coeffs": cert.vector(scalar.coeffs)},
        "dim": block.dim, "width": block.width, "depth": block.depth,
        "skip": ({"matrix": cert.matrix(block.skip.matrix.rows)} if block.skip.matrix is not None
                 else {"scale": cert.q(block.skip.scale or 0)}),
        "layers": layers,
    }


def spec_path(path: str) -> str:
    """The spec's path relative to the working directory (where `check` will look for it),
    so the same spec gives the same bytes however its PATH was typed."""
    resolved = Path(path).resolve()
    try:
        return resolved.relative_to(Path.cwd().resolve()).as_posix()
    except ValueError:
        return resolved.as_posix()


def claim_json(claim: Claim, block: Block) -> dict[str, Any]:
    width = claim.width if claim.width is not None else block.width
    return {"kind": claim.kind, "block": claim.block, "other": claim.other,
            "modality": claim.modality, "width": width, "min_width": claim.min_width}


def document(spec: Spec, claim: Claim, result: Result) -> dict[str, Any]:
    """The certificate document of one decided claim."""
    names = [claim.block] + ([claim.other] if claim.other else [])
    return {
        "format": FORMAT,
        "spec": spec_path(spec.path),
        "line": claim.pos.line,
        "statement": claim.statement,
        "claim": claim_json(claim, spec.blocks[claim.block]),
        "blocks": {name: block_json(spec.blocks[name]) for name in names},
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
