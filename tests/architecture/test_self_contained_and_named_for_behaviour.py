"""The repository stands on its own, and its names say what things do.

No module of the package, test, benchmark or generating script reads a path outside the
repository: a path built from `__file__` stays under the repository's root, no string names
a folder beside the repository (the team's shared folder, one level up) or a machine's own
folders (`/work/`, `/home/`), and no test or benchmark reads the user's home folder; no page
names such a folder either.
A fresh clone is all a test needs.

No file name, test name or line of the package, the tests, the benchmarks, the specs or the
docs refers to the project's history (a ticket's number, an inspection's finding codes)
instead of saying what the code does or why.

The package itself may keep its cache in the user's cache folder (model/diskcache.py,
checker/lemmas/cache.py): that is where the tool writes at run time, not a file it is built from.
"""

from __future__ import annotations

import ast
import os
import re
from pathlib import Path

import pytest

from ..conftest import ROOT

PYTHON_FOLDERS = ("absorb_formal", "tests", "benchmarks", "specs", "docs")
OUTSIDE_STRING = re.compile(r"\.\./+shared\b|(?:^|[\s\"'=(])(?:/work|/home|~)/")
OUTSIDE_PAGE = re.compile(r"\.\./+shared\b|(?:^|[\s`(\"'])/work/")  # ~/.cache may be explained
HOME = re.compile(r"\bPath\.home\(|\bexpanduser\(")


def pages() -> list[Path]:
    return [ROOT / "README.md",
            *sorted(path for folder in PYTHON_FOLDERS for path in (ROOT / folder).rglob("*.md"))]


def python_files() -> list[Path]:
    return sorted(path for folder in PYTHON_FOLDERS for path in (ROOT / folder).rglob("*.py"))


def _docstrings(tree: ast.AST) -> set[int]:
    """The ids of the docstring nodes of a module and of its classes and functions."""
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                found.add(id(body[0].value))
    return found


def _path(node: ast.AST, file: Path, bound: dict[str, Path]) -> Path | None:
    """The path an expression built from `__file__` denotes, for `file` where it lies; None
    for anything else."""
    match node:
        case ast.Call(func=ast.Name("Path") | ast.Attribute(attr="Path"),
                      args=[ast.Name("__file__")]):
            return file
        case ast.Call(func=ast.Attribute(attr="dirname"), args=[inner]):
            inner_path = _path(inner, file, bound)
            return None if inner_path is None else inner_path.parent
        case ast.Name("__file__"):
            return file
        case ast.Call(func=ast.Attribute(value=inner, attr="resolve" | "absolute")):
            return _path(inner, file, bound)
        case ast.Attribute(value=inner, attr="parent"):
            inner_path = _path(inner, file, bound)
            return None if inner_path is None else inner_path.parent
        case ast.Subscript(value=ast.Attribute(value=inner, attr="parents"),
                           slice=ast.Constant(int() as k)):
            inner_path = _path(inner, file, bound)
            if inner_path is None:
                return None
            return inner_path.parents[k] if k < len(inner_path.parents) else Path("/")
        case ast.BinOp(left=inner, op=ast.Div(), right=ast.Constant(str() as part)):
            inner_path = _path(inner, file, bound)
            return None if inner_path is None else Path(os.path.normpath(inner_path / part))
        case ast.Name(name):
            return bound.get(name)
    return None


def outside_references(source: str, file: Path, root: Path) -> list[int]:
    """The lines of `source` (the text of `file`, a file under `root`) whose code names a path
    outside `root`: a path built from `__file__` that climbs above it (module-level names bound
    to such paths are followed), or a string, not a docstring, naming a folder beside the
    repository or a machine's own folder. Comments and docstrings may explain the rule."""
    tree = ast.parse(source)
    bound: dict[str, Path] = {}
    for statement in tree.body:
        if isinstance(statement, ast.Assign) and len(statement.targets) == 1 and \
                isinstance(statement.targets[0], ast.Name):
            value = _path(statement.value, file, bound)
            if value is not None:
                bound[statement.targets[0].id] = value
    docstrings = _docstrings(tree)
    lines = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            if id(node) not in docstrings and OUTSIDE_STRING.search(node.value):
                lines.add(node.lineno)
        elif isinstance(node, ast.expr):
            path = _path(node, file, bound)
            if path is not None and not path.is_relative_to(root):
                lines.add(node.lineno)
    return sorted(lines)


def _code(source: str) -> str:
    """`source` with its comments and docstrings blanked (strings in code are kept)."""
    tree = ast.parse(source)
    docstrings = _docstrings(tree)
    lines = source.splitlines()
    for node in ast.walk(tree):
        if id(node) in docstrings:
            for n in range(node.lineno - 1, node.end_lineno or node.lineno):
                lines[n] = ""
    return "\n".join(re.sub(r"#.*", "", line) for line in lines)


def home_references(source: str) -> list[int]:
    """The lines of `source` whose code reads the user's home folder."""
    return [n for n, line in enumerate(_code(source).splitlines(), 1) if HOME.search(line)]


@pytest.mark.parametrize("path", python_files(), ids=lambda p: str(p.relative_to(ROOT)))
def test_code_reads_nothing_outside_the_repository(path):
    source = path.read_text(encoding="utf-8")
    found = outside_references(source, path, ROOT)
    assert not found, f"{path.relative_to(ROOT)}:{found} names a path outside the repository"
    if path.relative_to(ROOT).parts[0] != "absorb_formal":
        found = home_references(source)
        assert not found, f"{path.relative_to(ROOT)}:{found} reads the user's home folder"


@pytest.mark.parametrize("page", pages(), ids=lambda p: str(p.relative_to(ROOT)))
def test_pages_name_no_folder_outside_the_repository(page):
    text = page.read_text(encoding="utf-8")
    found = [n for n, line in enumerate(text.splitlines(), 1) if OUTSIDE_PAGE.search(line)]
    assert not found, f"{page.relative_to(ROOT)}:{found} names a folder outside the repository"


def test_a_path_climbing_out_of_the_repository_is_found():
    # The planted paths are written in pieces so that this file does not name them itself.
    beside = "..{0}shared{0}examples".format("/")
    source = "\n".join([
        f'"""Docstrings may explain why {beside} is not read."""',
        "from pathlib import Path",
        "ROOT = Path(__file__).resolve().parents[1]",
        "INSIDE = ROOT / 'specs' / 'examples'",
        "OUTSIDE = ROOT.parent / 'shared'",  # line 5
        f"BESIDE = ROOT / '{beside}'",  # line 6
        "UP = Path(__file__).resolve().parents[3]",  # line 7
        "ALSO_UP = Path(__file__).parent.parent.parent",  # line 8
        "FINE = Path(__file__).parent.parent / 'absorb_formal'",
        "ABSOLUTE = '{}work{}main'".format("/", "/"),  # line 10
        "RELATIVE = '../work/out'  # a folder beside a temporary working folder",
    ])
    root = Path("/repo")
    assert outside_references(source, root / "tests" / "t.py", root) == [5, 6, 7, 8, 10]
    assert outside_references(source, root / "a" / "b" / "c.py", root) == [6, 7, 10]  # deeper
    assert home_references("x = 1  # not Path.home()\ny = Path.home() / 'data'\n") == [2]
    assert OUTSIDE_PAGE.search(f"examples in {beside}") and OUTSIDE_PAGE.search("`/work/x`")
    assert not OUTSIDE_PAGE.search("cached in `~/.cache/absorb_formal`, or ../work/out")


# ---- names and comments say what code does, not which ticket asked for it ------------------

HISTORY_FOLDERS = ("absorb_formal", "tests", "benchmarks", "specs", "docs")
# The shapes (the planted examples below show each): a ticket's number, with or without a
# space or an underscore; the words for an inspection of the code and what it found; a range
# of finding codes (a capital R or F and a number, a dash, another); such a code with an item
# letter in brackets; a test named after a code; a numbered item of a ticket. A code alone is
# maths (matrices and blocks named R1 or F2, dtypes F32, BF16), and so never matched.
HISTORY = re.compile(
    r"(?i:(?<![a-z])issues?[ _#-]*\d+)"
    r"|(?i:\breview(?:s|ed|ers?)?\b)"
    r"|\b[RF]\d+[–-][RF]\d+\b"
    r"|\b[RF]\d+\([a-z]\)"
    r"|\btest_[rf]\d+_"
    r"|(?i:\bitems? \d+\b)")


def history(text: str) -> list[str]:
    """The references to the project's history in `text`, one per match."""
    return [match.group(0) for match in HISTORY.finditer(text)]


def history_files() -> list[Path]:
    return [ROOT / "README.md", *(path for folder in HISTORY_FOLDERS
                                  for path in sorted((ROOT / folder).rglob("*"))
                                  if path.is_file())]


def test_no_name_or_line_refers_to_the_projects_history():
    found = []
    for path in history_files():
        relative = path.relative_to(ROOT).as_posix()
        found += [f"{relative}: file name {hit!r}" for hit in history(path.name)]
        try:
            text = path.read_text(encoding="utf-8")
        except UnicodeDecodeError:  # weight files, figures
            continue
        for n, line in enumerate(text.splitlines(), 1):
            found += [f"{relative}:{n}: {hit!r}" for hit in history(line)]
    assert not found, "say what the code does or why, not which ticket asked for it: " + \
        "; ".join(found)


def test_references_to_history_are_found_and_maths_is_not():
    # Each planted line carries a "·", taken out before the check, so that this file, which
    # the test above reads too, does not hold the references itself.
    planted = [line.replace("·", "") for line in [
        "a timeout keeps the decision (is·sue 14.4)", "bench_is·sue20.py",
        "the second re·view (R·1–R6): each forgery", "Is·sue 19 F·5(b): a neuron",
        "def test_r·2_x", "test_f·1_a_claim", "(is·sue 21, it·em 5)",
        "re·view finding: a false alarm", "the re·viewers' block", "F·4-F6"]]
    assert [line for line in planted if not history(line)] == []
    assert history("see is·sue #12 and is·sues 3-4".replace("·", "")) == [
        "is·sue #12".replace("·", ""), "is·sues 3".replace("·", "")]
    maths = ["block R1 { activation relu dim 1 width 3 }", "claim F2 is always absorbable",
             "dtype F32, BF16 or F16", "r1, r2 = self.numeric(ratio, 0.7)", "R14: 14 keys",
             "the matrix R2 = R1 - S", "an issue of precision", "test_large_r2_block",
             "Finding MLP sublayers", "previewed", "items of the list", "abs(r1 - r2)"]
    assert [line for line in maths if history(line)] == []
