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


def add_workers(parser: argparse.ArgumentParser, tasks: str, where: str) -> None:
    """-j N, --cluster ADDRESS, --no-cluster and --memory SIZE: how many `tasks` (sublayers,
    files) are decided at once and where (`scanner/cluster.py`), and the exact LU's memory;
    `where`: what a cluster's workers must see at the same path."""
    parser.add_argument("-j", "--jobs", type=count(1), default=1, metavar="N",
                        help=f"decide N {tasks} at once (default 1; output order is unchanged): "
                             "on a Dask LocalCluster of N worker processes (local:N) when the "
                             "dask extra is installed, else in N processes")
    parser.add_argument("--cluster", metavar="ADDRESS",
                        help=f"decide the {tasks} on a Dask cluster (the dask extra): "
                             f"tcp://HOST:PORT, a running scheduler whose workers see {where} "
                             "at the same path, or local:N, N worker processes on this "
                             f"machine; one task per {tasks.rstrip('s')}")
    parser.add_argument("--no-cluster", action="store_true",
                        help="-j N: decide in N processes of a pool, even with dask installed")
    parser.add_argument("--memory", type=size, metavar="SIZE",
                        help="the most memory an exact LU may hold, e.g. 300MB, 4GB, "
                             "1.5GiB (default: the memory available); a larger one runs "
                             "out of core, from a file (docs/rules.md, modular functional)")
