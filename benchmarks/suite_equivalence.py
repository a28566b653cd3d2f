"""`claim A equals B` for ReLU blocks: canonical forms (docs/rules.md §4) vs the direct z3 encoding
`∃x: A(x) ≠ B(x)`, on equal-by-construction pairs and near misses."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from baselines import z3_equivalence
from common import median, seconds, table, timed
from instances import equivalence_pair

from absorb_formal.decide import equivalence

WIDTHS = (4, 8, 16, 32, 48, 64, 128, 256)
DIMS = (4, 16)
Z3_LIMIT_S = 60.0


@dataclass
class Row:
    d: int
    m: int
    kind: str
    tool: list[float]
    tool_verdicts: set[str]
    z3: list[float]
    z3_verdicts: set[str]

    @property
    def z3_answered(self) -> bool:
        return bool(self.z3) and "timeout" not in self.z3_verdicts

    @property
    def ratio(self) -> float | None:
        return median(self.z3) / median(self.tool) if self.z3_answered else None


def _tool(a: Any, b: Any) -> str:
    equal = equivalence.decide(a, b).equal
    return {True: "equal", False: "different", None: "unknown"}[equal]


def run(seeds: int, log: Any) -> list[Row]:
    rows = []
    _tool(*equivalence_pair(2, 2, 0, True))  # warm-up: σ's properties are proved once
    for d in DIMS:
        for equal in (True, False):
            kind = "equal" if equal else "near miss"
            z3_done = False
            for m in WIDTHS:
                row = Row(d, m, kind, [], set(), [], set())
                for seed in range(seeds):
                    a, b = equivalence_pair(d, m, seed, equal)
                    t = timed(lambda a=a, b=b: _tool(a, b), 60.0)
                    row.tool.append(t.seconds)
                    row.tool_verdicts.add(t.verdict)
                    if not z3_done:
                        verdict, spent = z3_equivalence(a, b, Z3_LIMIT_S)
                        row.z3.append(spent)
                        row.z3_verdicts.add(verdict)
                        z3_done = verdict == "timeout"  # one timeout ends z3's sweep
                rows.append(row)
                log(f"equals d={d} m={m} {kind}: tool {median(row.tool):.4f} s "
                    f"{row.tool_verdicts}; z3 {row.z3} {row.z3_verdicts}")
    return rows


def markdown(rows: list[Row], seeds: int) -> str:
    body = []
    for r in rows:
        z3 = "—"
        if r.z3:
            z3 = (seconds(median(r.z3)) if r.z3_answered
                  else f"> {Z3_LIMIT_S:.0f} (timeout)")
        ratio = f"{r.ratio:,.0f}×" if r.ratio is not None else "—"
        body.append((r.d, r.m, r.kind, f"{median(r.tool):.4f}", "/".join(sorted(r.tool_verdicts)),
                     z3, "/".join(sorted(r.z3_verdicts)) or "—", ratio))
    return "\n\n".join([
        f"Median of {seeds} seeds. z3: limit {Z3_LIMIT_S:.0f} s; its first timeout ends its "
        "sweep for that (d, pair kind), later widths show —. Near miss: one weight of B moved "
        "by 1/1000.",
        table(("d", "m", "pairs", "canonical forms s", "verdict", "z3 s", "z3 verdict",
               "z3 / forms"), body)])


def headline(rows: list[Row]) -> list[str]:
    out = []
    for d in DIMS:
        for kind in ("equal", "near miss"):
            answered = [r for r in rows if r.d == d and r.kind == kind and r.z3_answered]
            widest = max(answered, key=lambda r: r.m, default=None)
            top = [r for r in rows if r.d == d and r.kind == kind and r.m == max(WIDTHS)]
            if widest is not None and widest.ratio is not None:
                out.append(f"d = {d}, {kind}: largest width z3 answers is m = {widest.m} "
                           f"({seconds(median(widest.z3))} s); canonical forms are "
                           f"{widest.ratio:,.0f}× faster there; m = {max(WIDTHS)} takes "
                           f"{median(top[0].tool):.3f} s")
    return out
