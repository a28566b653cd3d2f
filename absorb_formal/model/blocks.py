"""The exact block model (docs/rules.md §1): blocks, claims and queries, each with its position.

Ungated layer: `x ↦ S x + D σ(U x)`; gated: `x ↦ S x + D (σ(G x) ⊙ U x)`. With biases
(docs/rules.md §8): `S x + D σ(U x + b) + c`, gated `S x + D (σ(G x + g) ⊙ (U x + b)) + c`.
A block of depth L is the composition of its L layers, all with the same σ, S, d and m.
Weights are exact rationals (`Matrix`); a skip is kept as `c·I` when it is one, so that a
family with `dim 1000000` never materialises a d×d matrix.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from types import SimpleNamespace
from typing import Any, Protocol

import numpy as np

from . import exactarray, linalg
from .activations import Activation
from .position import Pos

Vector = tuple[Fraction, ...]


class LazyArray(Protocol):
    """A loaded array whose values are produced when first asked for (`language.arrays`)."""

    @property
    def shape(self) -> tuple[int, ...]: ...

    def array(self) -> np.ndarray: ...


class Matrix:
    """An immutable exact rational matrix, from literal rows or from a loaded array.

    A loaded float array is exact as it stands (every float is a dyadic rational), so it is
    kept as an array and turned into `Fraction`s only when exact work asks for them. A lazy
    one (`lazy`) is not even widened (bfloat16 → float32) until a value is asked for: a rule
    that reads no weight reads only its shape.
    """

    __slots__ = ("shape", "_rows", "_given", "_lazy", "__dict__")

    def __init__(self, rows: Sequence[Sequence[Fraction]] | None = None,
                 array: np.ndarray | None = None, lazy: LazyArray | None = None):
        self._lazy = lazy
        self._given = array
        if rows is not None:
            # Coerce: an int or float entry would turn later divisions into float arithmetic.
            self._rows: tuple[Vector, ...] | None = tuple(
                tuple(v if type(v) is Fraction else _exact(v) for v in r) for r in rows)
            self.shape = (len(self._rows), len(self._rows[0]) if self._rows else 0)
        else:
            shape = lazy.shape if lazy is not None else None if array is None else array.shape
            assert shape is not None and len(shape) == 2
            self._rows = None
            self.shape = (int(shape[0]), int(shape[1]))

    @property
    def _array(self) -> np.ndarray | None:
        """The loaded values (None for literal rows), produced once from a lazy array."""
        if self._lazy is not None:
            self._given, self._lazy = self._lazy.array(), None
        return self._given

    @property
    def loaded(self) -> np.ndarray | None:
        """The loaded array as its values (None for literal rows), for exact comparisons."""
        return self._array

    @functools.cached_property
    def rows(self) -> tuple[Vector, ...]:
        """The exact entries, row by row (a loaded array: the rationals its bits denote)."""
        if self._rows is not None:
            return self._rows
        assert self._array is not None
        return tuple(tuple(row) for row in exactarray.fractions(self._array))

    def exact_column(self, j: int) -> Vector:
        """Column j exactly, without converting the rest of a loaded array."""
        if self._array is None:
            return self.column(j)
        return tuple(row[0] for row in exactarray.fractions(self._array[:, j:j + 1]))

    def exact_row(self, i: int) -> Vector:
        """Row i exactly, without converting the rest of a loaded array."""
        if self._array is None:
            return self.rows[i]
        return tuple(exactarray.fractions(self._array[i:i + 1, :])[0])

    def residues(self, rows: Sequence[int], cols: Sequence[int], p: int) -> np.ndarray | None:
        """The submatrix rows × cols mod p (int64), from the exact values; None when p divides
        a denominator. Exact work on large blocks reads only this (docs/certificates.md,
        modular functional)."""
        if self._array is not None:
            rows, cols = list(rows), list(cols)
            whole = len(rows) == self.shape[0] and rows == list(range(self.shape[0]))
            if whole and cols == list(range(self.shape[1])):
                return exactarray.residues(self._array, p)  # no copy of the whole array
            return exactarray.residues(self._array[np.ix_(rows, cols)], p)
        grid = [[linalg.residue(self.rows[r][c], p) for c in cols] for r in rows]
        if any(v is None for row in grid for v in row):
            return None
        return np.array(grid, dtype=np.int64).reshape(len(rows), len(cols))

    def nonzero(self) -> np.ndarray:
        """Which entries are exactly non-zero (bool; a float is 0 exactly when it compares equal
        to 0, so a loaded array needs no conversion)."""
        if self._array is not None:
            return np.asarray(self._array != 0)
        return np.array([[v != 0 for v in r] for r in self.rows], dtype=bool).reshape(self.shape)

    @functools.cached_property
    def floats(self) -> np.ndarray:
        """The entries as float64, rounded where a rational has no float64 (0.3, long double,
        integers beyond 2^53): for the numeric cross-checks only, never for a verdict."""
        if self._array is not None and self._array.dtype == np.float64:
            return self._array
        if self._array is not None:
            return self._array.astype(np.float64)
        return np.array([[float(v) for v in row] for row in self.rows], dtype=np.float64)

    def column(self, j: int) -> Vector:
        return tuple(row[j] for row in self.rows)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Matrix) and self.shape == other.shape and self.rows == other.rows

    def __hash__(self) -> int:
        return hash(self.rows)

    def __repr__(self) -> str:
        return f"Matrix({[[str(v) for v in row] for row in self.rows]})"

    def as_json(self) -> list[list[str]]:
        return [[str(v) for v in row] for row in self.rows]

    def centred(self) -> Matrix:
        """Π M, Π = I − 11ᵀ/d (each column minus its mean), read lazily from M's exact
        values (`ProjectedMatrix`): the projected block of a post-norm sublayer."""
        return ProjectedMatrix(self)


class ProjectedMatrix(Matrix):
    """Π D for a d × m matrix D, without materialising it: residues, columns, rows and the
    non-zero pattern are derived exactly from D's own (a loaded D stays a loaded array)."""

    def __init__(self, base: Matrix):
        self.base = base
        self.shape = base.shape
        self._rows, self._given, self._lazy = None, None, None

    @functools.cached_property
    def _integers(self) -> tuple[np.ndarray, int]:
        from ..checker.kernel.integers import integers  # the kernel's exact integer view

        return integers(exact_parts(self.base))

    @functools.cached_property
    def means(self) -> list[Fraction]:
        ints, den = self._integers
        return [Fraction(int(v), den * self.shape[0]) for v in ints.sum(axis=0)]

    @functools.cached_property
    def rows(self) -> tuple[tuple[Fraction, ...], ...]:  # type: ignore[override]
        return tuple(self.exact_row(i) for i in range(self.shape[0]))

    def exact_row(self, i: int) -> tuple[Fraction, ...]:
        return tuple(v - mu for v, mu in zip(self.base.exact_row(i), self.means, strict=True))

    def exact_column(self, j: int) -> tuple[Fraction, ...]:
        col = self.base.exact_column(j)
        mean = sum(col, Fraction(0)) / len(col)
        return tuple(v - mean for v in col)

    def column(self, j: int) -> tuple[Fraction, ...]:
        return self.exact_column(j)

    def residues(self, rows: Any, cols: Any, p: int) -> np.ndarray | None:
        d = self.shape[0]
        if d % p == 0:
            return None
        cols = list(cols)
        whole = self.base.residues(range(d), cols, p)
        if whole is None:
            return None
        sums = whole.sum(axis=0) % p  # d·p < 2^63
        return ((whole - sums * pow(d, -1, p) % p) % p)[list(rows)]

    def nonzero(self) -> np.ndarray:
        ints, _ = self._integers
        return ((ints * self.shape[0] - ints.sum(axis=0)) != 0).astype(bool)

    @functools.cached_property
    def floats(self) -> np.ndarray:  # type: ignore[override]
        base = self.base.floats
        return base - base.mean(axis=0)


def exact_parts(matrix: Matrix) -> Any:
    """A matrix as the kernel reads it exactly: a loaded array as its (sign, magnitude,
    exponent) parts, read by `exactarray.parts` without rounding (integers as they stand);
    literal rows as their exact entries, in text."""
    loaded = matrix.loaded
    if loaded is None:
        return [[str(v) for v in row] for row in matrix.rows]
    if loaded.dtype.kind in "iub":
        values = loaded.astype(object)
        return SimpleNamespace(neg=values < 0, mag=np.abs(values), exp=np.zeros(loaded.shape,
                                                                                 np.int64))
    mantissa, exponent = exactarray.parts(loaded)
    return SimpleNamespace(neg=mantissa < 0, mag=np.abs(mantissa), exp=exponent)


def _exact(value: object) -> Fraction:
    if isinstance(value, bool) or not isinstance(value, int | Fraction | float):
        raise TypeError(f"matrix entries must be rationals, got {type(value).__name__}")
    return Fraction(value)


@dataclass(frozen=True)
class Skip:
    """The skip S: `c·I` (identity: c = 1, none: c = 0) or an explicit d×d matrix."""

    dim: int
    scale: Fraction | None = None
    matrix: Matrix | None = None

    @property
    def is_zero(self) -> bool:
        if self.matrix is None:
            return self.scale == 0
        return all(v == 0 for row in self.matrix.rows for v in row)

    @property
    def is_identity(self) -> bool:
        return self.matrix is None and self.scale == 1

    def rows(self) -> tuple[Vector, ...]:
        """S as exact rows (materialises c·I: only for concrete work)."""
        if self.matrix is not None:
            return self.matrix.rows
        c, zero = self.scale or Fraction(0), Fraction(0)
        return tuple(tuple(c if i == j else zero for j in range(self.dim))
                     for i in range(self.dim))

    def apply(self, x: Vector) -> Vector:
        if self.matrix is None:
            c = self.scale or Fraction(0)
            return tuple(c * v for v in x)
        return matvec(self.matrix.rows, x)

    def apply_float(self, x: np.ndarray) -> np.ndarray:
        """S x for a batch of points, x of shape (N, d)."""
        if self.matrix is None:
            return float(self.scale or 0) * x
        return x @ self.matrix.floats.T

    def describe(self) -> str:
        if self.matrix is not None:
            return "[" + ", ".join("[" + ", ".join(map(str, r)) + "]"
                                   for r in self.matrix.rows) + "]"
        if self.scale == 1:
            return "identity"
        if self.scale == 0:
            return "none"
        return str(self.scale)

    def as_json(self) -> Any:
        if self.matrix is not None:
            return self.matrix.as_json()
        return {"identity": "identity", "none": "none"}.get(self.describe(), str(self.scale))


@dataclass(frozen=True)
class Layer:
    """One layer's weights: up (m×d), down (d×m) and, when gated, gate (m×d).

    Biases (docs/rules.md §8): up_bias b (m), gate_bias g (m, gated only), down_bias c (d); all
    None in a bias-free block, all present (zeros where the spec gives none) in a biased one.
    """

    up: Matrix
    down: Matrix
    gate: Matrix | None = None
    up_bias: Vector | None = None
    gate_bias: Vector | None = None
    down_bias: Vector | None = None


NORM_KINDS = ("layernorm", "rmsnorm")
PLACEMENTS = ("pre", "post", "sandwich")


@dataclass(frozen=True)
class Norm:
    """One normalisation (docs/rules.md, Normalised sublayers): RMSNorm
    `γ ⊙ x / sqrt(‖x‖²/d + ε)`, LayerNorm `γ ⊙ Πx / sqrt(‖Πx‖²/d + ε) + β` with
    `Π = I − 11ᵀ/d`. gamma None: all ones; beta None: zeros (always None for RMSNorm)."""

    kind: str
    eps: Fraction
    gamma: Vector | None = None
    beta: Vector | None = None

    def describe(self) -> str:
        return f"{self.kind} (eps {self.eps})"

    def apply_float(self, x: np.ndarray) -> np.ndarray:
        """N at a batch of points (N, d), in float64 (numeric cross-checks only)."""
        d = x.shape[1]
        centred = x - x.mean(axis=1, keepdims=True) if self.kind == "layernorm" else x
        rho = np.sqrt((centred ** 2).sum(axis=1, keepdims=True) / d + float(self.eps))
        out = centred / rho
        if self.gamma is not None:
            out = out * np.array([float(g) for g in self.gamma])
        if self.beta is not None:
            out = out + np.array([float(b) for b in self.beta])
        return out


@dataclass(frozen=True)
class Normalisation:
    """Where the norm sits beside the FFN F: "pre" `S x + F(N(x))`, "post" `N(S x + F(x))`,
    "sandwich" `S x + N₂(F(N₁(x)))`; `norms` is (N,) or, for sandwich, (N₁, N₂)."""

    placement: str
    norms: tuple[Norm, ...]

    def describe(self) -> str:
        return f"{self.placement}-norm " + " then ".join(n.describe() for n in self.norms)


@dataclass(frozen=True)
class Block:
    """A block `B_L ∘ … ∘ B_1`; `layers` is None for a family (weights not given).

    With `norm` (docs/rules.md, Normalised sublayers) the block denotes the sublayer the
    model computes (pre-, post- or sandwich-norm), and claims about it mean the sublayer;
    `bare()` is the block `S x + F(x)` without it, the paper's question."""

    name: str
    activation: Activation
    dim: int
    width: int
    depth: int
    skip: Skip
    layers: tuple[Layer, ...] | None
    pos: Pos
    # docs/rules.md §8: declared `bias` or given a bias value; compared with biased plain blocks.
    biased: bool = False
    norm: Normalisation | None = None

    def bare(self) -> Block:
        """The block without its norm clause: `S x + F(x)`."""
        from dataclasses import replace

        return replace(self, norm=None)

    @property
    def is_concrete(self) -> bool:
        return self.layers is not None

    @property
    def is_plain(self) -> bool:
        return self.skip.is_zero

    def evaluate_exact(self, x: Sequence[Fraction]) -> Vector:
        """B(x) in exact arithmetic; needs a rational-valued activation (docs/rules.md §1)."""
        if not self.activation.is_rational:
            raise ValueError(f"{self.activation} is not rational on Q: use evaluate()")
        assert self.layers is not None, "a family has no values"
        value = tuple(Fraction(v) for v in x)
        for layer in self.layers:
            value = self._layer_exact(layer, value)
        return value

    def _layer_exact(self, layer: Layer, x: Vector) -> Vector:
        sigma = self.activation.scalar.exact
        pre = _shifted(matvec(layer.up.rows, x), layer.up_bias)
        if layer.gate is None:
            hidden = [sigma(h) for h in pre]
        else:
            gate = _shifted(matvec(layer.gate.rows, x), layer.gate_bias)
            hidden = [sigma(g) * h for g, h in zip(gate, pre, strict=True)]
        out = _shifted(matvec(layer.down.rows, hidden), layer.down_bias)
        return tuple(s + o for s, o in zip(self.skip.apply(x), out, strict=True))

    def evaluate(self, points: np.ndarray) -> np.ndarray:
        """B at a batch of points (shape (N, d)) in float64, for every activation; with a
        norm clause, the sublayer the model computes."""
        assert self.layers is not None, "a family has no values"
        x = np.asarray(points, dtype=np.float64)
        if self.norm is not None:
            norms = self.norm.norms
            if self.norm.placement == "post":
                return norms[0].apply_float(self.bare().evaluate(x))
            branch = self.bare().evaluate(norms[0].apply_float(x)) - self.skip.apply_float(
                norms[0].apply_float(x))
            if self.norm.placement == "sandwich":
                branch = norms[1].apply_float(branch)
            return self.skip.apply_float(x) + branch
        sigma = self.activation.scalar.numpy

        def _plus(values: np.ndarray, bias: Vector | None) -> np.ndarray:
            # + bias in float64 (docs/rules.md §8); no bias: values untouched, bytes as before
            if bias is None:
                return values
            return values + np.array([float(b) for b in bias], dtype=np.float64)

        for layer in self.layers:
            pre = _plus(x @ layer.up.floats.T, layer.up_bias)
            hidden = sigma(pre) if layer.gate is None else (
                sigma(_plus(x @ layer.gate.floats.T, layer.gate_bias)) * pre)
            x = self.skip.apply_float(x) + _plus(hidden @ layer.down.floats.T, layer.down_bias)
        return x


def _shifted(values: Vector, bias: Vector | None) -> Vector:
    """values + bias (a bias-free layer: values unchanged)."""
    if bias is None:
        return values
    return tuple(v + b for v, b in zip(values, bias, strict=True))



def matvec(rows: Sequence[Sequence[Fraction]], x: Sequence[Fraction]) -> Vector:
    return tuple(sum((a * b for a, b in zip(row, x, strict=True)), Fraction(0)) for row in rows)


@dataclass(frozen=True)
class Claim:
    """A claim with its expectation.

    kind: "absorbable" (modality "" or "not": concrete blocks), "family" (modality "never",
    "sometimes", "generically not", "always"), "equals", or "min_width".
    """

    kind: str
    block: str
    modality: str
    width: int | None
    other: str | None
    min_width: int | None  # with kind "min_width": None means `none`
    pos: Pos

    @property
    def statement(self) -> str:
        """The claim as written, normalised: `R is not absorbable at width 50`."""
        if self.kind == "equals":
            return f"{self.block} equals {self.other}"
        if self.kind == "min_width":
            value = "none" if self.min_width is None else str(self.min_width)
            return f"min width of {self.block} is {value}"
        words = " ".join(w for w in ("is", self.modality, "absorbable") if w)
        at = f" at width {self.width}" if self.width is not None else ""
        return f"{self.block} {words}{at}"


@dataclass(frozen=True)
class Query:
    block: str
    width: int | None
    pos: Pos

    @property
    def statement(self) -> str:
        at = f" at width {self.width}" if self.width is not None else ""
        return f"query {self.block}{at}"


Statement = Claim | Query


@dataclass(frozen=True)
class Spec:
    """A validated spec file: its blocks by name and its claims/queries in order."""

    path: str
    blocks: dict[str, Block]
    statements: tuple[Statement, ...]
    expectations: dict[int, str] = field(default_factory=dict)
    notes: dict[int, str] = field(default_factory=dict)  # text after `# expect: OUTCOME`
    slow_lines: frozenset[int] = frozenset()  # lines whose comment says `slow`

    def expected(self, statement: Statement) -> str:
        """The outcome a statement's line asks for (`# expect: refuted`); default: proved for
        claims, decided for queries."""
        default = "decided" if isinstance(statement, Query) else "proved"
        return self.expectations.get(statement.pos.line, default)


MAX_EXACT_WEIGHTS = 250_000  # beyond this, only rules that read no weight are tried


def weight_count(block: Block) -> int:
    """The weights a concrete block holds (up, gate, down of every layer, and a matrix skip):
    what the exact-work limit counts, and what a certificate document embeds or names."""
    per_layer = block.dim * block.width * (3 if block.activation.gated else 2)
    skip = block.dim * block.dim if block.skip.matrix is not None else 0
    return block.depth * per_layer + skip
