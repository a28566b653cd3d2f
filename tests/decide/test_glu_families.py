"""Bias-free glu families (docs/rules.md "GLU sign flips", families; decide/glu_families.py):
never iff m + w < rank S, sometimes iff m + w ≥ rank S, generically not at w ≤ m, always at
w ≥ m + rank S — each decided claim re-verified by the checker, at, below and above each
threshold with both answers; certificates moved to families where a precondition fails, or
with a tampered example, are rejected."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from absorb_formal.checker.dispatch import verify
from absorb_formal.model.result import PROVED, REFUTED, UNKNOWN

from .test_bias_families import outcomes


def family(dim: int, width: int, claim: str, skip: str = "identity", act: str = "glu") -> str:
    return (f"block B {{ activation {act} dim {dim} width {width} skip {skip} }}\n"
            f"claim B is {claim}\n")


# (dim, width m, claim, expected); skip identity: rank S = dim.
TABLE = [
    (3, 1, "never absorbable at width 1", PROVED),          # m + w = 2 < 3
    (3, 1, "sometimes absorbable at width 1", REFUTED),
    (3, 1, "never absorbable at width 2", REFUTED),         # m + w = 3: sometimes
    (3, 1, "sometimes absorbable at width 2", PROVED),
    (3, 1, "generically not absorbable at width 1", PROVED),  # never implies it
    (3, 4, "sometimes absorbable", PROVED),                  # m ≥ r: with an example
    (3, 4, "never absorbable at width 1", REFUTED),
    (3, 4, "generically not absorbable", PROVED),           # w = m
    (3, 4, "generically not absorbable at width 2", PROVED),  # w < m
    (3, 4, "always absorbable", REFUTED),
    (3, 4, "always absorbable at width 7", PROVED),         # m + r
    (3, 4, "generically not absorbable at width 7", REFUTED),
    (3, 4, "always absorbable at width 6", UNKNOWN),        # between m + 1 and m + r − 1
    (3, 4, "generically not absorbable at width 5", UNKNOWN),
    (1, 2, "generically not absorbable", PROVED),           # d = 1: keys up to sign
    (1, 2, "always absorbable at width 3", PROVED),
]


@pytest.mark.parametrize(("dim", "width", "claim", "expected"), TABLE)
def test_the_bias_free_glu_family_table(tmp_path, dim, width, claim, expected):
    [(_, outcome, doc)] = outcomes(family(dim, width, claim), tmp_path)
    assert outcome == expected, doc["certificate"]
    if expected != UNKNOWN:
        assert doc["certificate"]["rule"].startswith("§5 "), doc["certificate"]


def test_the_table_sees_both_answers():
    counts = {PROVED: 0, REFUTED: 0, UNKNOWN: 0}
    for row in TABLE:
        counts[row[3]] += 1
    assert counts[PROVED] >= 5 and counts[REFUTED] >= 4 and counts[UNKNOWN] >= 2


def test_a_matrix_skip_counts_its_rank(tmp_path):
    rank_one = "[[1, 1, 1], [1, 1, 1], [0, 0, 0]]"
    got = [o for _, o, _ in outcomes(family(3, 1, "always absorbable at width 2", rank_one)
                                     + "claim B is never absorbable at width 1\n", tmp_path)]
    assert got == [PROVED, REFUTED]


def _doc(tmp_path, dim: int, width: int, claim: str) -> dict[str, Any]:
    [(_, outcome, doc)] = outcomes(family(dim, width, claim), tmp_path)
    assert outcome in (PROVED, REFUTED)
    return doc


@pytest.mark.parametrize(("dim", "width", "claim"), [
    (3, 1, "never absorbable at width 1"), (3, 4, "sometimes absorbable"),
    (3, 4, "generically not absorbable"), (3, 4, "always absorbable at width 7")])
def test_moved_or_relabelled_certificates_are_rejected(tmp_path, dim, width, claim):
    """The same certificate on a biased family, on swiglu (no Og(c)), with a wrong rank S, or
    under another §5 rule whose inequality fails: invalid."""
    doc = _doc(tmp_path, dim, width, claim)
    assert verify(doc).status == "valid"

    def biased(d: dict[str, Any]) -> None:
        d["blocks"]["B"]["bias"] = True

    def swiglu(d: dict[str, Any]) -> None:
        d["blocks"]["B"]["activation"] = copy.deepcopy(d["blocks"]["B"]["activation"]) | {
            "name": "swiglu", "kind": "silu"}

    def rank(d: dict[str, Any]) -> None:
        d["certificate"]["rank_S"] = int(d["certificate"]["rank_S"]) + 1

    def relabel(d: dict[str, Any]) -> None:
        rule = d["certificate"]["rule"]
        d["certificate"]["rule"] = "§5 rank of S" if rule != "§5 rank of S" else \
            "§5 linear neurons"

    for edit in (biased, swiglu, rank, relabel):
        broken = copy.deepcopy(doc)
        edit(broken)
        assert verify(broken).status == "invalid", (edit.__name__, broken["certificate"])


def test_the_sometimes_example_is_a_checked_member(tmp_path):
    """m ≥ rank S: the member's first rank S neurons carry −S/(2c) (c = ½: −S), §5's flip
    witness is checked; a member that no longer cancels S is rejected."""
    doc = _doc(tmp_path, 3, 4, "sometimes absorbable")
    example = doc["certificate"]["example"]
    assert len(example["layers"]) == 1 and "gate" in example["layers"][0]
    broken = copy.deepcopy(doc)
    broken["certificate"]["example"]["layers"][0]["down"][0][0] = "7"
    assert verify(broken).status == "invalid"
