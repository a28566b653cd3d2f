"""One certificate document re-verified: the independent checker's verdict, guarded against
stale evidence.

Everything here is the checker's (`absorb_formal.checker`, independent of the prover): the
mathematics (`verify`) and the guard against stale evidence (`checker.reading`): the spec a
document names — its path is stored relative to the certificate file's folder — and every
weight file its blocks load must still have the bytes (SHA-256) the document records, and the
checker's own reading of them must give exactly the embedded blocks and statement. A
document whose spec is not found is still verified against its embedded blocks, and the
verdict's reason says that the spec was not found.

`absorb_formal.api.check` and `absorb-prove check` (cli/check.py) go through `check_file`.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from .dispatch import Verdict, verify
from .readers.reading import Reading, Stale, spec_location
from .readers.shape import document_problem, json_integer


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
    verdict, doc = check_file(path)
    return verdict, str(doc.get("statement", ""))


def check_file(path: Path) -> tuple[Verdict, dict[str, Any]]:
    """(verdict, the document: {} when it is not a readable JSON object) for one file."""
    try:
        doc = json.loads(path.read_text(encoding="utf-8"), parse_int=json_integer)
    except (OSError, UnicodeDecodeError, ValueError, RecursionError) as error:  # ValueError:
        # not JSON (json.JSONDecodeError), or an integer too long to convert (json_integer)
        return Verdict("invalid", f"unreadable certificate: {type(error).__name__}: "
                                  f"{str(error)[:200]}"), {}
    if not isinstance(doc, dict):
        return verify(doc, {}), {}
    problem = document_problem(doc)
    if problem:  # nothing in a malformed document is read, tied to files, or believed
        return Verdict("invalid", problem), doc
    reading, note = _reading(doc, path)
    weights, checked = {}, doc
    if reading is not None:
        try:
            why = reading.stale(doc)
            if not why:
                weights = reading.weights(doc)
                checked = reading.read_skips(doc)  # a skip stored by its source, read
        except (KeyError, TypeError, AttributeError, ValueError, RecursionError) as error:
            return Verdict("invalid", f"malformed certificate: {type(error).__name__}: "
                                      f"{error}"), doc
        except Stale as error:
            why = str(error)
        if why:
            return Verdict("invalid", f"stale: {why}"), doc
    verdict = verify(checked, weights)
    if note and verdict.status != "invalid":
        verdict = Verdict(verdict.status, "; ".join(x for x in (verdict.reason, note) if x))
    return verdict, doc
