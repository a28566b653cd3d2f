"""The corpus (specs/, the examples included): every outcome is the one the spec expects
(`# expect:` comments; default proved), and every witness computes its block."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest

from absorb_formal.checker.kernel.contract import CONSTRUCTIONS, Check
from absorb_formal.language import load_file
from absorb_formal.model.result import PROVED, REFUTED
from absorb_formal.numeric.backends import NumpyBackend
from absorb_formal.numeric.crosscheck import (
    MIN_POINTS,
    TOLERANCE,
    construction,
    doubled,
    flipped,
    pairs,
)
from absorb_formal.numeric.floatblock import from_block, plain_from_json

from ..conftest import CORPUS, ROOT

PROOFS = ROOT / "proofs"

SPECS = sorted(CORPUS.rglob("*.mlp"))


def _witnesses(certificate) -> list[dict]:
    """Every witness certificate inside a certificate (min-width ones nest theirs)."""
    if not isinstance(certificate, dict):
        return []
    found = [certificate] if certificate.get("kind") == "witness" else []
    for value in certificate.values():
        found += _witnesses(value)
    return found


def _outcomes(path, corpus_run) -> dict[int, tuple[str, object]]:
    """line → (outcome, certificate) of each claim of the corpus file `path`, from the one run
    of the whole corpus (conftest.corpus_run)."""
    shown = corpus_run.folder / "specs" / path.relative_to(CORPUS)
    files = {f["path"]: f for f in corpus_run.doc["files"]}
    assert str(shown) in files, shown
    return {r["line"]: (r["outcome"], r["certificate"]) for r in files[str(shown)]["results"]}


@pytest.mark.parametrize("path", SPECS, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_outcomes_meet_expectations_and_witnesses_compute_the_block(path, corpus_run):
    spec = load_file(path)
    outcomes = _outcomes(path, corpus_run)
    assert sorted(outcomes) == sorted(s.pos.line for s in spec.statements)
    for statement in spec.statements:
        outcome, certificate = outcomes[statement.pos.line]
        assert outcome == spec.expected(statement), (statement.statement, outcome)
        if outcome in (PROVED, REFUTED):
            assert certificate, statement.statement
        block = spec.blocks[statement.block]
        if not block.is_concrete:
            continue
        if block.norm is not None:  # post-norm: a witness replaces the reduced block (Lemma P)
            from absorb_formal.decide.sublayer import reduced

            if block.norm.placement != "post" or reduced(block)[0] is None:
                assert not _witnesses(certificate), statement.statement  # never-proofs only
                continue
            block = reduced(block)[0]
        for witness in _witnesses(certificate):
            x = np.random.default_rng(0).normal(size=(1000, block.dim)) * 3
            if witness.get("check") == Check.SPARE_PAIRS:  # large blocks: no stored layers
                assert np.allclose(_spare_pairs(block, witness, x), block.evaluate(x),
                                   rtol=1e-9, atol=1e-9)
                continue
            if witness.get("check") in (Check.DOUBLES, Check.ROWS_NEGATED):  # large: Δ or J stored
                reference = from_block(block)
                plain = (doubled(block, reference, witness) if witness["check"] == Check.DOUBLES
                         else flipped(block, reference, witness))
                assert np.allclose(NumpyBackend().evaluate(plain, x), block.evaluate(x),
                                   rtol=1e-9, atol=1e-9)
                continue
            if witness.get("check") in CONSTRUCTIONS:  # §8 linear neurons / quadruples
                plain = construction(block, from_block(block))
                assert np.allclose(NumpyBackend().evaluate(plain, x), block.evaluate(x),
                                   rtol=1e-9, atol=1e-9)
                continue
            if witness.get("check") == Check.LAYERS_ABSORBED:  # a certificate per layer
                layers = pairs(block, witness)
                assert len(layers) == block.depth, witness
                for reference, plain in layers:
                    engine = NumpyBackend()
                    assert np.allclose(engine.evaluate(plain, x), engine.evaluate(reference, x),
                                       rtol=1e-9, atol=1e-9)
                continue
            plain = plain_from_json(block, witness["layers"])  # algebraic entries too
            assert np.allclose(NumpyBackend().evaluate(plain, x), block.evaluate(x),
                               rtol=1e-9, atol=1e-9)


def _spare_pairs(block, witness, x):
    """The large-block construction in floats: the block without its skip (own neurons,
    biases unchanged) plus, per rank-one term p qᵀ of S, p/(2a)·(σ(q·x) − σ(−q·x)); S = cI:
    q = e_k; a matrix S: p = S[:,C_k], q = row k of S[R,C]⁻¹·S[R,:]."""
    skip = block.skip.apply_float(np.eye(block.dim)).T  # S as a float matrix
    sigma, a = block.activation.scalar.numpy, float(Fraction(witness["a"]))
    columns = witness["columns"]
    p = skip[:, columns]
    q = np.eye(block.dim)[columns] if "rows" not in witness else \
        np.linalg.solve(skip[np.ix_(witness["rows"], columns)], skip[witness["rows"], :])
    z = x @ q.T  # one column per spare pair
    return block.evaluate(x) - x @ skip.T + (sigma(z) - sigma(-z)) @ p.T / (2 * a)


def test_corpus_covers_every_rule(corpus_run):
    methods = {r["method"] for f in corpus_run.doc["files"] for r in f["results"]}
    for rule in ("T1 homogeneity", "T2 parity", "T3 boundedness", "T4 flatness",
                 "§4 canonical form + width search", "§4 canonical forms", "§5 GLU sign flips",
                 "§5 stack of per-layer witnesses", "linear rank (§4)", "§4 genericity",
                 "§4 rank of S", "§4 subset condition", "§4 relu family, d = 1",
                 "spare pairs (§4)", "plain family (skip none)",
                 "§4 key count + doubles (large block)",
                 "§8.2 flip sets + unique solution mod q", "§10.2 ray limit",
                 "§10.2 gated pre-norm Jacobian"):
        assert rule in methods, rule


# ---- the one run of the whole corpus (conftest.corpus_run) -------------------------------
# Tests that read the shared run live here, in one module, so that pytest-xdist's
# `--dist loadfile` (the README's command) gives them to one worker, which decides the corpus
# once.

def test_reproving_the_corpus_reproduces_proofs_byte_for_byte(corpus_run):
    # specs/ and p/ side by side, as specs/ and proofs/ in the project: the stored spec paths
    # (relative to each certificate's folder) come out the same
    assert corpus_run.run.code in (0, 1, 3)
    written = corpus_run.folder / "p"
    fresh = {str(p.relative_to(written)): p.read_bytes() for p in written.rglob("*.json")}
    kept = {str(p.relative_to(PROOFS)): p.read_bytes() for p in PROOFS.rglob("*.json")}
    assert fresh.keys() == kept.keys()
    changed = [n for n in fresh if fresh[n] != kept[n]]
    assert not changed, changed


def test_every_absorbable_verdict_in_the_corpus_is_cross_checked(corpus_run):
    assert "--crosscheck" in corpus_run.args and "3000" in corpus_run.args
    doc = corpus_run.doc
    checked = 0
    for f in doc["files"]:
        for r in f["results"]:
            witness = r["certificate"] and '"witness"' in str(r["certificate"]).replace("'", '"')
            if witness:
                assert "crosscheck" in r, (f["path"], r["statement"])
                figures = r["crosscheck"]
                # witnesses of millions of weights (large constructions) get fewer points
                assert figures["points"] >= min(3000, MIN_POINTS) and figures["backend"] == "numpy"
                assert figures["max_rel_error"] <= TOLERANCE
                assert "cross-check" in r["verdict"]
                checked += 1
    assert checked >= 40


def test_output_is_byte_identical_across_runs_and_with_parallel_jobs(cli, corpus_run):
    # the shared sequential run of the corpus against a parallel one (other certificate folder)
    args = [a if a != str(corpus_run.folder / "p") else str(corpus_run.folder / "p2")
            for a in corpus_run.args]
    parallel = cli("-j", "2", *args).out
    assert corpus_run.run.out == parallel
    text = [cli("--crosscheck", "1000", CORPUS / "paper").out for _ in range(2)]
    assert text[0] == text[1]


def test_certificates_are_written_atomically(corpus_run):
    out = corpus_run.folder / "p"
    assert corpus_run.run.code in (0, 1, 3) and len(list(out.rglob("*.json"))) > 300
    assert not [p for p in out.rglob("*") if p.name.endswith(".tmp")]
