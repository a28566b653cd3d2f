"""docs/rules.md §8: the never-rules that survive biases (T3, T2∞) and the §8.3 family table.

Every decided claim's certificate is re-verified by the independent checker. The table is
exercised at, below and above each threshold, with both answers expected; an answer-"never"
stub and certificates of the bias-free rules (T1, T2, T4) relabelled as biased must fail.
"""

from __future__ import annotations

import copy
import json
import random
from fractions import Fraction
from pathlib import Path
from typing import Any

import pytest

from absorb_formal.certify import documents as proofs
from absorb_formal.checker.dispatch import verify
from absorb_formal.decide import decide
from absorb_formal.language.load import load_file
from absorb_formal.model.result import PROVED, REFUTED, UNKNOWN

F = Fraction


def outcomes(text: str, folder: Path) -> list[tuple[str, str, dict[str, Any]]]:
    """(statement, outcome, certificate document) per claim; decided ones must check valid."""
    spec_file = folder / "s.mlp"
    spec_file.write_text(text, encoding="utf-8")
    spec = load_file(spec_file)
    out = []
    for claim in spec.statements:
        result = decide(spec, claim)
        doc = json.loads(json.dumps(proofs.document(spec, claim, result, spec_file,
                                                    folder / "c.json")))
        verdict = verify(doc)
        if result.outcome != UNKNOWN:
            assert verdict.status == "valid", (claim.statement, verdict.reason)
        out.append((claim.statement, result.outcome, doc))
    return out


def family(act: str, dim: int, width: int, claim: str, skip: str = "identity",
           depth: int = 1) -> str:
    return (f"block B {{ activation {act} dim {dim} width {width} depth {depth} "
            f"skip {skip} bias }}\nclaim B is {claim}\n")


# (activation, dim, width, claim, expected); skip identity, so rank S = dim.
TABLE = [
    # relu family (any d) and gelu family: never iff m < rank S, sometimes iff m >= rank S,
    # generically not at m, always at m + 2 rank S (spare pairs).
    ("relu", 2, 1, "never absorbable", PROVED),
    ("relu", 2, 2, "never absorbable", REFUTED),
    ("relu", 2, 2, "sometimes absorbable", PROVED),
    ("relu", 2, 1, "sometimes absorbable", REFUTED),
    ("relu", 2, 2, "generically not absorbable", PROVED),
    ("relu", 2, 2, "always absorbable", REFUTED),
    ("relu", 2, 2, "always absorbable at width 6", PROVED),
    ("relu", 2, 2, "always absorbable at width 5", UNKNOWN),
    ("leaky_relu(1/2)", 3, 3, "sometimes absorbable", PROVED),
    ("gelu", 2, 1, "never absorbable", PROVED),
    ("silu", 2, 2, "sometimes absorbable", PROVED),
    ("gelu", 2, 3, "generically not absorbable", PROVED),
    # relu in d = 1 with biases: kinks at -beta/u differ, so NOT always (bias-free: always).
    ("relu", 1, 3, "always absorbable", REFUTED),
    ("relu", 1, 3, "always absorbable at width 2", UNKNOWN),
    ("relu", 1, 3, "generically not absorbable", PROVED),
    ("relu", 1, 3, "always absorbable at width 5", PROVED),
    # relu^2: never if m < rank S, sometimes if m >= 2 rank S, always at m + 4 rank S.
    ("relu^2", 2, 1, "never absorbable", PROVED),
    ("relu^2", 2, 2, "never absorbable", UNKNOWN),
    ("relu^2", 2, 3, "sometimes absorbable", UNKNOWN),
    ("relu^2", 2, 4, "sometimes absorbable", PROVED),
    ("relu^2", 2, 2, "generically not absorbable", PROVED),
    ("relu^2", 2, 4, "always absorbable at width 12", PROVED),
    ("relu^2", 2, 4, "always absorbable at width 11", UNKNOWN),
    ("relu^3", 2, 4, "always absorbable at width 40", UNKNOWN),  # not in the table
    # square, poly, bilinear: never if 2m < rank S; generically: no claim.
    ("square", 3, 1, "never absorbable", PROVED),
    ("square", 2, 1, "never absorbable", UNKNOWN),
    ("square", 2, 2, "generically not absorbable", UNKNOWN),
    ("square", 2, 2, "always absorbable at width 6", PROVED),
    ("square", 2, 2, "always absorbable at width 5", UNKNOWN),
    ("poly[1, 0, 2]", 1, 1, "always absorbable at width 3", PROVED),  # degree 2
    ("poly[0, 0, 0, 1]", 3, 1, "never absorbable", PROVED),
    ("poly[0, 0, 0, 1]", 2, 2, "always absorbable at width 40", UNKNOWN),
    ("bilinear", 3, 1, "never absorbable", PROVED),
    ("bilinear", 2, 2, "always absorbable at width 4", PROVED),
    ("bilinear", 2, 2, "always absorbable at width 3", UNKNOWN),
    ("bilinear", 2, 2, "generically not absorbable", UNKNOWN),
    # swiglu, geglu, reglu, glu: never if 2m < rank S, sometimes if m >= rank S,
    # generically not at m, always at m + rank S (linear neurons).
    ("swiglu", 3, 1, "never absorbable", PROVED),
    ("swiglu", 3, 2, "never absorbable", UNKNOWN),
    ("swiglu", 3, 2, "sometimes absorbable", UNKNOWN),
    ("swiglu", 3, 3, "sometimes absorbable", PROVED),
    ("swiglu", 3, 3, "generically not absorbable", PROVED),
    ("swiglu", 3, 3, "always absorbable at width 6", PROVED),
    ("swiglu", 3, 3, "always absorbable at width 5", UNKNOWN),
    ("geglu", 1, 1, "always absorbable at width 2", PROVED),
    ("reglu", 1, 1, "sometimes absorbable", PROVED),
    ("glu", 2, 2, "always absorbable", REFUTED),
    ("glu", 2, 2, "always absorbable at width 4", PROVED),
    # T3 (any depth) and T2∞ (depth 1).
    ("tanh", 2, 3, "never absorbable", PROVED),
    ("sigmoid", 1, 5, "sometimes absorbable", REFUTED),
    ("abs", 2, 3, "never absorbable", PROVED),
    ("leaky_relu(-1)", 1, 2, "generically not absorbable", PROVED),
    ("abs", 2, 3, "always absorbable at width 50", REFUTED),
    # identity: §4's table, biases change only a constant (rank S = 2, m = 1, w = 1).
    ("identity", 2, 1, "sometimes absorbable", PROVED),
    ("identity", 2, 1, "always absorbable", REFUTED),
]


@pytest.mark.parametrize(("act", "dim", "width", "claim", "expected"), TABLE)
def test_the_bias_family_table(tmp_path, act, dim, width, claim, expected):
    [(_, outcome, _)] = outcomes(family(act, dim, width, claim), tmp_path)
    assert outcome == expected


def test_the_table_sees_both_answers_and_a_never_stub_fails():
    counts = {PROVED: 0, REFUTED: 0, UNKNOWN: 0}
    for row in TABLE:
        counts[row[4]] += 1
    assert min(counts.values()) >= 8  # proved, refuted and unknown all well represented

    def stub(claim: str) -> str:  # "never absorbable, and nothing else"
        return PROVED if claim.startswith("never") else REFUTED

    wrong = [row for row in TABLE if row[4] != UNKNOWN and stub(row[3]) != row[4]]
    assert len(wrong) >= 10


def test_rank_thresholds_use_the_rank_of_a_matrix_skip(tmp_path):
    rank_one = "[[1, 1], [1, 1]]"  # rank S = 1 with d = 2
    text = (family("relu^2", 2, 2, "sometimes absorbable", rank_one)
            + "claim B is always absorbable at width 6\n")
    text += "block G { activation swiglu dim 2 width 1 skip [[1, 1], [1, 1]] bias }\n" \
            "claim G is sometimes absorbable\nclaim G is always absorbable at width 2\n"
    assert [o for _, o, _ in outcomes(text, tmp_path)] == [PROVED, PROVED, PROVED, PROVED]


def test_depth_two_keeps_only_the_rules_that_hold(tmp_path):
    text = (family("abs", 2, 3, "never absorbable", depth=2)
            + "block T { activation tanh dim 2 width 3 depth 2 bias }\n"
              "claim T is never absorbable\n"
              "block Q { activation relu^2 dim 2 width 1 depth 2 bias }\n"
              "claim Q is never absorbable\n")
    assert [o for _, o, _ in outcomes(text, tmp_path)] == [UNKNOWN, PROVED, UNKNOWN]


def test_a_biased_plain_family_is_plain_but_not_on_one_line(tmp_path):
    text = (family("relu", 1, 3, "always absorbable", "none")
            + "claim B is always absorbable at width 2\n")
    assert [o for _, o, _ in outcomes(text, tmp_path)] == [PROVED, UNKNOWN]


# ---- concrete blocks: T3 and T2∞ -------------------------------------------------------------

def _concrete(act: str, up: list[list[int]], up_bias: list[int], down: list[list[int]],
              skip: str, depth: int = 1) -> str:
    layer = f"up = {up} up_bias = {up_bias} down = {down}"
    layers = layer if depth == 1 else " ".join(
        f"layer {n} {{ {layer} }}" for n in range(1, depth + 1))
    return (f"block B {{ activation {act} dim {len(down)} width {len(up)} depth {depth} "
            f"skip {skip} bias {layers} }}\nclaim B is not absorbable\n"
            "claim min width of B is none\n")


def _b0_odd(block: dict[str, Any], x0: list[Fraction]) -> bool:
    """Independent evaluation of B0 (biases dropped) at ±x0, σ = |z| or leaky(-1) = |z|."""
    def at(x: list[Fraction]) -> list[Fraction]:
        skip = block["skip"]
        for layer in block["layers"]:
            up = [[F(v) for v in row] for row in layer["up"]]
            down = [[F(v) for v in row] for row in layer["down"]]
            hidden = [abs(sum(u * v for u, v in zip(row, x, strict=True))) for row in up]
            out = [sum(d * h for d, h in zip(row, hidden, strict=True)) for row in down]
            if "scale" in skip:
                lin = [F(skip["scale"]) * v for v in x]
            else:
                lin = [sum(F(s) * v for s, v in zip(row, x, strict=True))
                       for row in skip["matrix"]]
            x = [a + b for a, b in zip(lin, out, strict=True)]
        return x
    return at(x0) != at([-v for v in x0])


def test_t2_at_infinity_on_random_concrete_blocks(tmp_path):
    """Refuted exactly when B0 is shown odd somewhere (independent evaluation); at depth 1
    with S != 0 always refuted; with S = 0 never refuted (B0 even, nothing to show): the
    block is plain and absorbs itself, while its min width stays open."""
    rng = random.Random(7)
    skips = ["identity", "none", "[[0, 1], [0, 0]]", "[[2, 0], [1, 0]]", "-1"]
    seen = {PROVED: 0, UNKNOWN: 0, REFUTED: 0}
    for trial in range(24):
        skip, depth = skips[trial % len(skips)], 1 + trial % 2
        act = "abs" if trial % 3 else "leaky_relu(-1)"
        m = rng.randint(1, 3)
        up = [[rng.randint(-2, 2) for _ in range(2)] for _ in range(m)]
        down = [[rng.randint(-2, 2) for _ in range(m)] for _ in range(2)]
        bias = [rng.randint(-3, 3) for _ in range(m)]
        folder = tmp_path / str(trial)
        folder.mkdir()
        results = outcomes(_concrete(act, up, bias, down, skip, depth), folder)
        (_, outcome, doc), (_, min_outcome, _) = results
        seen[outcome] += 1
        if skip == "none":  # plain (docs/rules.md §8): the block itself is a witness
            assert (outcome, min_outcome) == (REFUTED, UNKNOWN)
            assert doc["certificate"]["check"] == "the block itself (skip none), zero-padded"
            continue
        assert outcome == min_outcome
        if outcome == PROVED:
            cert = doc["certificate"]
            assert cert["kind"] == "parity point at infinity"
            assert _b0_odd(doc["blocks"]["B"], [F(v) for v in cert["x0"]])
        if depth == 1:
            assert outcome == PROVED
    assert seen[PROVED] >= 8 and seen[REFUTED] >= 4, seen


def test_t3_on_a_concrete_biased_block(tmp_path):
    text = _concrete("tanh", [[1, 0], [0, 2]], [1, -1], [[1, 0], [0, 1]], "identity")
    text += "block N { activation tanh dim 1 width 1 skip none bias up = [[1]] " \
            "up_bias = [2] down = [[1]] }\nclaim N is not absorbable\n"
    got = outcomes(text, tmp_path)
    assert [o for _, o, _ in got[:2]] == [PROVED, PROVED]
    assert got[2][1] != PROVED  # N is plain (skip none): T3 needs S != 0
    assert got[0][2]["certificate"]["rule"] == "T3"


# ---- the checker: what survives biases, and nothing else -----------------------------------

def _relabelled(doc: dict[str, Any]) -> dict[str, Any]:
    doc = copy.deepcopy(doc)
    block = doc["blocks"]["B"]
    block["bias"] = True
    for layer in block["layers"] or []:
        layer["up_bias"] = ["0"] * len(layer["up"])
        layer["down_bias"] = ["0"] * len(layer["down"])
        if "gate" in layer:
            layer["gate_bias"] = ["0"] * len(layer["up"])
    return doc


@pytest.mark.parametrize(("text", "rule"), [
    ("block B { activation relu^2 dim 2 width 4 }\nclaim B is never absorbable\n", "T1"),
    ("block B { activation relu^2 dim 1 width 1 up = [[1]] down = [[1]] }\n"
     "claim B is not absorbable\n", "T1"),
    ("block B { activation swiglu dim 2 width 4 }\nclaim B is never absorbable\n", "T4"),
    ("block B { activation square dim 2 width 2 }\nclaim B is never absorbable\n", "T1"),
    ("block B { activation abs dim 1 width 1 up = [[1]] down = [[1]] }\n"
     "claim B is not absorbable\n", "T2"),
    ("block B { activation abs dim 2 width 2 }\nclaim B is never absorbable\n", "T2"),
    ("block B { activation relu dim 1 width 3 }\nclaim B is always absorbable\n", None),
    ("block B { activation relu dim 2 width 2 }\nclaim B is generically not absorbable\n",
     None),
])
def test_bias_free_certificates_relabelled_as_biased_are_rejected(tmp_path, text, rule):
    [(_, outcome, doc)] = outcomes(text, tmp_path)
    assert outcome == PROVED and verify(doc).status == "valid"
    if rule is not None:
        assert doc["certificate"]["rule"] == rule
    verdict = verify(_relabelled(doc))
    assert verdict.status == "invalid" and "biases" in verdict.reason, verdict.reason


def test_biased_certificates_check_their_fields(tmp_path):
    text = (family("tanh", 2, 3, "never absorbable")
            + _concrete("abs", [[1, 0], [0, 1]], [1, 2], [[1, 0], [0, 1]], "identity"))
    text = text.replace("block B { activation abs", "block A { activation abs")
    text = text.replace("claim B is not absorbable\nclaim min width of B is none",
                        "claim A is not absorbable\nclaim min width of A is none")
    text += "block G { activation swiglu dim 3 width 4 bias }\n" \
            "claim G is always absorbable at width 7\n"
    docs = [doc for _, outcome, doc in outcomes(text, tmp_path) if outcome == PROVED]
    assert len(docs) == 4
    t3, t2inf, _, linear = docs

    def broken(doc: dict[str, Any], edit: Any) -> str:
        doc = copy.deepcopy(doc)
        edit(doc["certificate"], doc)
        verdict = verify(doc)
        assert verdict.status == "invalid"
        return verdict.reason

    broken(t3, lambda c, d: c.update(rule="T4", property="F"))
    broken(t3, lambda c, d: c.update(rule="T2", property="E"))
    broken(t2inf, lambda c, d: c.update(B0_at_x0=c["B0_at_minus_x0"]))
    broken(t2inf, lambda c, d: c.update(kind="parity point", B_at_x0=c["B0_at_x0"],
                                        B_at_minus_x0=c["B0_at_minus_x0"], rule="T2",
                                        property="E"))
    broken(t2inf, lambda c, d: d["blocks"]["A"]["skip"].update(scale="0"))
    broken(linear, lambda c, d: c.update(width=6))
    broken(linear, lambda c, d: c.update(gamma="0"))
    broken(linear, lambda c, d: c.update(rule="§4 genericity"))
    broken(linear, lambda c, d: d["blocks"]["B" if "B" in d["blocks"] else "G"]
           ["activation"].update(kind="tanh", name="tanh"))


# §8.3 rows certified with a biased example member: the member is built as §8.3
# says and its witness comes from §8.2's flip sets; the checker re-verifies it.
EXAMPLE_ROWS = [
    ("relu^2", 2, 4, "sometimes absorbable", "§8.3 relu^2 flips"),
    ("relu^2", 1, 3, "sometimes absorbable at width 5", "§8.3 relu^2 flips"),
    ("relu^2", 2, 4, "always absorbable at width 12", "§8.3 relu^2 pairs"),
    ("swiglu", 3, 4, "sometimes absorbable", "§8.3 linear neuron in the block"),
    ("geglu", 2, 2, "sometimes absorbable", "§8.3 linear neuron in the block"),
    ("reglu", 2, 3, "sometimes absorbable at width 4", "§8.3 linear neuron in the block"),
    ("glu", 2, 2, "sometimes absorbable", "§8.3 linear neuron in the block"),
    ("swiglu", 3, 4, "always absorbable at width 7", "§8.3 linear neurons"),
    ("glu", 1, 2, "always absorbable at width 3", "§8.3 linear neurons"),
]


def _example_doc(tmp_path: Path, act: str, dim: int, width: int, claim: str,
                 skip: str = "identity") -> dict[str, Any]:
    [(_, outcome, doc)] = outcomes(family(act, dim, width, claim, skip), tmp_path)
    assert outcome == PROVED
    return doc


@pytest.mark.parametrize(("act", "dim", "width", "claim", "rule"), EXAMPLE_ROWS)
def test_biased_rows_carry_a_checked_biased_example(tmp_path, act, dim, width, claim, rule):
    doc = _example_doc(tmp_path, act, dim, width, claim)
    cert = doc["certificate"]
    assert cert["rule"] == rule and "example" in cert, cert
    layers = cert["example"]["layers"]
    assert all("up_bias" in layer and "down_bias" in layer for layer in layers)
    assert doc["blocks"]["B"]["bias"] is True
    assert cert["example"]["witness"]["check"] == "§8.2 flip identity"
    assert verify(doc).status == "valid"


def _broken_example(doc: dict[str, Any], edit: Any) -> str:
    doc = copy.deepcopy(doc)
    edit(doc["certificate"]["example"])
    verdict = verify(doc)
    assert verdict.status == "invalid", edit
    return verdict.reason


@pytest.mark.parametrize(("act", "dim", "width", "claim", "rule"),
                         [EXAMPLE_ROWS[0], EXAMPLE_ROWS[3], EXAMPLE_ROWS[6]])
def test_a_tampered_biased_example_is_rejected(tmp_path, act, dim, width, claim, rule):
    doc = _example_doc(tmp_path, act, dim, width, claim)
    layer = "layers"

    def down(example: dict[str, Any]) -> None:  # the member no longer cancels S
        example[layer][0]["down"][0][0] = "7"

    def up_bias(example: dict[str, Any]) -> None:
        example[layer][0]["up_bias"][0] = "5"

    def no_biases(example: dict[str, Any]) -> None:  # biases must be stated
        for entry in example[layer]:
            for name in ("up_bias", "gate_bias", "down_bias"):
                entry.pop(name, None)

    def narrower(example: dict[str, Any]) -> None:  # a member of another width
        entry = example[layer][0]
        for name in ("up", "gate", "up_bias", "gate_bias"):
            if name in entry:
                entry[name] = entry[name][:-1]
        entry["down"] = [row[:-1] for row in entry["down"]]

    def witness_c(example: dict[str, Any]) -> None:
        example["witness"]["layers"][0]["down_bias"][0] = "1/3"

    for edit in (down, up_bias, no_biases, narrower, witness_c):
        _broken_example(doc, edit)


def test_rows_without_biased_examples_keep_rejecting_bias_fields(tmp_path):
    """The relu-family example stays a zero-bias member stated bias-free; square pairs and
    a relu² member with no room (2 rank S > m) stay rule-only."""
    doc = _example_doc(tmp_path, "relu", 2, 2, "sometimes absorbable")
    assert doc["certificate"]["rule"] == "§8.3 subset condition"
    assert verify(doc).status == "valid"

    def biased(example: dict[str, Any]) -> None:
        example["layers"][0]["up_bias"] = ["0", "0"]

    assert "zero (absent) biases" in _broken_example(doc, biased)
    for act, dim, width, claim in (("square", 2, 2, "always absorbable at width 6"),
                                   ("relu^2", 2, 2, "always absorbable at width 10")):
        assert "example" not in _example_doc(tmp_path, act, dim, width, claim)["certificate"]


def test_random_skips_get_checked_examples(tmp_path):
    """Random rank-1 and rank-2 skips: every member built has a flip witness the checker
    accepts (relu² needs 2 rank S <= m, gated rank S <= m)."""
    rng = random.Random(13)
    seen = 0
    for _ in range(8):
        act = rng.choice(["relu^2", "swiglu", "glu", "reglu"])
        rows = [[F(rng.randint(-3, 3), rng.choice([1, 2])) for _ in range(2)] for _ in range(2)]
        if rng.random() < 0.5:
            rows[1] = [2 * x for x in rows[0]]
        if all(x == 0 for row in rows for x in row):
            continue
        skip = "[" + ", ".join("[" + ", ".join(str(x) for x in row) + "]" for row in rows) + "]"
        doc = _example_doc(tmp_path, act, 2, 4, "sometimes absorbable", skip)
        assert "example" in doc["certificate"] and verify(doc).status == "valid"
        seen += 1
    assert seen >= 6
