"""§8.2 flip sets at scale (docs/rules.md §8.2, "Flip sets at scale: the unique solution mod
q"): large biased relu², gated (swiglu, geglu, reglu) and glu blocks decided at their own width
by the unique solution of §8.2's system mod q — generic blocks refuted, planted flip sets
proved, a 0/1 candidate that fails exactly refuted at the entry where it fails — each
certificate re-checked from the checker's own reading of the weights, every field of it
checked (mutations)."""

from __future__ import annotations

import copy
import json
from fractions import Fraction
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from absorb_formal.checker import verify
from absorb_formal.checker.kernel import modlu, systems
from absorb_formal.checker.kernel.contract import FLIP_RULES, Check, Kind
from absorb_formal.decide import flips_large
from absorb_formal.export.witness import read_export
from absorb_formal.language.load import load_text

from .test_large_blocks_at_every_width import doc_at, every_leaf_is_checked, prove, weights

Q = modlu.primes(1)[0]
GATED = ("swiglu", "geglu", "reglu")
P1, P2 = 1, 3  # the planted neurons (0-based)


def arrays(act: str, d: int, m: int, plant: str | None, seed: int = 0
           ) -> dict[str, np.ndarray]:
    """Integer weights in ±9 (float64) and S = I, or a planted flip set J = {P1, P2}:
    - "pair": J's terms solve §8.2's system exactly (relu²: u_J = u_I, d_J = −d_I, then
      S = −2(β_I − β_J) d_I u_Iᵀ; gated: g, u and β shared, d_J = −d_I, S = −2a(γ_I − γ_J)
      d_I u_Iᵀ; glu: S = −(d_I u_Iᵀ + d_J u_Jᵀ), c = 1/2);
    - "linear": the same with D's columns P1, P2 times q + 1 (glu: S kept): the unique solution
      is 1/(q + 1) on J, which is 1 mod q, and J's linear part fails;
    - "quadratic" (relu²): d_J = −(q + 1)·d_I and S as for "pair": the solution is 1 on P1 and
      1/(q + 1) ≡ 1 on P2, and J's quadratic part fails."""
    rng = np.random.default_rng(seed)

    def small(*shape: int) -> np.ndarray:
        values = rng.integers(1, 10, shape) * rng.choice([-1, 1], shape)
        return values.astype(np.float64)

    out = {"up": small(m, d), "down": small(d, m), "b": small(m), "c": small(d)}
    if act != "relu^2":
        out.update(gate=small(m, d), g=small(m))
    skip = np.eye(d)
    up, down, b, g = out["up"], out["down"], out["b"], out.get("g")
    if plant is not None:
        if act == "glu":
            skip = -(np.outer(down[:, P1], up[P1]) + np.outer(down[:, P2], up[P2]))
        else:
            up[P2] = up[P1]
            down[:, P2] = -down[:, P1]
            if act == "relu^2":
                b[P2] = b[P1] + 3
                skip = -2 * (b[P1] - b[P2]) * np.outer(down[:, P1], up[P1])
            else:
                assert g is not None
                out["gate"][P2] = out["gate"][P1]
                b[P2], g[P2] = b[P1], g[P1] + 2
                skip = -(g[P1] - g[P2]) * np.outer(down[:, P1], up[P1])  # 2a = 1
        if plant == "linear":
            down[:, [P1, P2]] *= Q + 1
        elif plant == "quadratic":
            assert act == "relu^2"
            down[:, P2] *= Q + 1
    out["S"] = skip
    return out


def spec(tmp_path: Path, act: str, d: int, m: int, plant: str | None = None,
         literal_bias: bool = False, seed: int = 0, bias: bool = True) -> str:
    found = arrays(act, d, m, plant, seed)
    np.savez(tmp_path / "w.npz", **found)
    if not bias:  # glu without biases (§5): the same up, down, gate and S (a literal, which
        # `verify` reads from the document; a loaded skip is read by `check` only)
        skip = "[" + ", ".join("[" + ", ".join(str(int(v)) for v in row) + "]"
                               for row in found["S"]) + "]"
        return f"""block Big {{
    activation {act}  dim {d}  width {m}  skip {skip}
    up = load("w.npz", "up")
    down = load("w.npz", "down")
    gate = load("w.npz", "gate")
}}
"""
    gate = ('\n    gate = load("w.npz", "gate")\n    gate_bias = load("w.npz", "g")'
            if act != "relu^2" else "")
    up_bias = ("[" + ", ".join(str(int(v)) for v in found["b"]) + "]" if literal_bias
               else 'load("w.npz", "b")')
    # a literal skip for blocks stored by source (a loaded one is read by `check` only)
    skip = 'load("w.npz", "S")' if plant is not None and not literal_bias else "[" + ", ".join(
        "[" + ", ".join(str(int(v)) for v in row) + "]" for row in found["S"]) + "]"
    return f"""block Big {{
    activation {act}  dim {d}  width {m}  skip {skip}  bias
    up = load("w.npz", "up")
    down = load("w.npz", "down"){gate}
    up_bias = {up_bias}
    down_bias = load("w.npz", "c")
}}
"""


def checked(tmp_path: Path, claims: int) -> list[tuple[Path, dict]]:
    out = []
    for claim in range(claims):
        path, doc = doc_at(tmp_path, claim)
        assert verify(doc, weights(path, doc)).status == "valid", doc["certificate"]
        out.append((path, doc))
    return out


# ---- the projected system -------------------------------------------------------------------

@pytest.mark.parametrize("gated", [False, True])
def test_the_projected_flip_system_is_the_functionals_applied_to_each_term(gated):
    """A[j, i] = Σ_r p_{j,r} b_jᵀ X_i,r b_j + p_jᵀ L_i q_j with X_i = d_i ⊗ sym(g_i u_iᵀ),
    L_i = d_i (λ_i u_i + μ_i g_i)ᵀ, b_j = p_jᵀ T q_j mod q, against the d³ tensor in
    Python integers (relu²: g = u, μ = 0)."""
    d, m, q = 4, 7, Q
    rng = np.random.default_rng(3)
    down, up = rng.integers(0, q, (d, m)), rng.integers(0, q, (m, d))
    gate = rng.integers(0, q, (m, d)) if gated else up
    lam, mu = rng.integers(0, q, m), rng.integers(0, q, m) if gated else np.zeros(m, int)
    target = rng.integers(0, q, (d, d))
    work = systems.projected_flip_system(down, up, gate, lam, mu, target, 0, q)
    p_, q_, b_ = (systems.random_residues(0, s, m, d, q).astype(np.int64).tolist()
                  for s in (0, 1, 2))
    inverse_two = pow(2, -1, q)
    for j in range(m):
        for i in range(m):
            g, u = [int(v) for v in gate[i]], [int(v) for v in up[i]]
            tensor = sum(p_[j][r] * int(down[r, i]) * b_[j][s] * b_[j][t]
                         * (g[s] * u[t] + u[s] * g[t]) * inverse_two
                         for r in range(d) for s in range(d) for t in range(d))
            line = [int(lam[i]) * u[c] + int(mu[i]) * g[c] for c in range(d)]
            linear = sum(p_[j][r] * int(down[r, i]) * line[c] * q_[j][c]
                         for r in range(d) for c in range(d))
            assert int(work[j, i]) == (tensor + linear) % q
        rhs = sum(p_[j][r] * int(target[r, c]) * q_[j][c] for r in range(d) for c in range(d))
        assert int(work[j, m]) == rhs % q


# ---- embedded blocks routed by cost ----------------------------------------------------------

D, M = 16, 40  # 40·(16³ + 16²) entries in the small path's system: past MAX_EXACT_COST


@pytest.mark.parametrize("act", ["relu^2", *GATED, "glu"])
def test_a_generic_biased_block_is_refuted_at_its_own_width_and_below(tmp_path, cli,
                                                                      monkeypatch, act):
    results = prove(tmp_path, cli, monkeypatch, spec(tmp_path, act, D, M),
                    f"claim Big is absorbable\nclaim Big is absorbable at width {M - 1}\n")
    assert [r["outcome"] for r in results] == ["refuted", "refuted"], results
    assert results[0]["method"] == flips_large.METHOD
    assert results[1]["method"] == flips_large.KEY_METHOD  # below m: m keys need m neurons
    for n, (path, doc) in enumerate(checked(tmp_path, 2)):
        cert = doc["certificate"]
        if n == 0:
            assert cert["kind"] == Kind.UNIQUE_SUBSET_SOLUTION and "neuron" in cert
        else:
            assert cert["kind"] == "key count" and cert["keys"] == M, cert
        assert cert["rule"] == FLIP_RULES[
            "relu^2" if act == "relu^2" else "Og(c)" if act == "glu" else "gated O(a)+N"]
        every_leaf_is_checked(path, doc)


@pytest.mark.parametrize("act", ["relu^2", *GATED, "glu"])
def test_a_planted_flip_set_is_proved_and_checked(tmp_path, cli, monkeypatch, act):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "big.mlp").write_text(spec(tmp_path, act, D, M, "pair")
                                      + f"claim Big is absorbable\nclaim Big is absorbable at "
                                        f"width {M + 5}\n", encoding="utf-8")
    run = cli("--crosscheck", "2000", "--certificates", "certs", "--json", "big.mlp")
    results = run.json()["files"][0]["results"]
    assert [r["outcome"] for r in results] == ["proved", "proved"], results
    assert results[0]["crosscheck"]["max_rel_error"] < 1e-12, results[0]
    for path, doc in checked(tmp_path, 2):
        assert doc["certificate"]["check"] == Check.ROWS_NEGATED
        assert doc["certificate"]["flips"] == [P1 + 1, P2 + 1]
        every_leaf_is_checked(path, doc)
    assert cli("check", "certs").code == 0


def test_the_exported_relu2_flip_witness_is_the_block(tmp_path, cli, monkeypatch):
    prove(tmp_path, cli, monkeypatch, spec(tmp_path, "relu^2", D, M, "pair"),
          "claim Big is absorbable\n")
    export = cli("export", "big.mlp", "Big", "--width", str(M), "--out", "free.safetensors")
    assert export.code == 0, export.out + export.err
    found, record = read_export(tmp_path / "free.safetensors")
    assert record["method"] == flips_large.METHOD
    block = load_text((tmp_path / "big.mlp").read_text(), "big.mlp", tmp_path).blocks["Big"]
    x = np.random.default_rng(0).standard_normal((50, D))
    want = block.evaluate(x)
    hidden = np.maximum(x @ found["up"].T + found["up_bias"], 0)
    got = hidden ** 2 @ found["down"].T + found["down_bias"]
    assert np.abs(got - want).max() < 1e-9 * max(1.0, float(np.abs(want).max()))


@pytest.mark.parametrize(("act", "plant", "entries"), [
    ("relu^2", "linear", 2), ("relu^2", "quadratic", 3), ("swiglu", "linear", 2),
    ("glu", "linear", 2)])
def test_the_only_0_1_candidate_failing_exactly_refutes(tmp_path, cli, monkeypatch, act, plant,
                                                         entries):
    """The unique rational solution is 1/(q + 1) on J: 1 mod q, so J is the candidate, and
    its identity fails exactly — on the linear part (r, c) or the quadratic part (r, s, t)."""
    results = prove(tmp_path, cli, monkeypatch, spec(tmp_path, act, D, M, plant),
                    "claim Big is absorbable\n")
    assert results[0]["outcome"] == "refuted", results
    [(path, doc)] = checked(tmp_path, 1)
    cert = doc["certificate"]
    assert cert["flips"] == [P1 + 1, P2 + 1] and len(cert["coordinate"]) == entries
    assert "neuron" not in cert
    every_leaf_is_checked(path, doc)


def moved(tmp_path: Path, cli, monkeypatch, found: dict[str, np.ndarray],  # noqa: ANN001
          claim: str, certificate: dict) -> tuple[list[dict], Any]:
    """The spec of tmp_path/big.mlp with the weights `found`, in tmp_path/other: the prover's
    results for `claim` there, and the checker's verdict on `certificate` put on that claim
    as a refutation."""
    other = tmp_path / "other"
    other.mkdir()
    np.savez(other / "w.npz", **found)
    results = prove(other, cli, monkeypatch, (tmp_path / "big.mlp").read_text().split(
        "claim")[0], claim)
    other_path, there = doc_at(other, 0)
    forged = copy.deepcopy(there)
    forged["outcome"], forged["certificate"] = "refuted", certificate
    return results, verify(forged, weights(other_path, forged))


def test_a_shared_key_withholds_the_refutation_and_a_forged_one_is_invalid(
        tmp_path, cli, monkeypatch):
    """Row P2 = 2·row P1 with β_P2 = 2β_P1: one relu² key (up to a factor). §8.2's only-if fails,
    so no refutation; one taken from a generic block and put on this one is rejected."""
    prove(tmp_path, cli, monkeypatch, spec(tmp_path, "relu^2", D, M),
          "claim Big is absorbable\n")
    path, doc = doc_at(tmp_path, 0)
    found = arrays("relu^2", D, M, None)
    found["up"][P2], found["b"][P2] = 2 * found["up"][P1], 2 * found["b"][P1]
    results, verdict = moved(tmp_path, cli, monkeypatch, found, "claim Big is absorbable\n",
                             doc["certificate"])
    assert results[0]["outcome"] == "unknown" and "key" in results[0]["reason"], results
    assert verdict.status == "invalid" and "residue key" in verdict.reason, verdict


def test_a_dead_neuron_withholds_the_refutation_and_a_forged_one_is_invalid(
        tmp_path, cli, monkeypatch):
    prove(tmp_path, cli, monkeypatch, spec(tmp_path, "swiglu", D, M),
          "claim Big is absorbable\n")
    path, doc = doc_at(tmp_path, 0)
    found = arrays("swiglu", D, M, None)
    found["down"][:, P2] = 0
    results, verdict = moved(tmp_path, cli, monkeypatch, found, "claim Big is absorbable\n",
                             doc["certificate"])
    assert results[0]["outcome"] != "refuted", results
    assert verdict.status == "invalid" and "column of D is 0" in verdict.reason, verdict


def test_forged_witnesses_and_rules_are_invalid(tmp_path, cli, monkeypatch):
    """A flip witness for a generic block (its J's terms do not cancel), a refutation whose
    rule or constant is not the one re-derived from σ, and a §4 refutation relabelled §8.2."""
    prove(tmp_path, cli, monkeypatch, spec(tmp_path, "swiglu", D, M),
          "claim Big is absorbable\n")
    path, doc = doc_at(tmp_path, 0)
    read = weights(path, doc)
    witness = {"kind": "witness", "check": Check.ROWS_NEGATED, "width": M,
               "rule": "§8.2 gated O(a)+N", "constant": "1/2", "flips": [P1 + 1, P2 + 1],
               "argument": ""}
    forged = {**copy.deepcopy(doc), "outcome": "proved", "certificate": witness}
    verdict = verify(forged, read)
    assert verdict.status == "invalid" and "do not give" in verdict.reason, verdict
    for field, value in (("rule", "§8.2 Og(c)"), ("rule", "§8.2 relu^2"), ("constant", "1"),
                         ("rule", "§4 generic case"), ("width", M - 1)):
        forged = copy.deepcopy(doc)
        forged["certificate"][field] = value
        assert verify(forged, read).status == "invalid", (field, value)


# ---- blocks over the exact-work limit, read from their files by the checker -----------------

BIG_D, BIG_M = 64, 1400  # 3·64·1400 = 268,800 weights: past MAX_EXACT_WEIGHTS


@pytest.mark.parametrize(("act", "plant", "literal"), [("swiglu", None, False),
                                                        ("glu", "pair", True)])
def test_blocks_over_the_limit_are_decided_from_their_files(tmp_path, cli, monkeypatch, act,
                                                             plant, literal):
    """Stored by source: the checker reads U, D, G and the biases (a file's vector, or the
    spec's literal one) itself. The refutation at m is the min width's lower bound m + 1."""
    block = spec(tmp_path, act, BIG_D, BIG_M, plant, literal_bias=literal)
    results = prove(tmp_path, cli, monkeypatch, block,
                    f"claim Big is absorbable\nclaim min width of Big is {BIG_M}\n")
    (path, doc), = checked(tmp_path, 1)
    assert isinstance(doc["blocks"]["Big"]["layers"], dict)  # by source, not embedded
    every_leaf_is_checked(path, doc)
    if plant is None:
        assert [r["outcome"] for r in results] == ["refuted", "unknown"], results
        assert results[1]["min_width_bounds"] == [BIG_M + 1, BIG_M + BIG_D]
        bounds_path, bounds = doc_at(tmp_path, 1)
        assert verify(bounds, weights(bounds_path, bounds)).status == "valid"
    else:
        assert results[0]["outcome"] == "proved", results
        assert doc["certificate"]["flips"] == [P1 + 1, P2 + 1]
    assert cli("check", "certs").code == 0


# ---- glu without biases: §5's condition at scale, §8's linear neurons above ----------------

GLU_D, GLU_M = 32, 120  # d²·m = 122,880 entries in §5's subset system: past MAX_EXACT_COST


@pytest.mark.parametrize(("d", "m"), [(GLU_D, GLU_M), (BIG_D, BIG_M)])
@pytest.mark.parametrize("plant", [None, "pair", "linear"])
def test_a_bias_free_glu_block_is_decided_at_scale(tmp_path, cli, monkeypatch, d, m, plant):
    """Without biases glu's row of §8.2 is §5's condition Σ_J d_i u_iᵀ = −S/(2c): refuted
    (S = I, or the only 0/1 candidate failing exactly) or proved (a planted pair) by the
    unique solution mod q, and the witness flips gate rows and down columns, no bias. Above,
    the linear neurons (gate row 0: σ(0) = ½) absorb it at m + rank S."""
    results = prove(tmp_path, cli, monkeypatch, spec(tmp_path, "glu", d, m, plant, bias=False),
                    f"claim Big is absorbable\nclaim Big is absorbable at width {m + d}\n")
    first = "proved" if plant == "pair" else "refuted"
    assert [r["outcome"] for r in results] == [first, "proved"], results
    assert results[0]["method"] == flips_large.METHOD, results[0]
    (path, doc), (_, above) = checked(tmp_path, 2)
    cert = doc["certificate"]
    assert cert["rule"] == FLIP_RULES["Og(c)"]
    if plant is not None:
        assert cert["flips"] == [P1 + 1, P2 + 1], cert
    every_leaf_is_checked(path, doc)
    if plant == "pair":  # the flip witness at m is one at every wider width
        assert above["certificate"]["flips"] == [P1 + 1, P2 + 1]
    else:
        assert above["certificate"]["check"] == "own neurons + linear neurons"
        assert above["certificate"]["gamma"] == "0"
    assert cli("check", "certs").code == 0


SMALL_GLU = """block A {{
    activation glu
    dim 2  width 2  skip {skip}
    gate = [[1, 2], [3, -1]]
    up   = [[1, 0], [2, 1]]
    down = [[1, 1], [0, 1]]
}}
"""


@pytest.mark.parametrize(("skip", "rank"), [("identity", 2), ("[[1, 2], [2, 4]]", 1)])
def test_a_small_bias_free_glu_block_gets_linear_neurons_and_its_min_width(
        tmp_path, cli, monkeypatch, skip, rank):
    """§5 refutes width 2 (no J); the linear neurons absorb at 2 + rank S; so min width is
    between 3 and 2 + rank S — decided (3) when rank S = 1. Every certificate checks."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "a.mlp").write_text(SMALL_GLU.format(skip=skip) + (
        f"claim A is not absorbable\nclaim A is absorbable at width {2 + rank}\n"
        "claim min width of A is 3\n"), encoding="utf-8")
    run = cli("--certificates", "certs", "--json", "a.mlp")
    results = run.json()["files"][0]["results"]
    outcomes = [r["outcome"] for r in results]
    assert outcomes == ["proved", "proved", "proved" if rank == 1 else "unknown"], results
    assert results[1]["method"] == "§8 linear neurons / square quadruples"
    if rank == 2:
        assert results[2]["min_width_bounds"] == [3, 4], results[2]
    check = cli("check", "--json", "certs")
    assert check.code == 0, check.out
    assert [r["status"] for r in check.json()["certificates"]] == ["valid"] * 3


@pytest.mark.parametrize(("act", "plant"), [("swiglu", "pair"), ("relu^2", "pair"),
                                           ("glu", "pair"), ("glu", None)])
def test_the_key_count_refutes_below_m_and_decides_the_min_width(tmp_path, cli, monkeypatch,
                                                                 act, plant):
    """Every neuron alive and alone on its key: a plain block equal to B has a neuron on each
    of the m keys (§8.2's only-if), so widths below m are refuted — for a block absorbable at
    m too — and with the flip witness at m the min width is m exactly."""
    bias = act != "glu" or plant is None
    results = prove(tmp_path, cli, monkeypatch, spec(tmp_path, act, D, M, plant, bias=bias),
                    f"claim Big is absorbable at width {M - 1}\nclaim min width of Big is {M}\n")
    assert results[0]["outcome"] == "refuted" and results[0]["method"] == flips_large.KEY_METHOD
    if plant is not None:
        assert results[1]["outcome"] == "proved", results[1]
    for path, doc in checked(tmp_path, 2 if plant is not None else 1):
        every_leaf_is_checked(path, doc)


def test_a_forged_key_count_is_invalid(tmp_path, cli, monkeypatch):
    """At or above m, with another key count, or on a block whose keys are shared."""
    prove(tmp_path, cli, monkeypatch, spec(tmp_path, "relu^2", D, M),
          f"claim Big is absorbable at width {M - 1}\nclaim Big is absorbable\n")
    path, doc = doc_at(tmp_path, 0)
    read = weights(path, doc)
    assert verify(doc, read).status == "valid"
    for field, value in (("keys", M - 1), ("width", M), ("rule", "§8.2 Og(c)"),
                         ("constant", "2")):
        forged = copy.deepcopy(doc)
        forged["certificate"][field] = value
        assert verify(forged, read).status == "invalid", (field, value)
    at_m_path, at_m = doc_at(tmp_path, 1)
    forged = copy.deepcopy(at_m)
    forged["certificate"] = dict(doc["certificate"], width=M)
    assert verify(forged, weights(at_m_path, forged)).status == "invalid"
    found = arrays("relu^2", D, M, None)
    found["up"][P2], found["b"][P2] = 2 * found["up"][P1], 2 * found["b"][P1]  # one key
    results, verdict = moved(tmp_path, cli, monkeypatch, found,
                             f"claim Big is absorbable at width {M - 1}\n", doc["certificate"])
    assert results[0]["outcome"] != "refuted" or results[0]["method"] != flips_large.KEY_METHOD
    assert verdict.status == "invalid" and "residue key" in verdict.reason, verdict


def test_a_glu_refutation_at_m_answers_every_narrower_width(tmp_path, cli, monkeypatch):
    """§5 refutes width m = 2 (no J); a plain block of width 1 padded with a zero neuron would
    be one of width 2, so the checker accepts that certificate at width 1 too (the prover
    answers width 1 by the key count), and not at width 3."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "a.mlp").write_text(SMALL_GLU.format(skip="identity")
                                    + "claim A is absorbable\n"
                                      "claim A is absorbable at width 1\n"
                                      "claim A is absorbable at width 3\n", encoding="utf-8")
    run = cli("--certificates", "certs", "--json", "a.mlp")
    own, narrow, wide = run.json()["files"][0]["results"]
    assert own["outcome"] == "refuted" and own["method"] == "§5 GLU sign flips", own
    assert narrow["outcome"] == "refuted" and narrow["method"] == flips_large.KEY_METHOD
    assert wide["outcome"] == "unknown", wide  # between m + 1 and m + rank S − 1

    def doc(result: dict) -> dict:
        return json.loads((tmp_path / "certs" / f"a.mlp.{result['line']}.json").read_text())

    refutation = doc(own)["certificate"]
    moved = doc(narrow)
    moved["certificate"] = refutation
    assert verify(moved).status == "valid"
    forged = doc(wide)
    forged["outcome"], forged["certificate"] = "refuted", refutation
    verdict = verify(forged)
    assert verdict.status == "invalid" and "width at most m" in verdict.reason, verdict


def test_the_exported_bias_free_glu_witnesses_are_the_block(tmp_path, cli, monkeypatch):
    """The flip witness at m and the linear-neuron witness at m + d, exported: no bias
    anywhere, and each computes the block."""
    prove(tmp_path, cli, monkeypatch, spec(tmp_path, "glu", GLU_D, GLU_M, "pair", bias=False),
          "claim Big is absorbable\n")
    block = load_text((tmp_path / "big.mlp").read_text(), "big.mlp", tmp_path).blocks["Big"]
    x = np.random.default_rng(0).standard_normal((50, GLU_D))
    want = block.evaluate(x)
    for width in (GLU_M, GLU_M + GLU_D):
        out = f"free{width}.npz"
        export = cli("export", "big.mlp", "Big", "--width", str(width), "--out", out)
        assert export.code == 0, export.out + export.err
        found, _ = read_export(tmp_path / out)
        assert sorted(found) == ["down", "gate", "up"], sorted(found)
        gate = 1 / (1 + np.exp(-(x @ found["gate"].T)))
        got = (gate * (x @ found["up"].T)) @ found["down"].T
        assert np.abs(got - want).max() < 1e-9 * max(1.0, float(np.abs(want).max())), width


def test_a_bias_free_flip_refutation_needs_glu(tmp_path, cli, monkeypatch):
    """Only glu's row holds without biases (relu² and gated O(a)+N blocks without biases are
    never absorbable by T1/T4, a different certificate): a biased swiglu refutation whose
    block is said to have no biases is invalid, and so is a bias-free glu construction with a
    gate bias γ ≠ 0."""
    prove(tmp_path, cli, monkeypatch, spec(tmp_path, "swiglu", D, M),
          "claim Big is absorbable\n")
    path, doc = doc_at(tmp_path, 0)
    forged = copy.deepcopy(doc)
    forged["blocks"]["Big"]["bias"] = False
    verdict = verify(forged, weights(path, forged))
    assert verdict.status == "invalid", verdict
    other = tmp_path / "glu"
    other.mkdir()
    prove(other, cli, monkeypatch, spec(other, "glu", GLU_D, GLU_M, bias=False),
          f"claim Big is absorbable at width {GLU_M + GLU_D}\n")
    path, doc = doc_at(other, 0)
    assert verify(doc, weights(path, doc)).status == "valid"
    forged = copy.deepcopy(doc)
    forged["certificate"]["gamma"] = "1"
    verdict = verify(forged, weights(path, forged))
    assert verdict.status == "invalid" and "gamma must be 0" in verdict.reason, verdict


def test_the_certificate_reads_as_json_with_integer_fields(tmp_path, cli, monkeypatch):
    """Integers stay integers (a float or string neuron number is rejected as elsewhere)."""
    prove(tmp_path, cli, monkeypatch, spec(tmp_path, "relu^2", D, M),
          "claim Big is absorbable\n")
    path, doc = doc_at(tmp_path, 0)
    read = weights(path, doc)
    for field in ("neuron", "value", "width", "prime"):
        for value in (float(doc["certificate"][field]), doc["certificate"][field] + 0.5,
                      str(doc["certificate"][field])):
            forged = json.loads(json.dumps(doc))
            forged["certificate"][field] = value
            verdict = verify(forged, read)
            assert verdict.status == "invalid" and "not an integer" in verdict.reason, \
                (field, value)
    assert doc["certificate"]["value"] > 1


def test_a_candidate_too_costly_to_test_exactly_is_unknown_saying_so(tmp_path, monkeypatch):
    """Beyond MAX_QUADRATIC products the 0/1 candidate is not tested: undecided, never a
    guess (here the limit is lowered below the planted pair's d·|J|·k² = 16·2·2²; a block
    within the exact-work limit then goes on to the small path, which proves it)."""
    text = spec(tmp_path, "relu^2", D, M, "pair")
    monkeypatch.setattr(flips_large, "MAX_QUADRATIC", 100)
    block = load_text(text, "big.mlp", tmp_path).blocks["Big"]
    found = flips_large.decide(block, M)
    assert found is not None and found.absorbable is None, found
    assert "J = {2, 4}" in found.reason and "beyond the 100 attempted" in found.reason


def test_a_bias_that_is_not_a_vector_is_refused_by_the_checker_too(tmp_path, cli, monkeypatch):
    """The prover calls a 2×(m/2) bias array (or a literal matrix) malformed (exit 2); the
    checker, reading a block stored by source, must not flatten it into m values and accept a
    certificate about a block the language does not define."""
    from absorb_formal.checker.kernel.contract import Invalid
    from absorb_formal.checker.readers.reading import Rational, Reading, spec_location
    from absorb_formal.checker.rules import unique_subset as checked_subset

    found = arrays("relu^2", D, M, None)
    np.savez(tmp_path / "w.npz", **found)
    np.savez(tmp_path / "bb.npz", b=found["b"])
    text = spec(tmp_path, "relu^2", D, M).replace('load("w.npz", "b")', 'load("bb.npz", "b")')
    results = prove(tmp_path, cli, monkeypatch, text, "claim Big is absorbable\n")
    assert results[0]["outcome"] == "refuted", results
    path, doc = doc_at(tmp_path, 0)
    np.savez(tmp_path / "bb.npz", b=found["b"].reshape(2, -1))
    assert cli("--certificates", "again", "big.mlp").code == 2
    reading = Reading(spec_location(doc, path))
    forged = copy.deepcopy(doc)  # the block stored by its sources, the new file's hash
    forged["blocks"]["Big"] = reading.block_json("Big", True)
    forged["files"]["bb.npz"] = reading.file_hash("bb.npz")
    assert reading.stale(forged) == ""
    verdict = verify(forged, reading.weights(forged))
    assert verdict.status == "invalid" and "up_bias" in verdict.reason, verdict
    literal = {"up_bias": Rational([[Fraction(v)] for v in range(M)])}  # [[0], [1], ...]
    with pytest.raises(Invalid, match="up_bias"):
        checked_subset._bias(forged["blocks"]["Big"], literal, "up_bias", M)


# ---- against the exact small path and the full quadratic sum (random small blocks) -----------

SMALL_WEIGHTS = st.sampled_from([-2, -1, 0, 1, 2, 1, -1])


def _literal(rows: list[list[int]] | list[list[Fraction]]) -> str:
    return "[" + ", ".join("[" + ", ".join(str(v) for v in r) + "]" for r in rows) + "]"


@settings(max_examples=160, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.sampled_from(["relu^2", *GATED, "glu"]), st.integers(1, 3), st.integers(1, 5),
       st.data())
def test_decided_at_scale_as_the_exact_subset_search_decides(act, d, m, data):
    """Weights in ±2 (shared keys, dead neurons, singular systems all likely), S = I or the
    change of a random J, sometimes a planted pair: whenever both the unique solution mod q
    (`own_width`) and §8.2's exact subset search (`flips.decide`) decide, they agree."""
    from absorb_formal.decide import flips

    def draw(rows: int, cols: int) -> list[list[int]]:
        return [[data.draw(SMALL_WEIGHTS) for _ in range(cols)] for _ in range(rows)]

    up, gate, down = draw(m, d), draw(m, d), draw(d, m)
    b, g = draw(1, m)[0], draw(1, m)[0]
    chosen = data.draw(st.sets(st.integers(0, m - 1)))
    mode = data.draw(st.sampled_from(["S = I", "a random J", "a planted pair"]))
    if mode == "a planted pair" and m >= 2 and act != "glu":  # 1 and 2 cancel their squares
        up[1], gate[1], chosen = list(up[0]), list(gate[0]), {0, 1}
        for row in down:
            row[1] = -row[0]
        b[1], g[1] = (b[0] + 1, g[1]) if act == "relu^2" else (b[0], g[0] + 1)
    skip = [[Fraction(int(r == c)) for c in range(d)] for r in range(d)]
    if mode != "S = I":  # S = minus the linear part of J's change (2a = 2c = 1)
        skip = [[-sum(down[r][i] * (2 * b[i] * up[i][c] if act == "relu^2" else up[i][c]
                                    if act == "glu" else g[i] * up[i][c] + b[i] * gate[i][c])
                      for i in chosen) for c in range(d)] for r in range(d)]
    gated = f"\n gate = {_literal(gate)}\n gate_bias = {_literal([g])[1:-1]}" \
        if act != "relu^2" else ""
    text = (f"block B {{\n activation {act} dim {d} width {m} skip {_literal(skip)} bias\n"
            f" up = {_literal(up)}\n down = {_literal(down)}{gated}\n"
            f" up_bias = {_literal([b])[1:-1]}\n}}\n")
    block = load_text(text, "x.mlp", Path(".")).blocks["B"]
    at_scale, exact = flips_large.own_width(block), flips.decide(block, m)
    if at_scale is not None and exact is not None and None not in (at_scale.absorbable,
                                                                     exact.absorbable):
        assert at_scale.absorbable == exact.absorbable, (text, at_scale, exact)


@settings(max_examples=200, deadline=None)
@given(st.integers(1, 4), st.integers(1, 5), st.booleans(), st.data())
def test_the_quadratic_part_on_the_pivot_columns_is_the_whole_of_it(d, m, gated, data):
    """Σ_J d_{r,i}(g_i u_iᵀ + u_i g_iᵀ) checked on the pivot columns C × C of [G_J; U_J]
    (prover and checker) is 0 exactly when the full d×d×d sum is, with rows often repeated
    and down columns opposite so that the sum cancels on some entries and not on others."""
    from types import SimpleNamespace

    from absorb_formal.checker.readers.reading import Rational
    from absorb_formal.checker.rules import unique_subset as checked
    from absorb_formal.model.blocks import Layer, Matrix

    entries = st.sampled_from([Fraction(v) for v in (0, 0, 1, -1, 2, -3)] + [Fraction(1, 2)])

    def draw(rows: int, cols: int) -> list[list[Fraction]]:
        return [[data.draw(entries) for _ in range(cols)] for _ in range(rows)]

    up, down = draw(m, d), draw(d, m)
    gate = draw(m, d) if gated else up
    if m >= 2 and data.draw(st.booleans()):
        up[1], gate[1] = list(up[0]), list(gate[0])
        for row in down:
            row[1] = -row[0]
    chosen = sorted(data.draw(st.sets(st.integers(0, m - 1))))
    full = [down[r][i] * (gate[i][s] * up[i][t] + up[i][s] * gate[i][t])
            for r in range(d) for s in range(d) for t in range(d) for i in chosen]
    vanishes = all(sum(full[n:n + len(chosen)]) == 0 for n in range(0, len(full),
                                                                     max(1, len(chosen))))
    zeros = [Fraction(0)] * m
    mine = SimpleNamespace(up=Rational(up), down=Rational(down), beta=zeros, gamma=zeros,
                           gate=Rational(gate) if gated else None, d=d, m=m)
    rule = ("gated O(a)+N", Fraction(1, 2), False) if gated else ("relu^2", Fraction(1), True)
    found = checked._flip_failure([[Fraction(0)] * d for _ in range(d)], mine, rule, chosen)
    assert (found is None) == vanishes  # S = 0, β = γ = 0: only the quadratic part can fail
    layer = Layer(Matrix(up), Matrix(down), Matrix(gate) if gated else None, tuple(zeros),
                  tuple(zeros) if gated else None, (Fraction(0),) * d)
    proved = flips_large.quadratic_failure(SimpleNamespace(layers=[layer], dim=d), chosen)
    assert proved == found
