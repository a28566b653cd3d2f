"""A per-user cache on disk for work every run would otherwise redo at start-up: the
activations' proved properties (`decide/lemmas.py`, JSON) and the parser's tables
(`language/parse.py`, lark's own cache file).

Where: `$ABSORB_FORMAL_CACHE` if set (`off` or `0` turns the cache off), else
`$XDG_CACHE_HOME/absorb_formal` or `~/.cache/absorb_formal`, created private to the user
(0700). Every entry's name carries `code_key(...)`: a SHA-256 of the source files whose code
produced it and of the versions of the libraries involved, so an entry made by other code is
never read (it is simply not found). A cache that cannot be read or written is ignored: the
work is redone.

Trust: the prover reads these entries; the checker never does (it proves every lemma it
relies on itself, and keeps only what its own code proved, in entries of its own that the
prover never reads: `checker/lemmas/cache.py`), so a tampered entry here can change what the
prover claims but not what `check` accepts.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import os
import sys
import tempfile
from pathlib import Path

ENV = "ABSORB_FORMAL_CACHE"


def folder() -> Path | None:
    """The cache folder (created, private), or None when the cache is off, cannot be made, or
    is not private: owned by another user, or writable by group or others (anyone who can
    write there could plant an entry; `mkdir` leaves an existing folder's mode as it is). The
    checker applies the same rule to its own entries (checker/lemmas/cache.py, which imports nothing
    from here)."""
    value = os.environ.get(ENV)
    if value is not None and value.strip().lower() in ("off", "0", "no", "false", ""):
        return None
    if value:
        base = Path(value)
    else:
        root = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
        base = Path(root) / "absorb_formal"
    try:
        base.mkdir(mode=0o700, parents=True, exist_ok=True)
        status = base.stat()
    except OSError:
        return None
    if status.st_uid != os.geteuid() or status.st_mode & 0o022:
        return None
    return base


@functools.cache
def code_key(*files: str, libraries: tuple[str, ...] = ()) -> str:
    """SHA-256 (hex, 20 characters) of the files' bytes (paths relative to the package),
    the named libraries' versions and the Python version."""
    here = Path(__file__).resolve().parent.parent  # the package's root
    h = hashlib.sha256(sys.version.encode())
    for name in files:
        h.update(name.encode() + b"\0" + (here / name).read_bytes() + b"\0")
    for library in libraries:
        h.update(f"{library}={_version(library)}\0".encode())
    return h.hexdigest()[:20]


def _version(library: str) -> str:
    """The installed version of a distribution: from the name of its `NAME-VERSION.dist-info`
    folder on sys.path (a directory listing, where `importlib.metadata` costs tens of
    milliseconds of imports at every start-up), else from importlib.metadata."""
    wanted = library.lower().replace("-", "_")
    for entry in sys.path:
        try:
            names = os.listdir(entry or ".")
        except OSError:
            continue
        for name in names:
            stem, dot, kind = name.rpartition(".")
            if kind == "dist-info" and dot:
                found, _, version = stem.partition("-")
                if found.lower().replace("-", "_") == wanted and version:
                    return version
    from importlib import metadata

    try:
        return metadata.version(library)
    except metadata.PackageNotFoundError:
        return "absent"


def entry(kind: str, key: str) -> Path | None:
    """The path of one cache entry, or None when the cache is off."""
    base = folder()
    return None if base is None else base / f"{kind}-{key}"


def write_text(path: Path, text: str) -> None:
    """Write atomically (a reader sees the old entry, none, or the whole new one); any
    failure leaves the cache as it was."""
    name = None
    try:
        with tempfile.NamedTemporaryFile("w", encoding="utf-8", dir=path.parent,
                                         prefix=".tmp-", delete=False) as stream:
            name = stream.name
            stream.write(text)
        os.replace(name, path)
    except OSError:
        if name is not None:
            with contextlib.suppress(OSError):
                os.unlink(name)
