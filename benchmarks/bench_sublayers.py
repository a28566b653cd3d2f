"""Normalised sublayers at real size (docs/rules.md "Normalised sublayers"): how long the
prover takes to decide, and the checker to check, the sublayer a trained model computes.

Instances, written to a temporary folder as .npz files (seeded, float32, scaled like trained
weights) and decided through the command line (`absorb-prove --certificates`, then
`absorb-prove check`), so the times include start-up, reading and the checks:
- gpt2-pre: a GPT-2-small FFN (gelu_tanh, d = 768, m = 3072, biases) behind its ln_2
  LayerNorm (pre-norm): the ray limit in Arb balls, not absorbable at any width;
- t5-pre: a T5-base FFN (relu, d = 768, m = 3072, no biases) behind RMSNorm: the ray limit
  with the exact pattern (signs of p + q·sqrt(r));
- llama-pre: a LLaMA-7B-shaped family (swiglu, d = 4096, m = 11008) behind RMSNorm: the gated
  Jacobian, no weights read;
- bert-post: a BERT-base FFN (erf gelu, d = 768, m = 3072, biases) behind its output
  LayerNorm (post-norm): the projected block at its own width, ΠD read lazily;
- bert-post-query: the same, min width (bounds).

Run: python -m benchmarks.bench_sublayers [NAME ...]. Prints one markdown row per instance.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

D, M = 768, 3072


def _weights(folder: Path, seed: int = 0) -> None:
    rng = np.random.default_rng(seed)

    def normal(*shape: int, scale: float = 0.02) -> np.ndarray:
        return (rng.normal(size=shape) * scale).astype(np.float32)

    np.savez(folder / "w.npz", up=normal(M, D), up_bias=normal(M), down=normal(D, M),
             down_bias=normal(D), gamma=1 + normal(D, scale=0.1), beta=normal(D, scale=0.1))


def _block(name: str, act: str, norm: str, biased: bool, statement: str) -> str:
    biases = ('  bias\n  up_bias = load("w.npz", "up_bias")\n'
              '  down_bias = load("w.npz", "down_bias")\n') if biased else ""
    return (f"block {name} {{\n  activation {act}\n  dim {D}  width {M}\n  {norm}\n"
            f'  up = load("w.npz", "up")\n  down = load("w.npz", "down")\n{biases}}}\n'
            f"{statement}\n")


LN = 'norm {} layernorm {{ eps 1e-5  gamma = load("w.npz", "gamma")  beta = load("w.npz", "beta") }}'
INSTANCES = {
    "gpt2-pre": _block("B", "gelu_tanh", LN.format("pre"), True, "claim B is not absorbable"),
    "t5-pre": _block("B", "relu", 'norm pre rmsnorm { eps 1e-6  gamma = load("w.npz", "gamma") }',
                     False, "claim B is not absorbable"),
    "llama-pre": ("block B { activation swiglu  dim 4096  width 11008  "
                  "norm pre rmsnorm { eps 1e-5 } }\nclaim B is never absorbable\n"),
    "bert-post": _block("B", "gelu", LN.format("post"), True, "claim B is not absorbable"),
    "bert-post-query": _block("B", "gelu", LN.format("post"), True, "query B"),
}


def run(name: str, folder: Path) -> str:
    spec = folder / f"{name}.mlp"
    spec.write_text(INSTANCES[name], encoding="utf-8")
    certs = folder / f"{name}-certs"
    start = time.perf_counter()
    proved = subprocess.run([sys.executable, "-m", "absorb_formal", str(spec),
                             "--certificates", str(certs)], capture_output=True, text=True)
    prove = time.perf_counter() - start
    start = time.perf_counter()
    checked = subprocess.run([sys.executable, "-m", "absorb_formal", "check", str(certs)],
                             capture_output=True, text=True)
    check = time.perf_counter() - start
    said = proved.stdout.splitlines()[0] if proved.stdout else proved.stderr.strip()[:200]
    verdict = said.split(" — ", 1)[-1].split(" [")[0]
    tail = verdict[verdict.index("; min width"):] if "; min width" in verdict else ""
    verdict = (verdict.split(" (")[0] if len(verdict) > 90 else verdict) + tail
    valid = "valid" if checked.returncode == 0 and ": valid" in checked.stdout else (
        "(a query writes none)" if not certs.exists() else "INVALID")
    return f"| {name} | {verdict} | {prove:.1f} s | {check:.1f} s | {valid} |"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("names", nargs="*", default=list(INSTANCES))
    args = parser.parse_args()
    print("| instance | verdict | prove | check | certificate |")
    print("|---|---|---|---|---|")
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        _weights(folder)
        for name in args.names:
            print(run(name, folder), flush=True)


if __name__ == "__main__":
    main()
