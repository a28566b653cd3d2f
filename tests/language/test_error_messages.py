"""Every error kind of docs/language.md ("Errors") and every syntax failure:
a positioned message `FILE:LINE:COL: error: ...`, the source line, a caret, exit 2."""

from __future__ import annotations

import re

import numpy as np
import pytest

from absorb_formal.language import SpecError, load_text

OK_BLOCK = "block R {\n  activation relu\n  dim 2\n  width 2\n}\n"

# (name, spec text, line, column, fragment of the message)
CASES = [
    ("unknown activation", "block R {\n  activation reluu\n  dim 2 width 2\n}", 2, 14,
     "unknown activation 'reluu'"),
    ("param on wrong activation", "block R { activation relu(2) dim 2 width 2 }", 1, 22,
     "takes no argument"),
    ("leaky_relu without slope", "block R { activation leaky_relu dim 2 width 2 }", 1, 22,
     "needs its argument"),
    ("power of non-relu", "block R { activation gelu^2 dim 2 width 2 }", 1, 22, "only relu^k"),
    ("relu^k with k < 1", "block R { activation relu^0 dim 2 width 2 }", 1, 27,
     "must be at least 1"),
    ("relu^k non-integer", "block R { activation relu^1/2 dim 2 width 2 }", 1, 27,
     "must be an integer"),
    ("dim < 1", "block R { activation relu dim 0 width 2 }", 1, 31, "dim must be at least 1"),
    ("width < 1", "block R {\n activation relu\n dim 2\n width -3\n}", 4, 8,
     "width must be at least 1"),
    ("depth < 1", "block R { activation relu dim 2 width 2 depth 0 }", 1, 47,
     "depth must be at least 1"),
    ("dim not an integer", "block R { activation relu dim 2.5 width 2 }", 1, 31,
     "dim must be an integer"),
    ("missing dim", "block R { activation relu width 2 }", 1, 7, "has no 'dim'"),
    ("missing activation", "block R { dim 2 width 2 }", 1, 7, "has no 'activation'"),
    ("field twice", "block R { activation relu dim 2 dim 3 width 2 }", 1, 33, "given twice"),
    ("shape mismatch up",
     "block R { activation relu dim 2 width 3\n up = [[1, 0], [0, 1]]\n"
     " down = [[1, 0, 0], [0, 1, 0]] }", 2, 7, "'up' must be 3×2"),
    ("shape mismatch down",
     "block R { activation relu dim 2 width 1\n up = [[1, 0]]\n down = [[1, 0]] }", 3, 9,
     "'down' must be 2×1"),
    ("skip shape", "block R { activation relu dim 2 width 1 skip [[1]] }", 1, 46,
     "'skip' must be 2×2"),
    ("ragged rows",
     "block R { activation relu dim 2 width 2\n up = [[1, 0], [0, 1, 2]]\n"
     " down = [[1, 0], [0, 1]] }", 2, 16, "ragged rows"),
    ("gate on ungated",
     "block R { activation relu dim 1 width 1\n up = [[1]]\n down = [[1]]\n gate = [[1]] }",
     4, 2, "'gate' is only for gated"),
    ("gate missing on gated",
     "block R { activation swiglu dim 1 width 1\n up = [[1]]\n down = [[1]] }", 1, 1,
     "needs 'gate'"),
    ("some but not all weights", "block R { activation relu dim 1 width 1\n up = [[1]] }",
     1, 1, "some but not all weights"),
    ("layer missing",
     "block R { activation relu dim 1 width 1 depth 2\n layer 1 { up = [[1]] down = [[1]] } }",
     1, 7, "missing layer 2"),
    ("layer repeated",
     "block R { activation relu dim 1 width 1 depth 2\n layer 1 { up = [[1]] down = [[1]] }\n"
     " layer 1 { up = [[1]] down = [[1]] }\n layer 2 { up = [[1]] down = [[1]] } }", 3, 2,
     "layer 1 is given twice"),
    ("layer beyond depth",
     "block R { activation relu dim 1 width 1 depth 1\n layer 1 { up = [[1]] down = [[1]] }\n"
     " layer 2 { up = [[1]] down = [[1]] } }", 3, 8, "beyond the block's depth 1"),
    ("weights outside layers at depth 2",
     "block R { activation relu dim 1 width 1 depth 2\n up = [[1]] down = [[1]] }", 2, 2,
     "gives its weights in sections"),
    ("name declared twice", OK_BLOCK + "block R { activation relu dim 1 width 1 }", 6, 7,
     "already declared at line 1"),
    ("name used before its block", "claim R is never absorbable\n" + OK_BLOCK, 1, 7,
     "used before it is declared"),
    ("undefined name", OK_BLOCK + "claim Q is never absorbable", 6, 7,
     "no block named 'Q'"),
    ("is absorbable on a family", OK_BLOCK + "claim R is absorbable", 6, 12,
     "'is absorbable' is about a concrete block"),
    ("is not absorbable on a family", OK_BLOCK + "claim R is not absorbable", 6, 12,
     "is about a concrete block"),
    ("never on a concrete block",
     "block R { activation relu dim 1 width 1 up = [[1]] down = [[1]] }\n"
     "claim R is never absorbable", 2, 12, "'is never absorbable' is about families"),
    ("equals different dim",
     "block A { activation relu dim 1 width 1 up = [[1]] down = [[1]] }\n"
     "block B { activation relu dim 2 width 1 up = [[1, 1]] down = [[1], [1]] }\n"
     "claim A equals B", 3, 16, "different dim: 1 and 2"),
    ("equals on a family", OK_BLOCK +
     "block B { activation relu dim 2 width 1 up = [[1, 1]] down = [[1], [1]] }\n"
     "claim R equals B", 7, 7, "'R' is a family"),
    ("min width on a family", OK_BLOCK + "claim min width of R is 3", 6, 20,
     "'R' is a family"),
    ("at width < 1", OK_BLOCK + "claim R is never absorbable at width 0", 6, 38,
     "a width must be at least 1"),
    ("division by zero", "block R { activation leaky_relu(1/0) dim 1 width 1 }", 1, 33,
     "division by zero"),
    ("huge number", "block R { activation leaky_relu(" + "9" * 5000 + ") dim 1 width 1 }", 1, 33,
     "more than 4000 significant digits"),
    ("huge exponent", "block R { activation leaky_relu(1e999999999) dim 1 width 1 }", 1, 33,
     "exponent"),
    ("syntax: unexpected token", "block R { activation relu dim 2 widht 2 }", 1, 33,
     "unexpected 'widht'"),
    ("syntax: unexpected character", "block R { activation relu dim 2 width 2 } @", 1, 43,
     "unexpected character '@'"),
    ("syntax: end of file", "block R {\n activation relu", 2, 17, "unexpected end of file"),
    ("keyword as block name", "block claim { activation relu dim 1 width 1 }", 1, 7,
     "'claim' is a keyword"),
    ("keyword as claimed name", "claim width is never absorbable", 1, 7,
     "'width' is a keyword"),
    ("syntax: trailing comma", "block R { activation relu dim 1 width 1 up = [[1,]] }", 1, 50,
     "unexpected ']'"),
    ("syntax: deep nesting", "block R { skip " + "[" * 10000 + "1" + "]" * 10000 + " }", 1, 18,
     "unexpected '['"),
    ("syntax: NUL byte", "block R {\x00}", 1, 10, "unexpected character"),
]


# ---- hints: did you mean, look-alike characters, blocks left open ---------------------

BLOCK = "block R {\n  activation relu\n  dim 2\n  width 2\n"

# (name, spec text, line, column, the whole message or a fragment that must be in it)
HINTS = [
    ("activation typo", "block R {\n  activation reluu\n  dim 2 width 2\n}", 2, 14,
     "unknown activation 'reluu': did you mean 'relu'? (known: "),
    ("activation case", "block R { activation GELU dim 2 width 2 }", 1, 22,
     "unknown activation 'GELU': did you mean 'gelu'?"),
    ("activation far from any", "block R { activation foo dim 2 width 2 }", 1, 22,
     "unknown activation 'foo' (known: "),
    ("field typo", "block R {\n  activation relu\n  dim 2 widht 2\n}", 3, 9,
     "unexpected 'widht': did you mean 'width'? (expected 'activation'"),
    ("field typo: activation", "block R { actvation relu dim 1 width 1 }", 1, 11,
     "did you mean 'activation'?"),
    ("weight typo", BLOCK + "  up_bais = [1, 2]\n}", 5, 3,
     "unexpected 'up_bais': did you mean 'up_bias'?"),
    ("keyword glued to more letters", BLOCK + "  widthh 2\n}", 5, 3,
     "unexpected 'widthh': did you mean 'width'?"),
    ("claim word typo", "block R { activation relu dim 2 width 2 }\nclaim R is absorbabel", 2, 12,
     "unexpected 'absorbabel': did you mean 'absorbable'?"),
    ("modality typo", "block R { activation relu dim 2 width 2 }\nclaim R is nevr absorbable",
     2, 12, "did you mean 'never'?"),
    ("block name typo", "block Res { activation relu dim 2 width 2 }\nquery Rse", 2, 7,
     "no block named 'Rse' is declared: did you mean 'Res'?"),
    ("unicode minus", BLOCK + "  skip \u22121\n}", 5, 8,
     "unexpected character '\u2212' (U+2212 MINUS SIGN); type '-' (ASCII hyphen-minus)"),
    ("en dash", "block R { activation leaky_relu(\u20131/2) dim 1 width 1 }", 1, 33,
     "(U+2013 EN DASH); type '-'"),
    ("multiplication sign", "block R { activation relu dim 1 width 1\n up = [[3\u00d710]]\n"
     " down = [[1]] }", 2, 10, "(U+00D7 MULTIPLICATION SIGN); type the number itself"),
    ("middle dot", "block R { activation relu dim 1 width 1\n up = [[0\u00b75]]\n"
     " down = [[1]] }", 2, 10, "(U+00B7 MIDDLE DOT); type '.' for a decimal point"),
    ("non-breaking space", "block R { activation relu dim 2\u00a0width 2 }", 1, 32,
     "(U+00A0 NO-BREAK SPACE); type an ordinary space instead"),
    ("curly quotes",
     'block R { activation relu dim 1 width 1\n up = load(\u201cw.npz\u201d, "up")\n'
     " down = [[1]] }", 2, 12, "(U+201C LEFT DOUBLE QUOTATION MARK); type '\"'"),
    ("single quotes", "block R { activation relu dim 1 width 1\n up = load('w.npz', 'up')\n"
     " down = [[1]] }", 2, 12, "(U+0027 APOSTROPHE); type '\"' (ASCII double quote)"),
    ("other non-ASCII", "block R { activation relu dim 1 width 1 } \u00e9", 1, 43,
     "(U+00E9 LATIN SMALL LETTER E WITH ACUTE): spec files use ASCII outside comments"),
    ("block left open at a claim", BLOCK + "\nclaim R is never absorbable\n", 6, 1,
     "block 'R' opened at 1:1 is not closed: expected '}' before 'claim'"),
    ("block left open at a block", "# two blocks\n  block A { activation relu dim 1 width 1\n"
     "block B { activation relu dim 1 width 1 }", 3, 1,
     "block 'A' opened at 2:3 is not closed: expected '}' before 'block'"),
    ("block left open at end of file", "block R {\n activation relu", 2, 17,
     "unexpected end of file: block 'R' opened at 1:1 is not closed (a '}' is missing)"),
    ("end of file inside a matrix: the ']' is missing, not the block's '}'",
     "block R { activation relu dim 1 width 1\n up = [[1]", 2, 11,
     "unexpected end of file; expected ',' or ']'"),
    ("expectation typo", "block R { activation relu dim 2 width 2 }\n"
     "claim R is never absorbable  # expect: refute", 2, 40,
     "unknown outcome 'refute' after '# expect:': did you mean 'refuted'? (known: "),
    ("layer left open", "block R { activation relu dim 1 width 1 depth 2\n"
     " layer 1 { up = [[1]] down = [[1]]\n layer 2 { up = [[1]] down = [[1]] } }", 3, 2,
     "layer 1 of block 'R' opened at 2:2 is not closed: expected '}' before 'layer'"),
    ("braces in comments and strings are not counted",
     "block R { # {\n activation relu dim 1 width 1\n up = load(\"{.npz\", \"k\")", 3, 25,
     "block 'R' opened at 1:1 is not closed"),
    ("a power written as in Python", "block R {\n  activation relu**2\n  dim 2 width 2\n}",
     2, 18, "unexpected '**': a power of an activation is written with '^', as relu^2"),
    ("a power with spaces", "block R { activation relu ** 2 dim 2 width 2 }", 1, 27,
     "written with '^'"),
    ("a superscript power", "block R { activation relu\u00b2 dim 2 width 2 }", 1, 26,
     "(U+00B2 SUPERSCRIPT TWO); type '^2'"),
    ("a product", "block R { activation relu dim 2*3 width 2 }", 1, 32,
     "unexpected character '*': the language has no multiplication"),
    ("lower-case transpose of a load", BLOCK + '  up = load("w.npz", "up").t\n}', 5, 27,
     "unexpected '.t': the transpose is written '.T' (capital T"),
    ("torch's transpose of a matrix", "block R { activation relu dim 1 width 1\n"
     " up = [[1]].t()\n down = [[1]] }", 2, 12, "unexpected '.t()': the transpose is written"),
    ("numpy's transpose", "block R { activation relu dim 1 width 1\n"
     " up = [[1]].transpose\n down = [[1]] }", 2, 12, "unexpected '.transpose'"),
]


@pytest.mark.parametrize(("text", "line", "column", "fragment"),
                         [c[1:] for c in CASES + HINTS],
                         ids=[c[0] for c in CASES + HINTS])
def test_error_is_positioned(tmp_path, text, line, column, fragment):
    with pytest.raises(SpecError) as caught:
        load_text(text, "s.mlp", tmp_path)
    positions = [(d.pos.line, d.pos.column, d.message) for d in caught.value.diagnostics]
    assert any((ln, col) == (line, column) and fragment in msg for ln, col, msg in positions), \
        positions


@pytest.mark.parametrize("case", CASES[:8], ids=[c[0] for c in CASES[:8]])
def test_cli_prints_file_line_col_source_and_caret(cli, write_spec, case):
    _, text, line, column, fragment = case
    path = write_spec(text)
    run = cli(path)
    assert run.code == 2
    first, source, caret = run.err.splitlines()[:3]
    assert first.startswith(f"{path}:{line}:{column}: error: ")
    assert fragment in first
    assert caret.index("^") - 4 == column - 1
    assert source.strip()
    assert "Traceback" not in run.err + run.out


def test_every_semantic_error_in_a_file_is_reported(tmp_path):
    text = ("block A { activation foo dim 2 width 2 }\n"
            "block B { activation relu dim 0 width 2 }\n"
            "claim C is never absorbable\n")
    with pytest.raises(SpecError) as caught:
        load_text(text, "s.mlp", tmp_path)
    assert [d.pos.line for d in caught.value.diagnostics] == [1, 2, 3]


def test_expectation_errors_are_reported_with_the_other_errors(tmp_path):
    """A `# expect:` typo is read from the text alone, so a file with other errors reports it
    too, not only once the rest is fixed."""
    text = ("block B { activation relu dim 0 width 2 }\n"
            "claim B is never absorbable   # expect: refute\n")
    with pytest.raises(SpecError) as caught:
        load_text(text, "s.mlp", tmp_path)
    found = [(d.pos.line, d.message) for d in caught.value.diagnostics]
    assert [line for line, _ in found] == [1, 2], found
    assert "did you mean 'refuted'" in found[1][1]


@pytest.mark.parametrize(("closer", "hinted"), [("}", True), ("  }", False)])
def test_a_layer_missing_its_brace_is_named(tmp_path, closer, hinted):
    """The '}' aligned with 'block' closed layer 2 instead: the message says so; a '}'
    indented like a layer's closes it as written, and no hint is given."""
    text = ("block G { activation relu dim 1 width 1 depth 2\n"
            "  layer 1 { up = [[1]] down = [[1]] }\n"
            "  layer 2 { up = [[1]] down = [[1]]\n"
            f"{closer}\n"
            "claim G is absorbable\n")
    with pytest.raises(SpecError) as caught:
        load_text(text, "s.mlp", tmp_path)
    [message] = [d.message for d in caught.value.diagnostics]
    assert message.startswith("block 'G' opened at 1:1 is not closed"), message
    hint = f"(the '}}' at 4:{len(closer)} closes layer 2, opened at 3:3: is that layer's"
    assert (hint in message) == hinted, message


def test_an_error_stops_the_whole_file_but_not_the_others(cli, tmp_path):
    (tmp_path / "a.mlp").write_text("block R { activation relu dim 0 width 1 }\n"
                                    "block F { activation relu dim 2 width 2 }\n"
                                    "claim F is never absorbable\n")
    (tmp_path / "b.mlp").write_text("block F { activation relu dim 2 width 2 }\n"
                                    "claim F is never absorbable\n")
    run = cli(tmp_path)
    assert run.code == 2
    assert "a.mlp:1:31: error" in run.err
    assert [line.split(":")[0] for line in run.out.splitlines()[:-1]] == [str(tmp_path / "b.mlp")]


def test_invalid_utf8_is_positioned(cli, tmp_path):
    path = tmp_path / "bad.mlp"
    path.write_bytes(b"block R {\n  activation \xff relu\n}")
    run = cli(path)
    assert run.code == 2
    assert re.match(rf"{re.escape(str(path))}:2:14: error: invalid UTF-8 byte 0xff", run.err)


# ---- load(...) ----------------------------------------------------------------

def _spec_loading(key: str = "up", file: str = "w.npz") -> str:
    return ("block R {\n activation relu dim 2 width 3\n"
            f' up = load("{file}", "{key}")\n down = [[1, 0, 0], [0, 1, 0]]\n}}\n')


@pytest.mark.parametrize(("arrays", "key", "file", "fragment"), [
    ({"up": np.ones((3, 2))}, "up", "missing.npz", "does not exist"),
    ({"up": np.ones((3, 2))}, "nope", "w.npz", "has no array 'nope'"),
    ({"up": np.ones((2, 3))}, "up", "w.npz", "'up' must be 3×2 (width × dim), got 2×3"),
    ({"up": np.array([[1.0, np.nan], [0, 1], [1, 1]])}, "up", "w.npz", "non-finite"),
    ({"up": np.array([[1.0, np.inf], [0, 1], [1, 1]])}, "up", "w.npz", "non-finite"),
    ({"up": np.ones(6)}, "up", "w.npz", "not a matrix"),
    ({"up": np.array([["a", "b"]] * 3)}, "up", "w.npz", "not real numbers"),
], ids=["missing file", "missing key", "wrong shape", "nan", "inf", "1-d", "strings"])
def test_load_errors_are_positioned(tmp_path, arrays, key, file, fragment):
    np.savez(tmp_path / "w.npz", **arrays)
    with pytest.raises(SpecError) as caught:
        load_text(_spec_loading(key, file), "s.mlp", tmp_path)
    [diag] = caught.value.diagnostics
    assert (diag.pos.line, diag.pos.column) == (3, 7)
    assert fragment in diag.message


def test_corrupt_npz_is_an_error_not_a_crash(tmp_path):
    (tmp_path / "w.npz").write_bytes(b"PK\x03\x04 definitely not a zip archive")
    with pytest.raises(SpecError) as caught:
        load_text(_spec_loading(), "s.mlp", tmp_path)
    assert "cannot read 'w.npz'" in caught.value.diagnostics[0].message


@pytest.mark.parametrize("payload", [b"", b"\x10\x00\x00\x00\x00\x00\x00\x00{bad json",
                                     b"\xff" * 8 + b"{}"])
def test_corrupt_safetensors_is_an_error_not_a_crash(tmp_path, payload):
    (tmp_path / "w.safetensors").write_bytes(payload)
    with pytest.raises(SpecError) as caught:
        load_text(_spec_loading(file="w.safetensors"), "s.mlp", tmp_path)
    assert (caught.value.diagnostics[0].pos.line, caught.value.diagnostics[0].pos.column) == (3, 7)


def test_no_hint_when_nothing_is_close(tmp_path):
    with pytest.raises(SpecError) as caught:
        load_text("block R { activation relu dim 2 qqqq 2 }", "s.mlp", tmp_path)
    [diag] = caught.value.diagnostics
    assert "did you mean" not in diag.message
    assert diag.message.startswith("unexpected 'qqqq'; expected ")


@pytest.mark.parametrize("case", [HINTS[0], HINTS[3], HINTS[9], HINTS[18]],
                         ids=["activation", "field", "unicode minus", "open block"])
def test_cli_hint_is_positioned_with_exit_2(cli, write_spec, case):
    _, text, line, column, fragment = case
    path = write_spec(text)
    run = cli(path)
    assert run.code == 2
    first, _source, caret = run.err.splitlines()[:3]
    assert first == f"{path}:{line}:{column}: error: " + first.split(": error: ", 1)[1]
    assert fragment in first
    assert caret.index("^") - 4 == column - 1
    assert "Traceback" not in run.err + run.out
