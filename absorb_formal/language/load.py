"""A spec file from disk: bytes → text (UTF-8) → syntax tree → validated model."""

from __future__ import annotations

import re
from dataclasses import replace
from pathlib import Path

from ..model.activations import Activation
from ..model.blocks import Query, Spec
from .errors import Diagnostic, SpecError
from .hints import did_you_mean
from .parse import parse_text
from .syntax import Pos
from .validate import validate

# A spec is hand-written text (the corpus's largest is 3 KB); parsing costs about 4 s and
# 150 MB per MB, so larger input is refused before any parsing, with what to do instead.
MAX_SPEC_BYTES = 2 * 1024 * 1024


def decode(data: bytes, path: str) -> str:
    """UTF-8 text, or a SpecError at the line and column of the first undecodable byte; a
    binary file (a NUL byte in its first 4 KiB: an .npz, .safetensors, .onnx or pickle) is
    said to be one, without echoing its bytes."""
    if b"\0" in data[:4096]:
        raise SpecError([Diagnostic(path, Pos(1, 1), "a binary file, not a spec (weights in "
                                    "an .npz, .safetensors or .onnx file are read by a spec's "
                                    "load(\"FILE\", \"NAME\"))")])
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as error:
        good = data[: error.start].decode("utf-8")
        line = good.count("\n") + 1
        column = len(good) - (good.rfind("\n") + 1) + 1
        message = f"invalid UTF-8 byte 0x{data[error.start]:02x} (spec files are UTF-8 text)"
        raise SpecError([Diagnostic(path, Pos(line, column), message)], good) from None


# `# expect: OUTCOME [note]`. The keyword is matched in any case and the value as any word, so
# that a typo (`# expect: refute`, `# Expect: proven`, a bare `# expect:`) is a positioned
# error instead of silently meaning the default, proved.
EXPECT = re.compile(r"#\s*expect:[ \t]*(\w*)(.*)", re.IGNORECASE)
# Near misses that would otherwise be plain comments: `# expected: refuted`, `# expect refuted`,
# `# expects: unknown` (the outcome word right after an expect-like word, without `expect:`).
NEAR_EXPECT = re.compile(r"#\s*(expect\w*\s*:?)\s*(proved|refuted|unknown|decided)\b",
                         re.IGNORECASE)
SLOW = re.compile(r"#.*\bslow\b")
CLAIM_OUTCOMES = ("proved", "refuted", "unknown")
QUERY_OUTCOMES = ("decided", "unknown")


def expectations(text: str, path: str) -> tuple[dict[int, str], dict[int, str], frozenset[int]]:
    """Per line: the outcome a `# expect: OUTCOME [note]` comment asks for, its note, and
    whether the line's comment marks it `slow`. An outcome that is not one of proved, refuted,
    unknown, decided is a SpecError at its column."""
    outcomes, notes, slow, errors = {}, {}, set(), []
    known = sorted({*CLAIM_OUTCOMES, *QUERY_OUTCOMES})
    for number, line in enumerate(text.split("\n"), start=1):
        match = EXPECT.search(line)
        near = None if match else NEAR_EXPECT.search(line)
        if near:
            errors.append(Diagnostic(path, Pos(number, near.start(1) + 1),
                                     f"'{near.group(1).strip()}' is not an expectation: write "
                                     f"'# expect: {near.group(2).lower()}'"))
        if match:
            value, note = match.group(1), match.group(2).strip(" -—:")
            if value not in known:
                shown = f"unknown outcome '{value}'" if value else "missing outcome"
                hint = did_you_mean(value, known) if value else ""
                errors.append(Diagnostic(path, Pos(number, match.start(1) + 1),
                                         f"{shown} after '# expect:'"
                                         + (f": {hint}" if hint else "")
                                         + f" (known: {', '.join(known)})"))
            outcomes[number] = value
            if note:
                notes[number] = note
        if SLOW.search(line):
            slow.add(number)
    if errors:
        raise SpecError(errors, text)
    return outcomes, notes, frozenset(slow)


def check_expectations(spec: Spec, outcomes: dict[int, str], text: str) -> None:
    """An expectation must sit on the line of a claim or query and name an outcome that
    statement can have (claims: proved/refuted/unknown; queries: decided/unknown); otherwise
    it would never be met, or silently never be checked."""
    kinds = {s.pos.line: isinstance(s, Query) for s in spec.statements}
    errors = []
    for line, value in sorted(outcomes.items()):
        found = EXPECT.search(text.split("\n")[line - 1])
        assert found is not None  # `outcomes` holds only lines where EXPECT matched
        column = found.start(1) + 1
        if line not in kinds:
            errors.append(Diagnostic(spec.path, Pos(line, column),
                                     "'# expect:' on a line with no claim or query"))
            continue
        allowed = QUERY_OUTCOMES if kinds[line] else CLAIM_OUTCOMES
        if value not in allowed:
            what = "a query" if kinds[line] else "a claim"
            errors.append(Diagnostic(spec.path, Pos(line, column),
                                     f"{what} cannot be expected '{value}' (expect one of: "
                                     f"{', '.join(allowed)})"))
    if errors:
        raise SpecError(errors, text)


def load_text(text: str, path: str, folder: Path, hold: bool = True) -> Spec:
    """Parse and validate spec text; `folder` anchors relative `load(...)` paths. A file with
    errors reports its `# expect:` comments' errors too (they are read from the text alone).
    `hold` False: each loaded matrix is read and checked, then only its shape is kept (its
    values are read again when asked for)."""
    try:
        spec = validate(parse_text(text, path), path, folder, text, hold)
    except SpecError as error:
        try:
            expectations(text, path)
        except SpecError as more:
            raise SpecError(error.diagnostics + more.diagnostics, text) from None
        raise
    outcomes, notes, slow = expectations(text, path)
    check_expectations(spec, outcomes, text)
    return replace(spec, expectations=outcomes, notes=notes, slow_lines=slow)


def activation_named(name: str) -> Activation:
    """The activation `activation NAME` declares in a block ("relu", "leaky_relu(1/100)",
    "swiglu", ...); a name the language does not know is a SpecError."""
    spec = load_text(f"block A {{ activation {name}  dim 1  width 1 }}", "<activation>",
                     Path("."))
    return spec.blocks["A"].activation


def load_file(path: Path, shown: str | None = None, hold: bool = True) -> Spec:
    """Read, parse and validate a spec file (`shown` is the path as the user gave it; `hold`
    as for `load_text`)."""
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
    return load_text(decode(data, name), name, path.parent, hold)
