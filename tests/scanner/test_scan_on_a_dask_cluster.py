"""`absorb-prove scan --cluster`: sublayers decided on Dask workers (LocalCluster processes, or a
scheduler started here), with the same answers as in one process; a lost worker, a dead
deciding process or a task past its deadline gives `unknown` with the reason, never a hang;
memory estimates are Dask resources; without dask, `-j N` keeps the process pool."""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import subprocess
import sys
import time
from typing import Any

import pytest

from absorb_formal.checker.kernel.modlu import bytes_needed
from absorb_formal.model import memory
from absorb_formal.scanner import cluster
from absorb_formal.scanner.run import scan

from ..conftest import ROOT
from . import cluster_tasks
from .test_scan_by_naming_convention import gpt2
from .test_scan_results_resume import _rows, relu_stack

distributed = pytest.importorskip("distributed")


def _answers(doc: dict[str, Any]) -> dict[str, Any]:
    """A scan's JSON without what differs from run to run (seconds, the results file)."""
    return {"blocks": [{k: v for k, v in b.items() if k != "seconds"} for b in doc["blocks"]],
            "skipped": doc["skipped"], "exit_code": doc.get("exit_code")}


@pytest.fixture(scope="module")
def scheduler():
    """A scheduler with one worker process (MEMORY declared), reached by its address."""
    with distributed.LocalCluster(n_workers=1, threads_per_worker=1, processes=True,
                                  resources={"MEMORY": 2**34}, memory_limit=0,
                                  dashboard_address=":0", silence_logs=logging.CRITICAL) as found:
        yield found


def test_a_scan_on_local_worker_processes_gives_the_same_json_as_in_one_process(cli, tmp_path):
    folder = gpt2(tmp_path / "g", layers=3)
    alone = cli("scan", "--json", folder)
    spread = cli("scan", "--json", "--cluster", "local:2", folder)
    assert alone.code == spread.code == 0, spread.err
    assert _answers(spread.json()) == _answers(alone.json())
    assert "2 local worker process(es)" in spread.err


def test_a_scan_on_a_scheduler_address_gives_the_same_json(cli, tmp_path, scheduler):
    folder = gpt2(tmp_path / "g", layers=3, norms=False)
    alone = cli("scan", "--json", folder)
    there = cli("scan", "--json", "--cluster", scheduler.scheduler_address, folder)
    assert there.code == alone.code == 0, there.err
    assert _answers(there.json()) == _answers(alone.json())
    assert "MEMORY" not in there.err  # its worker declares it: nothing to say


def test_workers_without_a_memory_resource_get_the_tasks_without_it_and_the_scan_says_so(
        cli, tmp_path):
    folder = gpt2(tmp_path / "g", layers=2)
    with distributed.LocalCluster(n_workers=1, threads_per_worker=1, processes=True,
                                  memory_limit=0, dashboard_address=":0",
                                  silence_logs=logging.CRITICAL) as bare:
        run = cli("scan", "--json", "--cluster", bare.scheduler_address, folder)
    assert run.code == 0, run.err
    assert "declare no MEMORY resource" in run.err
    assert _answers(run.json()) == _answers(cli("scan", "--json", folder).json())


def test_the_timeout_of_each_question_holds_on_a_worker(cli, tmp_path):
    """The budget needs SIGALRM, which a worker's thread cannot have: the deciding process
    has it, so a question past --timeout is `unknown` saying so, as in one process."""
    folder = gpt2(tmp_path / "g", layers=2, norms=False, d=6, m=40)
    run = cli("scan", "--json", "--cluster", "local:1", "--timeout", "0.001", folder)
    assert run.code == 3, run.err
    for block in run.json()["blocks"]:
        assert block["absorbable"] == "unknown" and "timeout after 0.001 s" in block["reason"]


def _tasks(*jobs: tuple[str, Any], limit: float | None = 120.0, memory: int = 1
           ) -> list[cluster.Task]:
    return [cluster.Task(i, f"block {i}", job, memory, limit) for i, job in enumerate(jobs)]


def _decided(tasks: list[cluster.Task], where: Any) -> tuple[dict[int, cluster.Answer],
                                                            list[str]]:
    said: list[str] = []
    answers = {a.index: a for a in cluster.decide(tasks, cluster_tasks.act, where, said.append)}
    assert sorted(answers) == [t.index for t in tasks]  # every task answered, once
    return answers, said


def test_a_worker_killed_mid_task_gives_unknown_with_the_reason_and_the_others_finish():
    answers, _ = _decided(_tasks(("answer", 0), ("answer", 1), ("answer", 2),
                                 ("kill worker", 3)), "local:2")
    assert [answers[i].value for i in range(3)] == [0, 1, 2]
    assert not any(answers[i].reason for i in range(3))
    assert answers[3].value is None and "worker died" in answers[3].reason
    assert "KilledWorker" in answers[3].reason


def test_a_deciding_process_killed_mid_task_gives_unknown_and_its_worker_goes_on():
    answers, _ = _decided(_tasks(("kill self", 0), ("answer", 1), ("answer", 2)), "local:1")
    assert "its deciding process died (killed by signal 9 (SIGKILL" in answers[0].reason
    assert [answers[1].value, answers[2].value] == [1, 2]  # the same single worker


def test_a_task_past_its_deadline_is_stopped_and_unknown():
    answers, _ = _decided(_tasks(("sleep", 0), ("answer", 1), limit=1.0), "local:1")
    assert "ran past its time limit of 1 s" in answers[0].reason
    assert answers[1].value == 1


def test_two_tasks_whose_estimates_exceed_a_workers_memory_never_run_together():
    """One worker with two threads and MEMORY 100; two tasks of 60 each: the worker's own
    bookkeeping, read by each task as it starts, shows it running alone with 40 left."""
    with distributed.LocalCluster(n_workers=1, threads_per_worker=2, processes=True,
                                  resources={"MEMORY": 100}, memory_limit=0,
                                  dashboard_address=":0", silence_logs=logging.CRITICAL) as two, \
            distributed.Client(two) as client:
        answers, _ = _decided(_tasks(("answer", 0), ("answer", 1), memory=60), client)
        started = [msg for _, msg in client.get_events(cluster.TOPIC)]
    assert [answers[0].value, answers[1].value] == [0, 1]
    assert len(started) == 2
    assert all(msg["available"] == {"MEMORY": 40} and msg["executing"] == 1 for msg in started)


def test_a_task_estimated_beyond_every_worker_asks_for_the_largest_and_runs():
    with distributed.LocalCluster(n_workers=1, threads_per_worker=1, processes=True,
                                  resources={"MEMORY": 100}, memory_limit=0,
                                  dashboard_address=":0", silence_logs=logging.CRITICAL) as small, \
            distributed.Client(small) as client:
        answers, said = _decided(_tasks(("answer", 7), memory=10**12), client)
    assert answers[0].value == 7
    assert any("beyond every worker's MEMORY" in line for line in said)


def test_memory_estimates_count_the_exact_lu_and_the_weights():
    small, large = cluster.memory_estimate(3, 4, False, False), \
        cluster.memory_estimate(2048, 8192, False, False)
    assert large - small > 8 * 8193**2 + 32 * 2 * 2048 * 8192 - 8 * 5**2
    assert cluster.memory_estimate(8, 16, True, True) > cluster.memory_estimate(8, 16, False,
                                                                                False)
    assert cluster.memory_estimate(8, 16, False, False, depth=3) - \
        cluster.memory_estimate(8, 16, False, False) == 2 * 32 * 2 * 8 * 16  # two more layers
    assert cluster.time_limit(0, 4) is None and cluster.time_limit(10, 4) == 40 + cluster.GRACE


def test_a_remote_worker_decides_under_the_clients_memory_limit(scheduler, monkeypatch):
    """--memory reaches a task's deciding process with the task: a worker started elsewhere
    (here: before the limit was set) does not inherit it."""
    monkeypatch.setenv(memory.ENV, str(12345))
    answers, _ = _decided(_tasks(("memory", 0)), scheduler.scheduler_address)
    assert answers[0].value == 12345
    monkeypatch.delenv(memory.ENV)
    answers, _ = _decided(_tasks(("memory", 0)), scheduler.scheduler_address)
    assert answers[0].value is None  # and none when none is given


def test_under_a_memory_limit_a_task_counts_the_lu_at_that_limit(monkeypatch):
    """An LU beyond --memory runs out of core, holding about that much: the estimate says so,
    and so does the line that describes a local cluster."""
    free = cluster.memory_estimate(2048, 8192, False, False)
    monkeypatch.setenv(memory.ENV, str(10**8))  # what --memory 100MB leaves to the processes
    capped = cluster.memory_estimate(2048, 8192, False, False)
    assert capped == free - bytes_needed(8193) + 10**8
    assert cluster.memory_estimate(3, 4, False, False) < capped  # a small LU: itself
    said: list[str] = []
    answers = list(cluster.decide([], cluster_tasks.act, "local:1", said.append))
    assert answers == [] and "an exact LU holds at most 95.4 MiB (--memory)" in said[0]


def test_without_dask_j2_keeps_the_process_pool(cli, tmp_path, monkeypatch):
    folder = gpt2(tmp_path / "g", layers=2)
    expected = _answers(cli("scan", "--json", folder).json())
    monkeypatch.setitem(sys.modules, "distributed", None)  # `import distributed` fails
    assert not cluster.installed()

    def refused(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("no cluster without dask")

    monkeypatch.setattr(cluster, "decide", refused)
    pooled = cli("scan", "--json", "-j", "2", folder)
    assert pooled.code == 0, pooled.err
    assert _answers(pooled.json()) == expected and "cluster" not in pooled.err
    asked = cli("scan", "--cluster", "local:2", folder)
    assert asked.code == 2 and "needs the dask extra" in asked.err


def test_j2_with_dask_is_a_local_cluster_unless_told_otherwise(tmp_path):
    folder = gpt2(tmp_path / "g", layers=2)
    said: list[str] = []
    spread = scan(folder, workers=2, notify=said.append)
    assert any("2 local worker process(es)" in line for line in said)
    pooled = scan(folder, workers=2, cluster=False, notify=said.append)
    assert [b.as_json()["absorbable"] for b in spread.blocks] == \
        [b.as_json()["absorbable"] for b in pooled.blocks]


@pytest.mark.parametrize("value, words", [("local:0", "N >= 1"), ("local:x", "N >= 1"),
                                          ("somewhere", "tcp://HOST:PORT"),
                                          ("tcp://host", "needs a host and a port")])
def test_a_cluster_that_is_no_address_is_a_usage_error(cli, tmp_path, value, words):
    run = cli("scan", "--cluster", value, gpt2(tmp_path / "g"))
    assert run.code == 2 and words in run.err
    both = cli("scan", "--cluster", "local:1", "--no-cluster", gpt2(tmp_path / "g"))
    assert both.code == 2 and "contradict" in both.err


def test_ctrl_c_on_a_local_cluster_scan_ends_it_with_one_line_and_no_worker_traceback(
        tmp_path):
    """SIGINT to the whole process group, as a terminal sends it, once the first sublayer is
    stored: exit 130 and `interrupted`, no worker's KeyboardInterrupt traceback, and no
    worker or deciding process left behind."""
    folder = relu_stack(tmp_path / "s", layers=8, d=256, m=1024)
    database = tmp_path / "r.sqlite"
    scanning = subprocess.Popen(
        [sys.executable, "-m", "absorb_formal", "scan", folder, "--cluster", "local:2",
         "--results", database], env={**os.environ, "PYTHONPATH": str(ROOT)},
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    while _rows(database) < 1 and scanning.poll() is None:
        time.sleep(0.05)
    os.killpg(scanning.pid, signal.SIGINT)
    try:
        _, err = scanning.communicate(timeout=120)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(scanning.pid, signal.SIGKILL)
    text = err.decode()
    assert scanning.returncode == 130, text
    assert text.rstrip().endswith("interrupted") and "Traceback" not in text, text
    time.sleep(2)  # a deciding process ends within a second of its worker
    with contextlib.suppress(ProcessLookupError):
        os.killpg(scanning.pid, 0)  # raises when no process of the group is left
        pytest.fail("a process of the scan outlived it")
