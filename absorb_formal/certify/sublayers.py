"""Certificates of normalised sublayers (docs/rules.md "Normalised sublayers", §10.2;
`decide/sublayer.py`, `decide/ray_limit.py`).

- Post-norm: the reduced block's own certificate, wrapped with the reduction that made it
  (`normalised sublayer`), which the checker repeats on the block.
- Pre-norm and sandwich: a point x0 and a direction w where the branch's limit along rays
  moves (`ray limit`), confirmed by the checker's own exact test before it is returned; or,
  for gated blocks with RMSNorm, the rule alone (`gated pre-norm jacobian`: no field but the
  kind, the checker re-derives its preconditions).
"""

from __future__ import annotations

from collections.abc import Sequence
from fractions import Fraction
from typing import Any

from ..checker.kernel.contract import Kind


def normalised_sublayer(reduction: str, certificate: dict[str, Any]) -> dict[str, Any]:
    return {"kind": Kind.NORMALISED_SUBLAYER, "reduction": reduction, "certificate": certificate}


def ray_limit(x0: Sequence[Fraction], w: Sequence[Fraction]) -> dict[str, Any]:
    return {"kind": Kind.RAY_LIMIT, "x0": [str(v) for v in x0], "w": [str(v) for v in w]}


def gated_jacobian() -> dict[str, Any]:
    return {"kind": Kind.GATED_PRE_NORM_JACOBIAN}
