"""`to_torch(path)`: an exported file as a PyTorch module (torch is imported here only)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from ..export.files import read_export
from .layout import layer_arrays
from .rounding import ExportError


def _torch_activation(record: dict[str, str]) -> tuple[bool, Callable[[], Any]]:
    """(gated, a maker of the torch module of σ); ExportError for a σ torch lacks."""
    import torch.nn as nn

    from ..language import SpecError, activation_named

    try:
        activation = activation_named(record["activation"])
    except SpecError as error:
        raise ExportError(f"the record's activation {record['activation']!r}: "
                          f"{error.diagnostics[0].message}") from None
    scalar = activation.scalar
    makers: dict[str, Callable[[], Any]] = {
        "relu": nn.ReLU, "gelu": nn.GELU, "gelu_tanh": lambda: nn.GELU(approximate="tanh"),
        "silu": nn.SiLU, "tanh": nn.Tanh, "sigmoid": nn.Sigmoid, "identity": nn.Identity,
        "leaky_relu": lambda: nn.LeakyReLU(float(scalar.param or 0)),
    }
    if scalar.kind not in makers:
        raise ExportError(f"torch has no module for {record['activation']!r}")
    return activation.gated, makers[scalar.kind]


def to_torch(path: Path | str, dtype: Any = None) -> Any:
    """An `nn.Module` computing the exported plain block: per layer Linear (up, and gate when
    gated) → activation → Linear (down), biases where exported; a stack is an
    `nn.Sequential` of layers. Parameters are in the file's dtype unless `dtype` is given.
    torch is imported here only (pip install torch)."""
    try:
        import torch
        import torch.nn as nn
    except ImportError:
        raise ExportError("to_torch needs torch (pip install torch)") from None
    arrays, record = read_export(path)
    gated, make = _torch_activation(record)
    depth, dim = int(record["depth"]), int(record["dim"])
    if dtype is None:
        dtype = {"float64": torch.float64, "float32": torch.float32,
                 "bfloat16": torch.bfloat16}[record["dtype"]]

    class PlainLayer(nn.Module):
        """x ↦ down σ(up x + b) + c, or down (σ(gate x + g) ⊙ (up x + b)) + c."""

        def __init__(self, weights: dict[str, np.ndarray]):
            super().__init__()
            width = weights["up"].shape[0]
            self.up = _linear(dim, width, weights["up"], weights.get("up_bias"))
            self.gate = (_linear(dim, width, weights["gate"], weights.get("gate_bias"))
                         if gated else None)
            self.act = make()
            self.down = _linear(width, dim, weights["down"], weights.get("down_bias"))

        def forward(self, x: Any) -> Any:
            if self.gate is None:
                return self.down(self.act(self.up(x)))
            return self.down(self.act(self.gate(x)) * self.up(x))

    def _linear(fan_in: int, fan_out: int, weight: np.ndarray, bias: np.ndarray | None) -> Any:
        layer = nn.Linear(fan_in, fan_out, bias=bias is not None, dtype=dtype)
        with torch.no_grad():
            layer.weight.copy_(torch.from_numpy(np.array(weight)).to(dtype))
            if bias is not None:
                layer.bias.copy_(torch.from_numpy(np.array(bias)).to(dtype))
        return layer

    layers = [PlainLayer(weights) for weights in layer_arrays(arrays, depth)]
    return layers[0] if depth == 1 else nn.Sequential(*layers)
