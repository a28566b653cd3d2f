"""Gated blocks with Og(c) (GLU, sigmoid gate), generic case, depth 1 (docs/rules.md §5).

`σ(−z) = 2c − σ(z)`, with o = σ − c odd, analytic and not a polynomial (the only-if needs
all three; Properties.gated_odd_part): negating row i of G and column i of D changes the
linear part by `−2c·d_i u_iᵀ`. When every neuron is alone on its key ±g_i with d_i ≠ 0 and
u_i ≠ 0, the block is absorbable at width m iff `Σ_{i∈J} d_i u_iᵀ = −S/(2c)` for some J.
"""

from __future__ import annotations

from ..certify import widths as cert
from ..model import linalg
from ..model.blocks import Block, Layer, Matrix
from . import subset
from .decision import Decision, undecided
from .lemmas import properties

METHOD = "§5 GLU sign flips"


def generic_reason(block: Block) -> str:
    """Why the block is not in the generic case ("" when it is)."""
    assert block.layers is not None
    layer = block.layers[0]
    assert layer.gate is not None
    seen: set[tuple] = set()
    for i, g in enumerate(layer.gate.rows):
        if not any(g):
            return f"neuron {i + 1} has a zero gate row"
        if not any(layer.up.rows[i]) or not any(layer.down.column(i)):
            return f"neuron {i + 1} has a zero up row or down column"
        key = max(g, tuple(-x for x in g))
        if key in seen:
            return f"neuron {i + 1} shares its gate key ±g with another neuron"
        seen.add(key)
    return ""


def decide(block: Block, width: int) -> Decision | None:
    props = properties(block.activation)
    c = props.gated_const
    if not block.activation.gated or c is None or block.layers is None:
        return None
    if not props.gated_odd_part:
        return undecided(f"§5 needs sigma - {c} odd, analytic and non-polynomial; not proved "
                         f"for {block.activation}")
    if block.depth != 1:
        return undecided("GLU blocks of depth >= 2 are covered by no rule")
    if width != block.width:
        return undecided("§5 decides GLU blocks at their own width only")
    why = generic_reason(block)
    if why:
        return undecided(f"non-generic GLU block ({why}); §5 covers the generic case only")
    layer = block.layers[0]
    assert layer.gate is not None
    terms = [linalg.outer(layer.down.column(i), layer.up.rows[i]) for i in range(block.width)]
    target = tuple(tuple(-x / (2 * c) for x in row) for row in block.skip.rows())
    answer = subset.solve(terms, target)
    if answer.status == "unknown":
        return undecided(answer.reason)
    lemma = props.lemmas["OgN"]
    if answer.status == "none":
        return Decision(False, METHOD, cert.glu_refutation(answer.certificate, lemma, c),
                        detail="no index set J")
    assert answer.subset is not None
    flip = set(answer.subset)
    gate = Matrix([tuple(-x for x in g) if i in flip else g
                   for i, g in enumerate(layer.gate.rows)])
    down = Matrix([tuple(-x if j in flip else x for j, x in enumerate(row))
                   for row in layer.down.rows])
    plain = Layer(layer.up, down, gate)
    shown = "{" + ", ".join(str(i + 1) for i in sorted(flip)) + "}"
    return Decision(True, METHOD,
                    cert.glu_witness(plain, width, sorted(i + 1 for i in flip), lemma, c),
                    witness=(plain,), detail=f"J = {shown}")
