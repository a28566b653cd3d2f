"""Write docs/examples/gpt2_mlp.onnx: a GPT-2 MLP sublayer as an ONNX graph, at a toy size.

    python docs/examples/make_onnx_example.py      (needs the onnx package)

The graph is laid out as exporters write GPT-2 (torch.onnx.export of Hugging Face's model):
MatMul with the Conv1D weight (input × output) as an initializer, Add of the bias, gelu_new
as its Tanh subgraph x·½·(1 + tanh(√(2/π)(x + 0.044715·x³))) with float32 constants, MatMul,
Add, and the residual Add. The initializers keep the checkpoint's names
(`h.0.mlp.c_fc.weight`, ...). Seeded: same seed, same bytes.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
D, M = 4, 16


def main(folder: Path = HERE) -> None:
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(20261201)
    weights = {"h.0.mlp.c_fc.weight": rng.standard_normal((D, M)) / 2,
               "h.0.mlp.c_fc.bias": rng.standard_normal(M) / 2,
               "h.0.mlp.c_proj.weight": rng.standard_normal((M, D)) / 2,
               "h.0.mlp.c_proj.bias": rng.standard_normal(D) / 2}
    initializers = [numpy_helper.from_array(a.astype(np.float32), k) for k, a in weights.items()]
    constants = {"half": 0.5, "one": 1.0, "three": 3.0, "c": 0.044715,
                 "s": math.sqrt(2 / math.pi)}
    initializers += [numpy_helper.from_array(np.array(v, dtype=np.float32), f"/mlp/{k}")
                     for k, v in constants.items()]

    def node(op: str, inputs: list[str], out: str) -> onnx.NodeProto:
        return helper.make_node(op, inputs, [out], name=out)

    nodes = [
        node("MatMul", ["x", "h.0.mlp.c_fc.weight"], "/mlp/c_fc/MatMul"),
        node("Add", ["/mlp/c_fc/MatMul", "h.0.mlp.c_fc.bias"], "/mlp/c_fc/Add"),
        node("Pow", ["/mlp/c_fc/Add", "/mlp/three"], "/mlp/act/Pow"),
        node("Mul", ["/mlp/c", "/mlp/act/Pow"], "/mlp/act/Mul"),
        node("Add", ["/mlp/c_fc/Add", "/mlp/act/Mul"], "/mlp/act/Add"),
        node("Mul", ["/mlp/s", "/mlp/act/Add"], "/mlp/act/Mul_1"),
        node("Tanh", ["/mlp/act/Mul_1"], "/mlp/act/Tanh"),
        node("Add", ["/mlp/one", "/mlp/act/Tanh"], "/mlp/act/Add_1"),
        node("Mul", ["/mlp/half", "/mlp/c_fc/Add"], "/mlp/act/Mul_2"),
        node("Mul", ["/mlp/act/Mul_2", "/mlp/act/Add_1"], "/mlp/act/Mul_3"),
        node("MatMul", ["/mlp/act/Mul_3", "h.0.mlp.c_proj.weight"], "/mlp/c_proj/MatMul"),
        node("Add", ["/mlp/c_proj/MatMul", "h.0.mlp.c_proj.bias"], "/mlp/c_proj/Add"),
        node("Add", ["x", "/mlp/c_proj/Add"], "y"),
    ]
    graph = helper.make_graph(nodes, "gpt2_mlp",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", D])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", D])],
                              initializers)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)],
                              producer_name="docs/examples/make_onnx_example.py")
    model.ir_version = 8
    onnx.checker.check_model(model)
    (folder / "gpt2_mlp.onnx").write_bytes(model.SerializeToString())


if __name__ == "__main__":
    main()
