"""The generic engine (docs/rules.md §6): decides from the definitions alone, and agrees with the
theory engine wherever both answer (differential testing on random small blocks)."""

from __future__ import annotations

import random
from collections import Counter
from fractions import Fraction

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from absorb_formal.decide import concrete
from absorb_formal.decide.lemmas import properties
from absorb_formal.generic import engine
from absorb_formal.model import activations as acts
from absorb_formal.model import linalg
from absorb_formal.model.blocks import Block, Layer, Matrix, Skip
from absorb_formal.model.position import Pos

from ..properties import known_truth

small = st.integers(-2, 2).map(Fraction)

PIECEWISE = [acts.simple("relu"), acts.leaky_relu(Fraction(1, 2)), acts.simple("abs")]
POLYNOMIAL = [acts.simple("identity"), acts.simple("square"),
              acts.poly((Fraction(0), Fraction(0), Fraction(0), Fraction(1)))]


def _block(activation, up, down, skip):
    d, m = len(up[0]), len(up)
    return Block("B", activation, d, m, 1, Skip(d, matrix=Matrix(skip)),
                 (Layer(Matrix(up), Matrix(down)),), Pos(1, 1))


def small_block(pick, activations=(*PIECEWISE, *POLYNOMIAL)):
    """small_blocks' block from a seeded `known_truth.Seeded` (the same construction)."""
    activation = pick.choice(activations)
    d = pick.integer(1, 2)
    m = pick.integer(1, 2 if d == 2 else 3)
    up, down = known_truth.integers(pick, m, d, 2), known_truth.integers(pick, d, m, 2)
    a = properties(activation).odd_linear
    if a is not None and pick.boolean():
        skip = linalg.zeros(d, d)
        for i in range(m):
            if pick.boolean():
                skip = linalg.add(skip, linalg.outer([r[i] for r in down], up[i]), -2 * a)
    else:
        skip = known_truth.integers(pick, d, d, 2)
    return _block(activation, up, down, skip)


@st.composite
def small_blocks(draw):
    activation = draw(st.sampled_from(PIECEWISE + POLYNOMIAL))
    d = draw(st.integers(1, 2))
    m = draw(st.integers(1, 2 if d == 2 else 3))
    up = [[draw(small) for _ in range(d)] for _ in range(m)]
    down = [[draw(small) for _ in range(m)] for _ in range(d)]
    a = properties(activation).odd_linear
    if a is not None and draw(st.booleans()):  # planted: S = −2a Σ_J d_i u_iᵀ
        skip = linalg.zeros(d, d)
        for i in range(m):
            if draw(st.booleans()):
                skip = linalg.add(skip, linalg.outer([r[i] for r in down], up[i]), -2 * a)
    else:
        skip = [[draw(small) for _ in range(d)] for _ in range(d)]
    return _block(activation, up, down, skip)


def _both(block, size):
    """(theory, generic) answers; when both answer they must agree."""
    theory = concrete.at_width(block, size).absorbable
    generic = engine.at_width(block, size).absorbable
    if theory is not None and generic is not None:
        assert theory == generic, (block, theory, generic)
    return theory, generic


@settings(deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(small_blocks(), st.integers(0, 1))
def test_engines_agree_wherever_both_answer(block, extra):
    theory, generic = _both(block, block.width + extra)
    event(f"theory {theory}, generic {generic}")


def test_engines_agree_on_both_answers_in_a_seeded_sample():
    """Agreement on a sample where both engines say absorbable, and both say not, often.
    Without abs, whose piecewise systems can take the generic engine a minute."""
    rng, seen = random.Random(0), Counter()
    quick = [a for a in PIECEWISE + POLYNOMIAL if a.name != "abs"]
    for _ in range(40):
        block = small_block(known_truth.Seeded(rng), quick)
        seen[_both(block, block.width + rng.randint(0, 1))] += 1
    assert seen[True, True] >= 8 and seen[False, False] >= 8, seen


@pytest.mark.parametrize("test", [test_engines_agree_wherever_both_answer,
                                  test_engines_agree_on_both_answers_in_a_seeded_sample],
                         ids=lambda t: t.__name__)
def test_a_theory_that_always_answers_no_fails_the_differential_tests(monkeypatch, test):
    from absorb_formal.decide.decision import Decision

    monkeypatch.setattr(concrete, "at_width", lambda *_: Decision(False, "stub"))
    known_truth.fails_with_a_stub(monkeypatch, test)


def test_generic_engine_decides_what_no_rule_does():
    z_plus_z2 = acts.poly((Fraction(0), Fraction(1), Fraction(1)))
    planted = _block(z_plus_z2, [[1, 0], [0, 1]], [[1, 0], [0, 2]], [[1, 0], [0, 1]])
    assert concrete.at_width(planted, 2).absorbable is None  # no rule of §3–5
    decision = engine.at_width(planted, 2)
    assert decision.absorbable is True and decision.certificate["check"] == "polynomial identity"
    random = _block(z_plus_z2, [[1, 2], [0, 1]], [[1, 0], [3, 2]], [[1, 0], [0, 1]])
    refuted = engine.at_width(random, 2)
    assert refuted.absorbable is False and refuted.certificate["kind"] == "Nullstellensatz"


def test_algebraic_witnesses_are_exact():
    cube = acts.poly((Fraction(0), Fraction(1), Fraction(0), Fraction(1)))
    block = _block(cube, [[1]], [[1]], [[1]])
    decision = engine.at_width(block, 1)
    assert decision.absorbable is True
    entries = [v for layer in decision.certificate["layers"] for rows in layer.values()
               for row in rows for v in row]
    assert any(isinstance(v, dict) and "root_of" in v for v in entries)


def test_a_depth_two_stack_the_rules_and_the_engine_decide_alike():
    """Once beyond the rules; the half-activation bound (docs/rules.md §9) now refutes width
    1, as the engine's finite point set does."""
    one = Matrix([[1]])
    block = Block("D", acts.simple("relu"), 1, 1, 2, Skip(1, scale=Fraction(1)),
                  (Layer(one, one), Layer(Matrix([[-1]]), Matrix([[Fraction(1, 2)]]))),
                  Pos(1, 1))
    assert concrete.at_width(block, 1).absorbable is False
    refuted = engine.at_width(block, 1)
    assert refuted.absorbable is False and refuted.certificate["kind"] == "finite point set"
    assert engine.at_width(block, 2).absorbable is True


def test_engines_disagreeing_is_an_internal_error(cli, write_spec, monkeypatch):
    from absorb_formal.decide.decision import Decision

    monkeypatch.setattr(engine, "at_width", lambda block, width: Decision(False, "fake"))
    spec = write_spec("block R { activation relu dim 2 width 2\n"
                      "  up = [[1, 0], [0, 1]] down = [[-1, 0], [0, -1]] }\n"
                      "claim R is absorbable\n")
    run = cli("--engine", "both", "--crosscheck", "0", spec)
    assert run.code == 4 and "engines disagree" in run.out
    assert cli("--engine", "theory", "--crosscheck", "0", spec).code == 0


def test_too_large_for_the_generic_engine_is_unknown_with_a_reason():
    block = _block(acts.simple("relu"), [[1, 0]] * 4, [[1] * 4, [0] * 4], [[1, 0], [0, 1]])
    decision = engine.at_width(block, 4)
    assert decision.absorbable is None and "too many unknowns" in decision.reason


# ---- certificates (docs/certificates.md): the checker re-derives every query; cvc5 is bounded ----

def _stored(name):
    import json

    from ..conftest import ROOT

    return json.loads((ROOT / "proofs" / "generic" / name).read_text(encoding="utf-8"))


POINT_SET = "piecewise.mlp.9.json"  # D2 is not absorbable: a finite point set


def test_the_prover_asks_no_second_solver_and_stores_no_verdicts(monkeypatch):
    from absorb_formal.checker.lemmas import smt

    def refuse(*args, **kwargs):
        raise AssertionError("the prover called cvc5: the checker re-solves anyway")

    monkeypatch.setattr(smt, "cvc5_verdict", refuse)
    block = _stored_block_d2()
    refuted = engine.at_width(block, 1)
    assert refuted.absorbable is False
    assert set(refuted.certificate) == {"kind", "width", "points", "smtlib", "argument"}
    witness = engine.at_width(block, 2)
    assert witness.absorbable is True and "solvers" not in witness.certificate


def _stored_block_d2():
    one = Matrix([[1]])
    return Block("D", acts.simple("relu"), 1, 1, 2, Skip(1, scale=Fraction(1)),
                 (Layer(one, one), Layer(Matrix([[-1]]), Matrix([[Fraction(1, 2)]]))),
                 Pos(1, 1))


def test_a_point_set_certificate_is_valid_as_stored():
    from absorb_formal.checker import verify

    assert verify(_stored(POINT_SET)).status == "valid"


def test_the_stored_smtlib_must_be_the_checkers_encoding_of_the_points():
    from absorb_formal.checker import verify

    doc = _stored(POINT_SET)
    doc["certificate"]["smtlib"] = "(set-logic QF_NRA)\n(assert false)\n(check-sat)\n"
    assert verify(doc).status == "invalid"  # unsat, but not about this block
    doc = _stored(POINT_SET)
    doc["certificate"]["points"][0] = ["2"]  # other points: the stored text no longer fits
    verdict = verify(doc)
    assert verdict.status == "invalid" and "own encoding" in verdict.reason


def test_a_stored_box_or_solver_verdict_is_not_trusted():
    from absorb_formal.checker import verify

    for field, stored in (("box", True), ("solvers", {"z3": "unsat", "cvc5": "unsat"})):
        doc = _stored(POINT_SET)
        doc["certificate"][field] = stored
        verdict = verify(doc)
        assert verdict.status == "invalid" and f"has no field {field!r}" in verdict.reason


def test_a_block_with_biases_gets_no_box_and_no_encoding_that_ignores_them():
    # docs/rules.md §8.4: with biases rows cannot be scaled into a box; the checker must not encode
    # the block as if it had none.
    from absorb_formal.checker import verify

    doc = _stored(POINT_SET)
    doc["blocks"]["D2"]["layers"][0]["up_bias"] = ["1"]
    assert verify(doc).status == "invalid"


def test_cvc5_giving_up_leaves_a_valid_certificate_that_says_so(monkeypatch):
    from absorb_formal.checker import verify
    from absorb_formal.checker.lemmas import smt

    monkeypatch.setattr(smt, "cvc5_verdict", lambda text, timeout_ms=0: "unknown")
    verdict = verify(_stored(POINT_SET))
    assert verdict.status == "valid"
    assert "z3 unsat; cvc5 gave up" in verdict.reason and "z3 alone" in verdict.reason
    monkeypatch.setattr(smt, "cvc5_verdict", lambda text, timeout_ms=0: "sat")
    verdict = verify(_stored(POINT_SET))
    assert verdict.status == "invalid" and "disagree" in verdict.reason


def test_z3_must_refute_the_checkers_own_encoding(monkeypatch):
    from absorb_formal.checker import verify
    from absorb_formal.checker.lemmas import smt

    monkeypatch.setattr(smt, "z3_verdict", lambda text, logic=None, rlimit=None: "unknown")
    verdict = verify(_stored(POINT_SET))
    assert verdict.status == "invalid" and "z3 does not refute" in verdict.reason


def test_every_generic_certificate_kind_is_stored():
    kinds = {_stored(p.name)["certificate"]["kind"] for p in _generic_proofs()}
    checks = {_stored(p.name)["certificate"].get("witness", {}).get("check")
              for p in _generic_proofs()}
    assert {"finite point set", "Nullstellensatz", "real infeasibility"} <= kinds
    assert "smt: no point where P differs from B" in checks


def _generic_proofs():
    from ..conftest import ROOT

    return sorted((ROOT / "proofs" / "generic").glob("*.json"))
