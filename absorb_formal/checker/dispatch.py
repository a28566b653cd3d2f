"""Does a certificate document support its outcome? (docs/certificates.md, kind by kind.)

`verify(doc)` re-derives everything from the embedded blocks: exact values, canonical forms,
ranks and products, sympy lemmas, and solver answers. Any gap is an `Invalid` with a reason.
"""

from __future__ import annotations

import itertools
import sys
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from .kernel import linalg as exact
from .kernel import symbolic
from .kernel.contract import Check, Invalid, Kind, require
from .kernel.linalg import Rows, q, whole
from .lemmas import relied as lemmas
from .lemmas import smt
from .readers.shape import document_problem
from .readers.source import SourceError, read_statement
from .rules import canonical as forms
from .rules import (
    doubles,
    flips,
    generic,
    integer_forms,
    modular,
    spare,
    sublayer,
    unique_subset,
)
from .rules import half_activation as half
from .rules.truths import ALWAYS, GENERICALLY_NOT, NEVER, SOMETIMES

MAX_ENUMERATION = 16
NEVER_RULES = ("T1", "T2", "T3", "T4", "T2∞")
NEVER_PROPERTIES = {"T2": "E", "T3": "Bd", "T4": "F", "T2∞": "E, H(1)"}  # T1: H(k) from k
BIASED_NEVER_RULES = ("T3", "T2∞")  # docs/rules.md §8: the never-rules that survive biases


MALFORMED: tuple[type[Exception], ...] = (KeyError, ValueError, TypeError, IndexError,
                                          ZeroDivisionError, AttributeError)




@dataclass(frozen=True)
class Verdict:
    status: str  # "valid" | "invalid" | "unchecked" (unknown outcome: nothing to check)
    reason: str = ""

    @property
    def ok(self) -> bool:
        return self.status != "invalid"


def verify(doc: Any, weights: dict[str, modular.Layers] | None = None) -> Verdict:
    """Check one document. `weights`: the exact matrices of blocks too large to embed (by
    block name), as the checker's own reader (`reading.Reading.weights`) read them from the
    files the document names; `absorb-prove check` passes them after matching the files'
    bytes against the document's SHA-256s."""
    try:
        with generic.notes() as notes:  # e.g. a refutation that rests on one solver
            verdict = _verify(doc, weights or {})
        return Verdict(verdict.status, "; ".join([verdict.reason, *notes] if verdict.reason
                                                 else notes))
    except Invalid as error:
        return Verdict("invalid", str(error))
    except MALFORMED + _sympy_errors() as e:  # sympy's: e.g. a root_of with a constant polynomial
        return Verdict("invalid", f"malformed certificate: {type(e).__name__}: {e}")
    except (RuntimeError, OverflowError, MemoryError) as e:  # a solver refusing its input
        # (OR-Tools on a coefficient beyond 64 bits), nesting too deep: nothing was verified
        return Verdict("invalid", f"not verifiable: {type(e).__name__}: {str(e)[:200]}")


def _sympy_errors() -> tuple[type[Exception], ...]:
    """sympy's polynomial errors, when sympy is loaded (unloaded, it raised none); sympy is
    imported only by the checks that use it."""
    loaded = sys.modules.get("sympy.polys.polyerrors")
    return () if loaded is None else (loaded.BasePolynomialError,)


def derive_claim(doc: dict[str, Any]) -> dict[str, Any]:
    """The claim the document's `statement` makes, as the checker reads it, with the width
    it is about (the `at width`, else the block's own width). Nothing is taken from the
    document's `claim` field: it must equal this, and only this is verified. `absorb-prove
    check` ties `statement` to the spec line it cites (`reading.Reading.stale`), and the
    embedded blocks to the spec's blocks."""
    statement = doc["statement"]
    require(isinstance(statement, str), "the statement is not text")
    try:
        said = read_statement(statement)
    except SourceError as error:
        raise Invalid(f"the statement cannot be read: {error}") from None
    names = [said.block] + ([said.other] if said.other is not None else [])
    blocks = doc["blocks"]
    require(isinstance(blocks, dict) and sorted(blocks) == sorted(set(names)),
            f"the document embeds blocks {sorted(blocks) if isinstance(blocks, dict) else []}, "
            f"the statement is about {sorted(set(names))}")
    for name, block in blocks.items():
        require(isinstance(block, dict) and block.get("name") == name,
                f"the block embedded as '{name}' is named {block.get('name')!r}"
                if isinstance(block, dict) else f"block '{name}' is not an object")
    own = blocks[said.block]["width"]
    require(type(own) is int, "the block's width is not an integer")
    require(said.width is None or said.width >= 1, "a width is at least 1")
    require(said.min_width is None or said.min_width >= 1, "a min width is at least 1")
    claim = {"kind": said.kind, "block": said.block, "other": said.other,
             "modality": said.modality, "width": own if said.width is None else said.width,
             "min_width": said.min_width}
    recorded = doc["claim"]
    if recorded != claim:
        fields = sorted(set(claim) | set(recorded if isinstance(recorded, dict) else {}))
        wrong = [f for f in fields if not isinstance(recorded, dict)
                 or recorded.get(f, Invalid) != claim.get(f, Invalid)]
        given = recorded if isinstance(recorded, dict) else {}
        raise Invalid(f"the document's claim is not the one its statement '{statement}' "
                      "makes: " + ", ".join(f"{f} {given.get(f)!r} (the statement's: "
                                            f"{claim.get(f)!r})" for f in wrong))
    return claim


def _verify(doc: Any, weights: dict[str, modular.Layers]) -> Verdict:
    problem = document_problem(doc)
    require(not problem, problem)
    # The claim comes from the statement alone; every later step reads this copy.
    doc = {**doc, "claim": derive_claim(doc)}
    claim, outcome, certificate = doc["claim"], doc["outcome"], doc["certificate"]
    if outcome == "unknown" and certificate is None:
        return Verdict("unchecked", "unknown outcome: nothing to check")
    if any("norm" in b for b in doc["blocks"].values()):  # the sublayer a model computes
        require(isinstance(certificate, dict), "a certificate is an object")
        note = sublayer.verify(doc, weights, _verify)
        return note if isinstance(note, Verdict) else Verdict("valid", note)
    if outcome == "unknown":
        return _bounds(doc, weights)
    require(outcome in ("proved", "refuted"), f"unexpected outcome {outcome!r}")
    require(isinstance(certificate, dict), "a decided outcome needs a certificate")
    proved = outcome == "proved"
    # docs/rules.md §8: with biases the paper's rules change (T1, T4 fail). A decided claim on a
    # biased block is accepted only with a certificate whose rule re-derives biases.
    require(not any(isinstance(b, dict) and b.get("bias") for b in doc["blocks"].values())
            or _bias_ok(doc),
            "blocks with biases: the checker has no rule for them yet (docs/rules.md §8)")
    block = doc["blocks"][claim["block"]]
    width = int(claim["width"])
    kind = claim["kind"]
    if kind == "absorbable":
        if proved == (claim["modality"] == ""):
            absorbable(block, width, certificate, weights.get(claim["block"]))
        else:
            _refutation(block, width, certificate, weights.get(claim["block"]))
    elif kind == "family":
        truth = family_truth(block, claim["modality"], width, certificate)
        require(truth == proved, f"the certificate shows '{claim['modality']}' is {truth}")
    elif kind == "equals":
        equal = equality(block, doc["blocks"][claim["other"]], certificate,
                         weights.get(claim["block"]), weights.get(claim["other"]))
        require(equal == proved, f"the certificate shows equality is {equal}")
    elif kind == "min_width":
        value = min_width(block, certificate, weights.get(claim["block"]))
        require((value == claim["min_width"]) == proved,
                f"the certificate shows min width {'none' if value is None else value}")
    else:
        raise Invalid(f"unknown claim kind {kind!r}")
    return Verdict("valid")


def _bias_ok(doc: dict[str, Any]) -> bool:
    """Biased blocks: only certificates of a §8 rule that the checker re-derives with biases."""
    return (_flips_ok(doc) or _keys_ok(doc["blocks"], doc["certificate"])
            or _stack_ok(doc) or _plain_ok(doc["certificate"])
            or _linear_ok(doc["certificate"])
            or _never_or_table_ok(doc["certificate"])
            or _bias_ok_generic(doc["claim"], doc["certificate"]))


def _stack_ok(doc: dict[str, Any]) -> bool:
    """A stack of per-layer certificates (docs/rules.md §8.4), alone or as the upper end of a
    min width or its bounds whose lower end is none or the §9 half-activation bound (which
    checker/rules/half_activation.py re-derives with biases, any depth): each layer's
    certificate must be one this gate accepts for a biased depth-1 block, as that layer's own
    claim."""
    cert = doc["certificate"]
    kind = cert.get("kind")
    if kind in (Kind.MINIMAL_WIDTH, Kind.MINIMAL_WIDTH_BOUNDS):
        above, below = cert["witness" if kind == Kind.MINIMAL_WIDTH else "above"], cert["below"]
        return (below is None or (isinstance(below, dict)
                                  and below.get("kind") == Kind.HALF_ACTIVATION_BOUND)) \
            and isinstance(above, dict) and _stack_ok(dict(doc, certificate=above))
    parts = cert.get("per_layer")
    claim = dict(doc["claim"], kind="absorbable", modality="")
    return (kind == Kind.WITNESS and cert.get("check") == Check.LAYERS_ABSORBED
            and isinstance(parts, list) and all(
                isinstance(part, dict) and _bias_ok(dict(doc, certificate=part, claim=claim))
                for part in parts))


def _flips_ok(doc: dict[str, Any]) -> bool:
    """Biased blocks: the claims whose certificate kind has a §8 rule here. §8.2: a flip
    witness or a subset refutation of an 'absorbable' claim; `absorbable`/`not_absorbable`
    route every §8.2 certificate to checker/rules/flips.py before any bias-free rule."""
    return doc["claim"]["kind"] == "absorbable" and _flip_part(doc["certificate"])


def _flip_part(cert: dict[str, Any] | None) -> bool:
    """A §8.2 flip witness or subset refutation (checked by checker/rules/flips.py, biases kept), or
    one at scale (checker/rules/unique_subset.py, `unique subset solution` or its flips witness)."""
    if isinstance(cert, dict) and unique_subset.flip_rule(cert):  # §8.2 at scale, key count
        return cert.get("kind") in (Kind.UNIQUE_SUBSET_SOLUTION, Kind.KEY_COUNT) or (
            cert.get("kind") == Kind.WITNESS and cert.get("check") == Check.ROWS_NEGATED)
    if not isinstance(cert, dict) or cert.get("section") != flips.SECTION:
        return False
    return cert.get("check") == Check.FLIP_IDENTITY if cert.get("kind") == Kind.WITNESS else \
        cert.get("kind") in (Kind.SUBSET_SEARCH, Kind.SEPARATING_FUNCTIONAL)


def _keys_ok(blocks: dict[str, Any], certificate: dict[str, Any]) -> bool:
    """docs/rules.md §8.1: certificates whose checks read biases — §4's canonical forms with affine
    keys and γ (witness, width search, equality) and the generic-case modular functional — for
    ungated blocks. Every other rule stays refused for biased blocks."""
    if any(b["activation"]["gated"] for b in blocks.values()):
        return False
    kind = certificate.get("kind")
    if kind == Kind.MINIMAL_WIDTH:
        return all(_keys_ok(blocks, part) for part in (certificate["witness"],
                                                        certificate["below"]) if part)
    if kind == Kind.MINIMAL_WIDTH_BOUNDS:
        return all(_keys_ok(blocks, part) for part in (certificate["above"],
                                                        certificate["below"]) if part)
    if kind == Kind.WITNESS:  # §8.1 forms, linear maps + γ (§8), stacks of them (§8.4)
        return certificate.get("check") in (Check.CANONICAL_FORMS_EQUAL, Check.SPARE_PAIRS,
                                            Check.ROWS_NEGATED, Check.DOUBLES,
                                            Check.LINEAR_MAPS_EQUAL, Check.STACK_FORMS_EQUAL)
    return kind in (Kind.SUBSET_SEARCH, Kind.CANONICAL_FORMS, Kind.LINEAR_RANK,
                    Kind.HALF_ACTIVATION_BOUND, Kind.INTEGER_CANONICAL_FORMS) + LARGE_REFUTATIONS




def _plain_ok(cert: dict[str, Any]) -> bool:
    """A plain biased block (skip none) is its own witness, biases kept (docs/rules.md §8)."""
    return cert.get("kind") == Kind.WITNESS and cert.get("check") == Check.ITSELF


def _linear_ok(cert: dict[str, Any]) -> bool:
    """docs/rules.md §8: the linear-neuron witness of a biased gated block, the square
    quadruples of a biased relu² block or the square pairs of a degree-2 polynomial σ, alone
    or as the upper end of a min width or its bounds, whose lower end is none or a §8.2 flip
    refutation at the block's own width (a §8.2 witness there may be the upper end)."""
    kind = cert.get("kind")
    if kind in (Kind.MINIMAL_WIDTH, Kind.MINIMAL_WIDTH_BOUNDS):
        above = cert["witness" if kind == Kind.MINIMAL_WIDTH else "above"]
        return ((_linear_ok(above) or _flip_part(above))
                and (cert["below"] is None or _flip_part(cert["below"])))
    return kind == Kind.WITNESS and cert.get("check") in (
        Check.LINEAR_NEURONS, Check.SQUARE_QUADRUPLES, Check.SQUARE_PAIRS)


def _never_or_table_ok(cert: dict[str, Any]) -> bool:
    """docs/rules.md §8 certificates re-derived for biased blocks (T3, T2∞, the §8.3 family table).
    Each kind's own check still rejects what does not hold with biases (T1, T2, T4)."""
    kind = cert.get("kind")
    if kind == Kind.RULE:
        return cert.get("rule") in BIASED_FAMILY_RULES
    return kind in (Kind.LEMMA_DIRECTION, Kind.PARITY_POINT_AT_INFINITY)


# docs/rules.md §8.4: the generic engine's certificates, which checker/rules/generic.py encodes
# with the comparator's biases as more unknowns (never with a box: a biased block is not
# homogeneous).
GENERIC_CHECKS = (Check.POLYNOMIAL_IDENTITY, Check.SMT_NO_DIFFERENCE)
GENERIC_REFUTATIONS = (Kind.NULLSTELLENSATZ, Kind.REAL_INFEASIBILITY, Kind.FINITE_POINT_SET)


def _bias_ok_generic(claim: dict[str, Any], cert: dict[str, Any]) -> bool:
    """A concrete absorbable / min-width claim whose every part is a generic certificate."""
    def generic_kind(part: Any) -> bool:
        return isinstance(part, dict) and (
            part.get("kind") in GENERIC_REFUTATIONS
            or (part.get("kind") == Kind.WITNESS and part.get("check") in GENERIC_CHECKS))

    if claim["kind"] == "absorbable" and claim["modality"] in ("", "not"):
        return generic_kind(cert)
    if claim["kind"] == "min_width" and cert.get("kind") == Kind.MINIMAL_WIDTH:
        return generic_kind(cert["witness"]) and (cert["below"] is None
                                                  or generic_kind(cert["below"]))
    return False



# ---- absorbable: witnesses ---------------------------------------------------------------

def absorbable(block: dict[str, Any], width: int, cert: dict[str, Any],
               layers: modular.Layers | None = None) -> None:
    """The certificate is a plain stack of width ≤ `width` equal to the block. `layers`: the
    weights of a block too large to embed, for witnesses that read them."""
    require(cert.get("kind") == Kind.WITNESS, f"expected a witness, got {cert.get('kind')!r}")
    if cert.get("check") == Check.LAYERS_ABSORBED:
        _per_layer(block, width, cert, layers)
        return
    if cert.get("check") == Check.ROWS_NEGATED and unique_subset.flip_rule(cert):
        unique_subset.check_flip_witness(block, [list(r) for r in exact.skip_rows(block)],
                                         width, _weights(block, layers), cert,
                                         flips.rule(block["activation"]))
        return
    if cert.get("check") == Check.ROWS_NEGATED:  # large blocks: J, not stored layers
        _require_generic_case(block)
        unique_subset.check_witness([list(r) for r in exact.skip_rows(block)], width,
                                    _weights(block, layers), cert, _family(block)[1])
        return
    if cert.get("check") == Check.SPARE_PAIRS:  # large blocks: a construction, not stored layers
        spare.check(block, width, cert, _family(block))
        return
    if cert.get("check") == Check.DOUBLES:  # large blocks: Δ and det U_Δ mod p, no layers
        doubles.check(block, width, cert, _family(block), _weights(block, layers))
        return
    if cert.get("check") == Check.LINEAR_NEURONS:
        spare.check_linear(block, width, cert)
        return
    if cert.get("check") == Check.SQUARE_QUADRUPLES:
        spare.check_square(block, width, cert)
        return
    if cert.get("check") == Check.SQUARE_PAIRS:
        spare.check_square_pairs(block, width, cert)
        return
    require(block["layers"] is not None, "a witness needs a concrete block")
    layers = cert["layers"]
    size = whole(cert["width"])
    require(1 <= size <= width, f"the witness has width {size}, not 1..{width}")
    require(len(layers) == block["depth"], "the witness has the wrong depth")
    check = cert["check"]
    for layer in layers:
        _layer_shapes(block, layer, size)
        if check != Check.ITSELF:  # the block itself: every field is compared with the block's
            _idle_neurons_are_zero(block["activation"], layer)
    if check == Check.FLIP_IDENTITY or cert.get("section") == flips.SECTION:
        require(check == Check.FLIP_IDENTITY, "a §8.2 witness is checked by the flip identity")
        flips.witness(block, layers[0], cert)
        return
    if check == Check.POLYNOMIAL_IDENTITY:
        require(generic.identity(block, layers), "P - B is not the zero polynomial")
        return
    if check == Check.SMT_NO_DIFFERENCE:
        generic.no_difference(block, cert)
        return
    if check == Check.ITSELF:
        _itself(block, layers)
    elif check == Check.CANONICAL_FORMS_EQUAL:
        _same_forms(block, layers, single=True)
    elif check == Check.STACK_FORMS_EQUAL:
        _same_forms(block, layers, single=False)
    elif check == Check.LINEAR_MAPS_EQUAL:
        _same_forms(block, layers, single=True)
    elif check == Check.GLU_SIGN_FLIPS:
        _glu_flip(block, layers[0], cert)
    else:
        raise Invalid(f"unknown witness check {check!r}")




def _per_layer(block: dict[str, Any], width: int, cert: dict[str, Any],
               layers: modular.Layers | None) -> None:
    """A stack (depth ≥ 2) whose every layer, alone as a depth-1 block with the block's σ,
    S and biases, is absorbed at the certificate's width by its own certificate (checked
    here as any depth-1 witness): the plain layers, padded with zero neurons, compose to a
    plain stack equal to the block (docs/rules.md "Depth (stacks)")."""
    depth = block["depth"]
    require(depth >= 2, "a stack of per-layer certificates needs depth >= 2")
    require(isinstance(block["layers"], list) and len(block["layers"]) == depth,
            "a stack of per-layer certificates needs a concrete block with embedded layers")
    size = whole(cert["width"], "width")
    require(1 <= size <= width, f"the witness has width {size}, not 1..{width}")
    parts = cert["per_layer"]
    require(isinstance(parts, list) and len(parts) == depth,
            f"per_layer holds {len(parts) if isinstance(parts, list) else 'no'} certificates "
            f"for {depth} layers")
    for n, part in enumerate(parts):
        require(isinstance(part, dict), f"per_layer[{n}] is not a certificate")
        single = dict(block, depth=1, layers=block["layers"][n:n + 1])
        try:
            absorbable(single, size, part, None if layers is None else layers[n:n + 1])
        except Invalid as error:
            raise Invalid(f"layer {n + 1}: {error}") from error


def _layer_shapes(block: dict[str, Any], layer: dict[str, Any], size: int) -> None:
    """A layer of `size` neurons for the block: its fields and every shape."""
    d = block["dim"]
    _bias_shapes(block, layer, size)
    up, down = layer["up"], layer["down"]
    require(len(up) == size and all(len(r) == d for r in up), "witness 'up' shape")
    require(len(down) == d and all(len(r) == size for r in down), "witness 'down' shape")
    if block["activation"]["gated"]:
        gate = layer["gate"]
        require(len(gate) == size and all(len(r) == d for r in gate), "witness 'gate' shape")


def _bias_shapes(block: dict[str, Any], layer: dict[str, Any], size: int) -> None:
    """A witness of a biased block carries every bias (docs/rules.md §8), of the right length;
    one of a bias-free block carries none."""
    keys = {"up", "down"} | ({"gate"} if block["activation"]["gated"] else set())
    if block.get("bias"):
        keys |= {f"{k}_bias" for k in keys}
    require(set(layer) == keys, f"witness layer fields {sorted(layer)}, expected {sorted(keys)}")
    for key in keys & {"up_bias", "gate_bias", "down_bias"}:
        length = block["dim"] if key == "down_bias" else size
        require(isinstance(layer[key], list) and len(layer[key]) == length,
                f"witness '{key}' shape")


def _idle_neurons_are_zero(act: dict[str, Any], layer: dict[str, Any]) -> None:
    """A neuron that cannot affect the output (zero down column; zero up row and up bias when
    gated or σ(0) = 0) must be all zero (its biases too): otherwise its weights would be
    fields nobody checks."""
    def nonzero(rows: list[list[Any]]) -> list[list[bool]]:  # algebraic entries are non-zero
        return [[not isinstance(v, str) or q(v) != 0 for v in row] for row in rows]

    up, down = nonzero(layer["up"]), nonzero(layer["down"])
    gate = nonzero(layer["gate"]) if "gate" in layer else None
    # §8: a neuron with u = 0 and a bias β ≠ 0 is a constant, not idle
    biases = [nonzero([layer[n]])[0] if n in layer else [False] * len(up)
              for n in ("up_bias", "gate_bias")]
    for i, u in enumerate(up):
        column = [row[i] for row in down]
        flat = not any(u) and not biases[0][i]
        idle = not any(column) or (flat and (gate is not None or lemmas.holds(act, "zero")))
        if idle:
            require(flat and not any(column) and (gate is None or not any(gate[i]))
                    and not biases[1][i], f"witness neuron {i + 1} is idle but not zero")


def _itself(block: dict[str, Any], layers: list[dict[str, Any]]) -> None:
    require(exact.skip_is_zero(block), "only a block with skip none is its own witness")
    for mine, theirs in zip(block["layers"], layers, strict=True):
        for name in ("up_bias", "gate_bias"):  # biased (docs/rules.md §8): padded with zeros
            if name in theirs:
                bias = exact.vec(mine.get(name) or ["0"] * block["width"])
                padded = exact.vec(theirs[name])
                require(padded[: len(bias)] == bias and not any(padded[len(bias):]),
                        f"padded '{name}'")
        if "down_bias" in theirs:
            require(exact.vec(theirs["down_bias"])
                    == exact.vec(mine.get("down_bias") or ["0"] * block["dim"]),
                    "the witness's 'down_bias' is not the block's")
        for name in ("up", "gate"):
            if name in mine:
                a, b = exact.mat(mine[name]), exact.mat(theirs[name])
                require(b[: len(a)] == a and exact.is_zero(b[len(a):]), f"padded '{name}'")
        a, b = exact.mat(mine["down"]), exact.mat(theirs["down"])
        m = len(a[0])
        require(all(rb[:m] == ra and not any(rb[m:]) for ra, rb in zip(a, b, strict=True)),
                "padded 'down'")


def _family(block: dict[str, Any]) -> tuple[str, Fraction, Fraction | None]:
    found = forms.family_of(block["activation"])
    require(found is not None, f"{block['activation']['name']} is neither O(a)+N nor linear "
                               "(lemmas not re-proved)")
    assert found is not None
    return found


def _same_forms(block: dict[str, Any], layers: list[dict[str, Any]], single: bool) -> None:
    require(not single or block["depth"] == 1, "canonical forms decide depth 1 only")
    family = _family(block)
    d, biased, act = block["dim"], bool(block.get("bias")), block["activation"]
    for mine, theirs in zip(block["layers"], layers, strict=True):
        want = forms.form(family, d, exact.skip_rows(block), mine, biased, act)
        got = forms.form(family, d, exact.zeros(d, d), theirs, biased, act)
        require(want == got, "the witness's canonical form differs from the block's")


def _glu_flip(block: dict[str, Any], plain: dict[str, Any], cert: dict[str, Any]) -> None:
    act = block["activation"]
    c = q(cert["c"])
    require(act["gated"] and lemmas.holds(act, "OgN", c),
            "Og(c) with sigma - c analytic and non-polynomial (§5) is not re-proved")
    require(block["depth"] == 1, "§5 covers depth 1")
    mine = block["layers"][0]
    up, gate, down = (exact.mat(mine[n]) for n in ("up", "gate", "down"))
    p_up, p_gate, p_down = (exact.mat(plain[n]) for n in ("up", "gate", "down"))
    m = len(up)
    listed = cert["J"]
    require(isinstance(listed, list) and all(type(j) is int for j in listed),
            "J is not a list of neuron numbers")
    flips = {j - 1 for j in listed}
    require(all(0 <= j < m for j in flips) and len(flips) == len(listed),
            "J is not a set of neurons 1..m")
    require(len(p_up) >= m and p_up[:m] == up, "the witness must keep 'up'")
    require(all(not any(row[m:]) for row in p_down), "extra witness neurons must be zero")
    for i in range(m):
        sign = -1 if i in flips else 1
        require(p_gate[i] == tuple(sign * x for x in gate[i]), f"gate row {i + 1}")
        require(all(pr[i] == sign * r[i] for pr, r in zip(p_down, down, strict=True)),
                f"down column {i + 1}")
    total = exact.zeros(block["dim"], block["dim"])
    for i in flips:
        total = exact.combine(total, exact.outer([r[i] for r in down], up[i]), Fraction(1))
    target = exact.combine(exact.zeros(block["dim"], block["dim"]), exact.skip_rows(block),
                           -1 / (2 * c))
    require(total == target, "sum over J of d_i u_i^T is not -S/(2c)")


# ---- not absorbable ----------------------------------------------------------------------

def not_absorbable(block: dict[str, Any], width: int, cert: dict[str, Any]) -> None:
    kind = cert.get("kind")
    if cert.get("section") == flips.SECTION:
        flips.refutation(block, width, cert, subset_refutation)
    elif kind == Kind.HOMOGENEITY_POINT:
        _homogeneity_point(block, cert)
    elif kind == Kind.PARITY_POINT:
        _parity_point(block, cert)
    elif kind == Kind.PARITY_POINT_AT_INFINITY:
        _parity_point_at_infinity(block, cert)
    elif kind == Kind.LEMMA_DIRECTION:
        never_lemma(block, cert, concrete=True)
    elif kind == Kind.HALF_ACTIVATION_BOUND:  # docs/rules.md §9, any depth, biases or not
        half.check(block, width, cert)
    elif kind == Kind.LINEAR_RANK:
        family = _family(block)
        require(family[0] == "linear" and block["depth"] == 1, "linear rank needs depth-1 Lin")
        # biases add only a constant (docs/rules.md §8): Λ is the same
        lam = forms.form(family, block["dim"], exact.skip_rows(block), block["layers"][0])[0]
        require(exact.rank(lam) > width, f"rank(S + aDU) <= {width}")
        require(whole(cert["rank"]) == exact.rank(lam) and exact.mat(cert["Lambda"]) == lam,
                "the stored rank or Lambda is wrong")
        _same_width(cert, width)
    elif kind in (Kind.SUBSET_SEARCH, Kind.SEPARATING_FUNCTIONAL) and block["activation"]["gated"]:
        _glu_refutation(block, width, cert)
    elif kind == Kind.SUBSET_SEARCH:
        _width_refutation(block, width, cert)
    elif kind in (Kind.NULLSTELLENSATZ, Kind.REAL_INFEASIBILITY, Kind.FINITE_POINT_SET):
        require(whole(cert["width"]) >= width, "the refutation is for a smaller width")
        if kind == Kind.FINITE_POINT_SET:
            generic.point_set(block, whole(cert["width"]), cert)
        else:
            generic.infeasible(block, whole(cert["width"]), cert)
    else:
        raise Invalid(f"a {kind!r} certificate cannot show non-absorbability")


def _same_width(cert: dict[str, Any], width: int) -> None:
    """A refutation states the width it refutes: exactly the claim's (every field checked)."""
    require(whole(cert["width"]) == width, f"the certificate is for width {cert['width']}, "
                                         f"not {width}")


# the refutations that read weight files
LARGE_REFUTATIONS = (Kind.MODULAR_FUNCTIONAL, Kind.KEY_COUNT, Kind.UNIQUE_SUBSET_SOLUTION)


def _refutation(block: dict[str, Any], width: int, cert: dict[str, Any],
                layers: modular.Layers | None) -> None:
    """Not absorbable at `width`: a large block's refutation (weights read from the files the
    document names) or any other kind (`not_absorbable`)."""
    if cert.get("kind") in LARGE_REFUTATIONS:
        _large_refutation(block, width, cert, layers)
    else:
        not_absorbable(block, width, cert)


def _require_generic_case(block: dict[str, Any]) -> tuple[str, Fraction, Fraction | None]:
    """A depth-1 ungated block with an O(a)+N σ (lemmas re-proved through the family)."""
    require(block["depth"] == 1 and not block["activation"]["gated"], "depth-1 ungated only")
    family = _family(block)
    require(family[0] in ("relu", "analytic"), "the generic case needs an O(a)+N σ")
    return family


def _weights(block: dict[str, Any], layers: modular.Layers | None) -> modular.Layers:
    """The exact weights: embedded in the document, else as read from the named files."""
    if isinstance(block["layers"], list):  # embedded (a block routed here by its cost)
        layers = _embedded(block)
    require(layers is not None, "the block's weights are not embedded: the checker reads them "
                                "from the files the certificate names (absorb-prove check)")
    assert layers is not None
    require(len(layers) == 1 and layers[0]["up"].shape == (block["width"], block["dim"]),
            "the weights read are not one width × dim 'up'")
    return layers


def _large_refutation(block: dict[str, Any], width: int, cert: dict[str, Any],
                      layers: modular.Layers | None) -> None:
    if cert["kind"] in (Kind.UNIQUE_SUBSET_SOLUTION, Kind.KEY_COUNT) \
            and unique_subset.flip_rule(cert):
        from .readers.files import FileError  # §8.2 at scale, or its key count at any size

        try:
            if cert["kind"] == Kind.KEY_COUNT:
                unique_subset.check_flip_key_count(block, width, _weights(block, layers), cert,
                                                   flips.rule(block["activation"]))
            else:
                unique_subset.check_flip_refutation(
                    block, [list(r) for r in exact.skip_rows(block)], width,
                    _weights(block, layers), cert, flips.rule(block["activation"]))
        except FileError as error:  # a denominator divisible by p: no residue
            raise Invalid(str(error)) from error
        return
    family = _require_generic_case(block)
    # §8.1: with biases the generic case and the key count are §4's, for a ≠ 0; the large
    # key count is issued (and checked) for a ≠ 0 only
    require((not block.get("bias") and cert["kind"] == Kind.MODULAR_FUNCTIONAL) or family[1] != 0,
            f"{cert['kind']} needs a != 0 here")
    layers = _weights(block, layers)
    from .readers.files import FileError

    try:
        if cert["kind"] == Kind.KEY_COUNT:
            modular.check_key_count(width, layers, cert)
        elif cert["kind"] == Kind.UNIQUE_SUBSET_SOLUTION:
            unique_subset.check_refutation([list(r) for r in exact.skip_rows(block)], width,
                                           layers, cert, family[1])
        else:
            modular.check(exact.skip_entry(block), width, layers, cert,
                          family[1])
    except FileError as error:  # a denominator divisible by p: no residue
        raise Invalid(str(error)) from error


def _one_layer(block: dict[str, Any], layers: modular.Layers | None) -> dict[str, Any]:
    """A depth-1 block's layer: embedded (strings), else as read from the named files."""
    if isinstance(block["layers"], list):
        require(len(block["layers"]) == 1, "a depth-1 block has one layer")
        return block["layers"][0]
    require(layers is not None and len(layers) == 1,
            "the block's weights are not embedded: the checker reads them from the files the "
            "certificate names (absorb-prove check)")
    assert layers is not None
    return layers[0]


def _embedded(block: dict[str, Any]) -> modular.Layers:
    """The embedded weights of a block, read like a spec's literal matrices."""
    from .readers.reading import Rational

    return [{name: Rational([list(r) for r in exact.mat(layer[name])])
             for name in ("up", "down", "gate") if name in layer} for layer in block["layers"]]


def _bounds(doc: dict[str, Any], weights: dict[str, modular.Layers]) -> Verdict:
    """An unknown min width with proved bounds: a refutation at lower − 1 (none when lower is
    1) and a witness at upper, both checked like a decided claim's."""
    claim, cert = doc["claim"], doc["certificate"]
    require(claim["kind"] == "min_width" and cert.get("kind") == Kind.MINIMAL_WIDTH_BOUNDS,
            "an unknown outcome carries no certificate but min width bounds")
    blocks = doc["blocks"]
    require(not blocks[claim["block"]].get("bias") or _keys_ok(blocks, cert)
            or _linear_ok(cert) or _stack_ok(doc), "blocks with biases: no rule for these bounds")
    block = blocks[claim["block"]]
    lo, hi = whole(cert["lower"]), whole(cert["upper"])
    require(1 <= lo < hi, "the bounds do not leave the min width open")
    if lo > 1:
        require(cert["below"] is not None, "no refutation below the lower bound")
        _refutation(block, lo - 1, cert["below"], weights.get(claim["block"]))
    else:
        require(cert["below"] is None, "nothing lies below width 1")
    require(whole(cert["above"]["width"]) == hi, "the witness is not at the upper bound")
    absorbable(block, hi, cert["above"], weights.get(claim["block"]))
    return Verdict("valid", f"unknown outcome; verified bounds {lo} <= min width <= {hi}")


def _degree(block: dict[str, Any], cert: dict[str, Any]) -> int:
    prop = cert["property"]
    require(prop.startswith("H(") and prop.endswith(")"), "T1 needs H(k)")
    k = int(prop[2:-1])
    require(lemmas.holds(block["activation"], "H", k), f"H({k}) is not re-proved")
    big_k = k + (1 if block["activation"]["gated"] else 0)
    require(big_k != 1, "T1 needs block degree K != 1")
    return big_k


def _homogeneity_point(block: dict[str, Any], cert: dict[str, Any]) -> None:
    require(cert["rule"] == "T1", "a homogeneity point is rule T1")
    require(not block.get("bias"), "T1 does not hold with biases (docs/rules.md §8)")
    big_k = _degree(block, cert)
    total = big_k ** block["depth"]
    require(whole(cert["degree"]) == total, "wrong degree K^L")
    require(block["activation"]["kind"] in exact.RATIONAL_KINDS, "σ not rational on Q")
    x0, t = exact.vec(cert["x0"]), q(cert["t"])
    require(t > 0, "t must be positive")
    at_tx = exact.evaluate(block, block["layers"], [t * v for v in x0])
    at_x = exact.evaluate(block, block["layers"], x0)
    require(at_tx != tuple(t**total * v for v in at_x), "B(t x0) = t^(K^L) B(x0): no violation")
    require(exact.vec(cert["B_at_t_x0"]) == at_tx and exact.vec(cert["B_at_x0"]) == at_x,
            "the stored values of B differ from exact evaluation")


def _parity_point(block: dict[str, Any], cert: dict[str, Any]) -> None:
    act = block["activation"]
    require(not block.get("bias"), "T2 does not hold with biases: T2∞ (docs/rules.md §8)")
    require(cert["rule"] == "T2" and cert["property"] == "E", "a parity point is T2 with E")
    require(not act["gated"] and lemmas.holds(act, "E"), "T2 needs an even, ungated σ")
    require(act["kind"] in exact.RATIONAL_KINDS, "σ not rational on Q")
    x0 = exact.vec(cert["x0"])
    plus = exact.evaluate(block, block["layers"], x0)
    minus = exact.evaluate(block, block["layers"], [-v for v in x0])
    require(plus != minus, "B(x0) = B(-x0): no violation")
    require(exact.vec(cert["B_at_x0"]) == plus and exact.vec(cert["B_at_minus_x0"]) == minus,
            "the stored values of B differ from exact evaluation")


def _even_homogeneous(act: dict[str, Any]) -> None:
    require(not act["gated"] and lemmas.holds(act, "E") and lemmas.holds(act, "H", 1),
            "T2∞ needs an ungated sigma with E and H(1), re-proved")


def _parity_point_at_infinity(block: dict[str, Any], cert: dict[str, Any]) -> None:
    """T2∞ (docs/rules.md §8): B0, the block with every bias dropped, is not even at x0, while
    B(tx)/t -> B0(x) and every plain stack's limit P0 is even."""
    act = block["activation"]
    require(cert["rule"] == "T2∞" and cert["property"] == "E, H(1)",
            "a parity point at infinity is T2∞ with E and H(1)")
    _even_homogeneous(act)
    require(act["kind"] in exact.RATIONAL_KINDS, "σ not rational on Q")
    free = {key: value for key, value in block.items() if key != "bias"}  # B0: no bias at all
    bare = [{name: layer[name] for name in ("up", "down")} for layer in block["layers"]]
    x0 = exact.vec(cert["x0"])
    plus = exact.evaluate(free, bare, x0)
    minus = exact.evaluate(free, bare, [-v for v in x0])
    require(plus != minus, "B0(x0) = B0(-x0): no violation")
    require(exact.vec(cert["B0_at_x0"]) == plus and exact.vec(cert["B0_at_minus_x0"]) == minus,
            "the stored values of B0 differ from exact evaluation")


def never_lemma(block: dict[str, Any], cert: dict[str, Any], concrete: bool) -> None:
    """T1–T4 with a lemma and a direction e_j with S^L e_j ≠ 0 (docs/rules.md §3)."""
    rule = cert["rule"]
    require(rule in NEVER_RULES, f"unknown rule {rule!r}")
    require(not block.get("bias") or rule in BIASED_NEVER_RULES,
            f"{rule} does not hold for blocks with biases (docs/rules.md §8)")
    act, depth = block["activation"], block["depth"]
    power = depth
    require(whole(cert["depth"]) == depth, "the stored depth is not the block's")
    if rule == "T1":
        require(whole(cert["block_degree"]) == _degree(block, cert), "the stored K is wrong")
        require(depth == 1, "T1 by lemma needs depth 1")
    else:
        require(cert["property"] == NEVER_PROPERTIES[rule], f"{rule} is proved by "
                                                             f"{NEVER_PROPERTIES[rule]}")
    if rule == "T4":
        require(cert["gated"] is act["gated"], "the stored 'gated' is not the block's")
    if rule == "T2":
        require(not act["gated"] and lemmas.holds(act, "E"), "E not re-proved (ungated)")
        require(depth == 1, "T2 by lemma needs depth 1")
    elif rule == "T2∞":  # §8: B0(x) - B0(-x) = 2Sx at depth 1, B0 even if absorbable
        _even_homogeneous(act)
        require(depth == 1, "T2∞ by lemma needs depth 1")
    elif rule == "T3":
        require(not act["gated"] and lemmas.holds(act, "Bd"), "Bd not re-proved (ungated)")
    else:
        require(lemmas.holds(act, "F"), "F not re-proved")
    index = whole(cert["direction"]["index"])
    column = exact.skip_power_column(block, power, index)
    require(any(column), "S^L e_index = 0")
    # The direction is the first one that works, so that it is determined, not chosen.
    require(not any(any(exact.skip_power_column(block, power, j)) for j in range(index)),
            "a smaller index has S^L e_j != 0: the direction is the first such j")
    entry = next(x for x in column if x != 0)
    require(q(cert["direction"]["skip_power_entry"]) == entry,
            "the stored entry of S^L e_index is wrong")


def _terms(family: tuple[str, Fraction, Fraction | None], lam: Rows,
           keys: list[tuple[exact.Vec, exact.Vec]], singles: list[int],
           basis: list[exact.Vec]) -> tuple[list[Rows], Rows]:
    """(W_ℓ Q for ℓ single, −M_+ Q), as in the width search of docs/rules.md §4."""
    r = forms.rho(family)
    m_plus = lam
    for i in singles:
        u, v = keys[i]
        m_plus = exact.combine(m_plus, exact.outer(v, u), -r)

    def times(rows: Rows) -> Rows:
        return tuple(tuple(exact.dot(row, b) for b in basis) for row in rows)

    terms = [times(exact.combine(exact.zeros(len(lam), len(lam)), exact.outer(keys[i][1],
                                                                              keys[i][0]), 2 * r))
             for i in singles]
    target = tuple(tuple(-x for x in row) for row in times(m_plus))
    return terms, target


def _width_refutation(block: dict[str, Any], width: int, cert: dict[str, Any]) -> None:
    family = _family(block)
    require(family[0] != "linear" and block["depth"] == 1, "width search: depth-1 O(a)+N")
    d, biased = block["dim"], bool(block.get("bias"))
    # §8.1: with biases the keys are affine; spare pairs and doubles still need a ≠ 0
    require(not biased or family[1] != 0, "§8.1 needs a != 0")
    lam, key_map, gamma = forms.form(family, d, exact.skip_rows(block), block["layers"][0],
                                     biased, block["activation"])
    # The search reads each key's direction ū only (§8.1): drop β̄ from affine keys; the
    # formal constant neurons (ū = 0) are constants, free through c′, not keys.
    keys = [(u[:d], v) for u, v in forms.sorted_keys(key_map) if any(u[:d])]
    p = len(keys)
    require(cert["canonical_form"] == forms.as_json(family, lam, key_map, gamma),
            "the stored canonical form differs from the recomputed one")
    method = cert["method"]
    _same_width(cert, width)
    if method == "key count":
        require(width < max(p, 1), f"{p} keys fit in width {width}")
        require(whole(cert["keys"]) == p, "the stored key count is wrong")
        return
    require(method == "width search", f"unknown refutation method {method!r}")
    cases = {(tuple(whole(i) - 1 for i in c["doubles"]), whole(c["spare_pairs"])): c["refutation"]
             for c in cert["cases"]}
    for extra in range(0, width - p + 1):
        for j in range(extra % 2, min(extra, p) + 1, 2):
            for delta in itertools.combinations(range(p), j):
                k = (extra - j) // 2
                require((delta, k) in cases, f"case doubles={[i + 1 for i in delta]}, "
                                             f"spare pairs={k} is not refuted")
                _case(family, lam, keys, delta, k, cases[(delta, k)])


def _case(family: tuple[str, Fraction, Fraction | None], lam: Rows,
          keys: list[tuple[exact.Vec, exact.Vec]], delta: tuple[int, ...], k: int,
          ref: dict[str, Any]) -> None:
    d = len(lam)
    basis = [exact.vec(b) for b in ref["complement_basis"]]
    dirs = [keys[i][0] for i in delta]
    require(basis == exact.nullspace(dirs, d), "Q is not the RREF basis of ū_Δ^⊥")
    require(min(d, len(basis)) > k, "this case is feasible (rank bound)")
    singles = [i for i in range(len(keys)) if i not in delta]
    terms, target = _terms(family, lam, keys, singles, basis)
    if k >= 1:
        require(ref["kind"] == Kind.SUBSET_SEARCH and ref["method"] == "sign enumeration",
                "k >= 1 cases are refuted by enumeration")
        require(len(singles) <= MAX_ENUMERATION, "too many signs to re-enumerate")
        _signs_refuted(terms, target, k)
        return
    subset_refutation(terms, target, ref)


def _signs_refuted(terms: list[Rows], target: Rows, k: int) -> None:
    """rank(M_s Q) > k for all 2^n signs. With every s_ℓ = + it is M_+ Q = −target, and
    turning s_ℓ to − adds terms[ℓ] = 2ρ v_ℓ ū_ℓ^T Q: a Gray-code walk makes one such update
    per sign vector instead of rebuilding M_s."""
    current = [[-x for x in row] for row in target]
    negative = [False] * len(terms)
    for t in range(1, 2 ** len(terms) + 1):
        require(exact.rank(current) > k, f"signs {[-1 if n else 1 for n in negative]} reach "
                                         f"rank <= {k}")
        if t == 2 ** len(terms):
            return
        j = (t & -t).bit_length() - 1  # the bit that changes between Gray codes t − 1 and t
        sign = -1 if negative[j] else 1
        current = [[x + sign * y for x, y in zip(row, step, strict=True)]
                   for row, step in zip(current, terms[j], strict=True)]
        negative[j] = not negative[j]


def subset_refutation(terms: list[Rows], target: Rows, ref: dict[str, Any]) -> None:
    """No J ⊆ terms has Σ_J terms = target (§7: separating functional / subset search)."""
    columns = [tuple(x for row in t for x in row) for t in terms]
    goal = tuple(x for row in target for x in row)
    kind, method = ref.get("kind"), ref.get("method")
    require(kind == Kind.SUBSET_SEARCH or (kind == Kind.SEPARATING_FUNCTIONAL and method is None),
            f"unknown subset refutation {kind!r}/{method!r}")
    if kind == Kind.SEPARATING_FUNCTIONAL:
        y = tuple(x for row in exact.mat(ref["Y"]) for x in row)
        require(len(y) == len(goal), "Y has the wrong shape")
        # Y lives where the system does: off its support Y would be free, hence unchecked.
        require(all(v == 0 for i, v in enumerate(y)
                    if goal[i] == 0 and all(c[i] == 0 for c in columns)),
                "Y is non-zero where every term and the target vanish")
        require(all(exact.dot(y, c) == 0 for c in columns), "<Y, W_l> != 0 for some term")
        require(exact.dot(y, goal) != 0, "<Y, T> = 0")
        require(q(ref["Y_dot_target"]) == exact.dot(y, goal), "the stored <Y, T> is wrong")
    elif method == "lattice functional":  # no integer combination reaches T (dense regime)
        y = tuple(x for row in exact.mat(ref["Y"]) for x in row)
        require(len(y) == len(goal), "Y has the wrong shape")
        require(all(v == 0 for i, v in enumerate(y)
                    if goal[i] == 0 and all(c[i] == 0 for c in columns)),
                "Y is non-zero where every term and the target vanish")
        require(all(exact.dot(y, c).denominator == 1 for c in columns),
                "<Y, W_l> is not an integer for some term")
        require(exact.dot(y, goal).denominator != 1, "<Y, T> is an integer")
        require(q(ref["Y_dot_target"]) == exact.dot(y, goal), "the stored <Y, T> is wrong")
    elif method == "unique combination":
        coefficients = exact.vec(ref["coefficients"])
        require(exact.rank(columns) == len(columns), "the terms are not independent")
        combined = tuple(sum((c * col[i] for c, col in zip(coefficients, columns, strict=True)),
                             Fraction(0)) for i in range(len(goal)))
        require(combined == goal, "the coefficients do not combine to the target")
        require(any(c not in (0, 1) for c in coefficients), "the combination is 0/1")
    elif method == "enumeration":
        require(whole(ref["free_coordinates"]) == _reenumerate(columns, goal),
                "the stored number of free coordinates is wrong")
    elif method == "smt":
        # The checker's own encoding of the system it re-derived, re-solved by two solvers:
        # a stored SMT-LIB text would be tied to nothing the checker computes.
        text = smt.subset_smtlib(columns, goal)
        require(smt.z3_verdict(text) == "unsat", "z3 finds a subset (checker's own encoding)")
        require(smt.cvc5_verdict(text) == "unsat", "cvc5 finds a subset or gives up "
                                                   "(checker's own encoding)")
    elif method == "cp-sat":
        require((whole(ref["terms"]), whole(ref["equations"]))
                == (len(columns), smt.equation_count(columns, goal)),
                "the stored system size is wrong")
        require(smt.subset_infeasible_cpsat(columns, goal),
                "CP-SAT does not confirm infeasibility (checker's own encoding)")
    else:
        raise Invalid(f"unknown subset refutation {kind!r}/{method!r}")


def _reenumerate(columns: list[exact.Vec], goal: exact.Vec) -> int:
    """Refute every 0/1 value of the free coordinates; the number of free coordinates."""
    rows = [[c[i] for c in columns] + [goal[i]] for i in range(len(goal))]
    reduced, pivots = exact.rref(rows)
    n = len(columns)
    require(n not in pivots, "the target is outside the span: a subset search is not needed, "
                             "but this certificate claims enumeration")
    free = [j for j in range(n) if j not in pivots]
    require(len(free) <= MAX_ENUMERATION, "too many free coordinates to re-enumerate")
    for bits in itertools.product((0, 1), repeat=len(free)):
        chosen = dict(zip(free, bits, strict=True))
        values = [reduced[r][n] - sum((reduced[r][j] for j, b in chosen.items() if b),
                                      Fraction(0)) for r in range(len(pivots))]
        require(not all(v in (0, 1) for v in values), f"a 0/1 solution exists: free={bits}")
    return len(free)


def _glu_refutation(block: dict[str, Any], width: int, cert: dict[str, Any]) -> None:
    act = block["activation"]
    c = q(cert["c"])
    require(act["gated"] and lemmas.holds(act, "OgN", c),
            "Og(c) with sigma - c analytic and non-polynomial (§5) is not re-proved")
    # at w < m too: a plain block of width w < m padded with zero neurons is one of width m
    require(block["depth"] == 1 and width <= block["width"], "§5: depth 1, width at most m")
    layer = block["layers"][0]
    gate, up, down = (exact.mat(layer[n]) for n in ("gate", "up", "down"))
    keys = set()
    for i, g in enumerate(gate):
        column = [r[i] for r in down]
        require(any(g) and any(up[i]) and any(column), f"neuron {i + 1} is degenerate")
        key = max(g, tuple(-x for x in g))
        require(key not in keys, "two neurons share a gate key: not generic")
        keys.add(key)
    d = block["dim"]
    terms = [exact.outer([r[i] for r in down], up[i]) for i in range(len(up))]
    target = exact.combine(exact.zeros(d, d), exact.skip_rows(block), -1 / (2 * c))
    subset_refutation(terms, target, cert)


# ---- min width, equality, families -------------------------------------------------------

def min_width(block: dict[str, Any], cert: dict[str, Any],
              layers: modular.Layers | None = None) -> int | None:
    """The minimal width the certificate establishes (None: never absorbable)."""
    if cert.get("kind") != Kind.MINIMAL_WIDTH:
        not_absorbable(block, 10**9, cert)  # a never-proof: no width at all
        require(cert.get("kind") in (Kind.HOMOGENEITY_POINT, Kind.PARITY_POINT,
                                     Kind.LEMMA_DIRECTION, Kind.PARITY_POINT_AT_INFINITY),
                "min width none needs a never-proof")
        return None
    value = whole(cert["width"])
    absorbable(block, value, cert["witness"], layers)
    if value > 1:
        require(cert["below"] is not None, "no refutation below the minimal width")
        _refutation(block, value - 1, cert["below"], layers)
    else:
        require(cert["below"] is None, "nothing lies below width 1")
    return value


def equality(left: dict[str, Any], right: dict[str, Any], cert: dict[str, Any],
             layers_l: modular.Layers | None = None,
             layers_r: modular.Layers | None = None) -> bool:
    require(cert.get("kind") in (Kind.CANONICAL_FORMS, Kind.INTEGER_CANONICAL_FORMS),
            "equality needs canonical forms")
    require(left["depth"] == right["depth"] == 1, "canonical forms decide depth 1 only")
    fam_l, fam_r = _family(left), _family(right)
    if cert["kind"] == Kind.INTEGER_CANONICAL_FORMS:  # any size: the weights read here, as integers
        return integer_forms.check(left, right, _one_layer(left, layers_l),
                                   _one_layer(right, layers_r), (fam_l, fam_r), cert)
    biased = bool(left.get("bias") or right.get("bias"))  # §8.1: bias-free = zero biases
    form_l = forms.form(fam_l, left["dim"], exact.skip_rows(left), left["layers"][0], biased,
                        left["activation"])
    form_r = forms.form(fam_r, right["dim"], exact.skip_rows(right), right["layers"][0],
                        biased, right["activation"])
    comparable = (fam_l[0] == fam_r[0] == "relu" or "linear" in (fam_l[0], fam_r[0])
                  or left["activation"]["kind"] == right["activation"]["kind"]
                  or not (form_l[1] or form_r[1]))
    require(comparable, "the two activations' even parts differ: forms do not compare")
    equal = form_l == form_r
    if not equal and (forms.constant_keys(form_l[1], left["dim"])
                      or forms.constant_keys(form_r[1], right["dim"])):
        # σ(β) kept formally: different formal constants may be equal numbers, so when
        # nothing else differs an enclosure must show some entry of the difference ≠ 0
        def bare(form: tuple[Any, ...], dim: int) -> tuple[Any, ...]:
            return form[0], {k: v for k, v in form[1].items() if any(k[:dim])}

        if bare(form_l, left["dim"]) == bare(form_r, right["dim"]):
            gap = [symbolic.add(x, y, Fraction(-1)) for x, y in
                   zip(forms.constant(form_l, left["activation"]),
                       forms.constant(form_r, right["activation"]), strict=True)]
            require(any(symbolic.sign(g) not in (0, None) for g in gap),
                    "the forms differ only in constants σ(β) not proved different")
    require(equal == bool(cert["equal"]), "the stored verdict disagrees with the forms")
    require(cert["left"] == forms.as_json(fam_l, *form_l)
            and cert["right"] == forms.as_json(fam_r, *form_r),
            "the stored canonical forms differ from the recomputed ones")
    if "point" in cert:
        x0 = exact.vec(cert["point"]["x0"])
        at_left = exact.evaluate(left, left["layers"], x0)
        at_right = exact.evaluate(right, right["layers"], x0)
        require(at_left != at_right, "the blocks agree at x0")
        require(exact.vec(cert["point"]["left"]) == at_left
                and exact.vec(cert["point"]["right"]) == at_right,
                "the stored values at x0 differ from exact evaluation")
    return equal


FAMILY_TRUTHS = {
    "§4 rank of S": NEVER,
    "spare pairs": ALWAYS,
    "§4 relu family in d = 1": ALWAYS,
    "§4 relu family in d = 1, width 1": {"sometimes": True, "never": False,
                                         "generically not": True, "always": False},
    "§4 relu family in d = 1, width 1, S = 0": {"generically not": False, "always": False},
    "§4 subset condition": SOMETIMES,
    "§4 genericity": GENERICALLY_NOT,
    "plain family": {"always": True, "generically not": False},
    "zero weights": SOMETIMES,
    # docs/rules.md §8.3, families with biases (depth 1, S != 0); preconditions in _biased_rule.
    "§8.3 rank of S": NEVER,
    "§8.3 relu^2 pairs": ALWAYS,
    "§8.3 square pairs": ALWAYS,
    "§8.3 linear neurons": ALWAYS,
    "§8.3 genericity": GENERICALLY_NOT,
    "§8.3 subset condition": SOMETIMES,
    "§8.3 relu^2 flips": SOMETIMES,
    "§8.3 linear neuron in the block": SOMETIMES,
    half.RULE: GENERICALLY_NOT,  # docs/rules.md §9 (b), any depth
    # docs/rules.md "GLU sign flips": bias-free Og(c) families; preconditions in _glu_family_rule
    "§5 rank of S": NEVER,
    "§5 linear neurons": ALWAYS,
    "§5 linear neurons in the block": SOMETIMES,
    "§5 genericity": GENERICALLY_NOT,
}
# The rules that hold with biases: the §4 ones whose argument keeps biases (plain, zero,
# spare pairs, linear maps up to a constant) and the §8.3 table.
BIASED_FAMILY_RULES = frozenset({"plain family", "zero weights", "spare pairs",
                                 "§4 identity activation", half.RULE,
                                 *(r for r in FAMILY_TRUTHS if r.startswith("§8.3"))})
GATED_KINDS = ("silu", "gelu", "relu", "sigmoid")  # swiglu, geglu, reglu, glu (§8.2)


def family_truth(block: dict[str, Any], modality: str, width: int,
                 cert: dict[str, Any]) -> bool:
    """The truth of 'block is MODALITY absorbable at width' that the certificate proves."""
    require(block["layers"] is None, "family claims are about families")
    if cert.get("kind") == Kind.LEMMA_DIRECTION:
        never_lemma(block, cert, concrete=False)
        table = NEVER
    elif cert.get("kind") == Kind.RULE:
        rule = cert["rule"]
        require(whole(cert["width"]) == width, "the rule was applied at another width")
        if "rank_S" in cert:
            require(whole(cert["rank_S"]) == exact.skip_rank(block), "the stored rank(S) is wrong")
        if rule == "§4 identity activation":
            return _identity_table(block, modality, width, cert)
        require(rule in FAMILY_TRUTHS, f"unknown rule {rule!r}")
        require(not block.get("bias") or rule in BIASED_FAMILY_RULES,
                f"rule {rule!r} does not hold for families with biases (docs/rules.md §8)")
        if rule.startswith("§8.3"):
            _biased_rule(block, rule, width, cert)
        elif rule.startswith("§5 "):
            _glu_family_rule(block, rule, width)
        else:
            _rule_preconditions(block, rule, width)
        table = FAMILY_TRUTHS[rule]
        if "example" in cert:
            absorbable(_example_member(block, cert["example"], rule), width,
                       cert["example"]["witness"])
    else:
        raise Invalid(f"a {cert.get('kind')!r} certificate says nothing about families")
    require(modality in table, f"rule does not decide '{modality}'")
    return table[modality]


def _rule_preconditions(block: dict[str, Any], rule: str, width: int) -> None:
    act, m, d = block["activation"], block["width"], block["dim"]
    r = exact.skip_rank(block)
    if rule == half.RULE:
        half.check_family(block, width)
        return
    if rule in ("plain family", "zero weights"):
        require(exact.skip_is_zero(block), "needs skip none")
        require(rule == "zero weights" or width >= m, "needs width >= m")
        return
    if rule == "spare pairs":
        a = lemmas.odd_slope(act)
        require(a is not None and not act["gated"], "O(a) not re-proved (ungated)")
        require(width >= m + 2 * r, "needs width >= m + 2 rank(S)")
        return
    family = lemmas.ridge_family(act)
    if rule == "§4 relu family in d = 1":  # any depth: a stack of width-2 layers (§4, §5)
        require(family is not None and family[0] == "relu" and d == 1 and width >= 2,
                "needs relu family, d = 1, width >= 2")
        return
    require(family is not None and block["depth"] == 1, "needs a depth-1 O(a)+N activation")
    assert family is not None
    if rule == "§4 rank of S":
        require(m + width < 2 * r, "needs m + width < 2 rank(S)")
    elif rule == "§4 relu family in d = 1, width 1":
        require(family[0] == "relu" and d == 1 and width == 1 and r == 1,
                "needs relu family, d = 1, width 1, S != 0")
    elif rule == "§4 relu family in d = 1, width 1, S = 0":
        require(family[0] == "relu" and d == 1 and width == 1 and m >= 2 and r == 0,
                "needs relu family, d = 1, width 1, m >= 2, S = 0")
    elif rule == "§4 subset condition":
        require(r <= m <= width, "needs rank(S) <= m <= width")
    elif rule == "§4 genericity":
        require(width == m and r > 0, "needs width = m and S != 0")
        require(not (family[0] == "relu" and d == 1 and m >= 2), "relu in d = 1 is always")
    else:  # every rule of the table has its preconditions above
        raise Invalid(f"unknown rule {rule!r}")


# §8.3 rows whose example is a biased member (its biases stated), absorbed by §8.2 flips.
BIASED_EXAMPLE_RULES = frozenset({"§8.3 relu^2 flips", "§8.3 linear neuron in the block",
                                  "§8.3 relu^2 pairs", "§8.3 linear neurons"})


def _example_member(block: dict[str, Any], example: dict[str, Any],
                    rule: str) -> dict[str, Any]:
    """The family member an example names. A biased family's example is a member with zero
    biases, stated bias-free (no bias fields anywhere): its bias-free witness is a biased
    plain block with zero biases (docs/rules.md §8); except for BIASED_EXAMPLE_RULES, whose member
    carries its biases, each layer shaped as one of the family's (width m)."""
    if block.get("bias") and rule in BIASED_EXAMPLE_RULES:
        require(len(example["layers"]) == block["depth"], "the example has the wrong depth")
        for layer in example["layers"]:
            _layer_shapes(block, layer, block["width"])
        return dict(block, layers=example["layers"])
    if block.get("bias"):
        for layer in [*example["layers"], *example["witness"].get("layers", [])]:
            require(not any(name in layer for name in ("up_bias", "gate_bias", "down_bias")),
                    "the example of a biased family is stated with zero (absent) biases")
    member = {key: value for key, value in block.items() if key != "bias"}
    return dict(member, layers=example["layers"])


def _bias_class(act: dict[str, Any]) -> str | None:
    """The row of docs/rules.md §8.3's table, from σ's kind (its formula is the kind's)."""
    kind = act["kind"]
    if act["gated"]:
        return "gated" if kind in GATED_KINDS else "bilinear" if kind == "identity" else None
    if lemmas.ridge_family(act) is not None:
        return "ridge"
    if kind == "relu_pow" and int(act["power"]) == 2:
        return "relu2"
    if kind == "poly":
        coeffs = list(exact.vec(act["coeffs"]))
        while coeffs and coeffs[-1] == 0:
            coeffs.pop()
        return "square" if len(coeffs) == 3 else "poly" if len(coeffs) > 3 else None
    return None


def _biased_rule(block: dict[str, Any], rule: str, width: int, cert: dict[str, Any]) -> None:
    """Preconditions of the §8.3 rules (families with biases, depth 1, S != 0)."""
    act, m = block["activation"], block["width"]
    r = exact.skip_rank(block)
    row = _bias_class(act)
    require(bool(block.get("bias")) and block["depth"] == 1 and r > 0 and row is not None,
            "§8.3 covers biased depth-1 families with S != 0 of its table's activations")
    if rule == "§8.3 rank of S":
        # Sx + const is a plain block of width m + w: im S lies in the span of its m + w
        # output columns; with keys (relu family, relu²) each key needs two of them.
        need = 2 * r if row in ("ridge", "relu2") else r
        require(m + width < need, f"needs m + width < {need}")
    elif rule == "§8.3 relu^2 pairs":
        require(row == "relu2" and lemmas.holds(act, "Sq", 1) and width >= m + 4 * r,
                "needs relu² (re-proved sigma(z) + sigma(-z) = z²) and width >= m + 4 rank S")
    elif rule == "§8.3 square pairs":
        require(row == "square" and width >= m + 2 * r,
                "needs a degree-2 polynomial sigma and width >= m + 2 rank S")
    elif rule == "§8.3 linear neurons":
        _linear_neuron(act, row, cert)
        require(width >= m + r, "needs width >= m + rank S")
    elif rule == "§8.3 genericity":
        require(row in ("ridge", "relu2", "gated") and width == m,
                "needs width = m and keys (relu/gelu family, relu², swiglu/geglu/reglu/glu)")
    elif rule == "§8.3 subset condition":
        require(row == "ridge" and r <= m <= width, "needs relu/gelu family, rank S <= m <= w")
    elif rule == "§8.3 relu^2 flips":
        require(row == "relu2" and lemmas.holds(act, "Sq", 1) and 2 * r <= m <= width,
                "needs relu² (re-proved sigma(z) + sigma(-z) = z²), 2 rank S <= m <= w")
    else:
        require(rule == "§8.3 linear neuron in the block", f"unknown rule {rule!r}")
        _linear_neuron(act, row, cert)
        require(row == "gated" and r <= m <= width, "needs a gated sigma, rank S <= m <= w")


def _glu_family_rule(block: dict[str, Any], rule: str, width: int) -> None:
    """Preconditions of the bias-free glu family rules (docs/rules.md "GLU sign flips"):
    depth 1, no biases, S != 0, Og(c) with c = σ(0) != 0 and σ − c analytic and not a
    polynomial (OgN, re-proved)."""
    act, m = block["activation"], block["width"]
    r = exact.skip_rank(block)
    c = lemmas.value_at_zero(act) if act["gated"] else None  # Og(c) at z = 0: c = σ(0)
    require(not block.get("bias") and block["depth"] == 1 and r > 0 and c is not None
            and c != 0 and lemmas.holds(act, "OgN", c),
            "§5's family rules cover bias-free depth-1 Og(c) families, c = sigma(0) != 0 "
            "(re-proved), with S != 0")
    if rule == "§5 rank of S":  # Jacobian at 0: S = c(D'U' - DU), rank <= m + w
        require(m + width < r, f"needs m + width < rank S = {r}")
    elif rule == "§5 linear neurons":  # gate row 0: c·d (u·x), one per rank-one term
        require(width >= m + r, "needs width >= m + rank S")
    elif rule == "§5 linear neurons in the block":
        require(m + width >= r, "needs m + width >= rank S")
    else:
        require(rule == "§5 genericity", f"unknown rule {rule!r}")
        require(width <= m, "needs width <= m")


def _linear_neuron(act: dict[str, Any], row: str | None, cert: dict[str, Any]) -> None:
    """Gate row 0 and gate bias γ = 1 make σ(1)(u·x + β): a linear neuron if σ(1) != 0."""
    require(row in ("gated", "bilinear") and q(cert["gamma"]) == 1
            and symbolic.nonzero_at(act, Fraction(1)), "needs a gated sigma with sigma(1) != 0")


def _identity_table(block: dict[str, Any], modality: str, width: int,
                    cert: dict[str, Any]) -> bool:
    act = block["activation"]
    a = lemmas.odd_slope(act)
    require(a is not None and not act["gated"] and lemmas.holds(act, "Lin", a)
            and block["depth"] == 1, "needs a depth-1 linear activation")
    r, m, d = exact.skip_rank(block), block["width"], block["dim"]
    generic = min(d, r + m)
    require(whole(cert["generic_rank"]) == generic, "the stored generic rank is wrong")
    return {"never": r > m + width, "sometimes": r <= m + width,
            "generically not": generic > width, "always": generic <= width}[modality]
