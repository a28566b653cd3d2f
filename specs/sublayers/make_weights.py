"""Regenerate weights.npz (seeded, deterministic): python make_weights.py

Small stand-ins for trained FFN sublayers, stored float32 as checkpoints are, with the names
of the model families whose norm placement they imitate:

- gpt2_*: a GPT-2-style gelu_tanh FFN (d = 16, m = 64) with biases and its ln_2 LayerNorm
  scale and shift (pre-norm);
- bert_*: a BERT-style erf-gelu FFN (d = 16, m = 64) with biases and its output LayerNorm
  (post-norm);
- llama_*: a LLaMA-style SwiGLU FFN (d = 8, m = 16) without biases and its RMSNorm scale;
- gemma_*: a Gemma-2-style GeGLU FFN (d = 8, m = 16) and its two RMSNorm scales, stored minus
  one (the model computes x · (1 + w)).
"""

from pathlib import Path

import numpy as np

SEED = 0


def main() -> None:
    rng = np.random.default_rng(SEED)

    def normal(*shape: int, scale: float = 0.2) -> np.ndarray:
        return (rng.normal(size=shape) * scale).astype(np.float32)

    tensors = {
        "gpt2_fc": normal(64, 16), "gpt2_fc_bias": normal(64), "gpt2_proj": normal(16, 64),
        "gpt2_proj_bias": normal(16), "gpt2_ln_2_weight": 1 + normal(16, scale=0.1),
        "gpt2_ln_2_bias": normal(16, scale=0.1),
        "bert_intermediate": normal(64, 16), "bert_intermediate_bias": normal(64),
        "bert_output": normal(16, 64), "bert_output_bias": normal(16),
        "bert_ln_weight": 1 + normal(16, scale=0.1), "bert_ln_bias": normal(16, scale=0.1),
        "llama_gate": normal(16, 8), "llama_up": normal(16, 8), "llama_down": normal(8, 16),
        "llama_norm": 1 + normal(8, scale=0.1),
        "gemma_gate": normal(16, 8), "gemma_up": normal(16, 8), "gemma_down": normal(8, 16),
        "gemma_pre": normal(8, scale=0.1), "gemma_post": normal(8, scale=0.1),
    }
    np.savez(Path(__file__).parent / "weights.npz", **tensors)


if __name__ == "__main__":
    main()
