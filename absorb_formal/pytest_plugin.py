"""pytest plugin (entry point `pytest11`): `.mlp` specs are collected as test items.

One item per claim (and query). An item passes when the outcome is the one its line expects
(`# expect: refuted`; default proved, or decided for queries). `# expect: unknown NOTE` marks
a known gap: the item is an xfail, with NOTE as the reason, only while the outcome is exactly
unknown; any other outcome fails it, and proved (or decided) says that the gap closed and the
expectation is to be updated. A line whose comment says `slow` gets the
`slow` marker. When a stored certificate exists (`absorb_proofs`/SPEC.LINE.json, SPEC
relative to `absorb_specs`), it is re-verified by the independent checker and must equal,
byte for byte, the certificate the prover produces now.

ini options: absorb_specs (default "specs"), absorb_proofs (default "proofs").
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from .model.blocks import Claim, Spec, Statement


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addini("absorb_specs", "folder of the spec corpus (relative to rootdir)",
                  default="specs")
    parser.addini("absorb_proofs", "folder of stored certificates (relative to rootdir)",
                  default="proofs")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "slow: a slow spec claim (deselect with -m 'not slow')")


def pytest_collect_file(file_path: Path, parent: pytest.Collector) -> pytest.Collector | None:
    if file_path.suffix == ".mlp":
        return SpecFile.from_parent(parent, path=file_path)
    return None


class SpecFile(pytest.File):
    def collect(self) -> Any:
        from .language import SpecError, load_file

        try:
            relative = self.path.relative_to(self.config.rootpath)
        except ValueError:
            relative = self.path
        try:
            spec = load_file(self.path, str(relative))
        except SpecError as error:
            raise self.CollectError(error.format()) from None
        for statement in spec.statements:
            item = StatementItem.from_parent(self, name=f"line {statement.pos.line}: "
                                                        f"{statement.statement}",
                                             spec=spec, statement=statement)
            line = statement.pos.line
            if line in spec.slow_lines:
                item.add_marker(pytest.mark.slow)
            yield item


class StatementItem(pytest.Item):
    def __init__(self, *, spec: Spec, statement: Statement, **kwargs: Any):
        super().__init__(**kwargs)
        self.spec = spec
        self.statement = statement

    def runtest(self) -> None:
        from .decide import decide

        result = decide(self.spec, self.statement)
        expected = self.spec.expected(self.statement)
        if expected == "unknown":
            self._known_gap(result)
        if result.outcome != expected:
            detail = result.reason or result.verdict
            raise SpecFailure(f"{self.statement.statement}: {result.outcome} "
                              f"(expected {expected}): {detail}")
        if isinstance(self.statement, Claim):
            self._stored_certificate(result)

    def _known_gap(self, result: Any) -> None:
        """`# expect: unknown`: an xfail (reason: the line's note) while the outcome is exactly
        unknown. Not an xfail marker: under one, any failure, a refutation included, would
        count as the expected failure."""
        line = self.statement.pos.line
        note = self.spec.notes.get(line, f"known gap: {self.statement.statement}")
        if result.outcome == "unknown":
            pytest.xfail(note)
        if result.outcome in ("proved", "decided"):
            raise SpecFailure(f"{self.statement.statement}: {result.outcome}, so the known gap "
                              f"closed ({note}); update the line's expectation to "
                              f"`# expect: {result.outcome}` or remove it: {result.verdict}")

    def _stored_certificate(self, result: Any) -> None:
        from .certify import documents as proofs
        from .checker.document import check_document

        root = Path(str(self.config.rootpath))
        specs = root / str(self.config.getini("absorb_specs"))
        try:
            relative = self.path.resolve().relative_to(specs.resolve())
        except ValueError:
            return  # not part of the corpus: nothing stored to compare with
        stored = root / str(self.config.getini("absorb_proofs")) / proofs.file_name(
            str(relative), self.statement.pos.line)
        if not stored.exists():
            return
        update = (f"absorb-prove --certificates {self.config.getini('absorb_proofs')} "
                  f"--update {self.config.getini('absorb_specs')}/")
        verdict, _ = check_document(stored)
        if not verdict.ok and verdict.reason.startswith("stale: "):
            raise SpecFailure(f"stored certificate {stored} is stale: "
                              f"{verdict.reason.removeprefix('stale: ')}; if the spec or its "
                              f"weights changed on purpose, rewrite the certificates: {update}")
        if not verdict.ok:
            raise SpecFailure(f"stored certificate {stored} is invalid: {verdict.reason}")
        assert isinstance(self.statement, Claim)
        fresh = proofs.document(self.spec, self.statement, result, self.path, stored)
        if json.loads(stored.read_text(encoding="utf-8")) != json.loads(proofs.encode(fresh)):
            raise SpecFailure(f"the prover's certificate differs from {stored}; if the change "
                              f"is intended, run: {update}")

    def repr_failure(self, excinfo: Any, style: Any = None) -> Any:
        if isinstance(excinfo.value, SpecFailure):
            return f"{self.path}:{self.statement.pos.line}: {excinfo.value}"
        return super().repr_failure(excinfo, style)

    def reportinfo(self) -> tuple[Path, int, str]:
        return self.path, self.statement.pos.line - 1, self.statement.statement


class SpecFailure(Exception):
    """A claim whose outcome or stored certificate is not what the corpus expects."""
