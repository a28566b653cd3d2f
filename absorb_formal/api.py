"""The Python API: decide specs and re-check certificates without the command line.

    >>> import absorb_formal
    >>> [r] = absorb_formal.prove("block R { activation swiglu dim 2 width 2 }\\n"
    ...                           "claim R is never absorbable\\n")
    >>> r.outcome, r.verdict
    ('proved', 'never absorbable at width 2')

`prove(source)` returns one `StatementResult` per claim and query, in file order; a spec
error raises `InvalidSpec` (FILE:LINE:COL in `str(error)`, and as attributes). `check(path)`
returns one `CheckResult` per certificate document. The command line (`absorb-prove`,
`absorb-prove check`) goes through `prove_report` and `check_items` below: there is no
second path.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from .decide import budget, decide, progress
from .language import SpecError
from .model.blocks import Block, Spec, Statement
from .model.result import ERROR, Result, unknown
from .paths import collect, relative_name
from .report import Entry, FileReport

if TYPE_CHECKING:
    from .numeric.attach import Options

DEFAULT_TIMEOUT = 60.0
TEXT_NAME = "<spec>"  # the FILE of positions in spec text given directly


class InvalidSpec(SpecError):
    """The spec has an error (syntax, undefined name, wrong shape, unreadable file, ...).

    `str(error)` is one `FILE:LINE:COL: error: MESSAGE` line per diagnostic; `path`,
    `line`, `column` and `message` give the first one; `diagnostics` all of them;
    `format()` adds the source lines with a caret, as the command line prints them.
    FILE is the path as given, or "<spec>" for spec text."""

    def __init__(self, error: SpecError):
        super().__init__(error.diagnostics, error.source)
        first = self.diagnostics[0]
        self.path, self.message = first.path, first.message
        self.line, self.column = first.pos.line, first.pos.column

    def __str__(self) -> str:
        return "\n".join(f"{d.path}:{d.pos.line}:{d.pos.column}: error: {d.message}"
                         for d in self.diagnostics)


@dataclass(frozen=True)
class StatementResult:
    """The outcome of one claim or query (the fields of one `--json` result).

    outcome: "proved" | "refuted" (the opposite was proved) | "unknown" (claims);
      "decided" | "unknown" (queries); "error" when a numeric check contradicted an exact
      verdict (a bug in absorb_formal).
    verdict: the finding in words ("absorbable at width 3 (J = {1, 2})"); "" when unknown.
    certificate: the JSON-ready evidence (docs/certificates.md) of a proved/refuted/decided outcome.
    line: the statement's line in the spec; statement: its text ("R is absorbable").
    kind: "claim" | "query"; block: the block it is about.
    method: the rule or engine that decided; reason: why the outcome is unknown or error.
    min_width: the proved minimal width (min-width claims, queries), else None.
    seconds: time spent on this statement (numeric checks included).
    extra: the other JSON fields ("crosscheck", "fit", "min_width_bounds", ...).
    """

    line: int
    statement: str
    kind: str
    block: str
    outcome: str
    verdict: str
    method: str
    reason: str
    certificate: dict[str, Any] | None
    min_width: int | None
    seconds: float
    extra: Mapping[str, Any] = field(default_factory=dict)

    @classmethod
    def of(cls, entry: Entry) -> StatementResult:
        r = entry.result
        return cls(entry.statement.pos.line, entry.statement.statement, entry.kind,
                   entry.statement.block, r.outcome, r.verdict, r.method, r.reason,
                   r.certificate, r.min_width, entry.seconds, dict(r.extra))


def equal_blocks(left: Block, right: Block) -> tuple[bool | None, dict[str, Any] | None, str]:
    """`claim left equals right` for two blocks of a loaded spec (`spec.blocks[name]`), e.g.
    a block and the plain block `absorb-prove export` wrote for it: (True or False with its
    certificate, "") when decided, (None, None, reason) when not. Blocks beyond the exact-work
    limit, GPT-2 size included, are compared by canonical forms in exact integers
    (docs/rules.md, "Equality at scale"); the certificate is the `certificate` of the
    document `absorb-prove --certificates` would store for the claim."""
    from .decide.equivalence import equal_blocks as decide_equal

    return decide_equal(left, right)


def is_path(source: str | Path) -> bool:
    """How `prove` reads its source: a Path is a file; so is a str without a newline that
    names an existing file or ends in ".mlp"; any other str is spec text."""
    if isinstance(source, Path):
        return True
    if "\n" in source:
        return False
    return source.endswith(".mlp") or Path(source).is_file()


def prove(source: str | Path, *, engine: str = "theory", timeout: float = DEFAULT_TIMEOUT,
          numeric: Options | None = None) -> list[StatementResult]:
    """Decide every claim and query of a spec: one result per statement, in file order.

    source: a .mlp file (see `is_path`) or spec text; `load(...)` in text is relative to
      the working directory.
    engine: "theory" (docs/rules.md §3–5, generic engine as fallback), "generic" or "both".
    timeout: seconds per statement (0 = none); a statement that runs out ends "unknown"
      with reason "timeout after T s" (a query keeps what it decided before).
    numeric: `absorb_formal.numeric.attach.Options` for float cross-checks (default: none).
    Raises InvalidSpec for a spec error; KeyboardInterrupt propagates."""
    report = prove_report(source, engine=engine, timeout=timeout, numeric=numeric)
    if report.interrupted:
        raise KeyboardInterrupt
    if isinstance(report.error, SpecError):
        raise InvalidSpec(report.error)
    return [StatementResult.of(entry) for entry in report.entries]


def prove_report(source: str | Path, shown: str | None = None, *, engine: str = "theory",
                 timeout: float = DEFAULT_TIMEOUT, numeric: Options | None = None,
                 progress_to: TextIO | None = None) -> FileReport:
    """What `prove` computes, as the command line's FileReport: the spec, one Entry per
    statement decided (with the exact result that certificates store), the spec error, and
    whether Ctrl-C stopped it. `shown`: the file name in messages; `progress_to`: a stream
    for progress bars (only when it is a terminal)."""
    from .language import load_file, load_text

    name = shown if shown is not None else (str(source) if is_path(source) else TEXT_NAME)
    report = FileReport(name)
    try:
        if is_path(source):
            spec = load_file(Path(source), name)
        else:
            spec = load_text(str(source), name, Path.cwd())
    except SpecError as error:
        report.error = error
        return report
    report.spec = spec
    with progress.shown_on(progress_to):
        report.entries, report.interrupted = _decide_all(spec, engine, timeout, numeric)
    return report


def _decide_all(spec: Spec, engine: str, timeout: float, numeric: Options | None
                ) -> tuple[list[Entry], bool]:
    return decide_spec(spec, spec.statements, engine=engine, timeout=timeout, numeric=numeric)


def decide_spec(spec: Spec, statements: Iterable[Statement], *, engine: str = "theory",
                timeout: float = DEFAULT_TIMEOUT, numeric: Options | None = None
                ) -> tuple[list[Entry], bool]:
    """Decide some statements of a validated spec, in order, each under its own budget:
    (one Entry per statement decided, whether Ctrl-C stopped it)."""
    entries: list[Entry] = []
    for statement in statements:
        start = time.perf_counter()
        try:
            exact, result = _decide_one(spec, statement, engine, timeout, numeric)
        except KeyboardInterrupt:
            return entries, True  # keep what was decided; the caller stops (exit 130)
        entries.append(Entry(statement, result, time.perf_counter() - start,
                             spec.expected(statement), exact))
    return entries, False


def _decide_one(spec: Spec, statement: Statement, engine: str, timeout: float,
                numeric: Options | None) -> tuple[Result, Result]:
    """(exact result, result with the numeric checks) of one statement under its budget."""
    from .numeric.attach import attach

    exact = result = unknown(f"timeout after {timeout:g} s")
    try:
        with budget.limit(timeout):
            exact = result = decide(spec, statement, engine)
            if exact.outcome == "unknown" and budget.spent():
                # a solver stopped at the budget's limit: say so, with its own words
                exact = result = unknown(f"timeout after {timeout:g} s ({exact.reason})")
            elif budget.spent() and numeric is not None and numeric.points > 0:
                # a query kept its first part; the numeric checks would run unbounded
                result = replace(exact, verdict=exact.verdict + "; numeric checks skipped "
                                                                f"(timeout after {timeout:g} s)")
            elif numeric is not None:
                block = spec.blocks[statement.block]
                asked = statement.width if statement.width is not None else block.width
                result = attach(block, result, numeric, asked)
    except budget.ClaimTimeout:
        if exact.outcome == "unknown" and exact.reason.startswith("timeout"):
            result = exact
        else:  # decided in time; only the numeric checks ran out
            result = replace(exact, verdict=exact.verdict + f"; numeric checks stopped "
                                                           f"after {timeout:g} s")
    except (MemoryError, RecursionError) as error:
        exact = result = unknown(f"resource limit: {type(error).__name__}")
    except Exception as error:  # a bug: say so in the outcome, never as a traceback
        exact = result = Result(ERROR, reason=f"INTERNAL ERROR: {type(error).__name__}: "
                                              f"{error} (please report)")
    return exact, result


# ---- check ---------------------------------------------------------------------------------

STATUSES = ("valid", "invalid", "stale", "unchecked")


@dataclass(frozen=True)
class CheckResult:
    """The independent checker's verdict on one certificate document.

    certificate: the document's path; status: "valid" (the evidence proves the recorded
      outcome), "invalid" (it does not, or the document is malformed), "stale" (the spec
      or a weight file changed since it was written; not re-verified), "unchecked" (no
      evidence to verify, e.g. an unknown outcome).
    reason: why (the checker's words; "" when there is nothing to add).
    outcome, verdict, method, statement, line: what the document records about its claim
      ("" / None when unreadable). A valid certificate of a "refuted" claim proves the
      opposite of the statement.
    spec: the spec file the document names, where the checker looked for it (shown relative
      to the working directory when below it); "" when the document names none readably.
      The verified statement is about this spec's blocks, or, when it is not found, about
      the embedded ones (the reason says so).
    """

    certificate: Path
    status: str
    reason: str
    outcome: str
    verdict: str
    method: str
    statement: str
    line: int | None
    spec: str = ""

    def text(self, shown: str | None = None) -> str:
        """`FILE: STATUS — claim OUTCOME: STATEMENT (VERDICT) [METHOD] — REASON`; unless
        the status is valid, the outcome was not verified: "recorded claim OUTCOME"."""
        head = f"{shown if shown is not None else self.certificate}: {self.status}"
        if self.statement:
            recorded = "" if self.status == "valid" else "recorded "
            claim = f"{recorded}claim {self.outcome or 'of unknown outcome'}: {self.statement}"
            if self.verdict:
                claim += f" ({self.verdict})"
            if self.method and self.method != "none":
                claim += f" [{self.method}]"
            if self.spec:
                claim += f" in {self.spec}" + (f":{self.line}" if self.line else "")
            head += f" — {claim}"
        return head + (f" — {self.reason}" if self.reason else "")

    def as_json(self) -> dict[str, Any]:
        return {"path": str(self.certificate), "status": self.status, "reason": self.reason,
                "outcome": self.outcome, "verdict": self.verdict, "method": self.method,
                "statement": self.statement, "line": self.line, "spec": self.spec}


def check(path: str | Path) -> list[CheckResult]:
    """Re-verify a certificate file, or every *.json under a folder (sorted), with the
    independent checker; raises FileNotFoundError when the path does not exist or is a
    folder without any .json file, ValueError when it is a spec (`.mlp`), not a
    certificate."""
    spec = spec_given(Path(path), str(path))
    if spec is not None:
        raise ValueError(spec)
    found = []
    for item in check_items([str(path)]):
        if isinstance(item, str):
            raise FileNotFoundError(item)
        found.append(item[1])
    return found


def spec_given(path: Path, shown: str) -> str | None:
    """The error for a spec given where a certificate is wanted (a `.mlp` file, or a folder
    of specs without certificates), saying which command decides it; None otherwise."""
    if path.is_file() and path.suffix == ".mlp":
        return (f"{shown}: error: a spec, not a certificate: decide it with `absorb-prove "
                f"{shown}`, or write certificates that `check` verifies with `absorb-prove "
                f"--certificates DIR {shown}`")
    if path.is_dir() and not any(path.rglob("*.json")) and any(path.rglob("*.mlp")):
        return (f"{shown}: error: no *.json certificates in this folder, only .mlp specs: "
                f"decide them with `absorb-prove {shown}`, or write certificates with "
                f"`absorb-prove --certificates DIR {shown}`")
    return None


def _spec_shown(doc: dict[str, Any], certificate: Path) -> str:
    """Where the document's spec is, as `check` shows it (so that a document cannot stand
    for one spec while being verified against another unseen)."""
    from .checker.readers.reading import spec_location

    try:
        spec = spec_location(doc, certificate)
    except (KeyError, TypeError):
        return ""
    return relative_name(spec) if spec.resolve().is_relative_to(Path.cwd().resolve()) \
        else str(spec)


def check_items(paths: Iterable[str]) -> list[str | tuple[str, CheckResult]]:
    """(shown name, result) per certificate under `paths`, in order; a str is an error
    message for a path that does not exist, a folder without certificates, or a spec."""
    out: list[str | tuple[str, CheckResult]] = []
    for given in paths:
        spec = spec_given(Path(given), given)
        if spec is not None:
            out.append(spec)
            continue
        out += _check_under(given)
    return out


def _check_under(given: str) -> list[str | tuple[str, CheckResult]]:
    from .checker.document import check_file

    out: list[str | tuple[str, CheckResult]] = []
    for item in collect([given], "*.json"):
        if isinstance(item, str):
            out.append(item)
            continue
        file, shown, _ = item
        verdict, doc = check_file(file)
        status = verdict.status
        reason = verdict.reason
        if status == "invalid" and reason.startswith("stale: "):
            status, reason = "stale", reason.removeprefix("stale: ")
        line = doc.get("line")
        out.append((shown, CheckResult(
            file, status, reason, str(doc.get("outcome", "")), str(doc.get("verdict", "")),
            str(doc.get("method", "")), str(doc.get("statement", "")),
            line if type(line) is int else None, _spec_shown(doc, file))))
    return out
