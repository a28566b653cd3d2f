"""Doubles for large blocks: the min width bounds of a GPT-2-small-shaped
block (bf16, biases, gelu_tanh, d = 768, m = 3072, identity skip) and of a d = 64, m = 256
block (fp32, biases), the doubles claim at m + d, and the check of its certificates. Wall
seconds of fresh processes (start-up included), peak resident MB.

  python benchmarks/bench_doubles.py [--before DIR]

--before DIR: also the tree in DIR (e.g. `git archive` of main before doubles), whose upper
bound is the spare pairs' m + 2d. Prints markdown on stdout, progress on stderr.
"""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path
from typing import Any

import numpy as np
from common import log, row, run, table
from suite_checkpoints import gpt2

CLAIMS = """claim {name} is absorbable at width {doubles}
claim min width of {name} is {low}
"""


def small(folder: Path, d: int = 64, m: int = 256) -> None:
    rng = np.random.default_rng(64)
    np.savez(folder / "small.npz",
             up=(rng.standard_normal((m, d)) * 0.05).astype(np.float32),
             down=(rng.standard_normal((d, m)) * 0.05).astype(np.float32),
             b=(rng.standard_normal(m) * 0.1).astype(np.float32),
             c=(rng.standard_normal(d) * 0.1).astype(np.float32))
    (folder / "small.mlp").write_text(f"""block B {{
    activation gelu_tanh  dim {d}  width {m}  skip identity  bias
    up = load("small.npz", "up")      up_bias = load("small.npz", "b")
    down = load("small.npz", "down")  down_bias = load("small.npz", "c")
}}
""" + CLAIMS.format(name="B", doubles=m + d, low=m + 1), encoding="utf-8")


def main() -> None:
    args = sys.argv[1:]
    before = Path(args[args.index("--before") + 1]) if "--before" in args else None
    rows: list[tuple[Any, ...]] = []
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        os.environ["ABSORB_FORMAL_CACHE"] = str(folder / "cache")
        gpt2(folder, "one", 1, bf16=True)
        text = (folder / "one.mlp").read_text(encoding="utf-8")
        text = text[: text.index("claim")] + CLAIMS.format(name="H0", doubles=3840, low=3073)
        (folder / "one.mlp").write_text(text, encoding="utf-8")
        small(folder)
        log("files written")
        for spec, label in (("one.mlp", "GPT-2 block, d = 768, m = 3072"),
                            ("small.mlp", "d = 64, m = 256")):
            bounds = (f"{spec}:",)  # the last claim's line: the min width bounds
            proved = run(["prove", "--crosscheck", "0", "--certificates", f"c-{spec}", spec],
                         folder, shown=bounds)
            rows.append(row(f"{label}: prove (claim at m + d, min width bounds)", proved))
            checked = run(["prove", "check", f"c-{spec}"], folder)
            rows.append(row(f"{label}: check both certificates", checked))
            crossed = run(["prove", spec], folder)
            rows.append(row(f"{label}: prove with the cross-check", crossed))
            if before is not None:
                old = run(["prove", "--crosscheck", "0", spec], folder, before, bounds)
                rows.append(row(f"{label}: prove, before", old))
            log(f"{label}: {proved['s']:.1f} s prove, {checked['s']:.1f} s check")
    print(table(("job", "wall s", "peak MB", "load avg", "last line"), rows))


if __name__ == "__main__":
    main()
