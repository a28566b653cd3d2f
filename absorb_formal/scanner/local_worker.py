"""Preloaded by the workers of `--cluster local:N` (`cluster.py`): Ctrl-C at a terminal reaches
the whole process group, workers included, and each would print its own KeyboardInterrupt
traceback. The scan's own process handles it (the tasks cancelled, the cluster closed, what
was decided printed), so a local worker ignores SIGINT; its deciding process ends when the
worker does (`decider._orphaned`)."""

from __future__ import annotations

import signal
import threading
from typing import Any


def dask_setup(worker: Any) -> None:
    """Dask's preload hook, run in the worker's process as it starts."""
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGINT, signal.SIG_IGN)
