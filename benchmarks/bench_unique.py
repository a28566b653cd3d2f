"""Large blocks in the generic case decided both ways: the unique solution of
the subset system mod q (docs/rules.md, "the generic case at scale").

Instances, written to a temporary folder as .npz files and decided through the command line
(`absorb-prove --certificates`, then `absorb-prove check`), so the times include start-up,
reading and the cross-check:
- ffn-skip: a float32 gelu FFN, d = 1024, m = 3072, whose learnable skip is S = −d_j u_jᵀ
  (read with `skip load`): absorbable, J = {j} (the issue's trained-FFN case);
- gpt2-planted: relu, d = 768, m = 3072, float64, S = I, with d neurons J planted so that
  Σ_J d_i u_iᵀ = −S (U_J = I + ½·superdiagonal, D_J = −U_J⁻¹): absorbable, |J| = 768;
- gpt2-twice: the same with D_J = −2·U_J⁻¹: −S/(2a) in the span, the solution ½ on J:
  not absorbable;
- int64: relu, d = 100, m = 1260, int64 weights beyond 2^53, S = −d₁u₁ᵀ: absorbable.

§8.2 flip sets at scale (docs/rules.md §8.2, "Flip sets at scale"), GPT-2-sized biased blocks
(d = 768, m = 3072, float32 weights and biases, S = I unless said):
- swiglu, relu2: generic: not absorbable at width m (the unique solution is not 0/1);
- swiglu-pair: neuron 5 repeats neuron 3's gate and up rows and up bias, with the opposite
  down column and gate biases ¼ and ¾; S = ½·d₃u₃ᵀ (exact): absorbable, J = {3, 5};
- glu-skip: a glu block whose learnable skip is S = −d_j u_jᵀ (read with `skip load`):
  absorbable, J = {j}.

glu without biases (§5's condition, the same rule with zero biases), same weights:
- glu-free: S = I: not absorbable at width m;
- glu-free-skip: S = −d_j u_jᵀ from a file: absorbable, J = {j}.

Run: python -m benchmarks.bench_unique [NAME ...]. Prints one markdown row per instance.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

SPEC = """block B {{
    activation {act}  dim {d}  width {m}  skip {skip}
    up   = load("w.npz", "up")
    down = load("w.npz", "down")
}}
claim B is absorbable
"""


def ffn_skip(folder: Path) -> str:
    d, m, j = 1024, 3072, 17
    rng = np.random.default_rng(2)
    up = (rng.standard_normal((m, d)) * 0.05).astype(np.float32)
    down = (rng.standard_normal((d, m)) * 0.05).astype(np.float32)
    skip = -np.outer(down[:, j].astype(np.float64), up[j].astype(np.float64))  # exact
    np.savez(folder / "w.npz", up=up, down=down, skip=skip)
    return SPEC.format(act="gelu", d=d, m=m, skip='load("w.npz", "skip")')


def planted(folder: Path, coefficient: float) -> str:
    d, m = 768, 3072
    rng = np.random.default_rng(1)
    up, down = rng.standard_normal((m, d)), rng.standard_normal((d, m))
    square = np.eye(d) + 0.5 * np.eye(d, k=1)
    chosen = rng.choice(m, d, replace=False)
    up[chosen] = square
    down[:, chosen] = -np.linalg.inv(square) * coefficient  # entries ±2^-k: exact
    np.savez(folder / "w.npz", up=up, down=down)
    return SPEC.format(act="relu", d=d, m=m, skip="identity")


def int64(folder: Path) -> str:
    d, m = 100, 1260
    rng = np.random.default_rng(3)
    big = 2**53 + 1
    up = rng.integers(-big, big, (m, d), dtype=np.int64)
    down = rng.integers(-9, 10, (d, m), dtype=np.int64)
    down[down == 0] = 1
    skip = -np.outer(down[:, 0].astype(object), up[0].astype(object))
    rows = ", ".join("[" + ", ".join(str(int(v)) for v in row) + "]" for row in skip)
    np.savez(folder / "w.npz", up=up, down=down)
    return SPEC.format(act="relu", d=d, m=m, skip="[" + rows + "]")


BIASED = """block B {{
    activation {act}  dim {d}  width {m}  skip {skip}  bias
    up   = load("w.npz", "up")     up_bias   = load("w.npz", "b")
    down = load("w.npz", "down")   down_bias = load("w.npz", "c"){gate}
}}
claim B is absorbable
"""


BIAS_FREE = """block B {{
    activation {act}  dim {d}  width {m}  skip {skip}
    up   = load("w.npz", "up")
    down = load("w.npz", "down")
    gate = load("w.npz", "gate")
}}
claim B is absorbable
"""


def flip_block(folder: Path, act: str, plant: str | None = None, biased: bool = True) -> str:
    d, m, i, j = 768, 3072, 2, 4
    rng = np.random.default_rng(4)

    def weights(*shape: int) -> np.ndarray:
        return (rng.standard_normal(shape) * 0.05).astype(np.float32)

    found = {"up": weights(m, d), "down": weights(d, m), "b": weights(m), "c": weights(d)}
    gated = act != "relu^2"
    if gated:
        found.update(gate=weights(m, d), g=weights(m))
    skip = "identity"
    if plant == "pair":  # swiglu: 2a = 1, S = −(γ_i − γ_j)·d_i u_iᵀ = ½·d_i u_iᵀ
        for name in ("up", "gate"):
            found[name][j] = found[name][i]
        found["b"][j] = found["b"][i]
        found["g"][i], found["g"][j] = 0.25, 0.75
        found["down"][:, j] = -found["down"][:, i]
    if plant is not None:
        scale = -1.0 if plant == "skip" else 0.5  # glu: −S/(2c) = −S = d_i u_iᵀ
        found["S"] = scale * np.outer(found["down"][:, i].astype(np.float64),
                                      found["up"][i].astype(np.float64))  # exact
        skip = 'load("w.npz", "S")'
    np.savez(folder / "w.npz", **found)
    gate = ('\n    gate = load("w.npz", "gate")   gate_bias = load("w.npz", "g")'
            if gated else "")
    if not biased:
        return BIAS_FREE.format(act=act, d=d, m=m, skip=skip)
    return BIASED.format(act=act, d=d, m=m, skip=skip, gate=gate)


CASES = {"ffn-skip": ffn_skip, "gpt2-planted": lambda f: planted(f, 1.0),
         "gpt2-twice": lambda f: planted(f, 2.0), "int64": int64,
         "swiglu": lambda f: flip_block(f, "swiglu"), "relu2": lambda f: flip_block(f, "relu^2"),
         "swiglu-pair": lambda f: flip_block(f, "swiglu", "pair"),
         "glu-skip": lambda f: flip_block(f, "glu", "skip"),
         "glu-free": lambda f: flip_block(f, "glu", biased=False),
         "glu-free-skip": lambda f: flip_block(f, "glu", "skip", biased=False)}


def timed(args: list[str], cwd: Path) -> tuple[float, str]:
    start = time.perf_counter()
    run = subprocess.run([sys.executable, "-m", "absorb_formal", *args], cwd=cwd,
                         capture_output=True, text=True, check=False)
    return time.perf_counter() - start, (run.stdout + run.stderr).strip().splitlines()[0]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("names", nargs="*", default=list(CASES))
    names = parser.parse_args().names
    print("| instance | answer | prove (s) | check (s) |")
    print("|---|---|---|---|")
    for name in names:
        with tempfile.TemporaryDirectory() as tmp:
            folder = Path(tmp)
            (folder / "b.mlp").write_text(CASES[name](folder), encoding="utf-8")
            prove, line = timed(["--timeout", "1200", "--certificates", "certs", "b.mlp"],
                                folder)
            check, verdict = timed(["check", "certs"], folder)
            answer = line.split(" — ")[0].split(": ", 1)[1] if " — " in line else line
            print(f"| {name} | {answer}; {verdict[:60]} | {prove:.1f} | {check:.1f} |")


if __name__ == "__main__":
    main()
