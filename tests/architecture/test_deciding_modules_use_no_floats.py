"""Exact means exact, by design: no module that decides or checks a verdict touches
a float copy of a weight. Floats belong to `numeric/` (cross-checks, sanity figures, --fit).

The scan is syntactic: it forbids the float views of the model (`Matrix.floats`,
`Skip.apply_float`, `Block.evaluate`), the builtin `float(...)`, float dtypes and `np.linalg`
in every module on a deciding path. The exact readers of float formats (which widen float16 to
float32, or call frexp on float64, both without rounding) are listed with that reason.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "absorb_formal"
DECIDING = ["decide", "generic", "checker", "language", "model/linalg.py", "model/blocks.py",
            "certify", "cli/check.py", "checker/document.py",
            "api.py",
            "model/exactarray.py"]
# model/activations.py holds σ's exact form and its numpy form side by side; the scan forbids
# reaching for `.numpy` from any deciding module instead.
# Exact readers, checked by hand: every float operation in them is a lossless widening or
# frexp.
EXACT_READERS = {"model/exactarray.py", "checker/readers/files.py", "weights/arrays.py"}
# Exact integer arithmetic on float hardware: the modular LU keeps residues in
# [-(p-1), p-1] as float64 and multiplies them with BLAS, exact because every dot product
# has k·(p−1)² + p < 2^53, a bound the module raises on (not a bare assert) and that
# tests/checker/test_modular_lu_against_flint.py holds against FLINT on random and
# adversarial matrices; systems.py builds the certificates' systems from its products
# under the same bound, and decide/outofcore.py runs the same kernel operations on
# panels of a memory-mapped matrix. They may name float dtypes; `float(...)`, the
# model's float views and np.linalg stay forbidden there too.
EXACT_INTEGER_LU = {"checker/kernel/modlu.py", "checker/kernel/systems.py",
                    "decide/outofcore.py"}
# model/blocks.py defines the float views (for numeric/) next to the exact ones. The ONNX readers
# read a Constant node's `value_floats`, a protobuf field of float32 values that Python holds
# as doubles (a lossless widening), through the attribute `.floats`, and decode them exactly.
# decide/lemmas.py evaluates a sympy expression to 30 digits only to skip a proof that cannot
# succeed (its answer is never a property, only "do not try").
FLOAT_VIEWS = {"model/blocks.py": {"floats", "apply_float", "evaluate"},
               "decide/lemmas.py": {"numeric"},
               "checker/readers/onnx_file.py": {"_constant"},
               "weights/onnx_file.py": {"constant_tensor"}}
FORBIDDEN_ATTRIBUTES = {"floats", "apply_float", "linalg", "numpy"}
FLOAT_DTYPES = {"float16", "float32", "float64", "float128", "longdouble", "half", "single",
                "double"}


def modules() -> list[Path]:
    out: list[Path] = []
    for entry in DECIDING:
        path = PACKAGE / entry
        out += sorted(path.rglob("*.py")) if path.is_dir() else [path]
    return out


def violations(source: str, name: str) -> list[str]:
    """Lines where `source` reaches for a float copy of exact data."""
    tree = ast.parse(source)
    allowed = FLOAT_VIEWS.get(name, set())
    found = []
    for node in ast.walk(tree):
        where = f"{name}:{getattr(node, 'lineno', '?')}"
        if isinstance(node, ast.FunctionDef) and node.name in allowed:
            continue
        if isinstance(node, ast.Attribute):
            if node.attr in FORBIDDEN_ATTRIBUTES and not _inside(tree, node, allowed):
                found.append(f"{where}: .{node.attr}")
            exact_module = isinstance(node.value, ast.Name) and node.value.id == "exact"
            if node.attr == "evaluate" and not exact_module and not _inside(tree, node, allowed):
                found.append(f"{where}: float evaluation .evaluate")
            if node.attr in FLOAT_DTYPES and name not in EXACT_READERS | EXACT_INTEGER_LU \
                    and not _inside(tree, node, allowed):
                found.append(f"{where}: float dtype .{node.attr}")
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
            if node.func.id == "float" and name not in EXACT_READERS \
                    and not _inside(tree, node, allowed):
                found.append(f"{where}: float(...)")
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) \
                and node.value in FLOAT_DTYPES and name not in EXACT_READERS | EXACT_INTEGER_LU:
            found.append(f"{where}: float dtype {node.value!r}")
    return found


def _inside(tree: ast.AST, target: ast.AST, functions: set[str]) -> bool:
    """Is `target` within the body of a function named in `functions` (a float view)?"""
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef) and node.name in functions \
                and any(child is target for child in ast.walk(node)):
            return True
    return False


@pytest.mark.parametrize("path", modules(), ids=lambda p: str(p.relative_to(PACKAGE)))
def test_no_float_copies_on_deciding_paths(path):
    name = path.relative_to(PACKAGE).as_posix()
    assert violations(path.read_text(encoding="utf-8"), name) == []


@pytest.mark.parametrize("planted", [
    "def f(layer):\n    return layer.up.floats\n",
    "def f(x):\n    return float(x)\n",
    "import numpy as np\ndef f(a):\n    return a.astype(np.float64)\n",
    "def f(a):\n    return a.astype('float32')\n",
    "import numpy as np\ndef f(a):\n    return np.linalg.matrix_rank(a)\n",
    "def f(block, x):\n    return block.evaluate(x)\n",
    "def f(skip, x):\n    return skip.apply_float(x)\n",
    "def f(act, z):\n    return act.scalar.numpy(z)\n",
])
def test_the_scan_catches_planted_float_paths(planted):
    assert violations(planted, "decide/planted.py")


def test_the_float_lu_states_its_exactness_bound():
    """The modules allowed float64 for exact integers raise when a product's inner dimension
    k breaks k·(p−1)² + p < 2^53 (the LU states the bound, the systems call it, the out-of-core
    LU only calls the kernel's products), checked at run time, under `python -O` too."""
    lu = (PACKAGE / "checker/kernel/modlu.py").read_text(encoding="utf-8")
    assert "k * (p - 1) ** 2 + p < EXACT" in lu
    for name in EXACT_INTEGER_LU:
        source = (PACKAGE / name).read_text(encoding="utf-8")
        assert "assert " not in source  # stripped by python -O
        if name == "decide/outofcore.py":  # every product is the kernel's, bound and all
            tree = ast.parse(source)
            assert not any(isinstance(node, ast.BinOp) and isinstance(node.op, ast.MatMult)
                           for node in ast.walk(tree)), name
            assert not {"dot", "matmul", "einsum", "tensordot"} & {
                node.attr for node in ast.walk(tree) if isinstance(node, ast.Attribute)}, name
        else:
            assert "product_bound(" in source and "raise ArithmeticError" in source

