"""Text to syntax tree: the lark grammar (package data) and one Transformer.

Lark's own exceptions never escape: every failure becomes a positioned `SpecError`.
"""

from __future__ import annotations

import contextlib
import functools
import io
from dataclasses import replace
from fractions import Fraction
from typing import Any

from lark import Lark, Token, Transformer, v_args
from lark.exceptions import (
    LarkError,
    UnexpectedCharacters,
    UnexpectedEOF,
    UnexpectedInput,
    UnexpectedToken,
    VisitError,
)

from ..model import diskcache
from .errors import Diagnostic, SpecError
from .hints import character_hint, did_you_mean, open_sections, unclosed, written_elsewhere
from .numbers import NumberError, parse_rational
from .syntax import (
    ActivationExpr,
    BlockDecl,
    ClaimDecl,
    FieldDecl,
    LayerDecl,
    LoadExpr,
    MatrixLit,
    Name,
    NormExpr,
    NormItem,
    NormSpec,
    Num,
    Pos,
    QueryDecl,
    SkipExpr,
    SpecSyntax,
    VectorLit,
    WeightDecl,
)


@functools.cache
def parser() -> Lark:
    """The LALR parser, built once per process from `grammar.lark`; its tables are kept on
    disk (`model/diskcache.py`) under the grammar's, this module's and lark's version. Lark reads
    them with pickle, which runs what the file says: only an entry signed under the user's
    secret is loaded (`diskcache.read_signed`); any other is rebuilt."""
    entry = diskcache.entry("lark", diskcache.code_key(
        "language/grammar.lark", "language/parse.py", libraries=("lark",)) + ".cache")
    stored = None if entry is None else diskcache.read_signed(entry)
    if stored is not None:
        with contextlib.suppress(Exception):  # our own entry, yet unreadable: rebuilt
            return Lark.load(io.BytesIO(stored))
    built = Lark.open_from_package(
        "absorb_formal.language",
        "grammar.lark",
        parser="lalr",
        strict=True,
        propagate_positions=True,
        maybe_placeholders=False,
    )
    if entry is not None:
        tables = io.BytesIO()
        built.save(tables)
        diskcache.write_signed(entry, tables.getvalue())
    return built


@functools.cache
def keywords() -> frozenset[str]:
    """The grammar's reserved words (its string terminals that look like names)."""
    return frozenset(t.pattern.value for t in parser().terminals
                     if t.pattern.type == "str" and t.pattern.value.isidentifier())


def _pos(item: Any) -> Pos:
    return Pos(item.line, item.column)


class _NumberAt(Exception):
    def __init__(self, token: Token, message: str):
        super().__init__(message)
        self.token = token
        self.message = message


@v_args(meta=True)
class ToSyntax(Transformer):
    """Builds the frozen dataclasses of `syntax.py`, one method per grammar rule."""

    def __default_token__(self, token: Token) -> Token:
        return token

    # Terminal callbacks get the token alone (v_args does not apply to them).
    def NUMBER(self, token: Token) -> Num:  # noqa: N802 - lark names callbacks after terminals
        try:
            value: Fraction = parse_rational(str(token))
        except NumberError as error:
            raise _NumberAt(token, str(error)) from None
        return Num(value, str(token), _pos(token))

    def NAME(self, token: Token) -> Name:  # noqa: N802
        return Name(str(token), _pos(token))

    def start(self, meta: Any, items: list[Any]) -> SpecSyntax:
        return SpecSyntax(tuple(items))

    def block(self, meta: Any, children: list[Any]) -> BlockDecl:
        name, *rest = children
        fields = tuple(c for c in rest if isinstance(c, FieldDecl))
        weights = tuple(c for c in rest if isinstance(c, WeightDecl))
        layers = tuple(c for c in rest if isinstance(c, LayerDecl))
        return BlockDecl(name, fields, weights, layers, _pos(meta))

    def activation_field(self, meta: Any, children: list[Any]) -> FieldDecl:
        return FieldDecl("activation", children[0], _pos(meta))

    def dim_field(self, meta: Any, children: list[Any]) -> FieldDecl:
        return FieldDecl("dim", children[0], _pos(meta))

    def width_field(self, meta: Any, children: list[Any]) -> FieldDecl:
        return FieldDecl("width", children[1], _pos(meta))

    def depth_field(self, meta: Any, children: list[Any]) -> FieldDecl:
        return FieldDecl("depth", children[0], _pos(meta))

    def skip_field(self, meta: Any, children: list[Any]) -> FieldDecl:
        return FieldDecl("skip", children[0], _pos(meta))

    def _activation(self, form: str, meta: Any, children: list[Any]) -> ActivationExpr:
        head, *args = children
        name = head if isinstance(head, Name) else Name(str(head), _pos(head))
        return ActivationExpr(name, form, tuple(args), _pos(meta))

    def act_named(self, meta: Any, children: list[Any]) -> ActivationExpr:
        return self._activation("named", meta, children)

    def act_param(self, meta: Any, children: list[Any]) -> ActivationExpr:
        return self._activation("param", meta, children)

    def act_power(self, meta: Any, children: list[Any]) -> ActivationExpr:
        return self._activation("power", meta, children)

    def act_coeffs(self, meta: Any, children: list[Any]) -> ActivationExpr:
        return self._activation("coeffs", meta, children)

    def bias_field(self, meta: Any, children: list[Any]) -> FieldDecl:
        return FieldDecl("bias", None, _pos(meta))

    def norm_field(self, meta: Any, children: list[Any]) -> FieldDecl:
        _, placement, *norms = children
        return FieldDecl("norm", NormExpr(placement, tuple(norms), _pos(meta)), _pos(meta))

    def norm_spec(self, meta: Any, children: list[Any]) -> NormSpec:
        kind, *items = children
        return NormSpec(kind, tuple(items), _pos(meta))

    def norm_number(self, meta: Any, children: list[Any]) -> NormItem:
        return NormItem(children[0], children[1], None, _pos(meta))

    def norm_vector(self, meta: Any, children: list[Any]) -> NormItem:
        name, value, *offset = children
        return NormItem(name, value, offset[0] if offset else None, _pos(meta))

    def skip_identity(self, meta: Any, children: list[Any]) -> SkipExpr:
        return SkipExpr("identity", None, None, _pos(meta))

    def skip_none(self, meta: Any, children: list[Any]) -> SkipExpr:
        return SkipExpr("none", None, None, _pos(meta))

    def skip_scalar(self, meta: Any, children: list[Any]) -> SkipExpr:
        return SkipExpr("scalar", children[0], None, _pos(meta))

    def skip_matrix(self, meta: Any, children: list[Any]) -> SkipExpr:
        return SkipExpr("matrix", None, children[0], _pos(meta))

    def skip_load(self, meta: Any, children: list[Any]) -> SkipExpr:
        load, *transpose = children
        if transpose:  # `skip load(...).T`
            load = replace(load, transpose=True)
        return SkipExpr("load", None, None, _pos(meta), load)

    def layer(self, meta: Any, children: list[Any]) -> LayerDecl:
        number, *weights = children
        return LayerDecl(number, tuple(weights), _pos(meta))

    def weight(self, meta: Any, children: list[Any]) -> WeightDecl:
        name, value, *transpose = children
        if transpose:  # `.T` (the grammar allows it after a matrix or a load only)
            value = replace(value, transpose=True)
        return WeightDecl(str(name), value, _pos(meta))

    def vector(self, meta: Any, children: list[Any]) -> VectorLit:
        return VectorLit(tuple(children), _pos(meta))

    def matrix(self, meta: Any, children: list[Any]) -> MatrixLit:
        rows = tuple(tuple(row) for row, _ in children)
        return MatrixLit(rows, tuple(p for _, p in children), _pos(meta))

    def row(self, meta: Any, children: list[Any]) -> tuple[list[Num], Pos]:
        return children, _pos(meta)

    def load(self, meta: Any, children: list[Any]) -> LoadExpr:
        _, file, key = children
        return LoadExpr(str(file)[1:-1], str(key)[1:-1], _pos(meta))

    def claim_absorbable(self, meta: Any, children: list[Any]) -> ClaimDecl:
        block, modality, absorbable, *rest = children
        words, where = modality
        width = rest[0] if rest else None
        return ClaimDecl("absorbable", block, words, where or _pos(absorbable), None, width,
                         None, _pos(meta))

    def modality(self, meta: Any, children: list[Any]) -> tuple[str, Pos | None]:
        words = " ".join(str(t) for t in children)
        return words, (_pos(children[0]) if children else None)

    def at_width(self, meta: Any, children: list[Any]) -> Num:
        return children[1]

    def claim_equals(self, meta: Any, children: list[Any]) -> ClaimDecl:
        block, _, other = children
        return ClaimDecl("equals", block, "", None, other, None, None, _pos(meta))

    def claim_min_width(self, meta: Any, children: list[Any]) -> ClaimDecl:
        _, _, block, value = children
        number = value if isinstance(value, Num) else None
        return ClaimDecl("min_width", block, "", None, None, None, number, _pos(meta))

    def query(self, meta: Any, children: list[Any]) -> QueryDecl:
        _, block, *rest = children
        return QueryDecl(block, rest[0] if rest else None, _pos(meta))


def parse_text(text: str, path: str) -> SpecSyntax:
    """Parse spec text; raise `SpecError` with the position of the first syntax error."""
    try:
        tree = parser().parse(text)
        result: SpecSyntax = ToSyntax().transform(tree)
        return result
    except VisitError as error:
        inner = error.orig_exc
        if isinstance(inner, _NumberAt):
            diag = Diagnostic(path, _pos(inner.token), inner.message)
            raise SpecError([diag], text) from None
        raise
    except UnexpectedInput as error:
        raise SpecError([Diagnostic(path, *_describe(error, text))], text) from None
    except LarkError as error:  # pragma: no cover - lark raises UnexpectedInput for bad text
        raise SpecError([Diagnostic(path, Pos(1, 1), f"cannot parse: {error}")], text) from None


def _describe(error: UnexpectedInput, text: str) -> tuple[Pos, str]:
    """A short, user-facing message for a lark syntax error, with a hint where one helps:
    the keyword a misspelt word is close to, the look-alike character pasted for an ASCII
    one, what the language writes for another language's `**` or `.t`, the block (or
    layer) a missing '}' leaves open."""
    if isinstance(error, UnexpectedEOF):
        return _end_of(text), _at_end(text, error.expected)
    if isinstance(error, UnexpectedCharacters):
        at = error.pos_in_stream or 0
        char = text[at] if at < len(text) else ""
        return Pos(error.line, error.column), written_elsewhere(text, at) or character_hint(char)
    assert isinstance(error, UnexpectedToken)
    token = error.token
    if token.type == "$END":
        return _end_of(text), _at_end(text, error.expected)
    shown = str(token)[:40]
    expected = _expected(error.expected)
    if "RBRACE" in error.expected and str(token) in ("block", "claim", "query", "layer"):
        left_open = unclosed(text, token.start_pos or 0, str(token) == "layer")
        if left_open is not None:
            return Pos(token.line, token.column), f"{left_open}: expected '}}' before {shown!r}"
    start = token.start_pos or 0
    glued = start
    while glued > 0 and (text[glued - 1].isalnum() or text[glued - 1] == "_"):
        glued -= 1
    if glued < start and (text[glued:start] + shown).isidentifier():
        # The lexer cut a keyword off the front of a longer word (`up_bais` is `up` `_bais`):
        # the whole word, at its own column, against every keyword.
        word = text[glued:start] + shown
        hint = did_you_mean(word, keywords())
        where = Pos(token.line, token.column - (start - glued))
        return where, f"unexpected {word!r}" + (f": {hint}" if hint else "")
    hint = did_you_mean(str(token), _keywords_in(error.expected)) if shown.isidentifier() else ""
    if hint:
        return Pos(token.line, token.column), f"unexpected {shown!r}: {hint} (expected {expected})"
    return Pos(token.line, token.column), (f"unexpected {shown!r}; expected {expected}"
                                           + _norm_left_open(text, start))


NORM_KINDS = ("layernorm", "rmsnorm")


def _norm_left_open(text: str, at: int) -> str:
    """A hint when a norm clause's `{` is the likely culprit: still open at the error, or
    closed by a `}` on a later line than it opened (the block's own, most likely)."""
    closed: list[tuple[str, Pos, Pos]] = []
    stack = open_sections(text, at, closed)
    norm = [(what, where) for what, where in stack
            if what.endswith(tuple(f"'{k}'" for k in NORM_KINDS))]
    if norm:
        where = norm[-1][1]
        return (f" (the norm opened at {where.line}:{where.column} is still open: is its "
                "'}' missing?)")
    if stack and closed and closed[-1][0].endswith(tuple(f"'{k}'" for k in NORM_KINDS)) \
            and closed[-1][2].line > closed[-1][1].line:
        _, opened, shut = closed[-1]
        return (f" (the '}}' at {shut.line}:{shut.column} closed the norm opened at "
                f"{opened.line}:{opened.column}: is the norm's own '}}' missing?)")
    return ""


def _at_end(text: str, expected: Any) -> str:
    """At the end of the file: the section left open when a '}' would do, else what was
    expected (a ']' or ')' missing inside a block is not the block's fault)."""
    left_open = unclosed(text, len(text)) if "RBRACE" in expected else None
    if left_open is not None:
        return f"unexpected end of file: {left_open} (a '}}' is missing)"
    return f"unexpected end of file; expected {_expected(expected)}"


def _keywords_in(names: Any) -> list[str]:
    """The keywords among the terminals lark expected (their literal text)."""
    return [t.pattern.value for t in parser().terminals
            if t.name in names and t.pattern.type == "str" and t.pattern.value.isidentifier()]


_TERMINAL_TEXT = {
    "NAME": "a name", "NUMBER": "a number", "STRING": "a quoted string",
    "LBRACE": "'{'", "RBRACE": "'}'", "LSQB": "'['", "RSQB": "']'", "LPAR": "'('",
    "RPAR": "')'", "COMMA": "','", "EQUAL": "'='", "CIRCUMFLEX": "'^'",
    "TRANSPOSE": "'.T'", "PLUS": "'+'",
}


def _expected(names: Any) -> str:
    words = sorted({_TERMINAL_TEXT.get(n, repr(n.lower().lstrip("_"))) for n in names})
    return " or ".join(words) if len(words) <= 2 else ", ".join(words[:-1]) + " or " + words[-1]


def _end_of(text: str) -> Pos:
    lines = text.split("\n")
    return Pos(len(lines), len(lines[-1]) + 1)
