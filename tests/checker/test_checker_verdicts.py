"""The independent checker: it imports nothing from the prover, accepts the stored corpus
certificates, and rejects every kind of certificate once one number in it is corrupted."""

from __future__ import annotations

import ast
import copy
import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from absorb_formal.checker import verify

from ..conftest import CORPUS, ROOT

PROOFS = ROOT / "proofs"
CHECKER = ROOT / "absorb_formal" / "checker"


def prover_imports(source: str, depth: int = 0) -> list[str]:
    """Every way `source` (a module `depth` folders below `checker/`) reaches the prover:
    `import absorb_formal...`, `from absorb_formal...`, relative imports climbing out of the
    checker, and dynamic imports (`importlib.import_module`, `__import__`) of a name
    starting with absorb_formal or a dot, or of a name that is not a literal."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found += [a.name for a in node.names if a.name.split(".")[0] == "absorb_formal"]
        elif isinstance(node, ast.ImportFrom):
            if node.level > depth + 1 or (node.module or "").split(".")[0] == "absorb_formal":
                found.append("." * node.level + (node.module or ""))
        elif isinstance(node, ast.Call) and _dynamic_import(node.func):
            name = node.args[0] if node.args else None
            if not (isinstance(name, ast.Constant) and isinstance(name.value, str)):
                found.append("a dynamic import of a computed name")
            elif name.value.split(".")[0] == "absorb_formal" or name.value.startswith("."):
                found.append(name.value)
    return found


def _dynamic_import(func: ast.expr) -> bool:
    if isinstance(func, ast.Name):
        return func.id in ("__import__", "import_module")
    return isinstance(func, ast.Attribute) and func.attr in ("import_module", "__import__")


def test_checker_imports_nothing_from_the_prover():
    modules = sorted(CHECKER.rglob("*.py"))
    assert len(modules) >= 10
    for module in modules:
        depth = len(module.relative_to(CHECKER).parts) - 1
        assert not prover_imports(module.read_text(encoding="utf-8"), depth), module


@pytest.mark.parametrize("planted", [
    "import absorb_formal.model.blocks",
    "from absorb_formal import model",
    "from .. import model",
    "from ..language.arrays import load_matrix",
    "import importlib\nm = importlib.import_module('absorb_formal.model.blocks')",
    "from importlib import import_module\nm = import_module('absorb_formal.language')",
    "m = __import__('absorb_formal.model.blocks')",
    "import importlib\nm = importlib.import_module('..model', 'absorb_formal.checker')",
    "import importlib\nm = importlib.import_module('absorb' + '_formal.model')",
    "def f():\n    from absorb_formal.decide import decide\n    return decide",
])
def test_the_import_check_catches_planted_violations(planted):
    assert prover_imports(planted)


def test_the_import_check_allows_the_checkers_own_modules():
    assert not prover_imports("from . import exact\nfrom .files import read_array\n"
                              "import importlib\nz3 = importlib.import_module('z3')")
    assert not prover_imports("from .. import exact", depth=1)  # a checker subpackage
    assert prover_imports("from ... import model", depth=1)


def stored() -> dict[str, dict[str, Any]]:
    return {str(p.relative_to(PROOFS)): json.loads(p.read_text(encoding="utf-8"))
            for p in sorted(PROOFS.rglob("*.json"))}


def test_every_stored_certificate_is_valid(cli):
    run = cli("check", PROOFS)
    assert run.code == 0, run.out
    last = run.out.splitlines()[-1]
    assert ", 0 invalid," in last and "certificates" in last


def test_every_corpus_claim_has_a_stored_certificate():
    claims = 0
    from absorb_formal.language import load_file
    from absorb_formal.model.blocks import Claim

    for spec_path in CORPUS.rglob("*.mlp"):
        spec = load_file(spec_path)
        for s in spec.statements:
            if isinstance(s, Claim):
                claims += 1
                name = f"{spec_path.relative_to(CORPUS)}.{s.pos.line}.json"
                assert (PROOFS / name).is_file(), name
    assert claims == len(stored())


def find(kind: str, pick: str | None = None) -> tuple[str, dict[str, Any]]:
    """A stored document whose certificate contains a `kind` part (method/check/rule pick)."""
    def walk(node: Any) -> bool:
        if isinstance(node, dict):
            label = node.get("method") or node.get("check") or node.get("rule")
            if node.get("kind") == kind and (pick is None or label == pick):
                return True
            return any(walk(v) for v in node.values())
        if isinstance(node, list):
            return any(walk(v) for v in node)
        return False

    for name, doc in stored().items():
        if doc["outcome"] != "unknown" and walk(doc["certificate"]):
            return name, doc
    raise AssertionError(f"no stored certificate of kind {kind} {pick}")


def part(node: Any, kind: str, pick: str | None = None) -> dict[str, Any]:
    """The first sub-certificate of that kind (mutable, inside the document)."""
    if isinstance(node, dict):
        label = node.get("method") or node.get("check") or node.get("rule")
        if node.get("kind") == kind and (pick is None or label == pick):
            return node
        for v in node.values():
            try:
                return part(v, kind, pick)
            except LookupError:
                pass
    if isinstance(node, list):
        for v in node:
            try:
                return part(v, kind, pick)
            except LookupError:
                pass
    raise LookupError(kind)


def bump(text: str) -> str:
    from fractions import Fraction

    return str(Fraction(text) + 1)


def corrupt_weight(c):
    c["layers"][0]["down"][0][0] = bump(c["layers"][0]["down"][0][0])


def corrupt_sign(c):
    row = c["layers"][0]["up"][0]
    c["layers"][0]["up"][0] = [str(-__import__("fractions").Fraction(x)) for x in row]


def corrupt_point(c):
    c["x0"] = ["0" for _ in c["x0"]]


def corrupt_Y(c):  # noqa: N802 - the functional is called Y in docs/rules.md
    c["Y"][0][0] = bump(c["Y"][0][0])


def corrupt_coefficient(c):
    c["coefficients"][0] = bump(c["coefficients"][0])


def corrupt_subset_index(c):
    c["J"] = c["J"][1:] if len(c["J"]) > 1 else [1 + (c["J"][0] % 3)]


def corrupt_lemma(c):
    c["property"] = "H(3)" if c["property"] != "H(3)" else "H(4)"


def corrupt_rule(c):
    c["rule"] = {"T4": "T3", "T3": "T2", "T2": "T4", "T1": "T3"}[c["rule"]]


def corrupt_direction(c):
    c["direction"]["skip_power_entry"] = bump(c["direction"]["skip_power_entry"])


def corrupt_case(c):
    c["cases"] = c["cases"][:-1]


def corrupt_key_count(c):
    c["keys"] = c["keys"] + 1


def corrupt_width(c):
    c["width"] = c["width"] - 1


def corrupt_rank(c):
    c["rank"] = c["rank"] + 1


def corrupt_equal(c):
    c["equal"] = not c["equal"]


def corrupt_rank_s(c):
    c["rank_S"] = c["rank_S"] + 1


def corrupt_basis(c):
    c["complement_basis"] = c["complement_basis"][1:] or [["1"] * 2]


def corrupt_cofactor(c):
    c["cofactors"][0] = c["cofactors"][0] + [["1", [0] * len(c["unknowns"])]]


def corrupt_points(c):
    c["points"] = c["points"][:1]


def corrupt_root_index(c):
    for layer in c["layers"]:
        for rows in layer.values():
            for row in rows:
                for v in row:
                    if isinstance(v, dict):
                        v["index"] = 3 - v["index"] if v["index"] in (1, 2) else 1
                        return


def corrupt_rule_name(c):
    c["rule"] = "§4 genericity" if c["rule"] != "§4 genericity" else "spare pairs"


CORRUPTIONS = [
    ("witness", "canonical forms equal", corrupt_weight),
    ("witness", "canonical forms equal", corrupt_sign),
    ("witness", "each layer's canonical form equals the block layer's", corrupt_weight),
    ("witness", "linear maps equal", corrupt_weight),
    ("witness", "GLU sign-flip identity", corrupt_subset_index),
    ("witness", "the block itself (skip none), zero-padded", corrupt_weight),
    ("homogeneity point", "T1", corrupt_point),
    ("homogeneity point", "T1", corrupt_lemma),
    ("parity point", "T2", corrupt_point),
    ("lemma + direction", "T4", corrupt_rule),
    ("lemma + direction", "T3", corrupt_direction),
    ("lemma + direction", "T1", corrupt_lemma),
    ("separating functional", None, corrupt_Y),
    ("subset search", "unique combination", corrupt_coefficient),
    ("subset search", "enumeration", corrupt_basis),
    ("subset search", "sign enumeration", corrupt_basis),
    ("subset search", "smt", corrupt_basis),  # no stored text: the checker encodes its own
    ("subset search", "cp-sat", corrupt_basis),
    ("subset search", "width search", corrupt_case),
    ("subset search", "key count", corrupt_key_count),
    ("minimal width", None, corrupt_width),
    ("linear rank", None, corrupt_rank),
    ("canonical forms", None, corrupt_equal),
    ("rule", "§4 rank of S", corrupt_rank_s),
    ("Nullstellensatz", "cofactors", corrupt_cofactor),
    ("finite point set", None, corrupt_points),
    ("witness", "polynomial identity", corrupt_weight),
    ("witness", "smt: no point where P differs from B", corrupt_weight),
    ("rule", "§4 subset condition", corrupt_rule_name),
]


@pytest.mark.parametrize(("kind", "pick", "corrupt"), CORRUPTIONS,
                         ids=[f"{k}/{p}/{c.__name__}" for k, p, c in CORRUPTIONS])
def test_corrupting_a_certificate_is_caught(kind, pick, corrupt):
    name, doc = find(kind, pick)
    assert verify(doc).status == "valid", name
    broken = copy.deepcopy(doc)
    corrupt(part(broken["certificate"], kind, pick))
    verdict = verify(broken)
    assert verdict.status == "invalid", (name, kind, pick)
    assert verdict.reason


def test_check_command_reports_the_reason_and_exits_1(cli, tmp_path):
    name, doc = find("homogeneity point", "T1")
    broken = copy.deepcopy(doc)
    part(broken["certificate"], "homogeneity point")["x0"] = ["0"] * len(
        part(broken["certificate"], "homogeneity point")["x0"])
    (tmp_path / "c.json").write_text(json.dumps(broken))
    (tmp_path / "bad.json").write_text("{ not json")
    run = cli("check", tmp_path)
    assert run.code == 1
    assert "c.json: invalid — recorded claim proved: " in run.out and "no violation" in run.out
    assert "bad.json: invalid — unreadable certificate" in run.out


def test_changing_the_outcome_is_caught():
    _, doc = find("witness", "canonical forms equal")
    broken = copy.deepcopy(doc)
    broken["outcome"] = "refuted" if doc["outcome"] == "proved" else "proved"
    assert verify(broken).status == "invalid"


def test_existing_certificates_are_never_overwritten_without_update(cli, tmp_path):
    spec = tmp_path / "s.mlp"
    shutil.copy(CORPUS / "examples" / "relu_absorbable.mlp", spec)
    out = tmp_path / "out"
    assert cli("--certificates", out, spec).code == 0
    target = out / "relu_absorbable.mlp.11.json"
    target = out / "s.mlp.11.json"
    target.write_text("mine\n")
    run = cli("--certificates", out, spec)
    assert run.code == 2 and "differs" in run.err
    assert target.read_text() == "mine\n"
    assert cli("--certificates", out, "--update", spec).code == 0
    assert json.loads(target.read_text())["outcome"] == "proved"
    assert not list(out.glob(".*tmp"))


def test_a_changed_spec_makes_its_certificate_stale(cli, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    spec = Path("s.mlp")
    shutil.copy(CORPUS / "examples" / "relu_absorbable.mlp", spec)
    cli("--certificates", "out", spec)
    assert cli("check", "out").code == 0
    spec.write_text(spec.read_text().replace("7/10", "71/100"))
    run = cli("check", "out")
    assert run.code == 1 and "stale" in run.out


def test_an_algebraic_witness_with_the_wrong_root_is_caught():
    doc = stored()["generic/polynomial.mlp.31.json"]
    assert doc["statement"] == "C is absorbable" and verify(doc).status == "valid"
    broken = copy.deepcopy(doc)
    corrupt_root_index(broken["certificate"])
    assert broken != doc and verify(broken).status == "invalid"


def test_cpsat_refutation_is_re_solved_by_the_checker():
    """The cp-sat certificate carries no numbers: its teeth are the checker's own re-solve."""
    from fractions import Fraction as F

    from absorb_formal.checker.kernel.contract import Invalid
    from absorb_formal.checker.rules.subset import refutation as subset_refutation

    terms = [((F(2 * k),),) for k in range(1, 31)]
    ref = {"kind": "subset search", "method": "cp-sat", "terms": 30, "equations": 1}
    subset_refutation(terms, ((F(61),),), ref)  # odd target, even terms: infeasible
    with pytest.raises(Invalid, match="CP-SAT"):
        subset_refutation(terms, ((F(62),),), ref)
