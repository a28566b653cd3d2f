"""`absorb-prove check PATH...`: re-verify certificate documents.

Everything here is the checker's (`absorb_formal.checker`, independent of the prover): the
mathematics (`verify`) and the guard against stale evidence (`checker.reading`): the spec a
document names — its path is stored relative to the certificate file's folder — and every
weight file its blocks load must still have the bytes (SHA-256) the document records, and the
checker's own reading of them must give exactly the embedded blocks and statement. A
document whose spec is not found is still verified against its embedded blocks, and the
output says that the spec was not found.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any, TextIO

from .checker import Verdict, verify
from .checker.reading import Reading, Stale, spec_location

EXIT_OK, EXIT_INVALID, EXIT_ERROR = 0, 1, 2


def _reading(doc: Any, path: Path) -> tuple[Reading | None, str]:
    """The checker's reading of the document's spec, or None and why not."""
    try:
        spec_file = spec_location(doc, path)
    except (KeyError, TypeError):
        return None, ""  # malformed: verify says so
    if not spec_file.is_file():
        return None, f"spec {spec_file} not found: verified against the embedded blocks only"
    try:
        return Reading(spec_file), ""
    except OSError as error:
        return None, f"spec {spec_file} cannot be read ({error.strerror}): verified against " \
                     "the embedded blocks only"


def check_document(path: Path) -> tuple[Verdict, str]:
    """(verdict, statement) for one certificate file."""
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as error:
        return Verdict("invalid", f"unreadable certificate: {error}"), ""
    statement = str(doc.get("statement", "")) if isinstance(doc, dict) else ""
    reading, note = _reading(doc, path) if isinstance(doc, dict) else (None, "")
    weights = {}
    if reading is not None:
        try:
            why = reading.stale(doc)
            if not why:
                weights = reading.weights(doc)
        except (KeyError, TypeError, AttributeError, ValueError):
            why = ""  # a malformed document: verify gives the reason
        except Stale as error:
            why = str(error)
        if why:
            return Verdict("invalid", f"stale: {why}"), statement
    verdict = verify(doc, weights)
    if note and verdict.status != "invalid":
        verdict = Verdict(verdict.status, "; ".join(x for x in (verdict.reason, note) if x))
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
