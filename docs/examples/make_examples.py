"""Write the small, seeded weight files that the examples of docs/ load.

    python docs/examples/make_examples.py

Each file has the layout of the model it stands for, at a toy size so that the examples run
in well under a second: a PyTorch nn.Sequential(Linear, ReLU, Linear) (state_dict keys
"0.weight", "0.bias", "2.weight", "2.bias"; nn.Linear stores output × input), a Hugging Face
GPT-2 MLP (Conv1D stores input × output; biases 1-D), a LLaMA MLP (gate_proj, up_proj,
down_proj; no biases; bfloat16), and a learnable skip (skip.npz, stored transposed). The
safetensors files are written by hand (8-byte little-endian header length, JSON header, raw
little-endian data), so that neither torch nor the safetensors package is needed.
Same seed, same bytes.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
D, M = 4, 8  # toy sizes: dim d, hidden width m


def save_safetensors(path: Path, tensors: dict[str, np.ndarray], bf16: bool = False) -> None:
    """A .safetensors file; with `bf16`, float32 arrays are stored as bfloat16 (their top
    16 bits, i.e. rounded toward zero: the values written are exactly the ones stored)."""
    header: dict[str, object] = {}
    chunks: list[bytes] = []
    offset = 0
    for name in sorted(tensors):
        array = np.ascontiguousarray(tensors[name], dtype="<f4")
        if bf16:
            data = (array.view("<u4") >> 16).astype("<u2").tobytes()
            dtype = "BF16"
        else:
            data = array.tobytes()
            dtype = "F32"
        header[name] = {"dtype": dtype, "shape": list(array.shape),
                        "data_offsets": [offset, offset + len(data)]}
        chunks.append(data)
        offset += len(data)
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    path.write_bytes(len(text).to_bytes(8, "little") + text + b"".join(chunks))


def main(folder: Path = HERE) -> None:
    """Write the files into `folder` (default: beside this script)."""
    rng = np.random.default_rng(20260101)
    normal = lambda *shape: (rng.standard_normal(shape) / 2).astype(np.float32)  # noqa: E731

    # PyTorch nn.Sequential(nn.Linear(D, M), nn.ReLU(), nn.Linear(M, D)).state_dict()
    sequential = {"0.weight": normal(M, D), "0.bias": normal(M),
                  "2.weight": normal(D, M), "2.bias": normal(D)}
    np.savez(folder / "sequential.npz", **sequential)
    save_safetensors(folder / "sequential.safetensors", sequential)

    # Hugging Face GPT-2 block h.0: mlp.c_fc (d → 4d) and mlp.c_proj (4d → d), Conv1D layout.
    gpt2 = {"h.0.mlp.c_fc.weight": normal(D, 4 * D), "h.0.mlp.c_fc.bias": normal(4 * D),
            "h.0.mlp.c_proj.weight": normal(4 * D, D), "h.0.mlp.c_proj.bias": normal(D)}
    save_safetensors(folder / "gpt2_mlp.safetensors", gpt2)

    # Hugging Face LLaMA layer 0: down_proj(silu(gate_proj(x)) * up_proj(x)), bfloat16.
    llama = {"model.layers.0.mlp.gate_proj.weight": normal(M, D),
             "model.layers.0.mlp.up_proj.weight": normal(M, D),
             "model.layers.0.mlp.down_proj.weight": normal(D, M)}
    save_safetensors(folder / "llama_mlp.safetensors", llama, bf16=True)

    # A learnable skip S = [[2, 0], [1, 1]], stored transposed (read back with `.T`).
    np.savez(folder / "skip.npz", mix=np.array([[2, 1], [0, 1]], dtype=np.int8))


if __name__ == "__main__":
    main()
