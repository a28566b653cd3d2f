"""The Depth ≥ 2 table of docs/depth.md: what absorb_formal decides for random ReLU
stacks of depth 2–4, d = 2–4, m = 1..2d+2, with and without biases; the generic engine where it
reaches; --fit's best error on every refutation by the half-activation bound (docs/rules.md §9).

    PYTHONPATH=. .venv/bin/python benchmarks/depth_table.py            # print the table
    PYTHONPATH=. .venv/bin/python benchmarks/depth_table.py --write    # and rewrite docs/depth.md

Seeded: instance i of a row uses random.Random(hash of (bias, L, d, m, i)) weights k/20,
k ∈ [−40, 40] (uniform on [−2, 2]), biases the same; identity skip.
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from collections import Counter
from fractions import Fraction
from pathlib import Path

from absorb_formal.decide import concrete, dispatch
from absorb_formal.decide import half_activation as half
from absorb_formal.generic import engine as generic_engine
from absorb_formal.model.activations import simple
from absorb_formal.model.blocks import Block, Layer, Matrix, Skip
from absorb_formal.model.position import Pos
from absorb_formal.numeric.backends import NumpyBackend
from absorb_formal.numeric.fit import FIT_TOLERANCE, search_stack

ROOT = Path(__file__).resolve().parent.parent
PAGE = ROOT / "docs" / "depth.md"
BEGIN, END = "<!-- depth table: begin -->", "<!-- depth table: end -->"
SHORT = {half.METHOD: "§9", half.STACK_METHOD: "§9+§5", "§5 stack of per-layer witnesses": "§5",
         generic_engine.CEGIS_METHOD: "generic"}


def block(bias: bool, depth: int, d: int, m: int, index: int) -> Block:
    rng = random.Random(f"depth-table {bias} {depth} {d} {m} {index}")

    def q() -> Fraction:
        return Fraction(rng.randint(-40, 40), 20)

    layers = []
    for _ in range(depth):
        up = Matrix([tuple(q() for _ in range(d)) for _ in range(m)])
        down = Matrix([tuple(q() for _ in range(m)) for _ in range(d)])
        up_bias = tuple(q() for _ in range(m)) if bias else None
        down_bias = tuple(q() for _ in range(d)) if bias else None
        layers.append(Layer(up, down, up_bias=up_bias, down_bias=down_bias))
    return Block("B", simple("relu"), d, m, depth, Skip(d, scale=Fraction(1)),  # type: ignore[arg-type]
                 tuple(layers), Pos(1, 1), biased=bias)


def row(bias: bool, depth: int, d: int, m: int, seeds: int, fit_restarts: int) -> dict:
    own: Counter[str] = Counter()
    methods: Counter[str] = Counter()
    mins, los, his = 0, [], []
    generic: list[str] = []
    fits: list[float] = []
    start = time.perf_counter()
    for i in range(seeds):
        b = block(bias, depth, d, m, i)
        decision, _ = dispatch.concrete_decision(b, m, "theory")
        own[{True: "abs", False: "not", None: "?"}[decision.absorbable]] += 1
        if decision.absorbable is not None:
            methods[SHORT.get(decision.method, decision.method)] += 1
        found = concrete.minimal_width(b, exhaustive=False)
        if found.found:
            mins += 1
            los.append(found.value)
            his.append(found.value)
        elif found.bounds is not None:
            los.append(found.bounds[0])
            his.append(found.bounds[1])
        if not generic_engine.applies(b, 1):  # the generic engine reaches width 1 here
            both, clash = dispatch.concrete_decision(b, 1, "both")
            generic.append("CLASH" if clash else
                           {True: "abs", False: "not", None: "?"}[both.absorbable])
        if decision.absorbable is False and decision.method == half.METHOD and \
                len(fits) < 1 and fit_restarts:
            error, _ = search_stack(b, m, fit_restarts, NumpyBackend(), steps=800)
            fits.append(error)
    return {"bias": bias, "depth": depth, "d": d, "m": m, "n": seeds, "own": own,
            "methods": methods, "mins": mins, "los": los, "his": his, "generic": generic,
            "fits": fits, "seconds": time.perf_counter() - start}


def _range(values: list[int]) -> str:
    if not values:
        return "—"
    lo, hi = min(values), max(values)
    return str(lo) if lo == hi else f"{lo}–{hi}"


def markdown(rows: list[dict]) -> str:
    out = ["| bias | L | d | m | own width m: not / abs / ? | methods | min width decided | "
           "lo (2r) | hi | generic at width 1 | fit best error (width m) |",
           "|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        own = r["own"]
        methods = ", ".join(f"{k} {v}" for k, v in sorted(r["methods"].items())) or "—"
        gen = Counter(r["generic"])
        generic = ", ".join(f"{k} {v}" for k, v in sorted(gen.items())) or "—"
        fit = "—" if not r["fits"] else ", ".join(f"{e:.3g}" for e in r["fits"])
        out.append(f"| {'yes' if r['bias'] else 'no'} | {r['depth']} | {r['d']} | {r['m']} | "
                   f"{own['not']} / {own['abs']} / {own['?']} | {methods} | "
                   f"{r['mins']}/{r['n']} | {_range(r['los'])} | {_range(r['his'])} | "
                   f"{generic} | {fit} |")
    return "\n".join(out)


def summary(rows: list[dict]) -> str:
    lines = []
    for name, pick in (("m < 2d", lambda r: r["m"] < 2 * r["d"]),
                       ("m ≥ 2d", lambda r: r["m"] >= 2 * r["d"])):
        chosen = [r for r in rows if pick(r)]
        total = sum(r["n"] for r in chosen)
        decided = sum(r["own"]["not"] + r["own"]["abs"] for r in chosen)
        mins = sum(r["mins"] for r in chosen)
        lines.append(f"| {name} | {total} | {decided} ({100 * decided / total:.0f}%) | "
                     f"{mins} ({100 * mins / total:.0f}%) |")
    clashes = sum(r["generic"].count("CLASH") for r in rows)
    compared = sum(len(r["generic"]) for r in rows)
    fits = [e for r in rows for e in r["fits"]]
    reached = sum(e <= FIT_TOLERANCE for e in fits)
    seconds = sum(r["seconds"] for r in rows)
    head = ["| instances | n | decided at own width | min width decided |", "|---|---|---|---|"]
    tail = [f"Generic engine (`--engine both`) compared on {compared} instances: "
            f"{clashes} disagreements. `--fit` on the first §9 refutation of each of "
            f"{len(fits)} rows: best errors "
            f"{min(fits):.3g} to {max(fits):.3g}, {reached} within the tolerance "
            f"{FIT_TOLERANCE:g}." if fits else "", f"Total time {seconds:.0f} s."]
    return "\n".join(head + lines) + "\n\n" + "\n".join(tail)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=4, help="instances per row (default 4)")
    parser.add_argument("--fit-restarts", type=int, default=4)
    parser.add_argument("--write", action="store_true", help="rewrite the table in " + str(PAGE))
    parser.add_argument("--depths", default="2,3,4")
    parser.add_argument("--dims", default="2,3,4")
    parser.add_argument("--bias", choices=("no", "yes", "both"), default="both",
                        help="stacks without biases, with, or both (default)")
    args = parser.parse_args(argv)
    rows = []
    for bias in {"no": (False,), "yes": (True,), "both": (False, True)}[args.bias]:
        for depth in map(int, args.depths.split(",")):
            for d in map(int, args.dims.split(",")):
                for m in range(1, 2 * d + 3):
                    rows.append(row(bias, depth, d, m, args.seeds, args.fit_restarts))
                    print(markdown([rows[-1]]).splitlines()[-1], file=sys.stderr, flush=True)
    text = summary(rows) + "\n\n" + markdown(rows)
    print(text)
    if args.write:
        page = PAGE.read_text(encoding="utf-8")
        before, _, rest = page.partition(BEGIN)
        _, _, after = rest.partition(END)
        PAGE.write_text(f"{before}{BEGIN}\n{text}\n{END}{after}", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
