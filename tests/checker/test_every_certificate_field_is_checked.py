"""Every field of a certificate is checked or absent (docs/certificates.md).

Each leaf of every stored certificate (fast claims only) is mutated alone — a number gets +1,
a string another value, a boolean its negation, a list loses an element — and the checker must
then say invalid. Only human-readable prose is exempt (PROSE); everything else a reader sees
in a certificate is something the checker re-derived.
"""

from __future__ import annotations

import copy
import json
import os
import random
from collections.abc import Iterator
from fractions import Fraction
from pathlib import Path
from typing import Any

import pytest

from absorb_formal.checker import verify

from ..conftest import ROOT

PROOFS = ROOT / "proofs"
# Prose for readers: what the certificate's argument or lemma says in words. The checker
# re-proves each lemma from σ's formula and re-derives each argument's conclusion itself.
PROSE = frozenset({"argument", "lemma"})
MAX_MUTATIONS = 6000  # sampled (fixed seed) beyond this; the corpus has about 4400
# The generic engine's certificates are mutated like every other: their stored SMT-LIB must be
# the checker's own encoding, which ties the points, equations and witnesses it was built from.
GENERIC_KINDS = frozenset({"Nullstellensatz", "real infeasibility", "finite point set"})
GENERIC_UNCHECKED: frozenset[str] = frozenset()
Path_ = tuple[Any, ...]


def slow(doc: dict[str, Any], path: Path) -> bool:
    """Claims marked `# slow` in their spec are left to the slow tier."""
    spec = path.parent / doc["spec"]["path"]  # format 2: relative to the document
    return spec.is_file() and "slow" in spec.read_text(encoding="utf-8").splitlines()[
        doc["line"] - 1]


def documents(folder: Path = PROOFS) -> list[tuple[str, dict[str, Any]]]:
    out = []
    for path in sorted(folder.rglob("*.json")):
        doc = json.loads(path.read_text(encoding="utf-8"))
        block = doc["blocks"][doc["claim"]["block"]]
        if doc["certificate"] is None or slow(doc, path) or isinstance(block["layers"], dict):
            continue  # digest-stored blocks need the spec's float arrays: test_modular
        out.append((str(path.relative_to(folder)), doc))
    return out


def leaves(node: Any, path: Path_ = ()) -> Iterator[tuple[Path_, str]]:
    """(path, "drop") for each non-empty list, (path, "change") for each scalar."""
    if isinstance(node, dict):
        generic = node.get("kind") in GENERIC_KINDS or str(node.get("check")).startswith("smt")
        for key, value in node.items():
            if key not in PROSE and not (generic and key in GENERIC_UNCHECKED):
                yield from leaves(value, (*path, key))
    elif isinstance(node, list):
        if node:
            yield path, "drop"
        for i, value in enumerate(node):
            yield from leaves(value, (*path, i))
    else:
        yield path, "change"


def changed(value: Any) -> Any:
    if isinstance(value, bool):
        return not value
    if isinstance(value, int):
        return value + 1
    if value is None:
        return "0"
    try:
        return str(Fraction(value) + 1)
    except (ValueError, ZeroDivisionError):
        return value + " (changed)"


def mutated(doc: dict[str, Any], path: Path_, how: str) -> dict[str, Any]:
    """The document with one leaf of its certificate changed."""
    return _at(doc, ("certificate", *path), how)


def mutations(folder: Path = PROOFS) -> list[tuple[str, Path_, str]]:
    docs = dict(documents(folder))
    found = [(name, path, how) for name, doc in docs.items()
             for path, how in leaves(doc["certificate"]) if path]
    if len(found) > MAX_MUTATIONS:
        found = random.Random(0).sample(found, MAX_MUTATIONS)
    return found


def survivors(folder: Path = PROOFS) -> list[str]:
    """Mutations the checker still accepts, as 'file: path (how)'."""
    docs = dict(documents(folder))
    out = []
    for name, path, how in mutations(folder):
        if verify(mutated(docs[name], path, how)).status != "invalid":
            out.append(f"{name}: {'.'.join(map(str, path))} ({how})")
    return out


def test_every_non_prose_field_of_a_stored_certificate_is_checked():
    tried = mutations()
    assert len(tried) > 500  # the corpus has thousands of leaves; a broken walk finds none
    assert survivors() == []


def test_an_integer_field_is_not_read_as_a_nearby_value():
    """An integer leaf given as x + 0.5 is another value: int() would have read it as x (a
    float or bool equal to x, 2.0 or True for 1, is the same value and may compare equal)."""
    docs = dict(documents())
    found = [(name, path) for name, doc in docs.items() for path, how in
             leaves(doc["certificate"]) if how == "change" and path
             and type(_get(doc["certificate"], path)) is int]
    assert len(found) > 200
    for name, path in found:
        value = _get(docs[name]["certificate"], path)
        for fake in (value + 0.5,):
            broken = copy.deepcopy(docs[name])
            node = broken["certificate"]
            for key in path[:-1]:
                node = node[key]
            node[path[-1]] = fake
            assert verify(broken).status == "invalid", (name, path, fake)


def _get(node: Any, path: Path_) -> Any:
    for key in path:
        node = node[key]
    return node


def test_the_mutations_cover_every_certificate_kind():
    kinds = {doc["certificate"]["kind"] for _, doc in documents()}
    assert {"witness", "minimal width", "subset search", "lemma + direction", "rule",
            "canonical forms", "linear rank", "homogeneity point", "parity point",
            "half-activation bound"} <= kinds


@pytest.mark.parametrize("value, expected", [(3, 4), (True, False), ("1/2", "3/2"),
                                             ("T1", "T1 (changed)"), (None, "0")])
def test_a_mutation_changes_the_value(value, expected):
    assert changed(value) == expected


# ---- §5: the GLU rule needs σ − c odd, analytic and non-polynomial ---------------------------

def poly_glu_document() -> dict[str, Any]:
    """A hand-made "not absorbable" document for a gated block with σ(z) = 1 + z (Og(1), but
    σ − 1 = z is a polynomial). The language has no gated poly, so it is built by hand: the
    block is 2x + x², which d'(1 + g'x)(u'x) with d'u' = 2, d'u'g' = 1 absorbs at width 1, yet
    the §5 subset condition Σ_J d_i u_i = −S/2 = −1/2 has no solution J ⊆ {1}."""
    doc = json.loads((PROOFS / "glu" / "sigmoid_gate.mlp.23.json").read_text(encoding="utf-8"))
    doc["blocks"] = {"Q": {
        "name": "Q", "dim": 1, "width": 1, "depth": 1, "skip": {"scale": "1"},
        "activation": {"name": "poly_glu", "kind": "poly", "gated": True, "param": None,
                       "power": None, "coeffs": ["1", "1"]},
        "layers": [{"up": [["1"]], "gate": [["1"]], "down": [["1"]]}]}}
    doc["claim"]["width"] = 1
    doc["certificate"] = {"kind": "subset search", "method": "unique combination", "c": "1",
                          "coefficients": ["-1/2"], "lemma": "sigma(z) + sigma(-z) == 2",
                          "argument": "the unique combination is not 0/1"}
    return doc


def test_the_checker_rejects_the_glu_rule_for_a_polynomial_gate():
    from absorb_formal.checker.kernel.contract import Invalid
    from absorb_formal.checker.rules.glu import refutation as glu_refutation

    doc = poly_glu_document()
    verdict = verify(doc)  # a gated polynomial is no activation of the language: refused first
    assert verdict.status == "invalid" and "poly_glu" in verdict.reason
    with pytest.raises(Invalid, match="non-polynomial"):  # and the §5 rule refuses it too
        glu_refutation(doc["blocks"]["Q"], 1, doc["certificate"])


def test_the_checker_still_accepts_the_glu_rule_for_sigmoid():
    doc = poly_glu_document()
    doc["blocks"]["Q"]["activation"] = {"name": "glu", "kind": "sigmoid", "gated": True,
                                        "param": None, "power": None, "coeffs": []}
    doc["certificate"]["c"] = "1/2"
    doc["certificate"]["coefficients"] = ["-1"]  # -S/(2c) = -1: still not 0/1
    assert verify(doc).status == "valid"


def test_the_prover_leaves_a_polynomial_gate_undecided():
    from absorb_formal.decide import glu
    from absorb_formal.decide.lemmas import properties
    from absorb_formal.model.activations import Activation, poly

    gated = Activation("poly_glu", poly((Fraction(1), Fraction(1))).scalar, True)
    props = properties(gated)
    assert props.gated_const == 1 and not props.gated_odd_part
    assert properties(Activation("glu_sig", _sigmoid_scalar(), True)).gated_odd_part
    block = _one_neuron(gated)
    decision = glu.decide(block, 1)
    assert decision is not None and decision.absorbable is None
    assert "non-polynomial" in decision.reason


def _sigmoid_scalar():
    from absorb_formal.model.activations import simple

    glu_act = simple("glu")
    assert glu_act is not None
    return glu_act.scalar


def _one_neuron(activation):
    from absorb_formal.model.blocks import Block, Layer, Matrix, Skip
    from absorb_formal.model.position import Pos

    one = Matrix([(Fraction(1),)])
    return Block("Q", activation, 1, 1, 1, Skip(1, scale=Fraction(1)), (Layer(one, one, one),),
                 Pos(1, 1))


# ---- solver subsets are re-checked exactly before any witness is built ----------------------

def test_a_wrong_solver_subset_is_an_internal_error(monkeypatch):
    from absorb_formal.decide import glu, subset
    from absorb_formal.model.activations import simple

    real = subset._solve

    def wrong(terms, target, timeout_ms, *reference):
        answer = real(terms, target, timeout_ms, *reference)
        assert answer.status == "none"  # the honest answer for this block
        return subset.SubsetAnswer("found", (0,))

    monkeypatch.setattr(subset, "_solve", wrong)
    block = _one_neuron(simple("glu"))  # Σ_J d_i u_i = −S/(2c) = −1 has no J
    with pytest.raises(subset.WrongSubset, match="internal error"):
        glu.decide(block, 1)


# ---- SMT refutations: the checker encodes the system itself ---------------------------------

def test_a_stored_smt_text_cannot_stand_in_for_the_system():
    from absorb_formal.checker.kernel.contract import Invalid
    from absorb_formal.checker.rules.subset import refutation as subset_refutation

    one = (((Fraction(1),),),)
    target = ((Fraction(1, 2),),)  # no 0/1 c has c·1 = 1/2: unsat, rightly
    subset_refutation(list(one), target, {"kind": "subset search", "method": "smt"})
    reachable = ((Fraction(1),),)  # c = 1 reaches it: whatever text is stored, invalid
    with pytest.raises(Invalid, match="z3 finds a subset"):
        subset_refutation(list(one), reachable, {"kind": "subset search", "method": "smt",
                                                 "smtlib": "(assert false)\n(check-sat)\n"})


# ---- the document around the certificate: claim, statement, outcome, spec, files, blocks ------
# The checker derives the claim from `statement` (and `check` ties the statement to its spec
# line); `outcome` must be what the certificate establishes; `spec`, `files`, `line` and the
# embedded `blocks` are compared with the checker's own reading of the files. Only the
# prover's prose (`verdict`, `method`, `reason`) is exempt. These run through
# `absorb_formal.check` with the spec in place, as `absorb-prove check` does.
DOCUMENT_PROSE = frozenset({"verdict", "method", "reason"})
BLOCK_MUTATIONS_PER_DOCUMENT = 3
MAX_DOCUMENT_MUTATIONS = 2500  # sampled (fixed seed) beyond this


def _placed(doc: dict[str, Any], name: str, folder: Path) -> dict[str, Any]:
    """The document as if stored in `folder`: its spec path made relative to that folder."""
    out = copy.deepcopy(doc)
    spec = ((PROOFS / name).parent / doc["spec"]["path"]).resolve()
    out["spec"]["path"] = os.path.relpath(spec, folder.resolve())
    return out


def _at(doc: dict[str, Any], path: Path_, how: str) -> dict[str, Any]:
    out = copy.deepcopy(doc)
    parent = out
    for key in path[:-1]:
        parent = parent[key]
    if how == "drop":
        parent[path[-1]].pop()
    else:
        parent[path[-1]] = changed(parent[path[-1]])
    return out


def semantic(doc: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """Edits an attacker would make: flip the outcome; state another claim consistently
    (statement and claim changed together): another width, the opposite modality."""
    out = []
    flip = {"proved": "refuted", "refuted": "proved"}.get(doc["outcome"])
    if flip:
        out.append(("outcome flipped", {**doc, "outcome": flip}))
    claim = doc["claim"]
    if claim["kind"] in ("absorbable", "family"):
        width = claim["width"] + 1
        at = f" at width {width}"
        statement = doc["statement"].split(" at width ")[0] + at
        out.append(("width + 1", {**doc, "statement": statement,
                                  "claim": {**claim, "width": width}}))
    if claim["kind"] == "absorbable":
        other = "" if claim["modality"] == "not" else "not"
        words = " ".join(w for w in ("is", other, "absorbable") if w)
        tail = doc["statement"].partition(" absorbable")[2]
        out.append(("modality flipped", {**doc, "statement": f"{claim['block']} {words}{tail}",
                                         "claim": {**claim, "modality": other}}))
    if claim["kind"] == "min_width" and claim["min_width"] is not None:
        value = claim["min_width"] + 1
        out.append(("min width + 1", {**doc, "statement": f"min width of {claim['block']} is "
                                                          f"{value}",
                                      "claim": {**claim, "min_width": value}}))
    return out


def document_mutations() -> list[tuple[str, str, dict[str, Any]]]:
    """(document, what was changed, the changed document), for every stored document."""
    found = []
    rng = random.Random(1)
    for name, doc in documents():
        for path, how in leaves({k: v for k, v in doc.items()
                                 if k not in DOCUMENT_PROSE | {"certificate", "blocks"}}):
            found.append((name, f"{'.'.join(map(str, path))} ({how})", _at(doc, path, how)))
        block_leaves = list(leaves(doc["blocks"], ("blocks",)))
        for path, how in rng.sample(block_leaves, min(len(block_leaves),
                                                      BLOCK_MUTATIONS_PER_DOCUMENT)):
            found.append((name, f"{'.'.join(map(str, path))} ({how})", _at(doc, path, how)))
        found += [(name, what, changed_doc) for what, changed_doc in semantic(doc)]
    if len(found) > MAX_DOCUMENT_MUTATIONS:
        found = random.Random(0).sample(found, MAX_DOCUMENT_MUTATIONS)
    return found


def test_every_field_of_a_stored_document_is_checked(tmp_path):
    import absorb_formal

    tried = document_mutations()
    assert len(tried) > 1000
    assert {what.split(" (")[0].split(".")[0] for _, what, _ in tried} >= {
        "format", "spec", "line", "statement", "claim", "outcome", "blocks", "outcome flipped",
        "width + 1", "modality flipped"}
    where = tmp_path / "mutated.json"
    survived = []
    for name, what, doc in tried:
        where.write_text(json.dumps(_placed(doc, name, tmp_path)), encoding="utf-8")
        [result] = absorb_formal.check(where)
        if what == "spec.path (change)":  # the spec is elsewhere: said, never silent
            if "verified against the embedded blocks only" not in result.reason:
                survived.append(f"{name}: {what}: {result.reason}")
        elif result.status == "valid":
            survived.append(f"{name}: {what}")
    assert survived == []
