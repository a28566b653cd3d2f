"""The package's import graph: layers, no circles.

- The Python API (`api.py`, `build.py`, `export/`) imports no command-line code: the CLI sits
  on the API, never the other way round.
- The command table (`cli/__init__.py`) imports a command's module only when it runs.
- No module imports, directly or through others, a module that imports it back: every
  `import` counts, those inside functions too, so a circle cannot hide behind a lazy import.
- The checker is independent: nothing under `checker/` imports the rest of the package, the
  trusted kernel (`checker/kernel/`) imports nothing from the rest of the checker, and the
  prover imports from the checker only its kernel (the API, the CLI and the pytest plugin use
  the checker's document, dispatch and readers to check documents).
- Every import goes down the layers (LAYERS).
"""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path

from ..conftest import ROOT

PACKAGE = "absorb_formal"
COMMAND_LINE = {"absorb_formal.cli", "absorb_formal.cli.prove", "absorb_formal.cli.check",
                "absorb_formal.cli.scan", "absorb_formal.cli.export", "absorb_formal.cli.arguments"}
COMMANDS = ("absorb_formal.cli.prove", "absorb_formal.cli.check", "absorb_formal.cli.scan",
            "absorb_formal.cli.export")
CHECKER = "absorb_formal.checker"
KERNEL = "absorb_formal.checker.kernel"
# what checks documents: it may use the checker's document, dispatch and readers
CHECKING = ("absorb_formal.api", "absorb_formal.cli", "absorb_formal.pytest_plugin")
CHECKING_USES = (CHECKER, "absorb_formal.checker.document", "absorb_formal.checker.dispatch",
                 "absorb_formal.checker.readers")
# The one prover module that uses a checker rule: the ray-limit search confirms each numeric
# candidate (x0, w) with the checker's own exact and ball-arithmetic test before issuing it.
PROVER_USES_OF_RULES = {"absorb_formal.decide.ray_limit": {"absorb_formal.checker.rules.ray_limit"}}


def modules(root: Path, package: str = PACKAGE) -> dict[str, tuple[Path, bool]]:
    """Module name → (file, is a package's __init__) for every module of `package`."""
    found = {}
    for file in sorted((root / package).rglob("*.py")):
        parts = list(file.relative_to(root).with_suffix("").parts)
        init = parts[-1] == "__init__"
        found[".".join(parts[:-1] if init else parts)] = (file, init)
    return found


def import_graph(root: Path, package: str = PACKAGE) -> dict[str, set[str]]:
    """Module → the package's modules it imports anywhere in its text (`from . import x`
    names module x when x is one). Imports of a module's own parent packages are left out:
    Python imports them first anyway, and they name the package's public surface."""
    known = modules(root, package)
    graph: dict[str, set[str]] = {}
    for name, (file, init) in known.items():
        here = name.split(".") if init else name.split(".")[:-1]
        targets: set[str] = set()
        for node in ast.walk(ast.parse(file.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                targets.update(alias.name for alias in node.names)
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    base = ".".join(here[:len(here) - node.level + 1] + ([base] if base else []))
                for alias in node.names:
                    full = f"{base}.{alias.name}"
                    targets.add(full if full in known else base)
        ancestors = {".".join(name.split(".")[:i]) for i in range(1, name.count(".") + 1)}
        graph[name] = {t for t in targets if t in known and t != name and t not in ancestors}
    return graph


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan), sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return sorted(found)


def reachable(graph: dict[str, set[str]], start: str) -> set[str]:
    seen, todo = set(), [start]
    while todo:
        for w in graph[todo.pop()] - seen:
            seen.add(w)
            todo.append(w)
    return seen


def test_the_package_has_no_import_circles():
    assert circles(import_graph(ROOT)) == []


def api_modules(root: Path = ROOT) -> list[str]:
    """api.py, build.py and every module of export/."""
    return ["absorb_formal.api", "absorb_formal.build",
            *sorted(m for m in modules(root) if m.startswith("absorb_formal.export"))]


def test_the_api_imports_no_command_line_code():
    graph = import_graph(ROOT)
    assert len(api_modules()) > 3
    for module in api_modules():
        assert not reachable(graph, module) & COMMAND_LINE, module


def test_the_command_line_modules_are_the_table_s():
    assert {m for m in modules(ROOT) if m.startswith("absorb_formal.cli")} == COMMAND_LINE
    from absorb_formal.cli import COMMANDS as TABLE
    from absorb_formal.cli import DEFAULT

    assert {*TABLE.values(), DEFAULT} == set(COMMANDS)


def test_the_commands_sit_on_the_api():
    graph = import_graph(ROOT)
    for command in COMMANDS:
        assert "absorb_formal.api" in reachable(graph, command), command


def test_the_command_table_imports_a_command_only_when_it_runs():
    """`absorb-prove check` (here: on nothing, exit 2) imports no other command's module,
    and importing the table imports none."""
    code = ("import io, sys, absorb_formal.cli\n"
            "print(sorted(m for m in sys.modules if m.startswith('absorb_formal.cli.')))\n"
            "absorb_formal.cli.main(['check', 'no-such-folder'], io.StringIO(), io.StringIO())\n"
            "print(sorted(m for m in sys.modules if m.startswith('absorb_formal.cli.')))")
    run = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True,
                         text=True, check=True)
    assert run.stdout.split("\n")[:2] == [
        "[]", "['absorb_formal.cli.arguments', 'absorb_formal.cli.check']"]


def test_importing_the_api_loads_no_command_line_module():
    code = ("import sys, absorb_formal.api, absorb_formal.build, absorb_formal.export.witness\n"
            "absorb_formal.api.check_items([])\n"
            f"print(sorted(m for m in sys.modules if m in {sorted(COMMAND_LINE)!r}))")
    run = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True,
                         text=True, check=True)
    assert run.stdout.strip() == "[]"


# Deciding one claim of a concrete block, warm cache: what its path imports. numpy, flint
# (exact linear algebra) and lark (the parser) are needed; the solvers, sympy (lemmas are read
# from the cache), torch, onnx and the progress bars are not, nor the modules of the other
# commands, of certificates (no --certificates) and of weight formats (no load(...)).
NEEDED = {"numpy", "flint", "lark"}
DEFERRED = {"sympy", "mpmath", "z3", "cvc5", "ortools", "torch", "tqdm", "onnx", "zipfile",
            "absorb_formal.cli.check", "absorb_formal.cli.scan", "absorb_formal.scanner",
            "absorb_formal.export", "absorb_formal.certify.documents",
            "absorb_formal.checker.document", "absorb_formal.weights.npz",
            "absorb_formal.weights.safetensors", "absorb_formal.weights.onnx_file"}
EXAMPLE = ROOT / "specs" / "examples" / "relu_absorbable.mlp"


def test_one_claim_imports_only_what_its_path_needs(tmp_path):
    """A subprocess runs `absorb-prove R.mlp` twice (the first fills the cache of parser
    tables and lemma results, as a user's first run does) and lists what the second loaded."""
    block = EXAMPLE.read_text(encoding="utf-8").split("\nclaim ")[0]  # its block R alone
    (tmp_path / "R.mlp").write_text(block + "\nclaim R is absorbable\n", encoding="utf-8")
    env = {**os.environ, "ABSORB_FORMAL_CACHE": str(tmp_path / "cache"),
           "ABSORB_FORMAL_CACHE_KEY": str(tmp_path / "key"), "PYTHONPATH": str(ROOT)}
    code = ("import io, sys\n"
            "from absorb_formal.cli import main\n"
            "out = io.StringIO()\n"
            "assert main(['R.mlp'], out, sys.stderr) == 0, out.getvalue()\n"
            f"print(sorted(m for m in {sorted(NEEDED | DEFERRED)!r} if m in sys.modules))")
    for _ in range(2):
        run = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=env,
                             capture_output=True, text=True, check=True)
    loaded = set(ast.literal_eval(run.stdout.strip()))
    assert loaded == NEEDED, sorted(loaded - NEEDED)


def test_a_circle_is_found_even_behind_a_lazy_import(tmp_path):
    package = tmp_path / "pkg"
    (package / "sub").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "sub" / "__init__.py").write_text("")
    (package / "a.py").write_text("from .sub import b\n")
    (package / "sub" / "b.py").write_text("def f():\n    from ..a import g\n")
    (package / "sub" / "c.py").write_text("from . import b\nimport pkg.a\n")
    graph = import_graph(tmp_path, "pkg")
    assert graph["pkg.a"] == {"pkg.sub.b"}
    assert graph["pkg.sub.c"] == {"pkg.sub.b", "pkg.a"}
    assert circles(graph) == [["pkg.a", "pkg.sub.b"]]
    assert reachable(graph, "pkg.sub.c") == {"pkg.a", "pkg.sub.b"}
    (package / "sub" / "b.py").write_text("x = 1\n")
    assert circles(import_graph(tmp_path, "pkg")) == []


# The layers, lowest first: a module imports only from its own layer or lower ones. The checker
# sits at the bottom (its kernel lowest), so that nothing it relies on can be computed by the
# prover; the front ends (the API, scan, export, the command line) sit on top.
LAYERS = [
    ["checker.kernel"],
    ["checker.lemmas", "checker.readers", "checker.rules"],
    ["checker"],
    ["model"],
    ["weights", "language"],
    ["certify"],
    ["decide", "generic", "numeric"],
    ["api", "report", "paths"],
    ["scanner", "pytest_plugin"],
    ["export", "build"],
    ["cli", "__main__", ""],
]


def layer_of(module: str) -> int:
    """The index in LAYERS of the longest entry that names `module` or one of its packages."""
    inner = module.removeprefix(PACKAGE).removeprefix(".")
    best = None
    for rank, entries in enumerate(LAYERS):
        for entry in entries:
            names = inner == entry or inner.startswith(entry + ".") or entry == inner == ""
            if names and (best is None or len(entry) > best[1]):
                best = (rank, len(entry))
    assert best is not None, f"{module} is in no layer: add it to LAYERS"
    return best[0]


def test_every_import_goes_down_the_layers():
    graph = import_graph(ROOT)
    upward = sorted(f"{a} -> {b}" for a, targets in graph.items() for b in targets
                    if layer_of(b) > layer_of(a))
    assert upward == []


def within(module: str, package: str) -> bool:
    return module == package or module.startswith(package + ".")


def test_the_checker_imports_nothing_outside_itself():
    graph = import_graph(ROOT)
    outside = {module: sorted(t for t in targets if not within(t, CHECKER))
               for module, targets in graph.items() if within(module, CHECKER)}
    assert {module: found for module, found in outside.items() if found} == {}


def test_the_kernel_imports_nothing_from_the_rest_of_the_checker():
    graph = import_graph(ROOT)
    kernel = {module: sorted(t for t in targets if not within(t, KERNEL))
              for module, targets in graph.items() if within(module, KERNEL)}
    assert {module: found for module, found in kernel.items() if found} == {}


def test_the_prover_imports_only_the_checkers_kernel():
    graph = import_graph(ROOT)
    for module, targets in graph.items():
        if within(module, CHECKER):
            continue
        used = {t for t in targets if within(t, CHECKER) and not within(t, KERNEL)}
        if any(within(module, top) for top in CHECKING):
            used = {t for t in used if not any(within(t, allowed) for allowed in CHECKING_USES)}
        assert used <= PROVER_USES_OF_RULES.get(module, set()), (module, sorted(used))


def test_the_architecture_tests_catch_planted_imports(tmp_path):
    package = tmp_path / "absorb_formal"
    for folder in ("checker/kernel", "checker/rules", "decide", "cli"):
        (package / folder).mkdir(parents=True)
    for init in ("", "checker", "checker/kernel", "checker/rules", "decide", "cli"):
        (package / init / "__init__.py").write_text("")
    (package / "checker/kernel/modlu.py").write_text("from ..rules import width\n")
    (package / "checker/rules/width.py").write_text("from ...decide import large\n")
    (package / "decide/large.py").write_text("from ..checker.kernel import modlu\n"
                                             "from ..checker.rules import width\n")
    (package / "cli/check.py").write_text("from ..checker.rules import width\n")
    graph = import_graph(tmp_path)
    assert graph["absorb_formal.checker.kernel.modlu"] == {"absorb_formal.checker.rules.width"}
    assert graph["absorb_formal.checker.rules.width"] == {"absorb_formal.decide.large"}
    assert graph["absorb_formal.decide.large"] == {"absorb_formal.checker.kernel.modlu",
                                                   "absorb_formal.checker.rules.width"}
    assert not any(within(t, "absorb_formal.checker.document")
                   for t in graph["absorb_formal.cli.check"])
