"""Blocks too large to embed, at every width (docs/rules.md, "Large blocks: the
modular-functional certificate", "The generic case at scale", "Large blocks at every width",
§8.2 "Flip sets at scale"): the checker's side of the prover's decide/large.py, which routes a
large block to these certificates.

Refutations: `modular functional` and `key count` (rules/modular.py), `unique subset
solution` (rules/unique_subset.py), each in its §4 form or (unique subset solution, key
count) its §8.2 rows. Witnesses without stored layers: `own neurons, rows of J negated`
(rules/unique_subset.py), `own neurons + spare pairs`, `+ linear neurons`, `+ square pairs`,
`+ square quadruples` (rules/spare.py), `own neurons + doubles` (rules/doubles.py). The weights
are the document's embedded ones (a block routed here by its cost), else those the checker
read itself from the files the document names.
"""

from __future__ import annotations

from fractions import Fraction
from typing import Any

from ..kernel import linalg as exact
from ..kernel.contract import Invalid, Kind, require
from . import canonical as forms
from . import doubles, flips, modular, spare, unique_subset
from .modular import Layers


def require_generic_case(block: dict[str, Any]) -> tuple[str, Fraction, Fraction | None]:
    """A depth-1 ungated block with an O(a)+N σ (lemmas re-proved through the family)."""
    require(block["depth"] == 1 and not block["activation"]["gated"], "depth-1 ungated only")
    family = forms.family(block)
    require(family[0] in ("relu", "analytic"), "the generic case needs an O(a)+N σ")
    return family


def weights(block: dict[str, Any], layers: Layers | None) -> Layers:
    """The exact weights: embedded in the document, else as read from the named files."""
    if isinstance(block["layers"], list):  # embedded (a block routed here by its cost)
        layers = _embedded(block)
    require(layers is not None, "the block's weights are not embedded: the checker reads them "
                                "from the files the certificate names (absorb-prove check)")
    assert layers is not None
    require(len(layers) == 1 and layers[0]["up"].shape == (block["width"], block["dim"]),
            "the weights read are not one width × dim 'up'")
    return layers


def one_layer(block: dict[str, Any], layers: Layers | None) -> dict[str, Any]:
    """A depth-1 block's layer: embedded (strings), else as read from the named files."""
    if isinstance(block["layers"], list):
        require(len(block["layers"]) == 1, "a depth-1 block has one layer")
        return block["layers"][0]
    require(layers is not None and len(layers) == 1,
            "the block's weights are not embedded: the checker reads them from the files the "
            "certificate names (absorb-prove check)")
    assert layers is not None
    return layers[0]


def _embedded(block: dict[str, Any]) -> Layers:
    """The embedded weights of a block, read like a spec's literal matrices."""
    from ..readers.reading import Rational

    return [{name: Rational([list(r) for r in exact.mat(layer[name])])
             for name in ("up", "down", "gate") if name in layer} for layer in block["layers"]]


def _skip(block: dict[str, Any]) -> list[list[Fraction]]:
    return [list(r) for r in exact.skip_rows(block)]


# ---- witnesses without stored layers ------------------------------------------------------

def rows_negated(block: dict[str, Any], width: int, cert: dict[str, Any],
                 layers: Layers | None) -> None:
    """`own neurons, rows of J negated`: §4's (O(a)+N, the generic case) or a §8.2 row's."""
    if unique_subset.flip_rule(cert):
        unique_subset.check_flip_witness(block, _skip(block), width, weights(block, layers),
                                         cert, flips.rule(block["activation"]))
        return
    require_generic_case(block)
    unique_subset.check_witness(_skip(block), width, weights(block, layers), cert,
                                forms.family(block)[1])


def spare_pairs(block: dict[str, Any], width: int, cert: dict[str, Any]) -> None:
    """`own neurons + spare pairs`."""
    spare.check(block, width, cert, forms.family(block))


def doubled(block: dict[str, Any], width: int, cert: dict[str, Any],
            layers: Layers | None) -> None:
    """`own neurons + doubles`: Δ and det U_Δ mod p, read from the weights."""
    doubles.check(block, width, cert, forms.family(block), weights(block, layers))


# ---- refutations --------------------------------------------------------------------------

def refutation(block: dict[str, Any], width: int, cert: dict[str, Any],
               layers: Layers | None) -> None:
    """A `modular functional`, `key count` or `unique subset solution`: not absorbable at
    `width`."""
    from ..readers.files import FileError  # a denominator divisible by p: no residue

    try:
        _refutation(block, width, cert, layers)
    except FileError as error:
        raise Invalid(str(error)) from error


def _refutation(block: dict[str, Any], width: int, cert: dict[str, Any],
                layers: Layers | None) -> None:
    if cert["kind"] in (Kind.UNIQUE_SUBSET_SOLUTION, Kind.KEY_COUNT) \
            and unique_subset.flip_rule(cert):  # §8.2 at scale, or its key count at any size
        if cert["kind"] == Kind.KEY_COUNT:
            unique_subset.check_flip_key_count(block, width, weights(block, layers), cert,
                                               flips.rule(block["activation"]))
        else:
            unique_subset.check_flip_refutation(block, _skip(block), width,
                                                weights(block, layers), cert,
                                                flips.rule(block["activation"]))
        return
    family = require_generic_case(block)
    # §8.1: with biases the generic case and the key count are §4's, for a ≠ 0; the large
    # key count is issued (and checked) for a ≠ 0 only
    require((not block.get("bias") and cert["kind"] == Kind.MODULAR_FUNCTIONAL) or family[1] != 0,
            f"{cert['kind']} needs a != 0 here")
    read = weights(block, layers)
    if cert["kind"] == Kind.KEY_COUNT:
        modular.check_key_count(width, read, cert)
    elif cert["kind"] == Kind.UNIQUE_SUBSET_SOLUTION:
        unique_subset.check_refutation(_skip(block), width, read, cert, family[1])
    else:
        modular.check(exact.skip_entry(block), width, read, cert, family[1])
