"""The output the pages show is the output the commands print now.

Every ```console fence of README.md and docs/*.md is a transcript: `$ COMMAND` lines, each
followed by what it prints (stdout and stderr, in the order printed). The test runs the
commands in a copy of the fence's folder (`cwd=PATH` in the fence's info string, relative
to the page; default the page's folder), one after another; the fences of a page with the
same folder are one session, in one copy, in page order (a tutorial's later step sees the
files an earlier one wrote). It compares, after
normalising what varies from run to run or machine to machine: seconds, and the float error
figures of the numeric cross-checks (their last digits follow the BLAS's summation order).

`absorb-prove ...` runs in-process; any other command (`echo ... >> FILE`) runs in bash.
After an intended change of output, rewrite the transcripts with

    python -m tests.corpus.test_shown_transcripts --write

and read the diff before committing it.

Every ```mlp fence whose info string names a file (`file=examples/sequential.mlp`) shows
that file exactly; the file is decided with `--expect` where it lies.
"""

from __future__ import annotations

import io
import os
import re
import shlex
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from absorb_formal.cli import main

ROOT = Path(__file__).resolve().parents[2]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
FENCE = re.compile(r"^```([\w-]*)([^\n]*)\n(.*?)^```", re.MULTILINE | re.DOTALL)


@dataclass(frozen=True)
class Transcript:
    page: Path
    line: int
    cwd: Path
    steps: tuple[tuple[str, str], ...]  # (command, output)
    start: int  # offsets of the fence's body in the page
    end: int


def _info(info: str, key: str) -> str | None:
    found = re.search(rf"\b{key}=(\S+)", info)
    return found.group(1) if found else None


def transcripts(page: Path) -> list[Transcript]:
    text = page.read_text(encoding="utf-8")
    found = []
    for m in FENCE.finditer(text):
        if m.group(1) != "console":
            continue
        steps: list[tuple[str, list[str]]] = []
        for line in m.group(3).splitlines():
            if line.startswith("$ "):
                steps.append((line[2:], []))
            else:
                assert steps, f"{page.name}: a console fence starts with a `$ ` command"
                steps[-1][1].append(line)
        cwd = page.parent / (_info(m.group(2), "cwd") or ".")
        found.append(Transcript(page, text.count("\n", 0, m.start()) + 1, cwd,
                                tuple((c, "\n".join(o)) for c, o in steps),
                                m.start(3), m.end(3)))
    return found


def run(transcript: Transcript, folder: Path) -> list[str]:
    """The output of each command, run in `folder` (a copy of the transcript's folder)."""
    outputs = []
    here = Path.cwd()
    os.chdir(folder)
    try:
        for command, _ in transcript.steps:
            words = shlex.split(command)
            if words[0] == "absorb-prove":
                printed = io.StringIO()
                main(words[1:], printed, printed)  # one stream: the order printed
                outputs.append(printed.getvalue().rstrip("\n"))
            else:
                done = subprocess.run(["bash", "-c", command], capture_output=True, text=True,
                                      check=True)
                outputs.append((done.stderr + done.stdout).rstrip("\n"))
    finally:
        os.chdir(here)
    return outputs


def copy_of(folder: Path, into: Path) -> Path:
    """A copy of `folder` to run in (commands may write there); the repository's root is
    linked, not copied, except for what the commands could write."""
    target = into / "run"
    if folder.resolve() == ROOT:
        target.mkdir()
        for entry in ROOT.iterdir():
            if not entry.name.startswith("."):
                (target / entry.name).symlink_to(entry)
        return target
    shutil.copytree(folder, target, ignore=shutil.ignore_patterns("__pycache__"))
    return target


NUMBER = r"-?\d+(?:\.\d*)?(?:e[+-]?\d+)?"
VARYING = [
    (re.compile(rf"\b({NUMBER}) s\b"), "<seconds> s"),
    (re.compile(rf"\b(max error|rel|relative) {NUMBER}"), r"\1 <error>"),
]


def normalised(text: str) -> str:
    for pattern, replacement in VARYING:
        text = pattern.sub(replacement, text)
    return text


def sessions() -> list[list[Transcript]]:
    """The transcripts grouped by page and folder, in page order."""
    grouped: dict[tuple[Path, Path], list[Transcript]] = {}
    for page in PAGES:
        for transcript in transcripts(page):
            grouped.setdefault((page, transcript.cwd.resolve()), []).append(transcript)
    return list(grouped.values())


ALL = sessions()


def test_the_pages_show_transcripts():
    assert {s[0].page.name for s in ALL} >= {"README.md", "tutorial.md", "language.md"}
    assert sum(len(s) for s in ALL) >= 10


@pytest.mark.parametrize("session", ALL,
                         ids=lambda s: f"{s[0].page.name}:{s[0].cwd.relative_to(ROOT)}")
def test_the_shown_output_is_what_the_commands_print(session, tmp_path):
    folder = copy_of(session[0].cwd, tmp_path)
    for transcript in session:
        outputs = run(transcript, folder)
        for (command, shown), printed in zip(transcript.steps, outputs, strict=True):
            assert normalised(printed) == normalised(shown), (
                f"{transcript.page.name}:{transcript.line}: `{command}` prints something "
                "else now (rewrite: python -m tests.corpus.test_shown_transcripts --write):\n"
                f"{printed}")


def test_normalising_keeps_what_matters():
    line = "cross-check 100000 points, max error 2.7e-12 (rel 1.1e-16); 0.52 s"
    assert normalised(line) == "cross-check 100000 points, max error <error> (rel <error>); " \
                               "<seconds> s"
    assert normalised("min width is 12") == "min width is 12"
    assert normalised("proved: R") != normalised("refuted: R")


# ---- spec files shown on the pages ---------------------------------------------------------

SHOWN_FILES = [(page, m.group(3), _info(m.group(2), "file"))
               for page in PAGES for m in FENCE.finditer(page.read_text(encoding="utf-8"))
               if m.group(1) == "mlp" and _info(m.group(2), "file")]


def test_the_tutorial_specs_ship_as_files():
    shown = {(page.parent / str(file)).resolve() for page, _, file in SHOWN_FILES}
    examples = ROOT / "docs" / "examples"
    assert {examples / f for f in ("sequential.mlp", "gpt2.mlp", "llama.mlp", "back.mlp")} \
        <= shown


@pytest.mark.parametrize(("page", "body", "file"), SHOWN_FILES,
                         ids=[f"{p.name}:{f}" for p, _, f in SHOWN_FILES])
def test_a_shown_spec_is_its_file_and_is_decided_as_expected(page, body, file):
    path = page.parent / file
    assert path.read_text(encoding="utf-8") == body, f"{page.name} shows {file} otherwise"
    printed = io.StringIO()
    here = Path.cwd()
    os.chdir(path.parent)
    try:
        code = main(["--expect", "--crosscheck", "0", path.name], printed, printed)
    finally:
        os.chdir(here)
    assert code == 0, printed.getvalue()


def rewrite() -> None:
    """Replace every transcript's output by what its commands print now."""
    import tempfile

    bodies: dict[tuple[Path, int], str] = {}
    for session in sessions():
        with tempfile.TemporaryDirectory() as scratch:
            folder = copy_of(session[0].cwd, Path(scratch))
            for transcript in session:
                outputs = run(transcript, folder)
                bodies[transcript.page, transcript.start] = "".join(
                    f"$ {command}\n" + (f"{out}\n" if out else "")
                    for (command, _), out in zip(transcript.steps, outputs, strict=True))
    for page in PAGES:
        text = page.read_text(encoding="utf-8")
        for transcript in reversed(transcripts(page)):
            body = bodies[page, transcript.start]
            text = text[:transcript.start] + body + text[transcript.end:]
        page.write_text(text, encoding="utf-8")


if __name__ == "__main__":
    if sys.argv[1:] != ["--write"]:
        sys.exit("usage: python -m tests.corpus.test_shown_transcripts --write")
    rewrite()
