"""The corpus as a user runs it: `absorb-prove specs/` in a fresh process (the README's main
job, with its 100k-point cross-checks), wall time and the ten slowest claims."""

from __future__ import annotations

import json
from typing import Any

from common import ROOT, measured_process, table

REPEAT = 3


def run(log: Any) -> dict[str, Any]:
    out = {}
    for name, argv in (("default", ["prove", "--json", "--expect", "specs"]),
                       ("--crosscheck 0",
                        ["prove", "--json", "--expect", "--crosscheck", "0", "specs"]),
                       ("-j 2", ["prove", "--json", "--expect", "-j", "2", "specs"])):
        runs = sorted((measured_process(argv, cwd=ROOT) for _ in range(REPEAT)),
                      key=lambda res: res["seconds"])
        res = out[name] = runs[len(runs) // 2]  # the median of three runs
        log(f"corpus {name}: {res['seconds']:.2f} s, exit {res['code']}")
    return out


def markdown(r: dict[str, Any]) -> str:
    report = json.loads(r["default"]["stdout"])
    claims = [(res.get("seconds") or 0.0, f"{f['path']}:{res['line']}", res["statement"],
               res["outcome"]) for f in report["files"] for res in f["results"]]
    claims.sort(key=lambda c: -c[0])
    total = sum(c[0] for c in claims)
    rows = [(f"{s:.3f}", where, stmt, outcome) for s, where, stmt, outcome in claims[:10]]
    default, quick = r["default"]["seconds"], r["--crosscheck 0"]["seconds"]
    return "\n\n".join([
        f"`absorb-prove --expect specs/` (median of {REPEAT} runs): **{default:.1f} s** wall "
        f"({len(claims)} claims and queries, "
        f"{r['default']['peak_mb']:.0f} MB peak; target < 10 s: "
        f"{'met' if default < 10 else 'MISSED'}); with `--crosscheck 0`: {quick:.1f} s; with "
        f"`-j 2` (files in two processes, same output): {r['-j 2']['seconds']:.1f} s. "
        f"Sum of per-claim times: {total:.1f} s; the rest is start-up, imports and parsing.",
        "Slowest ten (seconds include the 100k-point numeric cross-check of each witness):",
        table(("s", "where", "statement", "outcome"), rows)])
