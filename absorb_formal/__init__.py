"""absorb_formal: can an MLP absorb its own skip connection? Decided exactly, with certificates.

The Python API (absorb_formal.api, imported on first use so that `import absorb_formal`
stays light): `prove(source)` decides a spec's claims and queries, `check(path)` re-verifies
certificate documents; `StatementResult`, `CheckResult` and `InvalidSpec` are their types.
`scan(path)` finds and decides every MLP sublayer of a checkpoint (`absorb_formal.scanner`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

__all__ = ["CheckResult", "InvalidSpec", "StatementResult", "check", "prove", "scan"]

if TYPE_CHECKING:
    from .api import CheckResult, InvalidSpec, StatementResult, check, prove
    from .scanner.run import scan


def __getattr__(name: str) -> Any:
    if name == "scan":
        from .scanner.run import scan

        return scan
    if name in __all__:
        from . import api

        return getattr(api, name)
    raise AttributeError(f"module 'absorb_formal' has no attribute {name!r}")
