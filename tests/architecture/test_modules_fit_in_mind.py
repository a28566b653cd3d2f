"""The package's shape, so that it stays readable: no module over 700 lines, no module
docstring longer than one screen (40 lines), at most 8 modules at the package's top level
(the rest lives in packages named after the pipeline)."""

from __future__ import annotations

import ast

import pytest

from ..conftest import ROOT

PACKAGE = ROOT / "absorb_formal"
MODULES = sorted(PACKAGE.rglob("*.py"))
MAX_LINES, MAX_DOCSTRING, MAX_TOP_LEVEL = 700, 40, 8
PIPELINE = {"model", "language", "weights", "decide", "generic", "numeric", "certify",
            "checker", "scanner", "export", "cli"}


def docstring_lines(source: str) -> int:
    body = ast.parse(source).body
    if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) \
            and isinstance(body[0].value.value, str):
        return body[0].end_lineno - body[0].lineno + 1
    return 0


@pytest.mark.parametrize("path", MODULES, ids=lambda p: p.relative_to(PACKAGE).as_posix())
def test_a_module_fits_in_mind(path):
    source = path.read_text(encoding="utf-8")
    lines = len(source.splitlines())
    assert lines <= MAX_LINES, f"{lines} lines: split it along its seams"
    assert docstring_lines(source) <= MAX_DOCSTRING, "a docstring longer than one screen"


def test_the_top_level_is_small_and_the_packages_are_the_pipeline():
    top = sorted(p.name for p in PACKAGE.glob("*.py"))
    assert len(top) <= MAX_TOP_LEVEL, top
    packages = {p.name for p in PACKAGE.iterdir() if (p / "__init__.py").is_file()}
    assert packages == PIPELINE


def test_the_rules_are_counted_on_planted_sources():
    assert docstring_lines('"""one\ntwo\nthree"""\nx = 1\n') == 3
    assert docstring_lines("x = 1\n") == 0
