"""A scan's answers kept as they arrive, in an SQLite file, so that a stopped scan resumes.

Each sublayer whose statements were all decided (proved, refuted or decided, with nothing
cut short by a timeout) is one row, written in its own transaction as its answer arrives:
a scan killed at any moment loses at most the sublayers being decided. A later scan with
the same question skips those sublayers and rebuilds their report entries from the rows:
the same results, certificates and `# expect:` lines as if they had been decided again.
Unknown outcomes are never stored (a longer --timeout or more memory may decide them).

The key of a row is the SHA-256 of
- the question: the sublayer's blocks and statements as the generated spec states them
  (activation, dim, width, bias, norm clause with ε, claims, queries; no comment), each
  `load(...)` replaced by the SHA-256 of the tensor it loads (its stored dtype, shape and
  bytes: up, gate, down, biases, norm parameters, skip), so that the same tensors at another
  path are the same question and a changed tensor is another one;
- the tool: `absorb_formal.__version__` and a digest of the package's source files (the
  rules that decide), so that other code never serves an answer.

The file holds a `meta` table (format, schema) and an `answers` table; a row carries the
SHA-256 of its key and payload, so a torn or edited row is not believed. A file that is not
such a database (or has another schema) is neither used nor changed: the scan says so and
goes on without it. The database is trusted like the checkpoint beside it: `absorb-prove
check` re-verifies the certificates written from it.
"""

from __future__ import annotations

import contextlib
import datetime
import functools
import hashlib
import json
import os
import re
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ..model.blocks import Claim, Spec, Statement
from ..model.result import DECIDED, PROVED, REFUTED, Result
from ..report import Entry

DEFAULT_NAME = ".absorb-results.sqlite"
FORMAT = "absorb_formal scan results"
SCHEMA = "1"
SETTLED = {PROVED, REFUTED, DECIDED}
LOAD = re.compile(r'load\("([^"\\\n]*)", "([^"\\\n]*)"\)')
BUSY_SECONDS = 30.0  # another scan writing the same file: wait this long for its lock


@functools.cache
def code_digest() -> str:
    """SHA-256 of the package's source files (.py, .lark, .json), by path: any change to the
    code that decides gives another digest (about 5 ms)."""
    root = Path(__file__).resolve().parents[1]
    digest = hashlib.sha256()
    for file in sorted(p for p in root.rglob("*") if p.suffix in (".py", ".lark", ".json")
                       and "__pycache__" not in p.parts):
        digest.update(file.relative_to(root).as_posix().encode() + b"\0")
        digest.update(hashlib.sha256(file.read_bytes()).digest())
    return digest.hexdigest()


def tool_key() -> str:
    from .. import __version__

    return f"absorb_formal {__version__} code {code_digest()[:16]}"


def tensor_digest(path: Path, key: str) -> str:
    """SHA-256 of a tensor as stored: its kind, dtype, shape and bytes (through the same
    reader as `load`, so npz, safetensors and ONNX initializers alike)."""
    from ..weights.arrays import ArrayError, load_array

    try:
        loaded = load_array(path, key)
    except ArrayError:  # a bias or norm parameter: a vector
        loaded = load_array(path, key, vector=True)
    return loaded.digest()


def question(text: str, folder: Path) -> str:
    """A sublayer's question: its spec text without comments or blank lines, each
    `load("FILE", "KEY")` (FILE relative to `folder`) as `tensor(SHA256)`; raises
    ArrayError (a ValueError) when a tensor cannot be read."""
    lines = [line.strip() for line in text.splitlines()]
    kept = "\n".join(line for line in lines if line and not line.startswith("#"))
    return LOAD.sub(lambda m: f"tensor({tensor_digest(folder / m.group(1), m.group(2))})",
                    kept)


def row_key(question_text: str, tool: str) -> str:
    return hashlib.sha256(json.dumps({"format": FORMAT, "schema": SCHEMA, "tool": tool,
                                      "question": question_text}).encode()).hexdigest()


def _digest(key: str, payload: str) -> str:
    return hashlib.sha256(f"{key}\n{payload}".encode()).hexdigest()


# ---- rows ---------------------------------------------------------------------------------------

RESULT_FIELDS = ("outcome", "verdict", "method", "reason", "certificate", "min_width", "extra")


def _result(result: Result) -> dict[str, Any]:
    return {name: getattr(result, name) for name in RESULT_FIELDS}


def payload(entries: list[Entry], seconds: float) -> str | None:
    """A row's payload (JSON) for a sublayer's decided entries, or None when it is not to be
    stored: some statement not decided, a timeout mentioned, or a result that JSON would not
    give back exactly as it is."""
    if not entries:
        return None
    data = {"seconds": seconds, "entries": [
        {"kind": e.kind, "block": e.statement.block, "statement": e.statement.statement,
         "seconds": e.seconds, "result": _result(e.result),
         "exact": None if e.exact is None else _result(e.exact)} for e in entries]}
    for entry in entries:
        for result in (entry.result, entry.exact):
            if result is not None and result.outcome not in SETTLED:
                return None
    try:
        text = json.dumps(data, sort_keys=True, allow_nan=False)
    except (TypeError, ValueError):
        return None
    if "timeout" in text.lower() or json.loads(text) != data:
        return None
    return text


def entries_from(text: str, spec: Spec, lines: tuple[int, ...]
                 ) -> tuple[list[Entry], float] | None:
    """The entries of the statements at `lines` of `spec`, rebuilt from a payload, and the
    sublayer's seconds; None when the payload does not answer exactly those statements."""
    try:
        data = json.loads(text)
        stored = {(e["kind"], e["block"], e["statement"]): e for e in data["entries"]}
        statements: list[Statement] = sorted(
            (s for s in spec.statements if s.pos.line in lines), key=lambda s: s.pos.line)
        if len(stored) != len(data["entries"]) or len(statements) != len(stored):
            return None
        entries = []
        for statement in statements:
            kind = "claim" if isinstance(statement, Claim) else "query"
            found = stored[(kind, statement.block, statement.statement)]
            result, exact = _rebuilt(found["result"]), _rebuilt(found["exact"])
            if result is None or (found["exact"] is not None and exact is None):
                return None
            entries.append(Entry(statement, result, float(found["seconds"]),
                                 spec.expected(statement), exact))
        return entries, float(data["seconds"])
    except (KeyError, TypeError, ValueError, AttributeError):
        return None


def _rebuilt(data: Any) -> Result | None:
    if data is None or not isinstance(data, dict) or set(data) != set(RESULT_FIELDS):
        return None
    texts = all(isinstance(data[k], str) for k in ("outcome", "verdict", "method", "reason"))
    if not texts or data["outcome"] not in SETTLED or not isinstance(data["extra"], dict):
        return None
    if not (data["certificate"] is None or isinstance(data["certificate"], dict)):
        return None
    if not (data["min_width"] is None or type(data["min_width"]) is int):
        return None
    return Result(**data)


# ---- the file -----------------------------------------------------------------------------------

def default_file(certificates: Path | None, spec_file: Path | None) -> Path | None:
    """Where a scan keeps its results unless told: in the certificates folder, else beside
    the spec written, else in the working directory; None when the environment variable
    ABSORB_FORMAL_RESULTS is `off` (the test suite's setting)."""
    if os.environ.get("ABSORB_FORMAL_RESULTS", "").lower() == "off":
        return None
    folder = certificates if certificates is not None else (
        spec_file.parent if spec_file is not None else Path.cwd())
    return folder / DEFAULT_NAME


def problem(path: Path) -> str:
    """Why `path` cannot be a results file ("" when it can: absent, empty, or a results
    database of this schema), read without changing it."""
    if not path.exists():
        return ""
    if not path.is_file():
        return f"{path}: not a file"
    if path.stat().st_size == 0:
        return ""
    store = Store(path, lambda line: None, create=False)
    store.close()
    return f"{path}: {store.failed}" if store.failed else ""


class Store:
    """The results file of one scan. Never raises: a file that cannot be used turns the
    store off (`usable` False), and `notify` says why, once."""

    def __init__(self, path: Path, notify: Callable[[str], None], create: bool = True):
        self.path = path
        self.create = create
        self.notify = notify
        self.connection: sqlite3.Connection | None = None
        self.stored = 0
        self.failed = ""
        self._open()

    @property
    def usable(self) -> bool:
        return self.connection is not None

    def _off(self, why: str, then: str = "results are not kept") -> None:
        """Turn the store off: `why` (also `failed`, what a refusal before any work says)
        and `then`, what it means for a scan that goes on."""
        self.failed = why
        if self.connection is not None:
            with contextlib.suppress(sqlite3.Error):
                self.connection.close()
        self.connection = None
        self.notify(f"results: {self.path}: {why}: {then}")

    def _open(self) -> None:
        path = self.path
        if path.exists() and not path.is_file():
            self._off("not a file")
            return
        fresh = not path.exists() or path.stat().st_size == 0
        if fresh and not self.create:
            return
        try:
            if fresh:
                path.parent.mkdir(parents=True, exist_ok=True)
            # read-write even to look: a file of ours that a killed scan left with a hot
            # journal is rolled back by SQLite on opening (a read-only look would fail)
            self.connection = sqlite3.connect(path, timeout=BUSY_SECONDS,
                                              isolation_level=None)
            if fresh:
                self._create()
        except (sqlite3.Error, OSError) as error:
            self._off(f"cannot be {'created' if fresh else 'opened'} ({error})")
            return
        try:
            found = dict(self.connection.execute("SELECT name, value FROM meta"))
        except (sqlite3.Error, ValueError) as error:
            self._off(f"not an absorb_formal results database ({error}), left as it is",
                      "neither used nor changed, and results are not kept (give another "
                      "--results FILE)")
            return
        if found.get("format") != FORMAT:
            self._off("not an absorb_formal results database, left as it is", "neither used "
                      "nor changed, and results are not kept (give another --results FILE)")
        elif found.get("schema") != SCHEMA:
            self._off(f"a results database of schema {found.get('schema')!r}, not {SCHEMA!r} "
                      "(another version of absorb_formal), left as it is", "neither used nor "
                      "changed, and results are not kept (remove it to start afresh)")

    def _create(self) -> None:
        assert self.connection is not None
        with self.connection:
            self.connection.execute("BEGIN IMMEDIATE")
            self.connection.execute("CREATE TABLE IF NOT EXISTS meta (name TEXT PRIMARY KEY, "
                                    "value TEXT NOT NULL)")
            self.connection.execute(
                "CREATE TABLE IF NOT EXISTS answers (key TEXT PRIMARY KEY, block TEXT NOT "
                "NULL, place TEXT NOT NULL, tool TEXT NOT NULL, payload TEXT NOT NULL, "
                "digest TEXT NOT NULL, stored TEXT NOT NULL)")
            self.connection.executemany("INSERT OR IGNORE INTO meta VALUES (?, ?)",
                                        [("format", FORMAT), ("schema", SCHEMA)])

    def get(self, key: str) -> str | None:
        """The payload stored under `key`, when its row is intact."""
        if self.connection is None:
            return None
        try:
            row = self.connection.execute("SELECT payload, digest FROM answers WHERE key = ?",
                                          (key,)).fetchone()
        except sqlite3.Error as error:
            self._off(f"cannot be read ({error})")
            return None
        if row is None or not isinstance(row[0], str) or row[1] != _digest(key, row[0]):
            return None
        return row[0]

    def others(self, tool: str, questions: list[str]) -> dict[str, int]:
        """Of these questions, how many the file holds answered by another `tool`, by tool:
        the same tensors and statements, decided by other code (an upgrade, an edited
        package), which a scan by `tool` cannot use."""
        if self.connection is None or not questions:
            return {}
        try:
            tools = [row[0] for row in self.connection.execute(
                "SELECT DISTINCT tool FROM answers WHERE tool != ?", (tool,))
                if isinstance(row[0], str)]
            counted = {}
            for other in tools:
                found = sum(self.connection.execute(
                    "SELECT 1 FROM answers WHERE key = ?", (row_key(question, other),)
                ).fetchone() is not None for question in questions)
                if found:
                    counted[other] = found
        except sqlite3.Error:
            return {}
        return counted

    def put(self, key: str, block: str, place: str, tool: str, text: str) -> None:
        """Store one row, in its own transaction."""
        if self.connection is None:
            return
        stamp = datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds")
        try:
            with self.connection:
                self.connection.execute("BEGIN IMMEDIATE")
                self.connection.execute(
                    "INSERT OR REPLACE INTO answers VALUES (?, ?, ?, ?, ?, ?, ?)",
                    (key, block, place, tool, text, _digest(key, text), stamp))
        except sqlite3.Error as error:
            self._off(f"cannot be written ({error})", "results are no longer kept")
            return
        self.stored += 1

    def close(self) -> None:
        if self.connection is not None:
            with contextlib.suppress(sqlite3.Error):
                self.connection.close()
            self.connection = None
