"""The generic engine for piecewise activations (relu, leaky_relu, relu^k, abs, reglu):
counterexample-guided synthesis with z3 (docs/rules.md §6), from the definitions alone.

Synthesis finds plain weights that match B on a finite point set (nonlinear real
arithmetic); verification asks for an x where the candidate differs from B; its answer is
the next point. Unsat synthesis on a point set proves non-absorbability (certificate: the
points). For positively homogeneous σ, each neuron's input row is scaled into [−1, 1]^d
without loss (σ(c z) = c^k σ(z), c > 0, is absorbed by the output weights).

The prover asks z3 only: the checker re-derives every query from the block and re-solves it
(z3, then cvc5 as a bounded second opinion), so no solver verdict is stored.
"""

from __future__ import annotations

import random
from fractions import Fraction
from typing import Any

from ..certify import bodies as cert
from ..decide import budget
from ..decide.lemmas import properties
from ..model.blocks import Block
from . import encode

MAX_UNKNOWNS = 8  # d = 2, m = 2; at d = 2, m = 3 (12 unknowns) synthesis mostly runs out of time
MAX_ROUNDS = 40
Z3_TIMEOUT_MS = 20_000
RLIMIT = 20_000_000
PIECEWISE = ("relu", "leaky_relu", "relu_pow", "abs")


def applies(block: Block) -> bool:
    return block.activation.scalar.kind in PIECEWISE and block.depth <= 2


def sizes_ok(block: Block, width: int) -> bool:
    """Every unknown counts, the comparator's biases too (docs/rules.md §8.4)."""
    return len(encode.flat_names(encode.block_names(block, width))) <= MAX_UNKNOWNS


# ---- SMT-LIB text (printed here: stable bytes, one source for solving and certificates) ----

def q(value: Fraction) -> str:
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


def sigma_text(block: Block, z: str) -> str:
    scalar = block.activation.scalar
    kind = scalar.kind
    if kind == "relu":
        return f"(ite (> {z} 0) {z} 0)"
    if kind == "leaky_relu":
        return f"(ite (>= {z} 0) {z} (* {q(scalar.param or Fraction(0))} {z}))"
    if kind == "abs":
        return f"(ite (>= {z} 0) {z} (- {z}))"
    if kind == "relu_pow":
        return f"(ite (> {z} 0) (* {' '.join([z] * (scalar.power or 1))}) 0)"
    raise ValueError(kind)


def block_text(block: Block, layers: list[dict[str, list[list[str]]]], x: list[str],
               skip: bool) -> list[str]:
    """Output terms of the stack at x, layer entries being SMT terms (names or constants)."""
    value = x
    s = [[q(v) for v in row] for row in block.skip.rows()] if skip else None
    for layer in layers:
        pre = _affine_text(layer, "up", value)
        if block.activation.gated:
            gate = _affine_text(layer, "gate", value)
            hidden = [_times(sigma_text(block, g), h) for g, h in zip(gate, pre, strict=True)]
        else:
            hidden = [sigma_text(block, h) for h in pre]
        out = _affine_text(layer, "down", hidden)
        if s is not None:
            out = [_sum([o] + [_times(c, v) for c, v in zip(row, value, strict=True)])
                   for o, row in zip(out, s, strict=True)]
        value = out
    return value


def _affine_text(layer: dict[str, Any], key: str, value: list[str]) -> list[str]:
    """layer[key]·value, the bias term last when the layer has biases (docs/rules.md §8)."""
    bias = layer.get(f"{key}_bias")
    return [_sum([_times(a, v) for a, v in zip(row, value, strict=True)]
                 + ([] if bias is None else [bias[j]]))
            for j, row in enumerate(layer[key])]


def exact_layers(block: Block) -> list[dict[str, Any]]:
    return [encode.map_layer(layer, q) for layer in encode.fraction_layers(block)]


def box_applies(block: Block) -> bool:
    """Row scaling is without loss when σ is H(k), k ≥ 1, and the block has no biases: a
    biased block is not homogeneous, so its points and rows stay as they are (docs/rules.md §8.4's
    trap; the checker re-derives this and refuses a box for a biased block)."""
    k = properties(block.activation).homogeneous
    return k is not None and k >= 1 and not block.biased


def synthesis_text(block: Block, width: int, points: list[tuple[Fraction, ...]]) -> str:
    names = encode.block_names(block, width)
    lines = ["(set-logic QF_NRA)"] + [f"(declare-fun {n} () Real)"
                                      for n in encode.flat_names(names)]
    if box_applies(block):
        for layer in names:
            for key in ("up", "gate"):
                for row in layer.get(key, []):
                    lines += [f"(assert (<= (- 1) {n} 1))" for n in row]
    for point in points:
        want = block.evaluate_exact(point)
        got = block_text(block, names, [q(v) for v in point], skip=False)
        lines += [f"(assert (= {g} {q(w)}))" for g, w in zip(got, want, strict=True)]
    lines.append("(check-sat)")
    return "\n".join(lines) + "\n"


def verification_text(block: Block, witness: list[dict[str, list[list[str]]]]) -> str:
    """∃x: P(x) ≠ B(x); unsat means P ≡ B (x in [−1, 1]^d when both are H(1): never with
    biases, docs/rules.md §8.4)."""
    x = [f"x{k}" for k in range(block.dim)]
    lines = ["(set-logic QF_NRA)"] + [f"(declare-fun {v} () Real)" for v in x]
    if _degree_one(block):
        lines += [f"(assert (<= (- 1) {v} 1))" for v in x]
    plain = block_text(block, witness, x, skip=False)
    target = block_text(block, exact_layers(block), x, skip=True)
    differs = [f"(not (= {p} {b}))" for p, b in zip(plain, target, strict=True)]
    lines.append(f"(assert (or {' '.join(differs)}))" if len(differs) > 1 else
                 f"(assert {differs[0]})")
    lines.append("(check-sat)")
    return "\n".join(lines) + "\n"


def _degree_one(block: Block) -> bool:
    return properties(block.activation).block_degree(block.activation.gated) == 1 \
        and not block.biased


def _zero_idle(block: Block, layer: dict[str, Any]) -> dict[str, Any]:
    """Zero every neuron that cannot affect P (zero down column; or zero input row and bias
    when gated or σ(0) = 0): P is unchanged, and the checker wants no unchecked weights."""
    zero_at_zero = properties(block.activation).sigma_at_zero == 0
    out: dict[str, Any] = {k: [list(r) for r in v] if not encode.is_bias(k) else list(v)
                           for k, v in layer.items()}
    for j, row in enumerate(out["up"]):
        column = [r[j] for r in out["down"]]
        inputs = row + ([out["up_bias"][j]] if "up_bias" in out else [])
        if any(column) and (any(inputs) or ("gate" not in out and not zero_at_zero)):
            continue
        for r in out["down"]:
            r[j] = Fraction(0)
        for key in ("up", "gate"):
            if key in out:
                out[key][j] = [Fraction(0)] * len(out[key][j])
            if f"{key}_bias" in out:
                out[f"{key}_bias"][j] = Fraction(0)
    return out


# ---- the loop -----------------------------------------------------------------------------

def initial_points(dim: int) -> list[tuple[Fraction, ...]]:
    points = []
    for j in range(dim):
        for s in (1, -1):
            points.append(tuple(Fraction(s if k == j else 0) for k in range(dim)))
    rng = random.Random(0)
    points += [tuple(Fraction(rng.randint(-3, 3), rng.randint(1, 3)) for _ in range(dim))
               for _ in range(2)]
    return [p for p in dict.fromkeys(points) if any(p)]


def _check(text: str) -> tuple[Any, Any]:
    import z3

    solver = z3.SolverFor("QF_NRA")
    solver.set("random_seed", 0)
    solver.set("timeout", budget.remaining_ms(Z3_TIMEOUT_MS))
    solver.set("rlimit", RLIMIT)  # nlsat does not always honour timeouts; rlimit it does
    solver.from_string(text)
    return solver.check(), solver


def solve(block: Block, width: int) -> tuple[str, dict[str, Any], str]:
    """("absorbable" | "not absorbable" | "unknown", certificate, reason)."""
    import z3

    points = initial_points(block.dim)
    names = encode.block_names(block, width)
    for _ in range(MAX_ROUNDS):
        text = synthesis_text(block, width, points)
        verdict, solver = _check(text)
        if verdict == z3.unsat:
            stored = text.replace("(set-logic QF_NRA)", "(set-logic QF_NRA)\n"
                                  "(set-info :status unsat)", 1)
            return "not absorbable", cert.finite_point_set(
                width, [[str(v) for v in p] for p in points], stored), ""
        if verdict != z3.sat:
            return "unknown", {}, f"synthesis: {_why(solver)}"
        model = solver.model()
        exact = [encode.map_layer(layer, lambda n, model=model: encode.rational_model_value(
            model, z3.Real(n))) for layer in names]
        if any(v is None for layer in exact for k, rows in layer.items()
               for v in encode.entries(k, rows)):
            return "unknown", {}, "synthesis gave an algebraic candidate"
        exact = [_zero_idle(block, layer) for layer in exact]
        witness = [encode.map_layer(layer, q) for layer in exact]
        check_text = verification_text(block, witness)
        verdict, solver = _check(check_text)
        if verdict == z3.unsat:
            return "absorbable", {
                "layers": [encode.map_layer(layer, str) for layer in exact],
                "smtlib": check_text.replace("(set-logic QF_NRA)", "(set-logic QF_NRA)\n"
                                             "(set-info :status unsat)", 1)}, ""
        if verdict != z3.sat:
            return "unknown", {}, f"verification: {_why(solver)}"
        model = solver.model()
        point = tuple(encode.rational_model_value(model, z3.Real(f"x{k}"))
                      for k in range(block.dim))
        if any(v is None for v in point) or point in points:
            return "unknown", {}, "verification gave an unusable counterexample"
        points.append(point)  # type: ignore[arg-type]
    return "unknown", {}, f"no decision after {MAX_ROUNDS} CEGIS rounds"


def _why(solver: Any) -> str:
    """z3's reason for 'unknown', with the two limits merged: which of the time and resource
    limits is hit first depends on the machine's load, and the same input must give the same
    output (README, Determinism)."""
    reason = str(solver.reason_unknown())
    if reason in ("timeout", "canceled") or "resource limit" in reason:
        return "no answer within the solver's limits"
    return reason
