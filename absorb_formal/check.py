"""`absorb-prove check PATH...`: re-verify certificate documents.

The mathematics is checked by `absorb_formal.checker` alone (independent of the prover).
This command adds one guard against stale evidence: when the spec a document names still
exists, its blocks and statement must be the ones the document embeds.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any, TextIO

from .checker import Verdict, verify

EXIT_OK, EXIT_INVALID, EXIT_ERROR = 0, 1, 2


def stale(doc: dict[str, Any]) -> str:
    """Why the document no longer matches its spec ("" if it does, or the spec is gone)."""
    from .language import SpecError, load_file
    from .proofs import block_json

    path = Path(doc["spec"])
    if not path.is_file():
        return ""
    try:
        spec = load_file(path)
    except SpecError as error:
        return f"the spec no longer loads: {error.diagnostics[0].message}"
    here = [s for s in spec.statements if s.pos.line == doc["line"]]
    if not here or here[0].statement != doc["statement"]:
        return f"line {doc['line']} of {path} no longer states '{doc['statement']}'"
    for name, embedded in doc["blocks"].items():
        if name not in spec.blocks or block_json(spec.blocks[name]) != embedded:
            return f"block '{name}' in {path} differs from the certified one"
    return ""


def digest_weights(doc: dict[str, Any]) -> dict[str, Any]:
    """Float arrays, from the spec, of the blocks the document stores only by digest (the
    checker authenticates them against that digest)."""
    from .language import SpecError, load_file
    from .proofs import float_layers

    wanted = [name for name, b in doc.get("blocks", {}).items()
              if isinstance(b, dict) and isinstance(b.get("layers"), dict)]
    path = Path(str(doc.get("spec", "")))
    if not wanted or not path.is_file():
        return {}
    try:
        spec = load_file(path)
    except SpecError:
        return {}
    return {name: float_layers(spec.blocks[name]) for name in wanted
            if name in spec.blocks and spec.blocks[name].layers is not None}


def check_document(path: Path) -> tuple[Verdict, str]:
    """(verdict, statement) for one certificate file."""
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as error:
        return Verdict("invalid", f"unreadable certificate: {error}"), ""
    statement = str(doc.get("statement", "")) if isinstance(doc, dict) else ""
    verdict = verify(doc, digest_weights(doc) if isinstance(doc, dict) else None)
    if verdict.status != "invalid":
        why = stale(doc)
        if why:
            verdict = Verdict("invalid", f"stale: {why}")
    return verdict, statement


def main(argv: list[str], stdout: TextIO, stderr: TextIO) -> int:
    parser = argparse.ArgumentParser(prog="absorb-prove check",
                                     description="Re-verify certificate documents.")
    parser.add_argument("paths", nargs="+", metavar="PATH",
                        help="certificate files (.json) or folders")
    try:
        args = parser.parse_args(argv)
    except SystemExit as stop:
        return EXIT_ERROR if stop.code not in (0, None) else EXIT_OK
    from .cli import collect

    counts = {"valid": 0, "invalid": 0, "unchecked": 0}
    code = EXIT_OK
    for item in collect(args.paths, "*.json"):
        if isinstance(item, str):
            print(item, file=stderr)
            code = EXIT_ERROR
            continue
        path, shown, _ = item
        verdict, statement = check_document(path)
        counts[verdict.status] += 1
        said = " — ".join(x for x in (statement, verdict.reason) if x)
        print(f"{shown}: {verdict.status}: {said}", file=stdout)
    print(f"check: {sum(counts.values())} certificates: {counts['valid']} valid, "
          f"{counts['invalid']} invalid, {counts['unchecked']} unchecked", file=stdout)
    if code == EXIT_ERROR:
        return code
    return EXIT_INVALID if counts["invalid"] else EXIT_OK
