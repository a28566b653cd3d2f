"""Numeric cross-check throughput (points/s, numpy vs torch, CPU and CUDA when present) and
--fit time and success rate on planted absorbable blocks.

Run: python benchmarks/bench_numeric.py [--fit-instances N]. Prints markdown tables.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))
from instances import absorb_block  # noqa: E402

from absorb_formal.decide import concrete  # noqa: E402
from absorb_formal.model import activations as acts  # noqa: E402
from absorb_formal.numeric.backends import BackendError, backend  # noqa: E402
from absorb_formal.numeric.fit import search  # noqa: E402
from absorb_formal.numeric.floatblock import FloatBlock  # noqa: E402


def float_block(d: int, name: str, seed: int) -> FloatBlock:
    rng = np.random.default_rng(seed)
    m = 4 * d
    layer = {"up": rng.normal(size=(m, d)) / np.sqrt(d), "down": rng.normal(size=(d, m))}
    return FloatBlock(acts.simple(name).scalar, False, d, 1.0, None, (layer,))


def throughput(engine_name: str, device: str) -> list[str]:
    try:
        engine = backend(engine_name, device)
    except BackendError as error:
        return [f"| {engine_name} | {device} | - | - | - | unavailable: {error} |"]
    rows = []
    for d in (8, 64, 512):
        n = 100_000 if d < 512 else 20_000
        speeds = {}
        for name in ("relu", "gelu"):
            block = float_block(d, name, 0)
            x = np.random.default_rng(1).normal(size=(n, d))
            engine.evaluate(block, x[:100])  # warm up (torch: kernels, CUDA context)
            start = time.perf_counter()
            engine.evaluate(block, x)
            speeds[name] = n / (time.perf_counter() - start)
        rows.append(f"| {engine_name} | {engine.device} | {d} | {4 * d} | "
                    f"{speeds['relu']:,.0f} | {speeds['gelu']:,.0f} |")
    return rows


def fit_rate(instances: int) -> list[str]:
    rows = []
    engine = backend("numpy", "cpu")
    for d, m in ((2, 4), (2, 8), (3, 6), (4, 8)):
        found, times = 0, []
        for seed in range(instances):
            block = absorb_block("relu", d, m, 100 + seed, planted=True)
            assert concrete.at_width(block, m).absorbable
            start = time.perf_counter()
            error, _ = search(block, m, 8, engine, seed=seed)
            times.append(time.perf_counter() - start)
            found += error <= 1e-6
        rows.append(f"| {d} | {m} | {found}/{instances} | {statistics.median(times):.1f} s |")
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--fit-instances", type=int, default=10)
    args = parser.parse_args()
    try:
        import torch

        torch_info = f"torch {torch.__version__}, threads {torch.get_num_threads()}"
        gpu = torch.cuda.get_device_name(0) if torch.cuda.is_available() else "none"
    except ImportError:
        torch_info, gpu = "torch not installed", "none"
    print(f"machine: {platform.machine()}, {os.cpu_count()} cores, numpy {np.__version__}, "
          f"{torch_info}, GPU: {gpu}\n")
    print("| backend | device | d | m | relu points/s | gelu points/s |")
    print("|---|---|---|---|---|---|")
    for name, device in (("numpy", "cpu"), ("torch", "cpu"), ("torch", "cuda")):
        for row in throughput(name, device):
            print(row, flush=True)
    print(f"\n--fit on planted absorbable relu blocks ({args.fit_instances} per row, 8 restarts)")
    print("| d | width | found | median time |\n|---|---|---|---|")
    for row in fit_rate(args.fit_instances):
        print(row, flush=True)


if __name__ == "__main__":
    main()
