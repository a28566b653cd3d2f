"""The checker's side of the generic engine (MATH.md §6, §7): it re-derives the coefficient
equations and rebuilds the solver queries itself, from the embedded block alone.

Naming convention of the unknowns (part of the certificate format): layer l, neuron j,
coordinate k: up `u{l}_{j}_{k}`, gate `g{l}_{j}_{k}`, down row r: `d{l}_{r}_{j}`.
"""

from __future__ import annotations

from fractions import Fraction
from typing import Any

import sympy as sp

from . import exact, lemmas, smt

RLIMIT = 40_000_000


def names(width: int, dim: int, depth: int, gated: bool) -> list[dict[str, list[list[str]]]]:
    out = []
    for l in range(depth):  # noqa: E741 - l for layer, as in the naming convention
        layer = {"up": [[f"u{l}_{j}_{k}" for k in range(dim)] for j in range(width)],
                 "down": [[f"d{l}_{r}_{j}" for j in range(width)] for r in range(dim)]}
        if gated:
            layer["gate"] = [[f"g{l}_{j}_{k}" for k in range(dim)] for j in range(width)]
        out.append(layer)
    return out


def _stack(activation: dict[str, Any], skip: exact.Rows | None, layers: list[dict[str, Any]],
           x: list[Any]) -> list[Any]:
    """sympy: the stack at x; layer entries are sympy expressions."""
    sigma = lemmas.formula(activation)
    value = list(x)
    for layer in layers:
        pre = [sp.Add(*(a * v for a, v in zip(row, value, strict=True))) for row in layer["up"]]
        if activation["gated"]:
            gate = [sp.Add(*(a * v for a, v in zip(row, value, strict=True)))
                    for row in layer["gate"]]
            hidden = [sigma.subs(lemmas.Z, g) * h for g, h in zip(gate, pre, strict=True)]
        else:
            hidden = [sigma.subs(lemmas.Z, h) for h in pre]
        out = [sp.Add(*(a * h for a, h in zip(row, hidden, strict=True))) for row in layer["down"]]
        if skip is not None:
            out = [o + sp.Add(*(sp.Rational(c) * v for c, v in zip(row, value, strict=True)))
                   for o, row in zip(out, skip, strict=True)]
        value = out
    return value


def _rational_layers(block: dict[str, Any]) -> list[dict[str, Any]]:
    return [{k: [[sp.Rational(v) for v in row] for row in rows] for k, rows in layer.items()}
            for layer in block["layers"]]


def value(entry: Any) -> sp.Expr:
    """A witness entry: a rational string, or {"root_of": ascending coeffs, "index": i}."""
    if isinstance(entry, str):
        return sp.Rational(entry)
    t = sp.Symbol("t")
    coefficients = [sp.Integer(int(c)) for c in entry["root_of"]]
    poly = sp.Poly(sum((c * t**i for i, c in enumerate(coefficients)), sp.Integer(0)), t)
    return sp.CRootOf(poly, int(entry["index"]) - 1)


def identity(block: dict[str, Any], layers: list[dict[str, Any]]) -> bool:
    """P − B ≡ 0 as polynomials in x (exact; algebraic entries via minimal polynomials)."""
    x = [sp.Symbol(f"x{k}") for k in range(block["dim"])]
    plain = _stack(block["activation"], None,
                   [{k: [[value(v) for v in row] for row in rows] for k, rows in layer.items()}
                    for layer in layers], x)
    target = _stack(block["activation"], exact.skip_rows(block), _rational_layers(block), x)
    t = sp.Symbol("t")
    for p, b in zip(plain, target, strict=True):
        for c in sp.Poly(sp.expand(p - b), *x).coeffs():
            if c != 0 and sp.minimal_polynomial(c, t) != t:
                return False
    return True


def equations(block: dict[str, Any], width: int) -> tuple[list[sp.Symbol], set[sp.Expr]]:
    """The checker's own coefficient-matching system for width `width`."""
    layers = names(width, block["dim"], block["depth"], block["activation"]["gated"])
    symbols = [sp.Symbol(n) for layer in layers for key in ("gate", "up", "down")
               if key in layer for row in layer[key] for n in row]
    x = [sp.Symbol(f"x{k}") for k in range(block["dim"])]
    plain = _stack(block["activation"], None,
                   [{k: [[sp.Symbol(n) for n in row] for row in rows]
                     for k, rows in layer.items()} for layer in layers], x)
    target = _stack(block["activation"], exact.skip_rows(block), _rational_layers(block), x)
    found = set()
    for p, b in zip(plain, target, strict=True):
        found |= {sp.expand(c) for c in sp.Poly(sp.expand(p - b), *x).coeffs() if c != 0}
    return symbols, found


def polynomial(terms: list[list[Any]], symbols: list[sp.Symbol]) -> sp.Expr:
    """A polynomial from [coefficient, exponents] terms (never evaluated as code)."""
    out = sp.Integer(0)
    for coefficient, exponents in terms:
        require(len(exponents) == len(symbols), "exponent vector of the wrong length")
        out += sp.Rational(coefficient) * sp.Mul(*(s ** int(e) for s, e in
                                                   zip(symbols, exponents, strict=True)))
    return sp.expand(out)


class Invalid(Exception):
    pass


def require(condition: bool, reason: str) -> None:
    if not condition:
        raise Invalid(reason)


def infeasible(block: dict[str, Any], width: int, cert: dict[str, Any]) -> None:
    """Nullstellensatz (cofactors or Gröbner basis [1]) or real infeasibility of the system."""
    symbols, own = equations(block, width)
    require([str(s) for s in symbols] == cert["unknowns"], "unexpected unknowns")
    stored = [polynomial(f, symbols) for f in cert["equations"]]
    require(all(f in own for f in stored), "a stored equation is not a coefficient of P - B")
    if cert["kind"] == "Nullstellensatz" and cert.get("method") == "cofactors":
        hs = [polynomial(h, symbols) for h in cert["cofactors"]]
        require(len(hs) == len(stored), "one cofactor per equation")
        total = sp.expand(sp.Add(*(h * f for h, f in zip(hs, stored, strict=True))))
        require(total == 1, "sum of h_j f_j is not 1")
    elif cert["kind"] == "Nullstellensatz":
        basis = sp.groebner(sorted(own, key=sp.srepr), *symbols, order="grevlex")
        require(list(basis.exprs) == [1], "the Groebner basis is not [1]")
    else:
        require(_z3_unsat_equations(stored, symbols), "z3 finds a real solution (own encoding)")
        _stored_unsat(cert["smtlib"])


def _z3_unsat_equations(polys: list[sp.Expr], symbols: list[sp.Symbol]) -> bool:
    import z3

    variables = {s: z3.Real(str(s)) for s in symbols}
    solver = z3.SolverFor("QF_NRA")
    solver.set("rlimit", RLIMIT)
    for f in polys:
        terms = []
        for exps, c in sp.Poly(f, *symbols).terms():
            term: Any = z3.RealVal(str(c))
            for s, e in zip(symbols, exps, strict=True):
                for _ in range(e):
                    term = term * variables[s]
            terms.append(term)
        solver.add(z3.Sum(terms) == 0)
    return solver.check() == z3.unsat


def _stored_unsat(text: str) -> None:
    require(smt.z3_verdict(text) == "unsat", "z3 does not confirm the stored SMT-LIB")
    require(smt.cvc5_verdict(text) == "unsat", "cvc5 does not confirm the stored SMT-LIB")


# ---- piecewise: z3 encodings built by the checker ----------------------------------------

def _z3_sigma(activation: dict[str, Any], z: Any) -> Any:
    import z3

    kind = activation["kind"]
    if kind == "relu":
        return z3.If(z > 0, z, 0)
    if kind == "leaky_relu":
        return z3.If(z >= 0, z, z3.RealVal(activation["param"]) * z)
    if kind == "abs":
        return z3.If(z >= 0, z, -z)
    if kind == "relu_pow":
        return z3.If(z > 0, z ** int(activation["power"]), 0)
    raise Invalid(f"no piecewise formula for {kind}")


def _z3_stack(activation: dict[str, Any], skip: exact.Rows | None, layers: list[dict[str, Any]],
              x: list[Any]) -> list[Any]:
    import z3

    value = list(x)
    for layer in layers:
        pre = [z3.Sum([a * v for a, v in zip(row, value, strict=True)]) for row in layer["up"]]
        if activation["gated"]:
            gate = [z3.Sum([a * v for a, v in zip(row, value, strict=True)])
                    for row in layer["gate"]]
            hidden = [_z3_sigma(activation, g) * h for g, h in zip(gate, pre, strict=True)]
        else:
            hidden = [_z3_sigma(activation, h) for h in pre]
        out = [z3.Sum([a * h for a, h in zip(row, hidden, strict=True)]) for row in layer["down"]]
        if skip is not None:
            out = [o + z3.Sum([z3.RealVal(str(c)) * v for c, v in zip(row, value, strict=True)])
                   for o, row in zip(out, skip, strict=True)]
        value = out
    return value


def _z3_layers(layers: list[dict[str, Any]]) -> list[dict[str, Any]]:
    import z3

    return [{k: [[z3.RealVal(str(Fraction(v))) for v in row] for row in rows]
             for k, rows in layer.items()} for layer in layers]


def no_difference(block: dict[str, Any], cert: dict[str, Any]) -> None:
    """No x with P(x) ≠ B(x): z3 on the checker's own encoding, then the stored text."""
    import z3

    act = block["activation"]
    x = [z3.Real(f"x{k}") for k in range(block["dim"])]
    plain = _z3_stack(act, None, _z3_layers(cert["layers"]), x)
    target = _z3_stack(act, exact.skip_rows(block), _z3_layers(block["layers"]), x)
    solver = z3.SolverFor("QF_NRA")
    solver.set("rlimit", RLIMIT)
    solver.add(z3.Or([p != b for p, b in zip(plain, target, strict=True)]))
    require(solver.check() == z3.unsat, "z3 finds an x where the witness differs from B")
    _stored_unsat(cert["smtlib"])


def point_set(block: dict[str, Any], width: int, cert: dict[str, Any]) -> None:
    """No plain block of width `width` matches B at the stored points (own encoding)."""
    import z3

    act = block["activation"]
    k = lemmas.degree(act)
    if cert.get("box"):
        require(k is not None and k >= 1, "row scaling needs H(k), k >= 1 (re-proved)")
    layers = names(width, block["dim"], block["depth"], act["gated"])
    unknowns = [{key: [[z3.Real(n) for n in row] for row in rows]
                 for key, rows in layer.items()} for layer in layers]
    solver = z3.SolverFor("QF_NRA")
    solver.set("rlimit", RLIMIT)
    if cert.get("box"):
        for layer in unknowns:
            for key in ("up", "gate"):
                for row in layer.get(key, []):
                    solver.add(*[z3.And(v >= -1, v <= 1) for v in row])
    for point in cert["points"]:
        x0 = exact.vec(point)
        want = exact.evaluate(block, block["layers"], x0)
        got = _z3_stack(act, None, unknowns, [z3.RealVal(str(v)) for v in x0])
        solver.add(*[g == z3.RealVal(str(w)) for g, w in zip(got, want, strict=True)])
    require(solver.check() == z3.unsat, "a plain block matches B at these points (own encoding)")
    _stored_unsat(cert["smtlib"])
