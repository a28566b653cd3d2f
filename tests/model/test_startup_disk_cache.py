"""The start-up cache on disk (model/diskcache.py): proved activation properties and the parser's
tables, keyed by the code that made them; read back equal, ignored when corrupt or off."""

from __future__ import annotations

import hashlib
import sys

import pytest

from absorb_formal.decide import lemmas as props
from absorb_formal.language import parse
from absorb_formal.model import diskcache
from absorb_formal.model.activations import simple


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv(diskcache.ENV, str(tmp_path / "cache"))
    monkeypatch.setenv("ABSORB_FORMAL_CACHE_KEY", str(tmp_path / "state" / "cache-key"))
    monkeypatch.setattr(props, "_proved", {})
    return tmp_path / "cache"


def test_properties_are_proved_once_then_read_back_equal(cache, monkeypatch):
    act = simple("gelu_tanh")
    first = props.properties(act)
    [entry] = cache.glob("properties-*.json")
    monkeypatch.setattr(props, "_proved", {})

    def no_sympy(self):
        raise AssertionError("re-proved although cached")

    monkeypatch.setattr(props._Prover, "run", no_sympy)
    again = props.properties(act)
    assert again == first and again.lemmas == first.lemmas
    assert again.odd_linear == first.odd_linear and again.names() == first.names()
    assert entry.name.startswith("properties-" + diskcache.code_key(
        "decide/lemmas.py", "model/activations.py", libraries=("sympy",)))


@pytest.mark.parametrize("content", ["not json", "{}", '{"even": true}', "[1, 2]"])
def test_a_corrupt_entry_is_ignored_and_reproved(cache, content):
    act = simple("relu")
    truth = props.properties(act)
    [entry] = cache.glob("properties-*.json")
    entry.write_text(content, encoding="utf-8")
    props._proved.clear()
    assert props.properties(act) == truth


def test_a_wrongly_typed_entry_is_ignored(cache):
    act = simple("tanh")
    truth = props.properties(act)
    [entry] = cache.glob("properties-*.json")
    entry.write_text(entry.read_text().replace('"bounded": true', '"bounded": 1'))
    props._proved.clear()
    assert props.properties(act) == truth


def test_each_activation_has_its_own_entry(cache):
    for name in ("relu", "gelu", "silu"):
        props.properties(simple(name))
    assert len(list(cache.glob("properties-*.json"))) == 3


def test_the_key_is_the_code_and_the_library_versions():
    from pathlib import Path

    here = Path(diskcache.__file__).resolve().parent.parent  # the package's root
    h = hashlib.sha256(sys.version.encode())
    h.update(b"decide/lemmas.py\0" + (here / "decide/lemmas.py").read_bytes() + b"\0")
    assert diskcache.code_key("decide/lemmas.py") == h.hexdigest()[:20]
    assert diskcache.code_key("decide/lemmas.py") != diskcache.code_key("model/activations.py")
    assert diskcache.code_key("decide/lemmas.py", libraries=("sympy",)) != \
        diskcache.code_key("decide/lemmas.py")


@pytest.mark.parametrize("value", ["off", "0", "OFF", ""])
def test_the_cache_can_be_turned_off(monkeypatch, value):
    monkeypatch.setenv(diskcache.ENV, value)
    assert diskcache.folder() is None and diskcache.entry("x", "y") is None


def test_the_parser_tables_are_cached_and_parse_the_same(cache):
    text = "block R { activation relu dim 2 width 1 up = [[1, 0]] down = [[1], [0]] }\n"
    parse.parser.cache_clear()
    try:
        built = parse.parser().parse(text)
        assert list(cache.glob("lark-*.cache"))
        parse.parser.cache_clear()
        loaded = parse.parser().parse(text)
        assert loaded == built
    finally:
        parse.parser.cache_clear()


def test_library_versions_are_read_as_importlib_metadata_reads_them():
    """The cache key's library versions come from the dist-info folder names (no
    importlib.metadata import at start-up): the same versions."""
    from importlib import metadata

    from absorb_formal.model import diskcache

    for library in ("sympy", "lark", "numpy", "python-flint"):
        assert diskcache._version(library) == metadata.version(library)
    assert diskcache._version("no-such-library-here") == "absent"


@pytest.mark.parametrize("mode", [0o777, 0o770, 0o722])
def test_a_folder_others_can_write_is_not_used(cache, mode):
    """Anyone who can write the folder could plant an entry (a false property would make the
    prover print a wrong verdict, which `check` would then reject): such a folder is not
    used, and properties are proved afresh."""
    cache.mkdir(mode=0o700)
    assert diskcache.folder() == cache
    cache.chmod(mode)
    assert diskcache.folder() is None
