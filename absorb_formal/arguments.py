"""Command-line arguments parsed without exiting: the commands (`cli`, `check_command`) run
in-process, so argparse's exits become exit codes."""

from __future__ import annotations

import argparse
import sys
from typing import TextIO

from .report import EXIT_ERROR


def parse(parser: argparse.ArgumentParser, argv: list[str], stdout: TextIO,
          stderr: TextIO) -> argparse.Namespace | int:
    """The parsed arguments, or the exit code when argparse stopped (0 after --help or
    --version, 2 for a usage error); help and usage go to `stdout` / `stderr`."""
    try:
        old = sys.stdout, sys.stderr
        sys.stdout, sys.stderr = stdout, stderr  # argparse prints help/usage to sys.*
        try:
            return parser.parse_args(argv)
        finally:
            sys.stdout, sys.stderr = old
    except SystemExit as stop:
        return EXIT_ERROR if stop.code not in (0, None) else 0
