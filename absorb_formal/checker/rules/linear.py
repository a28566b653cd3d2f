"""Linear activations (docs/rules.md, "Linear activations"): the checker's side of `linear
rank` and of the witness `linear maps equal`.

σ = a·z makes a depth-1 block the linear map Λ = S + a·DU (biases add only a constant,
docs/rules.md §8), and a plain block of width w realises exactly the maps of rank ≤ w. Λ and
its rank are recomputed; a witness is compared through its canonical form (Λ, and γ with
biases).
"""

from __future__ import annotations

from typing import Any

from ..kernel import linalg as exact
from ..kernel.contract import require
from ..kernel.linalg import whole
from . import canonical as forms
from .width import same_width


def witness(block: dict[str, Any], layers: list[dict[str, Any]]) -> None:
    """`linear maps equal`: the stored depth-1 layer has the block's Λ (and γ)."""
    forms.same_forms(block, layers, single=True)


def rank(block: dict[str, Any], width: int, cert: dict[str, Any]) -> None:
    """A `linear rank`: rank Λ > `width`, so not absorbable at it."""
    family = forms.family(block)
    require(family[0] == "linear" and block["depth"] == 1, "linear rank needs depth-1 Lin")
    # biases add only a constant (docs/rules.md §8): Λ is the same
    lam = forms.form(family, block["dim"], exact.skip_rows(block), block["layers"][0])[0]
    require(exact.rank(lam) > width, f"rank(S + aDU) <= {width}")
    require(whole(cert["rank"]) == exact.rank(lam) and exact.mat(cert["Lambda"]) == lam,
            "the stored rank or Lambda is wrong")
    same_width(cert, width)
