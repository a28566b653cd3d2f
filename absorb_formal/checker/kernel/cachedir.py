"""The folder of the per-user cache on disk, and the secret that signs its entries.

Written once here and used by both sides: the checker's lemma entries
(`checker/lemmas/cache.py`) and the prover's entries (`model/diskcache.py`, which imports
this module; nothing here imports the prover, and nothing heavy: the standard library only).

The folder: `$ABSORB_FORMAL_CACHE` if set (`off` or `0` turns the cache off), else
`$XDG_CACHE_HOME/absorb_formal` or `~/.cache/absorb_formal`, created 0700 and used only while
private to the user (`folder`).

The secret: 32 random bytes (`secrets`) in a file of its own, `cache-key`, which is NOT in the
cache folder: `$ABSORB_FORMAL_CACHE_KEY` if set (the file's path), else
`$XDG_STATE_HOME/absorb_formal/cache-key` or `~/.local/state/absorb_formal/cache-key`. Every
entry carries an HMAC-SHA256 under it of what it states (`sign`), and one whose HMAC does not
match is not believed. Why a secret: a digest over public data can be recomputed by anyone
who writes a file, so a cache folder restored from a CI artifact or copied from another
machine, or a folder another account can write, could hold forged entries that look sound.
Why outside the cache folder: what gets copied, restored or shared is the cache folder, and
the key does not travel with it; entries signed under another key are worthless here (proved
again), and the key is never mistaken for an entry.

The key file is created atomically: written whole to a fresh file (os.open with O_CREAT |
O_EXCL, mode 0600) that is then hard-linked to its name, so a reader finds no key or all of
it, and processes that race agree on the first one linked. At every use it must be a regular
file (not a link), owned by the effective user, with no permission bit for group or others,
of 32 bytes, in a folder that is private by the same rule as the cache folder; otherwise
there is no secret and the cache is not used at all (the work is redone, nothing is written).

Trust: the key adds no trust in the user's own account (whoever runs as the user can read it,
and could as well change the installed code); it is what keeps files that came from elsewhere
out.
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import os
import secrets
import stat
from pathlib import Path

ENV = "ABSORB_FORMAL_CACHE"
KEY_ENV = "ABSORB_FORMAL_CACHE_KEY"
KEY_NAME = "cache-key"
KEY_BYTES = 32


def folder() -> Path | None:
    """The cache folder (created, private), or None when the cache is off, cannot be made, or
    is not private: owned by another user, or writable by group or others (`mkdir` leaves the
    mode of a folder that already exists, e.g. a shared one named by $ABSORB_FORMAL_CACHE, as
    it is: hence the check at every use)."""
    value = os.environ.get(ENV)
    if value is not None and value.strip().lower() in ("off", "0", "no", "false", ""):
        return None
    try:
        root = Path(value) if value else \
            Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "absorb_formal"
    except (RuntimeError, KeyError):  # no $HOME, and the user has no passwd entry
        return None
    return _private(root)


def _private(path: Path) -> Path | None:
    """`path`, created 0700 if absent, when it is a folder owned by the effective user that
    neither group nor others can write; else None."""
    try:
        path.mkdir(mode=0o700, parents=True, exist_ok=True)
        status = path.stat()
    except OSError:
        return None
    if not stat.S_ISDIR(status.st_mode) or status.st_uid != os.geteuid() \
            or status.st_mode & 0o022:
        return None
    return path


def key_path() -> Path | None:
    """Where the secret is kept (outside the cache folder); None when no home folder is
    known to hold it."""
    value = os.environ.get(KEY_ENV)
    if value:
        return Path(value)
    try:
        state = os.environ.get("XDG_STATE_HOME") or Path.home() / ".local" / "state"
    except (RuntimeError, KeyError):  # no $HOME, and the user has no passwd entry
        return None
    return Path(state) / "absorb_formal" / KEY_NAME


def secret() -> bytes | None:
    """The per-user secret, made on first use; None when the cache is off or the key file is
    not sound (see the module's docstring), and then no entry may be read or written."""
    if folder() is None:
        return None
    path = key_path()
    if path is None or _private(path.parent) is None:
        return None
    found = _read_key(path)
    if found is None and not path.exists() and not path.is_symlink():
        _make_key(path)
        found = _read_key(path)
    return found


def _read_key(path: Path) -> bytes | None:
    """The key file's 32 bytes, when it is a regular file owned by the effective user with no
    group or other permission bits; else None."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
    except OSError:
        return None
    try:
        status = os.fstat(fd)
        if not stat.S_ISREG(status.st_mode) or status.st_uid != os.geteuid() \
                or status.st_mode & 0o077 or status.st_size != KEY_BYTES:
            return None
        data = os.read(fd, KEY_BYTES + 1)
    except OSError:
        return None
    finally:
        os.close(fd)
    return data if len(data) == KEY_BYTES else None


def _make_key(path: Path) -> None:
    """Write a new key whole to a fresh 0600 file, then link it to `path` (which fails, leaving
    the other key, if another process made one first)."""
    fresh = path.with_name(f".{KEY_NAME}-{secrets.token_hex(8)}")
    try:
        fd = os.open(fresh, os.O_WRONLY | os.O_CREAT | os.O_EXCL
                     | getattr(os, "O_NOFOLLOW", 0), 0o600)
    except OSError:
        return
    try:
        with os.fdopen(fd, "wb") as stream:
            stream.write(secrets.token_bytes(KEY_BYTES))
        with contextlib.suppress(OSError):
            os.link(fresh, path)
    except OSError:
        pass
    finally:
        with contextlib.suppress(OSError):
            os.unlink(fresh)


def sign(data: bytes) -> str | None:
    """HMAC-SHA256 (hex) of `data` under the secret, or None when there is no usable one."""
    key = secret()
    return None if key is None else hmac.new(key, data, hashlib.sha256).hexdigest()


def signed(data: bytes, digest: object) -> bool:
    """Whether `digest` is the HMAC of `data` under the secret (False without one)."""
    expected = sign(data)
    return expected is not None and isinstance(digest, str) \
        and hmac.compare_digest(expected, digest)
