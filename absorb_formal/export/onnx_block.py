"""`absorb-prove export ... --out FILE.onnx`: the skip-free block as an ONNX graph.

Per layer: `h = MatMul(x, Transpose(up)) + up_bias`, then σ (gated: `σ(MatMul(x,
Transpose(gate)) + gate_bias) ⊙ h`), then `y = MatMul(a, Transpose(down)) + down_bias`;
layers are chained (depth L), input `x` (N×d), output `y`. The weights are initializers under
the export's array names (`up`, `down`, `gate`, `up_bias`, ..., or `layer1.up`, ...) in the
language's layout (up m×d, down d×m), so `load("FILE.onnx", "up")` reads them back as
they are (Transpose nodes turn them in×out for MatMul). float64 exports compute in DOUBLE,
float32 in FLOAT; bfloat16 weights are stored as BFLOAT16 and Cast to FLOAT.

σ is written with standard ops (opset 17): Relu, Tanh, Sigmoid, Abs, Identity, LeakyRelu;
gelu as x·½·(1 + Erf(x/√2)), gelu_tanh as x·½·(1 + Tanh(√(2/π)(x + 0.044715x³))), silu as
x·Sigmoid(x), relu^k as Pow(Relu(x), k), poly as a sum of powers. The constants of gelu and
gelu_tanh are the compute type's roundings of √2, √(2/π), 0.044715 (as every exporter
writes them); a leaky_relu slope or poly coefficient that the type cannot hold exactly is
refused. The export record is the model's metadata_props.
"""

from __future__ import annotations

import math
from fractions import Fraction
from typing import Any

import numpy as np

from ..language import SpecError
from ..language.load import activation_named
from ..weights.onnx_file import OnnxError, onnx_module

OPSET = 17


class OnnxExportError(Exception):
    """No ONNX form for this export; the message says why."""


def onnx_package() -> Any:
    """The onnx package, or OnnxExportError saying how to install it."""
    try:
        return onnx_module("writing")
    except OnnxError as error:
        raise OnnxExportError(str(error)) from None


class _Graph:
    def __init__(self, onnx: Any, compute: int, numpy_type: Any):
        self.onnx, self.helper = onnx, onnx.helper
        self.compute, self.numpy_type = compute, numpy_type
        self.nodes: list[Any] = []
        self.count = 0

    def op(self, op_type: str, inputs: list[str], **attrs: Any) -> str:
        self.count += 1
        out = f"/{op_type.lower()}_{self.count}"
        self.nodes.append(self.helper.make_node(op_type, inputs, [out], name=out, **attrs))
        return out

    def const(self, value: float | Fraction, what: str = "") -> str:
        """A scalar Constant node in the compute type; exact values only where `what`."""
        number = self.numpy_type(value)
        if what and Fraction(float(number)) != Fraction(value):
            raise OnnxExportError(f"{what} {value} has no exact {self.numpy_type.__name__} "
                                  "value; export to .npz or .safetensors instead")
        tensor = self.onnx.numpy_helper.from_array(np.array(number, dtype=self.numpy_type))
        self.count += 1
        out = f"/const_{self.count}"
        self.nodes.append(self.helper.make_node("Constant", [], [out], name=out, value=tensor))
        return out


def _activation(name: str) -> Any:
    try:
        return activation_named(name)
    except SpecError as error:
        raise OnnxExportError(f"activation {name!r}: {error}") from None


def _sigma(g: _Graph, scalar: Any, h: str) -> str:
    kind = scalar.kind
    if kind in ("relu", "tanh", "sigmoid", "abs", "identity"):
        return g.op({"relu": "Relu", "tanh": "Tanh", "sigmoid": "Sigmoid", "abs": "Abs",
                     "identity": "Identity"}[kind], [h])
    if kind == "leaky_relu":
        slope = np.float32(scalar.param)
        if Fraction(float(slope)) != scalar.param:
            raise OnnxExportError(f"the leaky_relu slope {scalar.param} has no exact float32 "
                                  "value (ONNX attributes are float32)")
        return g.op("LeakyRelu", [h], alpha=float(slope))
    if kind == "relu_pow":
        return g.op("Pow", [g.op("Relu", [h]), g.const(scalar.power, "the power")])
    if kind == "gelu":
        erf = g.op("Erf", [g.op("Div", [h, g.const(math.sqrt(2))])])
        inner = g.op("Add", [erf, g.const(1)])
        return g.op("Mul", [g.op("Mul", [h, inner]), g.const(Fraction(1, 2))])
    if kind == "gelu_tanh":
        cube = g.op("Mul", [g.op("Pow", [h, g.const(3)]), g.const(0.044715)])
        arg = g.op("Mul", [g.op("Add", [h, cube]), g.const(math.sqrt(2 / math.pi))])
        inner = g.op("Add", [g.op("Tanh", [arg]), g.const(1)])
        return g.op("Mul", [g.op("Mul", [h, inner]), g.const(Fraction(1, 2))])
    if kind == "silu":
        return g.op("Mul", [h, g.op("Sigmoid", [h])])
    if kind == "poly":
        terms = []
        for power, c in enumerate(scalar.coeffs):
            if c == 0:
                continue
            constant = g.const(c, "the poly coefficient")
            if power == 0:  # c·h^0, shaped like h
                terms.append(g.op("Add", [g.op("Mul", [h, g.const(0)]), constant]))
            else:
                monomial = h if power == 1 else g.op("Pow", [h, g.const(power, "the power")])
                terms.append(g.op("Mul", [monomial, constant]))
        if not terms:
            return g.op("Mul", [h, g.const(0)])
        total = terms[0]
        for term in terms[1:]:
            total = g.op("Add", [total, term])
        return total
    raise OnnxExportError(f"no ONNX form for the activation {kind!r}")


def onnx_bytes(arrays: dict[str, np.ndarray], record: dict[str, str]) -> bytes:
    """The serialised model of an export (arrays as `export.write_arrays` gets them: float64,
    float32, or uint16 bfloat16 bit patterns; `record` as its metadata)."""
    onnx = onnx_package()
    activation = _activation(record["activation"])
    depth, dim = int(record["depth"]), int(record["dim"])
    wide = record["dtype"] == "float64"
    compute = onnx.TensorProto.DOUBLE if wide else onnx.TensorProto.FLOAT
    g = _Graph(onnx, compute, np.float64 if wide else np.float32)
    initializers = []
    for key, array in arrays.items():
        if array.dtype == np.uint16:  # bfloat16 bit patterns, stored as they are
            tensor = onnx.TensorProto(name=key, data_type=onnx.TensorProto.BFLOAT16,
                                      dims=list(array.shape),
                                      raw_data=np.ascontiguousarray(array, "<u2").tobytes())
        else:
            tensor = onnx.numpy_helper.from_array(np.ascontiguousarray(array), key)
        initializers.append(tensor)

    def weight(key: str) -> str:
        return key if arrays[key].dtype != np.uint16 else g.op("Cast", [key], to=compute)

    def linear(x: str, prefix: str, name: str) -> str:
        out = g.op("MatMul", [x, g.op("Transpose", [weight(prefix + name)], perm=[1, 0])])
        if prefix + name + "_bias" in arrays:
            out = g.op("Add", [out, weight(prefix + name + "_bias")])
        return out

    x = "x"
    for layer in range(depth):
        prefix = f"layer{layer + 1}." if depth > 1 else ""
        h = linear(x, prefix, "up")
        if activation.gated:
            a = g.op("Mul", [_sigma(g, activation.scalar, linear(x, prefix, "gate")), h])
        else:
            a = _sigma(g, activation.scalar, h)
        x = linear(a, prefix, "down")
    helper = onnx.helper
    g.nodes.append(helper.make_node("Identity", [x], ["y"], name="/output"))
    graph = helper.make_graph(g.nodes, record.get("block", "plain"),
                              [helper.make_tensor_value_info("x", compute, ["N", dim])],
                              [helper.make_tensor_value_info("y", compute, ["N", dim])],
                              initializers)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)],
                              producer_name="absorb_formal",
                              doc_string=record.get("statement", ""))
    model.ir_version = 8  # readable by runtimes of opset 17
    helper.set_model_props(model, dict(record))
    onnx.checker.check_model(model)
    return bytes(model.SerializeToString())


def onnx_record(path: Any) -> dict[str, str] | None:
    """The metadata_props of an ONNX model, or None when it has none; ValueError when the
    file is no ONNX model."""
    try:
        model = onnx_package().load_model(str(path), format="protobuf", load_external_data=False)
    except OnnxExportError as error:
        raise ValueError(str(error)) from None
    except Exception as error:  # protobuf's DecodeError, and whatever else a bad file raises
        raise ValueError(f"not an ONNX model ({type(error).__name__})") from None
    props = {p.key: p.value for p in model.metadata_props}
    return props or None
