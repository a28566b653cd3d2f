"""The pytest plugin: specs are collected as one item per claim, in any project."""

from __future__ import annotations

import shutil
import sys

from .conftest import CORPUS

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
    result.stdout.fnmatch_lines(["*stored certificate*is invalid*"])
