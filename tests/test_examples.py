"""Every spec in ../shared/examples and in the corpus parses and validates."""

from __future__ import annotations

import pytest

from absorb_formal.language import load_file

from .conftest import CORPUS, example_files


@pytest.mark.parametrize("path", example_files() + sorted(CORPUS.rglob("*.mlp")),
                         ids=lambda p: f"{p.parent.name}/{p.name}")
def test_spec_loads(path):
    spec = load_file(path)
    assert spec.statements, "every spec states at least one claim or query"
    for statement in spec.statements:
        assert statement.block in spec.blocks
