"""Start-up: `absorb-prove` on a spec of one claim against `python -c "import numpy"`, in one
run (the issue "The house": within 3×). Fresh processes, each round running every command
once in turn so that all see the same load; medians of N rounds (default 15) of wall seconds
(what a user waits) and of CPU seconds (user + system of the child).

  python benchmarks/bench_startup.py [--repeat N] [--before DIR]

The claim is bench_llm_size's tiny one (`R is absorbable`, relu, d = 2, m = 3, default
options: the float cross-check of 100,000 points included). The cache of parser tables and
lemma results is a temporary folder, filled by one run first: a warm start, as every run
after a user's first is. Each tree runs two ways: byte-compiled (`compileall`, as `pip
install` leaves a package) and from source (a copy without .pyc, PYTHONDONTWRITEBYTECODE:
how an editable install runs in this project's shell, which compiles every module it
imports on every start). --before DIR adds the tree in DIR (e.g. `git archive` of an older
commit), run as `python -m absorb_formal`, as this tree is beside it. Prints markdown on
stdout, progress (with the load average) on stderr.
"""

from __future__ import annotations

import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench_llm_size import tiny
from common import ROOT, compile_tree, load, log, table

TARGET = 3.0  # × `import numpy`
NUMPY = 'python -c "import numpy"'


def timed(argv: list[str], cwd: Path, env: dict[str, str]) -> tuple[float, float, str]:
    """(wall s, CPU s of the child, its last stdout line); exits on a failed run."""
    before, start = os.times(), time.perf_counter()
    done = subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True)
    wall, after = time.perf_counter() - start, os.times()
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(argv)}: exit {done.returncode}\n{done.stderr}")
    cpu = (after.children_user - before.children_user) + \
        (after.children_system - before.children_system)
    return wall, cpu, (done.stdout.strip().splitlines() or [""])[-1]


def source_copy(tree: Path, folder: Path) -> Path:
    """The package of `tree` copied into `folder` without any .pyc."""
    shutil.copytree(tree / "absorb_formal", folder / "absorb_formal",
                    ignore=shutil.ignore_patterns("__pycache__"))
    return folder


def commands(before: Path | None, folder: Path) -> dict[str, tuple[list[str], dict[str, str]]]:
    """Label → (argv, the environment's changes): the baseline first."""
    script = Path(sys.executable).with_name("absorb-prove")
    module = [sys.executable, "-m", "absorb_formal", "tiny.mlp"]
    trees = {"": ROOT} | ({"before: ": before} if before is not None else {})
    out: dict[str, tuple[list[str], dict[str, str]]] = {
        NUMPY: ([sys.executable, "-c", "import numpy"], {})}
    if script.is_file():
        out["absorb-prove tiny.mlp (byte-compiled)"] = ([str(script), "tiny.mlp"],
                                                        {"PYTHONPATH": str(ROOT)})
    for name, tree in trees.items():
        if name or not script.is_file():
            out[f"{name}python -m absorb_formal tiny.mlp (byte-compiled)"] = (
                module, {"PYTHONPATH": str(tree)})
        source = source_copy(tree, folder / f"source{len(out)}")
        out[f"{name}python -m absorb_formal tiny.mlp (from source, no .pyc)"] = (
            module, {"PYTHONPATH": str(source), "PYTHONDONTWRITEBYTECODE": "1"})
    return out


def main() -> None:
    args = sys.argv[1:]
    repeat = int(args[args.index("--repeat") + 1]) if "--repeat" in args else 15
    before = Path(args[args.index("--before") + 1]).resolve() if "--before" in args else None
    for tree in [ROOT] + ([before] if before is not None else []):
        compile_tree(tree)
    loads = [load()]
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        tiny(folder)
        env = {**os.environ, "ABSORB_FORMAL_CACHE": str(folder / "cache"),
               "ABSORB_FORMAL_CACHE_KEY": str(folder / "key")}
        runs = commands(before, folder)
        for argv, changes in runs.values():  # fill the cache (parser tables, lemmas)
            timed(argv, folder, {**env, **changes})
        walls: dict[str, list[float]] = {label: [] for label in runs}
        cpus: dict[str, list[float]] = {label: [] for label in runs}
        said: dict[str, str] = {}
        for n in range(repeat):
            for label, (argv, changes) in runs.items():
                wall, cpu, said[label] = timed(argv, folder, {**env, **changes})
                walls[label].append(wall)
                cpus[label].append(cpu)
            log(f"round {n + 1}/{repeat}: " + ", ".join(f"{walls[label][-1]:.3f}"
                                                        for label in runs) + " s")
        loads.append(load())
    wall0, cpu0 = statistics.median(walls[NUMPY]), statistics.median(cpus[NUMPY])
    rows = []
    for label in runs:
        wall, cpu = statistics.median(walls[label]), statistics.median(cpus[label])
        rows.append((f"`{label}`", f"{wall:.3f}", f"{wall / wall0:.2f}×", f"{cpu:.3f}",
                     f"{cpu / cpu0:.2f}×", said[label].split(",")[0] if label != NUMPY else ""))
    print(f"Medians of {repeat} rounds, load average {loads[0]} … {loads[1]}; target: "
          f"within {TARGET:g}× `import numpy` (wall).\n")
    print(table(("command", "wall s", "× numpy", "CPU s", "× numpy (CPU)", "says"), rows))


if __name__ == "__main__":
    main()
