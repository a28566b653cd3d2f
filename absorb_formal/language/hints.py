"""Hints for spec errors: "did you mean ...?", pasted look-alike characters, blocks left open.

Only the wording of a diagnostic changes; its position and the exit status stay the same.
"""

from __future__ import annotations

import difflib
import re
import unicodedata
from collections.abc import Iterable

from .syntax import Pos

# Characters that text copied from papers, slides or word processors puts where the language
# wants plain ASCII, with what to type instead.
LOOKALIKES: dict[str, str] = {
    "\u2212": "'-' (ASCII hyphen-minus) for a negative number",
    "\u2013": "'-' (ASCII hyphen-minus) for a negative number",
    "\u2014": "'-' (ASCII hyphen-minus) for a negative number",
    "\u2010": "'-' (ASCII hyphen-minus) for a negative number",
    "\u2011": "'-' (ASCII hyphen-minus) for a negative number",
    "\ufe63": "'-' (ASCII hyphen-minus) for a negative number",
    "\uff0d": "'-' (ASCII hyphen-minus) for a negative number",
    "\u00d7": "the number itself (the language has no multiplication: write 3/10 or 2e-3, "
              "not 3×10^-1)",
    "\u22c5": "'.' for a decimal point (the language has no multiplication)",
    "\u00b7": "'.' for a decimal point (the language has no multiplication)",
    "\u2044": "'/' (ASCII slash) for a fraction",
    "\u2215": "'/' (ASCII slash) for a fraction",
    "\u00f7": "'/' (ASCII slash) for a fraction",
    "\u00a0": "an ordinary space",
    "\u202f": "an ordinary space",
    "\u2007": "an ordinary space",
    "\u2009": "an ordinary space",
    "\u3000": "an ordinary space",
    "\u200b": "nothing (delete it: it is invisible)",
    "\ufeff": "nothing (delete it: it is invisible)",
    "\u201c": "'\"' (ASCII double quote) around a file name or key",
    "\u201d": "'\"' (ASCII double quote) around a file name or key",
    "\u201e": "'\"' (ASCII double quote) around a file name or key",
    "\u2018": "'\"' (ASCII double quote) around a file name or key",
    "\u2019": "'\"' (ASCII double quote) around a file name or key",
    "'": "'\"' (ASCII double quote) around a file name or key",
    "\uff0c": "',' (ASCII comma)",
    "\uff1d": "'=' (ASCII equals sign)",
    "\u00b2": "'^2' (a power of an activation is written relu^2)",
    "\u00b3": "'^3' (a power of an activation is written relu^3)",
    "\u00bd": "1/2",
    "\u00bc": "1/4",
    "\u00be": "3/4",
}


def character_hint(char: str) -> str:
    """`'−' (U+2212 MINUS SIGN) is not part of the language; type '-' ...` for a look-alike,
    else the character's name; `char` is the one character the lexer stopped at."""
    if not char:
        return "unexpected character"
    code = f"U+{ord(char):04X}"
    name = unicodedata.name(char, "")
    described = f"{char!r} ({code} {name})" if name else f"{char!r} ({code})"
    instead = LOOKALIKES.get(char)
    if instead is not None:
        return f"unexpected character {described}; type {instead} instead"
    if ord(char) < 128:
        return f"unexpected character {char!r}"
    return f"unexpected character {described}: spec files use ASCII outside comments and strings"


def written_elsewhere(text: str, at: int) -> str | None:
    """A hint for what other languages write where the lexer stopped at offset `at` of
    `text`: `**` for a power (`relu**2`), lower-case `.t` or `.t()` / `.transpose()` for the
    transpose; None when nothing of the kind is there."""
    rest = text[at:at + 16]
    if rest.startswith("**"):
        return ("unexpected '**': a power of an activation is written with '^', as relu^2 "
                "(the language has no '**')")
    if rest.startswith("*"):
        return "unexpected character '*': the language has no multiplication"
    word = re.match(r"\.([A-Za-z_]\w*)(\(\))?", rest)
    if word and word.group(1) in ("t", "transpose", "T"):
        return (f"unexpected {word.group(0)!r}: the transpose is written '.T' (capital T, "
                "no parentheses), after a matrix or load(...)")
    return None


def did_you_mean(word: str, candidates: Iterable[str]) -> str:
    """`did you mean 'relu'?` when `word` is close to one of `candidates`, else ``."""
    found = difflib.get_close_matches(word, sorted(set(candidates)), n=1, cutoff=0.6)
    if not found and word.lower() != word:
        found = difflib.get_close_matches(word.lower(), sorted(set(candidates)), n=1, cutoff=0.6)
    return f"did you mean '{found[0]}'?" if found else ""


def open_sections(text: str, end: int,
                  closed: list[tuple[str, Pos, Pos]] | None = None) -> list[tuple[str, Pos]]:
    """The `{ ... }` sections still open at offset `end` of `text`, outermost first, each as
    its description ("block 'R'", "layer 2 of block 'R'") and the position of its opening
    word. Comments and strings are skipped; braces are counted as written. `closed`, when
    given, receives each section a `}` closed: (description, opened at, closed at)."""
    stack: list[tuple[str, Pos]] = []
    words: list[tuple[str, int]] = []  # the last few words and their offsets
    i = 0
    limit = min(end, len(text))
    while i < limit:
        ch = text[i]
        if ch == "#":
            while i < limit and text[i] != "\n":
                i += 1
            continue
        elif ch == '"':
            i += 1
            while i < limit and text[i] not in '"\n':
                i += 1
        elif ch.isalnum() or ch == "_":
            start = i
            while i < limit and (text[i].isalnum() or text[i] == "_"):
                i += 1
            words = (words + [(text[start:i], start)])[-2:]
            continue
        elif ch == "{":
            stack.append(_section(text, words, stack))
            words = []
        elif ch == "}":
            if stack:
                what, opened = stack.pop()
                if closed is not None:
                    before = text[:i]
                    closed.append((what, opened, Pos(before.count("\n") + 1,
                                                     i - (before.rfind("\n") + 1) + 1)))
            words = []
        elif not ch.isspace():
            words = []
        i += 1
    return stack


def _section(text: str, words: list[tuple[str, int]],
             stack: list[tuple[str, Pos]]) -> tuple[str, Pos]:
    def pos(offset: int) -> Pos:
        before = text[:offset]
        return Pos(before.count("\n") + 1, offset - (before.rfind("\n") + 1) + 1)

    if len(words) == 2 and words[0][0] in ("block", "layer"):
        kind, (name, _) = words[0], words[1]
        if kind[0] == "block":
            return f"block '{name}'", pos(kind[1])
        inside = f" of {stack[-1][0]}" if stack else ""
        return f"layer {name}{inside}", pos(kind[1])
    if words:
        return f"the section after '{words[-1][0]}'", pos(words[-1][1])
    return "a section", pos(len(text))


def unclosed(text: str, end: int, layer_only: bool = False) -> str | None:
    """`block 'R' opened at 3:1 is not closed` for the innermost section open at `end`
    (with `layer_only`, only when that section is a layer)."""
    closed: list[tuple[str, Pos, Pos]] = []
    stack = open_sections(text, end, closed)
    if not stack or (layer_only and not stack[-1][0].startswith("layer ")):
        return None
    what, where = stack[-1]
    said = f"{what} opened at {where.line}:{where.column} is not closed"
    if what.startswith("block ") and closed and closed[-1][0].startswith("layer ") \
            and closed[-1][2].column == where.column:
        # a '}' aligned with 'block' was meant for the block: it closed a layer instead
        layer, opened, at = closed[-1]
        said += (f" (the '}}' at {at.line}:{at.column} closes {layer.split(' of ')[0]}, "
                 f"opened at {opened.line}:{opened.column}: is that layer's '}}' missing?)")
    return said
