"""The generic engine with biases (docs/rules.md §8.4): the comparator's biases are more unknowns;
its verdicts are checked independently — witnesses by exact evaluation at random rational
points, refutations by the checker — and a biased block is never encoded with a box."""

from __future__ import annotations

import random
from collections import Counter
from fractions import Fraction
from pathlib import Path

import pytest

from absorb_formal.certify import documents as proofs
from absorb_formal.checker.dispatch import verify
from absorb_formal.decide import decide
from absorb_formal.generic import cegis, engine
from absorb_formal.language import load_text
from absorb_formal.language.load import load_file
from absorb_formal.model.blocks import Block, Skip
from absorb_formal.model.result import PROVED, REFUTED

F = Fraction
BOX = "(assert (<= (- 1) "  # the text of a box constraint, on rows or on points


def _spec(activation: str, skip: int, up: list[int], bias: list[int], down: list[int],
          c: int, width: int, folder: Path):
    def vector(values: list) -> str:
        return f"[{', '.join(str(F(v)) for v in values)}]"

    text = (f"block B {{\n activation {activation}\n dim 1  width {len(up)}\n bias\n"
            f" skip {skip}\n up = [{', '.join(f'[{u}]' for u in up)}]\n"
            f" up_bias = {vector(bias)}\n down = [{vector(down)}]\n down_bias = [{c}]\n}}\n"
            f"claim B is absorbable at width {width}\n")
    spec_file = folder / "s.mlp"
    spec_file.write_text(text, encoding="utf-8")
    return load_file(spec_file), spec_file


def _document(spec, spec_file: Path):
    """The generic engine's result for the spec's claim, and its certificate document."""
    claim = spec.statements[0]
    result = decide(spec, claim, engine="generic")
    doc = proofs.document(spec, claim, result, spec_file, spec_file.parent / "c" / "x.json")
    return result, doc


def _plain(block: Block, layers) -> Block:
    """The witness as a plain biased block (skip none), for exact evaluation."""
    return Block("P", block.activation, block.dim, len(layers[0].up.rows), block.depth,
                 Skip(block.dim, scale=F(0)), tuple(layers), block.pos, biased=True)


def _agrees_at_random_points(block: Block, witness, rng: random.Random) -> bool:
    plain = _plain(block, witness)
    points = [(F(rng.randint(-40, 40), rng.randint(1, 7)),) for _ in range(25)]
    return all(plain.evaluate_exact(p) == block.evaluate_exact(p) for p in points)


def _parabola(skip, up, bias, down, c) -> tuple[Fraction, Fraction]:
    """(a, b) of x ↦ s x + Σ d_i (u_i x + β_i)² + c = a x² + b x + c0."""
    a = sum((F(d) * u * u for d, u in zip(down, up, strict=True)), F(0))
    b = skip + sum((2 * F(d) * u * β for d, u, β in zip(down, up, bias, strict=True)), F(0))
    return a, b


@pytest.mark.parametrize("activation", ["relu", "abs", "square"])  # relu²: R2 below
def test_random_biased_blocks_independently_checked(tmp_path, activation):
    rng = random.Random(f"bias-generic-{activation}")
    seen: Counter[str] = Counter()
    for trial in range(6):
        m = rng.randint(1, 2)
        up = [rng.choice([-2, -1, 1, 2]) for _ in range(m)]
        bias = [rng.randint(-2, 2) for _ in range(m)]
        down = [rng.choice([-2, -1, F(1, 2), 1]) for _ in range(m)]
        skip, c, width = rng.randint(-1, 2), rng.randint(-2, 2), rng.randint(1, 2)
        if activation == "square" and trial == 0:  # a = 0, b != 0: one neuron cannot
            up, bias, down, skip, width = [1, 1], [1, -1], [1, -1], 2, 1
        folder = tmp_path / f"{trial}"
        folder.mkdir()
        spec, spec_file = _spec(activation, skip, up, bias, down, c, width, folder)
        result, doc = _document(spec, spec_file)
        block = spec.blocks["B"]
        if result.outcome not in (PROVED, REFUTED):
            seen["unknown"] += 1
            continue
        cert = result.certificate
        assert verify(doc).status == "valid", (trial, verify(doc).reason)
        if result.outcome == PROVED:
            seen["absorbable"] += 1
            assert cert["kind"] == "witness"
            assert all(set(layer) == {"up", "down", "up_bias", "down_bias"}
                       for layer in cert["layers"])
            stack = engine.at_width(block, width).witness
            if stack is not None:  # rational: exact values at points the solver never saw
                assert _agrees_at_random_points(block, stack, rng)
        else:
            seen["not absorbable"] += 1
            assert BOX not in cert.get("smtlib", ""), "a biased block is never boxed"
        if activation == "square" and width == 1:  # the parabola rule (docs/rules.md §8.3)
            a, b = _parabola(skip, up, bias, down, c)
            assert (result.outcome == PROVED) == (a != 0 or b == 0), (up, bias, down, skip)
    assert seen["absorbable"] + seen["not absorbable"] >= 4, seen


def test_both_answers_over_the_random_blocks(tmp_path):
    """Across small relu / square blocks at width 1 the engine says yes and no."""
    seen = set()
    for activation, up, bias, down in [("square", [1, 2], [1, -1], [3, F(-1, 2)]),
                                       ("square", [1, 1], [1, -1], [1, -1]),
                                       ("relu", [1], [2], [3]),
                                       ("relu", [1, 2], [1, -1], [3, F(-1, 2)])]:
        folder = tmp_path / f"{len(seen)}{activation}{len(up)}{bias[0]}{down[0]}"
        folder.mkdir()
        spec, spec_file = _spec(activation, 2 if activation == "square" else 0, up, bias,
                                down, 5, 1, folder)
        result, doc = _document(spec, spec_file)
        assert verify(doc).status == "valid"
        seen.add(result.outcome)
    assert seen == {PROVED, REFUTED}


def test_generic_engine_proves_biased_relu_square_absorbable_at_width_2_not_its_bias_free_twin(
        tmp_path):
    r2 = ("block R2 {\n activation relu^2\n dim 1  width 2\n bias\n up = [[1], [1]]\n"
          " up_bias = [1, -1]\n down = [[-1/4, 1/4]]\n}\n")
    spec = load_text(r2 + "claim R2 is absorbable\nclaim min width of R2 is 2\n",
                     "s.mlp", tmp_path)
    assert [decide(spec, s, engine="generic").outcome for s in spec.statements] == \
        [PROVED, PROVED]
    free = r2.replace(" bias\n", "").replace(" up_bias = [1, -1]\n", "")
    spec = load_text(free + "claim R2 is absorbable\n", "t.mlp", tmp_path)
    assert decide(spec, spec.statements[0], engine="generic").outcome == REFUTED


def test_the_box_trap_verification_sees_points_outside_the_box(tmp_path):
    """B(x) = relu(x − 2) agrees with P = 0 on [−1, 1]: only an unboxed query finds x > 2."""
    import z3

    spec, _ = _spec("relu", 0, [1], [-2], [1], 0, 1, tmp_path)
    block = spec.blocks["B"]
    zero = [{"up": [["0"]], "up_bias": ["0"], "down": [["0"]], "down_bias": ["0"]}]
    text = cegis.verification_text(block, zero)
    assert BOX not in text
    solver = z3.Solver()
    solver.from_string(text)
    assert solver.check() == z3.sat  # a point where P differs from B exists (x > 2)
    assert BOX not in cegis.synthesis_text(block, 1, [(F(1),), (F(3),)])


def test_the_checker_refuses_a_boxed_encoding_of_a_biased_block(tmp_path):
    # skip 0 here: B = −¼relu²(x+1) + ¼relu²(x−1) needs two neurons
    spec, spec_file = _spec("relu^2", 0, [1, 1], [1, -1], [F(-1, 4), F(1, 4)], 0, 1, tmp_path)
    result, doc = _document(spec, spec_file)
    assert result.outcome == REFUTED and doc["certificate"]["kind"] == "finite point set"
    assert verify(doc).status == "valid"
    text = doc["certificate"]["smtlib"]
    first = next(line for line in text.splitlines() if line.startswith("(assert"))
    boxed = text.replace(first, "(assert (<= (- 1) u0_0_0 1))\n" + first, 1)
    doc["certificate"]["smtlib"] = boxed
    verdict = verify(doc)
    assert verdict.status == "invalid" and "own encoding" in verdict.reason


def test_unknowns_are_counted_with_the_biases(tmp_path):
    """relu, d = 1, width 3: 6 weights fit the limit, 6 + 3 + 1 with biases do not."""
    spec, _ = _spec("relu", 1, [1, 2, 3], [0, 0, 0], [1, 1, 1], 0, 3, tmp_path)
    assert "too many unknowns" in engine.applies(spec.blocks["B"], 3)
    free = load_text("block B { activation relu dim 1 width 3 up = [[1], [2], [3]]"
                     " down = [[1, 1, 1]] }\n", "f.mlp", tmp_path).blocks["B"]
    assert engine.applies(free, 3) == ""


# ---- differential: theory (§8.1, §8.2) against the generic engine (§8.4) ---------------------

@pytest.mark.parametrize("activation", ["relu", "leaky_relu(1/2)"])
def test_theory_and_generic_engine_agree_on_small_biased_blocks(activation, tmp_path):
    """Random d = 1 biased blocks of width 2 (half planted: a skip that flipping both neurons
    cancels, §8.1), decided by §8.1's width search and by the generic engine (§8.4) at widths
    1 and 2: wherever both answer they agree, and both answers occur. (relu² against the
    generic engine: the corpus, `absorb-prove --engine both specs/biases`; too slow here.)"""
    from absorb_formal.decide import concrete

    seen: Counter[str] = Counter()
    for width, case in [(w, c) for w in (1, 2) for c in range(6 if w == 1 else 4)]:
        rng = random.Random(f"differential/{activation}/{width}/{case}")
        up = [rng.choice([-2, -1, 1, 2]) for _ in range(2)]
        bias = [rng.randint(-3, 3) for _ in range(2)]
        down = [F(rng.randint(-4, 4) or 1, rng.choice([1, 2, 4])) for _ in range(2)]
        skip = rng.randint(-2, 2) or 1
        if case % 2:  # §8.1 planted: S = −2a Σ d_i u_i (J = both)
            a = F(3, 4) if activation.startswith("leaky") else F(1, 2)
            skip = -2 * a * sum(d * u for d, u in zip(down, up, strict=True))
        if skip == 0:
            continue
        spec, _ = _spec(activation, skip, up, bias, down, rng.randint(-2, 2), width, tmp_path)
        block = spec.blocks["B"]
        theory = concrete.at_width(block, width)
        generic = engine.at_width(block, width)
        if theory.absorbable is None or generic.absorbable is None:
            seen["one unknown"] += 1
            continue
        assert theory.absorbable == generic.absorbable, (activation, up, bias, down, skip)
        seen["both absorbable" if theory.absorbable else "both not"] += 1
    assert seen["both absorbable"] >= 1 and seen["both not"] >= 1, seen
