"""`absorb-prove check PATH...`: re-verify certificate documents.

The command over `absorb_formal.api.check_items`; one document's verdict is
`checking.check_file` (the independent checker, guarded against stale evidence). A document
whose spec is not found is still verified against its embedded blocks, and the output says
that the spec was not found.
"""

from __future__ import annotations

import argparse
import json
from typing import TextIO

from ..checker.document import check_document, check_file
from .arguments import parse

# check_document and check_file come from checker/document.py, for callers
__all__ = ["check_document", "check_file", "main"]

EXIT_OK, EXIT_INVALID, EXIT_ERROR = 0, 1, 2


EPILOG = """\
output:
  one line per certificate document, in path order:
    FILE: STATUS — claim OUTCOME: STATEMENT (VERDICT) [METHOD] in SPEC:LINE — REASON
  SPEC is the spec the document names, as the checker located it: the verified
  STATEMENT is about that spec's blocks (or, when REASON says the spec was not found,
  about the blocks the document embeds). VERDICT and METHOD are the prover's words,
  shown as recorded. STATUS is the checker's: valid (the evidence proves the recorded
  outcome), invalid (it does not, or the document is malformed), stale (the spec or a
  weight file changed since the document was written; not re-verified) or unchecked
  (nothing to verify, e.g. an unknown outcome). OUTCOME is the claim's: a valid
  certificate of a refuted claim proves the opposite of STATEMENT; unless STATUS is
  valid, the line says "recorded claim OUTCOME" (not verified). A last line counts the statuses.
  With --json, stdout holds one JSON document instead:
    {"certificates": [{"path", "status", "reason", "outcome", "verdict", "method",
     "statement", "line", "spec"}], "errors": [MESSAGE], "counts": {"valid", "invalid",
     "stale", "unchecked"}, "exit_code"}

exit codes:
  0  no certificate invalid or stale
  1  some certificate invalid or stale
  2  a path does not exist, a folder holds no .json file, or a path is a spec
     (.mlp: decide it with `absorb-prove FILE.mlp`)
"""


def main(argv: list[str], stdout: TextIO, stderr: TextIO) -> int:
    parser = argparse.ArgumentParser(prog="absorb-prove check",
                                     description="Re-verify certificate documents.",
                                     epilog=EPILOG,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("paths", nargs="+", metavar="PATH",
                        help="certificate files (.json) or folders")
    parser.add_argument("--json", action="store_true", help="print one JSON document")
    from ..api import STATUSES, check_items

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
    elif documents or not errors:  # a lone error (a spec given, no .json) has no count
        print(f"check: {sum(counts.values())} certificates: {counts['valid']} valid, "
              f"{counts['invalid']} invalid, {counts['stale']} stale, "
              f"{counts['unchecked']} unchecked", file=stdout)
    return code
