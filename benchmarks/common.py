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

from absorb_formal.decide import budget

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


# ---- fresh processes, measured (python benchmarks/measure.py ARGV) --------------------------

def log(line: str) -> None:
    print(f"{line}   [load {load()}]", file=sys.stderr, flush=True)


def load() -> str:
    return " ".join(f"{x:.1f}" for x in os.getloadavg())


def compile_tree(tree: Path) -> None:
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(tree / "absorb_formal")],
                   check=True, capture_output=True)


def run(argv: list[str], cwd: Path, tree: Path = ROOT,
        shown: tuple[str, ...] = ("summary:", "check:")) -> dict[str, Any]:
    """`python benchmarks/measure.py ARGV` with `tree` first on the path: wall s, peak MB, and
    the last output line starting with one of `shown`."""
    env = {**os.environ, "PYTHONPATH": str(tree), "PYTHONHASHSEED": "0"}
    start = time.perf_counter()
    done = subprocess.run([sys.executable, str(HERE / "measure.py"), *argv], cwd=cwd,
                          capture_output=True, text=True, env=env)
    wall = time.perf_counter() - start
    peak = None
    for line in reversed(done.stderr.strip().splitlines()):
        if line.startswith('{"peak_mb"'):
            peak = float(line.split(":")[1].strip(" }"))
            break
    summary = [ln for ln in done.stdout.splitlines() if ln.startswith(shown)]
    return {"s": wall, "mb": peak, "code": done.returncode, "load": load(),
            "out": summary[-1] if summary else done.stdout.strip()[-200:]}


def row(label: str, res: dict[str, Any]) -> tuple[Any, ...]:
    """A table row of one measured job."""
    return (label, f"{res['s']:.2f}", res["mb"], res["load"], res["out"])


def baseline(label: str, seconds: float) -> tuple[Any, ...]:
    return (f"{label} (baseline)", f"{seconds:.2f}", "—", load(), "")


def median_run(argv: list[str], cwd: Path, repeat: int, tree: Path = ROOT) -> dict[str, Any]:
    runs = sorted((run(argv, cwd, tree) for _ in range(repeat)), key=lambda r: r["s"])
    return runs[len(runs) // 2]
