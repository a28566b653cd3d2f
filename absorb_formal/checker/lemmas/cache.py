"""The checker's own entries on disk: results of its lemma proofs (`lemmas.py`), kept so
that a later check need not import sympy and prove them again.

Where: the folder of the package's start-up cache — `$ABSORB_FORMAL_CACHE` if set (`off` or
`0` turns it off), else `$XDG_CACHE_HOME/absorb_formal` or `~/.cache/absorb_formal` — in
files named `checker-lemma-CODE-CALL.json`, which only this module reads or writes. The
prover's entries there (`absorb_formal/model/diskcache.py`) have other names and are never read
here: nothing the prover proved or wrote is believed.

CODE is a SHA-256 of the bytes of every module of the checker (`checker/*.py`, this one
included), of sympy's and mpmath's version files and of the Python version: once any of the
checker's code changes, or the libraries its proofs ran on, the entries have other names and
the old ones are simply not found. An entry holds the call, the value and a SHA-256 of
code, call and value; it is used only when all of them match and the value has the type the
call returns. Anything else — a truncated, edited or foreign file, a folder that cannot be
read — is ignored: the lemma is proved again and its entry written anew.

Trust: an entry is what the checker's own code proved on this machine, in a folder private
to the user (0700; a folder owned by another user or writable by group or others is not used
at all, `folder`). Whoever can write there can also change the installed checker, so the
entries add no new way to make `check` accept a false certificate; `ABSORB_FORMAL_CACHE=off`
proves every lemma afresh.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import importlib.util
import json
import os
import sys
from fractions import Fraction
from pathlib import Path
from typing import Any

ENV = "ABSORB_FORMAL_CACHE"
MISSING = object()  # `read`'s answer when no sound entry is found
FRACTIONS = ("odd_slope", "value_at_zero", "relu_multiple")  # a Fraction or None


def folder() -> Path | None:
    """The cache folder (created, private), or None when the cache is off, cannot be made, or
    is not private: owned by another user, or writable by group or others. An entry needs no
    secret to be made (its digest is over public data), so it is only as trustworthy as the
    folder; `mkdir` leaves the mode of a folder that already exists (a shared one named by
    $ABSORB_FORMAL_CACHE) as it is, hence the check at every use."""
    value = os.environ.get(ENV)
    if value is not None and value.strip().lower() in ("off", "0", "no", "false", ""):
        return None
    root = Path(value) if value else \
        Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "absorb_formal"
    try:
        root.mkdir(mode=0o700, parents=True, exist_ok=True)
        status = root.stat()
    except OSError:
        return None
    if status.st_uid != os.geteuid() or status.st_mode & 0o022:
        return None
    return root


@functools.cache
def code() -> str:
    """SHA-256 (hex, 24 characters) of the checker's modules, sympy's and mpmath's version
    files and the Python version."""
    h = hashlib.sha256(sys.version.encode() + b"\0")
    checker = Path(__file__).resolve().parent.parent  # every module of the checker package
    for module in sorted(checker.rglob("*.py")):
        name = module.relative_to(checker).as_posix()
        h.update(name.encode() + b"\0" + module.read_bytes() + b"\0")
    for library, file in (("sympy", "release.py"), ("mpmath", "__init__.py")):
        h.update(library.encode() + b"\0" + _library_file(library, file) + b"\0")
    return h.hexdigest()[:24]


def _library_file(library: str, file: str) -> bytes:
    """The bytes of one file of an installed package (found, not imported), or b"absent"."""
    try:
        spec = importlib.util.find_spec(library)
        places = list(spec.submodule_search_locations or []) if spec else []
        return (Path(places[0]) / file).read_bytes() if places else b"absent"
    except (ImportError, OSError, ValueError):
        return b"absent"


def _path(call: list[str | None]) -> Path | None:
    base = folder()
    if base is None:
        return None
    name = hashlib.sha256(json.dumps(call).encode()).hexdigest()[:24]
    return base / f"checker-lemma-{code()}-{name}.json"


def _digest(call: list[str | None], value: Any) -> str:
    return hashlib.sha256(json.dumps([code(), call, value]).encode()).hexdigest()


def read(call: list[str | None]) -> Any:
    """The value the checker proved for `call` ([function, *arguments] of `lemma_proofs`), or
    MISSING when there is no entry, or one that is not sound (it is then ignored)."""
    path = _path(call)
    if path is None:
        return MISSING
    try:
        entry = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError, RecursionError):
        return MISSING
    if not isinstance(entry, dict) or set(entry) != {"code", "call", "value", "sha256"} \
            or entry["code"] != code() or entry["call"] != call \
            or entry["sha256"] != _digest(call, entry["value"]):
        return MISSING
    return decode(str(call[0]), entry["value"])


def write(call: list[str | None], value: Any) -> None:
    """Keep `value` for `call`. Written in place: a reader that meets a half-written entry
    finds its digest wrong and ignores it; a failure to write leaves no sound entry."""
    path = _path(call)
    if path is None:
        return
    stored = encode(value)
    with contextlib.suppress(OSError):
        path.write_text(json.dumps({"code": code(), "call": call, "value": stored,
                                    "sha256": _digest(call, stored)}), encoding="utf-8")


def encode(value: Any) -> Any:
    """JSON for a lemma's value: a Fraction as its text, a tuple as a list."""
    if isinstance(value, Fraction):
        return str(value)
    if isinstance(value, tuple):
        return [encode(v) for v in value]
    return value


def decode(function: str, stored: Any) -> Any:
    """The value `encode` stored, when it has the type `function` returns, else MISSING."""
    if function == "holds":
        return stored if type(stored) is bool else MISSING
    if stored is None and function in FRACTIONS + ("degree", "reflection"):
        return None
    if function in FRACTIONS:
        return _fraction(stored)
    if function == "degree":
        return stored if type(stored) is int and stored >= 0 else MISSING
    if function == "reflection" and isinstance(stored, list) and len(stored) == 3 \
            and type(stored[2]) is int and stored[2] in (1, -1):
        c, s = _fraction(stored[0]), _fraction(stored[1])
        return MISSING if MISSING in (c, s) else (c, s, stored[2])
    return MISSING


def _fraction(stored: Any) -> Any:
    """A Fraction from its canonical text (as `str(Fraction)` writes it), else MISSING."""
    if not isinstance(stored, str):
        return MISSING
    try:
        value = Fraction(stored)
    except (ValueError, ZeroDivisionError):
        return MISSING
    return value if str(value) == stored else MISSING
