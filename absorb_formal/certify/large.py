"""Certificates of large blocks (docs/rules.md §4 "The generic case at scale", "Large blocks
at every width", §8, §8.2 at scale): they name residues, primes and index sets, never the
block's weights, which the checker reads itself.

- Below: residue-key counts (`key count`: `decide/large.py`, §8.2's `decide/flips_large.py`);
  at the own width, the modular functional (`decide/modular.py`) and the unique solution mod
  q of the subset system (`unique subset solution`, `decide/unique_subset.py`,
  `flips_large.py`).
- Witnesses without layers: the flips the unique solution finds (`own neurons, rows of J
  negated`), and the constructions above (`decide/spare.py`: spare pairs, linear neurons,
  square pairs, square quadruples; `decide/doubles.py`: doubles), which the checker rebuilds
  from the block.
"""

from __future__ import annotations

from typing import Any

from ..checker.kernel.contract import FLIP_RULES, SEED, Check, Kind

# ---- below and at the own width --------------------------------------------------------------


def key_count(prime: int, keys: int, width: int) -> dict[str, Any]:
    """§4: `keys` rows of U alone on their residue key mod `prime` with a live column of D,
    each needing its own neuron, so no width below `keys` (here `width`) absorbs."""
    return {"kind": Kind.KEY_COUNT, "prime": prime, "keys": keys, "width": width,
            "argument": "rows of U alone on their residue key mod p (row over its first "
                        "non-zero entry) with a non-zero column of D are live keys, each "
                        "needing its own neuron (docs/rules.md §4: p + |Δ| + 2k ≤ m′)"}


def flip_key_count(rule: str, constant: Any, prime: int, keys: int, width: int
                   ) -> dict[str, Any]:
    """§8.2's only-if: every neuron alive on its own (affine) residue key, so `keys` = m
    neurons are needed and `width` < m does not absorb; `rule` is the row of §8.2's table."""
    return {"kind": Kind.KEY_COUNT, "rule": FLIP_RULES[rule], "constant": str(constant),
            "prime": prime, "keys": keys, "width": width,
            "argument": "every neuron is alive and its key row has its own residue key mod prime "
                        "(distinct keys); a plain block equal to B needs a neuron on each of the "
                        "m keys, so none of width below m exists"}


def modular_functional(prime: int, minor_prime: int, rows: list[int], cols: list[int],
                       y: list[int], y_dot_s: int) -> dict[str, Any]:
    """§4 at the own width m: Y on rows × cols with d_iᵀ Y u_i ≡ 0 and ⟨Y, S⟩ ≢ 0 mod the
    minor's prime; distinct keys by residues mod `prime`."""
    return {"kind": Kind.MODULAR_FUNCTIONAL, "rule": "§4 generic case", "prime": prime,
            "minor_prime": minor_prime, "rows": rows, "cols": cols, "Y": y, "Y_dot_S": y_dot_s,
            "argument": "the m rows of U have pairwise different residue keys mod prime "
                        "(each row over its first non-zero entry) and every column of D "
                        "is non-zero, so the m neurons sit alive on m distinct keys; at "
                        "width m the block is then absorbable iff S + sum_i c_i d_i u_i^T "
                        "= 0 with every c_i in {0, 2a, -2a}; Y (on the first m+1 "
                        "coordinates of rows x cols, row by row) has d_i^T Y u_i = 0 mod "
                        "minor_prime for every i and <Y, S> = Y_dot_S != 0 mod "
                        "minor_prime, which rules every such identity out"}


# Why the unique solution mod q decides: §4's generic case, and §8.2's rows at scale.
SUBSET_SYSTEM = ("the m rows of U have pairwise different residue keys mod prime, so the m "
                 "keys are distinct; at width m the block is absorbable iff a subset J of the "
                 "d_i u_i^T sums to -S/(2a). Seen through the m random rank-one functionals of "
                 f"seed {SEED}, the m x m system is singular modulo every solve prime but the last "
                 "and invertible modulo the last, q: the system has at most one rational "
                 "solution, and it reduces mod q to the unique solution mod q")
FLIP_SYSTEM = ("every neuron is alive and its key row ([u_i | b_i] for relu^2, [g_i | gamma_i] "
               "for gated blocks) has its own residue key mod prime, so the m keys are distinct "
               "and at width m the block is absorbable iff some 0/1 vector c solves the §8.2 "
               f"system of its rule. Seen through the m functionals of seed {SEED}, the m x m "
               "system is singular modulo every solve prime but the last and invertible modulo "
               "the last, q: it has at most one rational solution, and that reduces mod q to "
               "the unique solution mod q")


def subset_fields() -> dict[str, Any]:
    """The fields of §4's generic case in a `unique subset solution`."""
    return {"rule": "§4 generic case"}


def flip_fields(rule: str, constant: Any, width: int) -> dict[str, Any]:
    """The fields of a §8.2 row (`rule`, by its name in §8.2's table) in a `unique subset
    solution`."""
    return {"rule": FLIP_RULES[rule], "constant": str(constant), "width": width}


def unique_solution(fields: dict[str, Any], prime: int, solve_primes: list[int],
                    argument: str, **outcome: Any) -> dict[str, Any]:
    """Not absorbable at width m: the unique solution mod the last solve prime has an entry
    outside {0, 1} (`neuron`, `value`), or its only 0/1 candidate J fails exactly (`flips`,
    `coordinate`)."""
    return {"kind": Kind.UNIQUE_SUBSET_SOLUTION, **fields, "prime": prime,
            "solve_primes": solve_primes, "argument": argument, **outcome}


def rows_negated(width: int, a: Any, flips: list[int]) -> dict[str, Any]:
    """§4's witness at the own width: the rows of U in J (1-based `flips`) negated."""
    return {"kind": Kind.WITNESS, "check": Check.ROWS_NEGATED, "width": width, "a": str(a),
            "flips": flips,
            "argument": "negate the rows of U (and their up biases) listed in flips, keep D: "
                        "by sigma(-z) = sigma(z) - 2az the block changes by -2a sum_J d_i "
                        "l_i(x) = S x + a constant (the down bias absorbs it), since "
                        "sum_J d_i u_i^T = -S/(2a) exactly"}


def flips_at_scale(rule: str, constant: Any, flips: list[int], width: int) -> dict[str, Any]:
    """§8.2's witness at scale: the neurons of J (1-based `flips`) flipped as the row says."""
    return {"kind": Kind.WITNESS, "check": Check.ROWS_NEGATED, "width": width,
            "rule": FLIP_RULES[rule], "constant": str(constant), "flips": flips,
            "argument": "flip the neurons listed in flips as §8.2's row says (relu^2: row of "
                        "U, b_i and d_i; gated: gate row and gamma_i; glu: gate row, gamma_i "
                        "and d_i), the down bias taking the flips' constant (bias-free glu: "
                        "no bias, no constant): their total change "
                        "is S x + a constant, since J's quadratic part is 0 and its linear part "
                        "is S exactly"}


# ---- constructions above: no layers stored, the checker rebuilds them ------------------------

# What each construction adds, in words (the checker re-derives the lemma it names).
_ADDED = {
    Check.SPARE_PAIRS:
        "the block's own neurons, up and down biases unchanged, plus for each "
        "rank-one term p q^T of S the pair p/(2a)·(σ(q·x) − σ(−q·x)) = p q·x "
        "(lemma O(a)); S = cI: q = e_k for the listed columns; a matrix S: the "
        "skeleton S = S[:,columns]·S[rows,columns]^-1·S[rows,:]",
    Check.LINEAR_NEURONS:
        "the block's own neurons, biases unchanged, plus for each rank-one term "
        "p q^T of S a linear neuron: gate row 0, gate bias gamma, up row q, up "
        "bias 0, down p/sigma(gamma); factorisation as for spare pairs",
    Check.SQUARE_QUADRUPLES:
        "the block's own neurons, biases unchanged, plus for each rank-one term "
        "p q^T of S the neurons p/(4v)·(σ(ℓ+1) + σ(−ℓ−1) − σ(ℓ−1) − σ(−ℓ+1)) "
        "= p ℓ, ℓ = q·x (lemma σ(z) + σ(−z) = v z²); factorisation as for spare "
        "pairs",
    Check.SQUARE_PAIRS:
        "the block's own neurons, biases unchanged, plus for each rank-one term "
        "p q^T of S the pair p/k·(σ(q·x + t) − σ(−q·x + t)) = p q·x (lemma "
        "σ(z + t) − σ(t − z) = k z for σ of degree 2); factorisation as for spare "
        "pairs",
}


def _construction(check: Check, width: int, columns: list[int], rows: list[int] | None,
                  **fields: str) -> dict[str, Any]:
    """The block's own neurons plus neurons per rank-one term of S's factorisation (`columns`,
    and `rows` for a matrix skip)."""
    out: dict[str, Any] = {"kind": Kind.WITNESS, "check": check, "width": width,
                           "columns": columns, **fields, "argument": _ADDED[check]}
    if rows is not None:
        out["rows"] = rows
    return out


def spare_pairs(width: int, columns: list[int], rows: list[int] | None, a: Any
                ) -> dict[str, Any]:
    return _construction(Check.SPARE_PAIRS, width, columns, rows, a=str(a))


def linear_neurons(width: int, columns: list[int], rows: list[int] | None, gamma: Any,
                   sigma_gamma: str) -> dict[str, Any]:
    return _construction(Check.LINEAR_NEURONS, width, columns, rows, gamma=str(gamma),
                         sigma_gamma=sigma_gamma)


def square_quadruples(width: int, columns: list[int], rows: list[int] | None, v: Any
                      ) -> dict[str, Any]:
    return _construction(Check.SQUARE_QUADRUPLES, width, columns, rows, v=str(v))


def square_pairs(width: int, columns: list[int], rows: list[int] | None, t: Any, k: Any
                 ) -> dict[str, Any]:
    return _construction(Check.SQUARE_PAIRS, width, columns, rows, t=str(t), k=str(k))


def doubles(width: int, a: Any, neurons: list[int], prime: int, det: int) -> dict[str, Any]:
    """The own neurons, d of them (`neurons`, rows U_Δ with det U_Δ ≡ det ≠ 0 mod `prime`)
    doubled: W = −S U_Δ⁻¹/(2a) is never stored."""
    return {"kind": Kind.WITNESS, "check": Check.DOUBLES, "width": width, "a": str(a),
            "neurons": neurons, "prime": prime, "det_mod_p": det,
            "argument": "the block's own neurons, up and down biases kept, except that each "
                        "listed neuron i gives w_i of its down column to one new neuron with up "
                        "row -u_i and up bias -b_i: (d_i - w_i) sigma(l_i) + w_i sigma(-l_i) = "
                        "d_i sigma(l_i) - 2a w_i l_i (lemma O(a)); the listed rows U_D of U "
                        "have det U_D = det_mod_p != 0 mod prime, so W = -S U_D^-1/(2a) "
                        "exists and -2a W U_D = S; the constant S U_D^-1 b_D moves into the "
                        "down bias"}
