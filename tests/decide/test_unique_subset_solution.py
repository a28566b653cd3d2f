"""Large blocks in the generic case decided both ways (docs/rules.md §4, "the generic case at
scale"): the unique solution of the subset system mod q proves planted absorbable blocks (the
witness J, checked exactly) and refutes the others (a value that is not 0/1, or the only 0/1
candidate failing exactly), each re-checked from the checker's own reading of the files."""

from __future__ import annotations

import json
import math
from fractions import Fraction
from pathlib import Path
from typing import Any

import flint
import numpy as np
import pytest

from absorb_formal.checker.kernel import modlu, systems
from absorb_formal.checker.kernel.contract import Check, Kind
from absorb_formal.decide import unique_subset
from absorb_formal.export.witness import read_export
from absorb_formal.language.load import load_text

from .test_large_blocks_at_every_width import doc_at, every_leaf_is_checked

Q = modlu.primes(1)[0]


def planted(tmp_path: Path, d: int = 64, m: int = 256, coefficient: float = 1.0,
            act: str = "relu", bias: bool = False, seed: int = 1) -> list[int]:
    """Random weights with d neurons J whose terms sum to −coefficient·S/(2a) (S = I):
    U_J = I + ½·superdiagonal, D_J = −coefficient·U_J⁻¹/(2a) (dyadic: exact in float64)."""
    rng = np.random.default_rng(seed)
    up, down = rng.standard_normal((m, d)), rng.standard_normal((d, m))
    square = np.eye(d) + 0.5 * np.eye(d, k=1)
    chosen = sorted(rng.choice(m, d, replace=False).tolist())
    up[chosen] = square
    down[:, chosen] = -np.linalg.inv(square) * coefficient  # a = 1/2 for relu and gelu
    arrays = {"up": up, "down": down}
    biases = ""
    if bias:
        arrays.update(b=rng.standard_normal(m), c=rng.standard_normal(d))
        biases = '  bias\n    up_bias = load("w.npz", "b")\n    down_bias = load("w.npz", "c")'
    np.savez(tmp_path / "w.npz", **arrays)
    (tmp_path / "big.mlp").write_text(f"""block Big {{
    activation {act}  dim {d}  width {m}  skip identity{biases}
    up   = load("w.npz", "up")
    down = load("w.npz", "down")
}}
claim Big is absorbable
claim min width of Big is {m}
""", encoding="utf-8")
    return [i + 1 for i in chosen]


def run(tmp_path, cli, monkeypatch, *extra):
    monkeypatch.chdir(tmp_path)
    result = cli("--certificates", "certs", "--json", *extra, "big.mlp")
    assert result.code in (0, 1, 3), result.out + result.err
    return result.json()["files"][0]["results"]


def test_a_planted_absorbable_block_is_proved_with_its_set_j(tmp_path, cli, monkeypatch):
    chosen = planted(tmp_path)
    results = run(tmp_path, cli, monkeypatch, "--crosscheck", "2000")
    assert [r["outcome"] for r in results] == ["proved", "proved"], results
    assert results[0]["method"] == unique_subset.METHOD
    path, doc = doc_at(tmp_path, 0)
    assert doc["certificate"]["check"] == Check.ROWS_NEGATED
    assert doc["certificate"]["flips"] == chosen
    assert results[0]["crosscheck"]["max_rel_error"] < 1e-12
    check = cli("check", "certs")
    assert check.code == 0 and "2 valid" in check.out, check.out
    every_leaf_is_checked(path, doc)
    # the min width: m keys need m neurons, and the flip witness has width m
    _, doc2 = doc_at(tmp_path, 1)
    assert doc2["certificate"]["kind"] == "minimal width"
    assert doc2["certificate"]["witness"]["check"] == Check.ROWS_NEGATED
    assert doc2["certificate"]["below"]["kind"] == "key count"


def test_a_non_0_1_solution_refutes(tmp_path, cli, monkeypatch):
    planted(tmp_path, coefficient=2.0)  # the terms of J sum to −2·S/(2a): c = 1/2 on J
    results = run(tmp_path, cli, monkeypatch, "--crosscheck", "0")
    # the min width is only bounded: m + 1 (this refutation) ≤ min width ≤ the construction's
    assert [r["outcome"] for r in results] == ["refuted", "unknown"], results
    path, doc = doc_at(tmp_path, 0)
    cert = doc["certificate"]
    assert cert["kind"] == Kind.UNIQUE_SUBSET_SOLUTION
    assert cert["value"] == (Q + 1) // 2  # 1/2 mod q
    assert cli("check", "certs").code == 0
    every_leaf_is_checked(path, doc)


def literal_block(tmp_path: Path, d: int = 32, m: int = 128) -> list[int]:
    """Integer weights, and d neurons whose terms sum to −S/(2a)/(q + 1): the unique rational
    solution is q + 1 on J, which is 1 mod q — the only 0/1 candidate, and it fails."""
    rng = np.random.default_rng(7)
    up = [[Fraction(int(v)) for v in row] for row in rng.integers(-3, 4, (m, d))]
    down = [[Fraction(int(v)) for v in row] for row in rng.integers(-3, 4, (d, m))]
    chosen = sorted(rng.choice(m, d, replace=False).tolist())
    square = flint.fmpq_mat(d, d, [1 if r == c else flint.fmpq(1, 2) if c == r + 1 else 0
                                   for r in range(d) for c in range(d)])
    inverse = square.inv()
    for n, i in enumerate(chosen):
        up[i] = [Fraction(1) if c == n else Fraction(1, 2) if c == n + 1 else Fraction(0)
                 for c in range(d)]
        for r in range(d):
            down[r][i] = -Fraction(int(inverse[r, n].p), int(inverse[r, n].q)) / (Q + 1)

    def matrix(rows: list[list[Fraction]]) -> str:
        return "[" + ",\n  ".join("[" + ", ".join(str(v) for v in row) + "]" for row in rows) + "]"

    (tmp_path / "big.mlp").write_text(f"""block Big {{
    activation relu  dim {d}  width {m}  skip identity
    up = {matrix(up)}
    down = {matrix(down)}
}}
claim Big is absorbable
""", encoding="utf-8")
    return [i + 1 for i in chosen]


def test_the_only_0_1_candidate_failing_exactly_refutes(tmp_path, cli, monkeypatch):
    chosen = literal_block(tmp_path)
    [result] = run(tmp_path, cli, monkeypatch, "--crosscheck", "0")
    assert result["outcome"] == "refuted", result
    path, doc = doc_at(tmp_path, 0)
    cert = doc["certificate"]
    assert cert["kind"] == Kind.UNIQUE_SUBSET_SOLUTION and cert["flips"] == chosen
    assert cert["coordinate"] == [0, 0]
    assert "neuron" not in cert
    every_leaf_is_checked(path, doc)


def test_a_biased_gelu_block_is_proved_and_exported_skip_free(tmp_path, cli, monkeypatch):
    planted(tmp_path, act="gelu", bias=True, seed=3)
    results = run(tmp_path, cli, monkeypatch, "--crosscheck", "2000")
    assert [r["outcome"] for r in results] == ["proved", "proved"], results
    assert results[0]["crosscheck"]["max_rel_error"] < 1e-12
    assert cli("check", "certs").code == 0
    export = cli("export", "big.mlp", "Big", "--width", "256", "--out", "free.safetensors")
    assert export.code == 0, export.out + export.err
    arrays, record = read_export(tmp_path / "free.safetensors")
    assert record["method"] == unique_subset.METHOD
    spec = load_text((tmp_path / "big.mlp").read_text(), "big.mlp", tmp_path)
    block = spec.blocks["Big"]
    rng = np.random.default_rng(0)
    x = rng.standard_normal((50, 64))
    want = block.evaluate(x)
    erf = np.vectorize(math.erf)
    hidden = x @ arrays["up"].T + arrays["up_bias"]
    got = (hidden * 0.5 * (1 + erf(hidden / np.sqrt(2)))) @ arrays["down"].T + arrays["down_bias"]
    assert np.abs(got - want).max() < 1e-9 * max(1.0, float(np.abs(want).max()))


def test_a_learned_skip_of_one_neurons_term_is_absorbed_by_flipping_it(tmp_path, cli,
                                                                        monkeypatch):
    """The issue's trained-FFN case at small scale: S = −d_j u_jᵀ read from a file; J = {j}."""
    d, m, j = 48, 200, 17
    rng = np.random.default_rng(2)
    up = (rng.standard_normal((m, d)) * 0.05).astype(np.float32)
    down = (rng.standard_normal((d, m)) * 0.05).astype(np.float32)
    skip = -np.outer(down[:, j].astype(np.float64), up[j].astype(np.float64))  # exact
    np.savez(tmp_path / "w.npz", up=up, down=down, skip=skip)
    (tmp_path / "big.mlp").write_text(f"""block Big {{
    activation gelu  dim {d}  width {m}  skip load("w.npz", "skip")
    up   = load("w.npz", "up")
    down = load("w.npz", "down")
}}
claim Big is absorbable
""", encoding="utf-8")
    [result] = run(tmp_path, cli, monkeypatch, "--crosscheck", "1000")
    assert result["outcome"] == "proved", result
    _, doc = doc_at(tmp_path, 0)
    assert doc["certificate"]["flips"] == [j + 1]
    assert cli("check", "certs").code == 0


def random_system(d: int, m: int, q: int, matrix_target: bool, seed: int, scalar: int
                  ) -> tuple[np.ndarray, np.ndarray, Any, np.ndarray, np.ndarray, np.ndarray]:
    """Random residues D, U, T (a d×d matrix, or `scalar` for T = scalar·I), the projected
    system built from them and the functionals' P and Q as int64."""
    rng = np.random.default_rng(seed)
    down, up = rng.integers(0, q, (d, m)), rng.integers(0, q, (m, d))
    target = rng.integers(0, q, (d, d)) if matrix_target else scalar
    work = systems.projected_system(down, up, target, 0, q)
    p_ = systems.random_residues(0, 0, m, d, q).astype(np.int64)
    q_ = systems.random_residues(0, 1, m, d, q).astype(np.int64)
    return down, up, target, work, p_, q_


@pytest.mark.parametrize("matrix_target", [False, True])
def test_the_projected_system_is_the_functionals_applied_to_each_term(matrix_target):
    """A[j, i] = p_jᵀ (d_i u_iᵀ) q_j and b_j = p_jᵀ T q_j mod q, against FLINT."""
    d, m, q = 5, 9, Q
    down, up, target, work, p_, q_ = random_system(d, m, q, matrix_target, 4, 12345)
    t = flint.nmod_mat(target.tolist() if matrix_target else
                       [[12345 if r == c else 0 for c in range(d)] for r in range(d)], q)
    for j in range(m):
        pj = flint.nmod_mat([p_[j].tolist()], q)
        qj = flint.nmod_mat([[int(v)] for v in q_[j]], q)
        for i in range(m):
            term = flint.nmod_mat([[int(down[r, i]) * int(up[i, c]) for c in range(d)]
                                   for r in range(d)], q)
            assert int(work[j, i]) == int((pj * term * qj)[0, 0])
        assert int(work[j, m]) == int((pj * t * qj)[0, 0])


def test_the_random_functionals_are_reproducible_in_bands():
    whole = systems.random_residues(0, 1, 7, 5, Q)
    assert whole.min() >= 0 and whole.max() < Q
    assert np.array_equal(whole, systems.random_residues(0, 1, 7, 5, Q))
    assert not np.array_equal(whole, systems.random_residues(0, 0, 7, 5, Q))


def test_a_forged_witness_for_a_generic_block_is_invalid(tmp_path, cli, monkeypatch):
    """A witness claiming J for a block whose terms do not sum to −S/(2a) is rejected: the
    checker recomputes the d×d identity exactly."""
    from absorb_formal.checker import verify
    from absorb_formal.checker.readers.reading import Reading, spec_location

    chosen = planted(tmp_path, coefficient=2.0)  # J's terms sum to twice the target
    run(tmp_path, cli, monkeypatch, "--crosscheck", "0")
    path, doc = doc_at(tmp_path, 0)
    forged = json.loads(json.dumps(doc))
    forged["outcome"] = "proved"
    forged["certificate"] = {"kind": "witness", "check": Check.ROWS_NEGATED, "width": 256,
                             "a": "1/2", "flips": chosen, "argument": ""}
    verdict = verify(forged, Reading(spec_location(doc, path)).weights(doc))
    assert verdict.status == "invalid" and "do not sum" in verdict.reason


def _exported_error(tmp_path: Path, cli, block: str, m: int) -> float:
    """Max |exported plain block − block| at 50 points, relative to the block's outputs."""
    out = f"{block}.safetensors"
    export = cli("export", "big.mlp", block, "--width", str(m), "--out", out)
    assert export.code == 0, export.out + export.err
    arrays, _ = read_export(tmp_path / out)
    spec = load_text((tmp_path / "big.mlp").read_text(), "big.mlp", tmp_path)
    d = spec.blocks[block].dim
    x = np.random.default_rng(0).standard_normal((50, d))
    want = spec.blocks[block].evaluate(x)
    got = np.maximum(x @ arrays["up"].T + arrays.get("up_bias", 0), 0) @ arrays["down"].T \
        + arrays.get("down_bias", 0)
    return float(np.abs(got - want).max() / max(1.0, float(np.abs(want).max())))


def loaded_spec(tmp_path: Path, up: np.ndarray, down: np.ndarray) -> None:
    """A relu block with S = I whose U and D are loaded from w.npz, claimed absorbable."""
    m, d = up.shape
    np.savez(tmp_path / "w.npz", up=up, down=down)
    (tmp_path / "big.mlp").write_text(f"""block Big {{
    activation relu  dim {d}  width {m}  skip identity
    up   = load("w.npz", "up")
    down = load("w.npz", "down")
}}
claim Big is absorbable
""", encoding="utf-8")


@pytest.mark.parametrize("dtype", ["uint8", "int8"])
def test_the_flip_witness_of_small_integer_weights_is_negated_exactly(tmp_path, cli,
                                                                       monkeypatch, dtype):
    """Negating rows of a uint8 U in its own dtype wrapped 1 to 255 (int8: −128 stayed
    −128), and the exported witness was another block; the flip now widens integers."""
    d, m = 32, 128
    rng = np.random.default_rng(1)
    up = rng.integers(-128 if dtype == "int8" else 0, 128, (m, d)).astype(dtype)
    down = rng.standard_normal((d, m))
    up[:d] = np.eye(d, dtype=dtype) * (-128 if dtype == "int8" else 1)
    down[:, :d] = -np.eye(d) / (-128 if dtype == "int8" else 1)  # Σ_J d_i u_iᵀ = −I
    loaded_spec(tmp_path, up, down)
    [result] = run(tmp_path, cli, monkeypatch, "--crosscheck", "0")
    assert result["outcome"] == "proved" and result["method"] == unique_subset.METHOD
    assert _exported_error(tmp_path, cli, "Big", m) < 1e-12


def test_a_remembered_block_does_not_lend_its_witness_to_one_with_other_biases(
        tmp_path, cli, monkeypatch):
    """Two blocks with the same U, D and S but different biases share residues and keys
    (`large._analysed` remembers them), not the flip witness: the biases are in it."""
    planted(tmp_path, d=32, m=128)
    rng = np.random.default_rng(5)
    np.savez(tmp_path / "b.npz", b=rng.standard_normal(128) * 3, c=rng.standard_normal(32))
    text = (tmp_path / "big.mlp").read_text(encoding="utf-8")
    biased = text.split("claim")[0].replace("block Big", "block Biased").replace(
        "skip identity", 'skip identity\n  bias\n  up_bias = load("b.npz", "b")\n'
                         '  down_bias = load("b.npz", "c")')
    (tmp_path / "big.mlp").write_text(text + biased + "claim Biased is absorbable\n",
                                      encoding="utf-8")
    results = run(tmp_path, cli, monkeypatch, "--crosscheck", "0")
    assert [r["outcome"] for r in results] == ["proved"] * 3, results
    assert _exported_error(tmp_path, cli, "Big", 128) < 1e-12  # remembers Big
    assert _exported_error(tmp_path, cli, "Biased", 128) < 1e-12


@pytest.mark.skipif(np.finfo(np.longdouble).maxexp <= 2000, reason="no wide long double")
def test_a_flip_witness_beyond_float64_range_skips_the_cross_check(tmp_path, cli, monkeypatch):
    """U_J = 2^2000·I in long double (no float64 holds it), D_J = −2^−2000·I: the cross-check
    has no float image to compare and says so; it raised a false INTERNAL ERROR when the
    long double array was cast to inf unchecked."""
    d, m = 32, 128
    rng = np.random.default_rng(3)
    up = rng.standard_normal((m, d)).astype(np.longdouble)
    down = rng.standard_normal((d, m)).astype(np.longdouble)
    big = np.longdouble(2) ** 2000
    up[:d] = np.eye(d, dtype=np.longdouble) * big
    down[:, :d] = -np.eye(d, dtype=np.longdouble) / big
    loaded_spec(tmp_path, up, down)
    [result] = run(tmp_path, cli, monkeypatch, "--crosscheck", "1000")
    assert result["outcome"] == "proved", result
    assert "skipped" in result["crosscheck"], result
    assert cli("check", "certs").code == 0


@pytest.mark.parametrize("q", [Q, modlu.primes(1, 2**25)[0]])
@pytest.mark.parametrize("matrix_target", [False, True])
def test_the_projected_system_in_bands_and_split_products_is_exact(q, matrix_target):
    """m > SYSTEM_BAND (the functionals drawn band by band) and, for q near 2^25, an inner
    dimension d = 40 above inner_limit(q) = 8 (product_mod reduces between pieces): every
    entry against the same system in exact int64 products (each < d·q² < 2^63)."""
    d, m = 40, systems.SYSTEM_BAND + 88
    assert modlu.inner_limit(q) < d or q == Q
    down, up, target, work, p_, q_ = random_system(d, m, q, matrix_target, 11, 987654)
    a = (p_ @ down % q) * (q_ @ up.T % q) % q
    t = target if matrix_target else np.eye(d, dtype=np.int64) * target
    b = ((p_ @ t % q) * q_ % q).sum(axis=1) % q
    assert np.array_equal(work[:, :m].astype(np.int64), a)
    assert np.array_equal(work[:, m].astype(np.int64), b)


def test_integer_fields_must_be_integers(tmp_path, cli, monkeypatch):
    """`int()` read 3.0, "3", 3.9 and true as neuron numbers: a field the checker did not
    see as written. Fields are integers in the document, as the prover writes them."""
    from absorb_formal.checker import verify
    from absorb_formal.checker.readers.reading import Reading, spec_location

    planted(tmp_path, coefficient=2.0)
    run(tmp_path, cli, monkeypatch, "--crosscheck", "0")
    path, doc = doc_at(tmp_path, 0)
    read = Reading(spec_location(doc, path)).weights(doc)
    assert verify(doc, read).status == "valid"
    cert = doc["certificate"]
    for field, value in [("neuron", float(cert["neuron"])), ("neuron", str(cert["neuron"])),
                         ("neuron", cert["neuron"] + 0.9), ("value", str(cert["value"])),
                         ("solve_primes", [float(q) for q in cert["solve_primes"]])]:
        forged = json.loads(json.dumps(doc))
        forged["certificate"][field] = value
        verdict = verify(forged, read)
        assert verdict.status == "invalid" and "not an integer" in verdict.reason, (field, value)
    witness = {"kind": "witness", "check": Check.ROWS_NEGATED, "width": 256, "a": "1/2",
               "flips": [], "argument": ""}
    for field, value, reason in [("width", 256.0, "not an integer"), ("flips", [True],
                                 "not an integer"), ("a", 0.5, "the stored a")]:
        forged = json.loads(json.dumps(doc))
        forged["outcome"] = "proved"
        forged["certificate"] = {**witness, field: value}
        verdict = verify(forged, read)
        assert verdict.status == "invalid" and reason in verdict.reason, (field, verdict)


@pytest.mark.parametrize("rows, expected", [
    ([[2, 0, 0], [0, 2, 0], [0, 0, 2]], 100),  # 2I: −2/2 = −1 ≡ 100 mod 101
    ([[0, 0, 0], [0, 0, 0], [0, 0, 0]], 0),
    ([[2, 0, 0], [0, 2, 1], [0, 0, 2]], None),  # an off-diagonal entry: not a multiple of I
    ([[2, 0, 0], [0, 3, 0], [0, 0, 2]], None),  # unequal diagonal
    ([[0, 0, 0], [0, 2, 0], [0, 0, 2]], None),  # a zero first diagonal entry only
])
def test_the_checkers_target_knows_a_multiple_of_the_identity(rows, expected):
    from absorb_formal.checker.rules import unique_subset as checker

    skip = [[Fraction(v) for v in row] for row in rows]  # distinct objects, as read from a file
    target = checker._target(skip, Fraction(1), 101)
    if expected is None:
        assert [[int(v) for v in row] for row in target] == \
            [[(-v * 51) % 101 for v in row] for row in rows]  # −S/2 entrywise (1/2 ≡ 51)
    else:
        assert target == expected
