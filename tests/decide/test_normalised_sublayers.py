"""Normalised sublayers (docs/rules.md "Normalised sublayers"; decide/sublayer.py,
decide/ray_limit.py, checker/rules/sublayer.py, checker/rules/ray_limit.py): post-norm claims
are the reduced block's, pre-norm and sandwich sublayers are refuted at every width by a ray-limit
point or the gated Jacobian, degenerate norms stay unknown; every decided claim is
re-verified by the checker, and tampered certificates are rejected."""

from __future__ import annotations

import copy
from fractions import Fraction
from typing import Any

import numpy as np
import pytest

from absorb_formal.checker.dispatch import verify
from absorb_formal.checker.rules.ray_limit import sign_root
from absorb_formal.language import SpecError, load_text
from absorb_formal.model.result import PROVED, REFUTED, UNKNOWN

from .test_bias_families import outcomes

UP = "[[1, 0, 2], [0, 1, -1], [1, 1, 1], [-1, 2, 0]]"
DOWN = "[[1, 0, 1, 0], [0, 1, 0, 1], [1, 1, -1, 0]]"


def block(act: str, norm: str, extra: str = "", name: str = "B", dim: int = 3,
          width: int = 4, up: str = UP, down: str = DOWN) -> str:
    gate = f" gate = {up}" if act in ("swiglu", "geglu", "reglu") else ""
    return (f"block {name} {{ activation {act} dim {dim} width {width} norm {norm} {extra}"
            f" up = {up}{gate} down = {down} }}\n")


@pytest.mark.parametrize("act", ["relu", "leaky_relu(1/10)", "relu^2", "gelu", "gelu_tanh",
                                 "silu", "swiglu", "geglu", "reglu"])
@pytest.mark.parametrize("norm", ["pre layernorm { eps 1e-5 gamma = [1, 2, 1/2] "
                                  "beta = [0, 1, -1] }",
                                  "pre rmsnorm { eps 1e-6 }",
                                  "sandwich rmsnorm { eps 1e-6 } layernorm { eps 1e-5 }"])
def test_pre_norm_sublayers_are_refuted_at_every_width_and_checked(tmp_path, act, norm):
    # biased, so that the gated rule (bias-free only) leaves the gated blocks to the ray limit
    text = block(act, norm, "bias up_bias = [1, 0, -1, 1/2]") + (
        "claim B is not absorbable\nclaim B is absorbable at width 1000\n"
        "claim min width of B is none\nclaim min width of B is 4\n")
    found = outcomes(text, tmp_path)
    assert [o for _, o, _ in found] == [PROVED, REFUTED, PROVED, REFUTED], found[0][2]
    kinds = {doc["certificate"]["kind"] for _, _, doc in found}
    assert kinds == {"ray limit"}


def test_a_bias_free_gated_rmsnorm_sublayer_is_refuted_by_the_jacobian_at_zero(tmp_path):
    text = block("swiglu", "pre rmsnorm { eps 1e-6 }") + "claim B is not absorbable\n"
    text += ("block F { activation geglu dim 5 width 7 norm pre rmsnorm { eps 1e-6 } }\n"
             "claim F is never absorbable\nclaim F is sometimes absorbable\n")
    found = outcomes(text, tmp_path)
    assert [o for _, o, _ in found] == [PROVED, PROVED, REFUTED]
    assert {d["certificate"]["kind"] for _, _, d in found} == {"gated pre-norm jacobian"}


def test_a_gated_family_with_biases_or_layernorm_is_not_decided_by_the_gated_rule(tmp_path):
    text = ("block F { activation swiglu dim 2 width 2 bias norm pre rmsnorm { eps 1e-6 } }\n"
            "claim F is never absorbable\n"
            "block G { activation swiglu dim 2 width 2 norm pre layernorm { eps 1e-6 } }\n"
            "claim G is never absorbable\n")
    assert [o for _, o, _ in outcomes(text, tmp_path)] == [UNKNOWN, UNKNOWN]


def test_a_relu_branch_dead_on_the_norms_image_is_not_refuted(tmp_path):
    # |N∞(x)| = sqrt(d) on the sphere and |U| is small, so every neuron is dead there:
    # F ∘ N∞ is constant and no ray-limit point exists (MATH §10.2: decide each relu block).
    text = block("relu", "pre rmsnorm { eps 1e-6 }", "bias up_bias = [-100, -100, -100, -100]")
    text += "claim B is not absorbable\n"
    [(_, outcome, doc)] = outcomes(text, tmp_path)
    assert outcome == UNKNOWN and "moves" in doc["reason"], doc["reason"]


@pytest.mark.parametrize(("norm", "why"), [
    ("pre layernorm { eps 0 }", "ε = 0"),
    ("post layernorm { eps 0 }", "ε = 0"),
    ("pre rmsnorm { eps 1e-6 gamma = [1, 0, 1] }", "zero entry"),
    ("post layernorm { eps 1e-6 gamma = [1, 0, 1] }", "zero entry"),
])
def test_degenerate_norms_are_unknown_with_the_reason(tmp_path, norm, why):
    [(_, outcome, doc)] = outcomes(block("relu", norm) + "claim B is not absorbable\n",
                                   tmp_path)
    assert outcome == UNKNOWN and why in doc["reason"], doc["reason"]


# d = 2, relu (a = 1/2): D_J U_J = −I + 1vᵀ with v = (1, 0), J = {1, 2}. The bare block needs
# D_J U_J = −I exactly and is not absorbable at its width; the projected block (LayerNorm
# post-norm) is: Π(−I + 1vᵀ) = −Π (Theorem 10.1, own width gains + 1vᵀ).
PROJECTED = ("block P {{ activation relu dim 2 width 2 norm post {norm} "
             "up = [[1, 0], [0, 1]] down = [[0, 0], [1, -1]] }}\n")


def test_post_layernorm_is_the_projected_block_and_can_differ_from_the_bare_block(tmp_path):
    text = PROJECTED.format(norm="layernorm { eps 1e-12 }") + "claim P is absorbable\n"
    text += ("block Q { activation relu dim 2 width 2 up = [[1, 0], [0, 1]] "
             "down = [[0, 0], [1, -1]] }\nclaim Q is not absorbable\n")
    text += PROJECTED.format(norm="rmsnorm { eps 1e-12 }").replace("P", "R", 1)
    text += "claim R is not absorbable\n"
    found = outcomes(text, tmp_path)
    assert [o for _, o, _ in found] == [PROVED, PROVED, PROVED]
    assert found[0][2]["certificate"]["reduction"] == "projected block"
    assert found[2][2]["certificate"]["reduction"] == "bare block"


def test_the_projected_answer_agrees_with_the_generic_engine(tmp_path):
    from absorb_formal.api import decide_spec
    from absorb_formal.decide.dispatch import decide
    from absorb_formal.decide.sublayer import projected

    text = PROJECTED.format(norm="layernorm { eps 1e-12 }") + "query P\n"
    spec = load_text(text, "s.mlp", tmp_path)
    reduced = projected(spec.blocks["P"])
    small = load_text(text, "s.mlp", tmp_path)
    small.blocks["P"] = reduced
    theory = decide(small, small.statements[0], "theory")
    generic = decide(small, small.statements[0], "generic")
    assert theory.min_width == generic.min_width == 2, (theory, generic)
    assert decide_spec  # the public entry decides the same spec


def _doc(tmp_path: Any, text: str) -> dict[str, Any]:
    [(_, outcome, doc)] = outcomes(text, tmp_path)
    assert outcome == PROVED
    return doc


def test_a_tampered_ray_limit_certificate_is_rejected(tmp_path):
    doc = _doc(tmp_path, block("gelu", "pre layernorm { eps 1e-5 }")
               + "claim B is not absorbable\n")
    cert = doc["certificate"]
    for change in ("x0", "w", "outputs", "extra", "zero x0"):
        forged = copy.deepcopy(doc)
        c = forged["certificate"]
        if change == "x0":
            c["x0"][0] = str(Fraction(c["x0"][0]) + 1)
        elif change == "w":
            c["w"] = [str(Fraction(v) + 1) for v in c["w"]]
        elif change == "outputs":  # no field names the entry: the checker finds it itself
            c["outputs"] = [0]
        elif change == "extra":
            c["note"] = "x"
        else:
            c["x0"] = ["1", "1", "1"]  # Πx0 = 0: not in Ω
        assert verify(forged).status == "invalid", (change, cert)
    moved = copy.deepcopy(doc)
    moved["blocks"]["B"]["norm"]["placement"] = "post"
    assert verify(moved).status == "invalid"


def test_a_ray_limit_whose_derivative_is_zero_proves_nothing(tmp_path):
    doc = _doc(tmp_path, block("silu", "pre rmsnorm { eps 1e-6 }")
               + "claim B is not absorbable\n")
    forged = copy.deepcopy(doc)  # the same point on a block whose branch never moves
    forged["blocks"]["B"]["layers"][0]["down"] = [["0"] * 4] * 3
    verdict = verify(forged)
    assert verdict.status == "invalid" and "contains 0" in verdict.reason


def test_a_post_norm_certificate_must_name_the_checkers_reduction(tmp_path):
    doc = _doc(tmp_path, PROJECTED.format(norm="layernorm { eps 1e-12 }")
               + "claim P is absorbable\n")
    forged = copy.deepcopy(doc)
    forged["certificate"]["reduction"] = "bare block"
    assert verify(forged).status == "invalid"
    bare = copy.deepcopy(doc)  # the projected witness does not fit the bare block's RMSNorm
    bare["blocks"]["P"]["norm"]["norms"][0]["kind"] = "rmsnorm"
    bare["blocks"]["P"]["norm"]["norms"][0]["beta"] = None
    assert verify(bare).status == "invalid"


def test_the_gated_rule_is_refused_where_its_preconditions_fail(tmp_path):
    doc = _doc(tmp_path, block("swiglu", "pre rmsnorm { eps 1e-6 }")
               + "claim B is not absorbable\n")
    for field, value in (("kind", "layernorm"), ("eps", "0")):
        forged = copy.deepcopy(doc)
        forged["blocks"]["B"]["norm"]["norms"][0][field] = value
        assert verify(forged).status == "invalid", field
    skipless = copy.deepcopy(doc)
    skipless["blocks"]["B"]["skip"] = {"scale": "0"}
    assert verify(skipless).status == "invalid"


@pytest.mark.parametrize(("p", "c", "r"), [(1, -1, 2), (-3, 2, 2), (2, -1, 4), (0, 0, 3),
                                           (5, 3, 7), (-1, -1, 5), (7, -5, 2)])
def test_the_exact_sign_of_p_plus_c_root_r(p, c, r):
    value = p + c * np.sqrt(r)
    expected = 0 if abs(value) < 1e-12 else (1 if value > 0 else -1)
    assert sign_root(Fraction(p), Fraction(c), Fraction(r)) == expected


@pytest.mark.parametrize(("text", "message"), [
    ("norm pree layernorm { eps 1 }", "did you mean 'pre'"),
    ("norm post lyernorm { eps 1 }", "did you mean 'layernorm'"),
    ("norm post rmsnorm { eps 1 beta = [1, 2] }", "RMSNorm has no shift"),
    ("norm post layernorm { gamma = [1, 2] }", "has no 'eps'"),
    ("norm post layernorm { eps -1 }", "eps must be >= 0"),
    ("norm post layernorm { eps 1 gamma = [1, 2, 3] }", "'gamma' must have 2 entries"),
    ("norm sandwich layernorm { eps 1 }", "two norms"),
    ("norm pre layernorm { eps 1 } rmsnorm { eps 1 }", "one norm"),
    ("norm post layernorm { eps 1 eps 2 }", "given twice"),
])
def test_norm_clause_errors_are_positioned(tmp_path, text, message):
    spec = f"block A {{ activation relu dim 2 width 2 {text} }}\n"
    with pytest.raises(SpecError) as error:
        load_text(spec, "s.mlp", tmp_path)
    first = error.value.diagnostics[0]
    assert message in first.message and first.pos.line == 1 and first.pos.column > 30, first


def test_gamma_may_be_loaded_with_an_offset(tmp_path):
    np.savez(tmp_path / "n.npz", g=np.array([0.5, -1.0], dtype=np.float32))
    text = ('block A { activation relu dim 2 width 2 norm pre rmsnorm { eps 1e-6 '
            'gamma = load("n.npz", "g") + 1 } up = [[1, 0], [0, 1]] down = [[1, 0], [0, 1]] }\n'
            "claim A is not absorbable\n")
    spec = load_text(text, "s.mlp", tmp_path)
    assert spec.blocks["A"].norm.norms[0].gamma == (Fraction(3, 2), Fraction(0))
    [(_, outcome, doc)] = outcomes(text, tmp_path)
    assert outcome == UNKNOWN and "zero entry" in doc["reason"]


def test_the_sublayer_evaluates_as_the_model_computes_it(tmp_path):
    text = block("relu", "pre layernorm { eps 1e-5 gamma = [1, 2, 1/2] beta = [0, 1, -1] }")
    b = load_text(text, "s.mlp", tmp_path).blocks["B"]
    x = np.array([[1.0, -2.0, 0.5], [3.0, 0.0, 1.0]])
    y = x - x.mean(axis=1, keepdims=True)
    n = y / np.sqrt((y * y).mean(axis=1, keepdims=True) + 1e-5) * [1, 2, 0.5] + [0, 1, -1]
    up = np.array(eval(UP), dtype=float)
    down = np.array(eval(DOWN), dtype=float)
    expected = x + np.maximum(n @ up.T, 0) @ down.T
    assert np.allclose(b.evaluate(x), expected)


def test_a_neuron_whose_pre_activation_never_moves_may_sit_at_its_kink(tmp_path):
    # up row 2 is zero and has no bias: its pre-activation is 0 everywhere, a constant
    # contribution, so the relu pattern is still constant near every x0.
    text = block("relu", "pre layernorm { eps 1e-5 }",
                 up="[[1, 0, 2], [0, 0, 0], [1, 1, 1], [-1, 2, 0]]") + "claim B is not absorbable\n"
    [(_, outcome, doc)] = outcomes(text, tmp_path)
    assert outcome == PROVED and doc["certificate"]["kind"] == "ray limit"


def _centred(rows: list[list[Fraction]]) -> list[list[Fraction]]:
    means = [sum(c, Fraction(0)) / len(rows) for c in zip(*rows, strict=True)]
    return [[v - mu for v, mu in zip(r, means, strict=True)] for r in rows]


def test_both_sides_project_a_loaded_matrix_exactly(tmp_path):
    """ΠD read lazily from a file (prover: ProjectedMatrix; checker: Projected) against the
    centred matrix built entry by entry in Fractions: rows, columns, residues, non-zeros."""
    from absorb_formal.checker.readers.files import read_array
    from absorb_formal.checker.rules.sublayer import Projected
    from absorb_formal.model.blocks import Matrix, ProjectedMatrix

    rng = np.random.default_rng(3)
    down = (rng.normal(size=(5, 7)) * 3).astype(np.float32)
    down[:, 2] = 1.25  # a constant column: zero once projected
    np.savez(tmp_path / "w.npz", down=down)
    exact = _centred([[Fraction(float(v)) for v in row] for row in down])
    prover = ProjectedMatrix(Matrix(array=down))
    checker = Projected(read_array(tmp_path / "w.npz", "down"))
    p = 2_147_483_629
    expected = np.array([[v.numerator * pow(v.denominator, -1, p) % p for v in row]
                         for row in exact], dtype=np.int64)
    assert [list(r) for r in prover.rows] == exact
    columns = [list(c) for c in zip(*exact, strict=True)]
    assert [list(prover.exact_column(j)) for j in range(7)] == columns
    assert [checker.row(i) for i in range(5)] == exact
    assert np.array_equal(prover.residues(range(5), range(7), p), expected)
    assert np.array_equal(checker.residue_matrix(p), expected)
    assert checker.residues(p, 3) == list(expected[3])
    zero = np.array([[v != 0 for v in row] for row in exact])
    assert np.array_equal(prover.nonzero(), zero) and np.array_equal(checker.nonzero(), zero)
    assert not zero[:, 2].any()
    assert prover.residues(range(5), range(7), 5) is None  # p divides d: no residue


def test_a_post_norm_block_beyond_the_exact_limit_is_decided_on_its_projection(tmp_path):
    rng = np.random.default_rng(0)
    d, m = 128, 1024  # 262,144 weights: the large-block rules, with ΠD read lazily
    np.savez(tmp_path / "w.npz", i=(rng.normal(size=(m, d)) * 0.05).astype(np.float32),
             o=(rng.normal(size=(d, m)) * 0.05).astype(np.float32),
             ob=(rng.normal(size=d) * 0.05).astype(np.float32))
    text = (f'block B {{ activation gelu dim {d} width {m} bias '
            'norm post layernorm { eps 1e-12 } up = load("w.npz", "i") '
            'down = load("w.npz", "o") down_bias = load("w.npz", "ob") }\n'
            "claim B is not absorbable\n")
    import json

    from absorb_formal.certify import documents as proofs
    from absorb_formal.checker.readers.reading import Reading
    from absorb_formal.decide.dispatch import decide
    from absorb_formal.language import load_file

    (tmp_path / "s.mlp").write_text(text)
    spec = load_file(tmp_path / "s.mlp")
    result = decide(spec, spec.statements[0])
    assert result.outcome == PROVED, result.reason
    doc = json.loads(json.dumps(proofs.document(spec, spec.statements[0], result,
                                                tmp_path / "s.mlp", tmp_path / "c.json")))
    cert = doc["certificate"]
    assert cert["reduction"] == "projected block" and isinstance(doc["blocks"]["B"]["layers"],
                                                                 dict)

    reading = Reading(tmp_path / "s.mlp")
    assert not reading.stale(doc)
    assert verify(doc, reading.weights(doc)).status == "valid"
    forged = copy.deepcopy(doc)
    forged["certificate"]["reduction"] = "bare block"
    assert verify(forged, reading.weights(doc)).status == "invalid"


def test_export_writes_a_post_norm_witness_with_its_note_and_refuses_a_pre_norm_one(tmp_path):
    from absorb_formal.export.witness import ExportError, export, read_export

    spec = tmp_path / "s.mlp"
    spec.write_text(PROJECTED.format(norm="layernorm { eps 1e-12 }") + block(
        "relu", "pre layernorm { eps 1e-5 }", name="Pre"))
    record = export(spec, "P", tmp_path / "p.safetensors")
    assert "keep the norm" in record["sublayer"] and "projected block" in record["sublayer"]
    arrays, _ = read_export(tmp_path / "p.safetensors")
    x = np.random.default_rng(0).normal(size=(200, 2)) * 3
    plain = np.maximum(x @ arrays["up"].T, 0) @ arrays["down"].T
    sublayer = load_text(spec.read_text(), "s.mlp", tmp_path).blocks["P"].evaluate(x)
    centred = plain - plain.mean(axis=1, keepdims=True)
    normed = centred / np.sqrt((centred ** 2).mean(axis=1, keepdims=True) + 1e-12)
    assert np.allclose(normed, sublayer, atol=1e-9)  # the model computes N(P(x))
    with pytest.raises(ExportError, match="§10.2"):
        export(spec, "Pre", tmp_path / "pre.safetensors")
    assert not (tmp_path / "pre.safetensors").exists()


@pytest.mark.parametrize(("act", "widths", "restarts"), [
    ("relu", (8,), 1),
    pytest.param("relu", (4, 8), 4, marks=pytest.mark.slow),
    pytest.param("gelu", (4, 8), 4, marks=pytest.mark.slow),
    pytest.param("silu", (4, 8), 4, marks=pytest.mark.slow)])
def test_a_float_fit_of_a_pre_norm_sublayer_stays_far_from_zero_error(tmp_path, act, widths,
                                                                       restarts):
    """--fit's adversarial search, aimed at the sublayer itself (not its bare block), at the
    block's width and twice it: a refuted sublayer must stay far from the fit's tolerance."""
    from absorb_formal.numeric.backends import backend
    from absorb_formal.numeric.fit import FIT_TOLERANCE, search

    b = load_text(block(act, "pre layernorm { eps 1e-5 gamma = [1, 2, 1/2] beta = [0, 1, -1] }"),
                  "s.mlp", tmp_path).blocks["B"]
    for width in widths:
        error, _ = search(b, width, restarts=restarts, engine=backend("numpy", "cpu"))
        assert error > 1e3 * FIT_TOLERANCE, (width, error)


def test_a_fit_of_a_post_norm_sublayer_reaches_its_projected_witness(tmp_path):
    from absorb_formal.decide.sublayer import projected
    from absorb_formal.numeric.backends import backend
    from absorb_formal.numeric.fit import FIT_TOLERANCE, search

    b = load_text(PROJECTED.format(norm="layernorm { eps 1e-12 }"), "s.mlp",
                  tmp_path).blocks["P"]
    error, _ = search(projected(b), 2, restarts=8, engine=backend("numpy", "cpu"))
    assert error <= FIT_TOLERANCE  # absorbable at its width: the fit finds it too


@pytest.mark.parametrize(("dim", "norm"), [(1, "layernorm"), (2, "layernorm"), (1, "rmsnorm")])
def test_a_norm_with_finitely_many_limits_is_unknown(tmp_path, dim, norm):
    text = (f"block B {{ activation gelu dim {dim} width 2 norm pre {norm} {{ eps 1e-5 }} "
            f"up = {[[1] * dim, [2] * dim]} down = {[[1, -1]] * dim} }}\n"
            "claim B is not absorbable\n")
    [(_, outcome, doc)] = outcomes(text, tmp_path)
    assert outcome == UNKNOWN and "finitely many values" in doc["reason"], doc["reason"]


def test_a_post_rmsnorm_family_is_the_bare_family(tmp_path):
    text = ("block F { activation relu dim 3 width 2 norm post rmsnorm { eps 1e-6 } }\n"
            "claim F is never absorbable\nclaim F is sometimes absorbable at width 3\n"
            "block G { activation relu dim 3 width 2 norm post layernorm { eps 1e-6 } }\n"
            "claim G is never absorbable\n")
    found = outcomes(text, tmp_path)
    assert [o for _, o, _ in found] == [PROVED, REFUTED, UNKNOWN]  # m < rank S = 3: never
    assert found[0][2]["certificate"]["reduction"] == "bare block"


def _random_block(rng: np.random.Generator, act: str, d: int, m: int) -> str:
    up = rng.integers(-3, 4, size=(m, d)).tolist()
    down = rng.integers(-3, 4, size=(d, m)).tolist()
    return f"activation {act} dim {d} width {m} up = {up} down = {down}"


@pytest.mark.parametrize("seed", range(12))
def test_the_projected_block_agrees_with_the_generic_engine_on_random_blocks(tmp_path, seed):
    """Post-norm LayerNorm sublayers at d = 2, m <= 2, where the generic engine (no theory)
    reaches: the theory engine on the projected block and the generic engine on the same
    projected block give the same answer at every width up to m (or the generic engine
    gives up)."""
    from absorb_formal.decide.dispatch import concrete_decision
    from absorb_formal.decide.sublayer import projected

    rng = np.random.default_rng(seed)
    m = int(rng.integers(1, 3))
    text = f"block P {{ {_random_block(rng, 'relu', 2, m)} norm post layernorm {{ eps 1e-9 }} }}\n"
    small = projected(load_text(text, "s.mlp", tmp_path).blocks["P"])
    for width in range(1, m + 1):
        theory, _ = concrete_decision(small, width, "theory")
        generic, _ = concrete_decision(small, width, "generic")
        if None not in (theory.absorbable, generic.absorbable):
            assert theory.absorbable == generic.absorbable, (text, width, theory, generic)


def _limit_branch(b: Any, x: np.ndarray) -> np.ndarray:
    """G∞(x) = F(N∞(x)) in float64: the branch of a pre-norm sublayer along rays."""
    norm = b.norm.norms[0]
    centred = x - x.mean() if norm.kind == "layernorm" else x
    gamma = np.array([float(g) for g in norm.gamma]) if norm.gamma else 1.0
    beta = np.array([float(v) for v in norm.beta]) if norm.beta else 0.0
    n_inf = gamma * centred / np.sqrt((centred ** 2).mean()) + beta
    return b.bare().evaluate(n_inf[None, :])[0] - b.skip.apply_float(n_inf[None, :])[0]


@pytest.mark.parametrize("seed", range(8))
@pytest.mark.parametrize("act", ["relu", "gelu", "silu"])
def test_every_ray_limit_point_moves_in_floats_too(tmp_path, seed, act):
    """Brute force behind the certificate: at the certified x0, a central difference of
    G∞ = F ∘ N∞ along w is clearly non-zero at the certified output, as the exact and Arb
    test says; and far along the ray the sublayer minus S·x approaches G∞(x0)."""
    rng = np.random.default_rng(seed)
    text = (f"block B {{ {_random_block(rng, act, 3, 4)} bias up_bias = "
            f"{rng.integers(-2, 3, size=4).tolist()} norm pre layernorm {{ eps 1e-5 "
            "gamma = [1, 2, 1/2] beta = [0, 1, -1] } }\nclaim B is not absorbable\n")
    [(_, outcome, doc)] = outcomes(text, tmp_path)
    if outcome == UNKNOWN:  # a relu branch may be constant on the sphere: nothing to test
        assert act == "relu", doc["reason"]
        return
    cert = doc["certificate"]
    b = load_text(text, "s.mlp", tmp_path).blocks["B"]
    x0 = np.array([float(Fraction(v)) for v in cert["x0"]])
    w = np.array([float(Fraction(v)) for v in cert["w"]])
    w /= np.abs(w).max()
    h = 1e-6 * np.abs(x0).max()
    slope = (_limit_branch(b, x0 + h * w) - _limit_branch(b, x0 - h * w)) / (2 * h)
    assert np.abs(slope).max() > 1e-6, (slope, cert)
    far = b.evaluate((1e6 * x0)[None, :])[0] - 1e6 * x0
    assert np.allclose(far, _limit_branch(b, x0), atol=1e-3)


@pytest.mark.parametrize("text", [
    # post-norm LayerNorm with d = 1: ΠS = 0 and ΠD = 0, the projected block is plain and
    # its own witness has an idle neuron (zero down column, non-zero up row)
    "block B { activation relu dim 1 width 1 norm post layernorm { eps 1e-5 beta = [3] } "
    "up = [[1]] down = [[1]] }\nclaim B is absorbable\n",
    # d = 2, a learnable skip with constant columns (ΠS = 0) and a down column ∝ 1
    "block B { activation relu dim 2 width 2 skip [[1, 1], [1, 1]] "
    "norm post layernorm { eps 1e-5 } up = [[1, 0], [0, 1]] down = [[1, 0], [1, 0]] }\n"
    "claim B is absorbable\n",
    # the same without a norm: a plain block whose neuron 2 has a zero down column
    "block B { activation relu dim 2 width 2 skip none "
    "up = [[1, 0], [0, 1]] down = [[1, 0], [1, 0]] }\nclaim B is absorbable\n",
])
def test_a_plain_block_with_a_dead_neuron_is_its_own_checked_witness(tmp_path, text):
    """The block itself, zero-padded: every field is compared with the block's, so an idle
    neuron there is the block's own (the checker rejected it as 'idle but not zero')."""
    assert [o for _, o, _ in outcomes(text, tmp_path)] == [PROVED]


def test_a_relu_power_neuron_exactly_at_zero_is_a_valid_point(tmp_path):
    """relu^k (k >= 2) is C¹: a neuron whose pre-activation is exactly 0 at N∞(x0)
    contributes 0 to the derivative. The kernel's enclosure of max(z, 0)^k on the ball 0
    recursed without end, which ended the prover's search and made a valid point invalid."""
    from absorb_formal.checker.rules import ray_limit as kernel

    text = ("block X { activation relu^2 dim 2 width 2 norm pre rmsnorm { eps 1e-6 "
            "gamma = [1/2, 1] } up = [[1, -1], [-3, 2]] down = [[-2, -3], [-2, 2]] }\n"
            "claim X is not absorbable\n")
    assert [o for _, o, _ in outcomes(text, tmp_path)] == [PROVED]
    b = {"dim": 3, "width": 4, "depth": 1,
         "activation": {"kind": "relu_pow", "gated": False, "name": "relu^2", "param": None,
                        "power": 2, "coeffs": []},
         "norm": {"placement": "pre", "norms": [{"kind": "layernorm", "eps": "1/100000",
                                                 "gamma": None, "beta": None}]},
         "skip": {"scale": "1"}, "layers": None}
    layer = {"up": [["1", "0", "2"], ["0", "1", "-1"], ["1", "1", "1"], ["-1", "2", "0"]],
             "down": [["1", "0", "1", "0"], ["0", "1", "0", "1"], ["1", "1", "-1", "0"]]}
    # Πx0 = (-2/3, 1/3, 1/3): neuron 2 (Πu ∝ (0, 1, -1)) has pre-activation exactly 0
    kernel.check(b, layer, {"kind": "ray limit", "x0": ["0", "1", "1"], "w": ["0", "1", "-1"]})


@pytest.mark.parametrize("text", [
    "block F { activation relu^2 dim 4 width 8 norm post rmsnorm { eps 1e-6 } }\n"
    "claim F is never absorbable\n",
    "block G { activation swiglu dim 4 width 8 norm post rmsnorm { eps 1e-6 } }\n"
    "claim G is never absorbable\n",
    "block H { activation relu dim 4 width 8 norm post rmsnorm { eps 1e-6 } }\n"
    "claim H is generically not absorbable\n",
])
def test_post_rmsnorm_family_claims_are_the_bare_familys_and_check(tmp_path, text):
    assert [o for _, o, _ in outcomes(text, tmp_path)] == [PROVED]


def test_an_exact_export_is_proved_equal_to_its_block(tmp_path):
    """Stored values that are the exact witness (rounding error 0) are read back and proved
    equal to the block by canonical forms; a post-norm block's export to its projected
    block (the model then computes N(P(x)))."""
    from absorb_formal.export.witness import export

    spec = tmp_path / "s.mlp"
    down = "[[-1, 0, 1/2], [0, -1, 1/4]]"
    spec.write_text(f"block D {{ activation relu dim 2 width 3 up = [[1, 0], [0, 1], [1, 1]] "
                    f"down = {down} }}\nblock P {{ activation relu dim 2 width 3 norm post "
                    f"layernorm {{ eps 1e-12 }} up = [[1, 0], [0, 1], [1, 1]] down = {down} }}\n"
                    "block R { activation relu dim 2 width 3 up = [[1, 0], [0, 1], [1, 1]] "
                    "down = [[-1, 0, 7/10], [0, -1, 3/10]] }\n")
    for name in ("D", "P"):
        record = export(spec, name, tmp_path / f"{name}.safetensors")
        assert record["equals"].startswith("proved"), record["equals"]
    rounded = export(spec, "R", tmp_path / "R.safetensors")  # 7/10 is no binary float
    assert rounded["equals"].startswith("not tried")


def test_a_saturated_gelu_branch_is_still_refuted(tmp_path):
    """A branch that moves very little (gelu far below 0: σ' about 1e-14) is proposed by the
    float search all the same, and the checker's balls prove it moves."""
    text = ("block S { activation gelu dim 2 width 1 bias norm pre rmsnorm { eps 1e-5 } "
            "up = [[1, 0]] up_bias = [-8] down = [[1], [1]] }\nclaim S is not absorbable\n")
    [(_, outcome, doc)] = outcomes(text, tmp_path)
    assert outcome == PROVED and doc["certificate"]["kind"] == "ray limit"


def test_the_generic_engine_decides_no_norm(tmp_path):
    from absorb_formal.decide.dispatch import decide

    spec = load_text(block("gelu", "pre layernorm { eps 1e-5 }") + "claim B is not absorbable\n",
                     "s.mlp", tmp_path)
    result = decide(spec, spec.statements[0], "generic")
    assert result.outcome == UNKNOWN and "generic engine encodes no norm" in result.reason


@pytest.mark.parametrize(("text", "said"), [
    ("block A {\n activation relu dim 2 width 2\n norm pre rmsnorm { eps 1e-5\n}\nquery A\n",
     "closed the norm opened at 3:11: is the norm's own '}' missing?"),
    ("block A {\n activation relu dim 2\n norm pre rmsnorm { eps 1e-5\n width 2\n"
     " up = [[1, 0], [0, 1]]\n}\n", "the norm opened at 3:11 is still open"),
])
def test_a_norm_left_open_is_named(tmp_path, text, said):
    with pytest.raises(SpecError) as error:
        load_text(text, "s.mlp", tmp_path)
    assert said in error.value.diagnostics[0].message, error.value.diagnostics[0].message
