"""Scan results kept in an SQLite file as they arrive: a scan killed part-way resumes where it
stopped, with the same JSON, spec and certificates as a scan never stopped; a file that is not
ours is neither used nor changed; a changed tensor, an edited row or an unknown answer is
decided again."""

from __future__ import annotations

import json
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from absorb_formal.model.result import unknown
from absorb_formal.scanner import results, run
from absorb_formal.scanner.run import scan
from absorb_formal.weights.safetensors import write as write_safetensors

from ..conftest import ROOT
from .test_scan_by_naming_convention import gpt2


def _answers(doc: dict[str, Any]) -> dict[str, Any]:
    return {"blocks": [{k: v for k, v in b.items() if k != "seconds"} for b in doc["blocks"]],
            "skipped": doc["skipped"], "exit_code": doc.get("exit_code")}


def _rows(path: Path) -> int:
    try:
        with sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True) as db:
            return db.execute("SELECT count(*) FROM answers").fetchone()[0]
    except sqlite3.Error:  # not there yet, or being created
        return 0


def relu_stack(folder: Path, layers: int, d: int, m: int, seed: int = 0) -> Path:
    """A plain MLP stack in GPT-2's Conv1D layout (no norm: each sublayer is its bare block),
    float32 N(0, 0.02²) weights: each layer takes about half a second to decide."""
    rng = np.random.default_rng(seed)
    tensors = {}
    for i in range(layers):
        tensors[f"h.{i}.mlp.c_fc.weight"] = (rng.normal(size=(d, m)) * 0.02).astype(np.float32)
        tensors[f"h.{i}.mlp.c_proj.weight"] = (rng.normal(size=(m, d)) * 0.02).astype(
            np.float32)
    folder.mkdir(parents=True, exist_ok=True)
    with open(folder / "model.safetensors", "wb") as stream:
        write_safetensors(stream, tensors, {})
    (folder / "config.json").write_text(json.dumps(
        {"n_embd": d, "n_inner": m, "activation_function": "relu"}))
    return folder


def test_a_cluster_scan_killed_part_way_resumes_with_the_same_json_spec_and_certificates(
        cli, tmp_path, monkeypatch):
    pytest.importorskip("distributed")
    monkeypatch.chdir(tmp_path)
    relu_stack(Path("model"), layers=8, d=256, m=1024)
    args = ["scan", "model", "--json", "--write-spec", "run/model.mlp", "--certificates",
            "run/certs"]
    reference = cli("scan", "model", "--json", "--write-spec", "ref/model.mlp",
                    "--certificates", "ref/certs", "--no-results")
    assert reference.code == 0, reference.err
    database = Path("run/certs") / results.DEFAULT_NAME  # the default: the certificates folder
    env = {k: v for k, v in os.environ.items() if k != "ABSORB_FORMAL_RESULTS"}
    killed = subprocess.Popen([sys.executable, "-m", "absorb_formal", *args, "--cluster",
                               "local:2"], env={**env, "PYTHONPATH": str(ROOT)},
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                              start_new_session=True)
    while _rows(database) < 1 and killed.poll() is None:
        time.sleep(0.05)
    os.killpg(killed.pid, signal.SIGKILL)  # the scan, its workers and their deciding processes
    _, err = killed.communicate()
    stored = _rows(database)
    assert 1 <= stored < 8, err.decode()
    assert not Path("run/model.mlp").exists()  # written at the end only

    monkeypatch.delenv("ABSORB_FORMAL_RESULTS")
    decided = []
    monkeypatch.setattr(run, "_decide_block", lambda job: decided.append(job[3]) or
                        _decide_block(job))
    resumed = cli(*args)  # in this process, one sublayer after the other: `decided` sees them
    assert resumed.code == 0, resumed.err
    assert f"{stored} of 8 sublayer(s) already decided there, not decided again" in resumed.err
    doc = resumed.json()
    assert len(doc["results"]["reused"]) == stored and doc["results"]["stored"] == 8 - stored
    assert len(decided) == 8 - stored
    assert _answers(doc) == _answers(reference.json())
    assert Path("run/model.mlp").read_text() == Path("ref/model.mlp").read_text()
    names = sorted(p.name for p in Path("ref/certs").glob("*.json"))
    assert names == sorted(p.name for p in Path("run/certs").glob("*.json")) and len(names) == 8
    for name in names:
        assert (Path("run/certs") / name).read_bytes() == (Path("ref/certs") / name).read_bytes()
    check = cli("check", "run/certs")
    assert check.code == 0 and check.out.count(": valid") == 8, check.out
    assert _rows(database) == 8


_decide_block = run._decide_block


def test_a_rerun_takes_every_stored_sublayer_and_decides_none_again(tmp_path, monkeypatch):
    folder = gpt2(tmp_path / "g", layers=3)
    file = tmp_path / "r.sqlite"
    first = scan(folder, results=file)
    assert first.results == {"file": str(file), "reused": [], "stored": 3}
    monkeypatch.setattr(run, "_decide_block", lambda job: pytest.fail("decided again"))
    said: list[str] = []
    again = scan(folder, results=file, notify=said.append)
    assert again.results["reused"] == [b.block.where for b in first.blocks]
    assert said == [f"results: {file}: 3 of 3 sublayer(s) already decided there, not decided "
                    "again"]
    assert _answers(again.as_json()) == _answers(first.as_json())
    assert [e.result for e in again.report.entries] == [e.result for e in first.report.entries]
    assert [e.exact for e in again.report.entries] == [e.exact for e in first.report.entries]


def test_a_rerun_with_nothing_left_to_decide_starts_no_cluster(tmp_path):
    pytest.importorskip("distributed")
    folder = relu_stack(tmp_path / "s", layers=2, d=3, m=4)
    file = tmp_path / "r.sqlite"
    scan(folder, results=file)
    said: list[str] = []
    again = scan(folder, results=file, cluster="local:2", notify=said.append)
    assert len(again.results["reused"]) == 2
    assert not any(line.startswith("cluster:") for line in said), said


def test_rows_stored_by_other_code_are_decided_again_and_the_scan_says_so(tmp_path,
                                                                         monkeypatch):
    folder = relu_stack(tmp_path / "s", layers=2, d=3, m=4)
    file = tmp_path / "r.sqlite"
    monkeypatch.setattr(results, "tool_key", lambda: "absorb_formal 0 code 0123456789abcdef")
    scan(folder, results=file)
    monkeypatch.undo()
    said: list[str] = []
    again = scan(folder, results=file, notify=said.append)
    assert again.results["reused"] == [] and again.results["stored"] == 2
    assert said == [f"results: {file}: 2 sublayer(s) stored there by other code (absorb_formal "
                    f"0 code 0123456789abcdef; this is {results.tool_key()}) are decided "
                    "again: answers are kept per version of the code that decides"]
    said.clear()
    assert len(scan(folder, results=file, notify=said.append).results["reused"]) == 2
    assert not any("other code" in line for line in said)  # the rows of this code are used
    other = relu_stack(tmp_path / "other", layers=2, d=3, m=4, seed=1)  # the same places
    said.clear()
    assert scan(other, results=file, notify=said.append).results["reused"] == []
    assert not any("other code" in line for line in said)  # other tensors: other questions


def test_the_same_tensors_at_another_path_are_the_same_question(tmp_path):
    folder = gpt2(tmp_path / "g", layers=2)
    file = tmp_path / "r.sqlite"
    scan(folder, results=file)
    moved = shutil.copytree(folder, tmp_path / "elsewhere" / "g")
    assert len(scan(moved, results=file).results["reused"]) == 2


def test_a_changed_tensor_is_another_question(tmp_path):
    folder = relu_stack(tmp_path / "s", layers=2, d=3, m=4)
    file = tmp_path / "r.sqlite"
    scan(folder, results=file)
    relu_stack(folder, layers=2, d=3, m=4, seed=1)  # every weight another
    again = scan(folder, results=file)
    assert again.results == {"file": str(file), "reused": [], "stored": 2}


def test_unknown_answers_are_not_stored_and_are_decided_again(tmp_path, monkeypatch):
    folder = gpt2(tmp_path / "g", layers=2)
    file = tmp_path / "r.sqlite"

    def cut_short(job: Any) -> Any:  # each block's last statement runs out of time
        entries, interrupted, seconds = _decide_block(job)
        said = unknown("timeout after 1 s")
        return [*entries[:-1], replace(entries[-1], result=said, exact=said)], interrupted, \
            seconds

    monkeypatch.setattr(run, "_decide_block", cut_short)
    cut = scan(folder, results=file)
    assert all("timeout after 1 s" in b.bare.reason for b in cut.blocks)  # the bare query
    assert cut.results["stored"] == 0 and _rows(file) == 0
    monkeypatch.setattr(run, "_decide_block", _decide_block)
    again = scan(folder, results=file)
    assert again.results["reused"] == [] and again.results["stored"] == 2


def test_an_edited_row_is_not_believed(tmp_path):
    folder = gpt2(tmp_path / "g", layers=2)
    file = tmp_path / "r.sqlite"
    first = scan(folder, results=file)
    with sqlite3.connect(file) as db:
        db.execute("UPDATE answers SET payload = replace(payload, '\"refuted\"', '\"proved\"')")
    again = scan(folder, results=file)
    assert again.results["reused"] == [] and again.results["stored"] == 2  # decided, replaced
    assert _answers(again.as_json()) == _answers(first.as_json())
    assert len(scan(folder, results=file).results["reused"]) == 2


@pytest.mark.parametrize("content", ["text", "sqlite"])
def test_a_file_that_is_not_a_results_database_is_neither_used_nor_changed(
        cli, tmp_path, monkeypatch, content):
    folder = gpt2(tmp_path / "g", layers=2)
    foreign = tmp_path / "work" / results.DEFAULT_NAME
    foreign.parent.mkdir()
    if content == "text":
        foreign.write_text("my notes\n")
    else:
        with sqlite3.connect(foreign) as db:
            db.execute("CREATE TABLE meta (name TEXT, value TEXT)")
            db.execute("INSERT INTO meta VALUES ('format', 'something else')")
        db.close()
    before = foreign.read_bytes()
    asked = cli("scan", folder, "--results", foreign)  # named: refused before anything is done
    assert asked.code == 2 and "not an absorb_formal results database" in asked.err
    assert "nothing was decided" in asked.err and "not kept" not in asked.err  # it stopped
    monkeypatch.chdir(foreign.parent)  # the default place: said, and the scan goes on
    monkeypatch.delenv("ABSORB_FORMAL_RESULTS")
    run_ = cli("scan", "--json", folder)
    assert run_.code == 0 and "neither used nor changed" in run_.err
    assert run_.json()["results"] is None
    assert foreign.read_bytes() == before


def test_a_results_database_of_another_schema_is_left_alone(tmp_path):
    folder = gpt2(tmp_path / "g", layers=2)
    file = tmp_path / "r.sqlite"
    scan(folder, results=file)
    with sqlite3.connect(file) as db:
        db.execute("UPDATE meta SET value = '0' WHERE name = 'schema'")
    db.close()
    before = file.read_bytes()
    said: list[str] = []
    again = scan(folder, results=file, notify=said.append)
    assert again.results is None and any("schema '0'" in line for line in said)
    assert file.read_bytes() == before
    assert "schema '0'" in results.problem(file)


def test_results_go_to_the_certificates_folder_then_beside_the_spec_then_here(
        tmp_path, monkeypatch, cli):
    monkeypatch.delenv("ABSORB_FORMAL_RESULTS")
    name = results.DEFAULT_NAME
    assert results.default_file(Path("c"), Path("s/x.mlp")) == Path("c") / name
    assert results.default_file(None, Path("s/x.mlp")) == Path("s") / name
    assert results.default_file(None, None) == Path.cwd() / name
    monkeypatch.setenv("ABSORB_FORMAL_RESULTS", "off")
    assert results.default_file(None, None) is None
    monkeypatch.delenv("ABSORB_FORMAL_RESULTS")
    monkeypatch.chdir(tmp_path)
    folder = gpt2(tmp_path / "g", layers=1)
    assert cli("scan", folder, "--no-results").code == 0 and not (tmp_path / name).exists()
    assert cli("scan", folder).code == 0 and _rows(tmp_path / name) == 1
    both = cli("scan", folder, "--results", "x.sqlite", "--no-results")
    assert both.code == 2 and "contradict" in both.err


def test_a_row_being_written_when_the_scan_is_killed_is_rolled_back_and_the_file_kept(
        tmp_path):
    folder = gpt2(tmp_path / "g", layers=2)
    file = tmp_path / "r.sqlite"
    scan(folder, results=file)
    code = ("import os, signal, sqlite3\n"
            f"db = sqlite3.connect({str(file)!r}, isolation_level=None)\n"
            "db.execute('BEGIN IMMEDIATE')\n"
            "db.execute(\"DELETE FROM answers\")\n"
            "db.execute(\"INSERT INTO answers VALUES ('k', 'b', 'p', 't', '{}', 'd', 's')\")\n"
            "os.kill(os.getpid(), signal.SIGKILL)\n")
    killed = subprocess.run([sys.executable, "-c", code], check=False)
    assert killed.returncode == -signal.SIGKILL
    assert Path(f"{file}-journal").exists()  # the half-written transaction
    assert results.problem(file) == ""
    again = scan(folder, results=file)
    assert len(again.results["reused"]) == 2 and _rows(file) == 2
