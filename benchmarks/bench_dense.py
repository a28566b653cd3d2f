"""The dense subset regime: relu blocks with many more neurons than the
d² equations of Σ_{i∈J} d_i u_iᵀ = −S/(2a), decided at their own width.

Seeded instances (weights as in instances.py: numerators in [−9, 9], denominators 1..4; or,
with --integers, non-zero integers in ±1..9):
- planted: S = −2a·Σ_{i∈J} d_i u_iᵀ for a random J of K neurons (absorbable by construction);
- near: the planted S with one entry moved by 10⁻⁶ (not absorbable: no subset reaches it);
- random: S = I (absorbable or not, nobody knows in advance; the tool must say which, with a
  certificate, or unknown).

Run: python -m benchmarks.bench_dense [--timeout 60] [--seeds 2] [SIZE ...], SIZE as d,m,K
(default: 4,96,9 and 8,256,11, the sizes the issue names). Prints one line per instance: the
answer, the seconds, and the certificate (or the reason).
"""

from __future__ import annotations

import argparse
import random
import time
from fractions import Fraction

from absorb_formal.decide import budget, lattice, subset
from absorb_formal.decide.concrete import at_width
from absorb_formal.decide.decision import Decision
from absorb_formal.model import activations as acts
from absorb_formal.model import linalg
from absorb_formal.model.blocks import Block, Layer, Matrix, Skip
from absorb_formal.model.position import Pos
from benchmarks.instances import A, subset_terms, weights

SIZES = ((4, 96, 9), (8, 256, 11))
KINDS = ("planted", "near", "random")


def dense_block(d: int, m: int, k: int, seed: int, kind: str, integers: bool = False
                ) -> Block:
    rng = random.Random(f"dense/{d}/{m}/{k}/{seed}" + ("/int" if integers else ""))
    if integers:  # non-zero integers in ±1..9, as in specs/large/make_weights.py
        entry = lambda: Fraction(rng.choice([-1, 1]) * rng.randint(1, 9))  # noqa: E731
        up = [[entry() for _ in range(d)] for _ in range(m)]
        down = [[entry() for _ in range(m)] for _ in range(d)]
    else:
        up, down = weights(d, m, rng)
    skip = Skip(d, scale=Fraction(1))
    if kind != "random":
        s = linalg.zeros(d, d)
        terms = subset_terms(up, down)
        for i in rng.sample(range(m), k):
            s = linalg.add(s, terms[i], -2 * A)
        if kind == "near":
            s = tuple(tuple(x + (Fraction(1, 10**6) if (r, c) == (0, 0) else 0)
                            for c, x in enumerate(row)) for r, row in enumerate(s))
        skip = Skip(d, matrix=Matrix(s))
    return Block("B", acts.simple("relu"), d, m, 1, skip, (Layer(Matrix(up), Matrix(down)),),
                 Pos(1, 1))


def summary(decision) -> str:  # noqa: ANN001 - a Decision
    if decision.absorbable is None:
        return decision.reason
    cert = decision.certificate or {}
    cases = cert.get("cases") or []
    refutation = cases[0].get("refutation", {}) if cases else cert
    how = refutation.get("method") or refutation.get("kind") or cert.get("kind")
    return f"{cert.get('kind')}: {how} {decision.detail}".strip()


class _Seen:
    """Which dense-regime step answered (the benchmark's instrumentation of lattice.py and of
    subset.py's CP-SAT tries)."""

    def __init__(self) -> None:
        self.lll: str = ""
        self.cpsat: list[str] = []
        real_find = lattice.find
        real_cpsat = subset._cpsat

        def cpsat(*args, **kwargs):  # noqa: ANN002, ANN003, ANN202
            started = time.perf_counter()
            answer = real_cpsat(*args, **kwargs)
            which = ("nearest" if kwargs.get("nearest") is not None
                     else "first" if kwargs.get("deterministic") is not None else "last")
            self.cpsat.append(f"CP-SAT {which}: {answer.status} "
                              f"{time.perf_counter() - started:.1f} s")
            return answer

        def find(*args, **kwargs):  # noqa: ANN002, ANN003, ANN202
            started = time.perf_counter()
            found = real_find(*args, **kwargs)
            took = time.perf_counter() - started
            self.lll = (f"LLL not tried (m > {lattice.MAX_TERMS})"
                        if args[1] > lattice.MAX_TERMS else
                        f"LLL {'found J' if found else 'found nothing'} in {took:.1f} s")
            return found

        lattice.find = find  # type: ignore[assignment]
        subset._cpsat = cpsat  # type: ignore[assignment]

    def reset(self) -> str:
        said = "; ".join(x for x in (*self.cpsat, self.lll) if x)
        self.lll, self.cpsat = "", []
        return said


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--timeout", type=float, default=60.0)
    parser.add_argument("--seeds", type=int, default=2)
    parser.add_argument("--kinds", default=",".join(KINDS))
    parser.add_argument("--integers", action="store_true",
                        help="integer weights in ±1..9 instead of small fractions")
    parser.add_argument("sizes", nargs="*")
    args = parser.parse_args()
    sizes = [tuple(int(x) for x in s.split(",")) for s in args.sizes] or list(SIZES)
    seen = _Seen()
    for d, m, k in sizes:
        for kind in args.kinds.split(","):
            for seed in range(args.seeds):
                block = dense_block(d, m, k, seed, kind, args.integers)
                start = time.perf_counter()
                try:
                    with budget.limit(args.timeout):
                        decision = at_width(block, m)
                except budget.ClaimTimeout:
                    decision = Decision(None, reason=f"timeout after {args.timeout:g} s")
                took = time.perf_counter() - start
                answer = {True: "absorbable", False: "not absorbable", None: "unknown"}[
                    decision.absorbable]
                weights_ = "integer" if args.integers else "fraction"
                print(f"relu d={d} m={m} |J|={k} {weights_} {kind} seed={seed}: {answer} in "
                      f"{took:.1f} s [{summary(decision)}] ({seen.reset() or 'no solver'})",
                      flush=True)


if __name__ == "__main__":
    main()


def spec_text(block: Block, claim: str) -> str:
    """The block as a `.mlp` block with literal weights, and one claim line after it."""
    layer = block.layers[0]

    def literal(rows) -> str:  # noqa: ANN001 - exact rows
        return "[" + ", ".join("[" + ", ".join(str(x) for x in row) + "]" for row in rows) + "]"

    return (f"block {block.name} {{\n    activation relu\n"
            f"    dim {block.dim}  width {block.width}\n"
            f"    skip {literal(block.skip.rows())}\n    up   = {literal(layer.up.rows)}\n"
            f"    down = {literal(layer.down.rows)}\n}}\n{claim}\n")
