"""A per-user cache on disk for work every run would otherwise redo at start-up: the
activations' proved properties (`decide/lemmas.py`, JSON) and the parser's tables
(`language/parse.py`, lark's own cache file).

Where: the folder `checker/kernel/cachedir.py` names — `$ABSORB_FORMAL_CACHE` if set (`off` or `0`
turns the cache off), else `$XDG_CACHE_HOME/absorb_formal` or `~/.cache/absorb_formal`,
created private to the user (0700). Every entry's name carries `code_key(...)`: a SHA-256 of
the source files whose code produced it and of the versions of the libraries involved, so an
entry made by other code is never read (it is simply not found). A cache that cannot be read
or written is ignored: the work is redone.

Trust: an entry is believed only with an HMAC, under the user's secret
(kept outside the cache folder: `checker/kernel/cachedir.py`), of its name and text (`write_signed`,
`read_signed`): one planted in the folder — a cache restored or copied from elsewhere — is
not read, and the properties are proved again. The checker never reads these entries (it
proves every lemma it relies on itself, and keeps only what its own code proved, in entries
of its own that the prover never reads: `checker/lemmas/cache.py`), so even a believed entry here
could change what the prover claims but not what `check` accepts. The parser's tables are
signed the same way (`language/parse.py`): lark reads them with pickle, which runs what the
file says, so an unsigned file there must never reach it.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import os
import sys
import tempfile
from pathlib import Path

from ..checker.kernel import cachedir
from ..checker.kernel.cachedir import folder

ENV = cachedir.ENV  # the variable that places (or turns off) the cache


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


def write_bytes(path: Path, data: bytes) -> None:
    """Write atomically (a reader sees the old entry, none, or the whole new one); any
    failure leaves the cache as it was."""
    name = None
    try:
        with tempfile.NamedTemporaryFile("wb", dir=path.parent, prefix=".tmp-",
                                         delete=False) as stream:
            name = stream.name
            stream.write(data)
        os.replace(name, path)
    except OSError:
        if name is not None:
            with contextlib.suppress(OSError):
                os.unlink(name)


def write_signed(path: Path, data: bytes) -> None:
    """Write `data` after an HMAC line (`write_bytes`); nothing without a usable secret."""
    digest = cachedir.sign(_signed_bytes(path, data))
    if digest is not None:
        write_bytes(path, digest.encode() + b"\n" + data)


def read_signed(path: Path) -> bytes | None:
    """The data `write_signed` wrote at `path`, or None when there is none, or its HMAC (which
    covers the entry's name too: an entry moved to another name is not believed) does not
    match under the user's secret."""
    try:
        digest, _, data = path.read_bytes().partition(b"\n")
    except OSError:
        return None
    return data if cachedir.signed(_signed_bytes(path, data), digest.decode("latin-1")) \
        else None


def _signed_bytes(path: Path, data: bytes) -> bytes:
    return path.name.encode() + b"\0" + data
