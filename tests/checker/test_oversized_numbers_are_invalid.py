"""Numbers longer than Python converts (sys.get_int_max_str_digits, 4300 digits by default)
in a document `check` reads: the document is invalid with a short reason, never a traceback —
a JSON integer anywhere in it, a rational string of the certificate, an integer in the header
of a weight file it names."""

from __future__ import annotations

import json
import struct
import subprocess
import sys
from pathlib import Path

import pytest

import absorb_formal
from absorb_formal.checker.readers.files import FileError, read_array

from ..conftest import ROOT

LIMIT = sys.get_int_max_str_digits()
pytestmark = pytest.mark.skipif(LIMIT == 0, reason="no digit limit: every integer converts")
LONG = "7" * (LIMIT + 700)  # more digits than Python converts
SPEC = """\
block L { activation leaky_relu(1/10) dim 1 width 1 up = [[1]] down = [[-10/11]] }
claim L is absorbable
"""


@pytest.fixture
def honest(cli, tmp_path) -> Path:
    """A valid certificate (its spec beside it)."""
    spec = tmp_path / "leaky.mlp"
    spec.write_text(SPEC, encoding="utf-8")
    assert cli("--certificates", tmp_path / "certs", spec).code == 0
    path = tmp_path / "certs" / "leaky.mlp.2.json"
    [result] = absorb_formal.check(path)
    assert result.status == "valid", result.reason
    return path


def with_long_integer(honest: Path, where: str) -> Path:
    """The honest document with a JSON integer of LONG's digits in place of a field."""
    doc = json.loads(honest.read_text(encoding="utf-8"))
    marker = 123454321
    if where == "line":
        doc["line"] = marker
    elif where == "certificate width":
        doc["certificate"]["width"] = marker
    elif where == "negative, in a list":
        doc["certificate"]["layers"][0]["up"] = [[-marker]]
    text = str(marker) if where == "whole document" else json.dumps(doc)
    path = honest.with_name("long.json")
    path.write_text(text.replace(str(marker), LONG), encoding="utf-8")
    assert LONG in path.read_text(encoding="utf-8")
    return path


@pytest.mark.parametrize("where", ["line", "certificate width", "negative, in a list",
                                   "whole document"])
def test_a_json_integer_beyond_the_digit_limit_makes_the_document_invalid(cli, honest, where):
    path = with_long_integer(honest, where)
    reason = f"a JSON integer of more than {LIMIT} digits"
    [result] = absorb_formal.check(path)
    assert result.status == "invalid" and reason in result.reason
    run = cli("check", path)
    assert run.code == 1 and run.err == ""
    line, count = run.out.splitlines()
    assert line.startswith(f"{path}: invalid") and line.endswith(reason)
    assert count.endswith("0 valid, 1 invalid, 0 stale, 0 unchecked")


def test_the_command_prints_one_line_and_no_traceback(honest):
    path = with_long_integer(honest, "line")
    run = subprocess.run([sys.executable, "-m", "absorb_formal", "check", str(path)],
                         cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert run.returncode == 1 and "Traceback" not in run.stdout + run.stderr
    assert run.stdout.splitlines()[0] == (f"{path}: invalid — unreadable certificate: "
                                          f"ValueError: a JSON integer of more than {LIMIT} "
                                          "digits")


@pytest.mark.parametrize("entry", [f"-{LONG}", f"1/{LONG}", f"{LONG}/3"])
def test_a_rational_string_beyond_the_digit_limit_makes_the_document_invalid(cli, honest,
                                                                            entry):
    """The witness's up weight, a string: its numerator or denominator too long to convert."""
    doc = json.loads(honest.read_text(encoding="utf-8"))
    doc["certificate"]["layers"][0]["up"] = [[entry]]
    path = honest.with_name("long.json")
    path.write_text(json.dumps(doc), encoding="utf-8")
    reason = f"a rational of more than {LIMIT} digits"
    [result] = absorb_formal.check(path)
    assert result.status == "invalid" and result.reason.endswith(reason)
    run = cli("check", path)
    assert run.code == 1 and run.err == "" and run.out.splitlines()[0].endswith(reason)


def test_a_weight_file_header_with_a_long_integer_is_refused_with_a_reason(tmp_path):
    header = ('{"w": {"dtype": "F64", "shape": [1], "data_offsets": [0, 8], "x": '
              + LONG + "}}").encode()
    path = tmp_path / "w.safetensors"
    path.write_bytes(struct.pack("<Q", len(header)) + header + struct.pack("<d", 1.0))
    with pytest.raises(FileError, match=f"a JSON integer of more than {LIMIT} digits"):
        read_array(path, "w")
