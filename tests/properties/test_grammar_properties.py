"""Property tests of the grammar: generated specs parse; mutated ones never crash the tool."""

from __future__ import annotations

import re

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra.lark import from_lark

from absorb_formal.language import SpecError
from absorb_formal.language.parse import parse_text, parser

from ..conftest import example_files, run_cli


def _terminal_strategies() -> dict[str, st.SearchStrategy[str]]:
    """Every terminal padded with spaces (from_lark does not separate tokens by itself)."""
    out: dict[str, st.SearchStrategy[str]] = {}
    for t in parser().terminals:
        if t.pattern.type == "str":
            out[t.name] = st.just(f" {t.pattern.value} ")
    out["NAME"] = st.sampled_from(["A", "B", "relu", "gelu", "swiglu", "x1", "_n"]).map(
        lambda s: f" {s} ")
    out["NUMBER"] = st.one_of(st.integers(-3, 5).map(str),
                              st.sampled_from(["1/2", "-0.25", "1e-3", "2.5E+2", "7/10"])
                              ).map(lambda s: f" {s} ")
    out["STRING"] = st.sampled_from(['"w.npz"', '"k"']).map(lambda s: f" {s} ")
    out["COMMENT"] = st.just(" # a comment runs to the end of the line\n")
    # Regex-defined keywords (WIDTH, ...) are str patterns above; the rest are ignored tokens.
    return {k: v for k, v in out.items()
            if k in {t.name for t in parser().terminals}}


SPECS = from_lark(parser(), explicit=_terminal_strategies())
ERROR_LINE = re.compile(r"^.+:\d+:\d+: error: .+$")


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(SPECS)
def test_generated_specs_parse(text):
    parse_text(text, "gen.mlp")  # raises SpecError on any syntax error


def _check_run(path, text):
    path.write_text(text, encoding="utf-8", errors="surrogateescape")
    run = run_cli(path)
    assert run.code in (0, 1, 2, 3), run
    assert "Traceback" not in run.out + run.err
    if run.code == 2:
        first = run.err.splitlines()[0]
        assert ERROR_LINE.match(first), first


@settings(max_examples=150, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(SPECS)
def test_generated_specs_are_decided_or_rejected_with_a_position(tmp_path, text):
    _check_run(tmp_path / "gen.mlp", text)


EXAMPLES = [p.read_text() for p in example_files()]


@st.composite
def mutated(draw: st.DrawFn) -> str:
    text = draw(st.sampled_from(EXAMPLES))
    for _ in range(draw(st.integers(1, 4))):
        i = draw(st.integers(0, len(text)))
        j = draw(st.integers(i, min(len(text), i + 12)))
        op = draw(st.sampled_from(["delete", "insert", "duplicate", "swap"]))
        if op == "delete":
            text = text[:i] + text[j:]
        elif op == "insert":
            text = text[:i] + draw(st.text(max_size=6)) + text[i:]
        elif op == "duplicate":
            text = text[:j] + text[i:j] + text[j:]
        else:
            text = text[:i] + text[j:j + (j - i)] + text[i:j] + text[j + (j - i):]
    return text


# Twice the profile's count: 120 in CI (about 0.1 s each: most mutants still parse and are
# decided), 4000 under HYPOTHESIS_PROFILE=long.
@settings(max_examples=2 * settings().max_examples, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(mutated())
def test_mutated_examples_never_crash(tmp_path, text):
    _check_run(tmp_path / "m.mlp", text)


@settings(max_examples=100, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.binary(max_size=200))
def test_random_bytes_exit_2_or_parse(tmp_path, data):
    path = tmp_path / "r.mlp"
    path.write_bytes(data)
    run = run_cli(path)
    assert run.code in (0, 2, 3)
    assert "Traceback" not in run.err
    if run.code == 2:
        assert ERROR_LINE.match(run.err.splitlines()[0])


def test_parse_error_is_spec_error_not_lark_error():
    try:
        parse_text("block {", "x.mlp")
    except SpecError as error:
        assert error.diagnostics[0].pos.line == 1
    else:
        raise AssertionError("expected a SpecError")
