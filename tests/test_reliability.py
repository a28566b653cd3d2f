"""Reliability: hostile input, time budgets, Ctrl-C, determinism, and soundness under fuzzing.

The fast tier runs in CI; `HYPOTHESIS_PROFILE=long pytest tests/test_reliability.py` runs the
property tests with many more examples (see tests/conftest.py).
"""

from __future__ import annotations

import itertools
import random
import time
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from absorb_formal import activations as acts
from absorb_formal import linalg
from absorb_formal.decide import concrete, families
from absorb_formal.model import Block, Layer, Matrix, Skip
from absorb_formal.position import Pos
from absorb_formal.properties import properties

from .conftest import CORPUS, example_files

ERROR_LINE = r"^.+:\d+:\d+: error: .+$"

# ---- hostile specs -----------------------------------------------------------------------


def test_a_million_digit_number_is_refused_quickly(cli, write_spec):
    start = time.perf_counter()
    run = cli(write_spec("block R { activation leaky_relu(" + "7" * 10**6 + ") dim 1 width 1 }"))
    assert run.code == 2 and "significant digits" in run.err and ":1:33: error:" in run.err
    assert time.perf_counter() - start < 10


def test_a_huge_file_is_refused_before_parsing(cli, tmp_path):
    path = tmp_path / "big.mlp"
    path.write_text("# padding\n" * 1_100_000)  # 11 MB
    run = cli(path)
    assert run.code == 2 and ":1:1: error:" in run.err and "use load(" in run.err


def test_random_bytes_mutating_the_corpus_never_crash(cli, tmp_path):
    rng = random.Random(0)
    sources = [p.read_bytes() for p in example_files()]
    for trial in range(60):
        data = bytearray(rng.choice(sources))
        for _ in range(rng.randint(1, 5)):
            i = rng.randrange(len(data) + 1)
            choice = rng.random()
            if choice < 0.4:
                data[i:i] = bytes(rng.randrange(256) for _ in range(rng.randint(1, 4)))
            elif choice < 0.7:
                del data[i:i + rng.randint(1, 8)]
            else:
                data[i:i] = rng.choice([b"\x00", b"\xff\xfe", b"[" * 50, b"9" * 5000, b"/0"])
        path = tmp_path / f"m{trial}.mlp"
        path.write_bytes(bytes(data))
        run = cli("--crosscheck", "500", path)
        assert run.code in (0, 1, 2, 3), run
        assert "Traceback" not in run.out + run.err
        if run.code == 2:
            import re

            assert re.match(ERROR_LINE, run.err.splitlines()[0])


def test_huge_families_are_decided_without_matrices(cli, write_spec):
    spec = write_spec("""block R { activation relu dim 1000000 width 4000000 }
block W { activation swiglu dim 1000000 width 4000000 depth 64 }
block T { activation tanh dim 1000000 width 3 skip [[1]] }
claim R is sometimes absorbable
claim R is generically not absorbable
claim W is never absorbable
query R
""".replace("skip [[1]]", "skip 2"))
    start = time.perf_counter()
    run = cli(spec)
    assert run.code == 0, run.out
    assert time.perf_counter() - start < 10


def test_concrete_blocks_too_large_for_exact_work_are_refused_with_advice(cli, tmp_path):
    rng = np.random.default_rng(0)
    up = rng.normal(size=(400, 400)).astype(np.float32)
    up[1] = 2 * up[0]  # exact in float32: two neurons on one key, not the generic case
    np.savez(tmp_path / "w.npz", up=up, down=rng.normal(size=(400, 400)).astype(np.float32),
             gate=rng.normal(size=(400, 400)).astype(np.float32))
    spec = tmp_path / "big.mlp"
    spec.write_text("""block R { activation relu dim 400 width 400
  up = load("w.npz", "up") down = load("w.npz", "down") }
block W { activation swiglu dim 400 width 400
  gate = load("w.npz", "gate") up = load("w.npz", "up") down = load("w.npz", "down") }
claim R is not absorbable   # expect: unknown
claim W is not absorbable
""")
    run = cli("--expect", spec)
    assert run.code == 0, run.out + run.err
    assert "limited to 250000: decide a smaller block, or state the claim about the family" \
        in run.out
    assert "T4 flatness" in run.out


# ---- time budgets and interruption -------------------------------------------------------


def test_a_claim_that_runs_out_of_time_is_unknown_and_the_rest_still_run(cli, write_spec,
                                                                        monkeypatch):
    import absorb_formal.cli as cli_module

    real = cli_module.decide

    def slow_first(spec, statement, *engine):
        if statement.pos.line == 2:
            time.sleep(30)
        return real(spec, statement, *engine)

    monkeypatch.setattr(cli_module, "decide", slow_first)
    path = write_spec("block F { activation relu^2 dim 2 width 2 }\n"
                      "claim F is never absorbable\nclaim F is never absorbable\n")
    start = time.perf_counter()
    run = cli("--timeout", "0.5", path)
    assert time.perf_counter() - start < 10
    lines = run.out.splitlines()
    assert "unknown: F is never absorbable — timeout after 0.5 s" in lines[0]
    assert ": proved: F is never absorbable" in lines[1]
    assert run.code == 3


def test_ctrl_c_prints_what_was_decided_and_exits_130(cli, write_spec, monkeypatch):
    import absorb_formal.cli as cli_module

    real = cli_module.decide

    def interrupted(spec, statement, *engine):
        if statement.pos.line == 3:
            raise KeyboardInterrupt
        return real(spec, statement, *engine)

    monkeypatch.setattr(cli_module, "decide", interrupted)
    path = write_spec("block F { activation relu^2 dim 2 width 2 }\n"
                      "claim F is never absorbable\nclaim F is never absorbable\n")
    run = cli(path)
    assert run.code == 130
    assert ": proved: F is never absorbable" in run.out and "summary:" in run.out
    assert "interrupted" in run.err


# ---- determinism -------------------------------------------------------------------------


def test_output_is_byte_identical_across_runs_and_with_parallel_jobs(cli):
    args = ["--json", "--no-timing", "--crosscheck", "1000", CORPUS]
    first, second = cli(*args).out, cli(*args).out
    parallel = cli("-j", "2", *args).out
    assert first == second == parallel
    text = [cli("--crosscheck", "1000", CORPUS / "paper").out for _ in range(2)]
    assert text[0] == text[1]


# ---- soundness under fuzzing: blocks whose truth is known by construction -------------------

RIDGE = [acts.simple("relu"), acts.leaky_relu(Fraction(1, 3)), acts.simple("gelu"),
         acts.simple("silu"), acts.simple("gelu_tanh")]
NEVER = ["relu^2", "relu^3", "square", "abs", "tanh", "sigmoid", "swiglu", "geglu", "reglu",
         "bilinear"]
small = st.integers(-3, 3).map(Fraction)
FUZZ = settings(deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _matrix(draw, rows, cols):
    return [[draw(small) for _ in range(cols)] for _ in range(rows)]


def _block(activation, up, down, skip_rows, gate=None, depth=1):
    d, m = len(up[0]), len(up)
    layer = Layer(Matrix(up), Matrix(down), Matrix(gate) if gate is not None else None)
    skip = Skip(d, matrix=Matrix(skip_rows))
    return Block("B", activation, d, m, depth, skip, (layer,) * depth, Pos(1, 1))


def _named(name):
    return acts.relu_power(int(name[-1])) if name.startswith("relu^") else acts.simple(name)


def _random_block(draw, name, skip):
    """A random small concrete block of the named activation; skip(d, d) gives S."""
    activation = _named(name)
    d, m = draw(st.integers(1, 3)), draw(st.integers(1, 4))
    gate = _matrix(draw, m, d) if activation.gated else None
    return _block(activation, _matrix(draw, m, d), _matrix(draw, d, m), skip(d, d), gate)


def _planted_skip(draw, activation, up, down):
    """S = −2a Σ_{i∈J} d_i u_iᵀ for a random J: J is then a valid index set (MATH.md §4)."""
    a = properties(activation).odd_linear
    d = len(down)
    skip = linalg.zeros(d, d)
    for i in range(len(up)):
        if draw(st.booleans()):
            skip = linalg.add(skip, linalg.outer([r[i] for r in down], up[i]), -2 * a)
    return skip


def _subset_sum(block, scale):
    """Every Σ_J d_i u_iᵀ·scale, by enumeration (the ground truth of the generic case)."""
    layer = block.layers[0]
    sums = set()
    for r in range(block.width + 1):
        for chosen in itertools.combinations(range(block.width), r):
            total = linalg.zeros(block.dim, block.dim)
            for i in chosen:
                total = linalg.add(total, linalg.outer(layer.down.column(i), layer.up.rows[i]),
                                   scale)
            sums.add(total)
    return sums


@FUZZ
@given(st.data())
def test_planted_absorbable_blocks_are_never_refuted(data):
    activation = data.draw(st.sampled_from(RIDGE))
    d, m = data.draw(st.integers(1, 3)), data.draw(st.integers(1, 5))
    up, down = _matrix(data.draw, m, d), _matrix(data.draw, d, m)
    block = _block(activation, up, down, _planted_skip(data.draw, activation, up, down))
    assert concrete.at_width(block, m).absorbable is True
    assert concrete.minimal_width(block).value <= m


@FUZZ
@given(st.data())
def test_plain_blocks_absorb_themselves_for_every_activation(data):
    name = data.draw(st.sampled_from([*NEVER, "relu", "gelu", "glu", "identity"]))
    block = _random_block(data.draw, name, linalg.zeros)
    m = block.width
    assert concrete.at_width(block, m + data.draw(st.integers(0, 2))).absorbable is True


@FUZZ
@given(st.data())
def test_perturbed_generic_blocks_match_the_papers_condition(data):
    """A planted block, its skip moved by a tiny rational: the truth is known by enumerating
    every index set (generic blocks: each neuron alone on its key)."""
    activation = data.draw(st.sampled_from(RIDGE))
    d, m = data.draw(st.integers(2, 3)), data.draw(st.integers(1, 4))
    up, down = _matrix(data.draw, m, d), _matrix(data.draw, d, m)
    a = properties(activation).odd_linear
    skip = _planted_skip(data.draw, activation, up, down)
    bump = [[Fraction(data.draw(st.integers(-1, 1)), 10**6) for _ in range(d)] for _ in range(d)]
    block = _block(activation, up, down, linalg.add(skip, bump))
    from absorb_formal.decide.canonical import canonical_form

    if canonical_form(block).p != m:
        return  # merged or dead neurons: not the generic case
    truth = block.skip.rows() in {tuple(tuple(-x for x in r) for r in s)
                                  for s in _subset_sum(block, 2 * a)}
    assert concrete.at_width(block, m).absorbable is truth


@FUZZ
@given(st.sampled_from(NEVER), st.integers(1, 4), st.integers(1, 6), st.integers(1, 3),
       st.integers(-2, 2).filter(bool))
def test_never_families_are_never_called_absorbable(name, d, m, depth, scale):
    block = Block("F", _named(name), d, m, depth, Skip(d, scale=Fraction(scale)), None,
                  Pos(1, 1))
    for modality, wrong in (("sometimes", True), ("always", True), ("never", False)):
        decision = families.decide(block, modality, m)
        assert decision.absorbable is not wrong, (name, modality)


@FUZZ
@given(st.data())
def test_never_activations_concrete_blocks_are_never_called_absorbable(data):
    block = _random_block(data.draw, data.draw(st.sampled_from(NEVER)),
                          lambda d, _: linalg.identity(d))
    assert concrete.at_width(block, data.draw(st.integers(1, 8))).absorbable is not True


@pytest.mark.parametrize("path", sorted(CORPUS.rglob("*.mlp"))[:3])
def test_certificates_are_written_atomically(cli, tmp_path, path):
    out = tmp_path / "out"
    assert cli("--certificates", out, "--crosscheck", "0", path).code in (0, 1, 3)
    assert not [p for p in out.rglob("*") if p.name.endswith(".tmp")]


def test_certificates_of_huge_blocks_carry_their_sources_not_the_weights(cli, tmp_path,
                                                                         monkeypatch):
    monkeypatch.chdir(tmp_path)
    rng = np.random.default_rng(1)
    arrays = {k: rng.normal(size=(400, 400)).astype(np.float32) for k in ("g", "u", "d")}
    np.savez("w.npz", **arrays)
    spec = tmp_path / "w.mlp"
    spec.write_text("""block W { activation swiglu dim 400 width 400
  gate = load("w.npz", "g") up = load("w.npz", "u") down = load("w.npz", "d") }
claim W is not absorbable
""")
    assert cli("--crosscheck", "0", "--certificates", "out", "w.mlp").code == 0
    stored = tmp_path / "out" / "w.mlp.3.json"
    assert stored.stat().st_size < 5000
    assert '"sha256"' in stored.read_text() and '"sources"' in stored.read_text()
    assert cli("check", "out").code == 0
    arrays["u"][0, 0] += 1
    np.savez("w.npz", **arrays)
    run = cli("check", "out")
    assert run.code == 1 and "stale" in run.out and "'w.npz' changed" in run.out
