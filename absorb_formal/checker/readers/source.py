"""The checker's own reading of `.mlp` spec text (docs/language.md), independent of the prover.

It reads only what determines a block's weights — activation, dim, width, depth, skip (a
literal, or `load("file", "key")` with an optional `.T`), and
per layer `up`, `down`, `gate` (a literal or `load("file", "key")`, either with an optional `.T`)
and the bias fields `bias`, `up_bias`, `gate_bias`, `down_bias` — and the statement each
`claim` line makes. It does not re-validate the spec (the prover refuses bad specs); text it
cannot read is a `SourceError` with its line and column, never a guess.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

MAX_DIGITS, MAX_EXPONENT = 4000, 4000  # a hostile literal costs nothing (docs/language.md limits)


class SourceError(ValueError):
    """Spec text the checker's reader cannot read."""


_TOKEN = re.compile(r"""
    (?P<space>\s+|\#[^\n]*)
  | (?P<number>-?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?(/(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?)?)
  | (?P<name>[A-Za-z_][A-Za-z0-9_]*)
  | (?P<string>"[^"\\\n]*")
  | (?P<punct>[{}\[\](),=^.+])
""", re.VERBOSE)
_DECIMAL = re.compile(r"(-?)(\d*)(?:\.(\d*))?(?:[eE]([+-]?\d+))?\Z")


@dataclass(frozen=True)
class Token:
    kind: str  # number, name, string, punct, end
    text: str
    line: int
    column: int


def tokens(text: str) -> list[Token]:
    out, at, line, start = [], 0, 1, 0
    while at < len(text):
        match = _TOKEN.match(text, at)
        if match is None:
            raise SourceError(f"{line}:{at - start + 1}: unexpected character {text[at]!r}")
        kind = match.lastgroup or ""
        if kind != "space":
            out.append(Token(kind, match.group(), line, at - start + 1))
        for offset, char in enumerate(match.group()):
            if char == "\n":
                line, start = line + 1, at + offset + 1
        at = match.end()
    out.append(Token("end", "", line, at - start + 1))
    return out


def decimal(text: str) -> Fraction:
    """The exact value written: `-0.25` is -1/4, `1e-3` is 1/1000 (never a binary float)."""
    match = _DECIMAL.match(text)
    if match is None or not (match.group(2) or match.group(3)):
        raise SourceError(f"malformed number {text!r}")
    sign, whole, frac, exp = match.groups()
    frac = frac or ""
    digits = (whole + frac).lstrip("0") or "0"
    if len(digits) > MAX_DIGITS or (exp is not None and (len(exp) > 8
                                                         or abs(int(exp)) > MAX_EXPONENT)):
        raise SourceError(f"number {text[:40]!r} is too large")
    value = Fraction(int(digits)) * Fraction(10) ** ((int(exp) if exp else 0) - len(frac))
    return -value if sign else value


def number(text: str) -> Fraction:
    top, slash, bottom = text.partition("/")
    value = decimal(top)
    if not slash:
        return value
    below = decimal(bottom)
    if below == 0:
        raise SourceError("division by zero")
    return value / below


# ---- what is read --------------------------------------------------------------------------

@dataclass(frozen=True)
class Load:
    file: str  # relative to the spec's folder, as written
    key: str
    transpose: bool


Value = Load | list[Any]  # a literal: nested lists of Fractions (matrix or vector)


@dataclass(frozen=True)
class NormPart:
    """One norm of a `norm` clause: kind, ε, and γ, β as written (a literal vector or a
    load), each with the number added after `+` (0 when none)."""

    kind: str
    eps: Fraction | None
    vectors: dict[str, tuple[Value, Fraction]]


@dataclass(frozen=True)
class NormSource:
    placement: str
    parts: tuple[NormPart, ...]


@dataclass
class BlockSource:
    name: str
    line: int
    activation: tuple[str, str, list[Fraction]] = ("", "named", [])  # name, form, args
    dim: Fraction | None = None
    width: Fraction | None = None
    depth: Fraction = Fraction(1)
    skip: Any = "identity"  # "identity" | "none" | Fraction | matrix rows | Load
    bias: bool = False
    weights: dict[str, Value] = field(default_factory=dict)  # depth-1 form
    layers: dict[int, dict[str, Value]] = field(default_factory=dict)  # `layer N { ... }`
    norm: NormSource | None = None  # `norm PLACEMENT KIND { ... } [KIND { ... }]`

    def layer_list(self) -> list[dict[str, Value]] | None:
        """The layers' weights in order (None for a family)."""
        if self.weights:
            return [self.weights]
        if self.layers:
            return [self.layers[n] for n in sorted(self.layers)]
        return None


@dataclass(frozen=True)
class ClaimSource:
    """One claim as the checker reads it: kind `absorbable` (modality "" or "not"), `family`
    (never, sometimes, generically not, always), `equals` or `min_width`; `width` is the width
    written after `at width`, or None (the block's own width)."""

    kind: str
    block: str
    modality: str = ""
    width: int | None = None
    other: str | None = None
    min_width: int | None = None

    @property
    def statement(self) -> str:
        """The claim as the prover's `Claim.statement` normalises it."""
        if self.kind == "equals":
            return f"{self.block} equals {self.other}"
        if self.kind == "min_width":
            value = "none" if self.min_width is None else str(self.min_width)
            return f"min width of {self.block} is {value}"
        words = " ".join(w for w in ("is", self.modality, "absorbable") if w)
        return f"{self.block} {words}" + ("" if self.width is None
                                          else f" at width {self.width}")


@dataclass
class SpecSource:
    blocks: dict[str, BlockSource] = field(default_factory=dict)
    statements: dict[int, str] = field(default_factory=dict)  # line → normalised statement


WEIGHTS = ("up", "down", "gate", "up_bias", "gate_bias", "down_bias")
MODALITIES = ("not", "never", "sometimes", "generically", "always")
FAMILY_MODALITIES = ("never", "sometimes", "generically not", "always")


class _Reader:
    def __init__(self, text: str):
        self.tokens = tokens(text)
        self.at = 0

    @property
    def peek(self) -> Token:
        return self.tokens[self.at]

    def take(self, text: str | None = None, kind: str | None = None) -> Token:
        token = self.peek
        if (text is not None and token.text != text) or (kind is not None and token.kind != kind):
            raise SourceError(f"{token.line}:{token.column}: expected {text or kind}, "
                              f"got {token.text or 'end of file'!r}")
        self.at += 1
        return token

    def accept(self, text: str) -> bool:
        if self.peek.text == text and self.peek.kind in ("name", "punct"):
            self.at += 1
            return True
        return False

    def number(self) -> Fraction:
        return number(self.take(kind="number").text)

    def spec(self) -> SpecSource:
        out = SpecSource()
        while self.peek.kind != "end":
            head = self.take(kind="name")
            if head.text == "block":
                block = self.block(head.line)
                out.blocks[block.name] = block
            elif head.text == "claim":
                out.statements[head.line] = self.claim().statement
            elif head.text == "query":
                name = self.name()
                width = self.at_width()
                out.statements[head.line] = f"query {name}" + (
                    "" if width is None else f" at width {width}")
            else:
                raise SourceError(f"{head.line}:{head.column}: unexpected {head.text!r}")
        return out

    def name(self) -> str:
        return self.take(kind="name").text

    def block(self, line: int) -> BlockSource:
        block = BlockSource(self.name(), line)
        self.take("{")
        while not self.accept("}"):
            word = self.take(kind="name")
            if word.text == "layer":
                n = self.number()
                self.take("{")
                weights: dict[str, Value] = {}
                while not self.accept("}"):
                    self.weight(self.name(), weights)
                block.layers[int(n)] = weights
            elif word.text in WEIGHTS:
                self.weight(word.text, block.weights)
            else:
                self.field(block, word)
        return block

    def field(self, block: BlockSource, word: Token) -> None:
        if word.text == "activation":
            block.activation = self.activation()
        elif word.text in ("dim", "width", "depth"):
            setattr(block, word.text, self.number())
        elif word.text == "skip":
            if self.peek.text in ("identity", "none") and self.peek.kind == "name":
                block.skip = self.take().text
            elif self.peek.kind == "number":
                block.skip = self.number()
            elif self.accept("load"):  # a learnable skip read from a weight file
                block.skip = self.load()
            else:
                block.skip = self.literal()
        elif word.text == "bias":
            block.bias = True
        elif word.text == "norm":
            placement = self.name()
            parts = [self.norm_part()]
            if self.peek.kind == "name" and self.peek.text in ("layernorm", "rmsnorm"):
                parts.append(self.norm_part())
            block.norm = NormSource(placement, tuple(parts))
        else:
            raise SourceError(f"{word.line}:{word.column}: unexpected {word.text!r}")

    def norm_part(self) -> NormPart:
        """`KIND { eps NUMBER  gamma = VALUE [+ NUMBER]  beta = ... }`."""
        kind = self.name()
        self.take("{")
        eps: Fraction | None = None
        vectors: dict[str, tuple[Value, Fraction]] = {}
        while not self.accept("}"):
            word = self.take(kind="name")
            if word.text == "eps":
                self.accept("=")  # `eps 1e-5` or `eps = 1e-5`
                eps = self.number()
                continue
            if word.text not in ("gamma", "beta"):
                raise SourceError(f"{word.line}:{word.column}: unexpected {word.text!r}")
            self.take("=")
            value: Value = self.load() if self.accept("load") else self.literal()
            offset = self.number() if self.accept("+") else Fraction(0)
            vectors[word.text] = (value, offset)
        return NormPart(kind, eps, vectors)

    def activation(self) -> tuple[str, str, list[Fraction]]:
        name = self.name()
        if self.accept("("):
            arg = self.number()
            self.take(")")
            return name, "param", [arg]
        if self.accept("^"):
            return name, "power", [self.number()]
        if self.peek.text == "[":
            return name, "coeffs", self.literal()
        return name, "named", []

    def weight(self, name: str, into: dict[str, Value]) -> None:
        if name not in WEIGHTS:
            raise SourceError(f"unexpected weight {name!r}")
        self.take("=")
        if self.accept("load"):
            into[name] = self.load()
        else:
            value = self.literal()
            if self.accept("."):  # `[[...]].T`: a literal matrix transposed
                where = self.take("T")
                if not all(isinstance(r, list) and len(r) == len(value[0]) for r in value):
                    raise SourceError(f"{where.line}:{where.column}: '.T' needs a matrix")
                value = [list(column) for column in zip(*value, strict=True)]
            into[name] = value

    def load(self) -> Load:
        """`("file", "key")` after the word `load`, with an optional `.T`."""
        self.take("(")
        file = self.take(kind="string").text[1:-1]
        self.take(",")
        key = self.take(kind="string").text[1:-1]
        self.take(")")
        transpose = False
        if self.accept("."):
            self.take("T")
            transpose = True
        return Load(file, key, transpose)

    def literal(self) -> list[Any]:
        """`[1, 2]` or `[[1, 2], [3, 4]]` (a row is itself a literal)."""
        self.take("[")
        items = [self.literal() if self.peek.text == "[" else self.number()]
        while self.accept(","):
            items.append(self.literal() if self.peek.text == "[" else self.number())
        self.take("]")
        return items

    def at_width(self) -> int | None:
        if self.accept("at"):
            self.take("width")
            return _whole(self.number())
        return None

    def claim(self) -> ClaimSource:
        """The claim after the word `claim` (or a stored statement, which omits it)."""
        if self.accept("min"):
            self.take("width")
            self.take("of")
            name = self.name()
            self.take("is")
            value = None if self.accept("none") else _whole(self.number())
            return ClaimSource("min_width", name, min_width=value)
        name = self.name()
        if self.accept("equals"):
            return ClaimSource("equals", name, other=self.name())
        self.take("is")
        words = []
        while self.peek.text in MODALITIES:
            words.append(self.take().text)
        if words == ["generically"]:
            words.append(self.take("not").text)
        self.take("absorbable")
        modality = " ".join(words)
        if modality not in ("", "not", *FAMILY_MODALITIES):
            raise SourceError(f"unknown modality {modality!r}")
        return ClaimSource("family" if modality in FAMILY_MODALITIES else "absorbable",
                           name, modality, self.at_width())


def _whole(value: Fraction) -> int:
    if value.denominator != 1 or value < 0:
        raise SourceError(f"expected a width (a whole number), got {value}")
    return int(value)


def read_activation(text: str) -> tuple[str, str, list[Fraction]]:
    """An activation as written after `activation` (`leaky_relu(1/2)`, `relu^2`, `poly[0, 1]`),
    exactly one, nothing after it."""
    if not isinstance(text, str):
        raise SourceError("an activation name is text")
    reader = _Reader(text)
    found = reader.activation()
    if reader.peek.kind != "end":
        raise SourceError(f"{text[:40]!r} is not one activation")
    return found


def read_statement(text: str) -> ClaimSource:
    """A document's `statement` (`R is absorbable at width 6`), read as a claim; text that
    is not exactly one claim in the normal form the prover writes is a `SourceError`."""
    reader = _Reader(text)
    claim = reader.claim()
    if reader.peek.kind != "end" or claim.statement != text:
        raise SourceError(f"{text[:80]!r} is not a claim statement in normal form")
    return claim


def read_spec(text: str) -> SpecSource:
    """Every block and claim of the spec text (a `SourceError` if it cannot be read)."""
    source = _Reader(text).spec()
    for block in source.blocks.values():
        for layer in block.layer_list() or []:
            if any(n in layer for n in ("up_bias", "gate_bias", "down_bias")):
                block.bias = True
    return source


# ---- activations: the checker's own table (docs/language.md) ------------------------------------

# name → (kind of σ, gated); `square` is the polynomial z².
_SIMPLE = {"relu": ("relu", False), "abs": ("abs", False), "square": ("poly", False),
           "identity": ("identity", False), "gelu": ("gelu", False),
           "gelu_tanh": ("gelu_tanh", False), "silu": ("silu", False),
           "swish": ("silu", False), "tanh": ("tanh", False), "sigmoid": ("sigmoid", False),
           "swiglu": ("silu", True), "geglu": ("gelu", True), "reglu": ("relu", True),
           "glu": ("sigmoid", True), "bilinear": ("identity", True)}


def activation_json(act: tuple[str, str, list[Fraction]]) -> dict[str, Any]:
    """The activation as certificate documents embed it (name, kind, gated, param, power,
    coeffs), derived from the spec text alone."""
    name, form, args = act
    entry: dict[str, Any] = {"name": name, "gated": False, "param": None, "power": None,
                             "coeffs": []}
    if form == "named" and name in _SIMPLE:
        entry["kind"], entry["gated"] = _SIMPLE[name]
        if name == "square":
            entry["coeffs"] = ["0", "0", "1"]
    elif form == "param" and name == "leaky_relu":
        entry.update(name=f"leaky_relu({args[0]})", kind="leaky_relu", param=str(args[0]))
    elif form == "power" and name == "relu" and args[0].denominator == 1 and args[0] >= 1:
        k = int(args[0])
        entry.update(name="relu" if k == 1 else f"relu^{k}", kind="relu" if k == 1
                     else "relu_pow", power=None if k == 1 else k)
    elif form == "coeffs" and name == "poly":
        coeffs = list(args)
        entry["name"] = "poly[" + ", ".join(str(c) for c in coeffs) + "]"
        while len(coeffs) > 1 and coeffs[-1] == 0:
            coeffs.pop()  # σ drops trailing zero coefficients; the name keeps them
        entry.update(kind="poly", coeffs=[str(c) for c in coeffs])
    else:
        raise SourceError(f"unknown activation {name!r}")
    return entry


def skip_json(skip: Any) -> dict[str, Any]:
    """A skip written in the spec text (a loaded one is read by `reading.Reading`)."""
    if isinstance(skip, Load):
        raise SourceError("a skip loaded from a file is read with its file")
    if isinstance(skip, list):
        return {"matrix": [[str(x) for x in row] for row in skip]}
    scale = {"identity": Fraction(1), "none": Fraction(0)}.get(skip, skip)
    return {"scale": str(scale)}
