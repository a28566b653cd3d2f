"""A deciding process beside each cluster worker: where a scan task is decided.

A Dask worker runs its tasks in threads, and the per-question budget (`decide/budget.py`)
needs SIGALRM, which Python delivers to the main thread only: decided in a worker's thread,
every statement would fail. So the task hands its job to a process of its own
(`python -m absorb_formal.scanner.decider`), whose main thread decides it as the process pool
of `-j N` does, and waits for the answer under a deadline. A deciding process that runs past
the deadline is killed; one that dies (killed for memory, a crash) is said to have died, with
its exit status and the last lines it wrote; in both cases the worker itself lives on and
takes the next task. Idle deciding processes are kept for the next task (the imports are
paid once per worker thread, not once per task).

The pipe carries pickles both ways between this worker and the process it started, never
anything read from a file or the network.
"""

from __future__ import annotations

import contextlib
import os
import pickle
import select
import signal
import struct
import subprocess
import sys
import tempfile
import threading
import time
from typing import Any

HEADER = struct.Struct("<Q")  # the byte length of the pickle that follows
STDERR_TAIL = 2000  # characters of a dead process's stderr kept in the reason


class Died(Exception):
    """The deciding process ended without an answer, or ran past its deadline; the message is
    the reason shown for the sublayer."""


class Decider:
    """One deciding process: `run(function, argument, limit)` is `function(argument)` decided
    there, within `limit` seconds (None: no limit); raises Died."""

    def __init__(self) -> None:
        self.errors = tempfile.TemporaryFile()  # noqa: SIM115 - closed by stop()
        path = os.pathsep.join([p for p in sys.path if p] + [os.environ.get("PYTHONPATH", "")])
        self.process = subprocess.Popen(
            [sys.executable, "-m", "absorb_formal.scanner.decider"], stdin=subprocess.PIPE,
            stdout=subprocess.PIPE, stderr=self.errors, env={**os.environ, "PYTHONPATH": path})

    def run(self, function: Any, argument: Any, limit: float | None) -> Any:
        assert self.process.stdin is not None and self.process.stdout is not None
        self.errors.seek(0)
        self.errors.truncate()
        data = pickle.dumps((function, argument), protocol=pickle.HIGHEST_PROTOCOL)
        deadline = None if limit is None else time.monotonic() + limit
        try:
            self.process.stdin.write(HEADER.pack(len(data)) + data)
            self.process.stdin.flush()
            size = HEADER.unpack(self._read(HEADER.size, deadline, limit))[0]
            status, value = pickle.loads(self._read(size, deadline, limit))
        except (BrokenPipeError, EOFError, struct.error, pickle.UnpicklingError):
            reason = self._death()
            self.stop()
            raise Died(reason) from None
        if status == "error":
            raise Died(f"the deciding process failed: {value}")
        return value

    def _read(self, size: int, deadline: float | None, limit: float | None) -> bytes:
        assert self.process.stdout is not None
        stream = self.process.stdout.fileno()
        chunks, left = [], size
        while left:
            wait = None if deadline is None else max(0.0, deadline - time.monotonic())
            ready, _, _ = select.select([stream], [], [], wait)
            if not ready:
                self.stop()
                raise Died(f"ran past its time limit of {limit:g} s (the --timeout of each "
                           "question, and time to read the tensors): its deciding process "
                           "was stopped")
            chunk = os.read(stream, min(left, 1 << 20))
            if not chunk:
                raise EOFError
            chunks.append(chunk)
            left -= len(chunk)
        return b"".join(chunks)

    def _death(self) -> str:
        if self.process.stdin is not None:
            with contextlib.suppress(OSError):
                self.process.stdin.close()  # a process that closed its answers but lives on
        try:
            code = self.process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.process.kill()
            code = self.process.wait()
        if code < 0:
            name = signal.Signals(-code).name if -code in signal.valid_signals() else str(-code)
            said = f"killed by signal {-code} ({name}" + (
                ": out of memory?)" if -code == signal.SIGKILL else ")")
        else:
            said = f"exit status {code}"
        self.errors.seek(0)
        tail = self.errors.read().decode("utf-8", "replace").strip()[-STDERR_TAIL:]
        return f"its deciding process died ({said})" + (f": {tail}" if tail else "")

    @property
    def alive(self) -> bool:
        return self.process.poll() is None

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait()
        for stream in (self.process.stdin, self.process.stdout):
            if stream is not None:
                stream.close()
        self.errors.close()


_IDLE: list[Decider] = []
_LOCK = threading.Lock()


def decide(function: Any, argument: Any, limit: float | None) -> Any:
    """`function(argument)` in an idle deciding process of this worker (one is started when
    none is idle), within `limit` seconds; raises Died."""
    with _LOCK:
        decider = _IDLE.pop() if _IDLE else None
    if decider is None or not decider.alive:
        decider = Decider()
    try:
        value = decider.run(function, argument, limit)
    except BaseException:
        decider.stop()
        raise
    with _LOCK:
        _IDLE.append(decider)
    return value


# ---- the deciding process ----------------------------------------------------------------------

def _orphaned(parent: int) -> None:
    """End this process when the worker that started it is gone (its pipe then says nothing
    more, and a long decision would run on for nobody)."""
    while True:
        time.sleep(1.0)
        if os.getppid() != parent:
            os._exit(1)


def _exactly(stream: Any, size: int) -> bytes | None:
    """`size` bytes from a pipe, or None when it closes first."""
    chunks, left = [], size
    while left:
        chunk = stream.read(left)
        if not chunk:
            return None
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


def main() -> None:
    requests = os.fdopen(os.dup(0), "rb", buffering=0)
    answers = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)  # whatever the deciding code prints goes to stderr, never into the answers
    threading.Thread(target=_orphaned, args=(os.getppid(),), daemon=True).start()
    while True:
        head = _exactly(requests, HEADER.size)
        data = None if head is None else _exactly(requests, HEADER.unpack(head)[0])
        if data is None:
            return  # the worker closed the pipe
        try:
            function, argument = pickle.loads(data)
            answer: tuple[str, Any] = ("ok", function(argument))
        except Exception as error:  # said as the sublayer's reason, never a traceback here
            answer = ("error", f"{type(error).__name__}: {error}")
        out = pickle.dumps(answer, protocol=pickle.HIGHEST_PROTOCOL)
        answers.write(HEADER.pack(len(out)) + out)
        answers.flush()


if __name__ == "__main__":
    main()
