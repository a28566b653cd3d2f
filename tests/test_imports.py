"""The package's import graph: layers, no circles.

- The Python API (`api.py`, `build.py`, `export/witness.py`) imports no command-line code: the CLI
  sits on the API, never the other way round.
- No module imports, directly or through others, a module that imports it back: every
  `import` counts, those inside functions too, so a circle cannot hide behind a lazy import.
- The checker is independent: nothing under `checker/` imports the rest of the package, the
  trusted kernel (`checker/kernel/`) imports nothing from the rest of the checker, and the
  prover imports from the checker only its kernel (the API, the CLI and the pytest plugin use
  the checker's document, dispatch and readers to check documents).
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

from .conftest import ROOT

PACKAGE = "absorb_formal"
COMMAND_LINE = {"absorb_formal.cli.prove", "absorb_formal.cli.check", "absorb_formal.cli.arguments"}
API = ("absorb_formal.api", "absorb_formal.build", "absorb_formal.export.witness")
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


def test_the_api_imports_no_command_line_code():
    graph = import_graph(ROOT)
    for module in API:
        assert not reachable(graph, module) & COMMAND_LINE, module


def test_the_commands_sit_on_the_api():
    graph = import_graph(ROOT)
    assert "absorb_formal.api" in reachable(graph, "absorb_formal.cli.prove")
    assert "absorb_formal.api" in reachable(graph, "absorb_formal.cli.check")


def test_importing_the_api_loads_no_command_line_module():
    code = ("import sys, absorb_formal.api, absorb_formal.build, absorb_formal.export.witness\n"
            "absorb_formal.api.check_items([])\n"
            f"print(sorted(m for m in sys.modules if m in {sorted(COMMAND_LINE)!r}))")
    run = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True,
                         text=True, check=True)
    assert run.stdout.strip() == "[]"


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
