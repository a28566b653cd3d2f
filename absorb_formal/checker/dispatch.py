"""Does a certificate document support its outcome? (docs/certificates.md, kind by kind.)

`verify(doc)` reads the claim from the document's statement, then checks the certificate
against it: the registry (`REGISTRY`, one entry per `contract.Kind`; `WITNESSES`, one per
witness `contract.Check`) says what each certificate kind shows, which function in
`checker/rules/` re-derives it, and whether it may speak of blocks with biases. Everything
is re-derived from the embedded blocks (or the weights the checker read itself): exact values,
canonical forms, ranks and products, sympy lemmas, solver answers. Any gap is an `Invalid`
with a reason, and the verdict is invalid.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import dataclass, replace
from enum import Enum
from typing import Any

from . import biases, fields
from .biases import Bias
from .kernel.contract import Check, Invalid, Kind, require
from .readers.shape import document_problem
from .readers.source import SourceError, read_statement
from .rules import (
    concrete,
    equivalence,
    families,
    flips,
    generic,
    glu,
    homogeneity,
    large,
    linear,
    never,
    parity,
    parity_infinity,
    spare,
    sublayer,
    width,
)
from .rules import half_activation as half
from .rules.modular import Layers

MALFORMED: tuple[type[Exception], ...] = (KeyError, ValueError, TypeError, IndexError,
                                          ZeroDivisionError, AttributeError)


@dataclass(frozen=True)
class Verdict:
    status: str  # "valid" | "invalid" | "unchecked" (unknown outcome: nothing to check)
    reason: str = ""

    @property
    def ok(self) -> bool:
        return self.status != "invalid"


def verify(doc: Any, weights: dict[str, Layers] | None = None) -> Verdict:
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


# ---- the registry ------------------------------------------------------------------------

class Role(Enum):
    """What a certificate kind shows, hence which claims it can answer."""

    WITNESS = "absorbable at the width"  # absorbable; the upper part of a min width
    REFUTATION = "not absorbable at the width"  # not absorbable; the lower part of a min width
    NEVER = "not absorbable at any width"  # a refutation; min width none; (lemma) families
    FAMILY = "which modalities a family has"  # family claims
    EQUALITY = "whether two blocks are equal"  # equals claims
    MIN_WIDTH = "the minimal width"  # min width claims
    BOUNDS = "bounds on the minimal width"  # min width claims left unknown
    SUBLAYER = "a claim about a normalised sublayer"  # blocks with a norm clause
    NOTHING = "nothing the checker verifies"  # facts: query output, never stored


@dataclass(frozen=True)
class Subject:
    """What a certificate is checked against: the claim's block at a width, the weights the
    checker read for it (blocks too large to embed), the other block of an equality, and for
    a normalised sublayer the whole document."""

    block: dict[str, Any]
    width: int
    layers: Layers | None = None
    other: dict[str, Any] | None = None
    other_layers: Layers | None = None
    doc: dict[str, Any] | None = None
    weights: dict[str, Layers] | None = None


@dataclass(frozen=True)
class Entry:
    """A certificate kind (or a witness's check): what it shows, the function that checks it
    against a `Subject` (returning what it shows: a truth table, a width, a verdict…), the
    fields a certificate of it may have besides `kind` (`allowed`: every one is checked or
    prose, checker/fields.py), why it may be about biased blocks (`reasons`,
    checker/biases.py), and `parts`: objects inside it read field by field, with their
    fields. `stored`: a witness with stored layers, whose shapes and idle neurons
    `concrete.stored_layers` checks first."""

    shows: frozenset[Role]
    check: Callable[[Subject, dict[str, Any]], Any]
    allowed: fields.Fields
    reasons: biases.Reasons = biases.none
    parts: tuple[tuple[str, frozenset[str]], ...] = ()
    stored: bool = False


def _roles(*roles: Role) -> frozenset[Role]:
    return frozenset(roles)


def _facts(subject: Subject, cert: dict[str, Any]) -> None:
    raise Invalid("facts are the output of a query, not a stored certificate")


def _subset_search(subject: Subject, cert: dict[str, Any]) -> None:
    """§8.2's flip system (by its section), the GLU system of a gated block, else the width
    search (or key count) of docs/rules.md §4."""
    block = subject.block
    if "section" in cert:
        flips.refutation(block, subject.width, cert)
    elif block["activation"]["gated"]:
        glu.refutation(block, subject.width, cert)
    else:
        width.refutation(block, subject.width, cert)


def _separating(subject: Subject, cert: dict[str, Any]) -> None:
    """A separating functional of §8.2's flip system or of the GLU system."""
    if "section" in cert:
        flips.refutation(subject.block, subject.width, cert)
        return
    require(subject.block["activation"]["gated"],
            f"a {cert.get('kind')!r} certificate cannot show non-absorbability")
    glu.refutation(subject.block, subject.width, cert)


def _min_width(subject: Subject, cert: dict[str, Any]) -> int:
    return concrete.min_width(subject.block, cert, subject.layers, _witness, _refutation)


def _bounds(subject: Subject, cert: dict[str, Any]) -> tuple[int, int]:
    return concrete.bounds(subject.block, cert, subject.layers, _witness, _refutation)


def _family_rule(subject: Subject, cert: dict[str, Any]) -> dict[str, bool]:
    return families.truth(subject.block, subject.width, cert, _witness)


def _equal_forms(subject: Subject, cert: dict[str, Any]) -> bool:
    assert subject.other is not None
    return equivalence.canonical(subject.block, subject.other, cert)


def _equal_integer_forms(subject: Subject, cert: dict[str, Any]) -> bool:
    assert subject.other is not None
    return equivalence.integer(subject.block, subject.other, cert, subject.layers,
                               subject.other_layers)


def _large(subject: Subject, cert: dict[str, Any]) -> None:
    large.refutation(subject.block, subject.width, cert, subject.layers)


def _generic(subject: Subject, cert: dict[str, Any]) -> None:
    generic.refutation(subject.block, subject.width, cert)


def _reduced(subject: Subject, cert: dict[str, Any]) -> Any:
    assert subject.doc is not None and subject.weights is not None
    return sublayer.reduce(subject.doc, subject.weights, cert, _verify)


def _ray(subject: Subject, cert: dict[str, Any]) -> str:
    assert subject.doc is not None and subject.weights is not None
    return sublayer.ray(subject.doc, subject.weights, cert)


def _gated(subject: Subject, cert: dict[str, Any]) -> str:
    assert subject.doc is not None
    return sublayer.gated(subject.doc, cert)


REFUTES, NEVER_SHOWN = _roles(Role.REFUTATION), _roles(Role.NEVER)
EQUALITY, SUBLAYER, WITNESSED = _roles(Role.EQUALITY), _roles(Role.SUBLAYER), _roles(Role.WITNESS)
fixed, PROSE, STORED, BUILT = fields.fixed, fields.PROSE, fields.STORED, fields.BUILT
KEYS, GENERIC = biases.always(Bias.KEYS), biases.always(Bias.GENERIC)
RULES, CONSTRUCTION = biases.always(Bias.RULES), biases.always(Bias.CONSTRUCTION)
REGISTRY: dict[Kind, Entry] = {
    # a witness's fields depend on its check: WITNESSES
    Kind.WITNESS: Entry(_roles(Role.WITNESS), lambda s, c: _witness(s.block, s.width, c,
                                                                    s.layers),
                        fixed("check", "width")),
    Kind.HOMOGENEITY_POINT: Entry(
        NEVER_SHOWN, lambda s, c: homogeneity.point(s.block, c),
        fixed("rule", "property", "degree", "x0", "t", "B_at_x0", "B_at_t_x0", *PROSE)),
    Kind.PARITY_POINT: Entry(
        NEVER_SHOWN, lambda s, c: parity.point(s.block, c),
        fixed("rule", "property", "x0", "B_at_x0", "B_at_minus_x0", *PROSE)),
    Kind.PARITY_POINT_AT_INFINITY: Entry(
        NEVER_SHOWN, lambda s, c: parity_infinity.point(s.block, c),
        fixed("rule", "property", "x0", "B0_at_x0", "B0_at_minus_x0", *PROSE), RULES),
    Kind.LEMMA_DIRECTION: Entry(
        _roles(Role.NEVER, Role.FAMILY), lambda s, c: never.lemma(s.block, c), fields.lemma,
        RULES, parts=(("direction", frozenset({"index", "skip_power_entry"})),)),
    Kind.LINEAR_RANK: Entry(REFUTES, lambda s, c: linear.rank(s.block, s.width, c),
                            fixed("Lambda", "rank", "width", "argument"), KEYS),
    Kind.SEPARATING_FUNCTIONAL: Entry(REFUTES, _separating, fields.subset, biases.section()),
    Kind.SUBSET_SEARCH: Entry(REFUTES, _subset_search, fields.subset, biases.section(Bias.KEYS),
                              parts=(("cases", fields.CASE),)),
    Kind.MODULAR_FUNCTIONAL: Entry(
        REFUTES, _large,
        fixed("rule", "prime", "minor_prime", "rows", "cols", "Y", "Y_dot_S", "argument"), KEYS),
    Kind.KEY_COUNT: Entry(
        REFUTES, _large,
        fields.flip_rule(("prime", "keys", "width", "argument"), (), ("rule", "constant")),
        biases.flip_rule(Bias.KEYS)),
    Kind.UNIQUE_SUBSET_SOLUTION: Entry(
        REFUTES, _large,
        fields.flip_rule(("rule", "prime", "solve_primes", "neuron", "value", "flips",
                          "coordinate", "argument"), (), ("constant", "width")),
        biases.flip_rule(Bias.KEYS)),
    Kind.HALF_ACTIVATION_BOUND: Entry(REFUTES, lambda s, c: half.check(s.block, s.width, c),
                                      fields.half_activation,
                                      biases.always(Bias.KEYS, Bias.DEPTH)),
    Kind.NULLSTELLENSATZ: Entry(REFUTES, _generic, fields.nullstellensatz, GENERIC),
    Kind.REAL_INFEASIBILITY: Entry(
        REFUTES, _generic, fixed("equations", "unknowns", "width", "smtlib", "argument"),
        GENERIC),
    Kind.FINITE_POINT_SET: Entry(REFUTES, _generic,
                                 fixed("width", "points", "smtlib", "argument"), GENERIC),
    Kind.MINIMAL_WIDTH: Entry(_roles(Role.MIN_WIDTH), _min_width,
                              fixed("width", "witness", "below")),
    Kind.MINIMAL_WIDTH_BOUNDS: Entry(_roles(Role.BOUNDS), _bounds,
                                     fixed("lower", "upper", "above", "below")),
    Kind.CANONICAL_FORMS: Entry(EQUALITY, _equal_forms, fixed("equal", "left", "right", "point"),
                                KEYS, parts=(("point", frozenset({"x0", "left", "right"})),)),
    Kind.INTEGER_CANONICAL_FORMS: Entry(EQUALITY, _equal_integer_forms,
                                        fixed("equal", "keys", "difference"), KEYS),
    Kind.RULE: Entry(_roles(Role.FAMILY), _family_rule, fields.rule, biases.family_rule,
                     parts=(("example", frozenset({"layers", "witness"})),)),
    Kind.FACTS: Entry(_roles(Role.NOTHING), _facts, fixed("facts")),
    Kind.NORMALISED_SUBLAYER: Entry(SUBLAYER, _reduced, fixed("reduction", "certificate")),
    Kind.RAY_LIMIT: Entry(SUBLAYER, _ray, fixed("x0", "w")),
    Kind.GATED_PRE_NORM_JACOBIAN: Entry(SUBLAYER, _gated, fixed()),
}

# A witness's `check`: what the checker verifies. Stored layers (`stored`) are the plain
# stack itself; the constructions of large blocks store none (the checker rebuilds them).
WITNESSES: dict[Check, Entry] = {
    Check.CANONICAL_FORMS_EQUAL: Entry(
        WITNESSED, lambda s, c: width.witness(s.block, c["layers"]), fixed(*STORED), KEYS,
        stored=True),
    Check.LINEAR_MAPS_EQUAL: Entry(
        WITNESSED, lambda s, c: linear.witness(s.block, c["layers"]), fixed(*STORED), KEYS,
        stored=True),
    Check.GLU_SIGN_FLIPS: Entry(
        WITNESSED, lambda s, c: glu.witness(s.block, c["layers"][0], c),
        fixed(*STORED, "J", "c", "lemma"), stored=True),
    Check.FLIP_IDENTITY: Entry(
        WITNESSED, lambda s, c: flips.witness(s.block, c["layers"][0], c),
        fixed(*STORED, "J", "section", "rule", "value"), biases.section(), stored=True),
    Check.ITSELF: Entry(
        WITNESSED, lambda s, c: concrete.itself(s.block, c["layers"]), fixed(*STORED),
        biases.always(Bias.ITSELF), stored=True),
    Check.LAYERS_ABSORBED: Entry(
        WITNESSED, lambda s, c: concrete.per_layer(s.block, s.width, c, s.layers, _witness),
        fixed("check", "width", "per_layer", "argument"), biases.always(Bias.STACK)),
    Check.STACK_FORMS_EQUAL: Entry(
        WITNESSED, lambda s, c: concrete.stack_forms(s.block, c["layers"]), fixed(*STORED),
        KEYS, stored=True),
    Check.POLYNOMIAL_IDENTITY: Entry(
        WITNESSED, lambda s, c: generic.polynomial_witness(s.block, c["layers"]),
        fixed(*STORED), GENERIC, stored=True),
    Check.SMT_NO_DIFFERENCE: Entry(
        WITNESSED, lambda s, c: generic.no_difference(s.block, c), fixed(*STORED, "smtlib"),
        GENERIC, stored=True),
    Check.ROWS_NEGATED: Entry(
        WITNESSED, lambda s, c: large.rows_negated(s.block, s.width, c, s.layers),
        fields.flip_rule((*BUILT, "flips"), ("a",), ("rule", "constant")),
        biases.flip_rule(Bias.KEYS)),
    Check.SPARE_PAIRS: Entry(
        WITNESSED, lambda s, c: large.spare_pairs(s.block, s.width, c),
        fixed(*BUILT, "a", "columns", "rows"), KEYS),
    Check.DOUBLES: Entry(
        WITNESSED, lambda s, c: large.doubled(s.block, s.width, c, s.layers),
        fixed(*BUILT, "a", "neurons", "prime", "det_mod_p"), KEYS),
    Check.LINEAR_NEURONS: Entry(
        WITNESSED, lambda s, c: spare.check_linear(s.block, s.width, c),
        fixed(*BUILT, "columns", "rows", "gamma", "sigma_gamma"), CONSTRUCTION),
    Check.SQUARE_PAIRS: Entry(
        WITNESSED, lambda s, c: spare.check_square_pairs(s.block, s.width, c),
        fixed(*BUILT, "columns", "rows", "t", "k"), CONSTRUCTION),
    Check.SQUARE_QUADRUPLES: Entry(
        WITNESSED, lambda s, c: spare.check_square(s.block, s.width, c),
        fixed(*BUILT, "columns", "rows", "v"), CONSTRUCTION),
}


def _lookup(cert: Any) -> Entry | None:
    """The entry for a certificate: its kind's, or for a witness its check's (None for an
    unknown kind or check)."""
    if not isinstance(cert, dict) or not isinstance(cert.get("kind"), str):
        return None
    if cert["kind"] == Kind.WITNESS:
        check = cert.get("check")
        return WITNESSES.get(check) if isinstance(check, str) else None
    return REGISTRY.get(cert["kind"])


def _reasons(cert: Any) -> frozenset[Bias]:
    """Why the certificate may be about biased blocks (its entry's `biases`)."""
    entry = _lookup(cert)
    return frozenset() if entry is None else entry.reasons(cert)


def _known_fields(cert: dict[str, Any], entry: Entry, in_case: bool = False) -> None:
    """Every field of the certificate is one its check reads, or prose (docs/certificates.md:
    every field is checked or absent); so is every field of the objects inside it that its
    check reads field by field (`parts`), and of the certificates in a width search's cases."""
    allowed = entry.allowed(cert, in_case) | {"kind"}
    unknown = sorted(map(str, set(cert) - allowed))
    what = (f"a witness with check {cert.get('check')!r}" if cert.get("kind") == Kind.WITNESS
            else f"a {cert.get('kind')!r} certificate")
    require(not unknown, f"{what} has no field {', '.join(map(repr, unknown))} "
                         f"(its fields: {', '.join(sorted(allowed))})")
    for name, names in entry.parts:
        found = cert.get(name)
        for part in found if isinstance(found, list) else [found]:
            if not isinstance(part, dict):
                continue  # absent, or malformed: the check refuses it
            extra = sorted(map(str, set(part) - names))
            require(not extra, f"'{name}' of {what} has no field {', '.join(map(repr, extra))}")
            inner = part.get("refutation") if names is fields.CASE else None
            case = _lookup(inner)
            if case is not None:
                _known_fields(inner, case, in_case=True)


def _entry(cert: Any, roles: frozenset[Role], otherwise: str) -> Entry:
    """The registry's entry for the certificate's kind, when that kind shows one of `roles`;
    else Invalid(`otherwise`)."""
    kind = cert.get("kind")
    entry = REGISTRY.get(kind) if isinstance(kind, str) else None
    require(entry is not None and bool(entry.shows & roles), otherwise)
    assert entry is not None
    _known_fields(cert, entry)
    return entry


def _witness(block: dict[str, Any], size: int, cert: dict[str, Any],
             layers: Layers | None = None) -> None:
    """The certificate is a witness: a plain stack of width ≤ `size` equal to the block.
    `layers`: the weights of a block too large to embed, for witnesses that read them."""
    require(cert.get("kind") == Kind.WITNESS, f"expected a witness, got {cert.get('kind')!r}")
    check = cert.get("check")
    entry = WITNESSES.get(check) if isinstance(check, str) else None
    require(entry is not None, f"unknown witness check {check!r}")
    assert entry is not None
    _known_fields(cert, entry)
    if entry.stored:
        # the block itself: every field is compared with the block's, idle neurons included
        concrete.stored_layers(block, size, cert, idle=check != Check.ITSELF)
    entry.check(Subject(block, size, layers), cert)


def _refutation(block: dict[str, Any], size: int, cert: dict[str, Any],
                layers: Layers | None = None) -> None:
    """The certificate shows the block not absorbable at `size` (or at any width)."""
    entry = _entry(cert, _roles(Role.REFUTATION, Role.NEVER),
                   f"a {cert.get('kind')!r} certificate cannot show non-absorbability")
    entry.check(Subject(block, size, layers), cert)


# ---- claims ------------------------------------------------------------------------------

def _verify(doc: Any, weights: dict[str, Layers]) -> Verdict:
    problem = document_problem(doc)
    require(not problem, problem)
    # The claim comes from the statement alone; every later step reads this copy.
    doc = {**doc, "claim": derive_claim(doc)}
    claim, outcome, certificate = doc["claim"], doc["outcome"], doc["certificate"]
    if outcome == "unknown" and certificate is None:
        return Verdict("unchecked", "unknown outcome: nothing to check")
    if any("norm" in b for b in doc["blocks"].values()):  # the sublayer a model computes
        require(isinstance(certificate, dict), "a certificate is an object")
        note = _sublayer(doc, weights)
        return note if isinstance(note, Verdict) else Verdict("valid", note)
    if outcome == "unknown":
        return _unknown(doc, weights)
    require(outcome in ("proved", "refuted"), f"unexpected outcome {outcome!r}")
    require(isinstance(certificate, dict), "a decided outcome needs a certificate")
    # docs/rules.md §8: with biases the paper's rules change (T1, T4 fail). A decided claim on a
    # biased block is accepted only with a certificate whose rule re-derives biases.
    require(not any(isinstance(b, dict) and b.get("bias") for b in doc["blocks"].values())
            or biases.allowed(doc, _reasons),
            "blocks with biases: the checker has no rule for them yet (docs/rules.md §8)")
    handle = CLAIMS.get(claim["kind"])
    require(handle is not None, f"unknown claim kind {claim['kind']!r}")
    assert handle is not None
    subject = Subject(doc["blocks"][claim["block"]], int(claim["width"]),
                      weights.get(claim["block"]))
    handle(subject, claim, outcome == "proved", certificate, doc, weights)
    return Verdict("valid")


def _absorbable(subject: Subject, claim: dict[str, Any], proved: bool, cert: dict[str, Any],
                doc: dict[str, Any], weights: dict[str, Layers]) -> None:
    if proved == (claim["modality"] == ""):
        _witness(subject.block, subject.width, cert, subject.layers)
    else:
        _refutation(subject.block, subject.width, cert, subject.layers)


def _family(subject: Subject, claim: dict[str, Any], proved: bool, cert: dict[str, Any],
            doc: dict[str, Any], weights: dict[str, Layers]) -> None:
    require(subject.block["layers"] is None, "family claims are about families")
    entry = _entry(cert, _roles(Role.FAMILY),
                   f"a {cert.get('kind')!r} certificate says nothing about families")
    table = entry.check(subject, cert)
    modality = claim["modality"]
    require(modality in table, f"rule does not decide '{modality}'")
    truth = table[modality]
    require(truth == proved, f"the certificate shows '{modality}' is {truth}")


def _equals(subject: Subject, claim: dict[str, Any], proved: bool, cert: dict[str, Any],
            doc: dict[str, Any], weights: dict[str, Layers]) -> None:
    entry = _entry(cert, _roles(Role.EQUALITY), "equality needs canonical forms")
    other = replace(subject, other=doc["blocks"][claim["other"]],
                    other_layers=weights.get(claim["other"]))
    equal = entry.check(other, cert)
    require(equal == proved, f"the certificate shows equality is {equal}")


def _min_width_claim(subject: Subject, claim: dict[str, Any], proved: bool,
                     cert: dict[str, Any], doc: dict[str, Any],
                     weights: dict[str, Layers]) -> None:
    entry = _entry(cert, _roles(Role.MIN_WIDTH, Role.NEVER), "min width none needs a "
                                                             "never-proof")
    if Role.MIN_WIDTH in entry.shows:
        value = entry.check(subject, cert)
    else:  # a never-proof: no width at all
        entry.check(replace(subject, width=10**9), cert)
        value = None
    require((value == claim["min_width"]) == proved,
            f"the certificate shows min width {'none' if value is None else value}")


CLAIMS = {"absorbable": _absorbable, "family": _family, "equals": _equals,
          "min_width": _min_width_claim}


def _unknown(doc: dict[str, Any], weights: dict[str, Layers]) -> Verdict:
    """An unknown min width with proved bounds: a refutation at lower − 1 (none when lower is
    1) and a witness at upper, both checked like a decided claim's."""
    claim, cert = doc["claim"], doc["certificate"]
    require(claim["kind"] == "min_width" and cert.get("kind") == Kind.MINIMAL_WIDTH_BOUNDS,
            "an unknown outcome carries no certificate but min width bounds")
    block = doc["blocks"][claim["block"]]
    require(not block.get("bias") or biases.allowed(doc, _reasons),
            "blocks with biases: no rule for these bounds")
    entry = _entry(cert, _roles(Role.BOUNDS), "not min width bounds")
    lo, hi = entry.check(Subject(block, int(claim["width"]), weights.get(claim["block"])),
                         cert)
    return Verdict("valid", f"unknown outcome; verified bounds {lo} <= min width <= {hi}")


def _sublayer(doc: dict[str, Any], weights: dict[str, Layers]) -> Any:
    """A claim about a normalised sublayer (rules/sublayer.py): a note, or the reduced
    block's verdict."""
    claim, cert = doc["claim"], doc["certificate"]
    require(claim["kind"] != "equals", "'equals' on blocks with a norm clause is not decided")
    block = doc["blocks"][claim["block"]]
    require("norm" in block, "only the claim's block may carry a norm clause")
    entry = _entry(cert, _roles(Role.SUBLAYER),
                   f"a {cert.get('kind')!r} certificate does not decide a normalised sublayer")
    return entry.check(Subject(block, int(claim["width"]), weights.get(claim["block"]),
                               doc=doc, weights=weights), cert)
