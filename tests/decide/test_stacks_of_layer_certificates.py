"""Stacks of per-layer certificates (docs/rules.md "Depth (stacks)", §8.4): a depth ≥ 2 block
whose every layer, alone, is absorbable at width w — by any rule: §8's constructions, §8.2 or
§5 flips, §4 — is absorbable at w by the stack of the layers' witnesses. The certificate keeps
each layer's own certificate; the checker verifies each against that layer alone. Tampered
and misplaced certificates are rejected, and a layer that is not absorbable leaves the stack
unknown."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from absorb_formal.checker.dispatch import verify
from absorb_formal.export.witness import read_export
from absorb_formal.language.load import load_text

LAYER1 = """    layer 1 {{
        gate = [[1, 2], [3, -1]]{g1}
        up   = [[1, 0], [2, 1]]{b1}
        down = [[1, 1], [0, 1]]{c1}
    }}"""
LAYER2 = """    layer 2 {{
        gate = [[2, 1], [1, -1]]{g2}
        up   = [[1, 1], [0, 1]]{b2}
        down = [[1, 0], [1, 1]]{c2}
    }}"""


def stack(act: str, biased: bool, gated: bool = True, skip: str = "identity") -> str:
    biases = dict(g1="   gate_bias = [1, 2]", b1="   up_bias = [0, 1]",
                  c1="   down_bias = [0, 0]", g2="   gate_bias = [3, 1]",
                  b2="   up_bias = [1, 1]", c2="   down_bias = [1, 0]")
    if not biased:
        biases = dict.fromkeys(biases, "")
    text = "\n".join((LAYER1.format(**biases), LAYER2.format(**biases)))
    if not gated:
        text = "\n".join(line for line in text.splitlines() if "gate" not in line)
    return (f"block B {{\n    activation {act}\n    dim 2  width 2  depth 2  skip {skip}"
            f"{'  bias' if biased else ''}\n{text}\n}}\n")


def decided(tmp_path: Path, cli, text: str, claims: str) -> tuple[list[dict[str, Any]],
                                                                    list[dict[str, Any]]]:
    spec = tmp_path / "s.mlp"
    spec.write_text(text + claims, encoding="utf-8")
    run = cli("--certificates", tmp_path / "certs", "--json", spec)
    results = run.json()["files"][0]["results"]
    docs = [json.loads((tmp_path / "certs" / f"s.mlp.{r['line']}.json").read_text())
            for r in results]
    return results, docs


# (activation, biased, gated, width where every layer is absorbable by its own rule)
CASES = [("swiglu", True, True, 4),    # §8 linear neurons (σ(1) = silu(1), symbolic)
         ("glu", False, True, 4),      # §8 linear neurons without biases (σ(0) = ½)
         ("relu^2", True, False, 10),  # §8 square quadruples
         ("glu", True, True, 4)]


@pytest.mark.parametrize(("act", "biased", "gated", "width"), CASES)
def test_a_stack_of_absorbable_layers_is_proved_and_checked(tmp_path, cli, act, biased, gated,
                                                            width):
    results, docs = decided(tmp_path, cli, stack(act, biased, gated),
                            f"claim B is absorbable at width {width}\n"
                            f"claim min width of B is {width}\n")
    assert [r["outcome"] for r in results] == ["proved", "unknown"], results
    assert results[0]["method"] == "stack of per-layer certificates"
    assert results[0]["crosscheck"]["max_rel_error"] < 1e-12, results[0]
    assert results[1]["min_width_bounds"] == [1, width], results[1]
    cert = docs[0]["certificate"]
    assert cert["check"] == "each layer absorbed by its own certificate"
    assert len(cert["per_layer"]) == 2
    for doc in docs:
        assert verify(doc).status == "valid", doc["certificate"]
    assert cli("check", tmp_path / "certs").code == 0


def _forged(doc: dict[str, Any], edit) -> str:  # noqa: ANN001 - a function editing a doc
    broken = copy.deepcopy(doc)
    edit(broken["certificate"])
    return verify(broken).status


def test_tampered_stack_certificates_are_invalid(tmp_path, cli):
    _, docs = decided(tmp_path, cli, stack("glu", False), "claim B is absorbable at width 4\n")
    doc = docs[0]
    assert verify(doc).status == "valid"

    def shorter(c: dict[str, Any]) -> None:
        c["per_layer"] = c["per_layer"][:1]

    def wider(c: dict[str, Any]) -> None:
        c["width"] = 5  # beyond the claim's 4

    def narrower(c: dict[str, Any]) -> None:
        c["width"] = 3  # below the layers' witnesses (2 + rank S = 4)

    def not_a_witness(c: dict[str, Any]) -> None:
        c["per_layer"][1] = {"kind": "subset search", "method": "cp-sat"}

    def nested(c: dict[str, Any]) -> None:
        c["per_layer"][1] = copy.deepcopy(c)

    def float_width(c: dict[str, Any]) -> None:
        c["width"] = 4.0

    for edit in (shorter, wider, narrower, not_a_witness, nested, float_width):
        broken = copy.deepcopy(doc)
        edit(broken["certificate"])
        verdict = verify(broken)
        assert verdict.status == "invalid", edit.__name__


def test_a_layer_certificate_moved_to_another_layer_is_invalid(tmp_path, cli):
    """§5 flip witnesses embed each layer's flipped weights: layer 1's on layer 2 fails."""
    skip = "[[-3, -1], [-2, -1]]"  # −(d₁u₁ᵀ + d₂u₂ᵀ) of layer 1: J = {1, 2} flips it
    text = stack("glu", False, skip=skip).replace(
        "gate = [[2, 1], [1, -1]]", "gate = [[1, 2], [3, -1]]").replace(
        "up   = [[1, 1], [0, 1]]", "up   = [[1, 0], [2, 1]]").replace(
        "down = [[1, 0], [1, 1]]", "down = [[1, 1], [0, 1]]")
    # both layers equal: each absorbable at its own width 2 by §5's flips
    results, docs = decided(tmp_path, cli, text, "claim B is absorbable\n")
    assert results[0]["outcome"] == "proved", results
    assert verify(docs[0]).status == "valid"
    parts = docs[0]["certificate"]["per_layer"]
    assert all(p["check"] == "GLU sign-flip identity" for p in parts)
    # a second block whose layer 2 differs: layer 1's certificate does not fit it
    other = text.replace("    layer 2 {\n        gate = [[1, 2], [3, -1]]",
                         "    layer 2 {\n        gate = [[2, 1], [1, -1]]")
    spec = tmp_path / "t.mlp"
    spec.write_text(other + "claim B is absorbable\n", encoding="utf-8")
    cli("--certificates", tmp_path / "other", spec)
    forged = json.loads(next((tmp_path / "other").glob("*.json")).read_text())
    forged["outcome"], forged["certificate"] = "proved", copy.deepcopy(docs[0]["certificate"])
    verdict = verify(forged)
    assert verdict.status == "invalid" and "layer 2" in verdict.reason, verdict


def test_a_biased_stack_accepts_only_layer_certificates_that_keep_biases(tmp_path, cli):
    """A bias-free rule's certificate (§5's sign flips, which ignore biases) inside a biased
    stack is refused by the bias gate, as it is alone."""
    _, docs = decided(tmp_path, cli, stack("glu", True), "claim B is absorbable at width 4\n")
    doc = docs[0]
    assert verify(doc).status == "valid"
    part = {"kind": "witness", "check": "GLU sign-flip identity", "width": 2, "c": "1/2",
            "layers": [{"up": [["1", "0"], ["2", "1"]], "down": [["1", "1"], ["0", "1"]],
                        "gate": [["1", "2"], ["3", "-1"]]}], "argument": ""}

    def bias_free_part(c: dict[str, Any]) -> None:
        c["per_layer"][0] = part

    assert _forged(doc, bias_free_part) == "invalid"


def test_a_layer_not_absorbable_alone_leaves_the_stack_unknown(tmp_path, cli):
    results, _ = decided(tmp_path, cli, stack("swiglu", True), "claim B is absorbable\n")
    assert results[0]["outcome"] == "unknown", results
    assert "layer 1" in results[0]["reason"], results[0]


def test_the_exported_stack_computes_the_block(tmp_path, cli):
    spec = tmp_path / "s.mlp"
    spec.write_text(stack("relu^2", True, gated=False) + "claim B is absorbable at width 10\n",
                    encoding="utf-8")
    # the relu² quadruples cancel terms of size ℓ² down to ℓ: float64 arithmetic alone
    # leaves them about 4e-13 of the output off, past the default float64 gate (16 ε)
    # now that the gate measures against the output, not the terms summed; the test's own
    # tolerance below is 1e-9
    run = cli("export", spec, "B", "--width", "10", "--out", tmp_path / "free.npz",
              "--max-error", "1e-9")
    assert run.code == 0, run.out + run.err
    arrays, record = read_export(tmp_path / "free.npz")
    assert record["method"] == "stack of per-layer certificates"
    block = load_text(spec.read_text(), "s.mlp", tmp_path).blocks["B"]
    x = np.random.default_rng(1).standard_normal((40, 2))
    want = block.evaluate(x)
    h = x
    for n in (1, 2):
        z = h @ arrays[f"layer{n}.up"].T + arrays[f"layer{n}.up_bias"]
        h = (np.maximum(z, 0) ** 2) @ arrays[f"layer{n}.down"].T + arrays[f"layer{n}.down_bias"]
    assert np.abs(h - want).max() < 1e-9 * max(1.0, float(np.abs(want).max()))


def test_a_biased_relu_stack_min_width_with_the_half_activation_bound_checks(tmp_path,
                                                                           monkeypatch, cli):
    """§9 below (r = d, small down weights) and each layer absorbed above by a large-block
    construction (MAX_EXACT_COST lowered so that d = 6 counts as large): the bias gate accepts
    the half-activation refutation under a stack of per-layer certificates (a gate that
    wanted no certificate below would raise a false alarm here)."""
    import random

    from absorb_formal.decide import concrete

    monkeypatch.setattr(concrete, "MAX_EXACT_COST", 0)
    rng = random.Random(1)
    d = 6

    def mat(rows: int, cols: int, entry) -> str:  # noqa: ANN001 - an entry maker
        return "[" + ", ".join("[" + ", ".join(entry() for _ in range(cols)) + "]"
                               for _ in range(rows)) + "]"

    def vec(n: int) -> str:
        return "[" + ", ".join(str(rng.randint(-2, 2)) for _ in range(n)) + "]"

    up = lambda: str(rng.randint(-3, 3) or 1)  # noqa: E731
    down = lambda: f"{rng.randint(-3, 3) or 1}/100000"  # noqa: E731
    layers = "\n".join(f"    layer {k} {{ up = {mat(d, d, up)} up_bias = {vec(d)} "
                       f"down = {mat(d, d, down)} down_bias = {vec(d)} }}" for k in (1, 2))
    text = (f"block B {{\n    activation relu\n    dim {d}  width {d}  depth 2  bias\n"
            f"{layers}\n}}\n")
    results, docs = decided(tmp_path, cli, text, f"claim min width of B is {2 * d}\n")
    assert results[0]["outcome"] != "unknown" or results[0].get("min_width_bounds"), results
    cert = docs[0]["certificate"]
    below = cert.get("below")
    assert below is not None and below["kind"] == "half-activation bound", cert
    above = cert["witness"] if cert["kind"] == "minimal width" else cert["above"]
    assert above["check"] == "each layer absorbed by its own certificate", above
    assert verify(docs[0]).status == "valid", verify(docs[0]).reason


def test_a_stack_with_an_irrational_layer_witness_says_why_it_does_not_export(tmp_path, cli):
    spec = tmp_path / "s.mlp"
    spec.write_text(stack("swiglu", True) + "claim B is absorbable at width 4\n",
                    encoding="utf-8")
    run = cli("export", spec, "B", "--width", "4", "--out", tmp_path / "free.npz")
    assert run.code == 2 and "σ(γ) = silu(1), which is not rational" in run.err, run.err
    assert not (tmp_path / "free.npz").exists()
