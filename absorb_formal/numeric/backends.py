"""Where float evaluation runs: numpy (always) or torch (optional extra; CPU or CUDA).

Both evaluate in float64. torch is imported only when asked for (it costs seconds).
"""

from __future__ import annotations

import math
from typing import Any, Protocol

import numpy as np

from .floatblock import FloatBlock


class BackendError(RuntimeError):
    """The backend or device asked for is not available here; the message says why."""


class Backend(Protocol):
    name: str
    device: str

    def evaluate(self, block: FloatBlock, x: np.ndarray) -> np.ndarray: ...


class NumpyBackend:
    name = "numpy"
    device = "cpu"

    def evaluate(self, block: FloatBlock, x: np.ndarray) -> np.ndarray:
        sigma = block.scalar.numpy
        for layer in block.layers:
            if block.gated:
                hidden = sigma(x @ layer["gate"].T) * (x @ layer["up"].T)
            else:
                hidden = sigma(x @ layer["up"].T)
            skip = block.skip_scale * x if block.skip_matrix is None else x @ block.skip_matrix.T
            x = skip + hidden @ layer["down"].T
        return x


class TorchBackend:
    name = "torch"

    def __init__(self, device: str):
        try:
            import torch
        except ImportError:
            raise BackendError("the torch backend needs torch: pip install "
                               "'absorb_formal[torch]'") from None
        if device == "auto":
            device = "cuda" if torch.cuda.is_available() else "cpu"
        if device == "cuda" and not torch.cuda.is_available():
            raise BackendError("--device cuda: torch sees no CUDA device here")
        self.torch = torch
        self.device = device

    def _sigma(self, scalar: Any, z: Any) -> Any:
        t = self.torch
        kind = scalar.kind
        if kind == "relu":
            return t.clamp(z, min=0)
        if kind == "leaky_relu":
            return t.where(z >= 0, z, float(scalar.param) * z)
        if kind == "relu_pow":
            return t.clamp(z, min=0) ** scalar.power
        if kind == "abs":
            return z.abs()
        if kind == "identity":
            return z
        if kind == "poly":
            value = t.zeros_like(z)
            for c in reversed(scalar.coeffs):
                value = value * z + float(c)
            return value
        if kind == "gelu":
            return 0.5 * z * (1 + t.erf(z / math.sqrt(2)))
        if kind == "gelu_tanh":
            return 0.5 * z * (1 + t.tanh(math.sqrt(2 / math.pi) * (z + 0.044715 * z**3)))
        if kind == "silu":
            return z * t.sigmoid(z)
        if kind == "tanh":
            return t.tanh(z)
        if kind == "sigmoid":
            return t.sigmoid(z)
        raise BackendError(f"no torch formula for {kind}")

    def evaluate(self, block: FloatBlock, x: np.ndarray) -> np.ndarray:
        t = self.torch

        def tensor(a: np.ndarray) -> Any:
            return t.as_tensor(a, dtype=t.float64, device=self.device)

        value = tensor(x)
        skip = None if block.skip_matrix is None else tensor(block.skip_matrix)
        for layer in block.layers:
            up, down = tensor(layer["up"]), tensor(layer["down"])
            if block.gated:
                hidden = self._sigma(block.scalar, value @ tensor(layer["gate"]).T) * (value @ up.T)
            else:
                hidden = self._sigma(block.scalar, value @ up.T)
            linear = block.skip_scale * value if skip is None else value @ skip.T
            value = linear + hidden @ down.T
        return value.cpu().numpy()


def backend(name: str, device: str) -> Backend:
    if name == "numpy":
        if device == "cuda":
            raise BackendError("--device cuda needs --backend torch")
        return NumpyBackend()
    if name == "torch":
        return TorchBackend(device)
    raise BackendError(f"unknown backend {name!r} (numpy or torch)")
