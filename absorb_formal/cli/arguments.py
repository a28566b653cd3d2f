"""Command-line arguments parsed without exiting: the commands (`cli`, `check_command`) run
in-process, so argparse's exits become exit codes."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from typing import TextIO

from ..report import EXIT_ERROR


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


def count(least: int) -> Callable[[str], int]:
    """An argparse type: an integer >= `least` (a usage error, exit 2, otherwise)."""
    def checked(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
        if value < least:
            raise argparse.ArgumentTypeError(f"{value} is below {least}")
        return value
    return checked


def nonnegative(text: str) -> float:
    """An argparse type: a number >= 0, inf allowed (a usage error, exit 2, otherwise)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not value >= 0:
        raise argparse.ArgumentTypeError(f"{text} is not a number >= 0")
    return value


def seconds(text: str) -> float:
    """An argparse type: a finite number of seconds >= 0 (0: no limit)."""
    value = nonnegative(text)
    if value == float("inf"):
        raise argparse.ArgumentTypeError("inf is not a number of seconds (0 means no limit)")
    return value


def size(text: str) -> int:
    """An argparse type: a memory size, e.g. 300MB, 4GB, 1.5GiB (`memory.parse_size`; a usage
    error, exit 2, otherwise)."""
    from ..model.memory import parse_size

    try:
        return parse_size(text)
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error)) from None
