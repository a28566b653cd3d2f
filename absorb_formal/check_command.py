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
    verdict, doc = check_file(path)
    return verdict, str(doc.get("statement", ""))


def check_file(path: Path) -> tuple[Verdict, dict[str, Any]]:
    """(verdict, the document: {} when it is not a readable JSON object) for one file."""
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as error:
        return Verdict("invalid", f"unreadable certificate: {error}"), {}
    if not isinstance(doc, dict):
        return verify(doc, {}), {}
    reading, note = _reading(doc, path)
    weights, checked = {}, doc
    if reading is not None:
        try:
            why = reading.stale(doc)
            if not why:
                weights = reading.weights(doc)
                checked = reading.read_skips(doc)  # a skip stored by its source, read
        except (KeyError, TypeError, AttributeError, ValueError):
            why = ""  # a malformed document: verify gives the reason
        except Stale as error:
            why = str(error)
        if why:
            return Verdict("invalid", f"stale: {why}"), doc
    verdict = verify(checked, weights)
    if note and verdict.status != "invalid":
        verdict = Verdict(verdict.status, "; ".join(x for x in (verdict.reason, note) if x))
    return verdict, doc


EPILOG = """\
output:
  one line per certificate document, in path order:
    FILE: STATUS — claim OUTCOME: STATEMENT (VERDICT) [METHOD] — REASON
  STATUS is the checker's: valid (the evidence proves the recorded outcome), invalid
  (it does not, or the document is malformed), stale (the spec or a weight file changed
  since the document was written; not re-verified) or unchecked (nothing to verify, e.g.
  an unknown outcome). OUTCOME is the claim's: a valid certificate of a refuted
  claim proves the opposite of STATEMENT; unless STATUS is valid, the line says
  "recorded claim OUTCOME" (not verified). A last line counts the statuses.
  With --json, stdout holds one JSON document instead:
    {"certificates": [{"path", "status", "reason", "outcome", "verdict", "method",
     "statement", "line"}], "errors": [MESSAGE], "counts": {"valid", "invalid",
     "stale", "unchecked"}, "exit_code"}

exit codes:
  0  no certificate invalid or stale
  1  some certificate invalid or stale
  2  a path does not exist (or a folder holds no .json file)
"""


def main(argv: list[str], stdout: TextIO, stderr: TextIO) -> int:
    parser = argparse.ArgumentParser(prog="absorb-prove check",
                                     description="Re-verify certificate documents.",
                                     epilog=EPILOG,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("paths", nargs="+", metavar="PATH",
                        help="certificate files (.json) or folders")
    parser.add_argument("--json", action="store_true", help="print one JSON document")
    from .api import STATUSES, check_items
    from .cli import parse

    args = parse(parser, argv, stdout, stderr)
    if isinstance(args, int):
        return args

    counts = dict.fromkeys(STATUSES, 0)
    errors, documents = [], []
    for item in check_items(args.paths):
        if isinstance(item, str):
            print(item, file=stderr)
            errors.append(item)
            continue
        shown, result = item
        counts[result.status] += 1
        documents.append({**result.as_json(), "path": shown})
        if not args.json:
            print(result.text(shown), file=stdout)
    code = EXIT_ERROR if errors else EXIT_INVALID if counts["invalid"] + counts["stale"] \
        else EXIT_OK
    if args.json:
        print(json.dumps({"certificates": documents, "errors": errors, "counts": counts,
                          "exit_code": code}, indent=2), file=stdout)
    else:
        print(f"check: {sum(counts.values())} certificates: {counts['valid']} valid, "
              f"{counts['invalid']} invalid, {counts['stale']} stale, "
              f"{counts['unchecked']} unchecked", file=stdout)
    return code
