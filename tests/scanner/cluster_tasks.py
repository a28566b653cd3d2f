"""Task functions for the cluster tests, run in a worker's deciding process (scanner/decider.py):
each job is (what to do, a value). Imported there by name, so they live in a module, not in a
test file."""

from __future__ import annotations

import os
import signal
import time
from typing import Any


def act(job: tuple[str, Any]) -> Any:
    """'answer': the value back; 'kill worker': kill the worker process that started this
    deciding process; 'kill self': kill this deciding process; 'sleep': never answer;
    'memory': the memory limit it decides under."""
    what, value = job
    if what == "kill worker":
        os.kill(os.getppid(), signal.SIGKILL)
        time.sleep(600)
    if what == "kill self":
        os.kill(os.getpid(), signal.SIGKILL)
    if what == "sleep":
        time.sleep(600)
    if what == "memory":
        from absorb_formal.model.memory import given

        return given()
    return value


def prove_or_die(job: tuple[str, str, Any]) -> Any:
    """A corpus run's task (`cli/prove._prove_job`), except that a spec file whose name holds
    "dies" kills this deciding process instead."""
    from absorb_formal.cli.prove import _prove_job

    if "dies" in job[1]:
        os.kill(os.getpid(), signal.SIGKILL)
    return _prove_job(job)
