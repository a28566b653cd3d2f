"""The JSON Schema of certificate documents (absorb_formal/checker/kernel/certificate.schema.json).

- It ships with the package (package data, read here through importlib.resources, and present
  in what setuptools builds) and is itself a valid draft 2020-12 schema.
- Every stored document (proofs/) and every document the prover writes now meets it: small
  specs that between them write every kind of certificate (fast), the whole corpus (slow).
- It refuses tampered documents: a missing field, a wrong type, an unknown kind, an extra
  field, at the top and inside nested certificates.
- It defines exactly the certificate kinds that docs/certificates.md has headings for, and
  the page's Python example validates a document as it says.

The schema checks the shape only; the mathematics is the checker's
(tests/checker/test_checker_verdicts.py).
"""

from __future__ import annotations

import copy
import importlib.util
import io
import json
import re
import shutil
import subprocess
import sys
import tomllib
from collections.abc import Callable, Iterator
from contextlib import redirect_stdout
from fnmatch import fnmatch
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from jsonschema import Draft202012Validator
from jsonschema.exceptions import best_match

from ..conftest import ROOT, run_cli

SCHEMA_NAME = "certificate.schema.json"
PROOFS = ROOT / "proofs"
DOCS = ROOT / "docs" / "certificates.md"
# Small corpus specs whose documents hold, between them, every kind a document can hold but
# `integer canonical forms` (written by `integer_forms_spec` below): about 6 s.
SMALL_SPECS = ["glu/sigmoid_gate.mlp", "biases/generic.mlp", "refuted/wrong_claims.mlp",
               "sublayers/pre_norm.mlp", "sublayers/post_norm.mlp", "never/parity.mlp",
               "large/bf16_keys.mlp", "large/flip_twice.mlp", "paper/leaky_relu.mlp",
               "generic/piecewise.mlp", "generic/polynomial.mlp", "biases/families.mlp"]
# Fields a certificate may leave out; every other field of a stored certificate is required.
OPTIONAL_FIELDS = {"point", "example", "rank_S", "rows"}


def schema() -> dict[str, Any]:
    text = resources.files("absorb_formal.checker.kernel").joinpath(SCHEMA_NAME).read_text("utf-8")
    return json.loads(text)


@pytest.fixture(scope="module")
def validator() -> Draft202012Validator:
    return Draft202012Validator(schema())


def definition(name: str) -> Draft202012Validator:
    """A validator of one `$defs` entry (its references resolve within the schema)."""
    return Draft202012Validator({"$ref": f"#/$defs/{name}", "$defs": schema()["$defs"]})


def problem(validator: Draft202012Validator, instance: Any) -> str:
    """The most relevant error, located ("" when the instance is valid)."""
    error = best_match(validator.iter_errors(instance))
    return "" if error is None else f"{error.json_path}: {error.message[:300]}"


def documents(folder: Path) -> list[Path]:
    return sorted(folder.rglob("*.json"))


def certificates(node: Any, where: tuple[Any, ...] = ()) -> Iterator[tuple[tuple[Any, ...],
                                                                           dict[str, Any]]]:
    """Every certificate object in a document's `certificate` (nested ones too), with its
    path: an object with a `kind` (the blocks and the claim are not under `certificate`)."""
    if isinstance(node, dict):
        if isinstance(node.get("kind"), str):
            yield where, node
        for key, value in node.items():
            yield from certificates(value, (*where, key))
    elif isinstance(node, list):
        for n, value in enumerate(node):
            yield from certificates(value, (*where, n))


def kinds(doc: dict[str, Any]) -> set[str]:
    return {cert["kind"] for _, cert in certificates(doc["certificate"])}


def at(doc: Any, where: tuple[Any, ...]) -> Any:
    for step in where:
        doc = doc[step]
    return doc


def kind_headings() -> set[str]:
    """The certificate kinds docs/certificates.md has a heading for (as
    tests/architecture/test_docs_examples_links_and_names.py reads them: a heading that is one
    `name` in backticks)."""
    text = DOCS.read_text(encoding="utf-8")
    return set(re.findall(r"^#{2,4} `([^`\n]+)`$", text, re.MULTILINE))


# ---- the schema itself ---------------------------------------------------------------------

def test_the_schema_is_a_valid_draft_2020_12_schema():
    found = schema()
    Draft202012Validator.check_schema(found)
    assert found["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    assert found["$id"] and found["title"] and found["description"]
    assert found["properties"]["format"] == {"const": "absorb_formal certificate 2"}


def test_the_schema_is_package_data(tmp_path):
    """pyproject.toml names it as package data, and setuptools' build of the package (what a
    wheel holds) contains it, byte for byte."""
    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    patterns = config["tool"]["setuptools"]["package-data"]["absorb_formal.checker.kernel"]
    assert any(fnmatch(SCHEMA_NAME, p) for p in patterns)
    if importlib.util.find_spec("setuptools") is None:  # a Python 3.12+ venv may lack it
        pytest.skip("setuptools is not installed: the build is not tried")
    shutil.copytree(ROOT / "absorb_formal", tmp_path / "absorb_formal",
                    ignore=shutil.ignore_patterns("__pycache__"))
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, tmp_path / name)
    build = subprocess.run(
        [sys.executable, "-W", "ignore", "-c", "import sys; from setuptools import setup; "
         "sys.argv = ['setup.py', '-q', 'build_py', '--build-lib', 'out']; setup()"],
        cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert build.returncode == 0, build.stderr
    where = Path("absorb_formal", "checker", "kernel", SCHEMA_NAME)
    assert (tmp_path / "out" / where).read_bytes() == (ROOT / where).read_bytes()


def test_every_kind_heading_has_a_definition_and_every_definition_a_heading():
    """A definition of a kind is a `$defs` entry whose `kind` is a const; the document's
    `certificate` dispatches to all of them but `facts` (queries are not stored)."""
    found = schema()
    defined = {name: d["properties"]["kind"]["const"] for name, d in found["$defs"].items()
               if "const" in d.get("properties", {}).get("kind", {})}
    assert set(defined.values()) == kind_headings()
    dispatch = found["$defs"]["certificate"]
    routes = {rule["if"]["properties"]["kind"]["const"]: rule["then"]["$ref"]
              for rule in dispatch["allOf"]}
    assert set(dispatch["properties"]["kind"]["enum"]) == set(routes) == \
        kind_headings() - {"facts"}
    assert all(defined[ref.removeprefix("#/$defs/")] == kind for kind, ref in routes.items())


# ---- real documents meet it ---------------------------------------------------------------

def test_every_stored_document_validates(validator):
    paths = documents(PROOFS)
    assert len(paths) >= 300
    failures = {str(p.relative_to(ROOT)): problem(validator, json.loads(p.read_text("utf-8")))
                for p in paths}
    assert not {p: why for p, why in failures.items() if why}


def test_the_stored_documents_hold_every_kind_but_two():
    """proofs/ shows every kind of the page but `integer canonical forms` (a block beyond the
    exact-work limit, 250,000 weights, is too large to keep in the repository) and `facts`
    (query output, never stored): the tests below write those two."""
    seen = set().union(*(kinds(json.loads(p.read_text("utf-8"))) for p in documents(PROOFS)))
    missing = kind_headings() - {"integer canonical forms", "facts"} - seen
    assert not missing and "facts" not in seen, sorted(missing)


def integer_forms_spec(folder: Path) -> Path:
    """`A equals B` (equal) and `A equals C` (not) for relu blocks of 16 × 8,000 (256,000
    weights: beyond the exact-work limit), which only `integer canonical forms` decides."""
    rng = np.random.default_rng(0)
    d, m = 16, 8000
    up = rng.integers(-8, 9, (m, d)).astype(np.float32) / 8
    down = rng.integers(-8, 9, (d, m)).astype(np.float32) / 8
    np.savez(folder / "w.npz", up=up, down=down, down2=down * 2)
    text = "".join(f"block {name} {{\n  activation relu  dim {d}  width {m}  skip identity\n"
                   f'  up = load("w.npz", "up")\n  down = load("w.npz", "{key}")\n}}\n'
                   for name, key in (("A", "down"), ("B", "down"), ("C", "down2")))
    spec = folder / "big.mlp"
    spec.write_text(text + "claim A equals B\nclaim A equals C\n", encoding="utf-8")
    return spec


FAMILY_QUERIES = ("block F { activation relu  dim 2  width 2 }\nquery F\n"
                  "block T { activation tanh  dim 2  width 2 }\nquery T\n")


def fresh(tmp_path: Path, *specs: Path) -> list[dict[str, Any]]:
    out = tmp_path / "certs"
    run = run_cli("--crosscheck", "0", "--no-timing", "--certificates", out, *specs)
    assert run.code in (0, 1), run.out + run.err  # 1: a claim is refuted
    return [json.loads(p.read_text("utf-8")) for p in documents(out)]


def test_fresh_documents_of_every_kind_validate(validator, tmp_path):
    specs = [ROOT / "specs" / name for name in SMALL_SPECS]
    docs = fresh(tmp_path, integer_forms_spec(tmp_path), *specs)
    failures = [(doc["spec"]["path"], doc["line"], problem(validator, doc)) for doc in docs]
    assert not [f for f in failures if f[2]]
    missing = kind_headings() - {"facts"} - set().union(*map(kinds, docs))
    assert not missing, f"no fresh document holds {sorted(missing)}: change SMALL_SPECS"


def test_the_facts_of_family_queries_validate(tmp_path):
    """`facts` is only in --json output: validated against its own definition."""
    spec = tmp_path / "queries.mlp"
    spec.write_text(FAMILY_QUERIES, encoding="utf-8")
    run = run_cli("--json", "--no-timing", "--crosscheck", "0", spec)
    assert run.code == 0, run.out + run.err
    found = [r["certificate"] for r in run.json()["files"][0]["results"]]
    assert [c["kind"] for c in found] == ["facts", "facts"]
    facts = definition("facts")
    assert {v["kind"] for c in found for v in c["facts"].values()} == {"rule",
                                                                       "lemma + direction"}
    assert all(problem(facts, c) == "" for c in found)
    forged = copy.deepcopy(found[0])
    forged["facts"]["perhaps"] = next(iter(forged["facts"].values()))
    assert problem(facts, forged)


@pytest.mark.slow
def test_the_whole_corpus_writes_valid_documents(validator, tmp_path):
    """The corpus, decided afresh (about 30 s): every document, and every query's facts."""
    out = tmp_path / "certs"
    run = run_cli("--json", "--no-timing", "--crosscheck", "0", "--certificates", out,
                  ROOT / "specs")
    assert run.code in (0, 1) and not any(f["errors"] for f in run.json()["files"]), run.err
    docs = [json.loads(p.read_text("utf-8")) for p in documents(out)]
    assert len(docs) == len(documents(PROOFS))
    failures = [(doc["spec"]["path"], doc["line"], problem(validator, doc)) for doc in docs]
    assert not [f for f in failures if f[2]]
    facts = definition("facts")
    queried = [r["certificate"] for f in run.json()["files"] for r in f["results"]
               if isinstance(r.get("certificate"), dict) and r["certificate"]["kind"] == "facts"]
    assert queried and all(problem(facts, c) == "" for c in queried)


# ---- tampered documents are refused ---------------------------------------------------------

def stored(name: str) -> dict[str, Any]:
    return json.loads((PROOFS / name).read_text("utf-8"))


WITNESS = "examples/relu_absorbable.mlp.11.json"  # a witness with its layers
BOUNDS = "large/costly.mlp.19.json"  # unknown, minimal width bounds nesting two certificates
POST_NORM = "sublayers/post_norm.mlp.14.json"  # a normalised sublayer wrapping a min width


def _set(where: tuple[Any, ...], value: Any) -> Callable[[dict[str, Any]], None]:
    def change(doc: dict[str, Any]) -> None:
        at(doc, where[:-1])[where[-1]] = value
    return change


def _drop(where: tuple[Any, ...]) -> Callable[[dict[str, Any]], None]:
    def change(doc: dict[str, Any]) -> None:
        del at(doc, where[:-1])[where[-1]]
    return change


TAMPERED = {
    # a missing required field
    "no outcome": (WITNESS, _drop(("outcome",))),
    "no spec digest": (WITNESS, _drop(("spec", "sha256"))),
    "no claim width": (WITNESS, _drop(("claim", "width"))),
    "no block activation": (WITNESS, _drop(("blocks", "R", "activation"))),
    "no witness check": (WITNESS, _drop(("certificate", "check"))),
    "no witness layers": (WITNESS, _drop(("certificate", "layers"))),
    "no nested witness width": (BOUNDS, _drop(("certificate", "above", "width"))),
    "no nested refutation rule": (BOUNDS, _drop(("certificate", "below", "rule"))),
    # a wrong type
    "line as text": (WITNESS, _set(("line",), "11")),
    "statement as a list": (WITNESS, _set(("statement",), ["R is absorbable"])),
    "block width as text": (WITNESS, _set(("blocks", "R", "width"), "3")),
    "witness width 1.5": (WITNESS, _set(("certificate", "width"), 1.5)),
    "witness width as a bool": (WITNESS, _set(("certificate", "width"), True)),
    "a weight as a float": (WITNESS, _set(("certificate", "layers", 0, "up", 0, 0), 0.5)),
    "a weight as decimal text": (WITNESS, _set(("certificate", "layers", 0, "up", 0, 0),
                                               "0.5")),
    "a symbolic weight outside down_bias": (
        WITNESS, _set(("certificate", "layers", 0, "up", 0, 0), "silu(1)")),
    "a bias on a bias-free block": (WITNESS, _set(("blocks", "R", "layers", 0, "up_bias"),
                                                  ["0", "0", "0"])),
    "a digest in capitals": (WITNESS, lambda d: d["spec"].update(
        sha256=d["spec"]["sha256"].upper())),
    "a prime as text where the checker wants an integer": (
        BOUNDS, _set(("certificate", "below", "prime"), "67108859")),
    "a §8.2 key count as text": ("large/flip_sets.mlp.17.json",
                                 _set(("certificate", "keys"), "1400")),
    "bounds as a list": (BOUNDS, _set(("certificate", "lower"), [1])),
    # an unknown kind, method, check or enumerated value
    "an unknown certificate kind": (WITNESS, _set(("certificate", "kind"), "oracle")),
    "an unknown nested kind": (BOUNDS, _set(("certificate", "below", "kind"), "oracle")),
    "an unknown inner kind": (POST_NORM, _set(("certificate", "certificate", "kind"),
                                              "oracle")),
    "an unknown witness check": (WITNESS, _set(("certificate", "check"), "trust me")),
    "an unknown outcome": (WITNESS, _set(("outcome",), "probably")),
    "an unknown modality": (WITNESS, _set(("claim", "modality"), "perhaps")),
    "an unknown activation kind": (WITNESS, _set(("blocks", "R", "activation", "kind"),
                                                 "softmax")),
    "another format": (WITNESS, _set(("format",), "absorb_formal certificate 3")),
    "an unknown reduction": (POST_NORM, _set(("certificate", "reduction"), "none")),
    # an extra field where the format is closed
    "an extra document field": (WITNESS, _set(("note",), "unread")),
    "an extra spec field": (WITNESS, _set(("spec", "size"), 10)),
    "an extra claim field": (WITNESS, _set(("claim", "note"), "")),
    "an extra block field": (WITNESS, _set(("blocks", "R", "note"), "")),
    "an extra layer field": (WITNESS, _set(("blocks", "R", "layers", 0, "up2"), [["1"]])),
    "an extra certificate field": (WITNESS, _set(("certificate", "note"), "unread")),
    "an extra nested field": (BOUNDS, _set(("certificate", "above", "note"), "unread")),
    "an extra inner field": (POST_NORM, _set(("certificate", "certificate", "note"), "")),
    "a field of another check": (WITNESS, _set(("certificate", "smtlib"), "(check-sat)")),
    # outcome and certificate disagree in shape
    "a proved outcome without a certificate": (WITNESS, _set(("certificate",), None)),
    "a decided outcome with bounds only": (BOUNDS, _set(("outcome",), "proved")),
}


@pytest.mark.parametrize("name", sorted(TAMPERED))
def test_a_tampered_document_is_refused(validator, name):
    path, change = TAMPERED[name]
    doc = stored(path)
    assert problem(validator, doc) == ""
    change(doc)
    assert problem(validator, doc), f"{name}: accepted"


def _samples() -> dict[str, tuple[str, tuple[Any, ...]]]:
    """One stored certificate object per kind and check or method (its document, its path)."""
    found: dict[str, tuple[str, tuple[Any, ...]]] = {}
    for path in documents(PROOFS):
        doc = json.loads(path.read_text("utf-8"))
        for where, cert in certificates(doc["certificate"], ("certificate",)):
            label = "/".join(str(cert[f]) for f in ("kind", "check", "method")
                             if isinstance(cert.get(f), str))
            found.setdefault(label, (str(path.relative_to(PROOFS)), where))
    return found


SAMPLES = _samples()


@pytest.mark.parametrize("label", sorted(SAMPLES))
def test_each_kind_refuses_an_extra_field_and_the_loss_of_a_required_one(validator, label):
    path, where = SAMPLES[label]
    doc = stored(path)
    extra = copy.deepcopy(doc)
    at(extra, where)["note"] = "unread"
    assert problem(validator, extra), "an extra field is accepted"
    optional = set()
    for field in at(doc, where):
        dropped = copy.deepcopy(doc)
        del at(dropped, where)[field]
        if not problem(validator, dropped):
            optional.add(field)
    assert optional <= OPTIONAL_FIELDS, f"{sorted(optional - OPTIONAL_FIELDS)} may be dropped"


def test_a_symbolic_value_is_accepted_where_the_format_has_one(validator):
    doc = stored(WITNESS)
    for value in ("silu(1)", "-2 - 2*gelu(1)", "1/2 + 3*silu(1)", "2*silu(1)^-16",
                  "-4 + 3*gelu_tanh(1) + 2*gelu_tanh(2)"):
        bias = copy.deepcopy(doc)
        layer = bias["certificate"]["layers"][0]
        layer.update(up_bias=["0"] * 3, down_bias=[value, "0"])
        bias["blocks"]["R"]["bias"] = True
        bias["blocks"]["R"]["layers"][0].update(up_bias=["0"] * 3, down_bias=["0", "0"])
        assert problem(validator, bias) == "", value
    for value in ("silu(-1)", "silu(0)", "relu(1)", "silu(1) +1", "3 * silu(1)", "silu(1)^0",
                  "silu(1)^17"):
        layer.update(down_bias=[value, "0"])
        assert problem(validator, bias), value


# ---- the page's example ---------------------------------------------------------------------

def test_the_documented_python_example_validates_a_document(tmp_path, monkeypatch):
    """docs/certificates.md shows how to validate a document with the schema: run that
    snippet (test_docs_examples_links_and_names.py runs only specs), on a stored document and on a
    tampered copy."""
    text = DOCS.read_text(encoding="utf-8")
    section = text[text.index("### The JSON Schema"):]
    snippet = re.search(r"^```python\n(.*?)^```", section, re.MULTILINE | re.DOTALL)
    assert snippet is not None
    code = snippet.group(1)
    assert f'"proofs/{WITNESS}"' in code
    monkeypatch.chdir(ROOT)

    def run(source: str) -> str:
        printed = io.StringIO()
        with redirect_stdout(printed):
            exec(compile(source, str(DOCS), "exec"), {})
        return printed.getvalue()

    assert run(code) == ""
    tampered = stored(WITNESS)
    tampered["certificate"]["width"] = "three"
    (tmp_path / "t.json").write_text(json.dumps(tampered), encoding="utf-8")
    printed = run(code.replace(f'"proofs/{WITNESS}"', repr(str(tmp_path / "t.json"))))
    assert "certificate/width" in printed
