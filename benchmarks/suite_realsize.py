"""Real-size weights through load(...): T5-small ReLU (.npz, float32) and LLaMA-7B SwiGLU
(.safetensors, bf16), generated here (seeded) in a temporary folder, never committed. Every
figure is the median of three fresh processes: wall time includes interpreter start-up and
imports."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any

import numpy as np
from common import measured_process, table

T5 = {"d": 512, "m": 2048}
LLAMA = {"d": 4096, "m": 11008}
REPEAT = 3

T5_SPEC = """block T5 {
    activation relu
    dim 512  width 2048  skip identity
    up   = load("t5.npz", "wi")
    down = load("t5.npz", "wo")
}
claim T5 is not absorbable
"""

LLAMA_SPEC = """block L {
    activation swiglu
    dim 4096  width 11008  skip identity
    gate = load("llama.safetensors", "w1")
    up   = load("llama.safetensors", "w3")
    down = load("llama.safetensors", "w2")
}
claim L is not absorbable
"""


def _t5(folder: Path) -> None:
    rng = np.random.default_rng(5)
    d, m = T5["d"], T5["m"]
    np.savez(folder / "t5.npz", wi=(rng.standard_normal((m, d)) / np.sqrt(d)).astype(np.float32),
             wo=(rng.standard_normal((d, m)) / np.sqrt(m)).astype(np.float32))
    (folder / "t5.mlp").write_text(T5_SPEC, encoding="utf-8")


def _llama(folder: Path, d: int = LLAMA["d"], m: int = LLAMA["m"], name: str = "llama") -> None:
    rng = np.random.default_rng(7)
    shapes = {"w1": (m, d), "w3": (m, d), "w2": (d, m)}
    header, blobs, offset = {}, [], 0
    for key, shape in shapes.items():
        values = (rng.standard_normal(shape, dtype=np.float32) * 0.02).view(np.uint32)
        raw = (values >> 16).astype(np.uint16).tobytes()  # bf16: the top half of float32
        header[key] = {"dtype": "BF16", "shape": list(shape),
                        "data_offsets": [offset, offset + len(raw)]}
        blobs.append(raw)
        offset += len(raw)
    head = json.dumps(header).encode()
    with open(folder / f"{name}.safetensors", "wb") as f:
        f.write(len(head).to_bytes(8, "little") + head)
        for blob in blobs:
            f.write(blob)
    spec = LLAMA_SPEC.replace("llama.", f"{name}.").replace("4096", str(d))
    (folder / f"{name}.mlp").write_text(spec.replace("11008", str(m)), encoding="utf-8")


def run(log: Any) -> dict[str, Any]:
    out: dict[str, Any] = {}
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        _t5(folder)
        _llama(folder)
        _llama(folder, 8, 16, "tiny")  # same layout: the fixed cost of start-up and proofs
        jobs = {
            "t5 load": ["load-npz", "t5.npz"],
            "t5 prove": ["prove", "--crosscheck", "0", "--certificates", "certs", "t5.mlp"],
            "t5 check": ["prove", "check", "certs/t5.mlp.7.json"],
            "t5 prove+crosscheck": ["prove", "t5.mlp"],
            "llama load": ["load-safetensors", "llama.safetensors"],
            "llama prove": ["prove", "--crosscheck", "0", "llama.mlp"],
            "llama prove+sanity": ["prove", "llama.mlp"],
            "tiny load": ["load-safetensors", "tiny.safetensors"],
            "tiny prove": ["prove", "--crosscheck", "0", "tiny.mlp"],
        }
        for name, argv in jobs.items():
            runs = sorted((measured_process(argv, cwd=folder) for _ in range(REPEAT)),
                          key=lambda res: res["seconds"])
            out[name] = runs[len(runs) // 2]  # the median run
            log(f"realsize {name}: {out[name]['seconds']:.2f} s, {out[name]['peak_mb']} MB, "
                f"exit {out[name]['code']}: {out[name]['stdout'].strip()[:160]}")
        out["llama bytes"] = (folder / "llama.safetensors").stat().st_size
        out["t5 bytes"] = (folder / "t5.npz").stat().st_size
    return out


def _line(result: dict[str, Any]) -> str:
    first = result["stdout"].strip().splitlines()[:1]
    return first[0].split(": ", 1)[-1][:110] if first else f"exit {result['code']}"


def markdown(r: dict[str, Any]) -> str:
    rows = []
    for name in ("t5 load", "t5 prove", "t5 check", "t5 prove+crosscheck", "llama load",
                 "llama prove", "llama prove+sanity", "tiny load", "tiny prove"):
        res = r[name]
        rows.append((name, f"{res['seconds']:.2f}", res["peak_mb"], res["code"], _line(res)))
    t5_ok = r["t5 prove"]["seconds"] < 30 and (r["t5 prove"]["peak_mb"] or 0) < 4096
    ratio = r["llama prove"]["seconds"] / r["llama load"]["seconds"]
    marginal = ((r["llama prove"]["seconds"] - r["tiny prove"]["seconds"])
                / (r["llama load"]["seconds"] - r["tiny load"]["seconds"]))
    return "\n\n".join([
        f"T5-small-size ReLU block: d = {T5['d']}, m = {T5['m']}, float32 .npz "
        f"({r['t5 bytes'] / 2**20:.0f} MiB). LLaMA-7B-size SwiGLU block: d = {LLAMA['d']}, "
        f"m = {LLAMA['m']}, bf16 .safetensors ({r['llama bytes'] / 2**20:.0f} MiB). "
        "`load` rows: numpy alone reads every array (bf16 widened to float32).",
        table(("job", "wall s", "peak MB", "exit", "first output line"), rows),
        f"- T5: decided with the exact modular-functional certificate in "
        f"{r['t5 prove']['seconds']:.1f} s and {r['t5 prove']['peak_mb']:.0f} MB "
        f"(target < 30 s, < 4 GB: {'met' if t5_ok else 'MISSED'}).",
        f"- LLaMA: `never` in {r['llama prove']['seconds']:.2f} s = {ratio:.2f}× numpy's load "
        f"time (target ≤ 1.5×: {'met' if ratio <= 1.5 else 'MISSED'}). Beyond the fixed "
        "cost (interpreter start-up, imports, sympy's proofs of the activation's properties: "
        "the `tiny` rows, same layout with d = 8, m = 16), the tool spends "
        f"{marginal:.2f}× what numpy spends on the extra bytes: load(...) reads and checks "
        "the weights (finite, shapes), and T3 then reads only S; nothing is converted to "
        "exact rationals."])
