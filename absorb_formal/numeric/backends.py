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


CHUNK = 1 << 20  # elements in one (points x neurons) temporary: 8 MiB of float64


class Backend(Protocol):
    name: str
    device: str

    def evaluate(self, block: FloatBlock, x: np.ndarray) -> np.ndarray: ...

    def evaluate_scaled(self, block: FloatBlock, x: np.ndarray
                        ) -> tuple[np.ndarray, np.ndarray]: ...


def slope(scalar: Any, z: Any) -> Any:
    """An upper bound on |σ'| near z, elementwise (or one number). Written with abs, + and *
    only, so that it runs on numpy arrays and torch tensors alike."""
    kind = scalar.kind
    if kind in ("relu", "abs", "identity", "tanh"):
        return 1.0
    if kind == "leaky_relu":
        return max(1.0, abs(float(scalar.param)))
    if kind == "sigmoid":
        return 0.25
    if kind in ("gelu", "gelu_tanh", "silu"):
        return 1.2  # their |σ'| peaks at 1.13, 1.13 and 1.10
    size = abs(z)
    if kind == "relu_pow":
        return scalar.power * size ** (scalar.power - 1)
    if kind == "poly":
        bound = 0.0 * size
        for i in range(len(scalar.coeffs) - 1, 0, -1):
            bound = bound * size + i * abs(float(scalar.coeffs[i]))
        return bound
    raise BackendError(f"no slope bound for {kind}")


def forward(block: FloatBlock, x: Any, sigma: Any, tensor: Any, scaled: bool) -> tuple[Any, Any]:
    """B(x) layer by layer, shared by the backends; with `scaled`, also a first-order bound
    on the size of everything summed on the way (the running error analysis of a dot
    product: rounding errors are at most about eps x (terms) x this scale per output).

    Neurons are taken CHUNK // len(x) at a time, so no temporary outgrows CHUNK elements
    whatever the width (`--crosscheck` on a width-10^6 claim must not exhaust memory)."""
    scale = abs(x) if scaled else None
    step = max(1, CHUNK // max(1, len(x)))
    skip = None if block.skip_matrix is None else tensor(block.skip_matrix)
    for layer in block.layers:
        value = block.skip_scale * x if skip is None else x @ skip.T
        if scale is not None:
            size = abs(block.skip_scale) * scale if skip is None else scale @ abs(skip).T
        for start in range(0, len(layer["up"]), step):
            part = {name: tensor(array[start:start + step] if name != "down"
                                 else array[:, start:start + step])
                    for name, array in layer.items() if name != "down_bias"}
            hidden, hidden_size = _hidden(block, part, x, scale, sigma)
            value = value + hidden @ part["down"].T
            if scaled:
                size = size + hidden_size @ abs(part["down"]).T
        if "down_bias" in layer:  # the output bias c (docs/rules.md §8), once per layer
            bias = tensor(layer["down_bias"])
            value = value + bias
            if scaled:
                size = size + abs(bias)
        x, scale = value, (size if scaled else None)
    return x, scale


def _hidden(block: FloatBlock, part: dict[str, Any], x: Any, scale: Any, sigma: Any
            ) -> tuple[Any, Any]:
    """σ(U x) (or σ(G x)·(U x)) for some neurons, and the size bound of each entry: the
    input rounding |U| scale carried through σ's slope, plus the entry's own size."""
    lifted, lifted_size = _affine(part, "up", x, scale)
    if not block.gated:
        hidden = sigma(lifted)
        if scale is None:
            return hidden, None
        return hidden, slope(block.scalar, lifted) * lifted_size + abs(hidden)
    gate, gate_size = _affine(part, "gate", x, scale)
    gated = sigma(gate)
    hidden = gated * lifted
    if scale is None:
        return hidden, None
    size = (slope(block.scalar, gate) * gate_size * abs(lifted)
            + abs(gated) * lifted_size + abs(hidden))
    return hidden, size


def _affine(part: dict[str, Any], name: str, x: Any, scale: Any) -> tuple[Any, Any]:
    """W x (+ its bias, docs/rules.md §8) and the size bound of its terms (None unscaled)."""
    value = x @ part[name].T
    size = None if scale is None else scale @ abs(part[name]).T
    bias = part.get(name + "_bias")
    if bias is not None:
        value = value + bias
        size = None if size is None else size + abs(bias)
    return value, size


class NumpyBackend:
    name = "numpy"
    device = "cpu"

    def evaluate(self, block: FloatBlock, x: np.ndarray) -> np.ndarray:
        return forward(block, x, block.scalar.numpy, np.asarray, False)[0]

    def evaluate_scaled(self, block: FloatBlock, x: np.ndarray
                        ) -> tuple[np.ndarray, np.ndarray]:
        return forward(block, x, block.scalar.numpy, np.asarray, True)


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

    def _tensor(self, a: np.ndarray) -> Any:
        # torch warns on a read-only array (weights read from a file are), even though
        # nothing here writes to it; a copy is what it asks for
        return self.torch.as_tensor(a if a.flags.writeable else a.copy(),
                                    dtype=self.torch.float64, device=self.device)

    def _run(self, block: FloatBlock, x: np.ndarray, scaled: bool) -> tuple[Any, Any]:
        def sigma(z: Any) -> Any:
            return self._sigma(block.scalar, z)

        return forward(block, self._tensor(x), sigma, self._tensor, scaled)

    def evaluate(self, block: FloatBlock, x: np.ndarray) -> np.ndarray:
        return self._run(block, x, False)[0].cpu().numpy()

    def evaluate_scaled(self, block: FloatBlock, x: np.ndarray
                        ) -> tuple[np.ndarray, np.ndarray]:
        value, size = self._run(block, x, True)
        return value.cpu().numpy(), size.cpu().numpy()


def backend(name: str, device: str) -> Backend:
    if name == "numpy":
        if device == "cuda":
            raise BackendError("--device cuda needs --backend torch")
        return NumpyBackend()
    if name == "torch":
        return TorchBackend(device)
    raise BackendError(f"unknown backend {name!r} (numpy or torch)")
