"""Results to text: one line per claim or query, a summary, or one JSON document."""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from .certify import bodies as certificates
from .language.errors import SpecError
from .model.blocks import Claim, Spec, Statement
from .model.result import ERROR, PROVED, REFUTED, UNKNOWN, Result

EXIT_OK, EXIT_REFUTED, EXIT_ERROR, EXIT_UNKNOWN, EXIT_INTERNAL, EXIT_INTERRUPTED = \
    0, 1, 2, 3, 4, 130


@dataclass(frozen=True)
class Entry:
    """One decided statement of one file."""

    statement: Statement
    result: Result
    seconds: float
    expected: str = ""  # the spec's `# expect:` outcome for this line
    exact: Result | None = None  # before numeric checks: what certificates store

    @property
    def as_expected(self) -> bool:
        return self.result.outcome == self.expected

    @property
    def kind(self) -> str:
        return "claim" if isinstance(self.statement, Claim) else "query"

    def line(self, path: str) -> str:
        """`FILE:LINE: OUTCOME: STATEMENT — VERDICT [METHOD]`."""
        r = self.result
        said = r.verdict if r.outcome not in (UNKNOWN, ERROR) else r.reason
        evidence = certificates.summary(r.certificate)
        method = f"{r.method} | {evidence}" if evidence else r.method
        return f"{path}:{self.statement.pos.line}: {r.outcome}: {self.statement.statement} " \
               f"— {said} [{method}]"

    def as_json(self) -> dict[str, Any]:
        r = self.result
        data: dict[str, Any] = {
            "line": self.statement.pos.line,
            "statement": self.statement.statement,
            "kind": self.kind,
            "block": self.statement.block,
            "outcome": r.outcome,
            "verdict": r.verdict,
            "method": r.method,
            "reason": r.reason,
            "certificate": r.certificate,
            "min_width": r.min_width,
            "seconds": round(self.seconds, 3),
        }
        data.update(r.extra)
        return data


@dataclass
class FileReport:
    path: str
    entries: list[Entry] = field(default_factory=list)
    error: SpecError | str | None = None
    spec: Spec | None = None
    interrupted: bool = False

    def as_json(self) -> dict[str, Any]:
        errors: list[dict[str, Any]] = []
        if isinstance(self.error, SpecError):
            errors = [d.as_json() for d in self.error.diagnostics]
        elif self.error:
            errors = [{"line": None, "column": None, "message": self.error}]
        return {"path": self.path, "results": [e.as_json() for e in self.entries],
                "errors": errors}


def exit_code(files: list[FileReport]) -> int:
    """4 if a numeric check contradicted a proof (a bug), else 2 if a spec has an error,
    else 1 if a claim is refuted, else 3 if anything is unknown, else 0 (docs/language.md)."""
    outcomes = {e.result.outcome for f in files for e in f.entries}
    if ERROR in outcomes:
        return EXIT_INTERNAL
    if any(f.error for f in files):
        return EXIT_ERROR
    if REFUTED in outcomes:
        return EXIT_REFUTED
    if UNKNOWN in outcomes:
        return EXIT_UNKNOWN
    return EXIT_OK


def expectation_code(files: list[FileReport]) -> int:
    """With --expect: 4 for an internal error, 2 for a spec error, 1 if an outcome differs
    from its expectation."""
    if any(e.result.outcome == ERROR for f in files for e in f.entries):
        return EXIT_INTERNAL
    if any(f.error for f in files):
        return EXIT_ERROR
    met = all(e.as_expected for f in files for e in f.entries)
    return EXIT_OK if met else EXIT_REFUTED


def expectation_summary(files: list[FileReport]) -> str:
    entries = [e for f in files for e in f.entries]
    met = sum(e.as_expected for e in entries)
    return f"expectations: {met} met, {len(entries) - met} not met"


def summary(files: list[FileReport]) -> str:
    entries = [e for f in files for e in f.entries]
    claims = Counter(e.result.outcome for e in entries if e.kind == "claim")
    queries = Counter(e.result.outcome for e in entries if e.kind == "query")
    errors = sum(1 for f in files if f.error)
    n_claims, n_queries = sum(claims.values()), sum(queries.values())
    internal = claims[ERROR] + queries[ERROR]
    alarm = f", {internal} INTERNAL ERRORS" if internal else ""
    return (f"summary: {len(files)} file{'s' * (len(files) != 1)}, "
            f"{n_claims} claim{'s' * (n_claims != 1)} ({claims[PROVED]} proved, "
            f"{claims[REFUTED]} refuted, {claims[UNKNOWN]} unknown), "
            f"{n_queries} quer{'ies' if n_queries != 1 else 'y'} "
            f"({n_queries - queries[UNKNOWN]} decided, {queries[UNKNOWN]} unknown), "
            f"{errors} file{'s' * (errors != 1)} with errors{alarm}")


def as_json(files: list[FileReport], code: int, with_expectations: bool = False,
            timing: bool = True) -> str:
    documents = [f.as_json() for f in files]
    if not timing:
        for doc in documents:
            for result in doc["results"]:
                result["seconds"] = None
    if with_expectations:
        for f, doc in zip(files, documents, strict=True):
            for entry, result in zip(f.entries, doc["results"], strict=True):
                result["expected"] = entry.expected
    return json.dumps({"files": documents, "exit_code": code}, indent=2)
