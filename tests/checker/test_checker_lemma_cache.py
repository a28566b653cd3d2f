"""The checker's own lemma entries on disk (checker/lemmas/cache.py): a first check proves its
lemmas and writes them, a later one reads them (and loads no sympy), an entry that is not
sound is ignored and the lemma proved again, and the entries are named by the checker's code."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from fractions import Fraction
from pathlib import Path

import pytest

from absorb_formal.checker.lemmas import cache as proved
from absorb_formal.checker.lemmas import proofs as lemma_proofs
from absorb_formal.checker.lemmas import relied as lemmas

from ..conftest import ROOT

GELU_TANH_FUNCTIONAL = ROOT / "proofs" / "large" / "bf16_keys.mlp.12.json"  # gelu_tanh, O(a)+N
GELU_TANH = {"coeffs": [], "gated": False, "kind": "gelu_tanh", "name": "gelu_tanh",
             "param": None, "power": None}


def check_in_a_fresh_process(cache: Path) -> tuple[str, bool]:
    """(status, whether sympy was loaded) of `check_file` on the gelu_tanh certificate."""
    code = ("import sys\nfrom pathlib import Path\n"
            "from absorb_formal.checker.document import check_file\n"
            f"verdict, _ = check_file(Path({str(GELU_TANH_FUNCTIONAL)!r}))\n"
            "print(verdict.status, verdict.reason[:80])\nprint('sympy' in sys.modules)")
    run = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True,
                         text=True, env={"ABSORB_FORMAL_CACHE": str(cache), "PATH": "",
                                         "ABSORB_FORMAL_CACHE_KEY": str(key_file(cache)),
                                         "PYTHONPATH": str(ROOT)}, check=True)
    status, loaded = run.stdout.strip().splitlines()
    return status.split()[0], loaded == "True"


def key_file(cache: Path) -> Path:
    """Where a test keeps the secret that signs the entries of `cache` (beside it, not in it)."""
    return cache.parent / "state" / "cache-key"


def entries(cache: Path) -> list[Path]:
    return sorted(cache.glob("checker-lemma-*.json"))


@pytest.fixture
def cache(tmp_path, monkeypatch):
    """The cache on, in a temporary folder; the lemmas' results in memory forgotten."""
    folder = tmp_path / "cache"
    monkeypatch.setenv(proved.ENV, str(folder))
    monkeypatch.setenv("ABSORB_FORMAL_CACHE_KEY", str(key_file(folder)))

    def forget() -> None:
        lemmas._proved.cache_clear()
        for name in ("holds", "odd_slope", "reflection", "value_at_zero", "degree",
                     "relu_multiple"):
            getattr(lemma_proofs, name).cache_clear()

    forget()
    yield folder
    forget()


def test_a_cold_check_proves_and_writes_a_warm_one_reads_without_sympy(tmp_path):
    cache = tmp_path / "cache"
    assert check_in_a_fresh_process(cache) == ("valid", True)  # empty: sympy proves
    written = entries(cache)
    assert len(written) >= 3  # O(a), N(a), zero, An for gelu_tanh
    assert all(json.loads(p.read_text())["code"] == proved.code() for p in written)
    assert check_in_a_fresh_process(cache) == ("valid", False)  # read back: no sympy
    assert entries(cache) == written


def test_corrupted_entries_are_ignored_and_proved_again(tmp_path):
    cache = tmp_path / "cache"
    check_in_a_fresh_process(cache)
    written = entries(cache)
    for path in written:
        path.write_bytes(b"\x00{not json")
    assert check_in_a_fresh_process(cache) == ("valid", True)  # proved again
    assert all(json.loads(p.read_text())["hmac"] for p in entries(cache))  # and rewritten
    assert check_in_a_fresh_process(cache) == ("valid", False)


def test_an_entry_whose_value_was_changed_is_not_believed(cache):
    assert lemmas.holds(GELU_TANH, "N", Fraction(1, 2))
    [path] = entries(cache)
    entry = json.loads(path.read_text())
    assert entry["value"] is True
    entry["value"] = False  # its HMAC no longer matches
    path.write_text(json.dumps(entry))
    lemmas._proved.cache_clear()
    assert proved.read(entry["call"]) is proved.MISSING
    assert lemmas.holds(GELU_TANH, "N", Fraction(1, 2))  # re-proved, not read
    assert json.loads(path.read_text())["value"] is True


@pytest.mark.parametrize("change", ["call", "code", "type", "fraction", "field"])
def test_an_entry_that_is_not_sound_is_missing(cache, change):
    assert lemmas.odd_slope(GELU_TANH) == Fraction(1, 2)
    [path] = entries(cache)
    entry = json.loads(path.read_text())
    call = entry["call"]
    assert proved.read(call) == Fraction(1, 2)
    if change == "call":  # another call's entry under this call's name
        entry["call"] = ["odd_slope", lemmas.key({**GELU_TANH, "kind": "gelu"})]
    elif change == "code":  # written by other checker code
        entry["code"] = "0" * 24
    elif change == "type":  # a value odd_slope never returns
        entry["value"] = True
    elif change == "fraction":  # not a Fraction's own text
        entry["value"] = "2/4"
    else:
        entry["extra"] = 1
    if change != "field":  # a digest that matches the changed entry
        entry["hmac"] = proved._digest(entry["call"], entry["value"])
    path.write_text(json.dumps(entry))
    assert proved.read(call) is proved.MISSING


def test_values_round_trip_and_other_types_are_refused():
    for function, value in [("holds", True), ("holds", False), ("odd_slope", Fraction(-3, 7)),
                            ("odd_slope", None), ("value_at_zero", Fraction(1, 2)),
                            ("relu_multiple", Fraction(2)), ("degree", 2), ("degree", None),
                            ("reflection", (Fraction(1), Fraction(0), -1)),
                            ("reflection", None)]:
        stored = json.loads(json.dumps(proved.encode(value)))
        assert proved.decode(function, stored) == value
    for function, stored in [("holds", 1), ("holds", None), ("odd_slope", 0.5),
                             ("odd_slope", "1/0"), ("odd_slope", " 1/2"), ("degree", True),
                             ("degree", -1), ("degree", "2"), ("reflection", ["1", "0", 2]),
                             ("reflection", ["1", "0"]), ("no such lemma", True)]:
        assert proved.decode(function, stored) is proved.MISSING


def test_the_cache_off_writes_nothing(tmp_path, monkeypatch):
    monkeypatch.setenv(proved.ENV, "off")
    assert proved.folder() is None
    proved.write(["holds", "{}", "E", None], True)
    assert proved.read(["holds", "{}", "E", None]) is proved.MISSING


def test_entries_are_named_by_every_module_of_the_checker():
    checker = Path(proved.__file__).resolve().parent.parent
    h = hashlib.sha256(sys.version.encode() + b"\0")
    for module in sorted(checker.rglob("*.py")):
        name = module.relative_to(checker).as_posix()
        h.update(name.encode() + b"\0" + module.read_bytes() + b"\0")
    for library, file in (("sympy", "release.py"), ("mpmath", "__init__.py")):
        h.update(library.encode() + b"\0" + proved._library_file(library, file) + b"\0")
    assert proved.code() == h.hexdigest()[:24]
    # the modules of every sub-package count: the rules, the lemmas, the kernel, the dispatch
    assert {"lemmas/relied.py", "lemmas/proofs.py", "lemmas/cache.py", "dispatch.py",
            "rules/half_activation.py", "kernel/linalg.py"} <= \
        {p.relative_to(checker).as_posix() for p in checker.rglob("*.py")}
    assert proved._library_file("sympy", "release.py") != b"absent"
    assert proved._library_file("no_such_library_here", "x.py") == b"absent"


@pytest.mark.parametrize("mode", [0o777, 0o770, 0o722])
def test_a_folder_others_can_write_is_not_believed(cache, mode):
    """A folder that other users can write (a shared folder named by $ABSORB_FORMAL_CACHE, or
    a cache folder that existed before with a lax mode) could hold a planted entry — here
    'bilinear has a non-polynomial even part', which would let a §8.2 refutation of a
    bilinear block through. Such a folder is not used at all."""
    bilinear = {"coeffs": [], "gated": True, "kind": "identity", "name": "bilinear",
                "param": None, "power": None}
    call = ["holds", lemmas.key(bilinear), "N", "1"]
    cache.mkdir(mode=0o700)
    path = proved._path(call)
    assert path is not None
    path.write_text(json.dumps({"code": proved.code(), "call": call, "value": True,
                                "hmac": proved._digest(call, True)}))
    assert proved.read(call) is True  # a private folder: the entry is believed
    cache.chmod(mode)
    assert proved.folder() is None
    assert proved.read(call) is proved.MISSING
    assert not lemmas.holds(bilinear, "N", 1)  # proved afresh: e = 0 is a polynomial
