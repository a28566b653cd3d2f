"""Certificates are built in one place, with the contract's names (checker/kernel/contract.py).

- Only `absorb_formal/certify/` builds a certificate: no other module of the package holds a
  dict literal with a "kind" key, except the few listed below, which describe something else
  (a claim, an activation, a norm, a float figure) and say why.
- Every certificate kind and every witness check of the contract is produced by some builder
  in certify/ (it names the member there), so no kind is left to be spelt elsewhere.
- The prover's deciding packages spell no kind, check or format as a string of their own:
  they compare with the contract's members and build through certify/.

The scans are syntactic (AST), like tests/architecture/test_deciding_modules_use_no_floats.py.
"""

from __future__ import annotations

import ast
from pathlib import Path

from absorb_formal.checker.kernel import contract
from absorb_formal.checker.kernel.contract import Check, Kind

PACKAGE = Path(__file__).resolve().parents[2] / "absorb_formal"
PRODUCER = "certify"
# (module, the "kind" value as written) → why that dict is not a certificate.
NOT_CERTIFICATES = {
    ("model/activations.py", "activation.scalar.kind"):
        "an activation's JSON form: the scalar function's kind (relu, poly, ...)",
    ("report.py", "self.kind"): "a result in the report: the claim's kind (absorbable, ...)",
    ("scanner/results.py", "e.kind"):
        "a stored result of a scanned sublayer: the claim's kind (absorbable, ...)",
    ("scanner/run.py", "norm.kind or None if norm else None"):
        "a scanned block's norm in the scan report (layernorm, rmsnorm)",
    ("decide/ray_limit.py", "first.kind"):
        "the first norm, as the checker's centring reads it (layernorm, rmsnorm)",
    ("numeric/sanity.py", "kind"):
        "a float sanity figure, labelled by the kind of the certificate it measures",
    ("numeric/sanity.py", "Kind.SEPARATING_FUNCTIONAL"):
        "a float sanity figure over a width search's separating functionals",
    ("checker/dispatch.py", "said.kind"):
        "the claim the checker re-reads from the spec, compared with the document's",
    ("checker/biases.py", "'absorbable'"):
        "a document's claim restated as one layer's own claim, to check that layer's part",
    ("checker/readers/reading.py", "part.kind"): "a norm as the checker re-reads it",
    ("checker/lemmas/proofs.py", "kind"): "an activation, as the key of a proved lemma",
    ("checker/lemmas/values.py", "kind"): "an activation whose formula the kernel evaluates",
}
# Prover packages whose string constants must not spell a contract name (certify/ builds with
# the members; export/, scanner/ and cli/ are outside this rule's reach).
PROVER = ("decide", "generic", "numeric")


def _modules(under: str = "") -> list[tuple[str, ast.Module]]:
    root = PACKAGE / under if under else PACKAGE
    return [(path.relative_to(PACKAGE).as_posix(), ast.parse(path.read_text(encoding="utf-8")))
            for path in sorted(root.rglob("*.py"))]


def kind_dicts() -> list[tuple[str, int, str]]:
    """(module, line, "kind" value as written) of every dict literal with a "kind" key, and of
    every `dict(..., kind=...)`, outside certify/."""
    found = []
    for name, tree in _modules():
        if name.startswith(PRODUCER + "/"):
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.Dict):
                found += [(name, node.lineno, ast.unparse(value))
                          for key, value in zip(node.keys, node.values, strict=True)
                          if isinstance(key, ast.Constant) and key.value == "kind"]
            elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) \
                    and node.func.id == "dict":
                found += [(name, node.lineno, ast.unparse(k.value)) for k in node.keywords
                          if k.arg == "kind"]
    return found


def test_only_certify_builds_a_certificate():
    built = [(name, line, value) for name, line, value in kind_dicts()
             if (name, value) not in NOT_CERTIFICATES]
    assert not built, ("certificate dicts outside certify/ (build them with a certify/ "
                       f"builder, or list the exception with its reason): {built}")


def test_every_exception_still_exists():
    found = {(name, value) for name, _, value in kind_dicts()}
    assert set(NOT_CERTIFICATES) <= found, set(NOT_CERTIFICATES) - found


def test_every_kind_and_check_has_a_builder():
    named: set[str] = set()
    for _, tree in _modules(PRODUCER):
        named |= {f"{node.value.id}.{node.attr}" for node in ast.walk(tree)
                  if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name)
                  and node.value.id in ("Kind", "Check")}
    members = {f"Kind.{m.name}" for m in Kind} | {f"Check.{m.name}" for m in Check}
    assert members <= named, f"no builder in certify/ produces {sorted(members - named)}"


def _spelt_names(tree: ast.Module) -> list[tuple[int, str]]:
    """String constants equal to a kind, a check or the format, where they are values: not
    docstrings, f-string parts, dict keys or field names (`cert["rule"]`, `.get("facts")`,
    `"witness" in cert`), which share some of those words."""
    names = {m.value for m in Kind} | {m.value for m in Check} | {contract.FORMAT}
    parents = {child: node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}
    found = []
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Constant) and node.value in names):
            continue
        parent = parents.get(node)
        field = (isinstance(parent, ast.Dict) and node in parent.keys
                 or isinstance(parent, ast.Subscript) and parent.slice is node
                 or isinstance(parent, ast.Call) and isinstance(parent.func, ast.Attribute)
                 and parent.func.attr in ("get", "pop", "setdefault") and node in parent.args
                 or isinstance(parent, ast.Compare) and parent.left is node
                 and isinstance(parent.ops[0], ast.In | ast.NotIn))
        if not (field or isinstance(parent, ast.Expr | ast.JoinedStr)):
            found.append((node.lineno, node.value))
    return found


def test_the_prover_spells_no_contract_name_itself():
    spelt = [(name, line, value) for package in PROVER for name, tree in _modules(package)
             for line, value in _spelt_names(tree)]
    assert not spelt, f"use checker/kernel/contract.py's members instead: {spelt}"


def test_a_contract_member_is_its_string_in_json():
    import json

    assert json.dumps({"kind": Kind.WITNESS, "check": Check.DOUBLES}) == \
        '{"kind": "witness", "check": "own neurons + doubles"}'
