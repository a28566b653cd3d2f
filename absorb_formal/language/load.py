"""A spec file from disk: bytes → text (UTF-8) → syntax tree → validated model."""

from __future__ import annotations

import re
from dataclasses import replace
from pathlib import Path

from ..model import Spec
from .errors import Diagnostic, SpecError
from .parse import parse_text
from .syntax import Pos
from .validate import validate

# A spec is hand-written text (the corpus's largest is 3 KB); parsing costs about 4 s and
# 150 MB per MB, so larger input is refused before any parsing, with what to do instead.
MAX_SPEC_BYTES = 2 * 1024 * 1024


def decode(data: bytes, path: str) -> str:
    """UTF-8 text, or a SpecError at the line and column of the first undecodable byte."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as error:
        good = data[: error.start].decode("utf-8")
        line = good.count("\n") + 1
        column = len(good) - (good.rfind("\n") + 1) + 1
        message = f"invalid UTF-8 byte 0x{data[error.start]:02x} (spec files are UTF-8 text)"
        raise SpecError([Diagnostic(path, Pos(line, column), message)], good) from None


EXPECT = re.compile(r"#\s*expect:\s*(proved|refuted|unknown|decided)\b\s*(.*)")
SLOW = re.compile(r"#.*\bslow\b")


def expectations(text: str) -> tuple[dict[int, str], dict[int, str], frozenset[int]]:
    """Per line: the outcome a `# expect: OUTCOME [note]` comment asks for, its note, and
    whether the line's comment marks it `slow`."""
    outcomes, notes, slow = {}, {}, set()
    for number, line in enumerate(text.split("\n"), start=1):
        match = EXPECT.search(line)
        if match:
            outcomes[number] = match.group(1)
            if match.group(2).strip(" -—:"):
                notes[number] = match.group(2).strip(" -—:")
        if SLOW.search(line):
            slow.add(number)
    return outcomes, notes, frozenset(slow)


def load_text(text: str, path: str, folder: Path) -> Spec:
    """Parse and validate spec text; `folder` anchors relative `load(...)` paths."""
    spec = validate(parse_text(text, path), path, folder, text)
    outcomes, notes, slow = expectations(text)
    return replace(spec, expectations=outcomes, notes=notes, slow_lines=slow)


def load_file(path: Path, shown: str | None = None) -> Spec:
    """Read, parse and validate a spec file (`shown` is the path as the user gave it)."""
    name = shown if shown is not None else str(path)
    try:
        size = path.stat().st_size
        if size > MAX_SPEC_BYTES:
            raise SpecError([Diagnostic(name, Pos(1, 1), (
                f"file is {size} bytes; spec files are limited to {MAX_SPEC_BYTES} bytes: put "
                "large weight matrices in a .npz or .safetensors file and use "
                'load("file", "key")'))])
        data = path.read_bytes()
    except OSError as error:
        reason = error.strerror or str(error)
        raise SpecError([Diagnostic(name, Pos(1, 1), f"cannot read file: {reason}")]) from None
    return load_text(decode(data, name), name, path.parent)
