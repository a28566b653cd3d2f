"""`claim A equals B` at GPT-2 size (d = 768, m = 3072, 2.4M weights per block): integer
canonical forms (docs/rules.md, "Equality at scale"). B is A with its neurons permuted and,
for the relu family, each rescaled by a power of two (exact in float32); C is B with one
weight one ulp away. Each spec states `A equals B` (proved) and `A equals C` (refuted).
Wall seconds of fresh processes (start-up and file reading included), peak resident MB, for
`absorb-prove` with certificates and `absorb-prove check` of both; then the prover's and the
checker's equality alone, in-process, per pair.

  python benchmarks/bench_equals.py [d m]

Prints markdown on stdout, progress on stderr.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
from common import log, row, run, table

CONFIGS = (  # activation, skip, biases, file format, where C differs
    ("relu", "identity", False, "npz", "down"),
    ("gelu_tanh", "identity", True, "safetensors", "down_bias"),
    ("leaky_relu(1/100)", "none", True, "npz", "up"),
    ("silu", "matrix", True, "npz", "up_bias"),
)


def write_safetensors(path: Path, arrays: dict[str, np.ndarray]) -> None:
    """float32 tensors in a minimal safetensors file (header, then the raw bytes)."""
    header, blobs, offset = {}, [], 0
    for name, array in arrays.items():
        raw = np.ascontiguousarray(array, dtype="<f4").tobytes()
        header[name] = {"dtype": "F32", "shape": list(array.shape),
                        "data_offsets": [offset, offset + len(raw)]}
        blobs.append(raw)
        offset += len(raw)
    head = json.dumps(header).encode()
    path.write_bytes(len(head).to_bytes(8, "little") + head + b"".join(blobs))


def write(folder: Path, n: int, act: str, skip: str, bias: bool, fmt: str, where: str,
          d: int, m: int) -> Path:
    rng = np.random.default_rng(n)
    up = (rng.standard_normal((m, d)) * 0.05).astype(np.float32)
    down = (rng.standard_normal((d, m)) * 0.05).astype(np.float32)
    b = (rng.standard_normal(m) * 0.1).astype(np.float32)
    c = (rng.standard_normal(d) * 0.1).astype(np.float32)
    perm = rng.permutation(m)
    relu_like = act.startswith(("relu", "leaky"))
    t = (2.0 ** rng.integers(-3, 4, size=m) if relu_like else np.ones(m)).astype(np.float32)
    arrays_b = {"up": up[perm] * t[:, None], "down": down[:, perm] / t[None, :],
                "up_bias": b[perm] * t, "down_bias": c}
    arrays_c = {k: v.copy() for k, v in arrays_b.items()}
    flat = arrays_c[where].reshape(-1)
    flat[7] = np.nextafter(flat[7], np.float32(9))
    tensors = {"a": {"up": up, "down": down, "up_bias": b, "down_bias": c},
               "b": arrays_b, "c": arrays_c}
    for name, arrays in tensors.items():
        file = folder / f"w{n}{name}.{fmt}"
        if fmt == "npz":
            np.savez(file, **arrays)
        else:
            write_safetensors(file, arrays)
    skip_text = skip
    if skip == "matrix":
        np.savez(folder / f"s{n}.npz",
                 s=(np.eye(d) + rng.standard_normal((d, d)) * 0.01).astype(np.float32))
        skip_text = f'load("s{n}.npz", "s")'

    def block(name: str) -> str:
        file = f"w{n}{name.lower()}.{fmt}"
        biases = (f'  bias\n    up_bias = load("{file}", "up_bias")\n'
                  f'    down_bias = load("{file}", "down_bias")\n') if bias else ""
        return (f"block {name} {{\n  activation {act}  dim {d}  width {m}  skip {skip_text}\n"
                f'{biases}  up = load("{file}", "up")\n  down = load("{file}", "down")\n}}\n')

    spec = folder / f"eq{n}.mlp"
    spec.write_text(block("A") + block("B") + block("C")
                    + "claim A equals B\nclaim A equals C  # expect: refuted\n",
                    encoding="utf-8")
    return spec


def round_trip(folder: Path, d: int, m: int) -> list[tuple[Any, ...]]:
    """docs/tutorial.md §5 at this size: export a gelu_tanh block with biases and skip identity
    (float32: own neurons + spare pairs, exact), load it back, `R equals R_plain`."""
    rng = np.random.default_rng(9)
    np.savez(folder / "r.npz", up=(rng.standard_normal((m, d)) * 0.05).astype(np.float32),
             down=(rng.standard_normal((d, m)) * 0.05).astype(np.float32),
             b=(rng.standard_normal(m) * 0.1).astype(np.float32),
             c=(rng.standard_normal(d) * 0.1).astype(np.float32))
    block = (f"block R {{\n  activation gelu_tanh  dim {d}  width {m}  skip identity\n"
             '  bias\n    up_bias = load("r.npz", "b")\n    down_bias = load("r.npz", "c")\n'
             '  up = load("r.npz", "up")\n  down = load("r.npz", "down")\n}\n')
    (folder / "r.mlp").write_text(block, encoding="utf-8")
    exported = run(["prove", "export", "r.mlp", "R", "--out", "R_plain.safetensors", "--dtype",
                    "float32"], folder, shown=("R_plain.safetensors:",))
    import subprocess

    shown = subprocess.run([sys.executable, "-m", "absorb_formal", "export", "r.mlp", "R",
                            "--out", "R_plain.safetensors", "--dtype", "float32", "--force"],
                           cwd=folder, capture_output=True, text=True).stdout
    snippet = shown[shown.index("block R_plain"):]
    (folder / "back.mlp").write_text(block + snippet + "claim R equals R_plain\n",
                                     encoding="utf-8")
    proved = run(["prove", "--crosscheck", "0", "--certificates", "rt", "back.mlp"], folder)
    checked = run(["prove", "check", "rt"], folder)
    return [row("round trip: export (gelu_tanh, biases, skip identity, float32)", exported),
            row("round trip: prove R equals R_plain", proved),
            row("round trip: check", checked)]


def in_process(spec: Path, certs: Path) -> tuple[float, float]:
    """(prover s, checker s) for the two claims, in this process, files already cached."""
    from absorb_formal.checker import verify
    from absorb_formal.checker.readers.reading import Reading, spec_location
    from absorb_formal.decide import integer_forms
    from absorb_formal.language.load import load_file

    loaded = load_file(spec)
    blocks = loaded.blocks
    for block in blocks.values():  # read the arrays now: not part of the comparison
        for layer in block.layers or ():
            layer.up.loaded, layer.down.loaded  # noqa: B018
    start = time.perf_counter()
    for other in ("B", "C"):
        integer_forms.decide(blocks["A"], blocks[other])
    prover = time.perf_counter() - start
    checker = 0.0
    for path in sorted(certs.glob(f"{spec.name}.*.json")):
        doc = json.loads(path.read_text(encoding="utf-8"))
        reading = Reading(spec_location(doc, path))
        weights = reading.weights(doc)
        doc = reading.read_skips(doc)
        start = time.perf_counter()
        verdict = verify(doc, weights)
        checker += time.perf_counter() - start
        assert verdict.status == "valid", verdict
    return prover, checker


def main() -> None:
    d, m = (int(x) for x in sys.argv[1:3]) if len(sys.argv) > 2 else (768, 3072)
    rows: list[tuple[Any, ...]] = []
    inner: list[tuple[Any, ...]] = []
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        os.environ["ABSORB_FORMAL_CACHE"] = str(folder / "cache")
        for n, (act, skip, bias, fmt, where) in enumerate(CONFIGS):
            spec = write(folder, n, act, skip, bias, fmt, where, d, m)
            label = (f"{act}, skip {skip}, {'biases' if bias else 'no biases'}, {fmt}, "
                     f"C: one ulp in {where}")
            log(f"written: {label}")
            certs = f"certs{n}"
            proved = run(["prove", "--crosscheck", "0", "--certificates", certs, spec.name],
                         folder)
            rows.append(row(f"{label}: prove", proved))
            checked = run(["prove", "check", certs], folder)
            rows.append(row(f"{label}: check", checked))
            log(f"{proved['out']} | {checked['out']}")
            prover, checker = in_process(spec, folder / certs)
            inner.append((label, f"{prover:.2f}", f"{checker:.2f}"))
        rows += round_trip(folder, d, m)
        log("round trip done")
    print(table(("job", "wall s", "peak MB", "load", "output"), rows))
    print()
    print(table(("pair of claims (A = B, A ≠ C)", "prover s (in-process)",
                 "checker s (in-process)"), inner))


if __name__ == "__main__":
    main()
