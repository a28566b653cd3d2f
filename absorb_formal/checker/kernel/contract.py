"""The certificate contract: the names both sides of a certificate agree on.

A certificate document (docs/certificates.md) is written by the prover (`certify/`) and
verified by the checker (`checker/dispatch.py` and `checker/rules/`). Everything the two must
spell alike lives here, once: the document format's version, every certificate kind, every
`check` a `witness` names (the constructions of large blocks among them), the few public
parameters a certificate relies on without storing them (a seed, rule names, the checker's
caps), and the checker's "this does not hold" (`Invalid`, `require`). The JSON Schema of the
format ships beside this module (`certificate.schema.json`).

The prover imports this module; nothing here is computed, so it adds nothing the checker
would have to trust.
"""

from __future__ import annotations

from enum import StrEnum

FORMAT = "absorb_formal certificate 2"  # the document's "format" field


class Kind(StrEnum):
    """Every certificate kind (docs/certificates.md, "Certificate kinds"). A member is a str,
    equal to its value and written to JSON as it."""

    WITNESS = "witness"
    HOMOGENEITY_POINT = "homogeneity point"
    PARITY_POINT = "parity point"
    PARITY_POINT_AT_INFINITY = "parity point at infinity"
    LEMMA_DIRECTION = "lemma + direction"
    LINEAR_RANK = "linear rank"
    SEPARATING_FUNCTIONAL = "separating functional"
    SUBSET_SEARCH = "subset search"
    MODULAR_FUNCTIONAL = "modular functional"
    HALF_ACTIVATION_BOUND = "half-activation bound"
    MINIMAL_WIDTH = "minimal width"
    MINIMAL_WIDTH_BOUNDS = "minimal width bounds"
    CANONICAL_FORMS = "canonical forms"
    INTEGER_CANONICAL_FORMS = "integer canonical forms"
    RULE = "rule"
    FINITE_POINT_SET = "finite point set"
    NULLSTELLENSATZ = "Nullstellensatz"
    REAL_INFEASIBILITY = "real infeasibility"
    FACTS = "facts"
    KEY_COUNT = "key count"
    UNIQUE_SUBSET_SOLUTION = "unique subset solution"
    NORMALISED_SUBLAYER = "normalised sublayer"
    RAY_LIMIT = "ray limit"
    GATED_PRE_NORM_JACOBIAN = "gated pre-norm jacobian"


class Check(StrEnum):
    """What a `witness` certificate's `check` field says the checker must verify: stored
    layers compared with the block, or a construction rebuilt from the block itself."""

    CANONICAL_FORMS_EQUAL = "canonical forms equal"
    LINEAR_MAPS_EQUAL = "linear maps equal"
    GLU_SIGN_FLIPS = "GLU sign-flip identity"
    FLIP_IDENTITY = "§8.2 flip identity"
    ITSELF = "the block itself (skip none), zero-padded"
    LAYERS_ABSORBED = "each layer absorbed by its own certificate"
    STACK_FORMS_EQUAL = "each layer's canonical form equals the block layer's"
    POLYNOMIAL_IDENTITY = "polynomial identity"
    SMT_NO_DIFFERENCE = "smt: no point where P differs from B"
    # Constructions of large blocks: no layers stored, the checker rebuilds them.
    ROWS_NEGATED = "own neurons, rows of J negated"
    SPARE_PAIRS = "own neurons + spare pairs"
    DOUBLES = "own neurons + doubles"
    LINEAR_NEURONS = "own neurons + linear neurons"
    SQUARE_PAIRS = "own neurons + square pairs"
    SQUARE_QUADRUPLES = "own neurons + square quadruples"


CONSTRUCTIONS = (Check.SPARE_PAIRS, Check.DOUBLES, Check.LINEAR_NEURONS, Check.SQUARE_PAIRS,
                 Check.SQUARE_QUADRUPLES, Check.ROWS_NEGATED)


# Public parameters: values both sides must take alike for a certificate to be accepted, whether
# a field states them (section, rule) or none does (the seed, the checker's caps).
SEED = 0  # seed of the random rank-one functionals of the unique-solution systems (§4, §8.2)
FLIP_SECTION = "§8.2"  # the `section` of a flip-set certificate
# The `rule` of a §8.2 certificate at scale, by the name of the row of §8.2's table.
FLIP_RULES = {"relu^2": "§8.2 relu^2", "gated O(a)+N": "§8.2 gated O(a)+N", "Og(c)": "§8.2 Og(c)"}
MAX_ENUMERATION = 16  # signs or free coordinates the checker re-enumerates, at most
MAX_PATTERN_BITS = 14  # half-activation bound: 2^m patterns walked for m ≤ 14 neurons only
MAX_TUPLES = 4096  # half-activation bound: pattern products enumerated across layers, at most
MAX_QUADRATIC = 2 * 10**8  # products d·|J|·k² of a §8.2 flip set's exact quadratic identity


class Invalid(Exception):
    """The certificate does not establish what the document says."""


def require(condition: bool, reason: str) -> None:
    """Raise `Invalid(reason)` unless `condition` holds."""
    if not condition:
        raise Invalid(reason)
