"""`absorb-prove`, the command line, on top of the Python API (`absorb_formal.api`).

A table maps the first word to the module of its command; each module has
`main(argv, stdout, stderr) -> int` and is imported only when its command runs (as pip's and
black's command tables do), so that one command never pays for another's imports:

    absorb-prove [options] SPEC...     prove.py (any other first word)
    absorb-prove check PATH...         check.py
    absorb-prove scan CHECKPOINT       scan.py
    absorb-prove export SPEC BLOCK     export.py

`arguments.py` holds what their parsers share. `main` runs in-process (tests call it);
`entry()` is the console script and `python -m absorb_formal`.
"""

from __future__ import annotations

import importlib
import sys
from typing import TextIO

COMMANDS = {
    "check": "absorb_formal.cli.check",
    "scan": "absorb_formal.cli.scan",
    "export": "absorb_formal.cli.export",
}
DEFAULT = "absorb_formal.cli.prove"  # deciding spec files: no command word


def command(argv: list[str]) -> tuple[str, list[str]]:
    """(the module of the command `argv` names, the arguments left for it)."""
    if argv and argv[0] in COMMANDS:
        return COMMANDS[argv[0]], argv[1:]
    return DEFAULT, argv


def main(argv: list[str] | None = None, stdout: TextIO | None = None,
         stderr: TextIO | None = None) -> int:
    """Run `absorb-prove` with `argv`; return the exit code (never raises for bad input)."""
    module, rest = command(list(sys.argv[1:] if argv is None else argv))
    run = importlib.import_module(module).main
    return int(run(rest, stdout or sys.stdout, stderr or sys.stderr))


def entry() -> None:
    try:
        code = main()
        sys.stdout.flush()
    except BrokenPipeError:  # `absorb-prove ... | head`: the reader left; not an error of ours
        # Python flushes stdout again at exit: point it at devnull so that raises nothing.
        import os

        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        code = 0
    sys.exit(code)
