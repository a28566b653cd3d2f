"""`absorb-prove scan` on a Dask LocalCluster against the process pool, and a scan killed and
resumed from its results file (seeded synthetic checkpoints; nothing downloaded).

    python benchmarks/bench_cluster.py overhead [--layers 12] [--dim 256] [--width 1024]
    python benchmarks/bench_cluster.py resume [--layers 36] [--dim 2048] [--width 8192]
                                              [--kill-after 12] [--reference]

The checkpoint is a plain relu MLP stack in GPT-2's Conv1D layout (float32, N(0, 0.02²), no
norm: each sublayer is its bare block, decided by the modular functional at its own width),
written tensor by tensor so that a 5 GB file never sits in memory. Every scan runs as a
user runs it (`python -m absorb_formal scan --json`, start-up included), timed from here.

`overhead`: the same checkpoint with `-j 2 --no-cluster` (the process pool) and with
`--cluster local:2`, and a one-layer checkpoint both ways for the fixed cost (starting the
cluster, its workers and their deciding processes); the cluster's cost per task is the
difference of the differences, divided by the tasks beyond the first.

`resume`: `--cluster local:2 --results FILE` killed with SIGKILL (with its workers) once
`--kill-after` rows are stored, then the same command again: what it took from the file,
what it decided, and the time of each part; `--reference` adds an uninterrupted scan and
compares its JSON with the resumed one's.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent


def relu_stack(folder: Path, layers: int, d: int, m: int, seed: int = 0) -> Path:
    """config.json + model.safetensors, each tensor generated and written in turn."""
    names = [(f"h.{i}.mlp.{part}.weight", shape) for i in range(layers)
             for part, shape in (("c_fc", (d, m)), ("c_proj", (m, d)))]
    header: dict[str, Any] = {}
    at = 0
    for name, shape in names:
        size = 4 * shape[0] * shape[1]
        header[name] = {"dtype": "F32", "shape": list(shape), "data_offsets": [at, at + size]}
        at += size
    raw = json.dumps(header).encode()
    raw += b" " * (-len(raw) % 8)
    folder.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    with open(folder / "model.safetensors", "wb") as stream:
        stream.write(len(raw).to_bytes(8, "little") + raw)
        for _, shape in names:
            stream.write((rng.standard_normal(shape, dtype=np.float32) * 0.02).astype("<f4")
                         .tobytes())
    (folder / "config.json").write_text(json.dumps(
        {"n_embd": d, "n_inner": m, "n_layer": layers, "activation_function": "relu"}))
    return folder


def command(folder: Path, *options: str) -> list[str]:
    return [sys.executable, "-m", "absorb_formal", "scan", "--json", "--timeout", "0",
            str(folder), *options]


def environment() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(ROOT), "PYTHONHASHSEED": "0"}


def timed(argv: list[str]) -> tuple[float, dict[str, Any]]:
    start = time.perf_counter()
    done = subprocess.run(argv, capture_output=True, text=True, env=environment(), check=False)
    seconds = time.perf_counter() - start
    if done.returncode not in (0, 3):
        raise SystemExit(done.stderr)
    return seconds, json.loads(done.stdout)


def log(line: str) -> None:
    print(f"{line}   [load {' '.join(f'{x:.1f}' for x in os.getloadavg())}]", file=sys.stderr,
          flush=True)


def overhead(args: argparse.Namespace, scratch: Path) -> None:
    big = relu_stack(scratch / "big", args.layers, args.dim, args.width)
    one = relu_stack(scratch / "one", 1, args.dim, args.width)
    runs: dict[tuple[str, str], list[float]] = {}
    decided: dict[tuple[str, str], list[float]] = {}
    for _ in range(args.repeat):
        for label, folder in (("one", one), ("big", big)):
            for way, options in (("pool", ("-j", "2", "--no-cluster")),
                                 ("cluster", ("--cluster", "local:2"))):
                seconds, doc = timed(command(folder, *options, "--no-results"))
                runs.setdefault((label, way), []).append(seconds)
                decided.setdefault((label, way), []).append(
                    sum(b["seconds"] for b in doc["blocks"]))
                log(f"{label} {way}: {seconds:.2f} s "
                    f"({[b['absorbable'] for b in doc['blocks']].count('no')} not absorbable)")
    best = {key: statistics.median(values) for key, values in runs.items()}
    fixed = best[("one", "cluster")] - best[("one", "pool")]
    per_task = (best[("big", "cluster")] - best[("big", "pool")] - fixed) / (args.layers - 1)
    inside = {key: statistics.median(values) for key, values in decided.items()}
    print("| checkpoint | `-j 2 --no-cluster` (pool) | `--cluster local:2` | difference | "
          "deciding, summed over the blocks: pool / cluster |\n|---|---|---|---|---|")
    for label, layers in (("one", 1), ("big", args.layers)):
        pool, spread = best[(label, "pool")], best[(label, "cluster")]
        print(f"| {layers} layer(s), d = {args.dim}, m = {args.width} | {pool:.2f} s | "
              f"{spread:.2f} s | {spread - pool:+.2f} s | {inside[(label, 'pool')]:.2f} s / "
              f"{inside[(label, 'cluster')]:.2f} s |")
    print(f"\nfixed cost of the cluster: {fixed:.2f} s; cost per task beyond it: "
          f"{per_task:+.3f} s (medians of {args.repeat})")


def rows(path: Path) -> int:
    try:
        with sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True) as db:
            return db.execute("SELECT count(*) FROM answers").fetchone()[0]
    except sqlite3.Error:
        return 0


def resume(args: argparse.Namespace, scratch: Path) -> None:
    start = time.perf_counter()
    folder = relu_stack(scratch / "stack", args.layers, args.dim, args.width)
    log(f"checkpoint: {args.layers} layers, d = {args.dim}, m = {args.width}, "
        f"{(folder / 'model.safetensors').stat().st_size / 2**30:.2f} GiB, written in "
        f"{time.perf_counter() - start:.1f} s")
    file = scratch / "results.sqlite"
    argv = command(folder, "--cluster", "local:2", "--results", str(file))
    start = time.perf_counter()
    killed = subprocess.Popen(argv, env=environment(), stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL, start_new_session=True)
    while rows(file) < args.kill_after and killed.poll() is None:
        time.sleep(0.2)
    os.killpg(killed.pid, signal.SIGKILL)
    killed.wait()
    first = time.perf_counter() - start
    stored = rows(file)
    log(f"killed after {first:.1f} s with {stored} rows stored")
    second, doc = timed(argv)
    reused = len(doc["results"]["reused"])
    log(f"resumed in {second:.1f} s: {reused} taken from the file, "
        f"{doc['results']['stored']} decided and stored")
    print("| part | seconds | sublayers |\n|---|---|---|")
    print(f"| first run, killed (SIGKILL) | {first:.1f} | {stored} stored |")
    print(f"| rerun | {second:.1f} | {reused} taken from the file, "
          f"{doc['results']['stored']} decided |")
    if args.reference:
        whole, reference = timed(command(folder, "--cluster", "local:2", "--no-results"))
        same = [{k: v for k, v in b.items() if k != "seconds"} for b in doc["blocks"]] == \
            [{k: v for k, v in b.items() if k != "seconds"} for b in reference["blocks"]]
        print(f"| uninterrupted, for comparison | {whole:.1f} | {len(reference['blocks'])} "
              f"decided; JSON {'equal' if same else 'DIFFERENT'} to the resumed one's |")
    verdicts = sorted({(b["absorbable"], b["method"]) for b in doc["blocks"]})
    print(f"\nverdicts: {verdicts}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("what", choices=("overhead", "resume"))
    parser.add_argument("--layers", type=int)
    parser.add_argument("--dim", type=int)
    parser.add_argument("--width", type=int)
    parser.add_argument("--repeat", type=int, default=2, help="overhead: runs of each kind")
    parser.add_argument("--kill-after", type=int, help="resume: rows stored before the kill")
    parser.add_argument("--reference", action="store_true",
                        help="resume: an uninterrupted scan too, its JSON compared")
    args = parser.parse_args()
    defaults = {"overhead": (12, 256, 1024), "resume": (36, 2048, 8192)}[args.what]
    args.layers = args.layers or defaults[0]
    args.dim = args.dim or defaults[1]
    args.width = args.width or defaults[2]
    args.kill_after = args.kill_after or max(1, args.layers // 3)
    with tempfile.TemporaryDirectory() as scratch:
        (overhead if args.what == "overhead" else resume)(args, Path(scratch))


if __name__ == "__main__":
    main()
