"""The checker package loads its checks on first use: importing it, or one of its light
modules (the prover's disk cache imports `checker/kernel/cachedir.py`), loads neither the checks nor
sympy or z3, and `from absorb_formal.checker import verify` is the function whatever was
imported before."""

from __future__ import annotations

import subprocess
import sys

from ..conftest import ROOT


def run(code: str) -> list[str]:
    return subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True,
                          text=True, check=True).stdout.splitlines()


def test_importing_the_checker_package_loads_no_checks():
    assert run("import sys\nimport absorb_formal.checker\nimport absorb_formal.model.diskcache\n"
               "print(sorted(m for m in ('absorb_formal.checker.dispatch', 'sympy', 'z3')"
               " if m in sys.modules))\n") == ["[]"]


def test_verify_is_the_function_also_after_its_module_was_imported():
    for first in ("import absorb_formal.checker.dispatch",
                  "from absorb_formal.checker.dispatch import Invalid",
                  "from absorb_formal.checker import Verdict"):
        assert run(f"{first}\nimport absorb_formal.checker as c\n"
                   "from absorb_formal.checker import Verdict, verify\n"
                   "print(verify.__name__, verify is c.verify, Verdict.__name__)\n"
                   "print(verify({}).status)\n") == ["verify True Verdict", "invalid"], first
