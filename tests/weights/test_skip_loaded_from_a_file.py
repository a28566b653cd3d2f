"""`skip load("FILE", "KEY")`, with an optional `.T`: a learnable skip of
any size read from a weight file, by the prover and by the checker's own reader; a large
block's certificate stores that skip by its source, and the checker reads it itself."""

from __future__ import annotations

import copy
import json
import shutil
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest

from absorb_formal.certify import documents as proofs
from absorb_formal.checker.readers.reading import Reading
from absorb_formal.checker.readers.source import Load, read_spec
from absorb_formal.cli.check import check_file
from absorb_formal.decide import decide
from absorb_formal.language import load_file, load_text
from absorb_formal.language.errors import SpecError

from ..conftest import CORPUS, ROOT

S = np.array([[2, 0], [1, 1]], dtype=np.int8)
BLOCK = ('block G {{ activation gelu dim 2 width 3 skip {skip}\n'
         ' up = [[1, 0], [0, 1], [1, -1]] down = [[-2, 0, 1/2], [-1, -1, 0]] }}\n'
         'claim G is absorbable\n')


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    np.savez(tmp_path / "w.npz", S=S, S_T=S.T.copy(), wide=np.zeros((2, 3)), three=np.eye(3))
    return tmp_path


def _spec(folder: Path, skip: str):
    return load_text(BLOCK.format(skip=skip), "s.mlp", folder)


def _error(folder: Path, skip: str) -> str:
    with pytest.raises(SpecError) as caught:
        _spec(folder, skip)
    return caught.value.format()


def test_a_loaded_skip_is_the_literal_skip(folder):
    literal = _spec(folder, "[[2, 0], [1, 1]]").blocks["G"].skip
    for skip in ('load("w.npz", "S")', 'load("w.npz", "S_T").T'):
        loaded = _spec(folder, skip).blocks["G"].skip
        assert loaded.matrix is not None and loaded.matrix.rows == literal.matrix.rows
        assert loaded.rows() == ((2, 0), (1, 1))
    assert _spec(folder, 'load("w.npz", "S_T")').blocks["G"].skip.rows() == ((2, 1), (0, 1))


def test_a_loaded_skip_decides_like_the_literal_one(folder):
    for skip, outcome in (('load("w.npz", "S")', "proved"), ('load("w.npz", "S_T").T', "proved"),
                          ('load("w.npz", "S_T")', "refuted")):
        spec = _spec(folder, skip)
        assert decide(spec, spec.statements[0]).outcome == outcome, skip


@pytest.mark.parametrize("skip, message", [
    ('load("w.npz", "three")', "1:46: error: 'skip' must be 2×2 (dim × dim), got 3×3 "
                               "(array 'three' in 'w.npz')"),
    ('load("w.npz", "wide").T', "'skip' must be 2×2 (dim × dim), got 3×2"),
    ('load("w.npz", "nokey")', "1:46: error: 'w.npz' has no array 'nokey' (it has: S, S_T, "),
    ('load("gone.npz", "S")', "1:46: error: cannot load: file '"),
    ('load("w.npz", "S").T.T', "1:66: error: unexpected '.T'"),
    ('load("w.npz")', "1:58: error: unexpected ')'; expected ','"),
])
def test_a_bad_loaded_skip_is_a_positioned_error(folder, skip, message):
    assert message in _error(folder, skip)


def test_the_checker_reads_a_loaded_skip_itself():
    source = read_spec('block G { activation relu dim 2 width 1 skip load("w.npz", "S").T }\n'
                       'block H { activation relu dim 2 width 1 skip load("w.npz", "S") }\n')
    assert source.blocks["G"].skip == Load("w.npz", "S", True)
    assert source.blocks["H"].skip == Load("w.npz", "S", False)


def _certify(folder: Path, skip: str) -> tuple[Path, dict]:
    spec_file = folder / "s.mlp"
    spec_file.write_text(BLOCK.format(skip=skip))
    spec = load_file(spec_file)
    claim = spec.statements[0]
    target = folder / "c" / "doc.json"
    doc = proofs.document(spec, claim, decide(spec, claim), spec_file, target)
    target.parent.mkdir()
    target.write_bytes(proofs.encode(doc))
    return target, json.loads(target.read_text())


def test_a_small_block_embeds_its_loaded_skip_and_records_the_file(folder):
    target, doc = _certify(folder, 'load("w.npz", "S_T").T')
    assert doc["blocks"]["G"]["skip"] == {"matrix": [["2", "0"], ["1", "1"]]}
    assert list(doc["files"]) == ["w.npz"]
    assert check_file(target)[0].status == "valid"
    np.savez(folder / "w.npz", S=S, S_T=S.copy())  # the file changes: the evidence is stale
    verdict = check_file(target)[0]
    assert verdict.status == "invalid" and "stale" in verdict.reason and "w.npz" in verdict.reason


LARGE = ROOT / "proofs" / "learnable_skip" / "loaded_skips.mlp.43.json"


def test_a_large_block_stores_its_loaded_skip_by_source():
    doc = json.loads(LARGE.read_text())
    block = doc["blocks"]["F"]
    assert isinstance(block["layers"], dict)
    assert set(block["skip"]) == {"source"}
    source = block["skip"]["source"]
    assert (source["file"], source["key"], source["transpose"]) == ("skips.npz", "flip", False)
    assert "skips.npz" in doc["files"]


def test_the_checker_reads_a_large_blocks_skip_from_its_file():
    spec_file = CORPUS / "learnable_skip" / "loaded_skips.mlp"
    reading = Reading(spec_file)
    doc = json.loads(LARGE.read_text())
    assert reading.stale(doc) == ""
    read = reading.read_skips(doc)["blocks"]["F"]["skip"]["matrix"]
    weights = np.load(CORPUS / "large" / "weights.npz")
    expected = -np.outer(weights["down"][:, 0].astype(np.int64), weights["up"][0])
    assert [[Fraction(x) for x in row] for row in read] == expected.tolist()
    assert check_file(LARGE)[0].status == "valid"


@pytest.mark.parametrize("field, value", [("key", "generic"), ("transpose", True),
                                          ("file", "../large/weights.npz"), ("sha256", "0" * 64)])
def test_a_changed_skip_source_is_refused(tmp_path, field, value):
    doc = json.loads(LARGE.read_text())
    doc["blocks"]["F"]["skip"]["source"][field] = value
    target = LARGE.parent / f".mutated-{field}.json"  # beside the original: the spec is found
    try:
        target.write_text(json.dumps(doc))
        verdict = check_file(target)[0]
    finally:
        target.unlink()
    assert verdict.status == "invalid" and "stale" in verdict.reason


def test_without_its_spec_a_skip_stored_by_source_is_not_verified(tmp_path):
    target = tmp_path / "doc.json"
    shutil.copy(LARGE, target)
    verdict = check_file(target)[0]
    assert verdict.status == "invalid"
    doc = copy.deepcopy(json.loads(LARGE.read_text()))
    from absorb_formal.checker import verify
    reason = verify(doc).reason
    assert "stored by its source" in reason or "weights are not embedded" in reason
