"""The outcome of deciding one claim or query (docs/language.md, "Outcomes and exit codes")."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

PROVED, REFUTED, UNKNOWN, DECIDED = "proved", "refuted", "unknown", "decided"
ERROR = "error"  # a numeric check contradicted a proof: a bug, reported loudly


@dataclass(frozen=True)
class Result:
    """What the engine concluded about one statement.

    outcome: proved | refuted | unknown (claims), decided | unknown (queries); error when
    a numeric cross-check contradicts the exact verdict (a bug in the tool).
    verdict: the mathematical finding in words ("absorbable at width 3"), empty if unknown.
    method: the rule or engine that decided (e.g. "T1 homogeneity"), or "none".
    reason: why the outcome is unknown (empty otherwise).
    certificate: JSON-ready evidence (docs/certificates.md) for proved/refuted/decided outcomes.
    """

    outcome: str
    verdict: str = ""
    method: str = "none"
    reason: str = ""
    certificate: dict[str, Any] | None = None
    min_width: int | None = None
    extra: dict[str, Any] = field(default_factory=dict)


def unknown(reason: str) -> Result:
    return Result(UNKNOWN, reason=reason)
