"""The generic engine for polynomial activations (identity, square, poly[...], bilinear):
docs/rules.md §6, from the definitions alone.

P(x) − B(x) = 0 for all x is the vanishing of every coefficient (in x) of the difference,
a system of polynomial equations in the unknown plain weights. If its Gröbner basis is [1]
there is no solution even over C: the certificate gives cofactors h_j with Σ h_j f_j = 1,
found by linear algebra over Q. Otherwise z3's nlsat decides real solvability; a solution
is an exact witness (rational, or algebraic as root-of with an index).
"""

from __future__ import annotations

import itertools
from fractions import Fraction
from typing import Any

import sympy as sp

from ..certify import bodies as cert
from ..decide import budget
from ..decide.lemmas import properties
from ..model import linalg
from ..model.blocks import Block
from . import encode

MAX_UNKNOWNS = 12
MAX_COFACTOR_DEGREE = 2
NLSAT_TIMEOUT_MS = 20_000
RLIMIT = 20_000_000  # z3 resource units (deterministic): about 15 s on this machine


def applies(block: Block) -> bool:
    """σ is a polynomial (its formula is one: identity, poly[...], bilinear's identity gate)."""
    return block.activation.scalar.kind in ("poly", "identity")


def system(block: Block, width: int) -> tuple[list[sp.Symbol], list[sp.Expr]]:
    """(unknowns, equations): coefficient matching of P(x) − B(x) in x (deterministic order)."""
    names = encode.block_names(block, width)  # biases too: constant terms matter (§8.4)
    symbols = [sp.Symbol(n) for n in encode.flat_names(names)]
    x = [sp.Symbol(f"x{k}") for k in range(block.dim)]
    scalar, gated = block.activation.scalar, block.activation.gated
    plain = encode.sympy_block(scalar, gated, None, encode.symbol_layers(names), x)
    target = encode.sympy_block(scalar, gated, block.skip.rows(), encode.block_layers(block), x)
    equations: dict[str, sp.Expr] = {}
    for p, b in zip(plain, target, strict=True):
        for coefficient in sp.Poly(sp.expand(p - b), *x).coeffs():
            expr = sp.expand(coefficient)
            if expr != 0:
                equations.setdefault(sp.srepr(expr), expr)
    return symbols, [equations[k] for k in sorted(equations)]


def poly_json(expr: sp.Expr, symbols: list[sp.Symbol]) -> list[list[Any]]:
    """A polynomial as sorted [coefficient, exponents] terms (no code in certificates)."""
    poly = sp.Poly(expr, *symbols)
    return sorted([[str(c), list(e)] for e, c in zip(poly.monoms(), poly.coeffs(), strict=True)],
                  key=lambda t: t[1])


def cofactors(equations: list[sp.Expr], symbols: list[sp.Symbol]
              ) -> list[sp.Expr] | None:
    """h_j with Σ h_j f_j = 1 (degree ≤ MAX_COFACTOR_DEGREE), by exact linear algebra."""
    polys = [sp.Poly(f, *symbols) for f in equations]
    n = len(symbols)
    for degree in range(MAX_COFACTOR_DEGREE + 1):
        monomials = [tuple(sum(1 for c in combo if c == i) for i in range(n))
                     for k in range(degree + 1)
                     for combo in itertools.combinations_with_replacement(range(n), k)]
        columns: list[dict[tuple[int, ...], Fraction]] = []
        for f in polys:
            terms = f.terms()
            for mono in monomials:
                column: dict[tuple[int, ...], Fraction] = {}
                for exps, c in terms:
                    key = tuple(a + b for a, b in zip(exps, mono, strict=True))
                    column[key] = column.get(key, Fraction(0)) + Fraction(int(c.p), int(c.q))
                columns.append(column)
        rows = sorted({k for col in columns for k in col} | {(0,) * n})
        index = {k: i for i, k in enumerate(rows)}
        vectors = [tuple(col.get(k, Fraction(0)) for k in rows) for col in columns]
        target = tuple(Fraction(int(k == (0,) * n)) for k in rows)
        del index
        solution = linalg.particular(vectors, target)
        if solution is not None:
            out = []
            for j in range(len(polys)):
                part = solution[j * len(monomials):(j + 1) * len(monomials)]
                out.append(sp.Add(*(sp.Rational(c.numerator, c.denominator)
                                    * sp.Mul(*(s**e for s, e in zip(symbols, mono, strict=True)))
                                    for c, mono in zip(part, monomials, strict=True) if c)))
            return out
    return None


def smtlib(equations: list[sp.Expr], symbols: list[sp.Symbol]) -> str:
    """The system as SMT-LIB2 (QF_NRA), printed here so the text is stable across solvers."""
    lines = ["(set-logic QF_NRA)"] + [f"(declare-fun {s} () Real)" for s in symbols]
    for f in equations:
        lines.append(f"(assert (= {_smt_term(sp.Poly(f, *symbols), symbols)} 0))")
    lines.append("(check-sat)")
    return "\n".join(lines) + "\n"


def _smt_term(poly: sp.Poly, symbols: list[sp.Symbol]) -> str:
    terms = []
    for exps, c in poly.terms():
        factors = [_smt_rational(Fraction(int(c.p), int(c.q)))]
        for s, e in zip(symbols, exps, strict=True):
            factors += [str(s)] * e
        terms.append(f"(* {' '.join(factors)})" if len(factors) > 1 else factors[0])
    return f"(+ {' '.join(terms)} 0)" if len(terms) > 1 else (terms[0] if terms else "0")


def _smt_rational(q: Fraction) -> str:
    text = f"(/ {abs(q.numerator)} {q.denominator})" if q.denominator != 1 else \
        str(abs(q.numerator))
    return f"(- {text})" if q < 0 else text


def solve(block: Block, width: int) -> tuple[str, dict[str, Any], str]:
    """("absorbable" | "not absorbable" | "unknown", certificate, reason)."""
    symbols, equations = system(block, width)
    if not equations:
        values = {str(s): {"rational": "0"} for s in symbols}
        return "absorbable", {"values": values, "unknowns": [str(s) for s in symbols]}, ""
    basis = sp.groebner(equations, *symbols, order="grevlex")
    if list(basis.exprs) == [1]:
        found = cofactors(equations, symbols)
        # No cofactors of low degree (they exist, but cost minutes of dense algebra): the
        # reduced Gröbner basis [1] is the certificate, which the checker recomputes.
        return "not absorbable", cert.nullstellensatz(
            width, [str(s) for s in symbols], [poly_json(f, symbols) for f in equations],
            None if found is None else [poly_json(h, symbols) if h != 0 else [] for h in found]
        ), ""
    return _nlsat(equations, symbols, width)


def _nlsat(equations: list[sp.Expr], symbols: list[sp.Symbol],
           width: int) -> tuple[str, dict[str, Any], str]:
    import z3

    text = smtlib(equations, symbols)
    solver = z3.SolverFor("QF_NRA")
    solver.set("random_seed", 0)
    solver.set("timeout", budget.remaining_ms(NLSAT_TIMEOUT_MS))
    solver.set("rlimit", RLIMIT)  # nlsat does not always honour timeouts; rlimit it does
    solver.from_string(text)
    verdict = solver.check()
    if verdict == z3.unsat:
        return "not absorbable", cert.real_infeasibility(
            width, [str(s) for s in symbols], [poly_json(f, symbols) for f in equations],
            text.replace("(set-logic QF_NRA)", "(set-logic QF_NRA)\n"
                         "(set-info :status unsat)", 1)), ""
    if verdict == z3.sat:
        model = solver.model()
        values = {}
        for s in symbols:
            value = model.eval(z3.Real(str(s)), model_completion=True)
            if z3.is_rational_value(value):
                values[str(s)] = {"rational": f"{value.numerator_as_long()}/"
                                              f"{value.denominator_as_long()}"}
            else:
                values[str(s)] = {"root_of": [str(c) for c in value.poly()],  # type: ignore[dict-item]
                                  "index": value.index()}
        return "absorbable", {"values": values, "unknowns": [str(s) for s in symbols]}, ""
    return "unknown", {}, f"nlsat: {solver.reason_unknown()}"


def value_of(entry: dict[str, Any]) -> sp.Expr:
    """A certificate value: a rational, or the index-th real root (ascending, from 1) of a
    polynomial given by ascending integer coefficients."""
    if "rational" in entry:
        return sp.Rational(entry["rational"])
    t = sp.Symbol("t")
    poly = sp.Poly(sum(sp.Integer(int(c)) * t**i for i, c in enumerate(entry["root_of"])), t)
    return sp.CRootOf(poly, int(entry["index"]) - 1)


def sizes_ok(block: Block, width: int) -> bool:
    """Every unknown counts, the comparator's biases too (docs/rules.md §8.4)."""
    n = len(encode.flat_names(encode.block_names(block, width)))
    return n <= MAX_UNKNOWNS and properties(block.activation) is not None
