"""Timing, medians and markdown tables shared by the benchmark suites."""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from absorb_formal import budget

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent


@dataclass(frozen=True)
class Timed:
    seconds: float
    verdict: str  # "absorbable", "not absorbable", "unknown", "timeout", ...


def timed(fn: Callable[[], str], limit_s: float) -> Timed:
    """Run fn under the tool's per-claim deadline (SIGALRM + solver limits)."""
    start = time.perf_counter()
    try:
        with budget.limit(limit_s):
            verdict = fn()
    except budget.ClaimTimeout:
        verdict = "timeout"
    return Timed(time.perf_counter() - start, verdict)


def median(values: Sequence[float]) -> float:
    return statistics.median(values)


def verdicts(runs: Sequence[Timed]) -> str:
    counts: dict[str, int] = {}
    for r in runs:
        counts[r.verdict] = counts.get(r.verdict, 0) + 1
    return ", ".join(f"{v} ×{n}" if n > 1 else v for v, n in sorted(counts.items()))


def seconds(x: float | None, timeout: bool = False) -> str:
    if x is None:
        return "—"
    text = f"{x:.3f}" if x < 10 else f"{x:.1f}"
    return f"> {text}" if timeout else text


def table(header: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


def measured_process(argv: list[str], cwd: Path | None = None) -> dict[str, Any]:
    """Run `python benchmarks/measure.py ARGV…` in a fresh interpreter: wall seconds (parent's
    clock, including start-up and imports), peak RSS (the child's own), exit code, output."""
    start = time.perf_counter()
    done = subprocess.run([sys.executable, str(HERE / "measure.py"), *argv], cwd=cwd,
                          capture_output=True, text=True, env={**os.environ, "PYTHONHASHSEED": "0"})
    wall = time.perf_counter() - start
    tail = done.stderr.strip().splitlines()[-1] if done.stderr.strip() else "{}"
    try:
        stats = json.loads(tail)
    except json.JSONDecodeError:
        stats = {}
    return {"seconds": wall, "peak_mb": stats.get("peak_mb"), "code": done.returncode,
            "stdout": done.stdout, "stderr": done.stderr}
