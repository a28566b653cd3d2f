"""`absorb-prove -j N / --cluster ADDRESS PATH...`: spec files decided on Dask workers, one task
per file, with the same output and certificates as in one process; a spec error is reported
without a task; a task that brings no answer makes its file's statements unknown with the
reason, and the run goes on in order."""

from __future__ import annotations

import io
import logging
import shutil
import socket
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from absorb_formal.cli import prove
from absorb_formal.paths import collect
from absorb_formal.scanner import cluster

from ..conftest import CORPUS
from ..scanner import cluster_tasks

distributed = pytest.importorskip("distributed")

ARGS = ["--json", "--no-timing", "--crosscheck", "1000"]


def _corpus(folder: Path) -> Path:
    shutil.copytree(CORPUS / "examples", folder)
    return folder


def _certificates(folder: Path) -> dict[str, bytes]:
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted(folder.rglob("*"))
            if p.is_file()}


def test_a_corpus_on_local_workers_gives_the_same_output_and_certificates(cli, tmp_path):
    specs = _corpus(tmp_path / "specs")
    alone = cli(*ARGS, "--certificates", tmp_path / "one", specs)
    spread = cli(*ARGS, "--cluster", "local:2", "--certificates", tmp_path / "two", specs)
    assert spread.code == alone.code and spread.code in (0, 1, 3), spread.err
    assert spread.out == alone.out  # the same JSON, byte for byte, in the same order
    assert "2 local worker process(es)" in spread.err
    assert _certificates(tmp_path / "two") == _certificates(tmp_path / "one")
    assert len(_certificates(tmp_path / "one")) >= 15
    lines = cli("--expect", "-j", "2", specs)  # -j 2 with dask: a LocalCluster as well
    assert lines.code == 0 and "local worker process(es)" in lines.err, lines.err


def test_a_corpus_on_a_scheduler_address_gives_the_same_output(cli, tmp_path):
    specs = _corpus(tmp_path / "specs")
    with distributed.LocalCluster(n_workers=1, threads_per_worker=1, processes=True,
                                  resources={"MEMORY": 2**34}, memory_limit=0,
                                  dashboard_address=":0", silence_logs=logging.CRITICAL) as found:
        there = cli(*ARGS, "--cluster", found.scheduler_address, specs)
    assert there.out == cli(*ARGS, specs).out, there.err


def test_a_spec_error_is_reported_in_its_place_and_the_other_files_are_decided(cli, tmp_path):
    folder = tmp_path / "specs"
    folder.mkdir()
    (folder / "a.mlp").write_text("block A { activation relu\n dim 1\n width 1\n"
                                  " up = [[1]]\n down = [[-1]]\n}\nclaim A is absorbable\n")
    (folder / "b.mlp").write_text("block B { activation relu\n dim 1\n width 1\n"
                                  " up = [[1]]\n down = [[-1]\n}\n")
    (folder / "c.mlp").write_text("block C { activation relu\n dim 1\n width 1\n"
                                  " up = [[1]]\n down = [[1]]\n}\nclaim C is absorbable\n")
    alone = cli(folder)
    spread = cli("--cluster", "local:1", folder)
    assert spread.code == alone.code == 2
    assert spread.out == alone.out
    assert [line for line in spread.err.splitlines() if "error" in line] == \
        [line for line in alone.err.splitlines() if "error" in line]
    assert f"{folder / 'b.mlp'}:6:1: error: " in spread.err
    decided = [line.split(": ")[1] for line in spread.out.splitlines()[:-1]]
    assert decided == ["proved", "refuted"]  # a.mlp, then c.mlp (x + relu(x) is not linear)


def test_a_file_whose_task_brings_no_answer_is_unknown_with_the_reason_in_its_place(tmp_path):
    specs = _corpus(tmp_path / "specs")
    shutil.copy(specs / "relu_absorbable.mlp", specs / "m_dies.mlp")
    items = collect([specs], "*.mlp")
    settings = (1000, "numpy", "auto", False, 8, 0.0, "theory")
    said = io.StringIO()
    reports = list(prove._on_cluster(items, settings, "local:1", said,
                                     function=cluster_tasks.prove_or_die))
    assert [r.path for r in reports] == [item[1] for item in items]  # every file, in order
    lost = next(r for r in reports if "m_dies" in r.path)
    assert lost.entries and all(e.result.outcome == "unknown" for e in lost.entries)
    assert all("not decided: its deciding process died" in e.result.reason
               for e in lost.entries)
    twin = next(r for r in reports if r.path.endswith("relu_absorbable.mlp"))
    assert [e.statement.statement for e in twin.entries] == \
        [e.statement.statement for e in lost.entries]
    assert any(e.result.outcome == "proved" for e in twin.entries)
    assert all(not e.result.reason.startswith("not decided") for r in reports if r is not lost
               for e in r.entries)


def test_without_dask_j2_keeps_the_process_pool(cli, tmp_path, monkeypatch):
    specs = _corpus(tmp_path / "specs")
    expected = cli(*ARGS, specs).out
    monkeypatch.setitem(sys.modules, "distributed", None)  # `import distributed` fails
    assert not cluster.installed()

    def refused(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("no cluster without dask")

    monkeypatch.setattr(cluster, "decide", refused)
    pooled = cli(*ARGS, "-j", "2", specs)
    assert pooled.out == expected and "cluster" not in pooled.err
    asked = cli("--cluster", "local:2", specs)
    assert asked.code == 2 and "needs the dask extra" in asked.err and asked.out == ""


@pytest.mark.parametrize("args, words", [
    (("--cluster", "local:0"), "N >= 1"), (("--cluster", "somewhere"), "tcp://HOST:PORT"),
    (("--cluster", "tcp://"), "needs a host and a port"),
    (("--cluster", "local:1", "--no-cluster"), "contradict")])
def test_a_cluster_that_cannot_be_used_is_a_usage_error_before_any_work(cli, tmp_path, args,
                                                                       words):
    run = cli(*args, _corpus(tmp_path / "specs"))
    assert run.code == 2 and words in run.err and run.out == ""


def test_a_scheduler_address_where_nothing_listens_is_refused_at_once(cli, tmp_path):
    with socket.socket() as free:  # a port nobody listens on, once closed
        free.bind(("127.0.0.1", 0))
        port = free.getsockname()[1]
    run = cli("--cluster", f"tcp://127.0.0.1:{port}", _corpus(tmp_path / "specs"))
    assert run.code == 2 and "cannot reach the scheduler" in run.err and run.out == ""
    assert "Traceback" not in run.err
    assert "Timed out" not in run.err  # refused by the socket, not after Dask's timeout


def test_a_symlinked_spec_loads_from_the_folder_of_its_link_as_in_one_process(cli, tmp_path):
    """A spec's `load(...)` is relative to the folder it is given in; a worker given the link's
    target would read another folder's weights (here: not absorbable where the link's are)."""
    specs, other = tmp_path / "specs", tmp_path / "other"
    specs.mkdir()
    other.mkdir()
    up = np.array([[1, 0], [0, 1], [1, 1]], float)
    np.savez(specs / "w.npz", up=up, down=np.array([[-1, 0, 0.75], [0, -1, 0.25]]))
    np.savez(other / "w.npz", up=up, down=np.array([[1, 0, 0.75], [0, 1, 0.25]]))
    (other / "real.mlp").write_text('block R { activation relu\n dim 2\n width 3\n'
                                    ' up = load("w.npz", "up")\n down = load("w.npz", "down")\n'
                                    '}\nclaim R is absorbable\n')
    (specs / "link.mlp").symlink_to(other / "real.mlp")
    alone = cli(*ARGS, specs)
    spread = cli(*ARGS, "--cluster", "local:1", specs)
    assert alone.json()["files"][0]["results"][0]["outcome"] == "proved", alone.out
    assert spread.out == alone.out, spread.err
