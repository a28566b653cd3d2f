"""The documentation is tested like code.

- Every fenced example in README.md and docs/*.md runs: ```mlp fences are complete specs,
  decided with `--expect` in the page's folder (their `# expect:` comments must be met);
  ```mlp-fragment fences must parse, as they stand or wrapped in a block. An unlabelled fence
  that looks like a spec is an error (label it).
- Every relative link resolves to a file of the repository (and, with `#anchor`, to a heading
  of that page); no link leaves the repository (test_self_contained_and_named_for_behaviour.py: nor
  does any other path a page names).
- Every file a docstring, comment, message, spec or page cites (a module, a page, a spec of
  the corpus) is in the repository.
- Every name the tool prints as its METHOD, every "§N" it cites and every certificate kind it
  emits is explained in docs/ (rules.md, certificates.md).
"""

from __future__ import annotations

import ast
import importlib
import importlib.util
import re
import unicodedata
from pathlib import Path

import pytest

from absorb_formal.language.errors import SpecError
from absorb_formal.language.parse import parse_text

from ..conftest import ROOT, run_cli

PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
FENCE = re.compile(r"^```([\w-]*)[^\n]*\n(.*?)^```", re.MULTILINE | re.DOTALL)
RUNNABLE, FRAGMENT = "mlp", "mlp-fragment"


def fences(page: Path) -> list[tuple[str, str, int]]:
    """(label, body, line) of every fenced block of a page. A fence that shows a file
    (```mlp file=examples/x.mlp) is labelled "mlp-file": tests/corpus/test_shown_transcripts.py
    checks that it is the file, and runs the file where it lies."""
    text = page.read_text(encoding="utf-8")
    return [(m.group(1) + ("-file" if "file=" in m.group(0).split("\n", 1)[0] else ""),
             m.group(2), text.count("\n", 0, m.start()) + 1)
            for m in FENCE.finditer(text)]


def _examples(label: str) -> list[tuple[Path, str, int]]:
    return [(page, body, line) for page in PAGES for kind, body, line in fences(page)
            if kind == label]


def _id(example: tuple[Path, str, int]) -> str:
    return f"{example[0].relative_to(ROOT)}:{example[2]}"


def test_every_page_has_examples():
    assert len(_examples(RUNNABLE)) >= 10
    assert {page.name for page, _, _ in _examples(RUNNABLE) + _examples("mlp-file")} >= {
        "README.md", "language.md", "rules.md", "tutorial.md"}


@pytest.mark.parametrize("example", _examples(RUNNABLE), ids=_id)
def test_complete_example_is_decided_as_expected(tmp_path, example):
    page, body, _ = example
    # The spec runs in the page's folder (a copy of links to it), so `load("examples/...")`
    # reads the files the page means, and nothing is written into the repository.
    for entry in page.parent.iterdir():
        if not entry.name.startswith("."):
            (tmp_path / entry.name).symlink_to(entry)
    spec = tmp_path / "example_under_test.mlp"
    spec.write_text(body, encoding="utf-8")
    run = run_cli("--expect", "--crosscheck", "0", "--no-timing", spec)
    assert run.code == 0, run.out + run.err
    assert "0 files with errors" in run.out


@pytest.mark.parametrize("example", _examples(FRAGMENT), ids=_id)
def test_fragment_parses(example):
    _, body, _ = example
    try:
        parse_text(body, "fragment.mlp")
    except SpecError:
        parse_text("block X {\n" + body + "\n}\n", "fragment.mlp")


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_unlabelled_fences_hold_no_spec(page):
    for label, body, line in fences(page):
        if label == "":
            looks_like_spec = re.search(r"^\s*block \w+ \{", body, re.MULTILINE) and \
                "activation" in body
            assert not looks_like_spec, f"{page.name}:{line}: label this fence mlp"


def test_the_loaded_weight_files_exist():
    for page, body, line in _examples(RUNNABLE) + _examples(FRAGMENT):
        code = re.sub(r"#[^\n]*", "", body)  # a load(...) in a comment is not run
        for file in re.findall(r'load\("([^"]+)"', code):
            assert (page.parent / file).is_file(), f"{page.name}:{line}: {file} is missing"


def test_the_example_weight_files_are_what_the_seeded_script_writes(tmp_path):
    script = ROOT / "docs" / "examples" / "make_examples.py"
    spec = importlib.util.spec_from_file_location("make_examples", script)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    module.main(tmp_path)
    written = sorted(p.name for p in tmp_path.iterdir())
    assert written == ["gpt2_mlp.safetensors", "llama_mlp.safetensors", "sequential.npz",
                       "sequential.safetensors", "skip.npz"]
    for name in written:
        assert (tmp_path / name).read_bytes() == (script.parent / name).read_bytes(), name


# ---- links ---------------------------------------------------------------------------

LINK = re.compile(r"(?<!!)\[[^\]]*\]\(([^)\s]+)\)")


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"`", "", heading.strip().lower())
    kept = "".join(c for c in text if c in " -_" or unicodedata.category(c)[0] in "LN")
    return kept.replace(" ", "-")


def anchors(page: Path) -> set[str]:
    found: set[str] = set()
    text = FENCE.sub("", page.read_text(encoding="utf-8"))
    for heading in re.findall(r"^#{1,6} (.+)$", text, re.MULTILINE):
        base, n = slug(heading), 0
        name = base
        while name in found:
            n += 1
            name = f"{base}-{n}"
        found.add(name)
    return found


def test_slug_follows_github():
    assert slug("Blocks with biases: where the paper's answers change") == \
        "blocks-with-biases-where-the-papers-answers-change"
    assert slug("Loading weight files: `load`") == "loading-weight-files-load"
    assert slug("T2∞ parity at infinity") == "t2-parity-at-infinity"


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_links_resolve_inside_the_repository(page):
    text = FENCE.sub("", page.read_text(encoding="utf-8"))
    for target in LINK.findall(text):
        if re.match(r"[a-z]+:", target):  # http:, https:, mailto:
            continue
        path, _, anchor = target.partition("#")
        file = (page.parent / path).resolve() if path else page
        assert file.is_relative_to(ROOT), f"{page.name}: {target} leaves the repository"
        assert file.exists(), f"{page.name}: {target} does not exist"
        if anchor:
            assert file.suffix == ".md", f"{page.name}: {target}: anchor into a non-page"
            assert anchor in anchors(file), f"{page.name}: no heading #{anchor} in {file.name}"


# ---- every name the tool prints is documented -----------------------------------------

def _string_constants() -> list[str]:
    """Every string literal (f-string parts included) of the package's modules."""
    out = []
    for module in (ROOT / "absorb_formal").rglob("*.py"):
        for node in ast.walk(ast.parse(module.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                out.append(node.value)
    return out


def printed_methods() -> set[str]:
    """The METHOD names: the modules' RULE/METHOD constants, the family rules' names, and the
    fixed method strings of the deciding code."""
    from absorb_formal.decide import (
        bounded,
        concrete,
        equivalence,
        flatness,
        flips,
        glu,
        homogeneity,
        linear,
        modular,
        parity,
        parity_infinity,
    )
    from absorb_formal.generic import engine

    names = {homogeneity.RULE, parity.RULE, bounded.RULE, flatness.RULE, parity_infinity.RULE,
             concrete.WIDTH_METHOD, equivalence.METHOD, modular.METHOD, linear.METHOD,
             flips.METHOD, glu.METHOD, engine.POLY_METHOD, engine.CEGIS_METHOD}
    for value in _string_constants():
        # Method-like literals: "§N name" (not a bare "§N", not a message that "covers" or
        # "needs" or "decides" something), the plain-block names, and the few fixed method strings.
        method_like = re.fullmatch(r"§\d+(\.\d)? [\w .,=^+-]*\w|[\w ]+\(skip none\)|"
                                   r"spare pairs \(§4\)|both engines", value)
        if method_like and not re.search(r"\b(covers|needs|decides?|refutes|only)\b", value):
            names.add(value)
    return names


def test_printed_methods_are_found_in_the_code():
    names = printed_methods()
    assert {"T4 flatness", "§4 canonical form + width search", "§8.2 flip sets",
            "§8.3 genericity", "plain family (skip none)", "§4 rank of S"} <= names


@pytest.mark.parametrize("name", sorted(printed_methods()))
def test_every_method_name_is_documented(name):
    assert f"`{name}`" in (ROOT / "docs" / "rules.md").read_text(encoding="utf-8"), \
        f"docs/rules.md does not list the method {name!r} (table 'Names the tool prints')"


def test_every_section_cited_is_documented():
    cited = set()
    for value in _string_constants():
        cited.update(re.findall(r"§(\d+(?:\.\d+)?)", value))
    table = (ROOT / "docs" / "rules.md").read_text(encoding="utf-8")
    missing = sorted(s for s in cited if f"| §{s} |" not in table)
    assert not missing, f"docs/rules.md's table of sections lacks §{missing}"


def test_every_lemma_and_certificate_kind_is_documented():
    never = importlib.import_module("absorb_formal.checker.rules.never")
    source = "\n".join(p.read_text(encoding="utf-8")
                       for p in (ROOT / "absorb_formal").rglob("*.py"))
    kinds = set(re.findall(r'"kind": "([^"]+)"', source))
    methods = set(re.findall(r'"method": "([^"]+)"', source))
    certs = (ROOT / "docs" / "certificates.md").read_text(encoding="utf-8")
    headings = set(re.findall(r"^#{2,4} `([^`\n]+)`$", certs, re.MULTILINE))
    assert kinds - {"absorbable", "family", "equals", "min_width"} <= headings, \
        sorted(kinds - headings)
    assert all(f"`{m}`" in certs for m in methods), sorted(m for m in methods
                                                           if f"`{m}`" not in certs)
    rules = (ROOT / "docs" / "rules.md").read_text(encoding="utf-8")
    for lemma in ("H(k)", "E", "Bd", "F", "O(a)", "Og(c)", "N", "H(1)"):
        assert f"**{lemma}**" in rules, lemma
    for rule in never.RULES:
        assert f"**{rule}" in rules, rule


def test_the_exported_example_is_what_export_writes_now(tmp_path, monkeypatch):
    """docs/examples/R_plain.safetensors (loaded back in the tutorial) is regenerated
    byte for byte by `absorb-prove export`: the file, its record and its certificate hash
    stay current."""
    import io

    from absorb_formal.cli import main

    examples = ROOT / "docs" / "examples"
    out = tmp_path / "R_plain.safetensors"
    monkeypatch.chdir(examples)  # the record names the spec as given: residual.mlp
    code = main(["export", "residual.mlp", "R", "--out", str(out)],
                io.StringIO(), io.StringIO())
    assert code == 0
    assert out.read_bytes() == (examples / "R_plain.safetensors").read_bytes()


# ---- every file cited exists ----------------------------------------------------------------

# A module (`decide/linear.py`, `find.py`), a page (`docs/rules.md`), the grammar (`.lark`), or
# a spec of the corpus or the docs (`specs/…/x.mlp`; other `.mlp` names are examples of names).
CITATION = re.compile(r"(?<![\w/.-])((?:\.\.?/)*(?:[\w-]+/)*[\w-]+\.(?:py|md|lark)"
                      r"|(?:specs|docs)/(?:[\w-]+/)*[\w-]+\.mlp)(?![\w/-])")
PAGE_CITATION = re.compile(r"(?<![\w/.-])((?:\.\.?/)*(?:[\w-]+/)*[\w-]+\.md)(?![\w/-])")
CITING_FOLDERS = ("absorb_formal", "tests", "benchmarks", "specs", "docs")
Said = tuple[int, str, re.Pattern[str]]


def _python_prose(path: Path) -> list[Said]:
    """What a module says to its reader: comments and docstrings (any file they cite) and, in
    the package and the benchmarks, its other strings (messages: the pages they cite; a test's
    strings are its data)."""
    import io
    import tokenize

    messages = path.relative_to(ROOT).parts[0] in ("absorb_formal", "benchmarks")
    source = io.StringIO(path.read_text(encoding="utf-8"))
    tokens = [tok for tok in tokenize.generate_tokens(source.readline)
              if tok.type not in (tokenize.NL, tokenize.ENCODING)]
    said: list[Said] = []
    for i, tok in enumerate(tokens):
        if tok.type == tokenize.COMMENT:
            said.append((tok.start[0], tok.string, CITATION))
        elif tok.type == tokenize.STRING:
            before = tokens[i - 1].type if i else tokenize.NEWLINE
            after = tokens[i + 1].type if i + 1 < len(tokens) else tokenize.NEWLINE
            alone = before in (tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT) and \
                after in (tokenize.NEWLINE, tokenize.ENDMARKER, tokenize.COMMENT)
            if alone or messages:
                said += [(tok.start[0] + n, line, CITATION if alone else PAGE_CITATION)
                         for n, line in enumerate(tok.string.splitlines())]
    return said


def _prose(path: Path) -> list[Said]:
    """(line, text, what it may cite) of what `path` says to a reader: a page outside its
    fences (they show commands and output, tested by test_shown_transcripts.py), every line of a
    spec or of the grammar, a module's comments, docstrings and messages."""
    if path.suffix == ".py":
        return _python_prose(path)
    if path.suffix not in (".md", ".mlp", ".lark"):
        return []
    text = path.read_text(encoding="utf-8")
    if path.suffix == ".md":
        text = FENCE.sub(lambda fence: "\n" * fence.group(0).count("\n"), text)
    return [(n, line, CITATION) for n, line in enumerate(text.splitlines(), 1)]


def _files() -> list[Path]:
    return [ROOT / "README.md", *(path for folder in CITING_FOLDERS
                                  for path in sorted((ROOT / folder).rglob("*")) if path.is_file())]


def unresolved(said: list[Said], citing: Path, files: set[str]) -> list[str]:
    """The citations of `said` (by `citing`) that name no file of `files` (paths relative to
    the root): a citation is relative to the citing file's folder, or the tail of a path from
    the root (a module is cited as `decide/linear.py`, or `linear.py` beside it)."""
    missing = []
    for line, text, pattern in said:
        for cited in pattern.findall(text):
            tail = cited.removeprefix("./")
            if not (citing.parent / cited).exists() and (
                    tail.startswith("../") or
                    not any(f == tail or f.endswith("/" + tail) for f in files)):
                missing.append(f"{line}: {cited}")
    return missing


def test_every_file_cited_exists():
    """Docstrings, comments, messages, specs and pages cite files the repository has: a page
    that is not here, or a module since renamed, is an error (docs/rules.md holds the rules
    and the sections cited as §N, docs/language.md the language)."""
    files = _files()
    names = {path.relative_to(ROOT).as_posix() for path in files}
    found = [f"{path.relative_to(ROOT)}:{where}" for path in files
             for where in unresolved(_prose(path), path, names)]
    assert not found, f"cited, but not in the repository: {found}"


def test_a_citation_of_a_missing_file_is_found():
    names = {"docs/rules.md", "absorb_formal/scanner/find.py", "absorb_formal/linalg.py"}
    said = [(1, "measured once (NOTES.md); see scanner/names.py", CITATION),
            (2, "docs/rules.md §4, `find.py`, linalg.py and ./linalg.py", CITATION),
            (3, "reads sympy's release.py; see OTHER.md", PAGE_CITATION),
            (4, "as ../elsewhere/x.md has it; specs/gone/x.mlp", CITATION)]
    citing = ROOT / "absorb_formal" / "planted.py"
    assert unresolved(said, citing, names) == [
        "1: NOTES.md", "1: scanner/names.py", "3: OTHER.md", "4: ../elsewhere/x.md",
        "4: specs/gone/x.mlp"]


def test_the_readme_test_command_is_what_ci_runs():
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8").splitlines()[-1]
    assert ci.startswith("python3 -m venv .venv && ") and "'.[test,torch]'" in ci
    readme = (ROOT / "README.md").read_text(encoding="utf-8").splitlines()
    assert ci in readme, f"README.md does not show .ci/run's command: {ci}"
