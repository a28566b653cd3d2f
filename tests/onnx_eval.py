"""A tiny numpy interpreter of the few ONNX ops the tests' MLP graphs use (onnxruntime is not
available): MatMul, Gemm, Add, Sub, Mul, Div, Pow, Erf, Tanh, Sigmoid, Relu, Gelu (and the
com.microsoft Gelu/FastGelu), Abs, LeakyRelu, Identity, Cast, Transpose, Constant, and the
norms' ops: ReduceMean (last axis), Sqrt, Reciprocal, LayerNormalization,
SimplifiedLayerNormalization, RMSNormalization. Values are float64 (a Cast to FLOAT rounds
to float32 first)."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from onnx import numpy_helper

_erf = np.vectorize(math.erf)


def _gelu(x: np.ndarray, approximate: str) -> np.ndarray:
    if approximate == "tanh":
        return 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x**3)))
    return 0.5 * x * (1 + _erf(x / math.sqrt(2)))


def _attributes(node: Any) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for a in node.attribute:
        if a.type == a.FLOAT:
            out[a.name] = a.f
        elif a.type == a.INT:
            out[a.name] = a.i
        elif a.type == a.STRING:
            out[a.name] = a.s.decode()
        elif a.type == a.INTS:
            out[a.name] = list(a.ints)
        elif a.type == a.TENSOR:
            out[a.name] = numpy_helper.to_array(a.t).astype(np.float64)
    return out


def run(model: Any, feeds: dict[str, np.ndarray], folder: str | None = None
        ) -> dict[str, np.ndarray]:
    """Every value of the main graph, given the graph inputs (initializers as float64)."""
    values: dict[str, np.ndarray] = {}
    for tensor in model.graph.initializer:
        values[tensor.name] = numpy_helper.to_array(tensor, folder or "").astype(np.float64)
    values.update({k: np.asarray(v, dtype=np.float64) for k, v in feeds.items()})
    for node in model.graph.node:
        ins = [values[name] for name in node.input if name]
        attrs = _attributes(node)
        op = node.op_type
        if op == "MatMul":
            out = ins[0] @ ins[1]
        elif op == "Gemm":
            a = ins[0].T if attrs.get("transA") else ins[0]
            b = ins[1].T if attrs.get("transB") else ins[1]
            out = attrs.get("alpha", 1.0) * (a @ b)
            if len(ins) > 2:
                out = out + attrs.get("beta", 1.0) * ins[2]
        elif op == "Add":
            out = ins[0] + ins[1]
        elif op == "Sub":
            out = ins[0] - ins[1]
        elif op == "Mul":
            out = ins[0] * ins[1]
        elif op == "Div":
            out = ins[0] / ins[1]
        elif op == "Pow":
            out = ins[0] ** ins[1]
        elif op == "Erf":
            out = _erf(ins[0])
        elif op == "Tanh":
            out = np.tanh(ins[0])
        elif op == "Sigmoid":
            out = 1 / (1 + np.exp(-ins[0]))
        elif op == "Relu":
            out = np.maximum(ins[0], 0)
        elif op == "Gelu":
            out = _gelu(ins[0], attrs.get("approximate", "none"))
        elif op == "FastGelu":
            out = _gelu(ins[0] + (ins[1] if len(ins) > 1 else 0), "tanh")
        elif op == "Identity":
            out = ins[0]
        elif op == "Cast":  # to FLOAT rounds to float32; to DOUBLE keeps the value
            out = ins[0].astype(np.float32) if attrs["to"] == 1 else ins[0]
        elif op == "Abs":
            out = np.abs(ins[0])
        elif op == "LeakyRelu":
            out = np.where(ins[0] >= 0, ins[0], attrs.get("alpha", 0.01) * ins[0])
        elif op == "Transpose":
            out = np.transpose(ins[0], attrs.get("perm"))
        elif op == "Constant":
            out = attrs["value"] if "value" in attrs else np.float64(attrs["value_float"])
        elif op == "ReduceMean":
            axes = attrs["axes"] if "axes" in attrs else [int(a) for a in ins[1].reshape(-1)]
            out = ins[0].mean(axis=tuple(axes), keepdims=bool(attrs.get("keepdims", 1)))
        elif op == "Sqrt":
            out = np.sqrt(ins[0])
        elif op == "Reciprocal":
            out = 1 / ins[0]
        elif op in ("LayerNormalization", "SimplifiedLayerNormalization", "RMSNormalization"):
            x, eps = ins[0], float(np.float32(attrs.get("epsilon", 1e-5)))
            if op == "LayerNormalization":
                x = x - x.mean(axis=-1, keepdims=True)
            out = x / np.sqrt((x * x).mean(axis=-1, keepdims=True) + eps) * ins[1]
            out = out + ins[2] if len(ins) > 2 else out
        else:
            raise NotImplementedError(op)
        values[node.output[0]] = np.asarray(out, dtype=np.float64)
    return values
