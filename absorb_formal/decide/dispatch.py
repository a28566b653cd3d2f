"""Route each statement to the rules that can decide it (MATH.md §3–6)."""

from __future__ import annotations

from ..model import Spec, Statement
from ..result import Result, unknown

NO_RULE = "no rule decides this yet"


def decide(spec: Spec, statement: Statement) -> Result:
    """Decide one claim or query of `spec`; `unknown` with a reason when no rule applies."""
    return unknown(NO_RULE)
