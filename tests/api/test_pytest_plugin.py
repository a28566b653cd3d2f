"""The pytest plugin: specs are collected as one item per claim, in any project."""

from __future__ import annotations

import shutil
import sys

import pytest

from ..conftest import CORPUS

SPEC = """\
block R {
    activation relu
    dim 2  width 3
    up    = [[1, 0], [0, 1], [1, 1]]
    down  = [[-1, 0, 7/10], [0, -1, 3/10]]
}
claim R is absorbable
claim R is not absorbable             # expect: refuted
block N { activation relu^2  dim 2  width 2  depth 2  skip [[0, 1], [0, 0]] }
claim N is never absorbable           # expect: unknown - nilpotent skip at depth 2
claim min width of R is 3             # slow
query R
"""


def test_claims_become_items_with_expectations(pytester):
    pytester.makefile(".mlp", corpus=SPEC)
    result = pytester.runpytest("-p", "no:cacheprovider", "-v")
    result.assert_outcomes(passed=4, xfailed=1)
    result.stdout.fnmatch_lines(["*corpus.mlp::line 7: R is absorbable PASSED*",
                                 "*line 10: N is never absorbable XFAIL*nilpotent skip*"])


def test_slow_claims_can_be_deselected(pytester):
    pytester.makefile(".mlp", corpus=SPEC)
    result = pytester.runpytest("-p", "no:cacheprovider", "-m", "not slow")
    result.assert_outcomes(passed=3, xfailed=1, deselected=1)


def test_an_unexpected_outcome_fails_with_the_line(pytester):
    pytester.makefile(".mlp", wrong=SPEC.replace("claim R is absorbable\n",
                                                 "claim R is absorbable at width 2\n"))
    result = pytester.runpytest("-p", "no:cacheprovider")
    result.assert_outcomes(passed=3, failed=1, xfailed=1)
    result.stdout.fnmatch_lines(["*wrong.mlp:7: R is absorbable at width 2: refuted "
                                 "(expected proved)*"])


def test_a_bad_spec_is_a_collection_error_with_its_position(pytester):
    pytester.makefile(".mlp", bad="block R { activation reluu dim 2 width 2 }\n")
    result = pytester.runpytest("-p", "no:cacheprovider")
    assert result.ret != 0
    result.stdout.fnmatch_lines(["*bad.mlp:1:22: error: unknown activation 'reluu'*"])


def test_stored_certificates_are_checked(pytester):
    specs = pytester.path / "specs"
    specs.mkdir()
    shutil.copy(CORPUS / "examples" / "relu_absorbable.mlp", specs / "r.mlp")
    prove = pytester.run(sys.executable, "-m", "absorb_formal", "--certificates", "proofs", "specs")
    assert prove.ret == 0
    result = pytester.runpytest("-p", "no:cacheprovider", "specs")
    result.assert_outcomes(passed=2)
    stored = pytester.path / "proofs" / "r.mlp.11.json"
    stored.write_text(stored.read_text().replace('"-1"', '"-2"', 1))
    result = pytester.runpytest("-p", "no:cacheprovider", "specs")
    result.assert_outcomes(passed=1, failed=1)
    # the certificate no longer describes the spec's block: stale, with the way to rewrite it
    result.stdout.fnmatch_lines(["*stored certificate*is stale: block 'R' differs from the "
                                 "certified one*--update specs/*"])


def test_a_stale_certificate_names_the_command_that_rewrites_it(pytester):
    specs = pytester.path / "specs"
    specs.mkdir()
    spec = specs / "r.mlp"
    shutil.copy(CORPUS / "examples" / "relu_absorbable.mlp", spec)
    prove = pytester.run(sys.executable, "-m", "absorb_formal", "--certificates", "proofs", "specs")
    assert prove.ret == 0
    spec.write_text(spec.read_text() + "# an edit after the certificates were written\n")
    result = pytester.runpytest("-p", "no:cacheprovider", "specs")
    result.assert_outcomes(failed=2)
    result.stdout.fnmatch_lines(["*r.mlp.11.json is stale: the spec * changed since "
                                 "certification *; if the spec or its weights changed on "
                                 "purpose, rewrite the certificates: absorb-prove "
                                 "--certificates proofs --update specs/"])
    rewrite = pytester.run(sys.executable, "-m", "absorb_formal", "--certificates", "proofs",
                           "--update", "specs")
    assert rewrite.ret == 0
    pytester.runpytest("-p", "no:cacheprovider", "specs").assert_outcomes(passed=2)


# ---- every outcome against every expectation -------------------------------------------

BLOCKS = """\
block R { activation relu  dim 2  width 3
          up = [[1, 0], [0, 1], [1, 1]]  down = [[-1, 0, 7/10], [0, -1, 3/10]] }
block N { activation relu^2  dim 2  width 2  depth 2  skip [[0, 1], [0, 0]] }
"""
# A statement with a known outcome today: the corpus's claims and queries of each kind.
OUTCOME = {"proved": "claim R is absorbable", "refuted": "claim R is not absorbable",
           "unknown": "claim N is never absorbable", "decided": "query R",
           "unknown query": "query N"}


def _one_statement(pytester, outcome: str, expectation: str):
    comment = f"   # expect: {expectation} — the gap note" if expectation else ""
    pytester.makefile(".mlp", one=BLOCKS + OUTCOME[outcome] + comment + "\n")
    return pytester.runpytest("-p", "no:cacheprovider", "-rxf")


@pytest.mark.parametrize(("outcome", "expectation", "passed"), [
    ("proved", "", True), ("proved", "refuted", False),
    ("refuted", "", False), ("refuted", "refuted", True),
    ("unknown", "", False), ("unknown", "refuted", False),
    ("decided", "", True), ("unknown query", "", False),
])
def test_an_item_passes_exactly_when_the_outcome_is_the_expected_one(pytester, outcome,
                                                                    expectation, passed):
    result = _one_statement(pytester, outcome, expectation)
    result.assert_outcomes(passed=int(passed), failed=int(not passed))


@pytest.mark.parametrize("outcome", ["unknown", "unknown query"])
def test_a_known_gap_is_an_xfail_with_its_note_while_the_outcome_is_unknown(pytester, outcome):
    result = _one_statement(pytester, outcome, "unknown")
    result.assert_outcomes(xfailed=1)
    result.stdout.fnmatch_lines(["XFAIL*one.mlp::line 4*the gap note*"])


def test_a_refuted_known_gap_fails(pytester):
    result = _one_statement(pytester, "refuted", "unknown")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*one.mlp:4: R is not absorbable: refuted (expected unknown)*"])


@pytest.mark.parametrize("outcome", ["proved", "decided"])
def test_a_closed_gap_fails_and_asks_for_the_expectation_to_be_updated(pytester, outcome):
    result = _one_statement(pytester, outcome, "unknown")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines([f"*one.mlp:4: *: {outcome}, so the known gap closed "
                                 "(the gap note); update the line's expectation*"])


@pytest.mark.parametrize(("comment", "column"), [
    ("# expect: refute", 38), ("# expect: proven", 38), ("# expect:", 37),
    ("# Expect: Refuted", 38)])
def test_an_unrecognised_expectation_is_a_collection_error_at_its_column(pytester, comment,
                                                                         column):
    pytester.makefile(".mlp", typo=BLOCKS + "claim R is not absorbable  " + comment + "\n")
    result = pytester.runpytest("-p", "no:cacheprovider")
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines([f"*typo.mlp:4:{column}: error: *outcome*after '# expect:'*"])


# ---- the same expectations, as `absorb-prove --expect` reads them -------------------------


@pytest.mark.parametrize(("line", "error"), [
    ("claim R is not absorbable   # expect: refute", ":4:39: error: unknown outcome 'refute'"),
    ("claim R is absorbable   # expect:", ":4:34: error: missing outcome after '# expect:'"),
    ("query R   # expect: proved", ":4:21: error: a query cannot be expected 'proved'"),
    ("claim R is absorbable   # expect: decided",
     ":4:35: error: a claim cannot be expected 'decided'"),
    ("# expect: refuted", ":4:11: error: '# expect:' on a line with no claim or query"),
    ("claim R is absorbable   # expected: refuted",
     ":4:27: error: 'expected:' is not an expectation: write '# expect: refuted'"),
    ("claim R is absorbable   # Expect Unknown",
     ":4:27: error: 'Expect' is not an expectation: write '# expect: unknown'"),
])
def test_the_cli_refuses_an_expectation_it_cannot_check(cli, write_spec, line, error):
    run = cli("--expect", write_spec(BLOCKS + line + "\n"))
    assert run.code == 2, run
    assert error in run.err.splitlines()[0], run.err
