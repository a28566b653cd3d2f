"""The checker's side of the generic engine (docs/rules.md §6, §7): it re-derives the coefficient
equations and prints the solver queries itself, from the embedded block alone.

Naming convention of the unknowns (part of the certificate format): layer l, neuron j,
coordinate k: up `u{l}_{j}_{k}`, gate `g{l}_{j}_{k}`, down row r: `d{l}_{r}_{j}`; a biased
block's comparator (docs/rules.md §8.4) also has up_bias `b{l}_{j}`, gate_bias `h{l}_{j}`, down_bias
`c{l}_{r}`. Order per layer: gate, gate_bias, up, up_bias, down, down_bias.

Every field of a generic certificate is checked or absent (its fields: the registry,
checker/dispatch.py). A stored SMT-LIB text must be,
byte for byte, the checker's own encoding of the claim (so it also ties the points, the
equations or the witness it was built from), and the checker solves its own text.

Trust base of a solver refutation (real infeasibility, finite point set, and a witness
checked by "no point where P differs from B"): this module's encoding, and z3's "unsat"
(nlsat, a decision procedure for real arithmetic; no proof object is checked). cvc5 is a
second opinion bounded by CVC5_TIMEOUT_MS: "sat" from it is a disagreement and the
certificate is invalid; when it gives up, the certificate rests on z3 alone and the verdict's
reason says so.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from fractions import Fraction
from typing import TYPE_CHECKING, Any

from ..kernel import linalg as exact
from ..kernel.contract import Invalid, Kind, require
from ..lemmas import relied as lemmas
from ..lemmas import smt

if TYPE_CHECKING:
    import sympy as sp  # imported where it is used: a check that needs no sympy loads none

RLIMIT = 40_000_000  # z3 resource units: deterministic, unlike a timeout
CVC5_TIMEOUT_MS = 10_000  # cvc5 1.4 takes 20-60 s on some synthesis queries z3 does in 0.1 s
LAYER_KEYS = frozenset({"up", "gate", "down"})
KEYS = ("gate", "gate_bias", "up", "up_bias", "down", "down_bias")


def _is_bias(key: str) -> bool:
    return key.endswith("_bias")


def _entries(key: str, value: Any) -> list[Any]:
    return list(value) if _is_bias(key) else [v for row in value for v in row]


def _map(layer: dict[str, Any], f: Any) -> dict[str, Any]:
    """f on every value of a layer; a bias is a vector, a weight a list of rows."""
    return {k: [f(v) for v in rows] if _is_bias(k) else [[f(v) for v in row] for row in rows]
            for k, rows in layer.items()}


def names(width: int, dim: int, depth: int, gated: bool,
          biased: bool = False) -> list[dict[str, Any]]:
    out = []
    for l in range(depth):  # noqa: E741 - l for layer, as in the naming convention
        layer: dict[str, Any] = {
            "up": [[f"u{l}_{j}_{k}" for k in range(dim)] for j in range(width)],
            "down": [[f"d{l}_{r}_{j}" for j in range(width)] for r in range(dim)]}
        if gated:
            layer["gate"] = [[f"g{l}_{j}_{k}" for k in range(dim)] for j in range(width)]
        if biased:  # docs/rules.md §8: the comparators of a biased block are biased
            layer["up_bias"] = [f"b{l}_{j}" for j in range(width)]
            layer["down_bias"] = [f"c{l}_{r}" for r in range(dim)]
            if gated:
                layer["gate_bias"] = [f"h{l}_{j}" for j in range(width)]
        out.append(layer)
    return out


# The generic engine's systems are small (the prover stops at 12 unknowns); the checker
# re-solves none far larger, so a document cannot make it build a system of any size.
MAX_CHECKED_WEIGHTS = 256


def _block_names(block: dict[str, Any], width: int) -> list[dict[str, Any]]:
    if type(width) is not int or width < 1 or \
            width * int(block["dim"]) * int(block["depth"]) > MAX_CHECKED_WEIGHTS:
        raise Invalid(f"a generic-engine certificate at width {width} is beyond what the "
                      f"checker re-solves ({MAX_CHECKED_WEIGHTS} weights per matrix)")
    return names(width, block["dim"], block["depth"], block["activation"]["gated"],
                 _biased(block))


def _flat(layers: list[dict[str, Any]]) -> list[str]:
    return [n for layer in layers for key in KEYS if key in layer
            for n in _entries(key, layer[key])]


def _affine(layer: dict[str, Any], key: str, value: list[Any]) -> list[Any]:
    """sympy: layer[key]·value (+ its bias when the layer has one, docs/rules.md §8)."""
    import sympy as sp

    out = [sp.Add(*(a * v for a, v in zip(row, value, strict=True))) for row in layer[key]]
    bias = layer.get(f"{key}_bias")
    return out if bias is None else [o + b for o, b in zip(out, bias, strict=True)]


def _stack(activation: dict[str, Any], skip: exact.Rows | None, layers: list[dict[str, Any]],
           x: list[Any]) -> list[Any]:
    """sympy: the stack at x; layer entries are sympy expressions."""
    import sympy as sp

    from ..lemmas import proofs as lemma_proofs

    sigma = lemma_proofs.formula(activation)
    value = list(x)
    for layer in layers:
        pre = _affine(layer, "up", value)
        if activation["gated"]:
            gate = _affine(layer, "gate", value)
            hidden = [sigma.subs(lemma_proofs.Z, g) * h for g, h in zip(gate, pre, strict=True)]
        else:
            hidden = [sigma.subs(lemma_proofs.Z, h) for h in pre]
        out = _affine(layer, "down", hidden)
        if skip is not None:
            out = [o + sp.Add(*(sp.Rational(c) * v for c, v in zip(row, value, strict=True)))
                   for o, row in zip(out, skip, strict=True)]
        value = out
    return value


def _rational_layers(block: dict[str, Any]) -> list[dict[str, Any]]:
    import sympy as sp

    return [_map(layer, sp.Rational) for layer in block["layers"]]


def value(entry: Any) -> sp.Expr:
    """A witness entry: a rational string, or {"root_of": ascending coeffs, "index": i}."""
    import sympy as sp

    if isinstance(entry, str):
        return sp.Rational(entry)
    require(isinstance(entry, dict) and set(entry) == {"root_of", "index"},
            "an algebraic witness entry has exactly the fields root_of and index")
    t = sp.Symbol("t")
    coefficients = [sp.Integer(exact.whole(c)) for c in entry["root_of"]]
    poly = sp.Poly(sum((c * t**i for i, c in enumerate(coefficients)), sp.Integer(0)), t)
    index = entry["index"]
    if type(index) is not int or not 1 <= index <= poly.degree():
        raise Invalid(f"root index {index!r} is not one of the polynomial's {poly.degree()} "
                      "roots")
    root = sp.CRootOf(poly, index - 1)
    if root.is_real is not True:  # sympy orders the real roots first; a weight is real
        raise Invalid(f"root {index} of {entry['root_of']} is not real: a weight is a real "
                      "number")
    return root


def identity(block: dict[str, Any], layers: list[dict[str, Any]]) -> bool:
    """P − B ≡ 0 as polynomials in x (exact; algebraic entries via minimal polynomials)."""
    import sympy as sp

    x = [sp.Symbol(f"x{k}") for k in range(block["dim"])]
    plain = _stack(block["activation"], None, [_map(layer, value) for layer in layers], x)
    target = _stack(block["activation"], exact.skip_rows(block), _rational_layers(block), x)
    t = sp.Symbol("t")
    for p, b in zip(plain, target, strict=True):
        for c in sp.Poly(sp.expand(p - b), *x).coeffs():
            if c != 0 and sp.minimal_polynomial(c, t) != t:
                return False
    return True


def equations(block: dict[str, Any], width: int) -> tuple[list[sp.Symbol], set[sp.Expr]]:
    """The checker's own coefficient-matching system for width `width`."""
    import sympy as sp

    layers = _block_names(block, width)
    symbols = [sp.Symbol(n) for n in _flat(layers)]
    x = [sp.Symbol(f"x{k}") for k in range(block["dim"])]
    plain = _stack(block["activation"], None, [_map(layer, sp.Symbol) for layer in layers], x)
    target = _stack(block["activation"], exact.skip_rows(block), _rational_layers(block), x)
    found = set()
    for p, b in zip(plain, target, strict=True):
        found |= {sp.expand(c) for c in sp.Poly(sp.expand(p - b), *x).coeffs() if c != 0}
    return symbols, found


def polynomial(terms: list[list[Any]], symbols: list[sp.Symbol]) -> sp.Expr:
    """A polynomial from [coefficient, exponents] terms (never evaluated as code)."""
    import sympy as sp

    out = sp.Integer(0)
    for coefficient, exponents in terms:
        require(len(exponents) == len(symbols), "exponent vector of the wrong length")
        out += sp.Rational(coefficient) * sp.Mul(*(s ** exact.whole(e) for s, e in
                                                   zip(symbols, exponents, strict=True)))
    return sp.expand(out)



# ---- notes for the verdict's reason (a certificate resting on one solver says so) ----------

_NOTES: ContextVar[list[str] | None] = ContextVar("generic_notes", default=None)


@contextmanager
def notes() -> Iterator[list[str]]:
    """Collects what the checks below want said in a valid verdict's reason."""
    collected: list[str] = []
    token = _NOTES.set(collected)
    try:
        yield collected
    finally:
        _NOTES.reset(token)


def _note(text: str) -> None:
    collected = _NOTES.get()
    if collected is not None and text not in collected:
        collected.append(text)


def _refuted(text: str, what: str) -> None:
    """The checker's own SMT-LIB text is unsat: z3 must say so; cvc5 may give up, not differ."""
    z3_says = smt.z3_verdict(text, "QF_NRA", RLIMIT)
    require(z3_says == "unsat", f"z3 does not refute {what} (its answer: {z3_says})")
    cvc5_says = smt.cvc5_verdict(text, CVC5_TIMEOUT_MS)
    require(cvc5_says in ("unsat", "unknown"),
            f"cvc5 answers {cvc5_says} where z3 refutes {what}: the solvers disagree")
    if cvc5_says == "unknown":
        _note(f"z3 unsat; cvc5 gave up within {CVC5_TIMEOUT_MS // 1000} s, so this rests "
              "on z3 alone")


def _stored_text(cert: dict[str, Any], own: str, built_from: str) -> None:
    require(cert["smtlib"] == own,
            f"the stored SMT-LIB is not the checker's own encoding of {built_from}")


# ---- polynomial activations: Nullstellensatz and real infeasibility ------------------------

def infeasible(block: dict[str, Any], width: int, cert: dict[str, Any]) -> None:
    """Nullstellensatz (cofactors or Gröbner basis [1]) or real infeasibility of the system."""
    import sympy as sp

    symbols, own = equations(block, width)
    require([str(s) for s in symbols] == cert["unknowns"], "unexpected unknowns")
    stored = [polynomial(f, symbols) for f in cert["equations"]]
    require(len(stored) == len(own) and set(stored) == own,
            "the stored equations are not exactly the coefficients of P - B")
    if cert["kind"] == Kind.REAL_INFEASIBILITY:
        text = equations_smtlib(stored, symbols)
        _stored_text(cert, text, "these equations")
        _refuted(text, "the equations")
    elif cert["method"] == "cofactors":
        hs = [polynomial(h, symbols) for h in cert["cofactors"]]
        require(len(hs) == len(stored), "one cofactor per equation")
        total = sp.expand(sp.Add(*(h * f for h, f in zip(hs, stored, strict=True))))
        require(total == 1, "sum of h_j f_j is not 1")
    else:
        # The reduced Gröbner basis is [1] in every monomial order (the ideal is the unit
        # ideal), so the certificate names no order.
        require(cert["method"] == "groebner basis", f"unknown method {cert['method']!r}")
        basis = sp.groebner(sorted(own, key=sp.srepr), *symbols, order="grevlex")
        require(list(basis.exprs) == [1], "the Groebner basis is not [1]")


def equations_smtlib(polys: list[sp.Expr], symbols: list[sp.Symbol]) -> str:
    """"Every equation holds", QF_NRA, in the certificate's order of the equations."""
    import sympy as sp

    lines = [*_header(), *(f"(declare-fun {s} () Real)" for s in symbols)]
    for f in polys:
        terms = []
        for exps, c in sp.Poly(f, *symbols).terms():
            factors = [_q(Fraction(int(c.p), int(c.q)))]
            for s, e in zip(symbols, exps, strict=True):
                factors += [str(s)] * e
            terms.append(f"(* {' '.join(factors)})" if len(factors) > 1 else factors[0])
        total = f"(+ {' '.join(terms)} 0)" if len(terms) > 1 else (terms[0] if terms else "0")
        lines.append(f"(assert (= {total} 0))")
    return "\n".join([*lines, "(check-sat)"]) + "\n"


# ---- piecewise activations: SMT-LIB printed by the checker ---------------------------------

def _header() -> list[str]:
    return ["(set-logic QF_NRA)", "(set-info :status unsat)"]


def _q(value: Fraction) -> str:
    text = f"(/ {abs(value.numerator)} {value.denominator})" if value.denominator != 1 \
        else str(abs(value.numerator))
    return f"(- {text})" if value < 0 else text


def _sum(terms: list[str]) -> str:
    terms = [t for t in terms if t != "0"]
    if not terms:
        return "0"
    return terms[0] if len(terms) == 1 else f"(+ {' '.join(terms)})"


def _times(a: str, b: str) -> str:
    return "0" if "0" in (a, b) else f"(* {a} {b})"


def _sigma(activation: dict[str, Any], z: str) -> str:
    kind = activation["kind"]
    if kind == "relu":
        return f"(ite (> {z} 0) {z} 0)"
    if kind == "leaky_relu":
        return f"(ite (>= {z} 0) {z} (* {_q(exact.q(activation['param']))} {z}))"
    if kind == "abs":
        return f"(ite (>= {z} 0) {z} (- {z}))"
    if kind == "relu_pow":
        return f"(ite (> {z} 0) (* {' '.join([z] * int(activation['power']))}) 0)"
    raise Invalid(f"no piecewise formula for {kind}")


def _biased(block: dict[str, Any]) -> bool:
    """docs/rules.md §8: the document marks the block, and its layers carry the biases."""
    marked = bool(block.get("bias"))
    carried = block["layers"] is not None and any(set(layer) - LAYER_KEYS
                                                  for layer in block["layers"])
    return marked or carried


def _affine_text(layer: dict[str, Any], key: str, value: list[str]) -> list[str]:
    """SMT: layer[key]·value, the bias term last when the layer has biases (docs/rules.md §8)."""
    bias = layer.get(f"{key}_bias")
    return [_sum([_times(a, v) for a, v in zip(row, value, strict=True)]
                 + ([] if bias is None else [bias[j]]))
            for j, row in enumerate(layer[key])]


def _stack_text(block: dict[str, Any], layers: list[dict[str, Any]],
                x: list[str], skip: bool) -> list[str]:
    """The stack's output terms at x; layer entries are SMT terms (names or constants)."""
    activation = block["activation"]
    s = [[_q(v) for v in row] for row in exact.skip_rows(block)] if skip else None
    value = x
    for layer in layers:
        pre = _affine_text(layer, "up", value)
        if activation["gated"]:
            gate = _affine_text(layer, "gate", value)
            hidden = [_times(_sigma(activation, g), h) for g, h in zip(gate, pre, strict=True)]
        else:
            hidden = [_sigma(activation, h) for h in pre]
        out = _affine_text(layer, "down", hidden)
        if s is not None:
            out = [_sum([o] + [_times(c, v) for c, v in zip(row, value, strict=True)])
                   for o, row in zip(out, s, strict=True)]
        value = out
    return value


def _constant_layers(layers: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [_map(layer, lambda v: _q(exact.q(v))) for layer in layers]


def _rows_scale_freely(block: dict[str, Any]) -> bool:
    """Each neuron's input row may be scaled into [-1, 1]^d without loss iff σ is H(k),
    k >= 1: σ(c z) = c^k σ(z), c > 0, goes into the output weights. Re-proved here, never read
    from the certificate: with biases no block is homogeneous (docs/rules.md §8.4's trap)."""
    k = lemmas.degree(block["activation"])
    return k is not None and k >= 1 and not _biased(block)


def _degree_one(block: dict[str, Any]) -> bool:
    """P and B are both positively homogeneous of degree 1 (σ H(k) with k + gated = 1, no
    biases), so P = B on [-1, 1]^d implies P = B everywhere."""
    k = lemmas.degree(block["activation"])
    return k is not None and k + int(bool(block["activation"]["gated"])) == 1 \
        and not _biased(block)


def point_set_smtlib(block: dict[str, Any], width: int, points: list[exact.Vec]) -> str:
    """"Some plain block of this width matches B at every point", QF_NRA."""
    layers = _block_names(block, width)
    lines = [*_header()] + [f"(declare-fun {n} () Real)" for n in _flat(layers)]
    if _rows_scale_freely(block):
        lines += [f"(assert (<= (- 1) {n} 1))" for layer in layers for key in ("up", "gate")
                  for row in layer.get(key, []) for n in row]
    for point in points:
        want = exact.evaluate(block, block["layers"], point)
        got = _stack_text(block, layers, [_q(v) for v in point], skip=False)
        lines += [f"(assert (= {g} {_q(w)}))" for g, w in zip(got, want, strict=True)]
    return "\n".join([*lines, "(check-sat)"]) + "\n"


def difference_smtlib(block: dict[str, Any], witness: list[dict[str, Any]]) -> str:
    """"Some x has P(x) != B(x)", QF_NRA (x in [-1, 1]^d when both are of degree 1)."""
    x = [f"x{k}" for k in range(block["dim"])]
    lines = [*_header()] + [f"(declare-fun {v} () Real)" for v in x]
    if _degree_one(block):
        lines += [f"(assert (<= (- 1) {v} 1))" for v in x]
    plain = _stack_text(block, _constant_layers(witness), x, skip=False)
    target = _stack_text(block, _constant_layers(block["layers"]), x, skip=True)
    differs = [f"(not (= {p} {b}))" for p, b in zip(plain, target, strict=True)]
    lines.append(f"(assert (or {' '.join(differs)}))" if len(differs) > 1 else
                 f"(assert {differs[0]})")
    return "\n".join([*lines, "(check-sat)"]) + "\n"


def no_difference(block: dict[str, Any], cert: dict[str, Any]) -> None:
    """No x with P(x) != B(x), solved from the checker's own encoding."""
    text = difference_smtlib(block, cert["layers"])
    _stored_text(cert, text, "the block and this witness")
    _refuted(text, "a point where the witness differs from B")


def point_set(block: dict[str, Any], width: int, cert: dict[str, Any]) -> None:
    """No plain block of width `width` matches B at the stored points (own encoding)."""
    points = [exact.vec(p) for p in cert["points"]]
    require(bool(points) and all(len(p) == block["dim"] for p in points),
            "points must be a non-empty list of vectors of the block's dimension")
    text = point_set_smtlib(block, width, points)
    _stored_text(cert, text, "the block, the width and these points")
    _refuted(text, "matching B at these points")


def refutation(block: dict[str, Any], width: int, cert: dict[str, Any]) -> None:
    """A `finite point set`, `Nullstellensatz` or `real infeasibility` at a width at least
    `width`: no plain block of that width equals B, hence none narrower (zero neurons)."""
    stated = exact.whole(cert["width"])
    require(stated >= width, "the refutation is for a smaller width")
    if cert["kind"] == Kind.FINITE_POINT_SET:
        point_set(block, stated, cert)
    else:
        infeasible(block, stated, cert)


def polynomial_witness(block: dict[str, Any], layers: list[dict[str, Any]]) -> None:
    """`polynomial identity`: P − B is the zero polynomial."""
    require(identity(block, layers), "P - B is not the zero polynomial")
