"""The Python API, queries that keep their answers, `check` that explains its verdicts, and
--fit on the text line."""

from __future__ import annotations

import io
import json
import random
import time
from pathlib import Path

import pytest

import absorb_formal
from absorb_formal.api import CheckResult, InvalidSpec, StatementResult, is_path
from absorb_formal.decide import budget, concrete, progress
from absorb_formal.language import load_text

R = """block R {
    activation relu
    dim 2  width 3
    up    = [[1, 0], [0, 1], [1, 1]]
    down  = [[-1, 0, 7/10], [0, -1, 3/10]]
}
claim R is absorbable
claim R is absorbable at width 1
query R
"""


def random_relu(d: int, m: int, seed: int) -> str:
    rng = random.Random(seed)

    def entry() -> str:
        return f"{rng.randint(-9, 9)}/{rng.randint(1, 4)}"

    up = [[entry() for _ in range(d)] for _ in range(m)]
    down = [[entry() for _ in range(m)] for _ in range(d)]
    show = lambda rows: "[" + ", ".join("[" + ", ".join(r) + "]" for r in rows) + "]"  # noqa: E731
    return (f"block B {{\n activation relu\n dim {d}\n width {m}\n up = {show(up)}\n"
            f" down = {show(down)}\n}}\n")


# ---- prove ----------------------------------------------------------------------------------


def test_prove_text_returns_one_typed_result_per_statement():
    results = absorb_formal.prove(R)
    assert [type(r) for r in results] == [StatementResult] * 3
    assert [(r.line, r.kind, r.outcome) for r in results] == [
        (7, "claim", "proved"), (8, "claim", "refuted"), (9, "query", "decided")]
    proved, refuted, query = results
    assert proved.statement == "R is absorbable" and proved.block == "R"
    assert proved.verdict.startswith("absorbable at width 3") and proved.certificate
    assert refuted.verdict.startswith("not absorbable at width 1")
    assert query.min_width == 3 and query.extra["decision"] == {"width": 3, "absorbable": True}
    with pytest.raises(AttributeError):
        proved.outcome = "refuted"  # type: ignore[misc]  # frozen


def test_prove_reads_a_path_or_a_str_naming_a_file_the_same(tmp_path):
    spec = tmp_path / "r.mlp"
    spec.write_text(R)
    by_path = absorb_formal.prove(spec, timeout=0)
    by_str = absorb_formal.prove(str(spec))
    assert [(r.outcome, r.verdict) for r in by_path] == [(r.outcome, r.verdict) for r in by_str]
    assert is_path(spec) and is_path(str(spec)) and is_path("missing.mlp")
    assert not is_path(R) and not is_path("block R { activation relu dim 1 width 1 }")


def test_spec_errors_raise_invalid_spec_with_file_line_column(tmp_path):
    with pytest.raises(InvalidSpec) as caught:
        absorb_formal.prove("block R { activation nope dim 2 width 2 }\nquery R\n")
    error = caught.value
    assert (error.path, error.line) == ("<spec>", 1) and error.column > 1
    assert str(error).startswith(f"<spec>:1:{error.column}: error: ")
    assert isinstance(error, absorb_formal.api.SpecError)
    with pytest.raises(InvalidSpec, match=r"missing\.mlp:1:1: error: cannot read file"):
        absorb_formal.prove(str(tmp_path / "missing.mlp"))


# ---- queries: both parts, never hidden ----------------------------------------------------


def test_a_timeout_in_the_min_width_keeps_the_own_width_verdict(cli, write_spec, monkeypatch):
    real = concrete.minimal_width

    def slow(*args, **kwargs):
        time.sleep(30)
        return real(*args, **kwargs)

    monkeypatch.setattr(concrete, "minimal_width", slow)
    run = cli("--json", "--timeout", "0.5", "--crosscheck", "0", write_spec(R))
    query = run.json()["files"][0]["results"][2]
    assert query["outcome"] == "decided"
    assert query["verdict"].startswith("absorbable at width 3")
    assert query["verdict"].endswith("min width unknown (timeout after 0.5 s)")
    assert query["decision"] == {"width": 3, "absorbable": True}
    assert query["min_width"] is None and query["min_width_reason"] == "timeout after 0.5 s"
    assert query["certificate"]["kind"] == "witness" or query["certificate"]


def test_a_generic_query_reports_proved_bounds_that_hold():
    """17 keys: the width search would stall (2^17 signs), so the query gives bounds; the
    bounds are checked against exact decisions at the two widths around them."""
    spec = load_text(random_relu(3, 17, 1) + "query B\nclaim min width of B is 17\n",
                     "t.mlp", Path("."))
    [query, claim] = absorb_formal.prove(random_relu(3, 17, 1) + "query B\n"
                                         "claim min width of B is 17\n")
    assert query.outcome == "decided" and query.extra["decision"]["absorbable"] is False
    lo, hi = query.extra["min_width_bounds"]
    assert f"min width between {lo} and {hi}" in query.verdict
    block = spec.blocks["B"]
    assert lo == 18  # 17 keys, and width 17 (its own) is refuted
    assert concrete.at_width(block, lo - 1).absorbable is False
    assert concrete.at_width(block, hi).absorbable is True
    # the exhaustive search (a min-width claim) narrows the same bounds, never contradicts
    assert claim.outcome in ("refuted", "unknown")
    if claim.outcome == "unknown":
        lo2, hi2 = claim.extra["min_width_bounds"]
        assert lo <= lo2 <= hi2 <= hi


# ---- check ----------------------------------------------------------------------------------


def test_check_says_the_claims_outcome_beside_validity(cli, write_spec):
    spec = write_spec(R)
    folder = spec.parent / "out"
    assert cli("--certificates", folder, spec).code == 1
    results = absorb_formal.check(folder)
    assert all(isinstance(r, CheckResult) for r in results)
    by_line = {r.line: r for r in results}
    assert by_line[8].status == "valid" and by_line[8].outcome == "refuted"
    assert by_line[7].status == "valid" and by_line[7].outcome == "proved"
    run = cli("check", folder)
    assert run.code == 0
    line8 = next(x for x in run.out.splitlines() if "spec.mlp.8.json" in x)
    assert ": valid — claim refuted: R is absorbable at width 1 (not absorbable at width 1" \
        in line8
    spec.write_text(R.replace("7/10", "8/10"))  # the evidence is now stale
    assert {r.status for r in absorb_formal.check(folder)} == {"stale"}
    assert ": stale — recorded claim refuted: R is absorbable at width 1" in cli("check",
                                                                                folder).out
    run = cli("check", "--json", folder)
    doc = run.json()
    assert run.code == 1 and doc["exit_code"] == 1 and doc["counts"]["stale"] == 2
    assert doc["certificates"][0]["outcome"] in ("proved", "refuted")
    assert set(doc["certificates"][0]) == {"path", "status", "reason", "outcome", "verdict",
                                           "method", "statement", "line", "spec"}
    assert doc["certificates"][0]["spec"].endswith("spec.mlp")
    with pytest.raises(FileNotFoundError):
        absorb_formal.check(spec.parent / "nothing")
    assert cli("check", "--json", spec.parent / "nothing").code == 2


def test_check_given_a_spec_says_so_and_names_the_command_that_decides_it(cli, write_spec):
    spec = write_spec("block R { activation relu^2 dim 2 width 2 }\n"
                      "claim R is never absorbable\n")
    run = cli("check", spec)
    assert run.code == 2 and run.out == "", run.out  # no "0 certificates" line after it
    assert run.err.startswith(f"{spec}: error: a spec, not a certificate: decide it with "
                              f"`absorb-prove {spec}`, or write certificates"), run.err
    assert "invalid" not in run.err
    with pytest.raises(ValueError, match="a spec, not a certificate"):
        absorb_formal.check(spec)
    folder = cli("check", spec.parent)  # a folder of specs, no certificates
    assert folder.code == 2
    assert f"only .mlp specs: decide them with `absorb-prove {spec.parent}`" in folder.err
    assert cli("--certificates", spec.parent / "proofs", spec).code == 0
    assert cli("check", spec.parent).code == 0  # certificates beside the specs: checked


def test_check_help_documents_output_json_and_exit_codes(cli):
    run = cli("check", "--help")
    assert run.code == 0
    for part in ("FILE: STATUS — claim OUTCOME", "--json", '"certificates"', "exit codes:",
                 "stale"):
        assert part in run.out


# ---- --fit ----------------------------------------------------------------------------------


def test_fit_best_error_is_on_the_text_line(cli, write_spec):
    run = cli("--fit", "--fit-restarts", "1", "--crosscheck", "10", write_spec(R))
    refuted = next(x for x in run.out.splitlines() if ":8: " in x)
    assert "; fit width 1: best error " in refuted and "after 1 restart" in refuted


def test_a_fit_stopped_by_the_timeout_keeps_its_best_error(monkeypatch):
    from absorb_formal.numeric import fit
    from absorb_formal.numeric.backends import backend

    real, calls = fit._descend, []

    def second_is_stopped(*args, **kwargs):
        calls.append(1)
        if len(calls) == 2:  # the budget's alarm, arriving during the second restart (not
            raise budget.ClaimTimeout  # a real 1 s budget: a loaded machine may spend it
        return real(*args, **kwargs)  # on the first restart already)

    monkeypatch.setattr(fit, "_descend", second_is_stopped)
    block = load_text(R, "r.mlp", Path(".")).blocks["R"]
    result = absorb_formal.prove(R)[1]
    with budget.limit(600):
        alarm, report = fit.fit_alarm(block, 1, _result(result), 5, backend("numpy", "auto"))
    assert alarm == "" and report["restarts"] == 1 and report["stopped"].startswith("timeout")
    assert report["best_error"] is not None and report["best_error"] > fit.FIT_TOLERANCE
    assert "stopped (timeout after 600 s)" in fit.phrase(report)


def _result(r: StatementResult):
    from absorb_formal.model.result import Result

    return Result(r.outcome, r.verdict, r.method, r.reason, r.certificate, r.min_width,
                  dict(r.extra))


# ---- progress -------------------------------------------------------------------------------


class _Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_progress_bars_only_on_a_terminal():
    assert progress.bar("x", "case", stream=io.StringIO()) is None
    assert progress.bar("x", "case") is None  # nothing enabled
    with progress.shown_on(io.StringIO()):
        assert progress.bar("x", "case") is None
    with progress.shown_on(_Tty()):
        shown = progress.bar("x", "case", delay=0.0)
        assert shown is not None
        shown.close()


def test_json_output_has_no_progress_even_on_a_terminal(write_spec):
    from absorb_formal.cli import main

    out, err = io.StringIO(), _Tty()
    assert main(["--json", "--crosscheck", "0", str(write_spec(R))], out, err) == 1
    assert err.getvalue() == "" and json.loads(out.getvalue())["exit_code"] == 1
