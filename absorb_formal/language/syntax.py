"""The syntax tree of a `.mlp` file: what was written, where, before any meaning is checked.

Every node carries the `Pos` of its first character. Numbers are already exact
`Fraction`s (docs/language.md, "Lexical rules"); everything else (integer fields, shapes,
names) is checked by `validate.py`.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction

from ..model.position import Pos

__all__ = ["Pos"]  # re-exported: the syntax tree's positions


@dataclass(frozen=True)
class Num:
    value: Fraction
    text: str
    pos: Pos


@dataclass(frozen=True)
class Name:
    text: str
    pos: Pos


@dataclass(frozen=True)
class MatrixLit:
    rows: tuple[tuple[Num, ...], ...]
    row_pos: tuple[Pos, ...]
    pos: Pos
    transpose: bool = False  # written `[[...]].T`


@dataclass(frozen=True)
class VectorLit:
    """`[1, 2/3, -0.5]`: a bias vector (docs/rules.md §8)."""

    values: tuple[Num, ...]
    pos: Pos


@dataclass(frozen=True)
class LoadExpr:
    file: str
    key: str
    pos: Pos
    transpose: bool = False  # written `load(...).T`


@dataclass(frozen=True)
class ActivationExpr:
    """`relu`, `leaky_relu(a)`, `relu^k` or `poly[c0, ...]`: name plus its argument form."""

    name: Name
    form: str  # "named" | "param" | "power" | "coeffs"
    args: tuple[Num, ...]
    pos: Pos


@dataclass(frozen=True)
class SkipExpr:
    form: str  # "identity" | "none" | "scalar" | "matrix" | "load"
    scalar: Num | None
    matrix: MatrixLit | None
    pos: Pos
    load: LoadExpr | None = None  # `skip load("file", "key")`, optionally `.T`


@dataclass(frozen=True)
class WeightDecl:
    name: str  # "up" | "down" | "gate" | "up_bias" | "gate_bias" | "down_bias"
    value: MatrixLit | VectorLit | LoadExpr
    pos: Pos


@dataclass(frozen=True)
class LayerDecl:
    number: Num
    weights: tuple[WeightDecl, ...]
    pos: Pos


@dataclass(frozen=True)
class NormItem:
    """`eps 1e-5` (a number) or `gamma = VECTOR-OR-LOAD [+ NUMBER]` inside a norm."""

    name: Name
    value: Num | VectorLit | LoadExpr
    offset: Num | None
    pos: Pos


@dataclass(frozen=True)
class NormSpec:
    """`layernorm { ... }` or `rmsnorm { ... }`."""

    kind: Name
    items: tuple[NormItem, ...]
    pos: Pos


@dataclass(frozen=True)
class NormExpr:
    """`norm PLACEMENT NORM [NORM]`: the placement word and one or two norms."""

    placement: Name
    norms: tuple[NormSpec, ...]
    pos: Pos


@dataclass(frozen=True)
class FieldDecl:
    """`activation`, `dim`, `width`, `depth`, `skip` or `norm` with its value, or `bias`
    (None)."""

    name: str
    value: ActivationExpr | SkipExpr | Num | NormExpr | None
    pos: Pos


@dataclass(frozen=True)
class BlockDecl:
    name: Name
    fields: tuple[FieldDecl, ...]
    weights: tuple[WeightDecl, ...]
    layers: tuple[LayerDecl, ...]
    pos: Pos


@dataclass(frozen=True)
class ClaimDecl:
    """A claim; `form` is "absorbable", "equals" or "min_width"."""

    form: str
    block: Name
    modality: str  # "", "not", "never", "sometimes", "generically not", "always"
    modality_pos: Pos | None
    other: Name | None
    width: Num | None
    min_width: Num | None  # None with form "min_width" means `none`
    pos: Pos


@dataclass(frozen=True)
class QueryDecl:
    block: Name
    width: Num | None
    pos: Pos


Item = BlockDecl | ClaimDecl | QueryDecl


@dataclass(frozen=True)
class SpecSyntax:
    items: tuple[Item, ...]
