"""`absorb-prove scan` on synthetic checkpoints of real shapes (seeded; nothing downloaded).

    python benchmarks/bench_scan.py [--layers 12] [--dim 768] [--width 3072] [-j 1]

Builds a GPT-2-shaped folder (config.json + model.safetensors, Conv1D layout, bf16 MLP
weights with biases, gelu_new; plus attention, norm and embedding tensors that scan must
pass over) and a LLaMA-shaped sharded folder (swiglu, 2 shards), then times the whole scan
(start-up included, as a user runs it) and prints the table and a figure per block. The
baseline in the same run: numpy's float64 slogdet of order m+1, the floor the exact
modular determinant of a GPT-2 block is measured against (benchmarks/RESULTS.md).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent


def _bf16(array: np.ndarray) -> np.ndarray:
    """float32 → bfloat16 bit patterns (round to nearest even), as uint16."""
    bits = array.astype(np.float32).view(np.uint32)
    rounded = bits + np.uint32(0x7FFF) + ((bits >> np.uint32(16)) & np.uint32(1))
    return (rounded >> np.uint32(16)).astype(np.uint16)


def gpt2_folder(folder: Path, layers: int, d: int, m: int, seed: int = 0) -> Path:
    from absorb_formal.weights.safetensors import write_new_file

    rng = np.random.default_rng(seed)
    entries = []

    def add(name: str, array: np.ndarray, code: str) -> None:
        entries.append((name, code, list(array.shape), array.astype(array.dtype.newbyteorder(
            "<")).tobytes()))

    add("wte.weight", rng.normal(size=(64, d)).astype(np.float32), "F32")
    for i in range(layers):
        add(f"h.{i}.ln_2.weight", np.ones(d, np.float32), "F32")
        add(f"h.{i}.attn.c_attn.weight", rng.normal(size=(d, 3 * d)).astype(np.float32) * 0.02,
            "F32")
        add(f"h.{i}.mlp.c_fc.weight", _bf16(rng.normal(size=(d, m)) * 0.02), "BF16")
        add(f"h.{i}.mlp.c_fc.bias", _bf16(rng.normal(size=m) * 0.02), "BF16")
        add(f"h.{i}.mlp.c_proj.weight", _bf16(rng.normal(size=(m, d)) * 0.02), "BF16")
        add(f"h.{i}.mlp.c_proj.bias", _bf16(rng.normal(size=d) * 0.02), "BF16")
    folder.mkdir(parents=True, exist_ok=True)
    write_new_file(folder / "model.safetensors", entries, {"format": "pt"})
    (folder / "config.json").write_text(json.dumps({
        "model_type": "gpt2", "n_embd": d, "n_inner": m, "n_layer": layers,
        "activation_function": "gelu_new"}))
    return folder


def run_scan(folder: Path, jobs: int) -> tuple[float, dict]:
    start = time.perf_counter()
    out = subprocess.run([sys.executable, "-m", "absorb_formal", "scan", "--json",
                          "-j", str(jobs), str(folder)], capture_output=True, text=True,
                         check=False)
    seconds = time.perf_counter() - start
    if out.returncode not in (0, 3):
        raise SystemExit(out.stderr)
    return seconds, json.loads(out.stdout)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--layers", type=int, default=12)
    parser.add_argument("--dim", type=int, default=768)
    parser.add_argument("--width", type=int, default=3072)
    parser.add_argument("-j", type=int, default=1)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch:
        folder = gpt2_folder(Path(scratch) / "gpt2", args.layers, args.dim, args.width)
        start = time.perf_counter()
        a = np.random.default_rng(1).normal(size=(args.width + 1, args.width + 1))
        np.linalg.slogdet(a)
        floor = time.perf_counter() - start
        seconds, doc = run_scan(folder, args.j)
    print(f"scan of a GPT-2-shaped checkpoint: {args.layers} layers, d={args.dim}, "
          f"m={args.width}, bf16: {seconds:.1f} s in all (-j {args.j}); slogdet({args.width + 1})"
          f" = {floor:.2f} s")
    for block in doc["blocks"]:
        print(f"  {block['where']}: {block['absorbable']} min width {block['min_width']} "
              f"[{block['method']}] {block['seconds']:.1f} s")


if __name__ == "__main__":
    main()
