"""Large concrete blocks at every width: docs/rules.md §4 (and §8.1 with biases) bounds that read
the weights only through residues mod p and exact zero tests, in O(m·d) vectorised work, and
the dispatch between them.

Depth 1, ungated, σ = a·z + e(z) with a ≠ 0 and e non-polynomial (relu, leaky_relu, gelu,
gelu_tanh, silu: `applies`), with or without biases.

- Below: a row alone on its residue key (`modular.key_classes`), with d_i ≠ 0, is a live key
  of the canonical form (alone on its key, its coefficient is d_i or b·|α|·d_i ≠ 0). Each
  live key needs a neuron of the plain block (§4: p + |Δ| + 2k ≤ m′), so width W < L (L such
  rows) is not absorbable (`key count`). At width m with all m rows alone the modular
  functional (`modular.py`, §7) refutes, or the unique solution mod q decides both ways
  (`unique_subset.py`).
- Above: the block's own neurons plus spare pairs at m + 2·rank S (`spare.py`), or, cheaper
  when d < 2·rank S, doubles at m + d (`doubles.py`); `narrowest` picks the narrower one
  proved. Blocks with a construction but no lower bound here (biased gated, relu², square:
  `spare.py`'s linear neurons, square pairs and quadruples) are absorbable from the
  construction's width on (`decide_construction`); below it only the own-width flip sets
  (§8.2, concrete.py) bound the min width.
- `bounds` brackets the min width between the two; `witness_fields` and `witness_layer` build
  the exact witness any construction's certificate names.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import numpy as np

from ..certify import large as cert
from ..checker.kernel.contract import CONSTRUCTIONS, Check
from ..model.blocks import Block, Layer, Matrix
from . import doubles, modular, spare, unique_subset
from .decision import Decision, undecided
from .modular import KeyClasses, key_classes
from .spare import applies, construction, factorisation, spare_certificate, upper_bound

PRIME = modular.PRIME  # one prime for keys and minor: the checker reads both from it
METHOD = "§4 key count + spare pairs (large block)"
METHOD_DOUBLES = "§4 key count + doubles (large block)"
# The constructions whose whole witness `witness_layer` builds from the certificate (the
# flips of the unique solution carry their own layer).
BUILT = tuple(check for check in CONSTRUCTIONS if check is not Check.ROWS_NEGATED)
METHOD_GATED = "§8 linear neurons / square quadruples"  # any size: see concrete.py


def doubles_width(block: Block) -> int | None:
    """m + d when doubles would be narrower than spare pairs (d < 2·rank S, m ≥ d), else None
    (reads only shapes and S)."""
    m, d = block.width, block.dim
    if not applies(block) or m < d or d >= 2 * len(factorisation(block).columns):
        return None
    return m + d


def narrowest(block: Block) -> tuple[int, dict[str, Any]]:
    """(width, certificate) of the narrowest construction proved for an O(a)+N block: doubles
    at m + d when d < 2·rank S and d rows of U are independent mod p, else spare pairs."""
    if doubles_width(block) is not None:
        found = _doubles(block)
        if found is not None:
            return block.width + len(found.neurons), doubles.certificate(block, found)
    return upper_bound(block), spare_certificate(block)


def construction_method(certificate: dict[str, Any]) -> str:
    """The method a large construction's certificate is printed under."""
    return {Check.SPARE_PAIRS: METHOD, Check.DOUBLES: METHOD_DOUBLES}.get(
        certificate.get("check", ""), METHOD_GATED)


def key_count_certificate(keys: KeyClasses, size: int) -> dict[str, Any]:
    return cert.key_count(PRIME, keys.live, size)


def added_neurons(block: Block, certificate: dict[str, Any] | None = None
                  ) -> dict[str, np.ndarray]:
    """The neurons the construction adds to the block's own (docs/rules.md §4 spare pairs or
    doubles, §8 linear neurons or square quadruples), as exact object arrays of Fractions:
    "up" (k×d), "down" (d×k), and "up_bias", "gate", "gate_bias" (k, k×d, k) where the
    witness has them (`spare.added_neurons`). The own neurons are kept as they are, so a
    large witness never converts the block's weights — except for doubles (`certificate`
    with check DOUBLES; None: the block's `construction`), which also change some own down
    columns and the down bias: "columns" (the own neurons changed, an int array), "own_down"
    (d × k, their new down columns) and "down_bias" (d, the new down bias; only when the block
    has biases): `doubles.doubled`."""
    if certificate is not None and certificate.get("check") == Check.DOUBLES:
        return doubles.doubled(block, [int(i) for i in certificate["neurons"]])
    return spare.added_neurons(block)


def witness_fields(block: Block, size: int | None = None,
                   certificate: dict[str, Any] | None = None) -> dict[str, np.ndarray]:
    """The whole witness as exact object arrays of Fractions, by field name (up, down,
    gate, up_bias, gate_bias, down_bias), width max(size, the construction's): the own
    neurons (doubles: some down columns and the down bias changed), then `added_neurons`,
    then zero neurons. `certificate`: the construction's (None: the block's `construction`).
    Costs m′·d Fractions: small blocks and tests; export rounds the own and added parts
    separately."""
    assert block.layers is not None
    layer = block.layers[0]
    added = added_neurons(block, certificate)
    m, d = layer.up.shape
    k = added["up"].shape[0]
    width = max(size or 0, m + k)
    out: dict[str, np.ndarray] = {}
    for name, own, rows in (("up", layer.up, True), ("gate", layer.gate, True),
                            ("down", layer.down, False)):
        if own is None:
            continue
        full = np.full((width, d) if rows else (d, width), Fraction(0), dtype=object)
        extra = added.get(name, np.full((k, d), Fraction(0), dtype=object))
        if rows:
            full[:m], full[m:m + k] = np.array(own.rows, dtype=object), extra
        else:
            full[:, :m], full[:, m:m + k] = np.array(own.rows, dtype=object), extra
            if "columns" in added:  # doubles: the own columns that gave w_i away
                full[:, added["columns"]] = added["own_down"]
        out[name] = full
    for name, own_bias in (("up_bias", layer.up_bias), ("gate_bias", layer.gate_bias)):
        if own_bias is None and name not in added:
            continue
        full = np.full(width, Fraction(0), dtype=object)
        full[:m] = list(own_bias or (Fraction(0),) * m)
        if name in added:
            full[m:m + k] = added[name]
        out[name] = full
    if layer.down_bias is not None:
        out["down_bias"] = added.get("down_bias", np.array(list(layer.down_bias), dtype=object))
    return out


def witness_arrays(block: Block, size: int | None = None,
                   certificate: dict[str, Any] | None = None
                   ) -> tuple[np.ndarray, np.ndarray, np.ndarray | None, np.ndarray | None]:
    """(up, down, up_bias, down_bias) of `witness_fields` (ungated constructions)."""
    f = witness_fields(block, size, certificate)
    return f["up"], f["down"], f.get("up_bias"), f.get("down_bias")


def gated_witness_arrays(block: Block, size: int | None = None) -> tuple[
        np.ndarray, np.ndarray, np.ndarray, np.ndarray | None, np.ndarray | None,
        np.ndarray | None]:
    """(gate, up, down, gate_bias, up_bias, down_bias) of the linear-neuron witness."""
    f = witness_fields(block, size)
    return (f["gate"], f["up"], f["down"], f.get("gate_bias"), f.get("up_bias"),
            f.get("down_bias"))


def square_witness_arrays(block: Block, size: int | None = None
                          ) -> tuple[np.ndarray, np.ndarray, np.ndarray | None, np.ndarray | None]:
    """(up, down, up_bias, down_bias) of the square-quadruple witness (relu², square)."""
    return witness_arrays(block, size)


def witness_layer(block: Block, size: int | None = None,
                  certificate: dict[str, Any] | None = None) -> Layer:
    """`witness_fields` as a plain `Layer` (rows of Fractions; large: costs m′·d Fractions)."""
    f = witness_fields(block, size, certificate)

    def vector(name: str) -> tuple[Fraction, ...] | None:
        return None if name not in f else tuple(f[name].tolist())

    return Layer(Matrix(f["up"].tolist()), Matrix(f["down"].tolist()),
                 Matrix(f["gate"].tolist()) if "gate" in f else None,
                 up_bias=vector("up_bias"), gate_bias=vector("gate_bias"),
                 down_bias=vector("down_bias"))


@dataclass
class _Analysis:
    """What a block's residues give, kept for the blocks decided last: its key classes, and
    the modular-functional refutation at its own width once asked for (None: none exists)."""

    block: Block
    keys: KeyClasses | None
    own: Decision | None = None
    own_done: bool = False
    doubles: doubles.Doubles | None = None  # `doubles.find_doubles` of U, once asked for
    doubles_done: bool = False


_RECENT: list[_Analysis] = []  # newest first
RECENT = 4  # blocks remembered (each holds its arrays alive)


def _analysed(block: Block, own_width: bool) -> tuple[KeyClasses | None, Decision | None]:
    """(residue-key classes, modular-functional refutation at width m or None; computed only when
    `own_width`). Several claims on one block, a query (its width, then its min width
    bounds) and repeated API calls on a block read again from the same files share this
    work: the LU is most of it. A block is the same as a remembered one when it is
    that object, or when σ, S, the values of U and D and the biases are equal (compared
    exactly: the residues and the minor depend on nothing else, but the unique solution's
    witness, `unique_subset.flipped`, carries the block's own biases)."""
    found = _entry(block)
    if own_width and not found.own_done:
        found.own = _own_width(block, found.keys)
        found.own_done = True
    return found.keys, found.own


def _entry(block: Block) -> _Analysis:
    """The remembered analysis of this block (made, with its key classes, when new), moved
    to the front."""
    found = next((a for a in _RECENT if a.block is block), None) or \
        next((a for a in _RECENT if _same_block(a.block, block)), None)
    if found is None:
        assert block.layers is not None
        layer = block.layers[0]
        found = _Analysis(block, key_classes(layer.up, layer.down))
    else:
        _RECENT.remove(found)
    _RECENT.insert(0, found)
    del _RECENT[RECENT:]
    return found


def _doubles(block: Block) -> doubles.Doubles | None:
    """`doubles.find_doubles` of the block's U, computed once per block's values."""
    found = _entry(block)
    if not found.doubles_done:
        assert block.layers is not None
        found.doubles, found.doubles_done = doubles.find_doubles(block.layers[0].up), True
    return found.doubles


def _own_width(block: Block, keys: KeyClasses | None) -> Decision | None:
    """The decision at width m: the modular functional refutes when S is separated from the
    terms mod q; otherwise, with m distinct live keys, the unique solution mod q decides both ways
    (`unique_subset`, docs/rules.md §4). None when neither applies."""
    if keys is None:
        return None
    m, d = block.width, block.dim
    both_ways = keys.distinct and keys.live == m and m <= d * d
    # the unique solution decides both ways: then a zero minor is not retried (each retry
    # costs one LU of order m + 1) but handed over at once
    found = modular.decide(block, m, keys.distinct, retries=not both_ways)
    if found is not None or not both_ways:
        return found
    return unique_subset.decide(block)


def _same_block(a: Block, b: Block) -> bool:
    if a.activation != b.activation or a.depth != b.depth or a.layers is None \
            or b.layers is None or a.width != b.width or a.dim != b.dim:
        return False
    if (a.skip.matrix is None) != (b.skip.matrix is None) or a.skip.scale != b.skip.scale:
        return False
    mine, theirs = a.layers[0], b.layers[0]
    if mine.up_bias != theirs.up_bias or mine.down_bias != theirs.down_bias:
        return False  # the flip witness of one would carry the other's biases
    pairs = [(mine.up, theirs.up), (mine.down, theirs.down)]
    if a.skip.matrix is not None and b.skip.matrix is not None:
        pairs.append((a.skip.matrix, b.skip.matrix))
    return all(_same_values(x, y) for x, y in pairs)


def _same_values(x: Matrix, y: Matrix) -> bool:
    """Equal entries, exactly: loaded arrays compare as the numbers they hold (a float equals
    another exactly when the rationals do); otherwise only the same object."""
    if x is y:
        return True
    if x.shape != y.shape or x.loaded is None or y.loaded is None:
        return False
    # one dtype: numpy would compare int64 with float64 after rounding the integers
    return x.loaded.dtype == y.loaded.dtype and bool(np.array_equal(x.loaded, y.loaded))


def decide(block: Block, size: int) -> Decision:
    """Absorbable at width `size`: refuted below the live-key count (or at width m by the
    modular functional), proved at m + 2·rank S and above (spare pairs) and, when
    d < 2·rank S, at m + d and above (doubles), else undecided."""
    assert block.layers is not None and applies(block)
    # S = cI: hi is m + 2d at no cost; a matrix S needs its exact rank (rref), so the own
    # width goes first there (it may decide every width ≥ m)
    cheap = block.skip.matrix is None
    keys, own = _analysed(block, block.width <= size
                          and (not cheap or size < upper_bound(block)))
    if size == block.width and own is not None and own.absorbable is False:
        return own
    if own is not None and own.absorbable is True and size >= block.width:
        return own  # the witness has width m; zero neurons fill any wider width
    if keys is not None and size < keys.live:
        return Decision(False, METHOD, key_count_certificate(keys, size),
                        detail=f"{keys.live} live keys need {keys.live} neurons")
    spare = upper_bound(block)
    if size >= spare:  # spare pairs: nothing to compute, and the checker reads no weight
        return Decision(True, METHOD, spare_certificate(block),
                        detail=f"the block's {block.width} neurons + {spare - block.width} in "
                               "spare pairs")
    hi, above = narrowest(block)
    if size >= hi:
        return Decision(True, METHOD_DOUBLES, above,
                        detail=f"the block's {block.width} neurons, {hi - block.width} of them "
                               "doubled")
    if size == block.width and own is not None:
        return own  # undecided, saying why (e.g. the minor does not fit in memory)
    lo = keys.live if keys is not None else 0
    name = "doubles" if above["check"] == Check.DOUBLES else "spare-pair"
    return undecided(f"a large block: width {size} lies between the live-key count {lo} and "
                     f"the {name} construction's {hi} (docs/rules.md §4), where only the exact "
                     "width search (limited to small blocks) decides")


def decide_construction(block: Block, size: int) -> Decision:
    """Blocks with a construction but no lower-bound rule (biased gated, relu², square):
    absorbable at the construction's width and above, else undecided."""
    found = construction(block)
    assert found is not None
    hi = int(found["width"])
    if size >= hi:
        return Decision(True, METHOD_GATED, found,
                        detail=f"the block's {block.width} neurons + {hi - block.width} added")
    kind = "biased " if block.biased else ""
    return undecided(f"a {kind}{block.activation} block: width {size} is below the "
                     f"construction's {hi} (docs/rules.md §8), and no rule decides it there")


@dataclass(frozen=True)
class Bounds:
    """lo ≤ min width ≤ hi, with a refutation at lo − 1 (None when lo = 1) and a witness."""

    lo: int
    hi: int
    below: dict[str, Any] | None
    above: dict[str, Any]


def bounds(block: Block) -> Bounds:
    if not applies(block):
        found = construction(block)
        assert found is not None
        return Bounds(1, int(found["width"]), None, found)
    assert block.layers is not None and applies(block)
    keys, own = _analysed(block, True)
    lo, below = 1, None
    if own is not None and own.absorbable is False:
        lo, below = block.width + 1, own.certificate
    elif keys is not None and keys.live > 1:
        lo, below = keys.live, key_count_certificate(keys, keys.live - 1)
    if own is not None and own.absorbable is True:  # the flip witness at width m
        assert own.certificate is not None
        return Bounds(lo, block.width, below, own.certificate)
    hi, above = narrowest(block)
    return Bounds(lo, hi, below, above)
