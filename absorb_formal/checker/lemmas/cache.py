"""The checker's own entries on disk: results of its lemma proofs (`lemmas.py`), kept so
that a later check need not import sympy and prove them again.

Where: the folder of the package's start-up cache (`cachedir.folder`) — `$ABSORB_FORMAL_CACHE`
if set (`off` or `0` turns it off), else `$XDG_CACHE_HOME/absorb_formal` or
`~/.cache/absorb_formal` — in files named `checker-lemma-CODE-CALL.json`, which only this
module reads or writes. The prover's entries there (`absorb_formal/model/diskcache.py`) have other
names and are never read here: nothing the prover proved or wrote is believed.

CODE is a SHA-256 of the bytes of every module of the checker (`checker/*.py`, this one
included), of sympy's and mpmath's version files and of the Python version: once any of the
checker's code changes, or the libraries its proofs ran on, the entries have other names and
the old ones are simply not found. An entry holds the call, the value and an HMAC-SHA256 of
code, call and value under the user's secret (`checker/kernel/cachedir.py`); it is used
only when all of them match and the value has the type the call returns. Anything else — a
truncated, edited or foreign file, one signed under another key, a folder that cannot be
read — is ignored: the lemma is proved again and its entry written anew.

Trust: an entry is believed only when it carries an HMAC under the user's secret, which
lives outside the cache folder in a file private to the user (`checker/kernel/cachedir.py`);
without a sound key file, or in a folder that is not private to the user (owned by another user, or
writable by group or others), the cache is not used at all. So an entry planted in the
folder (a cache restored from a CI artifact or copied from another machine, a folder others
can write) is not believed: making one that is needs the key, i.e. the user's own account,
from which the installed checker could be changed as well. `ABSORB_FORMAL_CACHE=off` proves
every lemma afresh.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import importlib.util
import json
import sys
from fractions import Fraction
from pathlib import Path
from typing import Any

from ..kernel import cachedir
from ..kernel.cachedir import folder

ENV = cachedir.ENV  # the variable that places (or turns off) the cache
MISSING = object()  # `read`'s answer when no sound entry is found
FRACTIONS = ("odd_slope", "value_at_zero", "relu_multiple")  # a Fraction or None


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


def _digest(call: list[str | None], value: Any) -> str | None:
    """The entry's HMAC under the user's secret (None without a usable one)."""
    return cachedir.sign(_signed_text(call, value))


def _signed_text(call: list[str | None], value: Any) -> bytes:
    return json.dumps([code(), call, value]).encode()


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
    if not isinstance(entry, dict) or set(entry) != {"code", "call", "value", "hmac"} \
            or entry["code"] != code() or entry["call"] != call \
            or not cachedir.signed(_signed_text(call, entry["value"]), entry["hmac"]):
        return MISSING
    return decode(str(call[0]), entry["value"])


def write(call: list[str | None], value: Any) -> None:
    """Keep `value` for `call`. Written in place: a reader that meets a half-written entry
    finds its digest wrong and ignores it; a failure to write leaves no sound entry."""
    path = _path(call)
    if path is None:
        return
    stored = encode(value)
    digest = _digest(call, stored)
    if digest is None:  # no usable secret: nothing is written
        return
    with contextlib.suppress(OSError):
        path.write_text(json.dumps({"code": code(), "call": call, "value": stored,
                                    "hmac": digest}), encoding="utf-8")


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
