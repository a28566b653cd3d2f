"""Blocks beyond the exact-work limit: the generic-case modular-functional certificate
(docs/certificates.md), issued from loaded float weights and re-checked from the checker's own
exact reading of the weight files the certificate names (file, key, SHA-256)."""

from __future__ import annotations

import copy
import json
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from absorb_formal.checker import verify
from absorb_formal.checker.kernel.contract import Invalid
from absorb_formal.checker.readers.reading import Reading, spec_location
from absorb_formal.cli.check import check_document
from absorb_formal.decide.modular import PRIME
from absorb_formal.model.exactarray import residues
from absorb_formal.weights.arrays import Loaded

D, M = 256, 512  # 2·256·512 = 262,144 weights: just past the 250,000 exact-work limit

SPEC = """block Big {{
    activation {act}
    dim {d}  width {m}  skip {skip}
    up   = load("w.npz", "up")
    down = load("w.npz", "down")
}}
claim Big is not absorbable
"""


def big(tmp_path, act="relu", skip="identity", parallel=False, seed=0):
    rng = np.random.default_rng(seed)
    up = (rng.standard_normal((M, D)) * 0.05).astype(np.float32)
    down = (rng.standard_normal((D, M)) * 0.05).astype(np.float32)
    if parallel:
        up[1] = 2 * up[0]  # two neurons on one line: not the generic case
    np.savez(tmp_path / "w.npz", up=up, down=down)
    spec = tmp_path / "big.mlp"
    spec.write_text(SPEC.format(act=act, d=D, m=M, skip=skip), encoding="utf-8")
    return spec


@pytest.fixture
def certified(tmp_path, cli, monkeypatch):
    monkeypatch.chdir(tmp_path)
    spec = big(tmp_path)
    run = cli("--crosscheck", "0", "--certificates", "certs", "--json", spec.name)
    assert run.code == 0, run.out + run.err
    path = tmp_path / "certs" / "big.mlp.7.json"
    return path, json.loads(path.read_text(encoding="utf-8"))


def test_large_generic_relu_block_is_refuted_with_a_modular_functional(certified, cli):
    path, doc = certified
    assert doc["outcome"] == "proved"
    assert doc["certificate"]["kind"] == "modular functional"
    assert doc["blocks"]["Big"]["layers"]["sources"] == [
        {name: {"file": "w.npz", "key": name, "transpose": False,
                "sha256": doc["files"]["w.npz"]} for name in ("up", "down")}]
    run = cli("check", path)
    assert run.code == 0 and ": valid — claim proved: " in run.out, run.out


def test_without_the_weights_the_certificate_cannot_be_checked(certified):
    _, doc = certified
    verdict = verify(doc)
    assert verdict.status == "invalid" and "weights are not embedded" in verdict.reason


def test_changed_weight_files_are_caught(certified, tmp_path):
    path, _ = certified
    with np.load(tmp_path / "w.npz") as z:
        up, down = z["up"].copy(), z["down"].copy()
    down[0, 0] += 1
    np.savez(tmp_path / "w.npz", up=up, down=down)
    verdict, _ = check_document(path)
    assert verdict.status == "invalid" and "stale" in verdict.reason
    assert "weight file 'w.npz' changed since certification" in verdict.reason


def test_a_tampered_weight_file_is_caught_even_with_a_forged_hash(certified, tmp_path):
    """Bytes changed under an unchanged name: the modular check reads the new values itself,
    so even a forged SHA-256 in the document cannot make them pass."""
    path, doc = certified
    with np.load(tmp_path / "w.npz") as z:
        up, down = z["up"].copy(), z["down"].copy()
    up[[0, 1]] = up[[1, 0]] * 1.5
    np.savez(tmp_path / "w.npz", up=up, down=down)
    from absorb_formal.checker.readers.files import sha256_file

    forged = copy.deepcopy(doc)
    new_hash = sha256_file(tmp_path / "w.npz")
    forged["files"]["w.npz"] = new_hash
    for source in forged["blocks"]["Big"]["layers"]["sources"][0].values():
        source["sha256"] = new_hash
    path.write_text(json.dumps(forged), encoding="utf-8")
    verdict, _ = check_document(path)
    assert verdict.status == "invalid" and "not orthogonal" in verdict.reason, verdict.reason


def test_a_rounding_loader_in_the_prover_is_caught_on_a_large_block(tmp_path, cli,
                                                                     monkeypatch):
    """The prover's functional on float16-rounded weights does not hold for the exact ones
    the checker reads from the file."""
    from absorb_formal.language import validate

    monkeypatch.chdir(tmp_path)
    spec = big(tmp_path)
    real = validate.load_array
    monkeypatch.setattr(validate, "load_array", lambda path, key, vector=False: Loaded(
        real(path, key, vector).array().astype(np.float16).astype(np.float32), "plain"))
    assert cli("--crosscheck", "0", "--certificates", "certs", spec.name).code == 0
    verdict, _ = check_document(tmp_path / "certs" / "big.mlp.7.json")
    assert verdict.status == "invalid" and "not orthogonal" in verdict.reason, verdict.reason


def _y_changed(y):
    return [(y[0] + 1) % 2_097_143] + y[1:]


@pytest.mark.parametrize(("field", "value", "reason"), [
    ("Y_dot_S", lambda v: v % 2_097_142 + 1, "stored <Y, S>"),
    ("prime", PRIME - 1, "not an odd prime"),
    ("rows", [0, 0, 1], "distinct coordinates"),
    ("rule", "§4 something else", "generic case"),
    ("minor_prime", 2_097_133, "not orthogonal"),
    ("minor_prime", 2_097_144, "not an odd prime below 2^21"),
    ("minor_prime", 2**31 - 1, "not an odd prime below 2^21"),
    ("minor_prime", 3, "residues in [0, 3)"),
    ("Y", _y_changed, "not orthogonal"),
    ("Y", lambda y: y[:-1], "m+1 residues"),
    ("Y", lambda y: [y[0] + 2_097_143] + y[1:], "residues in [0"),
    ("Y", lambda y: [0] * len(y), "<Y, S> is 0"),
])
def test_corrupted_modular_certificates_are_rejected(certified, field, value, reason):
    path, doc = certified
    weights = _exact(path, doc)
    assert verify(doc, weights).status == "valid"
    broken = copy.deepcopy(doc)
    cert = broken["certificate"]
    cert[field] = value(cert[field]) if callable(value) else value
    verdict = verify(broken, weights)
    assert verdict.status == "invalid" and reason in verdict.reason, verdict.reason


def test_a_skip_inside_the_span_is_refused(certified):
    """S = 0 is orthogonal to every Y: the checker must refuse the certificate."""
    path, doc = certified
    broken = copy.deepcopy(doc)
    broken["blocks"]["Big"]["skip"] = {"scale": "0"}
    verdict = verify(broken, _exact(path, doc))
    assert verdict.status == "invalid" and "<Y, S> is 0" in verdict.reason


def test_non_generic_large_blocks_stay_unknown(tmp_path, cli, monkeypatch):
    monkeypatch.chdir(tmp_path)
    spec = big(tmp_path, parallel=True)
    run = cli("--crosscheck", "0", "--json", spec.name)
    [result] = run.json()["files"][0]["results"]
    assert result["outcome"] == "unknown"  # rows 0 and 1 share a line: no generic case
    assert f"live-key count {M - 2} and" in result["reason"], result["reason"]


def test_gelu_large_blocks_get_the_same_certificate(tmp_path, cli, monkeypatch):
    monkeypatch.chdir(tmp_path)
    spec = big(tmp_path, act="gelu", skip="2")
    run = cli("--crosscheck", "0", "--certificates", "certs", spec.name)
    assert run.code == 0 and "modular functional" in run.out, run.out
    verdict, _ = check_document(tmp_path / "certs" / "big.mlp.7.json")
    assert verdict.status == "valid", verdict.reason


def test_large_biased_gelu_blocks_get_the_certificate_too(tmp_path, cli, monkeypatch):
    """docs/rules.md §8.1: with biases the generic case is §4's subset condition unchanged, so the
    same functional certifies a large biased block (a GPT-2-shaped layer, scaled down); biases are
    loaded as 1-D arrays, the up weights stored input × output and read with `.T`."""
    monkeypatch.chdir(tmp_path)
    rng = np.random.default_rng(3)
    with np.load(big(tmp_path, act="gelu").parent / "w.npz") as z:
        up, down = z["up"], z["down"]
    np.savez(tmp_path / "w.npz", up_t=up.T.copy(), down=down,
             b=(rng.standard_normal(M) * 0.1).astype(np.float32),
             c=(rng.standard_normal(D) * 0.1).astype(np.float32))
    spec = tmp_path / "biased.mlp"
    spec.write_text(f"""block Big {{
    activation gelu  dim {D}  width {M}  bias
    up = load("w.npz", "up_t").T   up_bias = load("w.npz", "b")
    down = load("w.npz", "down")   down_bias = load("w.npz", "c")
}}
claim Big is not absorbable
""", encoding="utf-8")
    run = cli("--crosscheck", "0", "--certificates", "certs", spec.name)
    assert run.code == 0 and "modular functional" in run.out, run.out + run.err
    verdict, _ = check_document(tmp_path / "certs" / "biased.mlp.6.json")
    assert verdict.status == "valid", verdict.reason


def _exact(path, doc):
    """The weights as the checker reads them from the files the document names."""
    return Reading(spec_location(doc, path)).weights(doc)


floats = st.floats(allow_nan=False, allow_infinity=False, width=64)


@given(st.lists(floats, min_size=1, max_size=20))
def test_vectorised_residues_are_the_exact_ones(values):
    got = residues(np.array(values, dtype=np.float64), PRIME).tolist()
    want = [Fraction(x).numerator * pow(Fraction(x).denominator, -1, PRIME) % PRIME
            for x in values]
    assert got == want



def test_the_certificate_records_the_functional(certified):
    _, doc = certified
    cert = doc["certificate"]
    assert cert["minor_prime"] == 2_097_143 and cert["prime"] == PRIME
    assert len(cert["Y"]) == M + 1 and all(0 <= v < 2_097_143 for v in cert["Y"])
    assert 0 < cert["Y_dot_S"] < 2_097_143


def test_a_minor_singular_mod_the_first_prime_is_tried_mod_the_next(certified, monkeypatch):
    """A false zero mod the first prime (forced here) sends the prover to the second; the
    checker accepts a functional modulo any odd prime below 2^21."""
    from absorb_formal.checker.kernel import modlu
    from absorb_formal.decide import modular
    from absorb_formal.language import load_file
    from absorb_formal.numeric import accelerated

    path, doc = certified
    first, second = modlu.primes(2)
    real = accelerated.functional_auto
    monkeypatch.setattr(accelerated, "functional_auto",
                        lambda work, p: None if p == first else real(work, p))
    block = load_file(path.parent.parent / "big.mlp").blocks["Big"]
    found = modular.decide(block, block.width, True)
    assert found is not None and found.certificate["minor_prime"] == second
    other = copy.deepcopy(doc)
    other["certificate"] = found.certificate
    assert verify(other, _exact(path, doc)).status == "valid"


def test_claims_queries_and_repeated_loads_share_one_lu(tmp_path, monkeypatch):
    """The residues and the functional are computed once per block's values
    (decide/large.py): a second claim, a query's min-width bounds and the same spec loaded
    again reuse them; a block with one weight changed does not."""
    from absorb_formal.decide import large
    from absorb_formal.language import load_file
    from absorb_formal.numeric import accelerated

    monkeypatch.setattr(large, "_RECENT", [])
    spec = big(tmp_path, seed=5)
    calls = []
    real = accelerated.functional_auto
    monkeypatch.setattr(accelerated, "functional_auto",
                        lambda work, p: calls.append(p) or real(work, p))
    block = load_file(spec).blocks["Big"]
    first = large.decide(block, block.width)
    assert len(calls) == 1 and first.absorbable is False
    large.bounds(block)
    again = load_file(spec).blocks["Big"]  # another object, the same values
    assert again is not block and large.decide(again, again.width) == first
    assert len(calls) == 1
    with np.load(tmp_path / "w.npz") as z:
        up, down = z["up"].copy(), z["down"].copy()
    down[3, 4] = np.float32(0.5)
    np.savez(tmp_path / "w2.npz", up=up, down=down)
    (tmp_path / "other.mlp").write_text(spec.read_text().replace("w.npz", "w2.npz"))
    changed = load_file(tmp_path / "other.mlp").blocks["Big"]
    large.decide(changed, changed.width)
    assert len(calls) == 2


def test_a_minor_beyond_the_memory_left_is_decided_out_of_core(tmp_path, cli, monkeypatch):
    """10 MiB left: the minor (order 513, about 170 MiB with the LU's margins) is factored
    from a file, a few panels at a time; the certificate checks like any other."""
    from absorb_formal.checker.kernel import modlu
    from absorb_formal.decide import large, outofcore

    monkeypatch.setattr(large, "_RECENT", [])
    monkeypatch.chdir(tmp_path)
    spec = big(tmp_path, seed=9)
    monkeypatch.setattr(modlu, "bytes_available", lambda: 10 << 20)
    panels = []
    factor = outofcore._factor_in_file
    monkeypatch.setattr(outofcore, "_factor_in_file",
                        lambda a, p, width: panels.append(width) or factor(a, p, width))
    run = cli("--crosscheck", "0", "--json", "--certificates", "certs", spec.name)
    [result] = run.json()["files"][0]["results"]
    assert result["outcome"] == "proved" and "modular functional" in result["method"]
    assert panels and panels[0] < M + 1  # out of core, in more than one panel
    assert modlu.bytes_needed(M + 1) > 10 << 20
    checked = cli("check", "--json", "certs")
    assert checked.code == 0, checked.out + checked.err


def test_a_minor_beyond_memory_and_one_panel_is_an_honest_unknown(tmp_path, cli, monkeypatch):
    from absorb_formal.checker.kernel import modlu
    from absorb_formal.decide import large

    monkeypatch.setattr(large, "_RECENT", [])
    monkeypatch.chdir(tmp_path)
    spec = big(tmp_path, seed=9)
    monkeypatch.setattr(modlu, "bytes_available", lambda: 100 << 10)
    run = cli("--crosscheck", "0", "--json", spec.name)
    [result] = run.json()["files"][0]["results"]
    assert result["outcome"] == "unknown"
    assert "does not fit" in result["reason"] and "of memory" in result["reason"]


def test_the_memory_left_is_read_on_this_machine():
    from absorb_formal.checker.kernel import modlu

    have = modlu.bytes_available()
    assert have is None or have > 0
    assert modlu.bytes_needed(3073) < 2**30 < modlu.bytes_needed(16385) < 3 * 2**30


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64, np.int32])
def test_residues_in_bands_are_the_residues_of_the_whole(dtype, monkeypatch):
    from absorb_formal.model import exactarray

    rng = np.random.default_rng(4)
    array = (rng.standard_normal((37, 29)) * 1000).astype(dtype)
    whole = exactarray.residues(array, PRIME)
    monkeypatch.setattr(exactarray, "BAND", 100)  # bands of 3 rows
    assert np.array_equal(exactarray.residues(array, PRIME), whole)
    assert np.array_equal(exactarray.residues(array.T, PRIME), whole.T)
    want = [[Fraction(v).numerator * pow(Fraction(v).denominator, -1, PRIME) % PRIME
             for v in row] for row in array.astype(np.float64).tolist()]
    assert whole.tolist() == want


UP = [[1, 2, 3], [2, -1, 5], [3, 7, -2], [-4, 1, 6]]  # m = 4, d = 3: rows not parallel
DOWN = [[2, -3, 1, 4], [5, 1, -2, 3], [-1, 4, 6, 2]]


def _small(tmp_path, skip, down=DOWN, activation="relu"):
    """A 3 × 4 block of integers as the prover loads it, and as the checker reads it."""
    from absorb_formal.checker.readers import files
    from absorb_formal.language import load_file

    spec = tmp_path / "z.mlp"
    spec.write_text(f"""block Z {{
    activation {activation}  dim 3  width 4
    skip {skip}
    up = {UP}
    down = {down}
}}
claim Z is not absorbable
""", encoding="utf-8")

    def dyadic(rows):
        values = np.array(rows, dtype=np.int64)
        return files.Dyadic(values < 0, np.abs(values).astype(np.uint64),
                            np.zeros(values.shape, dtype=np.int64))

    layers = [{"up": dyadic(UP), "down": dyadic(down)}]
    rows = [[Fraction(v) for v in row] for row in skip]
    return load_file(spec).blocks["Z"], layers, lambda r, c: rows[r][c]  # S's entry (r, c)


def test_a_true_zero_mod_the_first_prime_is_certified_mod_the_second(tmp_path):
    """A minor whose determinant is a multiple of the first prime (S's one grid entry is that
    prime): no functional exists mod the first, so the prover certifies mod the second; the
    checker accepts it there and refuses the same Y claimed mod the first."""
    import flint

    from absorb_formal.checker.kernel import modlu
    from absorb_formal.checker.rules import modular as checking
    from absorb_formal.decide import modular

    first, second = modlu.primes(2)
    coords = [(r, c) for r in range(3) for c in range(3)][:5]
    minor = [[DOWN[r][i] * UP[i][c] for i in range(4)] for r, c in coords]
    skip = [[0] * 3 for _ in range(3)]
    skip[0][0] = first  # the last column is first · e_1: det = first · (its cofactor)
    det = int(flint.fmpz_mat([row + [skip[r][c]]
                              for row, (r, c) in zip(minor, coords, strict=True)]).det())
    assert det % first == 0 and det % second != 0
    block, layers, exact_skip = _small(tmp_path, skip)
    found = modular.decide(block, 4, True)
    assert found is not None and found.absorbable is False
    cert = found.certificate
    assert cert["minor_prime"] == second and len(cert["Y"]) == 5
    checking.check(exact_skip, 4, layers, cert, Fraction(1, 2))  # valid: no exception
    with pytest.raises(Invalid):
        checking.check(exact_skip, 4, layers, {**cert, "minor_prime": first}, Fraction(1, 2))


def test_a_dead_neuron_is_refused_even_with_an_orthogonal_y(tmp_path):
    """A zero column of D makes its term 0, orthogonal to every Y: a Y built on the live terms
    alone passes the orthogonality test, so the checker must require every neuron alive (the
    generic case) — and the prover issues nothing for such a block."""
    from absorb_formal.checker.kernel import modlu, systems
    from absorb_formal.checker.rules import modular as checking
    from absorb_formal.decide import modular

    q = modlu.primes(1)[0]
    down = [row[:] for row in DOWN]
    for row in down:
        row[3] = 0  # neuron 3 is dead
    skip = [[1, 0, 0], [0, 1, 0], [0, 0, 1]]
    block, layers, exact_skip = _small(tmp_path, skip, down)
    assert modular.decide(block, 4, True) is None
    coords = [(r, c) for r in range(3) for c in range(3)][:4]  # 4 coordinates: 3 live terms
    minor = np.array([[down[r][i] * UP[i][c] for i in range(3)] + [skip[r][c]]
                      for r, c in coords]) % q
    y, value = modlu.functional_floats(minor.astype(np.float64), q)
    forged = {"kind": "modular functional", "rule": "§4 generic case", "prime": PRIME,
              "minor_prime": q, "rows": [0, 1], "cols": [0, 1, 2], "Y": y + [0],
              "Y_dot_S": value}
    grid = systems.on_grid(y + [0], 2, 3)
    d_res, u_res = np.array(down)[:2] % q, np.array(UP)[:, :3] % q
    assert not systems.functional_values(grid, d_res, u_res, q).any()  # orthogonal to all 4
    with pytest.raises(Invalid, match="not every neuron is alive"):
        checking.check(exact_skip, 4, layers, forged, Fraction(1, 2))


def test_a_prime_dividing_the_slope_is_refused(tmp_path):
    """leaky_relu(1/q): a = (1 + 1/q)/2 has q in its denominator, so a functional mod q proves
    nothing; the prover takes the next prime and the checker refuses q."""
    from absorb_formal.checker.kernel import modlu
    from absorb_formal.checker.rules import modular as checking
    from absorb_formal.decide import modular

    first, second = modlu.primes(2)
    skip = [[1, 0, 0], [0, 1, 0], [0, 0, 1]]
    block, layers, exact_skip = _small(tmp_path, skip, activation=f"leaky_relu(1/{first})")
    found = modular.decide(block, 4, True)
    assert found is not None and found.certificate["minor_prime"] == second
    slope = (1 + Fraction(1, first)) / 2
    checking.check(exact_skip, 4, layers, found.certificate, slope)
    other = modular._functional(block, block.layers[0].up, block.layers[0].down, [0, 1],
                                [0, 1, 2], 4, first)
    assert other is not None
    y, value = other
    forged = {**found.certificate, "minor_prime": first, "Y": y, "Y_dot_S": value}
    with pytest.raises(Invalid, match="divides the denominator of a"):
        checking.check(exact_skip, 4, layers, forged, slope)


def test_rows_alone_on_their_key_are_found_exactly_even_when_hashes_collide():
    """checker/rules/modular.py groups rows by a 64-bit hash, then compares rows sharing one: equal
    rows are never alone, and rows that merely collide (built here) still are."""
    from absorb_formal.checker.rules.modular import _alone

    rng = np.random.default_rng(0)
    for _ in range(200):
        m, d = int(rng.integers(1, 30)), int(rng.integers(1, 6))
        keys = rng.integers(0, 3, (m, d)).astype(np.int64)
        present = rng.random(m) < 0.8
        want = [bool(present[i]) and not any(
            present[j] and j != i and (keys[j] == keys[i]).all() for j in range(m))
            for i in range(m)]
        assert _alone(keys, present).tolist() == want
    w1 = 0x9E3779B97F4A7C15 | 1  # the second column's hash weight (the first's is 1)
    y = next(y for y in range(1, 100) if (y * w1) % 2**64 < 2**63)
    x = (y * w1) % 2**64
    keys = np.array([[x, 0], [0, y], [x, 0], [1, 1]], dtype=np.int64)
    assert _alone(keys[:2], np.ones(2, dtype=bool)).tolist() == [True, True]  # a collision
    assert _alone(keys, np.ones(4, dtype=bool)).tolist() == [False, True, False, True]


@pytest.mark.parametrize("skip", [
    {"scale": "3/2"}, {"scale": "0"},
    {"matrix": [["1", "2", "0"], ["-1/3", "0", "5"], ["0", "0", "7"]]}])
def test_the_checkers_skip_entries_are_its_skip_rows(skip):
    from absorb_formal.checker.kernel import linalg as exact

    block = {"dim": 3, "skip": skip}
    rows, entry = exact.skip_rows(block), exact.skip_entry(block)
    assert [[entry(r, c) for c in range(3)] for r in range(3)] == [list(row) for row in rows]
