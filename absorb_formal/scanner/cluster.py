"""A scan's sublayers, or a corpus run's spec files, decided on a Dask cluster (`--cluster`,
the `dask` extra).

One task per sublayer (`scanner/run.py`), or per spec file (`absorb-prove -j N PATH...`,
`cli/prove.py`). A scan's task carries the spec text of its sublayer (the other blocks'
lines blank, so that line numbers stay those of the whole spec) and the folder its
`load(...)`s are relative to; a spec file's task carries the file's absolute path. Never
arrays: the worker reads the tensors itself, from the same path (an external cluster's
workers must see the checkpoint or the specs there too). On the worker the task is
decided in a deciding process of its own (`decider.py`: the per-question budget needs the
main thread), under a deadline of `time_limit` seconds.

Each task declares its memory estimate (`memory_estimate`) as the Dask resource MEMORY; the
workers of `local:N` are started with MEMORY = their share of the memory available, so a
worker never runs two tasks at once that do not fit together. An external scheduler whose
workers declare no MEMORY gets the tasks without it (with it, they would wait forever), and
the scan says so. A task asking for more than any worker has asks for the most one has: it
runs alone there, and the decision itself says when its exact work does not fit.

Nothing hangs: a task past its deadline is stopped on its worker; a worker that dies
(KilledWorker after `allowed-failures`; one retry on `local:N`), a lost scheduler, a task
the client hears nothing of long after its deadline, and a cluster with no worker for
`NO_WORKERS` seconds give `unknown` for the sublayers concerned, with the reason, and the
scan goes on. Dask is imported only here, and only when a cluster is asked for.
"""

from __future__ import annotations

import contextlib
import os
import queue
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from ..model.blocks import Spec, Statement
from ..model.result import unknown
from ..report import Entry
from .found import ScanError

LOCAL = "local:"
TOPIC = "absorb-formal-started"  # each task, as it starts: its key and its worker's resources
GRACE = 60.0  # seconds a task may take beyond its questions' budgets (reading the tensors)
SLACK = 60.0  # the client's wait beyond a task's deadline before it gives up on the worker
NO_WORKERS = 120.0  # seconds with no worker at all before the remaining tasks give up
LOST = 30.0  # seconds without the scheduler before the remaining tasks give up
POLL = 0.5
CONNECT = 30.0  # seconds to reach an external scheduler
BASE_BYTES = 256 << 20  # a deciding process before it reads anything (measured ~200 MiB)
ENTRY_BYTES = 32  # per weight: the stored bits, their float64 widening and exact copies


def installed() -> bool:
    """Whether the `dask` extra (dask.distributed) can be imported."""
    try:
        import distributed  # noqa: F401
    except ImportError:
        return False
    return True


def problem(text: str) -> str:
    """Why `text` is not a --cluster value ("" when it is): `local:N` or `SCHEME://ADDRESS`."""
    if text.startswith(LOCAL):
        count = text[len(LOCAL):]
        if not count.isdigit() or int(count) < 1:
            return f"{text!r}: local:N needs a whole number of workers N >= 1"
        return ""
    if "://" not in text:
        return (f"{text!r}: give a scheduler's address (tcp://HOST:PORT) or local:N (N worker "
                "processes on this machine)")
    if text.startswith("tcp://") and _host_port(text) is None:
        return f"{text!r}: a tcp address needs a host and a port: tcp://HOST:PORT"
    return ""


def _host_port(address: str) -> tuple[str, int] | None:
    """(host, port) of a tcp://HOST:PORT address ([IPv6] allowed), None if it has none."""
    from urllib.parse import urlsplit

    try:
        parts = urlsplit(address)
        port = parts.port
    except ValueError:
        return None
    if not parts.hostname or port is None:
        return None
    return parts.hostname, port


def unreachable(address: str) -> str:
    """Why nothing answers at a tcp:// scheduler address, found at once ("" when something
    listens there, or for other schemes, which Dask itself reaches): a refused connection
    would otherwise cost Dask's whole connect timeout."""
    import socket

    found = _host_port(address) if address.startswith("tcp://") else None
    if found is None:
        return ""
    try:
        with socket.create_connection(found, timeout=CONNECT):
            return ""
    except OSError as error:
        return f"cannot reach the scheduler: {error.strerror or error}"


def chosen(workers: int, cluster: Any) -> Any:
    """Where a run's tasks are decided: the Dask cluster `cluster` names ("local:N" by default
    for workers > 1 with dask installed), or None (in this process, or a process pool of
    `workers`). `cluster` False: never a cluster. Raises ScanError for a `cluster` that is no
    address, or when dask is not installed."""
    if cluster is False:
        return None
    if cluster is None:
        return f"{LOCAL}{workers}" if workers > 1 and installed() else None
    if isinstance(cluster, str) and (why := problem(cluster)):
        raise ScanError(f"--cluster {why}")
    if not installed():
        raise ScanError("--cluster needs the dask extra: pip install 'absorb_formal[dask]'")
    return cluster


def unanswered(spec: Spec, statements: Iterable[Statement], reason: str) -> list[Entry]:
    """The entries of statements whose task brought no answer: each unknown, saying why."""
    said = unknown(f"not decided: {reason}")
    return [Entry(s, said, 0.0, spec.expected(s), said) for s in statements]


def memory_estimate(dim: int, width: int, gated: bool, biased: bool, depth: int = 1) -> int:
    """Bytes one sublayer's task may hold at its peak, erring large: the exact LU of order
    m + 1 over float64 (`checker/kernel/modlu.bytes_needed`, the largest single array a
    decision allocates; at most `--memory` when that is given, beyond which the LU runs out
    of core) plus its weights (`depth` layers) at ENTRY_BYTES each and the deciding
    process."""
    from ..checker.kernel.modlu import bytes_needed
    from ..model.memory import given

    weights = depth * (width * dim * (3 if gated else 2) + (width * (2 if gated else 1) + dim
                                                             if biased else 0))
    lu = bytes_needed(width + 1)
    cap = given()
    return (lu if cap is None else min(lu, cap)) + ENTRY_BYTES * weights + BASE_BYTES


def time_limit(timeout: float, statements: int) -> float | None:
    """A task's deadline on its worker: the budget of each of its questions, plus time to
    read the tensors (GRACE, or the budget of one more question if that is longer); None
    when the questions have no budget (--timeout 0)."""
    if not timeout or timeout <= 0:
        return None
    return statements * timeout + max(GRACE, timeout)


@dataclass(frozen=True)
class Task:
    """One sublayer to decide: `function(job)` on a worker, under `limit` seconds."""

    index: int
    name: str  # the sublayer's place in the checkpoint, for keys and messages
    job: Any
    memory: int  # bytes (memory_estimate)
    limit: float | None


@dataclass(frozen=True)
class Answer:
    """What came back for task `index`: `value` (function(job)) or `reason` (why none came:
    the sublayer is unknown); `tool` is the workers' `results.tool_key()`."""

    index: int
    value: Any = None
    reason: str = ""
    tool: str = ""


# ---- on the worker ---------------------------------------------------------------------------

def _versioned(argument: tuple[Callable[[Any], Any], Any, int | None]) -> tuple[str, Any]:
    """In the deciding process: (the code that decides, function(job)), under the client's
    `--memory` (`cap`; None: the memory available there)."""
    from ..model.memory import set_limit
    from .results import tool_key

    function, job, cap = argument
    set_limit(cap)
    return tool_key(), function(job)


def run_task(function: Callable[[Any], Any], job: Any, limit: float | None,
             cap: int | None = None) -> tuple[Any, ...]:
    """A Dask task: `function(job)` in a deciding process of this worker, within `limit`
    seconds and under the memory limit `cap` (the client's --memory, which a remote worker
    does not inherit); ("ok", value, tool) or ("fault", reason)."""
    with contextlib.suppress(Exception):  # outside a worker (tests), or an old distributed
        from distributed import get_worker

        worker = get_worker()
        worker.log_event(TOPIC, {"key": str(worker.get_current_task()),
                                 "available": dict(worker.state.available_resources),
                                 "executing": len(worker.state.executing)})
    from . import decider

    try:
        tool, value = decider.decide(_versioned, (function, job, cap), limit)
    except decider.Died as died:
        return ("fault", str(died))
    return ("ok", value, tool)


# ---- on the client ---------------------------------------------------------------------------

def decide(tasks: list[Task], function: Callable[[Any], Any], cluster: Any,
           notify: Callable[[str], None]) -> Iterator[Answer]:
    """Each task's Answer as it arrives, on `cluster`: "local:N", a scheduler's address, or
    a `distributed.Client` (left open). Raises ScanError when the cluster cannot be reached
    or started; KeyboardInterrupt cancels what is left."""
    import logging

    import dask
    from distributed import Client, LocalCluster

    own = None
    if isinstance(cluster, str) and cluster.startswith(LOCAL):
        count = int(cluster[len(LOCAL):])
        from ..model.memory import available, given, shown

        share = max(1, available() // count)
        cap = given()
        notify(f"cluster: {count} local worker process(es), one task at a time each, "
               f"MEMORY {shown(share)} each (the memory available, shared)"
               + ("" if cap is None else f"; an exact LU holds at most {shown(cap)} "
                  "(--memory), beyond it out of core"))
        with dask.config.set({"distributed.scheduler.allowed-failures": 1}):
            own = LocalCluster(n_workers=count, threads_per_worker=1, processes=True,
                               resources={"MEMORY": share}, memory_limit=0,
                               dashboard_address=":0", silence_logs=logging.CRITICAL,
                               preload=[f"{__package__}.local_worker"])
        client = Client(own)
    elif isinstance(cluster, str):
        if why := unreachable(cluster):
            raise ScanError(f"--cluster {cluster}: {why}")
        try:
            client = Client(cluster, timeout=CONNECT)
        except (OSError, TimeoutError, ValueError) as error:
            raise ScanError(f"--cluster {cluster}: cannot reach the scheduler: "
                            f"{error}") from None
    else:
        client = cluster
    try:
        yield from _run(client, tasks, function, notify)
    finally:
        if client is not cluster:
            with contextlib.suppress(Exception):
                client.close()
        if own is not None:
            with contextlib.suppress(Exception):
                own.close()


def _workers(client: Any) -> dict[str, Any]:
    return dict(client.scheduler_info(n_workers=-1).get("workers", {}))


def _run(client: Any, tasks: list[Task], function: Callable[[Any], Any],
         notify: Callable[[str], None]) -> Iterator[Answer]:
    from ..model.memory import given

    started: dict[str, float] = {}

    def heard(event: tuple[float, Any]) -> None:
        with contextlib.suppress(Exception):
            started.setdefault(str(event[1]["key"]), time.monotonic())

    client.subscribe_topic(TOPIC, heard)
    finished: queue.Queue[Any] = queue.Queue()
    waiting = list(reversed(tasks))  # submitted from the end of the list: in order
    flying: dict[str, tuple[Task, Any]] = {}
    token = os.urandom(4).hex()
    cap = given()  # --memory, for every task's deciding process (remote ones included)
    said: set[str] = set()
    lost_since = empty_since = None

    def say(line: str) -> None:
        if line not in said:
            said.add(line)
            notify(line)

    try:
        while waiting or flying:
            now = time.monotonic()
            workers = _workers_or_none(client)
            if workers is None or client.status != "running":
                lost_since = lost_since or now
                if now - lost_since > LOST:
                    yield from _give_up(client, flying, waiting, "lost the connection to "
                                        "the Dask scheduler")
                    return
            else:
                lost_since = None
                empty_since = None if workers else (empty_since or now)
                if empty_since is not None and now - empty_since > NO_WORKERS:
                    yield from _give_up(client, flying, waiting, f"the Dask cluster had no "
                                        f"worker for {NO_WORKERS:g} s")
                    return
                slots = max(1, sum(int(w.get("nthreads", 1)) for w in workers.values()))
                supplies = [float(w.get("resources", {}).get("MEMORY", 0))
                            for w in workers.values()]
                while waiting and len(flying) < slots and workers:
                    task = waiting.pop()
                    key = f"absorb-formal-scan-{token}-{task.index}"
                    future = client.submit(run_task, function, task.job, task.limit, cap,
                                           key=key,
                                           resources=_resources(task, supplies, say),
                                           pure=False, retries=0)
                    flying[key] = (task, future)
                    future.add_done_callback(finished.put)
            try:
                future = finished.get(timeout=POLL)
            except queue.Empty:
                future = None
            if future is not None and future.key in flying:
                task, _ = flying.pop(future.key)
                yield _answer(task, future)
            for key, (task, future) in list(flying.items()):
                begun = started.get(key)
                if task.limit is not None and begun is not None and \
                        time.monotonic() - begun > task.limit + SLACK:
                    flying.pop(key)
                    future.cancel()
                    yield Answer(task.index, reason=f"no answer from its worker "
                                 f"{task.limit + SLACK:g} s after it started (its deadline: "
                                 f"{task.limit:g} s): cancelled")
    except KeyboardInterrupt:
        with contextlib.suppress(Exception):
            client.cancel([future for _, future in flying.values()])
        raise
    finally:
        with contextlib.suppress(Exception):
            client.unsubscribe_topic(TOPIC)


def _workers_or_none(client: Any) -> dict[str, Any] | None:
    try:
        return _workers(client)
    except Exception:  # the scheduler is gone or not answering (OSError, TimeoutError, ...)
        return None


def _resources(task: Task, supplies: list[float], say: Callable[[str], None]
               ) -> dict[str, float] | None:
    if not any(supplies):
        say("cluster: its workers declare no MEMORY resource, so tasks are submitted without "
            "their memory estimates and a worker may run several at once (start workers with "
            "--resources MEMORY=BYTES to have the estimates respected)")
        return None
    most = max(supplies)
    if task.memory > most:
        from ..model.memory import shown

        say(f"cluster: {task.name} is estimated at {shown(task.memory)}, beyond every "
            f"worker's MEMORY (at most {shown(int(most))}): it asks for all of one worker's")
        return {"MEMORY": most}
    return {"MEMORY": float(task.memory)}


def _answer(task: Task, future: Any) -> Answer:
    status = future.status
    if status == "finished":
        try:
            result = future.result(timeout=CONNECT)
        except Exception as error:
            return Answer(task.index, reason=f"its answer could not be fetched: "
                                             f"{type(error).__name__}: {error}")
        if result[0] == "ok":
            return Answer(task.index, value=result[1], tool=result[2])
        return Answer(task.index, reason=result[1])
    if status == "error":
        try:
            error = future.exception(timeout=CONNECT)
        except Exception as fetching:
            error = fetching
        if type(error).__name__ == "KilledWorker":
            return Answer(task.index, reason=f"its worker died while deciding it, on every "
                                             f"try (KilledWorker: {error})")
        return Answer(task.index, reason=f"its task failed on the worker: "
                                         f"{type(error).__name__}: {error}")
    return Answer(task.index, reason=f"the Dask scheduler dropped its task ({status}: a "
                                     "worker or the scheduler was lost)")


def _give_up(client: Any, flying: dict[str, tuple[Task, Any]], waiting: list[Task],
             reason: str) -> Iterator[Answer]:
    with contextlib.suppress(Exception):
        client.cancel([future for _, future in flying.values()])
    for task, _ in flying.values():
        yield Answer(task.index, reason=reason)
    flying.clear()
    while waiting:
        yield Answer(waiting.pop().index, reason=reason)
