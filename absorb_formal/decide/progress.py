"""Progress bars for long computations, on an interactive stderr only.

Bars never go to a stream that is not a terminal (pipes, files, tests) and the CLI turns
them off under --json. `shown_on(stream)` enables them for the computations it encloses;
`bar(...)` is None when they are off, so callers write `if b is not None: b.update()`.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any, TextIO

_stream: TextIO | None = None


def interactive(stream: TextIO | None) -> bool:
    return stream is not None and bool(getattr(stream, "isatty", lambda: False)())


@contextlib.contextmanager
def shown_on(stream: TextIO | None) -> Iterator[None]:
    """Show bars on `stream` (when it is a terminal) inside the body."""
    global _stream
    previous, _stream = _stream, stream if interactive(stream) else None
    try:
        yield
    finally:
        _stream = previous


def bar(desc: str, unit: str, total: int | None = None, stream: TextIO | None = None,
        delay: float = 1.0) -> Any:
    """A tqdm bar on `stream` (default: the one `shown_on` enabled), shown only after
    `delay` seconds; None when bars are off."""
    stream = stream if stream is not None else _stream
    if not interactive(stream):
        return None
    from tqdm import tqdm

    return tqdm(total=total, unit=unit, file=stream, leave=False, desc=desc, delay=delay)
