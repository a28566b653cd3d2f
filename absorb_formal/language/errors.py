"""Positioned spec errors: `FILE:LINE:COL: error: MESSAGE`, the source line, a caret."""

from __future__ import annotations

import difflib
from dataclasses import dataclass

from .syntax import Pos


def listed(names: list[str]) -> str:
    """The first ten of some names, and how many there are in all when more."""
    return (", ".join(names[:10]) + (f", ... ({len(names)} in all)" if len(names) > 10
                                      else "")) or "none"


def did_you_mean(key: str, names: list[str]) -> str:
    """'; did you mean 'NAME'?' for the nearest of `names` to a mistyped `key`, or ''."""
    close = difflib.get_close_matches(key, names, n=1, cutoff=0.6)
    return f"; did you mean {close[0]!r}?" if close else ""


@dataclass(frozen=True)
class Diagnostic:
    path: str
    pos: Pos
    message: str

    def format(self, source: str | None) -> str:
        """The message, then the offending source line with a caret under the column."""
        head = f"{self.path}:{self.pos.line}:{self.pos.column}: error: {self.message}"
        line = source_line(source, self.pos.line)
        if line is None:
            return head
        # Keep the caret aligned even when the line holds tabs; cut very long lines.
        shown = line.expandtabs(1)[:200]
        caret = " " * min(max(self.pos.column - 1, 0), len(shown)) + "^"
        return f"{head}\n    {shown}\n    {caret}"

    def as_json(self) -> dict[str, object]:
        return {"line": self.pos.line, "column": self.pos.column, "message": self.message}


class SpecError(Exception):
    """One or more diagnostics that stop a spec file from being decided."""

    def __init__(self, diagnostics: list[Diagnostic], source: str | None = None):
        super().__init__("; ".join(d.message for d in diagnostics))
        self.diagnostics = sorted(diagnostics, key=lambda d: (d.pos.line, d.pos.column))
        self.source = source

    def format(self) -> str:
        return "\n".join(d.format(self.source) for d in self.diagnostics)


def source_line(source: str | None, line: int) -> str | None:
    if source is None or line < 1:
        return None
    lines = source.split("\n")
    if line > len(lines):
        return None
    return "".join(ch if ch.isprintable() or ch == "\t" else "?" for ch in lines[line - 1])
