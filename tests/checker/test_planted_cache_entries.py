"""Entries planted in the cache folder are not believed: the checker's lemma entries
(checker/lemmas/cache.py) and the prover's proved properties (model/diskcache.py) carry an
HMAC under a per-user secret kept outside the folder (checker/kernel/cachedir.py), so an
entry written without that secret — in the format the cache has, with a SHA-256 digest over public
data — is ignored and the work redone."""

from __future__ import annotations

import hashlib
import json
import os
import stat
from fractions import Fraction
from pathlib import Path

import pytest

import absorb_formal
from absorb_formal.checker.kernel import cachedir
from absorb_formal.checker.lemmas import cache as proved
from absorb_formal.checker.lemmas import relied as lemmas
from absorb_formal.decide import lemmas as props
from absorb_formal.model import diskcache
from absorb_formal.model.activations import simple

from .test_checker_lemma_cache import key_file

# d = 1, width 1: x - (10/11)·σ(x) with σ = leaky_relu(1/10) IS absorbable at width 1
# (slopes 1/11 and 10/11 are -(10/11)·leaky_relu(-x)'s); the prover proves it.
SPEC = """\
block L { activation leaky_relu(1/10) dim 1 width 1 up = [[1]] down = [[-10/11]] }
claim L is absorbable
"""
# A false refutation of it: the §9 half-activation bound, which holds only for σ = c·relu.
HALF_BOUND = {"argument": "Lemma H", "combine": "non-singular", "kind": "half-activation bound",
              "layers": [{"norm": "inf", "sum": "10/11", "test": "norm"}], "rank": 1,
              "width": 1}


RELU = {"coeffs": [], "gated": False, "kind": "relu", "name": "relu", "param": None,
        "power": None}


@pytest.fixture
def cache(tmp_path, monkeypatch):
    """The cache on in a temporary folder, its key beside it; no lemma result in memory."""
    folder = tmp_path / "cache"
    monkeypatch.setenv(cachedir.ENV, str(folder))
    monkeypatch.setenv(cachedir.KEY_ENV, str(key_file(folder)))
    forget()
    yield folder
    forget()


def forget() -> None:
    """Drop the lemmas' results kept in memory, so that the next check reads the disk."""
    lemmas._proved.cache_clear()


def certificates(cli, folder: Path) -> tuple[Path, Path, list[str | None]]:
    """(the honest certificate, the false refutation, the relu_multiple call it relies on)."""
    spec = folder / "leaky.mlp"
    spec.write_text(SPEC, encoding="utf-8")
    assert cli("--certificates", folder / "certs", spec).code == 0
    honest = folder / "certs" / "leaky.mlp.2.json"
    doc = json.loads(honest.read_text(encoding="utf-8"))
    assert doc["outcome"] == "proved"
    false = {**doc, "outcome": "refuted", "verdict": "not absorbable at width 1",
             "method": "§9 half-activation bound", "certificate": HALF_BOUND}
    forged = honest.with_name("false.json")
    forged.write_text(json.dumps(false), encoding="utf-8")
    return honest, forged, ["relu_multiple", lemmas.key(doc["blocks"]["L"]["activation"])]


def status(path: Path) -> tuple[str, str]:
    forget()
    [result] = absorb_formal.check(path)
    return result.status, result.reason


def plant(call: list[str | None], value: object, **digest: str) -> None:
    """An entry for `call` in the folder, its digest as given."""
    path = proved._path(call)
    assert path is not None
    path.write_text(json.dumps({"code": proved.code(), "call": call, "value": value,
                                **digest}), encoding="utf-8")


def public_digest(call: list[str | None], value: object) -> str:
    """What anyone can compute without the secret: SHA-256 of code, call and value."""
    return hashlib.sha256(json.dumps([proved.code(), call, value]).encode()).hexdigest()


def test_a_planted_lemma_entry_does_not_make_a_false_refutation_valid(cache, cli, tmp_path):
    honest, forged, call = certificates(cli, tmp_path)
    assert status(honest)[0] == "valid"
    answer, reason = status(forged)
    assert answer == "invalid" and "sigma = c*relu" in reason
    # 'leaky_relu(1/10) = 1·relu', entered as the cache's format had it (SHA-256 digest) ...
    plant(call, "1", sha256=public_digest(call, "1"))
    assert status(forged)[0] == "invalid"
    plant(call, "1", sha256=public_digest(call, "1"))  # (the check rewrote it)
    assert proved.read(call) is proved.MISSING
    # ... and as it has it now, with a digest that needs no secret.
    plant(call, "1", hmac=public_digest(call, "1"))
    assert status(forged)[0] == "invalid"
    plant(call, "1", hmac=public_digest(call, "1"))
    assert proved.read(call) is proved.MISSING
    assert status(forged)[0] == "invalid"
    assert proved.read(call) is None  # proved again (no c·relu), and its entry written anew
    assert status(honest)[0] == "valid"


def test_lemma_entries_signed_under_another_key_are_proved_again(cache, cli, tmp_path,
                                                                 monkeypatch):
    """A cache folder restored or copied from elsewhere comes without the key that signed it:
    its entries are worthless here, so even a forger's fully signed entry is not believed."""
    honest, forged, call = certificates(cli, tmp_path)
    elsewhere = tmp_path / "elsewhere" / "cache-key"
    monkeypatch.setenv(cachedir.KEY_ENV, str(elsewhere))
    plant(call, "1", hmac=proved._digest(call, "1"))  # signed under the other key
    assert proved.read(call) == 1  # there, it would be believed
    monkeypatch.setenv(cachedir.KEY_ENV, str(key_file(cache)))
    assert proved.read(call) is proved.MISSING
    assert status(forged)[0] == "invalid"
    assert status(honest)[0] == "valid"


def test_the_checkers_own_entries_are_read_back(cache):
    call = ["relu_multiple", lemmas.key(RELU)]
    assert lemmas.relu_multiple(RELU) == 1
    assert proved.read(call) == 1
    [entry] = cache.glob("checker-lemma-*.json")
    assert set(json.loads(entry.read_text())) == {"code", "call", "value", "hmac"}


# ---- the secret ------------------------------------------------------------------------------

def test_the_key_is_made_once_private_and_outside_the_cache_folder(cache):
    assert not key_file(cache).exists()
    key = cachedir.secret()
    assert key is not None and len(key) == 32
    path = key_file(cache)
    info = path.lstat()
    assert stat.S_ISREG(info.st_mode) and stat.S_IMODE(info.st_mode) == 0o600
    assert info.st_uid == os.geteuid() and path.read_bytes() == key
    assert cache not in path.parents and not list(cache.glob("*key*"))
    assert cachedir.secret() == key  # read back, not made again
    assert [p.name for p in path.parent.iterdir()] == ["cache-key"]  # no temporary left


def test_the_default_key_lives_in_the_state_folder(monkeypatch, tmp_path):
    monkeypatch.delenv(cachedir.KEY_ENV, raising=False)
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    assert cachedir.key_path() == tmp_path / "state" / "absorb_formal" / "cache-key"


@pytest.mark.parametrize("spoil", ["group-readable", "other-readable", "short", "link",
                                   "folder"])
def test_an_unsound_key_turns_the_cache_off(cache, spoil):
    call = ["relu_multiple", lemmas.key(RELU)]
    assert cachedir.secret() is not None
    proved.write(call, Fraction(1))
    assert proved.read(call) == 1
    path = key_file(cache)
    if spoil == "group-readable":
        path.chmod(0o640)
    elif spoil == "other-readable":
        path.chmod(0o604)
    elif spoil == "short":
        path.write_bytes(path.read_bytes()[:16])
    elif spoil == "link":
        real = path.with_name("real-key")
        path.rename(real)
        path.symlink_to(real)
    else:
        path.parent.chmod(0o777)
    assert cachedir.secret() is None and cachedir.sign(b"x") is None
    assert proved.read(call) is proved.MISSING
    [entry] = cache.glob("checker-lemma-*.json")
    entry.unlink()
    proved.write(call, Fraction(1))  # without a sound key, nothing is written
    assert not list(cache.glob("checker-lemma-*.json"))


def test_without_a_home_folder_there_is_no_cache(cache, monkeypatch):
    def homeless() -> Path:
        raise RuntimeError("Could not determine home directory")

    monkeypatch.setattr(Path, "home", staticmethod(homeless))
    monkeypatch.delenv(cachedir.KEY_ENV)
    monkeypatch.delenv("XDG_STATE_HOME", raising=False)
    assert cachedir.folder() == cache and cachedir.secret() is None  # the key has no place
    monkeypatch.delenv(cachedir.ENV)
    monkeypatch.delenv("XDG_CACHE_HOME", raising=False)
    assert cachedir.folder() is None
    assert proved.read(["relu_multiple", lemmas.key(RELU)]) is proved.MISSING


def test_no_key_is_made_while_the_cache_is_off(tmp_path, monkeypatch):
    monkeypatch.setenv(cachedir.ENV, "off")
    monkeypatch.setenv(cachedir.KEY_ENV, str(tmp_path / "state" / "cache-key"))
    assert cachedir.secret() is None
    assert not (tmp_path / "state").exists()


# ---- the prover's entries ----------------------------------------------------------------------

@pytest.fixture
def prover_cache(tmp_path, monkeypatch):
    monkeypatch.setenv(diskcache.ENV, str(tmp_path / "cache"))
    monkeypatch.setenv(cachedir.KEY_ENV, str(tmp_path / "state" / "cache-key"))
    monkeypatch.setattr(props, "_proved", {})
    return tmp_path / "cache"


def test_a_planted_properties_entry_is_not_believed(prover_cache):
    """relu's entry replaced by one that says relu is even, bounded and flat, written as the
    cache wrote entries before (plain JSON) and with a digest that needs no secret."""
    act = simple("relu")
    truth = props.properties(act)
    [entry] = prover_cache.glob("properties-*.json")
    false = {**props._as_json(truth), "even": True, "bounded": True, "flat": True}
    text = json.dumps(false, sort_keys=True)
    for planted in (text, hashlib.sha256(text.encode()).hexdigest() + "\n" + text):
        entry.write_text(planted, encoding="utf-8")
        props._proved.clear()
        assert props.properties(act) == truth


def test_a_signed_properties_entry_moved_to_another_name_is_not_believed(prover_cache):
    truth = {name: props.properties(simple(name)) for name in ("relu", "tanh")}
    relu_entry, tanh_entry = (props._disk_entry(simple(n)) for n in ("relu", "tanh"))
    assert props._read(relu_entry) == truth["relu"]  # believed under its own name
    tanh_entry.write_bytes(relu_entry.read_bytes())
    assert props._read(tanh_entry) is None
    props._proved.clear()
    assert props.properties(simple("tanh")) == truth["tanh"]



class _Touch:
    """Unpickled, it creates a file: what a planted pickle could run instead."""

    def __init__(self, marker: Path):
        self.marker = marker

    def __reduce__(self):
        return Path.touch, (self.marker,)


def test_a_planted_parser_table_is_never_unpickled(prover_cache, tmp_path, monkeypatch):
    """Lark reads its tables with pickle: a file planted under their name would run code
    in the prover. Only a signed entry is loaded; the planted one is rebuilt."""
    import pickle

    from lark import Lark

    from absorb_formal.language import parse

    text = "block R { activation relu dim 2 width 1 up = [[1, 0]] down = [[1], [0]] }\n"
    parse.parser.cache_clear()
    try:
        built = parse.parser().parse(text)
        [entry] = prover_cache.glob("lark-*.cache")
        marker = tmp_path / "ran"
        entry.write_bytes(b"0" * 64 + b"\n" + pickle.dumps(_Touch(marker)))
        parse.parser.cache_clear()
        assert parse.parser().parse(text) == built
        assert not marker.exists()
        parse.parser.cache_clear()  # the rebuilt entry, signed, is loaded: nothing is built

        def no_build(*args, **kwargs):
            raise AssertionError("built although a signed entry is there")

        monkeypatch.setattr(Lark, "open_from_package", no_build)
        assert parse.parser().parse(text) == built
    finally:
        parse.parser.cache_clear()
