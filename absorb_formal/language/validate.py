"""Semantic checks (docs/language.md, "Errors"): syntax tree → model.

Every error found is collected with its position; if there is any, the file is not decided.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from fractions import Fraction
from pathlib import Path

from ..model import activations as acts
from ..model import exactarray
from ..model.blocks import (
    NORM_KINDS,
    PLACEMENTS,
    Block,
    Claim,
    Layer,
    Matrix,
    Norm,
    Normalisation,
    Query,
    Skip,
    Spec,
    Statement,
    Vector,
)
from ..weights.arrays import ArrayError, Reread, load_array
from .errors import Diagnostic, SpecError
from .hints import did_you_mean
from .parse import keywords
from .syntax import (
    ActivationExpr,
    BlockDecl,
    ClaimDecl,
    FieldDecl,
    LoadExpr,
    MatrixLit,
    Name,
    NormExpr,
    NormSpec,
    Num,
    Pos,
    QueryDecl,
    SkipExpr,
    SpecSyntax,
    VectorLit,
    WeightDecl,
)

FAMILY_MODALITIES = ("never", "sometimes", "generically not", "always")
MATRICES = ("up", "down", "gate")
BIASES = ("up_bias", "gate_bias", "down_bias")  # docs/rules.md §8


@dataclass
class _Declared:
    pos: Pos
    concrete: bool
    dim: int | None


@dataclass
class Validator:
    path: str
    folder: Path
    hold: bool = True  # keep loaded matrices' values (else each is read again when asked for)
    errors: list[Diagnostic] = field(default_factory=list)
    declared: dict[str, _Declared] = field(default_factory=dict)

    def error(self, pos: Pos, message: str) -> None:
        self.errors.append(Diagnostic(self.path, pos, message))

    # ---- numbers ----------------------------------------------------------

    def integer(self, num: Num, what: str, least: int = 1) -> int | None:
        if num.value.denominator != 1:
            self.error(num.pos, f"{what} must be an integer, got {num.text}")
            return None
        value = int(num.value)
        if value < least:
            self.error(num.pos, f"{what} must be at least {least}, got {value}")
            return None
        return value

    # ---- blocks -----------------------------------------------------------

    def block(self, decl: BlockDecl) -> Block | None:
        name = decl.name.text
        before = len(self.errors)
        self.not_keyword(decl.name)
        fields = self.fields(decl)
        activation = self.activation(fields.get("activation"), decl)
        dim = self.size(fields, "dim", decl)
        width = self.size(fields, "width", decl)
        depth_field = fields.get("depth")
        depth = (self.integer(depth_field.value, "depth")  # type: ignore[arg-type]
                 if depth_field else 1)
        skip = self.skip(fields.get("skip"), dim)
        norm = self.normalisation(fields.get("norm"), dim)
        concrete = bool(decl.weights or decl.layers) and not _bias_only(decl)
        biased = "bias" in fields or any(w.name in BIASES for w in _all_weights(decl))
        if name in self.declared:
            first = self.declared[name].pos
            self.error(decl.name.pos, f"block '{name}' is already declared at line {first.line}")
        else:
            self.declared[name] = _Declared(decl.name.pos, concrete, dim)
        if None in (activation, dim, width, depth, skip):
            # still report their errors
            self.weights_of(decl, activation, dim, width, depth, biased)
            return None
        assert activation and dim and width and depth and skip
        layers = self.weights_of(decl, activation, dim, width, depth, biased)
        if len(self.errors) > before:
            return None
        return Block(name, activation, dim, width, depth, skip, layers, decl.pos, biased=biased,
                     norm=norm)

    # ---- norms (docs/language.md, Norms) ----------------------------------------------

    def normalisation(self, f: FieldDecl | None, dim: int | None) -> Normalisation | None:
        """The `norm` clause: its placement and one norm (two for sandwich)."""
        if f is None:
            return None
        expr = f.value
        assert isinstance(expr, NormExpr)
        placement = expr.placement.text
        if placement not in PLACEMENTS:
            hint = did_you_mean(placement, PLACEMENTS)
            self.error(expr.placement.pos, f"unknown norm placement '{placement}'"
                                           + (f": {hint}" if hint else "")
                                           + " (pre, post or sandwich)")
            return None
        wanted = 2 if placement == "sandwich" else 1
        if len(expr.norms) != wanted:
            where = expr.norms[-1].pos if expr.norms else expr.pos
            self.error(where, "a sandwich norm gives two norms, the one before the FFN and the "
                              "one on its output: 'norm sandwich rmsnorm { ... } rmsnorm "
                              "{ ... }'" if placement == "sandwich" else
                              f"a {placement}-norm gives one norm, got {len(expr.norms)} "
                              "(two are for 'sandwich')")
            return None
        norms = [self.norm(n, dim) for n in expr.norms]
        if any(n is None for n in norms):
            return None
        return Normalisation(placement, tuple(n for n in norms if n is not None))

    def norm(self, spec: NormSpec, dim: int | None) -> Norm | None:
        kind = spec.kind.text
        if kind not in NORM_KINDS:
            hint = did_you_mean(kind, NORM_KINDS)
            self.error(spec.kind.pos, f"unknown norm '{kind}'" + (f": {hint}" if hint else "")
                                      + " (layernorm or rmsnorm)")
            return None
        allowed = ("eps", "gamma", "beta") if kind == "layernorm" else ("eps", "gamma")
        seen: dict[str, Fraction | Vector | None] = {}
        before = len(self.errors)
        for item in spec.items:
            name = item.name.text
            if name not in allowed:
                hint = did_you_mean(name, allowed)
                extra = " (RMSNorm has no shift β)" if name == "beta" else ""
                self.error(item.name.pos, f"'{name}' is not a field of {kind}{extra}"
                                          + (f": {hint}" if hint else "")
                                          + f" (fields: {', '.join(allowed)})")
                continue
            if name in seen:
                self.error(item.name.pos, f"'{name}' is given twice in this {kind}")
                continue
            if name == "eps":
                if not isinstance(item.value, Num) or item.offset is not None:
                    self.error(item.pos, "write 'eps NUMBER', an exact decimal such as 1e-5")
                    continue
                if item.value.value < 0:
                    self.error(item.value.pos, f"eps must be >= 0, got {item.value.text}")
                    continue
                seen[name] = item.value.value
                continue
            if isinstance(item.value, Num):
                self.error(item.pos, f"write '{name} = [v1, v2, ...]' or '{name} = "
                                     "load(\"FILE\", \"KEY\")', one entry per dim")
                continue
            vector = self.bias(WeightDecl(name, item.value, item.pos), dim, "dim")
            if vector is not None and item.offset is not None:
                vector = tuple(v + item.offset.value for v in vector)
            seen[name] = vector
        if "eps" not in seen and len(self.errors) == before:
            self.error(spec.pos, f"this {kind} has no 'eps' (required: write its ε exactly, "
                                 "e.g. 'eps 1e-5'; the model's config.json gives it as "
                                 "layer_norm_eps, rms_norm_eps or layer_norm_epsilon)")
        if len(self.errors) > before:
            return None
        eps = seen["eps"]
        assert isinstance(eps, Fraction)
        gamma, beta = seen.get("gamma"), seen.get("beta")
        return Norm(kind, eps, gamma if isinstance(gamma, tuple) else None,
                    beta if isinstance(beta, tuple) else None)

    def fields(self, decl: BlockDecl) -> dict[str, FieldDecl]:
        seen: dict[str, FieldDecl] = {}
        for f in decl.fields:
            if f.name in seen:
                self.error(f.pos, f"'{f.name}' is given twice in block '{decl.name.text}' "
                                  f"(first at line {seen[f.name].pos.line})")
            else:
                seen[f.name] = f
        return seen

    def size(self, fields: dict[str, FieldDecl], what: str, decl: BlockDecl) -> int | None:
        f = fields.get(what)
        if f is None:
            self.error(decl.name.pos, f"block '{decl.name.text}' has no '{what}' (required)")
            return None
        assert isinstance(f.value, Num)
        return self.integer(f.value, what)

    def activation(self, f: FieldDecl | None, decl: BlockDecl) -> acts.Activation | None:
        if f is None:
            self.error(decl.name.pos, f"block '{decl.name.text}' has no 'activation' (required)")
            return None
        expr = f.value
        assert isinstance(expr, ActivationExpr)
        name = expr.name.text
        if name not in acts.ALL_NAMES:
            hint = did_you_mean(name, acts.ALL_NAMES)
            self.error(expr.name.pos, f"unknown activation '{name}'"
                                      + (f": {hint}" if hint else "")
                                      + f" (known: {acts.describe_names()})")
            return None
        if expr.form == "power":
            if name != "relu":
                self.error(expr.pos, f"'{name}^k' is not an activation; only relu^k is")
                return None
            k = self.integer(expr.args[0], "the power k of relu^k")
            return acts.relu_power(k) if k is not None else None
        if expr.form == "param":
            if name != "leaky_relu":
                self.error(expr.pos, f"activation '{name}' takes no argument")
                return None
            return acts.leaky_relu(expr.args[0].value)
        if expr.form == "coeffs":
            if name != "poly":
                self.error(expr.pos, f"activation '{name}' takes no coefficient list")
                return None
            return acts.poly(tuple(a.value for a in expr.args))
        found = acts.simple(name)
        if found is None:
            usage = {"leaky_relu": "leaky_relu(a), with slope a",
                     "poly": "poly[c0, c1, ..., cn]"}[name]
            self.error(expr.pos, f"activation '{name}' needs its argument: {usage}")
        return found

    def skip(self, f: FieldDecl | None, dim: int | None) -> Skip | None:
        if f is None:
            return Skip(dim or 0, scale=Fraction(1))
        expr = f.value
        assert isinstance(expr, SkipExpr)
        if expr.form == "identity":
            return Skip(dim or 0, scale=Fraction(1))
        if expr.form == "none":
            return Skip(dim or 0, scale=Fraction(0))
        if expr.form == "scalar":
            assert expr.scalar is not None
            return Skip(dim or 0, scale=expr.scalar.value)
        if expr.load is not None:  # a learnable skip from a weight file, any d
            matrix = self.loaded(expr.load, "skip", (dim, dim), "dim × dim")
            return Skip(dim, matrix=matrix) if matrix is not None and dim else None
        assert expr.matrix is not None
        matrix = self.literal(expr.matrix, "skip", (dim, dim), "dim × dim")
        return Skip(dim, matrix=matrix) if matrix is not None and dim else None

    # ---- weights ----------------------------------------------------------

    def weights_of(self, decl: BlockDecl, activation: acts.Activation | None, dim: int | None,
                   width: int | None, depth: int | None,
                   biased: bool = False) -> tuple[Layer, ...] | None:
        """The layers' weights, or None for a family; errors for anything incomplete."""
        if not decl.weights and not decl.layers:
            return None
        if _bias_only(decl):  # docs/rules.md §8: a family's biases are free, like its weights
            first = next(w for w in _all_weights(decl) if w.name in BIASES)
            self.error(first.pos, f"'{first.name}' gives a bias value, but block "
                                  f"'{decl.name.text}' is a family (no weight matrices): "
                                  "a family's biases are free; write just 'bias'")
            return None
        if decl.weights and decl.layers:
            self.error(decl.layers[0].pos, "give the weights either directly or in 'layer' "
                                           "sections, not both")
            return None
        if decl.weights:
            if depth is not None and depth > 1:
                self.error(decl.weights[0].pos, f"a block of depth {depth} gives its weights "
                                                "in sections 'layer 1 { ... }' to "
                                                f"'layer {depth} {{ ... }}'")
                return None
            sections = [(decl.weights, decl.pos, "block '" + decl.name.text + "'")]
        else:
            sections = self.layer_sections(decl, depth)
        layers = [self.layer(ws, pos, where, activation, dim, width, biased)
                  for ws, pos, where in sections]
        if any(layer is None for layer in layers):
            return None
        return tuple(layers)  # type: ignore[arg-type]

    def layer_sections(self, decl: BlockDecl, depth: int | None
                       ) -> list[tuple[tuple[WeightDecl, ...], Pos, str]]:
        by_number: dict[int, tuple[tuple[WeightDecl, ...], Pos, str]] = {}
        for layer in decl.layers:
            n = self.integer(layer.number, "a layer number")
            if n is None:
                continue
            if n in by_number:
                self.error(layer.pos, f"layer {n} is given twice "
                                      f"(first at line {by_number[n][1].line})")
            elif depth is not None and n > depth:
                self.error(layer.number.pos, f"layer {n} is beyond the block's depth {depth}")
            else:
                by_number[n] = (layer.weights, layer.pos, f"layer {n}")
        if depth is not None:
            missing = [n for n in range(1, depth + 1) if n not in by_number]
            if missing:
                shown = ", ".join(map(str, missing[:10])) + (" ..." if len(missing) > 10 else "")
                self.error(decl.name.pos, f"block '{decl.name.text}' of depth {depth} is "
                                          f"missing layer {shown}")
        return [by_number[n] for n in sorted(by_number)]

    def layer(self, weights: tuple[WeightDecl, ...], pos: Pos, where: str,
              activation: acts.Activation | None, dim: int | None,
              width: int | None, biased: bool = False) -> Layer | None:
        given: dict[str, WeightDecl] = {}
        for w in weights:
            if w.name in given:
                self.error(w.pos, f"'{w.name}' is given twice in {where}")
            given.setdefault(w.name, w)
        ok = True
        if activation is not None:
            for name in ("gate", "gate_bias"):
                if name in given and not activation.gated:
                    self.error(given[name].pos, f"'{name}' is only for gated activations; "
                                                f"{activation} is ungated")
                    ok = False
            needed = ["up", "down"] + (["gate"] if activation.gated else [])
            missing = [n for n in needed if n not in given]
            if missing:
                names = " and ".join(f"'{n}'" for n in missing)
                why = (f"gated activation {activation} needs 'gate'" if missing == ["gate"]
                       else "some but not all weights are given")
                self.error(pos, f"{where}: {why}: {names} missing (give every weight matrix "
                                "or none)")
                ok = False
        shapes = {"up": ((width, dim), "width × dim"), "down": ((dim, width), "dim × width"),
                  "gate": ((width, dim), "width × dim")}
        lengths = {"up_bias": (width, "one per hidden unit: width m"),
                   "gate_bias": (width, "one per hidden unit: width m"),
                   "down_bias": (dim, "one per output: dim d")}
        values: dict[str, Matrix | Vector | None] = {
            n: self.bias(w, *lengths[n]) if n in BIASES else self.weight(w, *shapes[n])
            for n, w in given.items()}
        if not ok or any(v is None for v in values.values()) or activation is None:
            return None
        return Layer(values["up"], values["down"],  # type: ignore[arg-type]
                     values.get("gate"),  # type: ignore[arg-type]
                     **self.biases(values, activation, dim, width, biased))

    @staticmethod
    def biases(values: dict[str, Matrix | Vector | None], activation: acts.Activation,
               dim: int | None, width: int | None, biased: bool) -> dict[str, Vector | None]:
        """A biased block's bias vectors, 0 where none is given (docs/rules.md §8); else None."""
        if not biased or dim is None or width is None:
            return {}
        sizes = {"up_bias": width, "down_bias": dim}
        if activation.gated:
            sizes["gate_bias"] = width
        zero = Fraction(0)
        return {n: values.get(n) or (zero,) * size  # type: ignore[misc]
                for n, size in sizes.items()}

    def weight(self, w: WeightDecl, shape: tuple[int | None, int | None],
               described: str) -> Matrix | None:
        if isinstance(w.value, LoadExpr):
            return self.loaded(w.value, w.name, shape, described)
        if isinstance(w.value, VectorLit):
            self.error(w.value.pos, f"'{w.name}' is a matrix: write its rows "
                                    f"[[...], [...]], got a vector of {len(w.value.values)} "
                                    "entries")
            return None
        return self.literal(w.value, w.name, shape, described)

    def literal(self, lit: MatrixLit, what: str, shape: tuple[int | None, int | None],
                described: str) -> Matrix | None:
        width = len(lit.rows[0])
        for i, (row, pos) in enumerate(zip(lit.rows, lit.row_pos, strict=True)):
            if len(row) != width:
                self.error(pos, f"ragged rows in '{what}': row {i + 1} has {len(row)} "
                                f"entries, row 1 has {width}")
                return None
        rows = [[n.value for n in row] for row in lit.rows]
        if lit.transpose:
            rows = [list(column) for column in zip(*rows, strict=True)]
        got = (len(rows), len(rows[0]))
        if not self.shape_ok(got, shape, what, described, lit.pos, transposed=lit.transpose):
            return None
        return Matrix(rows)

    def loaded(self, expr: LoadExpr, what: str, shape: tuple[int | None, int | None],
               described: str) -> Matrix | None:
        try:
            array = load_array(self.folder / expr.file, expr.key)
        except ArrayError as error:
            self.error(expr.pos, str(error))
            return None
        if expr.transpose:  # a view: exact readers read any layout
            array = array.T
        got = (int(array.shape[0]), int(array.shape[1]))
        if not self.shape_ok(got, shape, what, described, expr.pos,
                             source=f" (array {expr.key!r} in {expr.file!r})",
                             transposed=expr.transpose):
            return None
        if not self.hold:
            return Matrix(lazy=Reread.of(self.folder / expr.file, expr.key, array))
        return Matrix(lazy=array)

    def shape_ok(self, got: tuple[int, int], want: tuple[int | None, int | None], what: str,
                 described: str, pos: Pos, source: str = "", transposed: bool = False) -> bool:
        if None in want or got == want:
            return True
        hint = ""
        if (got[1], got[0]) == want:  # stored the other way round (e.g. Hugging Face Conv1D)
            hint = ("; without '.T' it fits: remove '.T'" if transposed
                    else "; its transpose fits: write '.T' after it")
        self.error(pos, f"'{what}' must be {want[0]}×{want[1]} ({described}), "
                        f"got {got[0]}×{got[1]}{source}{hint}")
        return False

    def bias(self, w: WeightDecl, length: int | None, described: str) -> Vector | None:
        """A bias vector (docs/rules.md §8): a list, or a load of a 1-D (1×n, n×1) array."""
        value = w.value
        if isinstance(value, MatrixLit):
            self.error(value.pos, f"'{w.name}' is a vector: write [v1, v2, ...], got a "
                                  f"{len(value.rows)}×{len(value.rows[0])} matrix")
            return None
        source = ""
        if isinstance(value, LoadExpr):
            try:
                array = load_array(self.folder / value.file, value.key, vector=True).array()
            except ArrayError as error:
                self.error(value.pos, str(error))
                return None
            vector = tuple(exactarray.fractions(array.reshape(1, -1))[0])
            source = f" (array {value.key!r} in {value.file!r})"
        else:
            vector = tuple(n.value for n in value.values)
        if length is not None and len(vector) != length:
            self.error(value.pos, f"'{w.name}' must have {length} entries ({described} = "
                                  f"{length}), got {len(vector)}{source}")
            return None
        return vector

    # ---- claims and queries -------------------------------------------------

    def claim(self, decl: ClaimDecl, pending: dict[str, Pos]) -> Claim | None:
        block = self.lookup(decl.block.text, decl.block.pos, pending)
        if decl.form == "equals":
            assert decl.other is not None
            other = self.lookup(decl.other.text, decl.other.pos, pending)
            if block and other:
                for name, found in ((decl.block, block), (decl.other, other)):
                    if not found.concrete:
                        self.error(name.pos, f"'equals' compares concrete blocks; "
                                             f"'{name.text}' is a family (no weights)")
                        return None
                if block.dim is not None and other.dim is not None and block.dim != other.dim:
                    self.error(decl.other.pos, f"'equals' between blocks of different dim: "
                                               f"{block.dim} and {other.dim}")
                    return None
            if block is None or other is None:
                return None
            return Claim("equals", decl.block.text, "", None, decl.other.text, None, decl.pos)
        if decl.form == "min_width":
            value = None if decl.min_width is None else self.integer(decl.min_width,
                                                                     "a width")
            if block and not block.concrete:
                self.error(decl.block.pos, f"'min width' is about a concrete block; "
                                           f"'{decl.block.text}' is a family (no weights)")
                return None
            if block is None or (decl.min_width is not None and value is None):
                return None
            return Claim("min_width", decl.block.text, "", None, None, value, decl.pos)
        width = self.integer(decl.width, "a width") if decl.width is not None else None
        family = decl.modality in FAMILY_MODALITIES
        said = " ".join(w for w in ("is", decl.modality, "absorbable") if w)
        where = decl.modality_pos or decl.pos
        if block and family and block.concrete:
            self.error(where, f"'{said}' is about families; '{decl.block.text}' is a concrete "
                              "block (its weights are given): use 'is absorbable' or "
                              "'is not absorbable'")
            return None
        if block and not family and not block.concrete:
            self.error(where, f"'{said}' is about a concrete block; '{decl.block.text}' is a "
                              "family (no weights): use never, sometimes, generically not "
                              "or always")
            return None
        if block is None or (decl.width is not None and width is None):
            return None
        kind = "family" if family else "absorbable"
        return Claim(kind, decl.block.text, decl.modality, width, None, None, decl.pos)

    def query(self, decl: QueryDecl, pending: dict[str, Pos]) -> Query | None:
        block = self.lookup(decl.block.text, decl.block.pos, pending)
        width = self.integer(decl.width, "a width") if decl.width is not None else None
        if block is None or (decl.width is not None and width is None):
            return None
        return Query(decl.block.text, width, decl.pos)

    def not_keyword(self, name: Name) -> bool:
        # lark's contextual lexer reads a keyword as a NAME where only a name can stand.
        if name.text in keywords():
            self.error(name.pos, f"'{name.text}' is a keyword and cannot name a block")
            return False
        return True

    def lookup(self, name: str, pos: Pos, pending: dict[str, Pos]) -> _Declared | None:
        if not self.not_keyword(Name(name, pos)):
            return None
        found = self.declared.get(name)
        if found is not None:
            return found
        if name in pending:
            self.error(pos, f"block '{name}' is used before it is declared "
                            f"(at line {pending[name].line})")
        else:
            hint = did_you_mean(name, [*self.declared, *pending])
            self.error(pos, f"no block named '{name}' is declared" + (f": {hint}" if hint else ""))
        return None


def _all_weights(decl: BlockDecl) -> list[WeightDecl]:
    return list(decl.weights) + [w for layer in decl.layers for w in layer.weights]


def _bias_only(decl: BlockDecl) -> bool:
    """Bias values but no weight matrix: a family given values it cannot have."""
    names = {w.name for w in _all_weights(decl)}
    return bool(names) and not names & set(MATRICES)


def validate(syntax: SpecSyntax, path: str, folder: Path, source: str | None = None,
             hold: bool = True) -> Spec:
    """Check a parsed spec and build its model; raise SpecError listing every error. `hold`
    False: loaded matrices keep their shapes, not their values (read again when asked for)."""
    v = Validator(path, folder, hold)
    later = {item.name.text: item.name.pos for item in syntax.items
             if isinstance(item, BlockDecl)}
    blocks: dict[str, Block] = {}
    statements: list[Statement] = []
    for item in syntax.items:
        if isinstance(item, BlockDecl):
            block = v.block(item)
            if block is not None and item.name.text not in blocks:
                blocks[item.name.text] = block
        elif isinstance(item, ClaimDecl):
            claim = v.claim(item, later)
            if claim is not None:
                statements.append(claim)
        else:
            query = v.query(item, later)
            if query is not None:
                statements.append(query)
    if v.errors:
        raise SpecError(v.errors, source)
    return Spec(path, blocks, tuple(statements))
