"""The `absorb-prove` command, run in-process through `main(argv, stdout, stderr)`."""

from __future__ import annotations

import re
import shutil

import pytest

from absorb_formal.report import summary

from ..conftest import CORPUS, example_files

LINE = re.compile(r"^(?P<file>[^:]+\.mlp):(?P<line>\d+): "
                  r"(?P<outcome>proved|refuted|unknown|decided): "
                  r"(?P<statement>.+) — (?P<verdict>.+) \[(?P<method>[^\]]+)\]$")
KEYS = {"line", "statement", "kind", "block", "outcome", "verdict", "method", "reason",
        "certificate", "min_width", "seconds"}


def test_help_documents_the_line_format_and_exit_codes(cli):
    run = cli("--help")
    assert run.code == 0
    assert "FILE:LINE: OUTCOME: STATEMENT — VERDICT [METHOD | CERTIFICATE]" in run.out
    for code in ("0  every claim proved", "1  some claim refuted", "2  a spec has an error",
                 "3  no claim refuted, but some claim or query unknown"):
        assert code in run.out


def test_examples_give_one_well_formed_line_per_claim(cli):
    files = example_files()
    run = cli(*files)
    lines = run.out.splitlines()
    claims = [m for m in map(LINE.match, lines[:-1])]
    assert all(claims), lines
    assert lines[-1].startswith(f"summary: {len(files)} files, {len(claims)} claims")
    assert len(files) >= 7 and len(claims) >= 15  # every example of specs/examples
    assert run.code in (0, 1, 3)
    assert run.err == ""


def test_json_document_has_the_documented_shape(cli):
    files = example_files()
    run = cli("--json", *files)
    doc = run.json()
    assert set(doc) == {"files", "exit_code"} and doc["exit_code"] == run.code
    assert len(doc["files"]) == len(files) >= 7
    for f in doc["files"]:
        assert f["errors"] == []
        for result in f["results"]:
            assert set(result) >= KEYS
            assert result["kind"] == "claim"
            assert result["outcome"] in {"proved", "refuted", "unknown"}
            if result["outcome"] == "unknown":
                assert result["reason"] and result["certificate"] is None


def test_folders_are_searched_recursively_in_a_stable_order(cli, tmp_path):
    for sub in ("b", "a/deep"):
        (tmp_path / sub).mkdir(parents=True)
        (tmp_path / sub / "x.mlp").write_text("block F { activation relu dim 2 width 2 }\n"
                                              "query F\n")
    run = cli(tmp_path)
    files = [line.split(":")[0] for line in run.out.splitlines()[:-1]]
    assert files == [str(tmp_path / "a/deep/x.mlp"), str(tmp_path / "b/x.mlp")]


def test_queries_are_reported_as_queries(cli, write_spec):
    spec = write_spec("block F { activation relu dim 2 width 2 }\nquery F at width 3\n")
    run = cli("--json", spec)
    [result] = run.json()["files"][0]["results"]
    assert result["kind"] == "query" and result["statement"] == "query F at width 3"
    assert result["outcome"] in {"decided", "unknown"}


@pytest.mark.parametrize("argv", [["nothere.mlp"], []])
def test_missing_paths_exit_2_without_traceback(cli, argv):
    run = cli(*argv)
    assert run.code == 2
    assert "Traceback" not in run.err


def test_empty_folder_is_an_error(cli, tmp_path):
    run = cli(tmp_path)
    assert run.code == 2 and "no *.mlp files" in run.err


def test_spec_error_outranks_other_outcomes_and_json_lists_it(cli, tmp_path):
    (tmp_path / "bad.mlp").write_text("block R { activation relu dim 2 width 2 }\n"
                                      "claim Q is never absorbable\n")
    (tmp_path / "ok.mlp").write_text("block R { activation relu dim 2 width 2 }\nquery R\n")
    run = cli("--json", tmp_path)
    doc = run.json()
    assert run.code == doc["exit_code"] == 2
    bad = doc["files"][0]
    assert bad["errors"] == [{"line": 2, "column": 7,
                              "message": "no block named 'Q' is declared"}]
    assert "bad.mlp:2:7: error: no block named 'Q' is declared" in run.err


def test_summary_counts():
    assert summary([]) == ("summary: 0 files, 0 claims (0 proved, 0 refuted, 0 unknown), "
                           "0 queries (0 decided, 0 unknown), 0 files with errors")


@pytest.mark.parametrize("args", [("-j", "0"), ("--crosscheck", "-5"), ("-j", "two")])
def test_counts_below_their_least_value_are_usage_errors(cli, args):
    run = cli(*args, "specs/paper")
    assert run.code == 2 and "error: argument" in run.err and not run.out


def test_a_certificates_path_that_is_a_file_is_refused_before_deciding(cli, tmp_path):
    spec = tmp_path / "a.mlp"
    shutil.copy(CORPUS / "examples" / "relu_absorbable.mlp", spec)
    mine = tmp_path / "mine.mlp"
    mine.write_text("keep me\n")
    for target in (mine, mine / "sub"):
        run = cli("--certificates", target, spec)
        assert run.code == 2 and f"{mine} is not a folder" in run.err, run.err
        assert "Traceback" not in run.err and run.out == ""
    assert mine.read_text() == "keep me\n"


def test_a_certificate_that_cannot_be_written_is_an_error_not_a_traceback(cli, tmp_path,
                                                                          monkeypatch):
    from absorb_formal.certify import documents as proofs

    def refuse(path, data, update):
        raise PermissionError(13, "Permission denied", str(path))

    monkeypatch.setattr(proofs, "write", refuse)
    spec = tmp_path / "a.mlp"
    shutil.copy(CORPUS / "examples" / "relu_absorbable.mlp", spec)
    run = cli("--certificates", tmp_path / "out", spec)
    assert run.code == 2 and "cannot write: Permission denied" in run.err, run.err


@pytest.mark.parametrize("value", ["-1", "inf", "nan", "x"])
def test_a_timeout_must_be_a_finite_number_at_least_0(cli, tmp_path, value):
    spec = tmp_path / "a.mlp"
    shutil.copy(CORPUS / "examples" / "relu_absorbable.mlp", spec)
    run = cli("--timeout", value, spec)
    assert run.code == 2 and "--timeout" in run.err


def test_a_binary_file_given_as_a_spec_is_said_to_be_one_without_its_bytes(cli, tmp_path):
    import numpy as np

    np.savez(tmp_path / "w.npz", a=np.ones(3))
    run = cli(tmp_path / "w.npz")
    assert run.code == 2 and "w.npz:1:1: error: a binary file, not a spec" in run.err
    assert "PK" not in run.err


def test_update_without_certificates_is_a_usage_error(cli, tmp_path):
    spec = tmp_path / "a.mlp"
    shutil.copy(CORPUS / "examples" / "relu_absorbable.mlp", spec)
    run = cli("--update", spec)
    assert run.code == 2 and "--update needs --certificates" in run.err
