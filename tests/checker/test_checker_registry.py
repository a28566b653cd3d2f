"""The checker's registry (checker/dispatch.py) and the certificate contract it is keyed by
(checker/kernel/contract.py).

- The registry has one entry per certificate kind (`contract.Kind`) and one per witness check
  (`contract.Check`); the contract lists exactly the kinds and checks docs/certificates.md
  documents and the prover writes.
- Every field of a certificate is checked or absent: a certificate of each kind (each check,
  each object inside one that is read field by field) with a field nobody reads is invalid.
"""

from __future__ import annotations

import copy
import functools
import json
import re
from pathlib import Path
from typing import Any

import pytest

from absorb_formal.checker.dispatch import REGISTRY, WITNESSES, Role, verify
from absorb_formal.checker.kernel.contract import CONSTRUCTIONS, FORMAT, Check, Kind
from absorb_formal.checker.readers.reading import Reading, spec_location
from absorb_formal.checker.readers.shape import json_integer

from ..conftest import ROOT

PROOFS = ROOT / "proofs"
DOCS = (ROOT / "docs" / "certificates.md").read_text(encoding="utf-8")
Where = tuple[Any, ...]  # a path into a document's certificate


def test_the_registry_has_one_entry_per_kind_and_one_per_check():
    assert list(REGISTRY) == list(dict.fromkeys(REGISTRY)) and set(REGISTRY) == set(Kind)
    assert len(REGISTRY) == len(Kind)
    assert set(WITNESSES) == set(Check) and len(WITNESSES) == len(Check)
    assert all(isinstance(k, Kind) for k in REGISTRY) and all(isinstance(c, Check)
                                                            for c in WITNESSES)
    assert all(Role.WITNESS in entry.shows for entry in WITNESSES.values())
    assert set(CONSTRUCTIONS) == {c for c, entry in WITNESSES.items() if not entry.stored
                                  and c != Check.LAYERS_ABSORBED}


def test_the_contract_lists_what_the_docs_document():
    headings = re.findall(r"^### `([^`\n]+)`", DOCS, re.MULTILINE)
    assert set(headings) == {k.value for k in Kind}
    table = set(re.findall(r"^\| `([^`\n]+)` \| ", DOCS[DOCS.index("| `check` | the checker |"):
                                                        DOCS.index("### `homogeneity point`")],
                           re.MULTILINE))
    built = set(re.findall(r"^### `witness` with `check: ([^`\n]+)`", DOCS, re.MULTILINE))
    table.discard("check")  # the header row
    assert table | built == {c.value for c in Check} and not table & built
    assert f"`{FORMAT}`" in DOCS


# ---- an unknown field anywhere in a certificate makes it invalid ------------------------

def _key(node: dict[str, Any]) -> Any:
    kind = node.get("kind")
    return Check(node["check"]) if kind == Kind.WITNESS else Kind(kind)


@functools.cache
def _catalogue() -> dict[Any, tuple[Path, Where]]:
    """For each kind and check (and each object inside a certificate that is read field by
    field), the first stored document (fast claims only) that holds one, and where."""
    found: dict[Any, tuple[Path, Where]] = {}

    def walk(node: Any, path: Path, where: Where) -> None:
        if not isinstance(node, dict):
            return
        if "kind" in node:
            found.setdefault(_key(node), (path, where))
        for name in ("witness", "below", "above", "certificate", "direction", "point",
                     "example"):
            if isinstance(node.get(name), dict):
                if name in ("direction", "point", "example"):
                    found.setdefault(name, (path, (*where, name)))
                walk(node[name], path, (*where, name))
        for name in ("per_layer", "cases"):
            if isinstance(node.get(name), list) and node[name]:
                if name == "cases":
                    found.setdefault("case", (path, (*where, name, 0)))
                    walk(node[name][0]["refutation"], path, (*where, name, 0, "refutation"))
                else:
                    walk(node[name][0], path, (*where, name, 0))

    for path in sorted(PROOFS.rglob("*.json")):
        doc = json.loads(path.read_text(encoding="utf-8"))
        spec = path.parent / doc["spec"]["path"]
        if doc["certificate"] is None or "slow" in spec.read_text(
                encoding="utf-8").splitlines()[doc["line"] - 1]:
            continue
        walk(doc["certificate"], path, ())
    return found


def _document(path: Path) -> tuple[dict[str, Any], dict[str, Any]]:
    """The document as `check` verifies it, with the weights the checker read for it."""
    doc = json.loads(path.read_text(encoding="utf-8"), parse_int=json_integer)
    reading = Reading(spec_location(doc, path))
    assert not reading.stale(doc)
    return reading.read_skips(doc), reading.weights(doc)


def _with_extra_field(key: Any) -> None:
    path, where = _catalogue()[key]
    doc, weights = _document(path)
    assert verify(doc, weights).status == "valid", path
    forged = copy.deepcopy(doc)
    node = forged["certificate"]
    for step in where:
        node = node[step]
    node["unread"] = "1"
    verdict = verify(forged, weights)
    assert verdict.status == "invalid" and "no field 'unread'" in verdict.reason, \
        (path, where, verdict)


# a witness's fields depend on its check (tested check by check); facts are never stored;
# integer canonical forms are tested on a document made here
STORED_KINDS = [k for k in Kind
                if k not in (Kind.WITNESS, Kind.FACTS, Kind.INTEGER_CANONICAL_FORMS)]


@pytest.mark.parametrize("kind", STORED_KINDS, ids=str)
def test_a_certificate_of_each_kind_with_an_unknown_field_is_invalid(kind):
    _with_extra_field(kind)


@pytest.mark.parametrize("check", list(Check), ids=str)
def test_a_witness_of_each_check_with_an_unknown_field_is_invalid(check):
    _with_extra_field(check)


@pytest.mark.parametrize("part", ["direction", "point", "example", "case"])
def test_an_object_read_field_by_field_with_an_unknown_field_is_invalid(part):
    _with_extra_field(part)


def test_an_integer_forms_certificate_with_an_unknown_field_is_invalid(tmp_path):
    from ..decide.test_equality_by_integer_forms import integer_document, spec_at

    path, spec = spec_at(tmp_path, "block A { activation relu dim 2 width 2 "
                                   "up = [[1, 0], [0, 1]] down = [[1, 2], [3, 4]] }\n"
                                   "block B { activation relu dim 2 width 2 "
                                   "up = [[0, 1], [1, 0]] down = [[2, 1], [4, 3]] }\n"
                                   "claim A equals B\n")
    doc = integer_document(path, spec)
    assert doc["certificate"]["kind"] == Kind.INTEGER_CANONICAL_FORMS
    assert verify(doc).status == "valid"
    doc["certificate"]["unread"] = 1
    assert "no field 'unread'" in verify(doc).reason


def test_an_algebraic_witness_entry_has_only_its_polynomial_and_index():
    doc, weights = _document(PROOFS / "generic" / "polynomial.mlp.31.json")
    entry = doc["certificate"]["layers"][0]["up"][0][0]
    assert isinstance(entry, dict) and verify(doc, weights).status == "valid"
    entry["unread"] = "1"
    assert "root_of and index" in verify(doc, weights).reason


def test_every_case_of_a_width_search_is_checked_once():
    """A case listed twice, or one beyond the width whose refutation does not hold, is
    invalid: no case goes unchecked."""
    path, where = _catalogue()["case"]
    doc, weights = _document(path)

    def search(document: dict[str, Any]) -> dict[str, Any]:
        node = document["certificate"]
        for step in where[:-2]:
            node = node[step]
        return node

    twice = copy.deepcopy(doc)
    search(twice)["cases"].append(copy.deepcopy(search(doc)["cases"][0]))
    assert "listed twice" in verify(twice, weights).reason
    beyond = copy.deepcopy(doc)
    extra = copy.deepcopy(search(doc)["cases"][0])
    extra["spare_pairs"] = 40  # a cost beyond any width: never enumerated, still checked
    search(beyond)["cases"].append(extra)
    assert verify(beyond, weights).status == "invalid"


def test_the_docs_list_the_kernel_with_its_line_counts():
    """docs/certificates.md, "The kernel": every module of checker/kernel/ with its length."""
    paragraph = DOCS[DOCS.index("**The kernel.**"):].split("\n\n")[0]
    listed = {name: int(count) for name, count in
              re.findall(r"`([a-z_]+\.py)` \((\d+)", paragraph)}
    kernel = ROOT / "absorb_formal" / "checker" / "kernel"
    actual = {p.name: len(p.read_text(encoding="utf-8").splitlines())
              for p in kernel.glob("*.py") if p.name != "__init__.py"}
    assert listed == actual
    total = re.search(r"\(([\d,]+) lines in all\)|\(([\d,]+) lines\)", paragraph)
    assert total and int((total.group(1) or total.group(2)).replace(",", "")) == sum(
        len(p.read_text(encoding="utf-8").splitlines()) for p in kernel.glob("*.py"))
