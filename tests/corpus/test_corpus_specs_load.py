"""Every spec of the corpus (specs/, the examples included) parses and validates."""

from __future__ import annotations

import pytest

from absorb_formal.language import load_file

from ..conftest import CORPUS


@pytest.mark.parametrize("path", sorted(CORPUS.rglob("*.mlp")),
                         ids=lambda p: f"{p.parent.name}/{p.name}")
def test_spec_loads(path):
    spec = load_file(path)
    assert spec.statements, "every spec states at least one claim or query"
    for statement in spec.statements:
        assert statement.block in spec.blocks
