"""Large blocks at every width (docs/rules.md §4, §7, §8.1): residue keys, the key-count refutation,
the spare-pair construction and min width bounds, each re-checked by the checker from its own
reading of the weight files."""

from __future__ import annotations

import copy
import json
from dataclasses import replace
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from absorb_formal.checker import verify
from absorb_formal.checker.kernel.contract import Check
from absorb_formal.checker.readers.reading import Reading, spec_location
from absorb_formal.cli.check import check_document
from absorb_formal.decide import doubles, large, modular, spare
from absorb_formal.language.load import load_text
from absorb_formal.model.blocks import Matrix, Skip

from ..checker.test_every_certificate_field_is_checked import changed, leaves
from ..weights.test_arrays_read_as_exact_rationals import write_safetensors

D, M = 256, 512  # 262,144 weights: just past the exact-work limit


def bf16(values: np.ndarray) -> np.ndarray:
    """float32 → bfloat16 bits (truncation: the values the file holds are what count)."""
    return (np.asarray(values, dtype=np.float32).view(np.uint32) >> 16).astype("<u2")


def bf16_block(tmp_path, act="gelu_tanh", bias=True, skip="identity", parallel=None, seed=0):
    """A GPT-2-like layout (up stored d × m, read with .T) in bf16 safetensors. Rows 0 and 1
    agree on their first 8 entries, so every pair of the first columns has a repeated ratio
    (the old 6-pair test ended unknown) though all rows are distinct."""
    rng = np.random.default_rng(seed)
    up = rng.standard_normal((M, D)) * 0.05
    up[1, :8] = up[0, :8]
    if parallel is not None:
        up[1] = parallel * up[0]  # exact in bf16 for ±1, 2
    down = rng.standard_normal((D, M)) * 0.05
    tensors = {"fc": ("BF16", bf16(up.T.copy())), "proj": ("BF16", bf16(down))}
    if bias:
        tensors["b"] = ("BF16", bf16(rng.standard_normal(M) * 0.1))
        tensors["c"] = ("BF16", bf16(rng.standard_normal(D) * 0.1))
    write_safetensors(tmp_path / "w.safetensors", tensors)
    biases = ('  bias\n    up_bias = load("w.safetensors", "b")\n'
              '    down_bias = load("w.safetensors", "c")') if bias else ""
    return f"""block Big {{
    activation {act}  dim {D}  width {M}  skip {skip}{biases}
    up = load("w.safetensors", "fc").T
    down = load("w.safetensors", "proj")
}}
"""


def prove(tmp_path, cli, monkeypatch, block: str, claims: str):
    monkeypatch.chdir(tmp_path)
    spec = tmp_path / "big.mlp"
    spec.write_text(block + claims, encoding="utf-8")
    run = cli("--crosscheck", "0", "--certificates", "certs", "--json", spec.name)
    assert run.code in (0, 1, 3), run.out + run.err
    return run.json()["files"][0]["results"]


def doc_at(tmp_path, claim: int):
    """The document of the spec's claim number `claim` (0-based) after the block."""
    lines = (tmp_path / "big.mlp").read_text(encoding="utf-8").splitlines()
    line = [n for n, text in enumerate(lines, 1) if text.startswith("claim")][claim]
    path = tmp_path / "certs" / f"big.mlp.{line}.json"
    return path, json.loads(path.read_text(encoding="utf-8"))


def weights(path, doc):
    return Reading(spec_location(doc, path)).weights(doc)


# ---- residue keys against the exact keys ---------------------------------------------------

def exact_lines(rows: list[list[Fraction]]) -> list[tuple[Fraction, ...] | None]:
    out: list[tuple[Fraction, ...] | None] = []
    for row in rows:
        first = next((v for v in row if v != 0), None)
        out.append(None if first is None else tuple(v / first for v in row))
    return out


small = st.integers(-3, 3)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.lists(small, min_size=3, max_size=3), min_size=1, max_size=8),
       st.lists(st.booleans(), min_size=8, max_size=8), st.integers(1, 7))
def test_residue_keys_agree_with_exact_lines(rows, live_columns, p):
    """Integer rows with entries in ±3: the residue classes (here mod a small prime, so that
    collisions mod p are possible) never split a line, and with p = PRIME they are the lines."""
    up = Matrix([[Fraction(v) for v in r] for r in rows])
    down = Matrix([[Fraction(int(live_columns[i])) for i in range(len(rows))]])
    lines = exact_lines([list(r) for r in up.rows])
    alone = [x is not None and lines.count(x) == 1 for x in lines]
    want_live = sum(a and live_columns[i] for i, a in enumerate(alone))
    found = modular.key_classes(up, down)
    assert found is not None
    assert found.live == want_live
    assert found.distinct == all(alone)
    prime = [2, 3, 5, 7, 11, 13, 17][p - 1]
    if prime == 2:
        return
    mod = modular.key_classes(up, down, prime)
    if mod is not None:  # None: an entry is a multiple of the prime
        assert mod.live <= want_live and (not mod.distinct or all(alone))


@pytest.mark.parametrize("factor", [2, -1])
def test_parallel_rows_get_no_distinct_keys(factor):
    up = Matrix([[Fraction(1), Fraction(2)], [Fraction(factor), Fraction(2 * factor)],
                 [Fraction(1), Fraction(3)]])
    down = Matrix([[Fraction(1)] * 3])
    found = modular.key_classes(up, down)
    assert found is not None and not found.distinct and found.live == 1


def test_a_multiple_of_p_is_not_trusted():
    up = Matrix([[Fraction(large.PRIME), Fraction(1)], [Fraction(1), Fraction(1)]])
    assert modular.key_classes(up, Matrix([[Fraction(1)] * 2])) is None


# ---- the bf16 block: own width, key count, construction, bounds ----------------------------

def test_bf16_distinct_rows_decide_like_fp32(tmp_path, cli, monkeypatch):
    block = bf16_block(tmp_path)
    [own] = prove(tmp_path, cli, monkeypatch, block, "claim Big is not absorbable\n")
    assert own["outcome"] == "proved" and own["certificate"]["kind"] == "modular functional"
    verdict, _ = check_document(doc_at(tmp_path, 0)[0])
    assert verdict.status == "valid", verdict.reason


@pytest.mark.parametrize("factor", [2, -1])
def test_parallel_bf16_rows_are_refuted_only_below_the_live_keys(tmp_path, cli, monkeypatch,
                                                                   factor):
    block = bf16_block(tmp_path, act="relu" if factor == 2 else "gelu", parallel=factor)
    results = prove(tmp_path, cli, monkeypatch, block,
                    f"claim Big is not absorbable\nclaim Big is not absorbable at width {M - 3}"
                    f"\nclaim Big is not absorbable at width {M - 2}\n")
    assert [r["outcome"] for r in results] == ["unknown", "proved", "unknown"]
    assert results[1]["certificate"] == {**results[1]["certificate"], "kind": "key count",
                                         "keys": M - 2, "width": M - 3}
    path, doc = doc_at(tmp_path, 1)
    assert verify(doc, weights(path, doc)).status == "valid"


@pytest.fixture
def bounded(tmp_path, cli, monkeypatch):
    """Identity skip: lo = m + 1 (modular functional at m), hi = m + d (doubles; spare pairs at
    m + 2d)."""
    block = bf16_block(tmp_path, act="silu", bias=False)
    results = prove(tmp_path, cli, monkeypatch, block,
                    f"claim Big is absorbable at width {M + 2 * D}\n"
                    f"claim Big is absorbable at width {M + D - 1}\n"
                    f"claim min width of Big is {M + 1}\n"
                    f"claim Big is not absorbable at width {M - 1}\n"
                    f"claim Big is absorbable at width {M + D}\n")
    return tmp_path, results


def test_width_bounds_at_both_ends(bounded):
    tmp_path, results = bounded
    assert [r["outcome"] for r in results] == ["proved", "unknown", "unknown", "proved",
                                               "proved"]
    assert results[0]["certificate"]["check"] == Check.SPARE_PAIRS
    assert results[4]["certificate"]["check"] == Check.DOUBLES
    assert results[4]["method"] == large.METHOD_DOUBLES
    assert results[2]["min_width_bounds"] == [M + 1, M + D], results[2]
    assert f"between {M + 1} and {M + D}" in results[2]["reason"]
    assert "doubles above" in results[2]["reason"]
    assert f"the doubles construction's {M + D}" in results[1]["reason"]
    for line in (0, 2, 3, 4):
        verdict, _ = check_document(doc_at(tmp_path, line)[0])
        assert verdict.status == "valid", (line, verdict.reason)


def test_every_field_of_the_large_certificates_is_checked(bounded):
    tmp_path, _ = bounded
    for line in (0, 2, 3, 4):
        every_leaf_is_checked(*doc_at(tmp_path, line))


def spread(found):
    """Of the leaves that differ only by list indices (the entries of one list), the first,
    a middle one and the last: the checker reads a list's entries in one loop, so its ends and
    one inside stand for all of them (a list of d flips costs d full checks otherwise)."""
    groups: dict[tuple, list] = {}
    for where, how in found:
        shape = (tuple("*" if isinstance(k, int) else k for k in where), how)
        groups.setdefault(shape, []).append((where, how))
    return [g[i] for g in groups.values() for i in sorted({0, len(g) // 2, len(g) - 1})]


def every_leaf_is_checked(path, doc):
    read = weights(path, doc)
    assert verify(doc, read).status == "valid"
    for where, how in spread(leaves(doc["certificate"])):
        broken = copy.deepcopy(doc)
        node = broken["certificate"]
        for key in where[:-1]:
            node = node[key]
        if how == "drop":
            node[where[-1]] = node[where[-1]][:-1]
        else:
            node[where[-1]] = changed(node[where[-1]])
        assert verify(broken, read).status == "invalid", (path, where, how)


def test_forged_key_count_and_factorisation_are_rejected(bounded):
    tmp_path, _ = bounded
    path, doc = doc_at(tmp_path, 3)
    read = weights(path, doc)
    forged = copy.deepcopy(doc)
    forged["certificate"]["keys"] = M - 1  # width M − 1 < M − 1 is false: but count is wrong
    assert verify(forged, read).status == "invalid"
    path, doc = doc_at(tmp_path, 0)
    read = weights(path, doc)
    rank_one = copy.deepcopy(doc)  # S = p qᵀ, p = e0 + e1, q = e0 + 2 e1: rank 1, 2 columns
    rank_one["blocks"]["Big"]["skip"] = {"matrix": [
        [str((r < 2) * (1 if c == 0 else 2 if c == 1 else 0)) for c in range(D)]
        for r in range(D)]}
    rank_one["certificate"].update(columns=[0], rows=[0], width=M + 2)
    assert verify(rank_one, read).status == "valid"
    for columns, rows in (([0], [2]), ([2], [0]), ([], []), ([0, 1], [0, 1])):
        forged = copy.deepcopy(rank_one)
        forged["certificate"].update(columns=columns, rows=rows, width=M + 2 * len(columns))
        assert verify(forged, read).status == "invalid", (columns, rows)
    scalar = copy.deepcopy(doc)
    scalar["certificate"]["rows"] = list(range(D))  # S = I: no rows field is expected
    assert verify(scalar, read).status == "invalid"


# ---- the construction, materialised: equal to the block at rational points ---------------

@pytest.mark.parametrize("skip", ["identity", "[[0, 2], [0, -1]]", "3/2", "none",
                                  "[[1, 2], [3, 4]]", "[[0, 0], [0, 0]]"])
@pytest.mark.parametrize("bias", [False, True])
@pytest.mark.parametrize("act", ["relu", "leaky_relu(1/4)"])
def test_witness_arrays_equal_the_block(skip, bias, act):
    biases = "  bias  up_bias = [1, -2, 1/2]  down_bias = [3, -1]" if bias else ""
    spec = load_text(f"""block B {{
    activation {act}  dim 2  width 3  skip {skip}{biases}
    up = [[1, 2], [-1, 1/2], [3, 0]]
    down = [[1, -2, 1/3], [0, 5, -1]]
}}
""", "t.mlp", __import__("pathlib").Path("."))
    block = spec.blocks["B"]
    up, down, up_bias, down_bias = large.witness_arrays(block)
    rank = {"identity": 2, "3/2": 2, "[[1, 2], [3, 4]]": 2, "[[0, 2], [0, -1]]": 1}.get(skip, 0)
    assert up.shape[0] == spare.upper_bound(block) == 3 + 2 * rank
    sigma = block.activation.scalar.exact
    rng = np.random.default_rng(1)
    for _ in range(12):
        x = [Fraction(int(v), 7) for v in rng.integers(-30, 30, 2)]
        pre = up.dot(np.array(x, dtype=object))
        if up_bias is not None:
            pre = pre + up_bias
        out = down.dot(np.array([sigma(h) for h in pre], dtype=object))
        if down_bias is not None:
            out = out + down_bias
        assert tuple(out) == block.evaluate_exact(x)
    layer = large.witness_layer(block, up.shape[0] + 1)  # one zero neuron more: still equal
    plain = replace(block, width=up.shape[0] + 1, skip=Skip(2, Fraction(0)), layers=(layer,))
    for x in ([Fraction(1, 3), Fraction(-2)], [Fraction(5), Fraction(7, 2)]):
        assert plain.evaluate_exact(x) == block.evaluate_exact(x)


def test_a_large_plain_block_has_its_min_width_decided(tmp_path, cli, monkeypatch):
    """S = 0: the construction is the block itself (width m), the m live keys refute m − 1."""
    block = bf16_block(tmp_path, act="relu", skip="none")
    results = prove(tmp_path, cli, monkeypatch, block, f"claim min width of Big is {M}\n"
                                                       f"claim min width of Big is {M - 1}\n")
    assert [r["outcome"] for r in results] == ["proved", "refuted"]
    cert = results[0]["certificate"]
    assert cert["kind"] == "minimal width" and cert["below"]["kind"] == "key count"
    for claim in (0, 1):
        verdict, _ = check_document(doc_at(tmp_path, claim)[0])
        assert verdict.status == "valid", verdict.reason
    path, doc = doc_at(tmp_path, 0)
    forged = copy.deepcopy(doc)
    forged["certificate"]["width"] = M - 1  # the witness is not at this width, nor the count
    assert verify(forged, weights(path, doc)).status == "invalid"


# ---- biased gated blocks: linear neurons (docs/rules.md §8) --------------------------------------

GATED = """block Big {{
    activation {act}  dim 100  width 900  skip {skip}  bias
    gate = load("w.npz", "gate")   gate_bias = load("w.npz", "g")
    up = load("w.npz", "up")       up_bias = load("w.npz", "b")
    down = load("w.npz", "down")   down_bias = load("w.npz", "c")
}}
"""


def gated_block(tmp_path, act, skip="identity"):
    rng = np.random.default_rng(5)
    small = lambda *shape: rng.integers(-9, 10, size=shape).astype(np.int8)  # noqa: E731
    np.savez(tmp_path / "w.npz", gate=small(900, 100), up=small(900, 100), down=small(100, 900),
             g=small(900), b=small(900), c=small(100))
    return GATED.format(act=act, skip=skip)


@pytest.mark.parametrize(("act", "gamma", "value"), [
    ("reglu", "1", "1"), ("glu", "0", "1/2"), ("bilinear", "1", "1"),
    ("swiglu", "1", "silu(1)"), ("geglu", "1", "gelu(1)")])
def test_large_biased_gated_blocks_absorb_with_linear_neurons(tmp_path, cli, monkeypatch, act,
                                                               gamma, value):
    """swiglu and geglu too: σ(1) is irrational, carried as the exact symbolic silu(1) /
    gelu(1), which the checker re-derives and proves non-zero (docs/rules.md §8)."""
    block = gated_block(tmp_path, act)
    results = prove(tmp_path, cli, monkeypatch, block,
                    "claim Big is absorbable at width 1000\nclaim Big is absorbable at width 999"
                    "\nclaim min width of Big is 5\n")
    assert [r["outcome"] for r in results] == ["proved", "unknown", "unknown"]
    assert results[0]["certificate"]["gamma"] == gamma
    assert results[0]["certificate"]["sigma_gamma"] == value
    # §8.2 at scale refutes the own width 900 (docs/rules.md §8.2, "Flip sets at scale"); the
    # bilinear σ is no row of §8.2's table
    assert results[2]["min_width_bounds"] == [1 if act == "bilinear" else 901, 1000]
    for claim in (0, 2):
        verdict, _ = check_document(doc_at(tmp_path, claim)[0])
        assert verdict.status == "valid", verdict.reason
    for claim in (0, 2):
        every_leaf_is_checked(*doc_at(tmp_path, claim))
    path, doc = doc_at(tmp_path, 0)
    for field, forgery in (("sigma_gamma", "2"), ("sigma_gamma", "silu(2)"),
                           ("sigma_gamma", "gelu(1)" if act == "swiglu" else "silu(1)"),
                           ("sigma_gamma", f"2*{value}"), ("sigma_gamma", f"{value} + 1"),
                           ("sigma_gamma", f"{value} (changed)"), ("gamma", "3"),
                           ("width", 999), ("columns", list(range(99)))):
        forged = copy.deepcopy(doc)
        forged["certificate"][field] = forgery
        assert verify(forged, weights(path, doc)).status == "invalid", (field, forgery)


@pytest.mark.parametrize("act", ["reglu", "bilinear", "glu", "swiglu", "geglu"])
@pytest.mark.parametrize("skip", ["identity", "[[0, 2], [0, -1]]", "none"])
def test_gated_witness_arrays_equal_the_block(act, skip):
    spec = load_text(f"""block B {{
    activation {act}  dim 2  width 3  skip {skip}  bias
    gate = [[1, -1], [2, 1/2], [0, 3]]   gate_bias = [1, 0, -1/2]
    up = [[1, 2], [-1, 1/2], [3, 0]]     up_bias = [1, -2, 1/2]
    down = [[1, -2, 1/3], [0, 5, -1]]    down_bias = [3, -1]
}}
""", "t.mlp", __import__("pathlib").Path("."))
    block = spec.blocks["B"]
    gate, up, down, gate_bias, up_bias, down_bias = large.gated_witness_arrays(block)
    rank = {"identity": 2, "[[0, 2], [0, -1]]": 1}.get(skip, 0)
    assert up.shape[0] == 3 + rank
    sigma = block.activation.scalar.numpy
    x = np.random.default_rng(2).normal(size=(50, 2))
    f = lambda a: np.array(a, dtype=np.float64)  # noqa: E731 - the check is numeric
    hidden = sigma(x @ f(gate).T + f(gate_bias)) * (x @ f(up).T + f(up_bias))
    assert np.allclose(hidden @ f(down).T + f(down_bias), block.evaluate(x), atol=1e-9)


# ---- biased relu² and square: square quadruples (docs/rules.md §8) -------------------------------

@pytest.mark.parametrize("act", ["relu^2", "square", "poly[0, 1, 3, 5]"])
@pytest.mark.parametrize("skip", ["identity", "[[0, 2], [0, -1]]"])
def test_square_witness_arrays_equal_the_block(act, skip):
    spec = load_text(f"""block B {{
    activation {act}  dim 2  width 3  skip {skip}  bias
    up = [[1, 2], [-1, 1/2], [3, 0]]     up_bias = [1, -2, 1/2]
    down = [[1, -2, 1/3], [0, 5, -1]]    down_bias = [3, -1]
}}
""", "t.mlp", __import__("pathlib").Path("."))
    block = spec.blocks["B"]
    up, down, up_bias, down_bias = large.square_witness_arrays(block)
    per_term = 2 if act == "square" else 4  # degree 2: pairs; otherwise quadruples
    assert up.shape[0] == 3 + per_term * (2 if skip == "identity" else 1)
    sigma = block.activation.scalar.exact
    for x in ([Fraction(1, 3), Fraction(-2)], [Fraction(5), Fraction(7, 2)], [0, 1]):
        x = [Fraction(v) for v in x]
        out = down.dot(np.array([sigma(h) for h in up.dot(np.array(x, dtype=object)) + up_bias],
                                dtype=object)) + down_bias
        assert tuple(out) == block.evaluate_exact(x)


@pytest.mark.parametrize("act", ["relu^2", "square"])
def test_large_biased_relu2_blocks_absorb_with_square_quadruples(tmp_path, cli, monkeypatch,
                                                                  act):
    rng = np.random.default_rng(6)
    small = lambda *shape: rng.integers(-9, 10, size=shape).astype(np.int8)  # noqa: E731
    np.savez(tmp_path / "w.npz", up=small(1300, 100), down=small(100, 1300), b=small(1300),
             c=small(100))
    block = f"""block Big {{
    activation {act}  dim 100  width 1300  skip identity  bias
    up = load("w.npz", "up")       up_bias = load("w.npz", "b")
    down = load("w.npz", "down")   down_bias = load("w.npz", "c")
}}
"""
    hi = 1300 + (2 if act == "square" else 4) * 100  # square: pairs, relu²: quadruples
    results = prove(tmp_path, cli, monkeypatch, block,
                    f"claim Big is absorbable at width {hi}\nclaim Big is absorbable at width "
                    f"{hi - 1}\nclaim min width of Big is 5\n")
    assert [r["outcome"] for r in results] == ["proved", "unknown", "unknown"]
    for claim in (0, 2):
        every_leaf_is_checked(*doc_at(tmp_path, claim))


# ---- export of a large construction ---------------------------------------------------------

@pytest.mark.parametrize("kind", ["spare pairs", "linear neurons"])
def test_a_large_construction_exports_its_own_arrays_and_the_added_neurons(tmp_path, cli,
                                                                           monkeypatch, kind):
    """`absorb-prove export` writes a large block's witness without stored layers: the own
    arrays exactly as loaded (bf16 / int8 widen exactly to float64), then the added neurons
    of `large.added_neurons`; the exported plain block matches the block in floats."""
    from absorb_formal.export import witness as export

    monkeypatch.chdir(tmp_path)
    block = bf16_block(tmp_path) if kind == "spare pairs" else gated_block(tmp_path, "reglu")
    (tmp_path / "big.mlp").write_text(block, encoding="utf-8")
    spec = load_text(block, "big.mlp", tmp_path).blocks["Big"]
    width = spare.upper_bound(spec) if kind == "spare pairs" else 1000
    run = cli("export", "big.mlp", "Big", "--width", str(width), "--out", "plain.safetensors",
              "--points", "100")
    assert run.code == 0, run.err
    arrays, record = export.read_export(tmp_path / "plain.safetensors")
    layer = spec.layers[0]
    m = spec.width
    own_up = np.array([[float(v) for v in row] for row in layer.up.rows[:3]])
    assert np.array_equal(arrays["up"][:3], own_up)  # the block's own neurons, exactly
    added = large.added_neurons(spec)
    k = added["up"].shape[0]
    assert arrays["up"].shape[0] == width >= m + k
    assert np.array_equal(arrays["up"][m:m + k], added["up"].astype(np.float64))
    assert not arrays["up"][m + k:].any()  # zero neurons pad up to the width asked
    assert float(record["sample_max_rel_error"]) < 1e-12
    assert record["method"] in (large.METHOD, large.METHOD_GATED)


def test_the_cross_check_rebuilds_a_construction_and_catches_a_wrong_one(monkeypatch):
    """A large construction stores no layers: the numeric cross-check rebuilds it from the
    block and `large.added_neurons`; a corrupted added neuron is an internal error."""
    from absorb_formal.numeric.backends import NumpyBackend
    from absorb_formal.numeric.crosscheck import crosscheck

    spec = load_text("""block B {
    activation gelu  dim 2  width 3  skip [[1, 2], [3, 4]]  bias
    up = [[1, 2], [-1, 1/2], [3, 0]]   up_bias = [1, -2, 1/2]
    down = [[1, -2, 1/3], [0, 5, -1]]  down_bias = [3, -1]
}
""", "t.mlp", __import__("pathlib").Path("."))
    block = spec.blocks["B"]
    certificate = spare.spare_certificate(block)
    good = crosscheck(block, certificate, 2000, NumpyBackend())
    assert good is not None and good.ok and good.max_rel_error < 1e-14
    real = large.added_neurons

    def corrupted(b):
        out = real(b)
        out["down"] = out["down"] * Fraction(101, 100)
        return out

    monkeypatch.setattr(large, "added_neurons", corrupted)
    bad = crosscheck(block, certificate, 2000, NumpyBackend())
    assert bad is not None and not bad.ok


# ---- the §8 constructions on small blocks ----------------------------------------------------

@pytest.mark.parametrize(("act", "rank_width"), [("reglu", 1), ("glu", 1), ("relu^2", 4)])
def test_small_biased_blocks_absorb_at_the_construction_width_and_not_below(act, rank_width):
    """Below the exact-work limit too, a biased gated / relu² block is proved absorbable at
    m + rank S (gated) or m + 4·rank S (relu²) by its construction, and the width just below
    is never proved by it (specs/biases/constructions.mlp stores checked certificates)."""
    from absorb_formal.decide.concrete import at_width

    gate = "gate = [[1, 2], [3, -1]]  gate_bias = [0, 1]" if act != "relu^2" else ""
    spec = load_text(f"""block B {{
    activation {act}  dim 2  width 2  bias
    {gate}
    up = [[2, 1], [-1, 1]]  up_bias = [1, 0]
    down = [[1, 2], [0, 1]]  down_bias = [1, -1]
}}
""", "t.mlp", __import__("pathlib").Path("."))
    block = spec.blocks["B"]
    hi = 2 + rank_width * 2  # rank S = 2
    proved = at_width(block, hi)
    assert proved.absorbable is True and proved.method == large.METHOD_GATED
    below = at_width(block, hi - 1)
    assert below.method != large.METHOD_GATED and below.absorbable is not True
    plain = replace(block, width=hi, skip=Skip(2, Fraction(0)),
                    layers=(large.witness_layer(block),))
    if act == "glu":  # σ is not rational on Q: compare in floats
        x = np.random.default_rng(3).normal(size=(40, 2))
        assert np.allclose(plain.evaluate(x), block.evaluate(x), atol=1e-12)
        return
    for x in ([Fraction(1, 3), Fraction(-2)], [Fraction(5), Fraction(7, 2)]):
        assert plain.evaluate_exact(x) == block.evaluate_exact(x)


# ---- doubles (docs/rules.md §4): width m + d when d < 2·rank S -----------------------------------

DD, DM = 20, 600  # 24,000 weights; d²·m = 240,000 > MAX_EXACT_COST: the large-block rules go first


def doubles_block(tmp_path, act="leaky_relu(1/4)", skip="identity", bias=True, rank_up=DD,
                  skip_rank=DD, seed=3) -> str:
    """A costly block with integer weights (int16: exact), U of rank `rank_up` (rows of
    A·B), a loaded skip matrix of rank `skip_rank` when skip is "matrix"."""
    rng = np.random.default_rng(seed)
    if rank_up < DD:
        up = rng.integers(-3, 4, (DM, rank_up)) @ rng.integers(-2, 3, (rank_up, DD))
    else:
        up = rng.integers(-9, 10, (DM, DD))
    low = rng.integers(-2, 3, (DD, skip_rank)) @ rng.integers(-2, 3, (skip_rank, DD))
    np.savez(tmp_path / "w.npz", up=up.astype(np.int16),
             down=rng.integers(-9, 10, (DD, DM)).astype(np.int16),
             b=rng.integers(-5, 6, DM).astype(np.int16),
             c=rng.integers(-5, 6, DD).astype(np.int16), S=low.astype(np.int16))
    biases = ('  bias\n    up_bias = load("w.npz", "b")\n    down_bias = load("w.npz", "c")'
              if bias else "")
    skip_text = 'load("w.npz", "S")' if skip == "matrix" else skip
    return f"""block Big {{
    activation {act}  dim {DD}  width {DM}  skip {skip_text}{biases}
    up = load("w.npz", "up")
    down = load("w.npz", "down")
}}
"""


def loaded(tmp_path, block: str):
    return load_text(block, "big.mlp", tmp_path).blocks["Big"]


def exact_at(block, fields, x):
    """The plain block of `fields` (exact object arrays) at the rational point x."""
    sigma = block.activation.scalar.exact
    pre = fields["up"].dot(np.array(x, dtype=object))
    if "up_bias" in fields:
        pre = pre + fields["up_bias"]
    out = fields["down"].dot(np.array([sigma(h) for h in pre], dtype=object))
    if "down_bias" in fields:
        out = out + fields["down_bias"]
    return tuple(out)


@pytest.mark.parametrize("skip", ["identity", "[[1, 2], [3, 4]]", "3/2", "[[0, 2], [1, -1]]"])
@pytest.mark.parametrize("bias", [False, True])
@pytest.mark.parametrize("act", ["relu", "leaky_relu(1/4)"])
def test_the_doubles_witness_equals_the_block(skip, bias, act):
    """Rows 0 and 1 share a key (row 1 = 2·row 0), neuron 0 is dead (d_0 = 0): the first two
    rows are dependent, so the pivot rows {0, 2} are doubled — a dead neuron among them. The
    exact witness (own columns d_i − w_i, new neurons (−u_i, −β_i, w_i), down bias
    c + 2a·W β_Δ) equals the block at rational points, and is 1 neuron narrower than spare
    pairs' m + 4."""
    biases = "  bias  up_bias = [1, -2, 1/2, 3]  down_bias = [3, -1]" if bias else ""
    block = load_text(f"""block B {{
    activation {act}  dim 2  width 4  skip {skip}{biases}
    up = [[1, 2], [2, 4], [3, 0], [-1, 1/2]]
    down = [[0, -2, 1/3, 1], [0, 5, -1, 2]]
}}
""", "t.mlp", __import__("pathlib").Path(".")).blocks["B"]
    assert large.doubles_width(block) == 6 < spare.upper_bound(block) == 8
    width, cert = large.narrowest(block)
    assert width == 6 and cert["check"] == Check.DOUBLES and cert["neurons"] == [0, 2]
    fields = large.witness_fields(block, None, cert)
    assert fields["up"].shape == (6, 2)
    rng = np.random.default_rng(2)
    for _ in range(10):
        x = [Fraction(int(v), 5) for v in rng.integers(-20, 20, 2)]
        assert exact_at(block, fields, x) == block.evaluate_exact(x)
    assert list(fields["down"][:, 1]) == [Fraction(-2), Fraction(5)]  # not doubled: kept


def test_doubles_are_used_only_where_they_are_narrower():
    """S of rank r: doubles (m + d) when d < 2r; spare pairs (m + 2r) otherwise; S = 0 and
    m < d never double."""
    def block(skip, width=3, dim=2):
        up = [[i + 1, (i * i) % 5 - 2] + [1] * (dim - 2) for i in range(width)]
        rows = ", ".join("[" + ", ".join(map(str, r)) + "]" for r in up)
        down = ", ".join("[" + ", ".join(["1"] * width) + "]" for _ in range(dim))
        return load_text(f"block B {{ activation gelu dim {dim} width {width} skip {skip}\n"
                         f" up = [{rows}] down = [{down}] }}\n", "t.mlp",
                         __import__("pathlib").Path(".")).blocks["B"]

    assert large.doubles_width(block("identity")) == 5  # d = 2 < 2·2
    assert large.doubles_width(block("[[1, 2], [2, 4]]")) is None  # d = 2 = 2·1: spare pairs
    assert large.narrowest(block("[[1, 2], [2, 4]]"))[0] == 5  # m + 2
    assert large.doubles_width(block("none")) is None
    assert large.doubles_width(block("identity", width=2, dim=3)) is None  # m < d


def test_rows_of_u_of_rank_below_d_get_no_doubles(tmp_path):
    """U of rank d − 1: no d independent rows, so the upper bound stays m + 2d (spare pairs),
    width m + d stays open, and a forged doubles certificate is refused (det U_Δ = 0)."""
    block = loaded(tmp_path, doubles_block(tmp_path, act="gelu", rank_up=DD - 1))
    assert doubles.find_doubles(block.layers[0].up) is None
    found = large.bounds(block)
    assert found.hi == DM + 2 * DD and found.above["check"] == Check.SPARE_PAIRS
    assert large.decide(block, DM + DD).absorbable is None
    assert large.decide(block, DM + 2 * DD).absorbable is True


def test_the_first_dependent_rows_give_way_to_pivot_rows(tmp_path):
    """Rows 0..d−1 dependent (row 1 = row 0), the whole U of rank d: pivot rows are doubled."""
    text = doubles_block(tmp_path)
    data = dict(np.load(tmp_path / "w.npz"))
    data["up"][1] = data["up"][0]
    np.savez(tmp_path / "w.npz", **data)
    found = doubles.find_doubles(loaded(tmp_path, text).layers[0].up)
    assert found is not None and 1 not in found.neurons and found.neurons[0] == 0
    assert len(found.neurons) == DD and found.neurons == sorted(found.neurons)


@pytest.fixture
def doubled(tmp_path, cli, monkeypatch):
    """Biases and a loaded matrix skip of full rank (d = 20 < 2·20): doubles at m + d, checked
    by the checker from the embedded weights; spare pairs at m + 2d; bounds m..m + d (the m
    live keys below; the modular functional needs m + 1 ≤ d² coordinates, here 601 > 400)."""
    block = doubles_block(tmp_path, act="gelu", skip="matrix")
    results = prove(tmp_path, cli, monkeypatch, block,
                    f"claim Big is absorbable at width {DM + DD}\n"
                    f"claim min width of Big is {DM}\n"
                    f"claim Big is absorbable at width {DM + 2 * DD}\n")
    return tmp_path, results


def test_doubles_with_biases_and_a_matrix_skip(doubled):
    tmp_path, results = doubled
    assert [r["outcome"] for r in results] == ["proved", "unknown", "proved"]
    cert = results[0]["certificate"]
    assert cert["check"] == Check.DOUBLES and cert["width"] == DM + DD
    assert cert["neurons"] == list(range(DD)) and cert["prime"] == doubles.DOUBLES_PRIME
    assert results[1]["min_width_bounds"] == [DM, DM + DD]
    assert results[1]["certificate"]["above"] == cert
    assert results[2]["certificate"]["check"] == Check.SPARE_PAIRS  # wide enough: no LU
    for line in range(3):
        verdict, _ = check_document(doc_at(tmp_path, line)[0])
        assert verdict.status == "valid", (line, verdict.reason)


def test_every_field_of_a_doubles_certificate_is_checked(doubled):
    tmp_path, _ = doubled
    for line in (0, 1):
        every_leaf_is_checked(*doc_at(tmp_path, line))


@pytest.mark.parametrize(("field", "value", "reason"), [
    ("neurons", list(range(1, DD + 1)), "stored determinant"),  # independent, another det
    ("neurons", list(range(DD - 1)), "doubles need d"),
    ("neurons", [0] + list(range(DD - 1)), "increasing"),
    ("neurons", list(range(DM - DD + 1, DM + 1)), "increasing indices below m"),
    ("prime", 2**26 - 5, "not a prime the exact LU"),
    ("prime", 2_097_133, "stored determinant"),
    ("det_mod_p", 0, "stored determinant"),
    ("a", "5/8", "re-proved a"),  # gelu: a = 1/2
    ("width", DM + DD - 1, "not m + d"),
])
def test_forged_doubles_are_rejected(doubled, field, value, reason):
    tmp_path, _ = doubled
    path, doc = doc_at(tmp_path, 0)
    assert verify(doc).status == "valid"  # embedded weights: read from the document
    forged = copy.deepcopy(doc)
    forged["certificate"][field] = value
    verdict = verify(forged)
    assert verdict.status == "invalid" and reason in verdict.reason, verdict.reason


def test_doubles_on_dependent_rows_are_rejected(tmp_path, cli, monkeypatch):
    """U of rank d − 1 (spare pairs proved at m + 2d): a doubles certificate on any d rows has
    det U_Δ = 0 over Q, so mod p too; the checker refuses it."""
    block = doubles_block(tmp_path, rank_up=DD - 1)
    [result] = prove(tmp_path, cli, monkeypatch, block,
                     f"claim Big is absorbable at width {DM + 2 * DD}\n")
    assert result["certificate"]["check"] == Check.SPARE_PAIRS
    path, doc = doc_at(tmp_path, 0)
    forged = copy.deepcopy(doc)
    forged["certificate"] = {"kind": "witness", "check": Check.DOUBLES, "width": DM + DD,
                             "a": "5/8", "neurons": list(range(DD)),
                             "prime": doubles.DOUBLES_PRIME, "det_mod_p": 1}
    verdict = verify(forged)
    assert verdict.status == "invalid" and "dependent" in verdict.reason, verdict.reason


def test_a_doubles_certificate_needs_the_weights_read(bounded):
    """A block stored by its sources: the checker reads U from the files (absorb-prove check);
    handed no weights, it cannot check the determinant."""
    tmp_path, _ = bounded
    path, doc = doc_at(tmp_path, 4)
    assert doc["certificate"]["check"] == Check.DOUBLES
    assert verify(doc, weights(path, doc)).status == "valid"
    verdict = verify(doc)
    assert verdict.status == "invalid" and "not embedded" in verdict.reason, verdict.reason


def test_a_doubles_witness_exports_and_equals_the_block(tmp_path, cli, monkeypatch):
    """`absorb-prove export --width m + d`: the doubles witness, built exactly (the exported
    floats are the exact values rounded: here float64, all exact; the doubled down columns are
    not the block's); it equals the block exactly and in floats."""
    from absorb_formal.export import witness as export

    monkeypatch.chdir(tmp_path)
    text = doubles_block(tmp_path, act="leaky_relu(1/4)", skip="matrix")
    (tmp_path / "big.mlp").write_text(text, encoding="utf-8")
    run = cli("export", "big.mlp", "Big", "--width", str(DM + DD), "--out", "plain.npz",
              "--points", "300")
    assert run.code == 0, run.err
    arrays, record = export.read_export(tmp_path / "plain.npz")
    assert record["method"] == large.METHOD_DOUBLES and record["width"] == str(DM + DD)
    block = loaded(tmp_path, text)
    fields = large.witness_fields(block, None, large.narrowest(block)[1])
    for name, values in fields.items():
        assert np.array_equal(arrays[name], values.astype(np.float64)), name
    data = np.load(tmp_path / "w.npz")
    assert np.array_equal(arrays["up"][:DM], data["up"])  # own rows kept
    assert not np.array_equal(arrays["down"][:, :DD], data["down"][:, :DD])  # doubled
    assert np.array_equal(arrays["down"][:, DD:DM], data["down"][:, DD:])
    assert float(record["sample_max_rel_error"]) < 1e-12
    x = [Fraction(int(v), 3) for v in np.random.default_rng(0).integers(-9, 9, DD)]
    assert exact_at(block, fields, x) == block.evaluate_exact(x)


def test_doubles_that_cannot_be_rounded_export_spare_pairs(tmp_path, cli, monkeypatch):
    """When the doubles witness cannot be rounded (Arb cannot prove U_Δ invertible, or too
    many entries sit on rounding midpoints past the exact inverse's reach): --width m + d is
    refused with a hint; where a wider width is allowed (export without --width; scan
    --export) the spare pairs at m + 2d are written, and the width note says why."""
    from absorb_formal.export import enclosed_doubles
    from absorb_formal.export import witness as export

    def unsettled(block, neurons):
        raise enclosed_doubles.Unsettled("no enclosure (test)")

    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(enclosed_doubles, "enclosures", unsettled)
    (tmp_path / "big.mlp").write_text(doubles_block(tmp_path), encoding="utf-8")
    run = cli("export", "big.mlp", "Big", "--width", str(DM + DD), "--out", "a.npz")
    assert run.code == 2 and f"--width {DM + 2 * DD} exports the spare-pair" in run.err
    assert "no enclosure (test)" in run.err and not (tmp_path / "a.npz").exists()
    found = export.find_witness(loaded(tmp_path, doubles_block(tmp_path)), DM + DD, wider=True)
    chosen = export.choose(found, "float32", 300, export.default_max_error("float32"))
    assert chosen.witness.claim_width == DM + 2 * DD
    assert chosen.witness.decision.method == large.METHOD
    assert chosen.rounded["up"].values.shape == (DM + 2 * DD, DD)
    assert chosen.note.startswith(f"width {DM + 2 * DD} ({Check.SPARE_PAIRS}) instead of the "
                                  f"proved {DM + DD} ({Check.DOUBLES}): ")
    assert "was not built (no enclosure (test))" in chosen.note


def test_the_cross_check_rebuilds_doubles_and_catches_a_wrong_one(tmp_path):
    from absorb_formal.numeric.backends import NumpyBackend
    from absorb_formal.numeric.crosscheck import crosscheck

    block = loaded(tmp_path, doubles_block(tmp_path, act="silu", skip="matrix"))
    _, cert = large.narrowest(block)
    good = crosscheck(block, cert, 2000, NumpyBackend())
    assert good is not None and good.ok
    for field, value in (("a", "1"), ("neurons", [0] * DD)):  # wrong scale; singular U_Δ
        bad = crosscheck(block, {**cert, field: value}, 2000, NumpyBackend())
        assert bad is not None and not bad.ok, field


def test_export_without_a_width_starts_from_the_doubles_at_m_plus_d(tmp_path):
    """d = 256 (past 160, where the exact inverse used to stop): the least width proved
    absorbable, m + d, is a doubles witness, and export starts there; in float32 it misses
    the gate (its weights grew, and it is measured against the output), so the
    spare pairs at m + 2d are written and the note says why; a looser --max-error keeps
    m + d."""
    from absorb_formal.export import witness as export

    block = loaded(tmp_path, bf16_block(tmp_path, act="silu", bias=False))
    found = export.find_witness(block, None)
    assert found.claim_width == M + D and found.construction == Check.DOUBLES
    assert f"between {M + 1} and {M + D}" in found.width_note
    strict = export.choose(found, "float32", 300, export.default_max_error("float32"))
    assert strict.witness.claim_width == M + 2 * D
    assert f"{Check.DOUBLES} at width {M + D} is off by" in strict.note
    loose = export.choose(found, "float32", 300, 1e-4)
    assert loose.witness.claim_width == M + D and loose.note == ""
    assert float(loose.figures["weight_max_abs_after"]) > \
        float(loose.figures["weight_max_abs_before"])
