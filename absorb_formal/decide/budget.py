"""Per-claim time budget (`--timeout`): a deadline that long computations respect.

Python code is interrupted by SIGALRM (`ClaimTimeout`); solvers are handed the remaining time
as their own limit, since a signal cannot interrupt them inside C code. Where SIGALRM does not
exist (Windows) only the solver limits apply.
"""

from __future__ import annotations

import contextlib
import signal
import time
from collections.abc import Iterator

_deadline: float | None = None
_seconds: float | None = None  # the current limit, for messages ("timeout after 5 s")


class ClaimTimeout(BaseException):
    """The claim's time budget ran out.

    A BaseException, like KeyboardInterrupt: the `except Exception` that turns a sympy or
    solver failure into "not proved" must not swallow it, or a timeout would be recorded
    (and memoised) as a fact about the mathematics."""


def remaining_ms(cap_ms: int) -> int:
    """The solver limit to use now: at most `cap_ms`, at least 1 ms."""
    if _deadline is None:
        return cap_ms
    return max(1, min(cap_ms, int((_deadline - time.monotonic()) * 1000)))


def timeout_reason() -> str:
    """How a part cut short by the current limit is described: "timeout after 5 s"."""
    return f"timeout after {_seconds or 0:g} s"


def spent() -> bool:
    """Whether the current deadline has passed (False when there is none)."""
    return _deadline is not None and time.monotonic() >= _deadline - 0.05


def _expired(signum: int, frame: object) -> None:
    raise ClaimTimeout


@contextlib.contextmanager
def limit(seconds: float | None) -> Iterator[None]:
    """Run the body with a deadline `seconds` from now (None or <= 0: no limit)."""
    global _deadline, _seconds
    if not seconds or seconds <= 0:
        yield
        return
    _deadline, _seconds = time.monotonic() + seconds, seconds
    armed = hasattr(signal, "setitimer")
    if armed:
        previous = signal.signal(signal.SIGALRM, _expired)
        signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        if armed:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, previous)
        _deadline = None
