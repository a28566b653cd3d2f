"""Shared fixtures: where the example specs live (specs/examples/, inside the repository),
and the CLI run in-process."""

from __future__ import annotations

import functools
import io
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from hypothesis import settings

from absorb_formal.cli import main

pytest_plugins = ["pytester"]

# Property tests: a fast default for CI, `HYPOTHESIS_PROFILE=long` for the long runs.
settings.register_profile("ci", max_examples=60)
settings.register_profile("long", max_examples=2000)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))

# No disk cache in tests (model/diskcache.py): tests that re-prove properties afresh must not be
# served from a cache another run wrote; tests/model/test_startup_disk_cache.py turns it on in a
# temporary folder.
os.environ["ABSORB_FORMAL_CACHE"] = "off"
# Nor a scan results file (scanner/results.py) in the working directory: a scan that is to decide
# afresh must not take its answers from a file another test left; tests of the file name one.
os.environ["ABSORB_FORMAL_RESULTS"] = "off"

ROOT = Path(__file__).resolve().parents[1]
CORPUS = ROOT / "specs"


@dataclass
class Run:
    code: int
    out: str
    err: str

    def json(self) -> Any:
        return json.loads(self.out)


def run_cli(*argv: str | Path) -> Run:
    out, err = io.StringIO(), io.StringIO()
    code = main([str(a) for a in argv], out, err)
    return Run(code, out.getvalue(), err.getvalue())


@pytest.fixture
def cli() -> Any:
    return run_cli


@dataclass
class CorpusRun:
    """One run of the whole corpus, shared by the tests that read it (deciding it takes about a
    minute): `absorb-prove ARGS` on a copy of specs/ at `folder / "specs"`, certificates written
    to `folder / "p"`. Those tests live in tests/corpus/test_corpus_outcomes_and_witnesses.py: under
    pytest-xdist's `--dist loadfile` one worker runs them all, and decides the corpus once."""
    folder: Path
    args: list[str]
    run: Run

    @functools.cached_property
    def doc(self) -> Any:
        """The run's JSON document, parsed once for every test that reads it."""
        return self.run.json()


CORPUS_ARGS = ["--json", "--no-timing", "--crosscheck", "3000"]


@pytest.fixture(scope="session")
def corpus_run(tmp_path_factory: pytest.TempPathFactory) -> CorpusRun:
    import shutil

    folder = tmp_path_factory.mktemp("corpus")
    shutil.copytree(CORPUS, folder / "specs")
    args = [*CORPUS_ARGS, "--certificates", str(folder / "p"), str(folder / "specs")]
    return CorpusRun(folder, args, run_cli(*args))


@pytest.fixture
def write_spec(tmp_path: Path) -> Any:
    """Write spec text to a file in a fresh folder; return its path."""

    def write(text: str, name: str = "spec.mlp") -> Path:
        path = tmp_path / name
        path.write_text(text, encoding="utf-8")
        return path

    return write


def example_files() -> list[Path]:
    """The example specs, one per topic (specs/examples/*.mlp); part of the corpus."""
    return sorted((CORPUS / "examples").glob("*.mlp"))
