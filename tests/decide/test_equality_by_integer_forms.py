"""`claim A equals B` by canonical forms in exact integers (docs/rules.md §4, "Equality at
scale"): the same verdicts as the Fraction forms of `equivalence.py` on small blocks, equal
pairs built by permuting, rescaling and splitting neurons exactly in float32/bf16, unequal
pairs one ulp apart, and certificates the checker verifies from its own reading of the
weights — and rejects once any field is changed."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import numpy as np
import pytest

from absorb_formal.certify import documents as proofs
from absorb_formal.checker import verify
from absorb_formal.checker.kernel.contract import Kind
from absorb_formal.checker.readers.reading import Reading, spec_location
from absorb_formal.cli.check import check_document
from absorb_formal.decide import equivalence, integer_forms
from absorb_formal.language.load import load_file
from absorb_formal.model import exactarray
from absorb_formal.model.result import PROVED, REFUTED, Result

from ..checker.test_every_certificate_field_is_checked import changed, leaves
from ..weights.test_arrays_read_as_exact_rationals import write_safetensors
from .test_large_blocks_at_every_width import bf16

ACTIVATIONS = ("relu", "leaky_relu(1/8)", "gelu", "gelu_tanh", "silu")
SKIPS = ("identity", "none", "3/2", "matrix")


def literal(rows) -> str:
    return "[" + ", ".join("[" + ", ".join(str(x) for x in r) + "]" for r in rows) + "]"


def vector(items) -> str:
    return "[" + ", ".join(str(x) for x in items) + "]"


def block_text(name: str, act: str, skip: str, up: str, down: str, dim: int, width: int,
               biases: tuple[str, str] | None = None) -> str:
    bias = (f"  bias\n    up_bias = {biases[0]}\n    down_bias = {biases[1]}\n"
            if biases else "")
    return (f"block {name} {{\n  activation {act}  dim {dim}  width {width}  skip {skip}\n"
            f"{bias}  up = {up}\n  down = {down}\n}}\n")


def spec_at(tmp_path: Path, text: str, name: str = "s.mlp"):
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path, load_file(path)


def integer_document(path: Path, spec, claim_index: int = 0) -> dict:
    """The document of the spec's claim decided by the integer forms (any size)."""
    claim = [s for s in spec.statements if getattr(s, "kind", None) == "equals"][claim_index]
    found = integer_forms.decide(spec.blocks[claim.block], spec.blocks[claim.other])
    assert found.equal is not None, found.reason
    result = Result(PROVED if found.equal else REFUTED, "", integer_forms.METHOD,
                    certificate=found.certificate)
    doc = proofs.document(spec, claim, result, path, path.parent / "c.json")
    return json.loads(json.dumps(doc))


# ---- the same verdicts as the Fraction forms, on small literal blocks ---------------------------

def random_block(rng, name: str, act: str, skip: str, bias: bool, dim: int, width: int) -> str:
    up = rng.integers(-2, 3, size=(width, dim))
    if width > 1 and rng.random() < 0.4:
        up[1] = up[0] * rng.choice([-2, -1, 1, 2])  # a shared key (relu) or a shared ±u
    if rng.random() < 0.2:
        up[0] = 0  # a constant neuron σ(β)
    down = rng.integers(-2, 3, size=(dim, width))
    biases = (vector(rng.integers(-1, 2, size=width)), vector(rng.integers(-1, 2, size=dim))) \
        if bias else None
    if skip == "matrix":
        skip = literal([[1, 2], [0, 1]])
    return block_text(name, act, skip, literal(up), literal(down), dim, width, biases)


def test_integer_forms_give_the_verdicts_of_the_fraction_forms(tmp_path):
    rng = np.random.default_rng(7)
    compared = decided = 0
    for trial in range(200):
        width, dim = int(rng.integers(1, 4)), int(rng.integers(1, 3))
        acts = [ACTIVATIONS[rng.integers(5)], ACTIVATIONS[rng.integers(5)]]
        if rng.random() < 0.6:
            acts[1] = acts[0]
        if rng.random() < 0.1:
            acts[1] = "identity"
        skips = [SKIPS[rng.integers(4)], SKIPS[rng.integers(4)]]
        bias = [rng.random() < 0.3] * 2
        if rng.random() < 0.2:
            bias[1] = not bias[0]
        if dim == 1:
            skips = [s if s != "matrix" else "-1" for s in skips]
        text = (random_block(rng, "A", acts[0], skips[0], bias[0], dim, width)
                + random_block(rng, "B", acts[1], skips[1], bias[1] and acts[1] != "identity",
                               dim, width) + "claim A equals B\n")
        path, spec = spec_at(tmp_path, text, f"s{trial}.mlp")
        a, b = spec.blocks["A"], spec.blocks["B"]
        for x, y in ((a, b), (a, a)):
            old, new = equivalence.decide(x, y), integer_forms.decide(x, y)
            assert old.equal == new.equal, (text, old, new)
            compared += 1
        if integer_forms.decide(a, b).equal is not None:
            decided += 1
            assert verify(integer_document(path, spec)).status == "valid", text
    assert compared == 400 and decided > 80


@pytest.mark.parametrize("text, part", [
    # Λ: one down weight changed
    ("A relu none [[1, 0], [0, 1]] [[1, 0], [0, 1]] ; B relu none [[1, 0], [0, 1]] "
     "[[1, 0], [0, 2]]", "Lambda"),
    # a key only B has: w and −w with the same down column add nothing to Λ, 2b·d to v_w
    ("A relu none [[1, 0]] [[1], [0]] ; B relu none [[1, 0], [1, 1], [-1, -1]] "
     "[[1, 1, 1], [0, 0, 0]]", "key"),
    # v: (−u, −d) keeps relu's Λ = a·d uᵀ and flips the sign of v
    ("A relu none [[1, 2]] [[1], [3]] ; B relu none [[-1, -2]] [[-1], [-3]]", "v"),
])
def test_each_part_of_a_difference_is_reported_and_checked(tmp_path, text, part):
    blocks = []
    for half in text.split(" ; "):
        name, act, skip, rest = half.split(" ", 3)
        up, down = _split(rest)
        dim, width = len(json.loads(up)[0]), len(json.loads(up))
        blocks.append(block_text(name, act, skip, up, down, dim, width))
    path, spec = spec_at(tmp_path, "".join(blocks) + "claim A equals B\n")
    doc = integer_document(path, spec)
    assert doc["outcome"] == "refuted"
    assert doc["certificate"]["difference"]["part"] == part
    assert verify(doc).status == "valid"
    assert equivalence.decide(spec.blocks["A"], spec.blocks["B"]).equal is False


def _split(rest: str) -> tuple[str, str]:
    depth = 0
    for i, ch in enumerate(rest):
        depth += {"[": 1, "]": -1}.get(ch, 0)
        if depth == 0:
            return rest[:i + 1], rest[i + 1:].strip()
    raise ValueError(rest)


def test_a_gamma_difference_and_a_proved_constant_difference(tmp_path):
    text = (block_text("A", "relu", "none", "[[1, 0]]", "[[1], [1]]", 2, 1, ("[1]", "[0, 0]"))
            + block_text("B", "relu", "none", "[[1, 0]]", "[[1], [1]]", 2, 1, ("[1]", "[0, 1]"))
            + block_text("C", "gelu", "none", "[[0, 0]]", "[[1], [1]]", 2, 1, ("[1]", "[0, 0]"))
            + block_text("E", "gelu", "none", "[[0, 0]]", "[[1], [1]]", 2, 1, ("[2]", "[0, 0]"))
            + "claim A equals B\nclaim C equals E\n")
    path, spec = spec_at(tmp_path, text)
    for n, part in ((0, "gamma"), (1, "constant")):
        doc = integer_document(path, spec, n)
        assert doc["certificate"]["difference"]["part"] == part
        assert verify(doc).status == "valid"
        assert equivalence.decide(*(spec.blocks[x] for x in ("AB", "CE")[n])).equal is False


# ---- exact integers from every float format ----------------------------------------------------

@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64, np.longdouble, np.int32,
                                   np.int64])
def test_loaded_arrays_become_the_exact_integers_they_denote(dtype):
    rng = np.random.default_rng(3)
    spread = 10 if dtype is np.float16 else 30
    values = rng.standard_normal((5, 7)) * 2.0 ** rng.integers(-spread, spread, size=(5, 7))
    if np.dtype(dtype).kind == "i":
        values = rng.integers(-1000, 1000, size=(5, 7))
    array = values.astype(dtype)
    array[0, 0] = 0
    if dtype is np.float32:
        array[1, 1] = np.float32(1e-45)  # subnormal: the object path (bits beyond int64)
    found = integer_forms.ints_of_array(array)
    want = exactarray.fractions(array)
    got = [[found.scale * int(x) for x in row] for row in found.ints.tolist()]
    assert got == want


# ---- moderate size, loaded from .npz and .safetensors -------------------------------------------

D, M = 64, 256


def planted(rng, act: str):
    """(A's arrays, B's arrays equal to A as a function). A's last neuron is dead (down column
    0). B permutes A's neurons; for the relu family it rescales each by a power of two t
    (u, β ↦ t·u, t·β; d ↦ d / t: exact in float32, positive homogeneity); and it spends the
    dead neuron on a copy of A's neuron 0 with half of its down column on each (the two sum
    on one key)."""
    up = (rng.standard_normal((M, D)) * 0.05).astype(np.float32)
    down = (rng.standard_normal((D, M)) * 0.05).astype(np.float32)
    b = (rng.standard_normal(M) * 0.1).astype(np.float32)
    c = (rng.standard_normal(D) * 0.1).astype(np.float32)
    down[:, M - 1] = 0
    perm = rng.permutation(M)
    relu_like = act.startswith(("relu", "leaky"))
    t = (2.0 ** rng.integers(-3, 4, size=M) if relu_like else np.ones(M)).astype(np.float32)
    up2, b2, down2 = up[perm] * t[:, None], b[perm] * t, down[:, perm] / t[None, :]
    j, k = int(np.flatnonzero(perm == M - 1)[0]), int(np.flatnonzero(perm == 0)[0])
    up2[j], b2[j] = up2[k], b2[k]
    down2[:, k] /= 2
    down2[:, j] = down2[:, k]
    return (up, down, b, c), (up2, down2, b2, c)


def write_pair(tmp_path: Path, act: str, skip: str, bias: bool, fmt: str, seed: int = 0):
    rng = np.random.default_rng(seed)
    first, second = planted(rng, act)
    names = ("up", "down", "b", "c")
    if fmt == "npz":
        np.savez(tmp_path / "a.npz", **dict(zip(names, first, strict=True)))
        np.savez(tmp_path / "b.npz", **dict(zip(names, second, strict=True)),
                 down_ulp=_ulp(second[1]), c_ulp=_ulp(second[3]))
    else:
        write_safetensors(tmp_path / "a.safetensors",
                          {n: ("F32", x) for n, x in zip(names, first, strict=True)})
        write_safetensors(tmp_path / "b.safetensors",
                          {**{n: ("F32", x) for n, x in zip(names, second, strict=True)},
                           "down_ulp": ("F32", _ulp(second[1])), "c_ulp": ("F32",
                                                                           _ulp(second[3]))})
    if skip == "matrix":
        s = np.eye(D, dtype=np.float32) + np.float32(0.25) * np.eye(D, k=1, dtype=np.float32)
        np.savez(tmp_path / "s.npz", s=s)
        skip = 'load("s.npz", "s")'

    def block(name, file, down="down", up="up", c="c"):
        biases = (f'  bias\n    up_bias = load("{file}", "b")\n    down_bias = load("{file}", '
                  f'"{c}")\n') if bias else ""
        return (f"block {name} {{\n  activation {act}  dim {D}  width {M}  skip {skip}\n"
                f'{biases}  up = load("{file}", "{up}")\n  down = load("{file}", "{down}")\n}}\n')

    ext = fmt
    text = (block("A", f"a.{ext}") + block("B", f"b.{ext}")
            + block("Down", f"b.{ext}", down="down_ulp")
            + (block("C", f"b.{ext}", c="c_ulp") if bias else "")
            + "claim A equals B\nclaim A equals Down\n" + ("claim A equals C\n" if bias else ""))
    return spec_at(tmp_path, text)


def _ulp(array: np.ndarray) -> np.ndarray:
    out = array.copy()
    out.flat[5] = np.nextafter(out.flat[5], np.float32(9))
    return out


@pytest.mark.parametrize("act, skip, bias, fmt", [
    ("relu", "identity", False, "npz"), ("leaky_relu(1/8)", "matrix", True, "npz"),
    ("gelu", "none", True, "safetensors"), ("gelu_tanh", "3/2", False, "npz"),
    ("silu", "identity", True, "npz"), ("relu", "none", True, "safetensors"),
])
def test_planted_equal_pairs_are_proved_and_one_ulp_apart_refuted(tmp_path, act, skip, bias,
                                                                  fmt):
    path, spec = write_pair(tmp_path, act, skip, bias, fmt)
    a = spec.blocks["A"]
    expected = {"B": True, "Down": False, "C": False}
    for other in [n for n in ("B", "Down", "C") if n in spec.blocks]:
        found = integer_forms.decide(a, spec.blocks[other])
        assert found.equal is expected[other], (other, found.reason)
    # the Fraction forms agree (this size is within their reach)
    assert equivalence.decide(a, spec.blocks["B"]).equal is True
    assert equivalence.decide(a, spec.blocks["Down"]).equal is False
    for n in range(2 + bias):
        assert verify(integer_document(path, spec, n)).status == "valid"


def test_an_analytic_block_rescaled_by_two_is_another_function(tmp_path):
    """gelu(2z) ≠ 2 gelu(z): positive rescaling identifies relu-family neurons only."""
    path, spec = write_pair(tmp_path, "relu", "identity", False, "npz")
    text = path.read_text(encoding="utf-8").replace("activation relu", "activation gelu")
    path, spec = spec_at(tmp_path, text, "g.mlp")
    assert integer_forms.decide(spec.blocks["A"], spec.blocks["B"]).equal is False
    assert equivalence.decide(spec.blocks["A"], spec.blocks["B"]).equal is False


# ---- beyond the exact-work limit: stored by source, checked from the files ----------------------

BIG_D, BIG_M = 256, 512  # 262,144 weights: past the exact-work limit


def big_spec(tmp_path: Path) -> Path:
    rng = np.random.default_rng(1)
    up = rng.standard_normal((BIG_M, BIG_D)) * 0.05
    down = rng.standard_normal((BIG_D, BIG_M)) * 0.05
    perm = rng.permutation(BIG_M)
    t = (2.0 ** rng.integers(-2, 3, size=BIG_M)).astype(np.float32)
    b = rng.standard_normal(BIG_M) * 0.1
    write_safetensors(tmp_path / "a.safetensors", {
        "fc": ("BF16", bf16(up.T.copy())), "proj": ("BF16", bf16(down)),
        "b": ("BF16", bf16(b))})
    # bf16 holds u·t and d/t exactly for powers of two t (the exponent moves, the bits stay)
    up_bits, down_bits = bf16(up), bf16(down)
    b_bits = bf16(b)
    scaled = (up_bits.astype(np.uint32) << 16).view(np.float32)[perm] * t[:, None]
    scaled_down = (down_bits.astype(np.uint32) << 16).view(np.float32)[:, perm] / t[None, :]
    scaled_b = (b_bits.astype(np.uint32) << 16).view(np.float32)[perm] * t
    assert scaled.dtype == scaled_down.dtype == scaled_b.dtype == np.float32
    off = scaled_down.copy()
    off[3, 4] = np.nextafter(off[3, 4], np.float32(9))
    write_safetensors(tmp_path / "b.safetensors", {
        "fc": ("F32", scaled.T.astype(np.float32).copy()),
        "proj": ("F32", scaled_down.astype(np.float32)), "b": ("F32", scaled_b.astype(np.float32)),
        "proj_ulp": ("F32", off.astype(np.float32))})

    def block(name, file, proj="proj"):
        return (f"block {name} {{\n  activation relu  dim {BIG_D}  width {BIG_M}  skip identity\n"
                f'  bias\n    up_bias = load("{file}", "b")\n'
                f'  up = load("{file}", "fc").T\n  down = load("{file}", "{proj}")\n}}\n')

    spec = tmp_path / "big.mlp"
    spec.write_text(block("A", "a.safetensors") + block("B", "b.safetensors")
                    + block("Off", "b.safetensors", "proj_ulp")
                    + "claim A equals B\nclaim A equals Off\n",
                    encoding="utf-8")
    return spec


@pytest.fixture(scope="module")
def big_docs(tmp_path_factory):
    from ..conftest import run_cli

    folder = tmp_path_factory.mktemp("big")
    spec = big_spec(folder)
    run = run_cli("--crosscheck", "0", "--certificates", folder / "certs", "--json", spec)
    assert run.code in (0, 1), run.out + run.err  # 1: a claim is refuted
    results = run.json()["files"][0]["results"]
    assert [r["outcome"] for r in results] == ["proved", "refuted"]
    paths = sorted((folder / "certs").glob("*.json"), key=lambda p: int(p.name.split(".")[-2]))
    return [(p, json.loads(p.read_text(encoding="utf-8"))) for p in paths]


def test_large_blocks_are_compared_and_the_checker_reads_the_files(big_docs):
    for path, doc in big_docs:
        assert isinstance(doc["blocks"]["A"]["layers"], dict)  # stored by source
        assert doc["certificate"]["kind"] == Kind.INTEGER_CANONICAL_FORMS
        assert check_document(path)[0].status == "valid"
    refuted = big_docs[1][1]["certificate"]
    assert refuted["equal"] is False and refuted["difference"]["part"] == "Lambda"
    assert refuted["keys"] == [BIG_M, BIG_M]


def test_every_field_of_a_large_equality_certificate_is_checked(big_docs):
    for path, doc in big_docs:
        weights = Reading(spec_location(doc, path)).weights(doc)
        assert verify(doc, weights).status == "valid"
        assert verify(doc).status == "invalid"  # no weights read: nothing to compare
        tried = 0
        for where, how in leaves(doc["certificate"]):
            if not where:
                continue
            forged = copy.deepcopy(doc)
            node = forged["certificate"]
            for step in where[:-1]:
                node = node[step]
            if how == "drop":
                node[where[-1]] = node[where[-1]][1:]
            else:
                node[where[-1]] = changed(node[where[-1]])
            tried += 1
            assert verify(forged, weights).status == "invalid", where
        assert tried >= 3


def test_a_forged_verdict_or_difference_is_rejected(big_docs):
    (p_eq, equal), (p_ne, unequal) = big_docs
    w_eq = Reading(spec_location(equal, p_eq)).weights(equal)
    w_ne = Reading(spec_location(unequal, p_ne)).weights(unequal)
    forged = copy.deepcopy(unequal)
    forged["outcome"] = "proved"
    forged["certificate"] = {"kind": Kind.INTEGER_CANONICAL_FORMS, "equal": True,
                             "keys": [BIG_M, BIG_M]}
    assert verify(forged, w_ne).status == "invalid"
    forged = copy.deepcopy(equal)
    forged["outcome"] = "refuted"
    forged["certificate"] = {**equal["certificate"], "equal": False,
                             "difference": {"part": "Lambda", "row": 0, "col": 0,
                                            "left": "0", "right": "1"}}
    assert verify(forged, w_eq).status == "invalid"
    forged = copy.deepcopy(unequal)  # another entry of Λ, which does not differ
    forged["certificate"]["difference"]["row"] = (unequal["certificate"]["difference"]["row"]
                                                  + 1) % BIG_D
    assert verify(forged, w_ne).status == "invalid"
    for extra in ({"equal": "true"}, {"note": "unread"}, {"difference": None}):
        forged = copy.deepcopy(equal)
        forged["certificate"].update(extra)
        assert verify(forged, w_eq).status == "invalid", extra
    # the equal document read with the weights of the block one ulp off in B's place
    assert verify(equal, {"A": w_eq["A"], "B": w_ne["Off"]}).status == "invalid"


def test_the_export_round_trip_is_proved_beyond_the_exact_work_limit(tmp_path):
    """docs/tutorial.md §5 at a size whose certificates name the files: export the plain
    block of a relu block with skip identity (own neurons + spare pairs, exact in float32),
    load it back, and `R equals R_plain` is proved — by the API and by the CLI, checked."""
    from absorb_formal import api

    from ..conftest import run_cli

    rng = np.random.default_rng(5)
    np.savez(tmp_path / "r.npz", up=(rng.standard_normal((BIG_M, BIG_D)) * 0.05).astype(
        np.float32), down=(rng.standard_normal((BIG_D, BIG_M)) * 0.05).astype(np.float32))
    block = (f"block R {{\n  activation relu  dim {BIG_D}  width {BIG_M}  skip identity\n"
             '  up = load("r.npz", "up")\n  down = load("r.npz", "down")\n}\n')
    (tmp_path / "r.mlp").write_text(block, encoding="utf-8")
    run = run_cli("export", tmp_path / "r.mlp", "R", "--out", tmp_path / "R_plain.safetensors",
                  "--dtype", "float32")
    assert run.code == 0, run.out + run.err
    assert "max rounding error 0 " in run.out
    snippet = run.out[run.out.index("block R_plain"):]
    spec = tmp_path / "back.mlp"
    spec.write_text(block + snippet + "claim R equals R_plain\n", encoding="utf-8")
    loaded = load_file(spec)
    equal, certificate, reason = api.equal_blocks(loaded.blocks["R"], loaded.blocks["R_plain"])
    assert (equal, reason) == (True, "") and certificate["kind"] == Kind.INTEGER_CANONICAL_FORMS
    run = run_cli("--certificates", tmp_path / "certs", spec)
    assert run.code == 0 and "proved: R equals R_plain" in run.out, run.out + run.err
    [path] = (tmp_path / "certs").glob("*.json")
    assert check_document(path)[0].status == "valid"


def test_a_large_block_equals_a_small_one_embedded_beside_it(tmp_path):
    """One block stored by its files (beyond the limit), the other embedded: the large block's
    neurons past the 64th are dead (zero down columns), so it equals the first 64 alone."""
    from ..conftest import run_cli

    rng = np.random.default_rng(11)
    up = (rng.standard_normal((BIG_M, BIG_D)) * 0.05).astype(np.float32)
    down = (rng.standard_normal((BIG_D, BIG_M)) * 0.05).astype(np.float32)
    down[:, 64:] = 0
    np.savez(tmp_path / "w.npz", up=up, down=down, up64=up[:64], down64=down[:, :64])
    text = "".join(f"block {name} {{\n  activation silu  dim {BIG_D}  width {m}  skip identity\n"
                   f'  up = load("w.npz", "up{k}")\n  down = load("w.npz", "down{k}")\n}}\n'
                   for name, m, k in (("Big", BIG_M, ""), ("Small", 64, "64")))
    spec = tmp_path / "mixed.mlp"
    spec.write_text(text + "claim Big equals Small\n", encoding="utf-8")
    run = run_cli("--crosscheck", "0", "--certificates", tmp_path / "certs", spec)
    assert run.code == 0 and "proved: Big equals Small" in run.out, run.out + run.err
    [path] = (tmp_path / "certs").glob("*.json")
    doc = json.loads(path.read_text(encoding="utf-8"))
    assert isinstance(doc["blocks"]["Big"]["layers"], dict)
    assert isinstance(doc["blocks"]["Small"]["layers"], list)
    assert doc["certificate"]["keys"] == [64, 64]
    assert check_document(path)[0].status == "valid"
