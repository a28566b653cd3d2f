"""Forged documents and crafted weight files: what an attacker can edit, the checker catches.

The claim a document is about comes from its `statement` (tied by `check` to the spec line
it cites), never from the document's own `claim` field. A weight file that two readers could
read two ways is refused by the prover and by the checker alike, and on every other file the
two readers (which share no code) agree bit for bit. Every other field an attacker can set
(the line, a witness's roots, flip indices, the spec's path, embedded blocks, hostile JSON)
is checked, and makes the document invalid rather than the checker crash or hang.
"""

from __future__ import annotations

import copy
import hashlib
import io
import json
import os
import struct
import warnings
import zipfile
from fractions import Fraction
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import absorb_formal
from absorb_formal.checker import verify
from absorb_formal.checker.readers.files import FileError, read_array
from absorb_formal.cli.check import check_file
from absorb_formal.model import exactarray
from absorb_formal.weights.arrays import ArrayError, load_array

from ..conftest import ROOT

TWO_BLOCKS = """\
block R { activation relu dim 2 width 2 up = [[1,0],[0,1]] down = [[1,0],[0,1]] }
claim R is absorbable
claim R is absorbable at width 6
block Q { activation relu dim 2 width 2 skip none up = [[1,0],[0,1]] down = [[1,0],[0,1]] }
claim Q is absorbable
"""


def _certify(cli, folder: Path, text: str) -> dict[int, Path]:
    folder.mkdir(parents=True, exist_ok=True)
    spec = folder / "f.mlp"
    spec.write_text(text, encoding="utf-8")
    run = cli("--certificates", folder / "certs", spec)
    assert run.code in (0, 1), run.err
    return {int(p.name.split(".")[-2]): p for p in (folder / "certs").glob("*.json")}


def _status(doc: dict[str, Any], where: Path) -> str:
    where.write_text(json.dumps(doc), encoding="utf-8")
    [result] = absorb_formal.check(where)  # the statuses `absorb-prove check` prints
    return result.status


def test_a_claim_field_that_disagrees_with_the_statement_is_invalid(cli, tmp_path):
    docs = _certify(cli, tmp_path, TWO_BLOCKS)
    line2 = json.loads(docs[2].read_text())
    line3 = json.loads(docs[3].read_text())
    line5 = json.loads(docs[5].read_text())
    assert line2["outcome"] == "refuted" and line3["outcome"] == "proved"
    # Line 2 made "proved", its claim moved to width 6, with line 3's witness.
    forged = {**line2, "outcome": "proved", "certificate": line3["certificate"],
              "claim": {**line2["claim"], "width": 6}}
    assert _status(forged, docs[2].parent / "forged.json") == "invalid"
    assert verify(forged).status == "invalid"  # with the spec gone too
    assert "width 6 (the statement's: 2)" in verify(forged).reason
    # ... or pointed at the plain block Q, with Q's certificate and Q embedded.
    moved = {**line2, "outcome": "proved", "certificate": line5["certificate"],
             "claim": {**line2["claim"], "block": "Q"},
             "blocks": {"R": line2["blocks"]["R"], "Q": line5["blocks"]["Q"]}}
    assert _status(moved, docs[2].parent / "moved.json") == "invalid"
    only_q = {**moved, "blocks": {"R": line5["blocks"]["Q"]}}  # Q's weights under R's name
    assert verify(only_q).status == "invalid"
    # The honest documents stay valid.
    assert [check_file(docs[n])[0].status for n in (2, 3, 5)] == ["valid"] * 3


def test_a_statement_changed_with_its_claim_is_stale_while_the_spec_is_there(cli, tmp_path):
    docs = _certify(cli, tmp_path, TWO_BLOCKS)
    doc = json.loads(docs[3].read_text())
    wider = {**doc, "statement": "R is absorbable at width 7",
             "claim": {**doc["claim"], "width": 7}}
    assert _status(wider, docs[3].parent / "wider.json") == "stale"
    # Without the spec, the document only states what its certificate proves: true here.
    assert verify(wider).status == "valid"


def test_statements_not_in_normal_form_are_invalid(cli, tmp_path):
    doc = json.loads(_certify(cli, tmp_path, TWO_BLOCKS)[3].read_text())
    for text in ("R is absorbable at width  6", "R  is absorbable at width 6",
                 "claim R is absorbable at width 6", "R is absorbable at width 6 # x",
                 "query R", "R is absorbable at width 6/1", ""):
        assert verify({**doc, "statement": text}).status == "invalid", text


def test_a_document_with_fields_nobody_checks_is_invalid(cli, tmp_path):
    doc = json.loads(_certify(cli, tmp_path, TWO_BLOCKS)[3].read_text())
    assert verify(doc).status == "valid"
    assert verify({**doc, "note": "trust me"}).status == "invalid"
    assert verify({**doc, "spec": {**doc["spec"], "extra": 1}}).status == "invalid"


# ---- weight files two readers could read two ways --------------------------------------------

def _npy(array: np.ndarray) -> bytes:
    out = io.BytesIO()
    np.lib.format.write_array(out, np.asarray(array))
    return out.getvalue()


UP = np.array([[1.0, 0], [0, 1], [1, 1]])
ABSORBABLE = np.array([[-1.0, 0, 0], [0, -1, 0]])
NOT_ABSORBABLE = np.array([[1.0, 0, 0.7], [0, 1, 0.3]])


def _zip(path: Path, members: list[tuple[str, bytes]]) -> Path:
    path.unlink(missing_ok=True)
    with warnings.catch_warnings(), zipfile.ZipFile(path, "w") as archive:
        warnings.simplefilter("ignore")  # zipfile warns of a name written twice: the point
        for name, blob in members:
            archive.writestr(name, blob)
    return path


AMBIGUOUS = {
    "plain and .npy": [("up", _npy(UP)), ("down", _npy(ABSORBABLE)),
                       ("up.npy", _npy(UP)), ("down.npy", _npy(NOT_ABSORBABLE))],
    "stored twice": [("up.npy", _npy(UP)), ("down.npy", _npy(ABSORBABLE)),
                     ("down.npy", _npy(NOT_ABSORBABLE))],
    "a stray member": [("up.npy", _npy(UP)), ("down.npy", _npy(ABSORBABLE)),
                       ("notes.txt", b"hello")],
    "trailing bytes": [("up.npy", _npy(UP)), ("down.npy", _npy(ABSORBABLE) + b"\0" * 8)],
}


@pytest.mark.parametrize("case", sorted(AMBIGUOUS))
def test_both_readers_refuse_an_ambiguous_npz(tmp_path, case):
    path = _zip(tmp_path / "w.npz", AMBIGUOUS[case])
    with pytest.raises(ArrayError):
        load_array(path, "down")
    with pytest.raises(FileError):
        read_array(path, "down")


def test_a_key_that_is_itself_a_member_name_is_refused(tmp_path):
    # np.load(f)["up.npy"] reads member "up.npy"; "KEY.npy" is "up.npy.npy": two meanings.
    path = _zip(tmp_path / "w.npz", [("up.npy", _npy(UP)), ("up.npy.npy", _npy(UP * 2))])
    with pytest.raises(ArrayError, match="ambiguous"):
        load_array(path, "up.npy")
    with pytest.raises(FileError, match="ambiguous"):
        read_array(path, "up.npy")
    assert load_array(path, "up").array().tolist() == UP.tolist()  # "up" alone is clear


R_LOADS = """block R {
    activation relu  dim 2  width 3
    up = load("w.npz", "up")
    down = load("w.npz", "down")
}
claim R is not absorbable
"""


def test_a_shadowing_npz_swapped_in_under_its_new_hash_is_caught(cli, tmp_path):
    """The certificate is made from a file holding only the not-absorbable block; then a
    file that also holds plain `up`/`down` members (an absorbable block) is swapped in and
    its SHA-256 written into the document: `check` must not say valid."""
    spec = tmp_path / "r.mlp"
    spec.write_text(R_LOADS, encoding="utf-8")
    _zip(tmp_path / "w.npz", [("up.npy", _npy(UP)), ("down.npy", _npy(NOT_ABSORBABLE))])
    run = cli("--certificates", tmp_path / "certs", spec)
    assert run.code == 0, run.out + run.err
    [document] = (tmp_path / "certs").glob("*.json")
    assert check_file(document)[0].status == "valid"
    _zip(tmp_path / "w.npz", AMBIGUOUS["plain and .npy"])
    doc = json.loads(document.read_text())
    doc["files"]["w.npz"] = hashlib.sha256((tmp_path / "w.npz").read_bytes()).hexdigest()
    document.write_text(json.dumps(doc))
    verdict, _ = check_file(document)
    assert verdict.status != "valid" and "ambiguous" in verdict.reason, verdict
    assert cli(spec).code == 2  # and the prover refuses the file, positioned
    assert "r.mlp:3:" in cli(spec).err and "ambiguous" in cli(spec).err


def _safetensors(path: Path, header: Any, data: bytes, raw_header: str | None = None) -> Path:
    text = raw_header if raw_header is not None else json.dumps(header)
    blob = text.encode()
    path.write_bytes(struct.pack("<Q", len(blob)) + blob + data)
    return path


def test_both_readers_refuse_ambiguous_or_malformed_safetensors(tmp_path):
    a, b = np.arange(6, dtype="<f4").tobytes(), (np.arange(6, dtype="<f4") + 9).tobytes()

    def entry(start: int, end: int) -> str:
        return f'{{"dtype": "F32", "shape": [2, 3], "data_offsets": [{start}, {end}]}}'

    cases = {
        "a key twice": (f'{{"w": {entry(0, 24)}, "w": {entry(24, 48)}}}', a + b),
        "overlap": (f'{{"w": {entry(0, 24)}, "v": {entry(0, 24)}}}', a),
        "a gap": (f'{{"w": {entry(0, 24)}}}', a + b),
        "a float shape": ('{"w": {"dtype": "F32", "shape": [2.0, 3], '
                          '"data_offsets": [0, 24]}}', a),
        "metadata twice": (f'{{"__metadata__": {{"a": "1", "a": "2"}}, "w": {entry(0, 24)}}}',
                           a),
    }
    for name, (header, data) in cases.items():
        path = _safetensors(tmp_path / f"{len(name)}.safetensors", None, data, header)
        with pytest.raises(ArrayError):
            load_array(path, "w")
        with pytest.raises(FileError):
            read_array(path, "w")
    fine = _safetensors(tmp_path / "fine.safetensors", None, a + b,
                        f'{{"w": {entry(24, 48)}, "v": {entry(0, 24)}}}')
    assert _exact_prover(fine, "w") == _exact_checker(fine, "w")


# ---- the two readers agree on every file, or both refuse it -----------------------------------

def _exact_prover(path: Path, key: str) -> list[list[Fraction]]:
    return exactarray.fractions(load_array(path, key).array())


def _exact_checker(path: Path, key: str) -> list[list[Fraction]]:
    return read_array(path, key).rows()


def _outcome(reader: Any, path: Path, key: str) -> Any:
    try:
        return reader(path, key)
    except (ArrayError, FileError):
        return "refused"


MEMBER_NAMES = st.sampled_from(["w", "w.npy", "v.npy", "w.npy.npy", "x"])
DTYPES = st.sampled_from(["<f2", "<f4", "<f8", ">f8", "<i4", "<u2", "|u1"])


@st.composite
def members(draw: Any) -> list[tuple[str, bytes]]:
    out = []
    for name in draw(st.lists(MEMBER_NAMES, min_size=1, max_size=4)):
        dtype = np.dtype(draw(DTYPES))
        shape = (draw(st.integers(1, 3)), draw(st.integers(1, 3)))
        seed = draw(st.integers(0, 2**16))
        values = np.random.default_rng(seed).integers(-9, 9, size=shape)
        array = np.abs(values) if dtype.kind == "u" else values
        array = array.astype(dtype) / (1 if dtype.kind in "iu" else 8)
        array = array.astype(dtype)
        if draw(st.booleans()):
            array = np.asfortranarray(array)
        blob = _npy(array)
        if draw(st.integers(0, 5)) == 0:
            blob += b"\0" * draw(st.integers(1, 8))
        out.append((name, blob))
    return out


@settings(max_examples=60, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(parts=members(), key=st.sampled_from(["w", "w.npy", "v"]))
def test_prover_and_checker_read_every_npz_alike(tmp_path, parts, key):
    path = _zip(tmp_path / "h.npz", parts)
    mine, theirs = _outcome(_exact_prover, path, key), _outcome(_exact_checker, path, key)
    assert mine == theirs
    names = [name for name, _ in parts]
    if mine != "refused":  # accepted only where every reader, numpy's np.load too, agrees
        assert len(set(names)) == len(names) and all(n.endswith(".npy") for n in names)
        with np.load(path) as archive:
            assert archive[key].tolist() == np.asarray(
                [[float(x) for x in row] for row in mine]).tolist()


def test_prover_and_checker_read_the_corpus_weight_files_alike():
    files = sorted(p for p in (ROOT / "specs").rglob("*") if p.suffix in (".npz", ".safetensors"))
    assert files
    for path in files:
        if path.suffix == ".npz":
            with zipfile.ZipFile(path) as archive:
                keys = [n[:-4] for n in archive.namelist()]
        else:
            size = struct.unpack("<Q", path.read_bytes()[:8])[0]
            keys = [k for k in json.loads(path.read_bytes()[8:8 + size]) if k != "__metadata__"]
        for key in keys[:4]:
            shape = read_array(path, key).shape
            if len(shape) == 2 and shape[0] * shape[1] <= 4096:
                assert _outcome(_exact_prover, path, key) == _exact_checker(path, key), (path, key)


# ---- forged fields: line, roots, flip indices, spec path, hostile input, embedded blocks ------

def test_a_line_that_is_not_a_line_number_cannot_switch_off_the_staleness_test(cli, tmp_path):
    docs = _certify(cli, tmp_path, TWO_BLOCKS)
    line2, line5 = (json.loads(docs[n].read_text()) for n in (2, 5))
    forged = {**line2, "outcome": "proved", "certificate": line5["certificate"],
              "blocks": {"R": {**line5["blocks"]["Q"], "name": "R"}}}  # Q's weights as R
    where = docs[2].parent / "forged.json"
    for line in ("x", None, [2], 2.0, True, 0):
        assert _status({**forged, "line": line}, where) == "invalid", line
    assert _status({**forged}, where) == "stale"  # blocks differ


def test_a_witness_entry_must_be_a_real_root(cli, tmp_path):
    spec = ("block R { activation poly[0, 1, 0, 1] dim 1 width 1 skip 3 up = [[1]] "
            "down = [[-2]] }\nclaim R is absorbable\n")
    doc = json.loads(_certify(cli, tmp_path, spec)[2].read_text())
    assert doc["outcome"] == "refuted"  # u'^2 = -2 has no real solution
    complex_pair = {"kind": "witness", "width": 1, "check": "polynomial identity", "layers": [
        {"up": [[{"root_of": [2, 0, 1], "index": 1}]],
         "down": [[{"root_of": [1, 0, 2], "index": 2}]]}]}  # u' = -i√2, d' = i/√2: P = B over C
    verdict = verify({**doc, "outcome": "proved", "certificate": complex_pair})
    assert verdict.status == "invalid" and "not real" in verdict.reason
    for index in (0, -1, 3, "1"):
        bad = copy.deepcopy(complex_pair)
        bad["layers"][0]["up"][0][0]["index"] = index
        assert verify({**doc, "outcome": "proved", "certificate": bad}).status == "invalid"


def test_glu_flip_indices_must_be_distinct_neurons_in_range(cli, tmp_path):
    spec = "block G { activation glu dim 1 width 1 gate = [[1]] up = [[1]] down = [[-1/2]] }\n" \
           "claim G is absorbable\n"
    doc = json.loads(_certify(cli, tmp_path, spec)[2].read_text())
    assert doc["outcome"] == "refuted"
    forged = {"kind": "witness", "check": "GLU sign-flip identity", "width": 1, "c": "1/2",
              "lemma": doc["certificate"]["lemma"],
              "layers": [{"gate": [["-1"]], "up": [["1"]], "down": [["1/2"]]}]}
    for listed in ([0, 1], [1, 1], [2], ["1"], [True]):
        verdict = verify({**doc, "outcome": "proved", "certificate": {**forged, "J": listed}})
        assert verdict.status == "invalid", listed


def test_check_names_the_spec_it_verified_against(cli, tmp_path):
    docs = _certify(cli, tmp_path, TWO_BLOCKS)
    [result] = absorb_formal.check(docs[2])
    assert result.spec.endswith("f.mlp") and result.line == 2
    assert f"in {result.spec}:2" in result.text()
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "f.mlp").write_text(TWO_BLOCKS.replace("down = [[1,0],[0,1]] }\nclaim R",
                                                     "down = [[-1,0],[0,-1]] }\nclaim R", 1))
    other = _certify(cli, elsewhere, (elsewhere / "f.mlp").read_text())[2]
    doc = json.loads(other.read_text())
    doc["spec"]["path"] = os.path.relpath(elsewhere / "f.mlp", docs[2].parent)
    moved = docs[2].parent / "moved.json"
    moved.write_text(json.dumps(doc))
    [result] = absorb_formal.check(moved)
    assert result.status == "valid" and "elsewhere" in result.spec  # said, never hidden


def test_hostile_documents_and_folders_end_as_invalid_not_as_a_crash_or_a_hang(cli, tmp_path):
    (tmp_path / "deep.json").write_text("[" * 100_000 + "]" * 100_000)
    os.mkfifo(tmp_path / "pipe.json")  # a FIFO named like a document: never opened
    run = cli("check", tmp_path)
    assert run.code == 1 and "deep.json: invalid" in run.out and "pipe.json" not in run.out
    doc = json.loads(_certify(cli, tmp_path / "w", TWO_BLOCKS)[3].read_text())
    wide = 10**9
    huge = {**doc, "statement": f"R is not absorbable at width {wide}", "outcome": "proved",
            "claim": {**doc["claim"], "modality": "not", "width": wide},
            "certificate": {"kind": "finite point set", "width": wide, "points": [["1", "0"]],
                            "smtlib": "", "argument": ""}}
    verdict = verify(huge)
    assert verdict.status == "invalid" and "beyond what the checker re-solves" in verdict.reason


def test_readers_agree_on_native_byte_order_and_both_refuse_npy_1_1_and_bool_byte_2(tmp_path):
    good = _npy(UP)
    minor = good[:7] + b"\x01" + good[8:]  # version 1.1: numpy refuses it
    native = good.replace(b"'<f8'", b"'=f8'")  # native order: both read this machine's
    assert native != good
    path = _zip(tmp_path / "n.npz", [("a.npy", native)])
    assert _outcome(_exact_prover, path, "a") == _outcome(_exact_checker, path, "a") != "refused"
    bools = _npy(np.array([[True, False], [False, True]]))
    at = bools.rindex(b"\x01")
    two = bools[:at] + b"\x02" + bools[at + 1:]  # a bool byte of 2
    for blob in (minor, two):
        path = _zip(tmp_path / "x.npz", [("a.npy", blob)])
        assert _outcome(_exact_prover, path, "a") == "refused"
        assert _outcome(_exact_checker, path, "a") == "refused"


def test_embedded_blocks_must_be_consistent_when_the_spec_is_gone(cli, tmp_path):
    doc = json.loads(_certify(cli, tmp_path, TWO_BLOCKS)[3].read_text())
    block = doc["blocks"]["R"]
    for broken in ({**block, "activation": {**block["activation"], "kind": "identity"}},
                   {**block, "width": 4},
                   {**block, "layers": [{**block["layers"][0], "up_bias": ["1", "1"],
                                         "down_bias": ["0", "0"]}]},
                   {**block, "bias": False}, {**block, "dim": True}):
        verdict = verify({**doc, "blocks": {"R": broken}})
        assert verdict.status == "invalid", broken
    for width in (0, -1):
        assert verify({**doc, "statement": f"R is absorbable at width {width}",
                       "claim": {**doc["claim"], "width": width}}).status == "invalid"


# ---- §8.2 flip sets at scale (docs/rules.md §8.2, "Flip sets at scale") --------------------

def test_a_flip_set_refutation_carried_to_an_absorbable_block_is_invalid(cli, tmp_path,
                                                                            monkeypatch):
    """The generic block's `unique subset solution` put on a block of the same shape whose
    planted J is a flip set: the checker rebuilds the system from the absorbable block's own
    weights, finds a 0/1 solution whose identity holds, and rejects the refutation; the
    absorbable block's flips witness put back on the generic block fails its identity."""
    from ..decide.test_flip_sets_at_scale import D, M, spec
    from ..decide.test_large_blocks_at_every_width import doc_at, prove, weights

    generic, planted = tmp_path / "generic", tmp_path / "planted"
    docs = {}
    for folder, plant in ((generic, None), (planted, "pair")):
        folder.mkdir()
        prove(folder, cli, monkeypatch, spec(folder, "glu", D, M, plant),
              "claim Big is absorbable\n")
        docs[plant] = doc_at(folder, 0)
    (generic_path, refuted), (planted_path, proved) = docs[None], docs["pair"]
    assert refuted["outcome"] == "refuted" and proved["outcome"] == "proved"
    forged = {**proved, "outcome": "refuted", "certificate": refuted["certificate"]}
    verdict = verify(forged, weights(planted_path, forged))
    assert verdict.status == "invalid", verdict
    forged = {**refuted, "outcome": "proved", "certificate": proved["certificate"]}
    verdict = verify(forged, weights(generic_path, forged))
    assert verdict.status == "invalid" and "do not give" in verdict.reason, verdict


def test_a_family_rule_certificate_names_a_rule_of_the_table():
    """A `rule` certificate whose rule is no rule of docs/rules.md's family table is invalid:
    "never-rule", once the name of the never-proofs' truth table, proved "never" for a relu
    family that is generically not absorbable (sometimes absorbable) with no precondition."""
    doc = json.loads((ROOT / "proofs/examples/relu_families.mlp.6.json").read_text("utf-8"))
    assert doc["statement"] == "Wide is generically not absorbable"
    assert verify(doc).status == "valid"
    forged = copy.deepcopy(doc)
    forged["statement"] = "Wide is never absorbable"
    forged["claim"]["modality"] = "never"
    for rule in ("never-rule", "§4 identity", "T1"):
        forged["certificate"] = {"kind": "rule", "rule": rule, "argument": "",
                                 "width": doc["certificate"]["width"]}
        assert verify(forged).status == "invalid", rule
