"""Export at the proved width (RESULTS.md §15): the doubles witness W = −S U_Δ⁻¹/(2a) of
float32 blocks of order d = 384, 768, 1024, and a BERT-size export's errors before and after.

Part 1, per order d (a float32 d × d matrix, N(0, 0.05²)):
  - exact single solve: python-flint fmpq_mat.solve (Dixon) of U x = e_1 over Q, one column
    of the exact inverse (the full inverse is d such columns; `--full` also times the whole
    exact inverse, fmpq_mat.solve with d right-hand sides: minutes at 384);
  - Arb solve: python-flint arb_mat.solve (preconditioned, 128 bits) with d right-hand
    sides: balls around every entry of U⁻¹;
  - rounded doubles: `enclosed_doubles.rounded_doubles` of a gelu block with biases
    (m = 4d), to float32: Arb solve, the balls rounded and certified, everything written.
Part 2: a BERT-size block (erf gelu, d = 384, m = 1536, biases, float32 weights
N(0, 0.04²), biases N(0, 0.05²)): doubles at m + d and spare pairs at m + 2d exported to
float32, with the old figure (against the size of the terms summed) and the new ones.

  python benchmarks/bench_export_width.py [--full] [--orders 384,768,1024]

Prints markdown on stdout.
"""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from absorb_formal import export  # noqa: E402
from absorb_formal.export import enclosed_doubles  # noqa: E402
from absorb_formal.language.load import load_text  # noqa: E402
from absorb_formal.numeric.backends import NumpyBackend  # noqa: E402
from absorb_formal.numeric.crosscheck import compare  # noqa: E402
from absorb_formal.numeric.floatblock import FloatBlock, from_block  # noqa: E402


def block_in(folder: Path, d: int, m: int, scale: float, bias_scale: float, seed: int):
    rng = np.random.default_rng(seed)
    np.savez(folder / "w.npz", up=(rng.standard_normal((m, d)) * scale).astype(np.float32),
             down=(rng.standard_normal((d, m)) * scale).astype(np.float32),
             b=(rng.standard_normal(m) * bias_scale).astype(np.float32),
             c=(rng.standard_normal(d) * bias_scale).astype(np.float32))
    text = f"""block Big {{
    activation gelu  dim {d}  width {m}  skip identity  bias
    up = load("w.npz", "up")  up_bias = load("w.npz", "b")
    down = load("w.npz", "down")  down_bias = load("w.npz", "c")
}}
"""
    return load_text(text, "big.mlp", folder).blocks["Big"]


def seconds(work: Any, *args: Any) -> tuple[float, Any]:
    start = time.perf_counter()
    out = work(*args)
    return time.perf_counter() - start, out


def orders(sizes: list[int], full: bool) -> None:
    import flint

    print("| order d | exact solve, 1 column (s) | exact inverse, all d columns (s) "
          "| Arb solve, d columns (s) | rounded doubles, float32 (s) |")
    print("|---|---|---|---|---|")
    for d in sizes:
        with tempfile.TemporaryDirectory() as folder:
            block = block_in(Path(folder), d, 4 * d, 0.05, 0.1, d)
            u = block.layers[0].up.loaded[:d].astype(np.float64)
            rows = [[flint.fmpq(*v.as_integer_ratio()) for v in r] for r in u.tolist()]
            exact = flint.fmpq_mat(d, d, [v for r in rows for v in r])
            one = flint.fmpq_mat(d, 1, [1] + [0] * (d - 1))
            single, _ = seconds(exact.solve, one)
            whole = "not run (--full)"
            if full:
                identity = flint.fmpq_mat(d, d, [int(i == j) for i in range(d)
                                                 for j in range(d)])
                whole = f"{seconds(exact.solve, identity)[0]:.1f}"
            flint.ctx.prec = 128
            balls = flint.arb_mat(d, d, [flint.arb(v) for v in u.ravel().tolist()])
            identity_arb = flint.arb_mat(d, d, [int(i == j) for i in range(d)
                                                for j in range(d)])
            arb, _ = seconds(balls.solve, identity_arb)
            flint.ctx.prec = 53
            rounded, _ = seconds(enclosed_doubles.rounded_doubles, block, list(range(d)),
                                 "float32")
            print(f"| {d} | {single:.2f} | {whole} | {arb:.2f} | {rounded:.2f} |", flush=True)


def bert(points: int = 2000) -> None:
    with tempfile.TemporaryDirectory() as folder:
        block = block_in(Path(folder), 384, 1536, 0.04, 0.05, 1)
        found_time, found = seconds(export.find_witness, block, None)
        print(f"\nBERT-size block: least width proved absorbable {found.claim_width} "
              f"({found.construction}; {found.width_note}), found in {found_time:.1f} s\n")
        print("| construction | width | build + sample (s) | largest weight before → after "
              "| old figure (terms summed) | output-relative, float64 arithmetic (gate) "
              "| output-relative, float32 arithmetic | original block, float32 arithmetic |")
        print("|---|---|---|---|---|---|---|---|")
        for option in export.alternatives(found):
            took, (rounded, figures) = seconds(export.built, option, "float32", points)
            arrays = {k: r.as_float64() for k, r in rounded.items()}
            old = compare(from_block(block), FloatBlock(block.activation.scalar, False, 384,
                                                        0.0, None, (arrays,)),
                          points, NumpyBackend()).max_rel_error
            print(f"| {option.construction} | {option.claim_width} | {took:.1f} "
                  f"| {float(figures['weight_max_abs_before']):.3g} → "
                  f"{float(figures['weight_max_abs_after']):.3g} | {old:.2g} "
                  f"| {float(figures['sample_max_rel_error']):.2g} "
                  f"| {float(figures['sample_max_rel_error_in_dtype_arith']):.2g} "
                  f"| {float(figures['sample_original_rel_error_in_dtype_arith']):.2g} |",
                  flush=True)
        print(f"\ngate (16 float32 epsilons): {export.default_max_error('float32'):.3g}; "
              f"{points} standard-normal sample rows")


if __name__ == "__main__":
    chosen = [384, 768, 1024]
    for arg in sys.argv[1:]:
        if arg.startswith("--orders"):
            chosen = [int(v) for v in arg.split("=", 1)[1].split(",")]
    orders(chosen, "--full" in sys.argv)
    bert()
