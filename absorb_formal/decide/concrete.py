"""Concrete blocks: absorbable at a width? which minimal width? (docs/rules.md §3–5).

Order of the rules: a plain block absorbs itself; T1–T4 refute at every width; depth 1 goes
to the linear rule, the canonical-form width search (O(a)+N) or the GLU rule (Og(c));
depth ≥ 2 with O(a) stacks per-layer witnesses. Anything else is `unknown`, with the reason.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from fractions import Fraction
from typing import Any

from ..certify import bodies as cert
from ..certify import widths
from ..checker.kernel.contract import Check, Kind
from ..model.blocks import MAX_EXACT_WEIGHTS, Block, Layer, Matrix, weight_count
from . import doubles, flips, flips_large, glu, half_activation, large, linear, spare, width
from .canonical import CanonicalForm, canonical_form, normalise, ridge
from .decision import BIASED, Decision, undecided
from .never import never

WIDTH_METHOD = "§4 canonical form + width search"
# The §4 width search works on m terms of d² entries each (the subset system); beyond this
# many entries the large-block rules (O(m·d) residues and one (m+1)-determinant mod p, which
# decide the generic case at width m, key counts below, doubles and spare pairs above) are tried
# first (cheap where the subset system is costly), and the exact search only when they leave
# the width open.
MAX_EXACT_COST = 100_000


def too_large(block: Block) -> str:
    """Why exact work on this concrete block is refused ("" when it is not)."""
    n = weight_count(block)
    if not block.is_concrete or n <= MAX_EXACT_WEIGHTS:
        return ""
    return (f"the block has {n} weights; exact decisions other than the never-rules and the "
            "large-block bounds (key count, modular functional, spare pairs, doubles: "
            f"docs/rules.md §4, §7) are limited to {MAX_EXACT_WEIGHTS}: decide a smaller "
            "block, or state the claim about the family (drop the weights)")


def costly(block: Block) -> bool:
    """Whether the large-block rules go first: a concrete depth-1 O(a)+N block whose §4
    subset system (d²·m entries) exceeds MAX_EXACT_COST."""
    return (block.is_concrete and block.dim * block.dim * block.width > MAX_EXACT_COST
            and spare.applies(block))


def large_first(block: Block, size: int) -> Decision | None:
    """The large-block decision of a costly block, when it decides (else None)."""
    if not costly(block):
        return None
    found = large.decide(block, size)
    return found if found.absorbable is not None else None


def pad(layer: Layer, size: int) -> Layer:
    """The same plain layer with zero neurons added up to `size`."""
    extra = size - layer.up.shape[0]
    if extra <= 0:
        return layer
    zero_rows = [(Fraction(0),) * layer.up.shape[1]] * extra

    def grow(m: Matrix | None) -> Matrix | None:
        return None if m is None else Matrix(list(m.rows) + zero_rows)

    def zeros(bias: tuple[Fraction, ...] | None) -> tuple[Fraction, ...] | None:
        return None if bias is None else bias + (Fraction(0),) * extra

    down = Matrix([row + (Fraction(0),) * extra for row in layer.down.rows])
    return Layer(grow(layer.up), down, grow(layer.gate),  # type: ignore[arg-type]
                 up_bias=zeros(layer.up_bias), gate_bias=zeros(layer.gate_bias),
                 down_bias=layer.down_bias)


def plain_itself(block: Block, size: int) -> Decision | None:
    """A block with skip none is plain: it absorbs itself at any width ≥ its own (biases
    kept: the comparators of a biased block are biased plain blocks, docs/rules.md §8)."""
    if not block.is_plain or size < block.width or block.layers is None:
        return None
    stack = tuple(pad(layer, size) for layer in block.layers)
    return Decision(True, "plain block (skip none)",
                    cert.itself(stack, size),
                    witness=stack, detail="the block is plain")


def never_decision(block: Block) -> Decision | None:
    proof = never(block, cheap=bool(too_large(block)))
    if proof is None:
        return None
    return Decision(False, proof.rule, proof.certificate, detail="never, at any width")


def ridge_width(cf: CanonicalForm, block: Block, size: int) -> Decision:
    if size < max(cf.p, 1):
        return Decision(False, WIDTH_METHOD, width.key_count_refutation(cf, size),
                        detail=f"{cf.p} keys need {cf.p} neurons")
    assert block.layers is not None
    own = block.layers[0]
    bound = width.upper_bound(cf, own)
    # Absorbable at w implies absorbable at every w' >= w (zero neurons): at or above the
    # bound (<= m + 2 rank S) no search is needed.
    found = width.Search(choice=bound) if bound.cost <= size else width.search(cf, size, own)
    if found.choice is not None:
        # The witness keeps at most max(m, cost) neurons: the checker accepts a witness
        # narrower than the width asked, so a huge width costs nothing. §8.1 constant
        # neurons with an irrational σ(β) cost none: c′ holds Σ d σ(β) exactly (symbolic).
        narrow = min(size, max(block.width, found.choice.cost))
        layer = width.build(cf, found.choice, narrow)
        return Decision(True, WIDTH_METHOD,
                        width.witness_certificate(cf, found.choice, layer, narrow),
                        witness=(layer,), detail=describe(cf, found.choice, block))
    if found.incomplete:
        return undecided(f"width search incomplete: {found.incomplete}")
    return Decision(False, WIDTH_METHOD, width.refutation(cf, size, found),
                    detail="no signs, doubles or spare pairs fit")


def describe(cf: CanonicalForm, choice: width.Choice, block: Block) -> str:
    """The paper's index set J when the choice is a pure sign flip of single neurons."""
    if choice.delta or choice.k or block.layers is None or cf.p != block.width:
        return (f"{choice.cost} neurons: {len(choice.signs)} single keys, "
                f"{len(choice.delta)} doubles, {choice.k} spare pairs")
    layer = block.layers[0]
    signs = dict(choice.signs)
    index = cf.index()
    flipped = []
    for i, u in enumerate(layer.up.rows):
        key, alpha = normalise(u, cf.ridge.family)
        beta = layer.up_bias[i] / alpha if layer.up_bias is not None else Fraction(0)
        if signs[index[key, beta]] * (1 if alpha > 0 else -1) < 0:
            flipped.append(i + 1)
    return "J = {" + ", ".join(map(str, flipped)) + "}"


def depth_one(block: Block, size: int) -> Decision:
    found = linear.decide_width(block, size)
    if found is not None:
        return found
    cf = canonical_form(block)
    if cf is not None:
        return ridge_width(cf, block, size)
    if block.activation.gated:
        at_own = glu.decide(block, block.width)
        if at_own is not None:
            return glu_at(block, at_own, size)
    return undecided(f"no rule of docs/rules.md §3–5 decides {block.activation} blocks "
                     "that no never-rule covers")


def glu_first(block: Block, size: int) -> Decision | None:
    """A bias-free glu block whose §5 subset system (d²·m entries) is large, as `costly`
    says for §4's: the unique solution mod q first (`flips_large`, the Og(c) row with no
    biases), when it decides; else None (§5's exact subset search)."""
    if block.biased or not (block.is_concrete and flips_large.applies(block)
                            and block.dim * block.dim * block.width > MAX_EXACT_COST):
        return None
    found = flips_large.decide(block, size)
    own = flips_large.own_width(block) if found is not None else None
    if found is None or own is None or own.absorbable is None:
        return None
    return construction_above(block, size) if found.absorbable is None else found


def construction_above(block: Block, size: int) -> Decision | None:
    """§8's construction (bias-free glu: linear neurons) when `size` reaches its width."""
    built = spare.construction(block)
    if built is not None and size >= int(built["width"]):
        return large.decide_construction(block, size)
    return None


def glu_at(block: Block, at_own: Decision, size: int) -> Decision:
    counted = flips_large.key_count(block, size)  # below m: m distinct keys need m neurons
    if counted is not None:
        return counted
    if at_own.absorbable is True and size >= block.width:
        assert at_own.witness is not None
        stack = tuple(pad(layer, size) for layer in at_own.witness)
        certificate = cert.widened(at_own.certificate or {}, size, stack)
        return replace(at_own, certificate=certificate, witness=stack)
    if size == block.width and at_own.absorbable is not None:
        return at_own
    if at_own.absorbable is False and size < block.width:  # a witness at w < m is one at m
        return at_own
    above = construction_above(block, size)  # §8's linear neurons (glu: gate row 0, σ(0) = ½)
    if above is not None:
        return above
    if size == block.width or at_own.absorbable is None:
        return at_own
    return undecided("§5 decides GLU blocks at their own width only, and the linear-neuron "
                     "construction (docs/rules.md §8) at m + rank S and above")


def stacked(block: Block, size: int) -> Decision:
    """Depth ≥ 2, O(a): a stack of per-layer witnesses is a witness (docs/rules.md §5; with biases
    §8.4). Each layer is decided on its own by the depth-1 rules whose witness the checker
    verifies by canonical forms (linear, §4 / §8.1 width search)."""
    if linear.slope(block) is None and ridge(block.activation) is None:
        return per_layer_stack(block, size)  # gated, relu², square: each layer's own rule
    assert block.layers is not None
    below = half_activation.refute(block, size)  # §9: width < 2r refuted, any depth
    if below is not None:
        return below
    layers = []
    for n, layer in enumerate(block.layers, start=1):
        single = replace(block, depth=1, layers=(layer,))
        decision = biased_at_width(single, size) if block.biased else depth_one(single, size)
        if decision.absorbable is True and decision.method not in (WIDTH_METHOD, linear.METHOD):
            return per_layer_stack(block, size)  # a witness canonical forms do not check
        if decision.absorbable is not True:
            why = "is not absorbable" if decision.absorbable is False else "is undecided"
            return undecided(f"layer {n} {why} at width {size} on its own, so no stack of "
                             f"witnesses; {half_activation.why_silent(block, size)}")
        assert decision.witness is not None
        layers.append(decision.witness[0])
    common = max(layer.up.shape[0] for layer in layers)  # witnesses may be narrower than size
    stack = tuple(pad(layer, common) for layer in layers)
    return Decision(True, "§5 stack of per-layer witnesses",
                    widths.stack_forms_equal(stack, common), witness=stack,
                    detail=f"{block.depth} layers, each absorbable")


STACK_METHOD = "stack of per-layer certificates"


def per_layer_stack(block: Block, size: int) -> Decision:
    """Depth ≥ 2, any σ (docs/rules.md "Depth (stacks)", §8.4): each layer decided alone at
    `size` by whatever rule decides a depth-1 block; when every layer is absorbable, the
    stack of their witnesses (each padded with zero neurons to the widest) equals the block.
    The certificate keeps each layer's own certificate, which the checker verifies against
    that layer alone."""
    assert block.layers is not None
    certificates: list[dict[str, Any]] = []
    layers: list[Layer | None] = []
    for n, layer in enumerate(block.layers, start=1):
        single = replace(block, depth=1, layers=(layer,))
        decision = at_width(single, size)
        if decision.absorbable is not True:
            why = "is not absorbable" if decision.absorbable is False else "is undecided"
            return undecided(f"layer {n} {why} at width {size} on its own, so no stack of "
                             f"per-layer witnesses ({decision.reason or decision.detail})")
        assert decision.certificate is not None
        certificates.append(decision.certificate)
        layers.append(_layer_witness(single, decision))
    common = max(int(c["width"]) for c in certificates)
    # the exact stack, for export; None when a layer's witness is algebraic (σ(γ) symbolic)
    stack = None if any(x is None for x in layers) else tuple(
        pad(x, common) for x in layers if x is not None)
    return Decision(True, STACK_METHOD, cert.per_layer(common, certificates), witness=stack,
                    detail=f"{block.depth} layers, each absorbable on its own")


def _layer_witness(single: Block, decision: Decision) -> Layer | None:
    """The exact plain layer a depth-1 decision proves: its witness, or a construction's
    layer built from its certificate (`large.witness_layer`); None when neither exists as
    rationals (linear neurons with an irrational σ(γ))."""
    if decision.witness:
        return decision.witness[0]
    certificate = decision.certificate or {}
    if certificate.get("check") == Check.LINEAR_NEURONS:
        gamma = spare.gate_constant(single)
        if gamma is None or not isinstance(gamma[1], Fraction):
            return None
    if certificate.get("kind") == Kind.WITNESS and certificate.get("check") in large.BUILT:
        try:
            return large.witness_layer(single, None, certificate)
        except doubles.TooWide:
            return None
    return None


def biased_keys(block: Block) -> CanonicalForm | None:
    """The §8.1 form of a biased depth-1 block with an O(a)+N σ, a ≠ 0 (relu, leaky_relu,
    gelu, gelu_tanh, silu), constant neurons with an irrational σ(β) kept formally; None
    otherwise."""
    found = ridge(block.activation)
    if not block.biased or block.depth != 1 or found is None or found.a == 0:
        return None
    return canonical_form(block, symbolic=True)


def at_width(block: Block, size: int) -> Decision:
    """Is the concrete block absorbable by a plain stack of hidden width `size`?"""
    if block.biased:  # T3 and T2∞ refute every width (docs/rules.md §8); then §8.1, §8.2
        itself = None if too_large(block) else plain_itself(block, size)
        return itself or never_decision(block) or biased_at_width(block, size)
    refused = too_large(block)
    for rule in (None if refused else plain_itself(block, size), never_decision(block)):
        if rule is not None:
            return rule
    if refused:
        if spare.applies(block):
            return large.decide(block, size)
        glu_large = flips_large.decide(block, size)  # §5 at scale: bias-free glu (Og(c))
        if glu_large is not None and glu_large.absorbable is not None:
            return glu_large
        above = construction_above(block, size)  # §8's linear neurons: glu, σ(0) = ½
        return above or glu_large or undecided(refused)
    if block.depth == 1:
        return large_first(block, size) or glu_first(block, size) or depth_one(block, size)
    return stacked(block, size)


def biased_at_width(block: Block, size: int) -> Decision:
    """docs/rules.md §8: each part decides its own activations; the rest stays undecided."""
    if too_large(block):  # §8.1: §4's bounds and generic case, with affine keys; §8 gated
        if spare.applies(block):
            return large.decide(block, size)
        own = flips_large.decide(block, size)  # §8.2 at scale: relu², swiglu/geglu/reglu, glu
        if own is not None and own.absorbable is not None:
            return own
        if spare.construction(block) is not None:
            above = large.decide_construction(block, size)
            return own if above.absorbable is None and own is not None else above
        return own or undecided(BIASED)
    if block.depth > 1:  # §8.4: a stack of absorbable layers is absorbable
        return stacked(block, size)
    found_linear = linear.decide_width(block, size)  # σ = a·z: Λx + γ (docs/rules.md §8)
    if found_linear is not None:
        return found_linear
    cf = biased_keys(block)
    if cf is not None:  # §8.1: §4's width search over affine keys
        return large_first(block, size) or ridge_width(cf, block, size)
    found = flip_sets(block, size)  # §8.2: relu², swiglu/geglu/reglu, glu
    if found is not None and found.absorbable is not None:
        return found
    built = spare.construction(block)  # §8: linear neurons / square quadruples, any size
    if built is not None and size >= int(built["width"]):
        return large.decide_construction(block, size)
    return found or undecided(BIASED)


def flip_sets(block: Block, size: int) -> Decision | None:
    """§8.2 at width `size`: at scale (`flips_large`, the unique solution mod q) for blocks
    over the exact-work limit, and first for those whose exact system is large (routing by
    cost); else, or when it leaves the width open, the exact subset search (`flips`). Below m,
    the key count (`flips_large.key_count`) first."""
    counted = flips_large.key_count(block, size)
    if counted is not None:
        return counted
    if too_large(block) or flips_large.costly(block):
        found = flips_large.decide(block, size)
        own = flips_large.own_width(block) if found is not None else None
        if too_large(block) or (own is not None and own.absorbable is not None):
            return found
    return flips.decide(block, size)


@dataclass(frozen=True)
class MinWidth:
    """value: the least width (None = no width; see `found`); `found` False = undecided,
    possibly with proved `bounds` (lo, hi) and their certificate ("minimal width bounds")."""

    found: bool
    value: int | None = None
    method: str = "none"
    certificate: dict[str, Any] | None = None
    reason: str = ""
    bounds: tuple[int, int] | None = None


def minimal_width(block: Block, known: tuple[int, bool] | None = None,
                  exhaustive: bool = True) -> MinWidth:
    """The least absorbing width with witness + refutation just below, or 'none' (never).

    known: (w, absorbable at w), already decided by the caller; it narrows the bounds
    (absorbable at w ⇒ at every w′ ≥ w, zero neurons). exhaustive=False (queries): when the
    width search would stall anyway (`width.stall`), the widths below the stall are not
    searched one (doubles, spare pairs) sub-problem at a time; the proved bounds are reported
    instead (key count, `known`, the cheap witness of `width.upper_bound`)."""
    nv = never_decision(block)  # biased blocks: T3 and T2∞ only (docs/rules.md §8)
    if nv is not None:
        return MinWidth(True, None, nv.method, nv.certificate)
    if too_large(block) or costly(block):
        if spare.applies(block):
            return large_minimal_width(block)
        if spare.construction(block) is not None:  # §8.2 at scale below, a construction above
            return construction_minimal_width(block)
        return MinWidth(False, reason=BIASED if block.biased else too_large(block))
    if block.depth > 1:  # §9 below, the stack of per-layer witnesses above (any bias)
        return stack_minimal_width(block, known)
    w = linear.min_width(block)  # linear σ, with or without biases (docs/rules.md §4, §8)
    if w is not None:
        return _bracket(block, w, linear.METHOD)
    if block.biased and biased_keys(block) is None:  # §8.1 below
        if spare.construction(block) is None:
            return MinWidth(False, reason=BIASED)
        bounded = construction_minimal_width(block)  # §8.2 at m below, §8 above
        if known is not None and not known[1] and bounded.bounds is not None:
            lo, hi = max(bounded.bounds[0], known[0] + 1), bounded.bounds[1]  # refuted at w
            if lo > bounded.bounds[0] and lo < hi:  # the certificate proves wider bounds: drop it
                return replace(bounded, certificate=None, bounds=(lo, hi),
                               reason=f"min width is between {lo} and {hi}")
        return bounded
    if block.depth == 1:
        cf = canonical_form(block, symbolic=True)
        if cf is not None:
            assert block.layers is not None
            bound = width.upper_bound(cf, block.layers[0])
            stall = width.stall(cf)
            if not exhaustive and stall is not None and stall < bound.cost:
                return _bounded(block, cf, bound.cost, stall, known)
            found = width.search(cf, bound.cost, block.layers[0])
            if found.choice is None:
                lo, hi = max(1, found.lower), found.upper
                return MinWidth(False, reason=f"min width is between {lo} and {hi}; width "
                                              f"search incomplete: {found.incomplete}",
                                bounds=(lo, hi))
            return _bracket(block, max(1, found.choice.cost), WIDTH_METHOD)
        if not block.biased and spare.construction(block) is not None:  # glu: §5 + §8
            return construction_minimal_width(block)
    return MinWidth(False, reason=f"no rule gives the minimal width of {block.activation} "
                                  f"blocks of depth {block.depth}")


def _bounded(block: Block, cf: CanonicalForm, upper: int, stall: int,
             known: tuple[int, bool] | None) -> MinWidth:
    """Bounds without the width search: p keys need p neurons; the cheap choice of cost
    `upper` is feasible; a decision at a width moves one bound. Equal bounds are certified."""
    lo, hi = max(1, cf.p), max(1, upper)
    if known is not None:
        size, absorbable = known
        lo, hi = (lo, min(hi, size)) if absorbable else (max(lo, size + 1), hi)
    if lo >= hi:
        return _bracket(block, hi, WIDTH_METHOD)
    return MinWidth(False, reason=f"min width is between {lo} and {hi} (no width search: from "
                                  f"width {stall} on it would walk 2^{cf.p} sign vectors)",
                    bounds=(lo, hi))


FLIPS_AND_CONSTRUCTION = "§8.2 flip sets + §8 constructions"
GLU_AND_CONSTRUCTION = "§5 GLU sign flips + §8 linear neurons"


def construction_minimal_width(block: Block) -> MinWidth:
    """Small biased blocks with a §8 construction (gated, relu², square: docs/rules.md §8):
    the construction above (m + rank S, m + 2 or 4·rank S); below, the §8.2 flip sets at the
    block's own width m — refuted there, the block is refuted at every w ≤ m too (a witness
    at w is one at m with zero neurons), so min width ≥ m + 1; absorbable there, min width
    ≤ m. Decided when the bounds meet (rank S = 1 and a refutation at m: min width m + 1)."""
    found = large.bounds(block)
    lo, hi, below, above = found.lo, found.hi, found.below, found.above
    own = own_flip_width(block)
    counted = flips_large.key_count(block, block.width - 1)  # distinct keys: at least m
    if counted is not None:
        lo, below = block.width, counted.certificate
    if own is not None and own.absorbable is False:
        lo, below = block.width + 1, own.certificate
    elif own is not None and own.absorbable is True and block.width < hi:
        assert own.certificate is not None
        hi, above = block.width, own.certificate
    if own is None or own.absorbable is None:
        method, how = large.METHOD_GATED, "a construction above; no lower-bound rule here"
    elif not block.biased:  # glu: §5's condition at m, §8's linear neurons above
        method, how = GLU_AND_CONSTRUCTION, ("§5's sign flips at the own width below, linear "
                                             "neurons above")
    else:
        method, how = FLIPS_AND_CONSTRUCTION, ("§8.2 flip sets at the own width below, a §8 "
                                               "construction above")
    if lo == hi:
        return MinWidth(True, hi, method, cert.minimal_width(hi, above, below))
    return MinWidth(False, method=method,
                    certificate=cert.minimal_width_bounds(lo, hi, below, above),
                    reason=f"min width is between {lo} and {hi} ({how})", bounds=(lo, hi))


def own_flip_width(block: Block) -> Decision | None:
    """The decision at the block's own width m by its flips: §8.2 (biased), or §5 for a
    bias-free glu block (at scale: `flips_large`, the Og(c) row with no biases)."""
    m = block.width
    if block.biased:
        return flip_sets(block, m)
    if too_large(block):
        return flips_large.decide(block, m)
    return glu_first(block, m) or glu.decide(block, m)


def large_minimal_width(block: Block) -> MinWidth:
    """Large blocks: the proved bounds lo ≤ min width ≤ hi (`large.bounds`); decided when
    they meet, else unknown with both bounds certified."""
    found = large.bounds(block)
    method = large.construction_method(found.above)
    if found.lo == found.hi:
        return MinWidth(True, found.hi, method,
                        cert.minimal_width(found.hi, found.above, found.below))
    above = "doubles" if method == large.METHOD_DOUBLES else "spare pairs"
    return MinWidth(False, method=method,
                    certificate=cert.minimal_width_bounds(found.lo, found.hi, found.below,
                                                          found.above),
                    reason=f"min width is between {found.lo} and {found.hi} ("
                           + ("large block: live-key count, modular functional or "
                              f"unique solution below, {above} above)"
                              if spare.applies(block) else
                              "a construction above; no lower-bound rule for this activation)"),
                    bounds=(found.lo, found.hi))


def _bracket(block: Block, value: int, method: str) -> MinWidth:
    """Certify `value`: a witness at it and a refutation at value − 1 (if value > 1)."""
    below = at_width(block, value - 1) if value > 1 else None
    if below is not None and below.absorbable is not False:
        return MinWidth(False, reason=f"width {value - 1} undecided: {below.reason}")
    above = at_width(block, value)
    if above.absorbable is not True:
        return MinWidth(False, reason=f"internal inconsistency at width {value}")
    return MinWidth(True, value, method, cert.minimal_width(
        value, above.certificate, below.certificate if below else None))


# ---- min width of stacks (depth ≥ 2) ---------------------------------------------------------

def layer_width(block: Block, n: int) -> int | None:
    """The least width known to absorb layer n alone (its min width, else the cheap choice of
    the width search), or None when no rule decides that layer."""
    assert block.layers is not None
    single = replace(block, depth=1, layers=(block.layers[n],))
    found = minimal_width(single, exhaustive=False)
    if found.found:
        return found.value
    return found.bounds[1] if found.bounds is not None else None


def stack_minimal_width(block: Block, known: tuple[int, bool] | None = None) -> MinWidth:
    """Depth ≥ 2: 2r ≤ min width (relu: docs/rules.md §9) and min width ≤ the largest layer
    width (the stack of per-layer witnesses, any σ whose layers are decided); decided with a
    `minimal width` certificate when they meet, else bounds."""
    assert block.layers is not None
    widths = [layer_width(block, n) for n in range(block.depth)]
    keyed = ridge(block.activation) is not None
    found = half_activation.bound(block) if keyed else None
    lo = max(1, 2 * found.rank) if found is not None and found.rank is not None else 1
    if any(w is None for w in widths):
        return MinWidth(False, reason=f"min width >= {lo}; a layer's own width is "
                                               "undecided, so no stack of witnesses bounds it")
    hi = max(w for w in widths if w is not None)
    if lo > hi:  # every layer absorbable below the proved bound: a bug; never state either
        return MinWidth(False, reason=f"internal inconsistency: the half-activation "
                                               f"bound {lo} exceeds the layers' width {hi}")
    above = at_width(block, hi)
    if known is not None and known[1] and lo <= known[0] < hi:  # a narrower stack, if theory's
        narrower = at_width(block, known[0])
        if narrower.absorbable is True:
            hi, above = known[0], narrower
    method = (half_activation.STACK_METHOD if lo > 1 else "§5 stack of per-layer witnesses"
              if keyed else STACK_METHOD)
    if above.absorbable is not True:
        return MinWidth(False, reason=f"min width >= {lo}; the stack of per-layer "
                                               f"witnesses at {hi} failed: {above.reason}")
    if lo == hi:
        below = half_activation.refute(block, hi - 1) if hi > 1 else None
        return MinWidth(True, hi, method, cert.minimal_width(
            hi, above.certificate, below.certificate if below is not None else None))
    below = half_activation.refute(block, lo - 1) if lo > 1 else None
    return MinWidth(
        False, method=method, bounds=(lo, hi),
        certificate=cert.minimal_width_bounds(
            lo, hi, below.certificate if below is not None else None, above.certificate),
        reason=f"min width is between {lo} and {hi} (" + (
            "half-activation bound below, stack of per-layer witnesses above; docs/rules.md §9)"
            if keyed else "the stack of per-layer witnesses above; no rule bounds a depth "
            f"{block.depth} {block.activation} stack from below)"))
