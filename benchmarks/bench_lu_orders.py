"""The exact modular LU against its order, in memory and out of core, and what it predicts for
whole models on 1, 8 and 64 workers.

Deciding a relu or gelu FFN at its own width costs one exact LU mod q of order m + 1 (the
modular functional, docs/rules.md §4). This measures `functional` of random residues (the
same work as the minor's, without building it from weights) in a fresh process per point,
with its peak resident memory:

- in memory at orders 3073, 8193, 16385 and 20481, and the fitted constant c of t = c·n³;
- at order 30000 (`--big`), in memory and out of core under `--memory` (default 4 GB).

Then a table of predicted wall times for Pythia-12B, GPT-NeoX-20B and BLOOM-176B: one LU per
layer, layers spread over W workers of this machine's size (a worker decides one layer at a
time; an LU whose 8·n² bytes do not fit a worker's memory runs out of core, slower by the
measured factor).

    python benchmarks/bench_lu_orders.py [--orders 3073 8193 16385 20481] [--big 30000]
        [--memory 4GB] [--worker-memory 24GB]

Prints markdown for RESULTS.md.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT))

from absorb_formal.model.memory import parse_size, shown  # noqa: E402

ONE_POINT = r"""
import json, resource, sys, time
import numpy as np
from absorb_formal.checker.kernel import modlu
from absorb_formal.decide import outofcore
from absorb_formal.numeric import accelerated
n, memory = int(sys.argv[1]), int(sys.argv[2])
p = modlu.primes(1)[0]
def rows(a, b):  # the same matrix whichever bands it is read in: one seed per row
    return np.vstack([np.random.default_rng([i, n]).integers(0, p, size=n).astype(np.float64)
                      for i in range(a, b)])
start = time.perf_counter()
if memory == 0:
    matrix = np.empty((n, n))
    for i in range(0, n, 256):
        matrix[i:i + 256] = rows(i, min(i + 256, n))
    found = accelerated.functional_auto(matrix, p)
else:
    found = outofcore.functional(rows, n, p, memory)
seconds = time.perf_counter() - start
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
print(json.dumps({"n": n, "seconds": seconds, "peak": peak, "found": found is not None}))
"""

# (name, d, m, layers): the FFN shapes of the models the prediction is for
MODELS = [("Pythia-12B", 5120, 20480, 36), ("GPT-NeoX-20B", 6144, 24576, 44),
          ("BLOOM-176B", 14336, 57344, 70)]


def point(n: int, memory: int) -> dict:
    load = os.getloadavg()[0]
    run = subprocess.run([sys.executable, "-c", ONE_POINT, str(n), str(memory)], cwd=ROOT,
                         capture_output=True, text=True, check=True)
    found = json.loads(run.stdout.strip().splitlines()[-1])
    found["load"] = max(load, os.getloadavg()[0])
    return found


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--orders", type=int, nargs="*", default=[3073, 8193, 16385, 20481])
    parser.add_argument("--big", type=int, default=30000)
    parser.add_argument("--memory", type=parse_size, default=parse_size("4GB"))
    parser.add_argument("--worker-memory", type=parse_size, default=parse_size("24GB"))
    parser.add_argument("--skip-big-in-memory", action="store_true")
    args = parser.parse_args()
    rows, fits = [], []
    for n in args.orders:
        log(f"in memory, order {n} ...")
        found = point(n, 0)
        rows.append((f"{n:,}", "in memory", f"{found['seconds']:.1f}", shown(found["peak"]),
                     f"{found['load']:.1f}"))
        fits.append((n, found["seconds"]))
    # least squares for t = c·n³ (through the origin, weighted towards the large orders)
    c = sum(t * n**3 for n, t in fits) / sum(n**6 for n, _ in fits) if fits else float("nan")
    big_memory = big_disk = None
    if args.big:
        if not args.skip_big_in_memory:
            log(f"in memory, order {args.big} ...")
            big_memory = point(args.big, 0)
            rows.append((f"{args.big:,}", "in memory", f"{big_memory['seconds']:.1f}",
                         shown(big_memory["peak"]), f"{big_memory['load']:.1f}"))
        log(f"out of core under {shown(args.memory)}, order {args.big} ...")
        big_disk = point(args.big, args.memory)
        rows.append((f"{args.big:,}", f"out of core, --memory {shown(args.memory)}",
                     f"{big_disk['seconds']:.1f}", shown(big_disk["peak"]),
                     f"{big_disk['load']:.1f}"))
    print("| order | where | seconds | peak memory | load |\n|---|---|---|---|---|")
    for row in rows:
        print("| " + " | ".join(row) + " |")
    print(f"\nFitted: t ≈ {c:.3e} · n³ s "
          f"({', '.join(f'{n}: {t / (c * n**3):.2f}×' for n, t in fits)} of the fit).")
    slowdown = 1.0
    if big_disk is not None:
        reference = big_memory["seconds"] if big_memory else c * args.big**3
        slowdown = big_disk["seconds"] / reference
        print(f"Out of core at order {args.big}: {slowdown:.2f}× the in-memory time.")
    print("\n| model | LU order | per layer | memory per worker | 1 worker | 8 workers | "
          "64 workers |\n|---|---|---|---|---|---|---|")
    for name, _d, m, layers in MODELS:
        n = m + 1
        need = 8 * n * n
        in_memory = need <= args.worker_memory
        per_layer = c * n**3 * (1.0 if in_memory else slowdown)
        where = shown(need) if in_memory else f"{shown(args.memory)} (out of core)"
        walls = [per_layer * math.ceil(layers / w) for w in (1, 8, 64)]
        print(f"| {name} ({layers} layers) | {n:,} | {per_layer / 60:.1f} min | {where} | "
              + " | ".join(f"{w / 3600:.2f} h" if w >= 3600 else f"{w / 60:.1f} min"
                           for w in walls) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
