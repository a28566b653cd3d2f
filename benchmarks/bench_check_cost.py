"""What checking costs against proving, per large certificate kind (target: the checker at
most 1.2× the prover). Fresh processes, start-up included, the package
byte-compiled first; one temporary folder, its disk cache on.

  python benchmarks/bench_check_cost.py [--before DIR] [--repeat N] [NAME ...]

Per instance: the prover (`--crosscheck 0 --certificates`), the first check with no
checker entries on disk (its lemmas proved with sympy, as on a fresh machine), and the
check with them (the steady state): medians of N (default 3) rounds, prover and checker
alternating. --before DIR also checks with the tree in DIR (e.g. `git archive` of an older
commit). Instances: gpt2 (modular functional: one GPT-2-shaped bf16 gelu_tanh block with
biases, bench_llm_size's), twice (unique subset solution: bench_unique's gpt2-twice), int64
(own neurons, rows of J negated: bench_unique's int64), doubles (own neurons + doubles and
minimal width bounds: bench_doubles' d = 64 block). Last, the start-up of one tiny claim
against `python -c "import numpy"` (target: ≤ 4×). Prints markdown on stdout, progress (with
the load average) on stderr.
"""

from __future__ import annotations

import os
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

from bench_doubles import small
from bench_llm_size import numpy_import, tiny
from bench_unique import int64, planted
from common import ROOT, compile_tree, load, log, median_run, run, table
from suite_checkpoints import gpt2


def _gpt2(folder: Path) -> str:
    gpt2(folder, "one", 1, bf16=True)
    return "one.mlp"


def _unique(make: Any) -> Any:
    def write(folder: Path) -> str:
        (folder / "b.mlp").write_text(make(folder), encoding="utf-8")
        return "b.mlp"
    return write


def _doubles(folder: Path) -> str:
    small(folder)
    return "small.mlp"


CASES = {"gpt2": _gpt2, "twice": _unique(lambda f: planted(f, 2.0)), "int64": _unique(int64),
         "doubles": _doubles}


def forget_checker_entries(cache: Path) -> None:
    for entry in cache.glob("checker-lemma-*"):
        entry.unlink()


def median(values: list[float]) -> str:
    return f"{statistics.median(values):.2f}"


def main() -> None:
    args = sys.argv[1:]
    repeat = int(args[args.index("--repeat") + 1]) if "--repeat" in args else 3
    before = Path(args[args.index("--before") + 1]) if "--before" in args else None
    names = [a for a in args if a in CASES] or list(CASES)
    for tree in [ROOT] + ([before] if before is not None else []):
        compile_tree(tree)
    rows = []
    for name in names:
        with tempfile.TemporaryDirectory() as tmp:
            folder = Path(tmp)
            cache = folder / "cache"
            os.environ["ABSORB_FORMAL_CACHE"] = str(cache)
            spec = CASES[name](folder)
            prove_argv = ["prove", "--crosscheck", "0", "--timeout", "1200", "--update",
                          "--certificates", "c", spec]
            run(prove_argv, folder)  # the prover's own cache filled, outside the figures
            proves, colds, warms, olds, loads = [], [], [], [], []
            outcome = ""
            for _ in range(repeat):
                loads.append(load())
                proved = run(prove_argv, folder)
                forget_checker_entries(cache)
                cold = run(["prove", "check", "c"], folder)
                warm = run(["prove", "check", "c"], folder)
                proves.append(proved["s"])
                colds.append(cold["s"])
                warms.append(warm["s"])
                outcome = warm["out"]
                if before is not None:
                    olds.append(run(["prove", "check", "c"], folder, before)["s"])
                log(f"{name}: prove {proved['s']:.2f} check cold {cold['s']:.2f} warm "
                    f"{warm['s']:.2f}" + (f" before {olds[-1]:.2f}" if olds else ""))
            p, w = statistics.median(proves), statistics.median(warms)
            rows.append((name, median(proves), median(colds), median(warms), f"{w / p:.2f}×",
                         median(olds) if olds else "—", f"{loads[0]} … {load()}", outcome))
    with tempfile.TemporaryDirectory() as tmp:  # start-up: a tiny claim against numpy's
        folder = Path(tmp)
        os.environ["ABSORB_FORMAL_CACHE"] = str(folder / "cache")
        tiny(folder)
        run(["prove", "--crosscheck", "0", "tiny.mlp"], folder)  # fills the cache
        base, warm = numpy_import(5), median_run(["prove", "tiny.mlp"], folder, 5)
        print(f"tiny claim: {warm['s']:.2f} s = {warm['s'] / base:.1f}× `import numpy` "
              f"({base:.2f} s), load {warm['load']} (target ≤ 4×)\n")
    print(table(("instance", "prove s", "check s, no checker entries", "check s",
                 "check / prove", "check s, before", "load avg", "check says"), rows))


if __name__ == "__main__":
    main()
