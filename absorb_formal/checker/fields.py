"""The fields each certificate kind may have (docs/certificates.md): every field of a
certificate is one its check reads, or prose for readers, or absent. The registry
(checker/dispatch.py) gives each kind (and each witness check) one of these; where the check
reads different fields by variant (a witness's check, a subset search's method and context,
a never-rule, a family rule, §4 or a §8.2 row), the fields follow the certificate.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .kernel.contract import Kind
from .rules import bias_families, families, unique_subset

# The fields a certificate may have besides `kind`, from the certificate itself (its check,
# method, rule…) and whether it is a case of a width search.
Fields = Callable[[dict[str, Any], bool], frozenset[str]]
PROSE = ("argument", "lemma")  # words for readers: the checker re-proves and re-derives them
STORED = ("check", "width", "layers")  # a witness that stores its plain stack
BUILT = ("check", "width", "argument")  # a construction of a large block: no layers stored
CASE = frozenset({"doubles", "spare_pairs", "refutation"})  # a width search's case


def fixed(*names: str) -> Fields:
    """These fields, whatever the certificate says."""
    return lambda cert, in_case: frozenset(names)


def flip_rule(common: tuple[str, ...], section_4: tuple[str, ...],
              section_8_2: tuple[str, ...]) -> Fields:
    """The fields of a §4 certificate, or of its §8.2 row's (`rule` names a row)."""
    return lambda cert, in_case: frozenset(
        common + (section_8_2 if unique_subset.flip_rule(cert) else section_4))


def lemma(cert: dict[str, Any], in_case: bool) -> frozenset[str]:
    """T1 states its block degree, T4 whether σ is gated; the other rules neither."""
    extra = {"T1": ("block_degree",), "T4": ("gated",)}.get(cert.get("rule"), ())
    return frozenset(("rule", "property", "depth", "direction", *extra, *PROSE))


def rule(cert: dict[str, Any], in_case: bool) -> frozenset[str]:
    """A family rule: its width, rank S when it uses it, an example member; the identity
    table's generic rank; a linear neuron's gate bias γ."""
    rule = cert.get("rule")
    extra = (("generic_rank",) if rule == families.IDENTITY
             else ("gamma",) if rule in bias_families.LINEAR_NEURON_RULES else ())
    return frozenset(("rule", "width", "rank_S", "example", *extra, *PROSE))


# subset search: each method's own fields (docs/certificates.md, `subset search`)
METHODS = {"width search": ("width", "canonical_form", "cases"),
           "key count": ("width", "canonical_form", "keys"),
           "lattice functional": ("Y", "Y_dot_target"), "unique combination": ("coefficients",),
           "enumeration": ("free_coordinates",), "smt": (), "cp-sat": ("terms", "equations"),
           "sign enumeration": ()}


def subset(cert: dict[str, Any], in_case: bool) -> frozenset[str]:
    """A separating functional or a subset search by its method, with what its context adds:
    a case of a width search its complement basis Q; a §8.2 system its section, rule, value
    and width (m); a GLU system (a gated block) c and the lemma Og(c)."""
    if cert.get("kind") == Kind.SEPARATING_FUNCTIONAL:
        own: tuple[str, ...] = ("Y", "Y_dot_target")
    else:
        method = cert.get("method")
        own = ("method", *(METHODS.get(method, ()) if isinstance(method, str) else ()))
    if in_case:
        context: tuple[str, ...] = ("complement_basis",)
    elif "section" in cert:
        context = ("section", "rule", "value", "width")
    elif cert.get("method") in ("width search", "key count"):
        context = ()
    else:
        context = ("c",)
    return frozenset((*own, *context, *PROSE))


def half_activation(cert: dict[str, Any], in_case: bool) -> frozenset[str]:
    """The least tuple of patterns is stated exactly when the products were enumerated."""
    extra = ("least_patterns",) if cert.get("combine") == "products" else ()
    return frozenset(("width", "rank", "combine", "layers", *extra, "argument"))


def nullstellensatz(cert: dict[str, Any], in_case: bool) -> frozenset[str]:
    extra = ("cofactors",) if cert.get("method") == "cofactors" else ()
    return frozenset(("method", "equations", "unknowns", "width", *extra, "argument"))
