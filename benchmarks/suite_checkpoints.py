"""Real checkpoints read fast, exactly (the loading side): generated here (seeded) in a
temporary folder, never committed. Every figure is the median of three fresh processes: wall
time includes interpreter start-up and imports.

- (a) a LLaMA-7B-size SwiGLU block (d = 4096, m = 11008, bf16 .safetensors, three matrices),
  `claim L is not absorbable`, decided by T4 flatness (a never-rule that reads no weight), next
  to the time numpy takes just to read those arrays;
- (b) a 12-block GPT-2-small-shaped checkpoint in one spec (d = 768, m = 3072, gelu_tanh,
  biases, Hugging Face layout: `h.N.mlp.c_fc.weight` stored input × output, read with `.T`),
  twelve `claim HN is not absorbable`, bf16 and fp32; then the checker on its certificates;
- (c) one such block, bf16 (and fp32): the own-width verdict (modular functional), then the
  checker.

  python benchmarks/suite_checkpoints.py [--quick]     (--quick: one run each, no (b) fp32)
"""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path
from typing import Any

import numpy as np
from common import measured_process, table
from suite_realsize import _llama

GPT2 = {"d": 768, "m": 3072, "blocks": 12}
REPEAT = 3

GPT2_BLOCK = """block H{n} {{
    activation gelu_tanh
    dim {d}  width {m}  skip identity
    bias
    up        = load("{file}", "h.{n}.mlp.c_fc.weight").T
    up_bias   = load("{file}", "h.{n}.mlp.c_fc.bias")
    down      = load("{file}", "h.{n}.mlp.c_proj.weight").T
    down_bias = load("{file}", "h.{n}.mlp.c_proj.bias")
}}
"""


def _safetensors(path: Path, tensors: dict[str, np.ndarray], bf16: bool) -> None:
    """Write float32 tensors as F32, or as BF16 (the top half of each float32's bits)."""
    header, blobs, offset = {}, [], 0
    for key, values in tensors.items():
        if bf16:
            raw = (values.astype(np.float32).view(np.uint32) >> 16).astype("<u2").tobytes()
        else:
            raw = values.astype("<f4").tobytes()
        header[key] = {"dtype": "BF16" if bf16 else "F32", "shape": list(values.shape),
                       "data_offsets": [offset, offset + len(raw)]}
        blobs.append(raw)
        offset += len(raw)
    head = json.dumps(header).encode()
    with open(path, "wb") as f:
        f.write(len(head).to_bytes(8, "little") + head)
        for blob in blobs:
            f.write(blob)


def gpt2(folder: Path, name: str, blocks: int, bf16: bool) -> None:
    """`name.safetensors` (GPT-2-small MLP weights, HF layout) and `name.mlp` (one claim per
    block)."""
    rng = np.random.default_rng(2)
    d, m = GPT2["d"], GPT2["m"]
    tensors = {}
    for n in range(blocks):
        tensors[f"h.{n}.mlp.c_fc.weight"] = rng.standard_normal((d, m), dtype=np.float32) * .02
        tensors[f"h.{n}.mlp.c_fc.bias"] = rng.standard_normal(m, dtype=np.float32) * .02
        tensors[f"h.{n}.mlp.c_proj.weight"] = rng.standard_normal((m, d), dtype=np.float32) * .02
        tensors[f"h.{n}.mlp.c_proj.bias"] = rng.standard_normal(d, dtype=np.float32) * .02
    _safetensors(folder / f"{name}.safetensors", tensors, bf16)
    text = "".join(GPT2_BLOCK.format(n=n, d=d, m=m, file=f"{name}.safetensors")
                   for n in range(blocks))
    text += "".join(f"claim H{n} is not absorbable\n" for n in range(blocks))
    (folder / f"{name}.mlp").write_text(text, encoding="utf-8")


def _median(argv: list[str], folder: Path, repeat: int) -> dict[str, Any]:
    runs = sorted((measured_process(argv, cwd=folder) for _ in range(repeat)),
                  key=lambda res: res["seconds"])
    return runs[len(runs) // 2]


def run(log: Any, quick: bool = False) -> dict[str, Any]:
    repeat = 1 if quick else REPEAT
    out: dict[str, Any] = {}
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        _llama(folder)
        _llama(folder, 8, 16, "tiny")
        gpt2(folder, "gpt2", GPT2["blocks"], bf16=True)
        gpt2(folder, "one", 1, bf16=True)
        gpt2(folder, "onef", 1, bf16=False)
        jobs = {
            "(a) numpy load": ["load-safetensors", "llama.safetensors"],
            "(a) prove": ["prove", "--crosscheck", "0", "llama.mlp"],
            "(a) tiny prove": ["prove", "--crosscheck", "0", "tiny.mlp"],
            "(b) bf16 prove": ["prove", "--crosscheck", "0", "gpt2.mlp"],
            "(b) bf16 prove+certs": ["prove", "--crosscheck", "0", "--certificates", "cb",
                                     "gpt2.mlp"],
            "(b) bf16 check": ["prove", "check", "cb"],
            "(c) prove": ["prove", "--crosscheck", "0", "one.mlp"],
            "(c) prove+certs": ["prove", "--crosscheck", "0", "--certificates", "cc",
                                "one.mlp"],
            "(c) check": ["prove", "check", "cc"],
            "(c) fp32 prove+certs": ["prove", "--crosscheck", "0", "--certificates", "cf",
                                     "onef.mlp"],
            "(c) fp32 check": ["prove", "check", "cf"],
        }
        if not quick:
            gpt2(folder, "gpt2f", GPT2["blocks"], bf16=False)
            jobs["(b) fp32 prove"] = ["prove", "--crosscheck", "0", "gpt2f.mlp"]
        for name, argv in jobs.items():
            out[name] = _median(argv, folder, repeat)
            log(f"checkpoints {name}: {out[name]['seconds']:.2f} s, "
                f"{out[name]['peak_mb']} MB, exit {out[name]['code']}: "
                f"{out[name]['stdout'].strip().splitlines()[-1:]}")
    return out


def _outcome(res: dict[str, Any]) -> str:
    """The summary's counts (`12 claims (0 proved, 0 refuted, 12 unknown)`), or the check's."""
    for line in res["stdout"].splitlines():
        if line.startswith("summary:"):
            return line.split(", ", 1)[1].split("), ")[0] + ")"
        if line.startswith("check:"):
            return line.split(": ", 1)[1]
    return f"exit {res['code']}"


def markdown(r: dict[str, Any]) -> str:
    rows = [(name, f"{res['seconds']:.2f}", res["peak_mb"], res["code"], _outcome(res))
            for name, res in r.items()]
    ratio = r["(a) prove"]["seconds"] / r["(a) numpy load"]["seconds"]
    return "\n\n".join([
        table(("job", "wall s", "peak MB", "exit", "outcome"), rows),
        f"- (a) LLaMA never-rule: {ratio:.2f}× numpy's load time (target ≤ 2×); the fixed "
        f"cost alone (`tiny`, d = 8, m = 16) is {r['(a) tiny prove']['seconds']:.2f} s.",
        f"- (b) 12 GPT-2 blocks, bf16: {r['(b) bf16 prove']['seconds']:.1f} s, "
        f"{_outcome(r['(b) bf16 prove'])} (target: verdicts in < 60 s).",
        f"- (c) one GPT-2 block, bf16: {r['(c) prove']['seconds']:.1f} s, "
        f"{_outcome(r['(c) prove'])} (target: a verdict in < 5 s)."])


if __name__ == "__main__":
    print(markdown(run(lambda line: print(line, file=sys.stderr, flush=True),
                       quick="--quick" in sys.argv)))
