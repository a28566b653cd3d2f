"""Numeric cross-checks (float64): witnesses against blocks, sanity figures, --fit, backends."""

from __future__ import annotations

import copy
import math
import subprocess
import sys
from fractions import Fraction

import numpy as np
import pytest

from absorb_formal.decide import decide
from absorb_formal.language import load_file, load_text
from absorb_formal.model.activations import _erf
from absorb_formal.model.result import ERROR
from absorb_formal.numeric.attach import Options, attach
from absorb_formal.numeric.backends import BackendError, NumpyBackend, backend
from absorb_formal.numeric.crosscheck import MIN_POINTS, crosscheck
from absorb_formal.numeric.fit import derivative, search
from absorb_formal.numeric.floatblock import from_block
from absorb_formal.numeric.points import batches

from ..conftest import CORPUS, ROOT

NUMPY = NumpyBackend()


def test_erf_matches_the_standard_library():
    x = np.concatenate([np.linspace(-9, 9, 20001), np.geomspace(1e-300, 0.6, 2000)])
    want = np.array([math.erf(v) for v in x])
    assert np.allclose(_erf(x), want, rtol=1e-15, atol=3e-16)


def test_points_cover_the_kinks():
    normal = np.array([1.0, -2.0])
    x = np.concatenate(list(batches(2, [normal], 10_000)))
    on_kink = np.abs(x @ normal) <= 1e-9 * (1 + np.linalg.norm(x, axis=1))
    assert len(x) == 10_000 and 0.05 < on_kink.mean() < 0.5
    assert x.std() > 10  # several scales


def _spec_block(text: str, name: str = "R"):
    spec = load_text(text, "t.mlp", CORPUS)
    return spec, spec.blocks[name]


ABSORBABLE = """block R { activation relu dim 2 width 3
  up = [[1, 0], [0, 1], [1, 1]]  down = [[-1, 0, 7/10], [0, -1, 3/10]] }
claim R is absorbable
"""


def test_a_wrong_witness_is_an_internal_error_and_exit_4(monkeypatch, cli, write_spec):
    spec, block = _spec_block(ABSORBABLE)
    result = decide(spec, spec.statements[0])
    broken = copy.deepcopy(result.certificate)
    broken["layers"][0]["down"][0][2] = "1"
    bad = attach(block, type(result)(**{**result.__dict__, "certificate": broken}),
                 Options(2000, NUMPY), 3)
    assert bad.outcome == ERROR and "INTERNAL ERROR" in bad.reason
    import absorb_formal.decide.dispatch as dispatch

    real = dispatch.decide

    def corrupted(spec, statement, *engine):
        found = real(spec, statement, *engine)
        return type(found)(**{**found.__dict__, "certificate": broken})

    monkeypatch.setattr("absorb_formal.api.decide", corrupted)  # the CLI decides through the API
    run = cli("--crosscheck", "2000", write_spec(ABSORBABLE))
    assert run.code == 4 and "INTERNAL ERROR" in run.out


def test_refutations_get_float_sanity_figures(cli):
    doc = cli("--json", "--crosscheck", "1000", CORPUS / "never" / "homogeneous.mlp",
              CORPUS / "never" / "flat.mlp", CORPUS / "examples").json()
    kinds = {r["sanity"]["kind"]: r["sanity"] for f in doc["files"] for r in f["results"]
             if "sanity" in r}
    assert kinds["homogeneity point"]["violation"] > 0
    assert kinds["lemma + direction"]["B_t_e_over_t"] > 0.1
    assert kinds["separating functional"]["min_abs_Y_dot_T"] > 0


def test_crosscheck_off(cli):
    doc = cli("--json", "--crosscheck", "0", CORPUS / "examples" / "relu_absorbable.mlp").json()
    assert all("crosscheck" not in r for r in doc["files"][0]["results"])


@pytest.mark.parametrize("name", ["relu", "gelu", "gelu_tanh", "silu", "tanh", "sigmoid",
                                  "abs", "square", "identity"])
def test_derivatives_match_finite_differences(name):
    from absorb_formal.model import activations as acts

    scalar = acts.simple(name).scalar
    z = np.linspace(-4, 4, 81) + 0.0123  # avoid the kink at 0
    h = 1e-6
    numeric = (scalar.numpy(z + h) - scalar.numpy(z - h)) / (2 * h)
    assert np.allclose(derivative(scalar, z), numeric, atol=1e-6)


def test_fit_finds_a_planted_witness_and_respects_a_refutation():
    _, block = _spec_block(ABSORBABLE)
    error, _ = search(block, 3, restarts=6, engine=NUMPY)
    assert error <= 1e-6
    spec = load_file(CORPUS / "paper" / "relu_gelu_theorem.mlp")
    perturbed = spec.blocks["R2p"]
    error, runs = search(perturbed, 3, restarts=2, engine=NUMPY)
    assert error > 1e-6 and runs == 2


def test_fit_reports_in_json(cli, write_spec):
    doc = cli("--json", "--fit", "--fit-restarts", "2", "--crosscheck", "1000",
              write_spec(ABSORBABLE)).json()
    report = doc["files"][0]["results"][0]["fit"]
    assert report["width"] == 3 and report["restarts"] <= 2 and "best_error" in report


def test_device_cuda_needs_torch_backend(cli, write_spec):
    run = cli("--device", "cuda", write_spec(ABSORBABLE))
    assert run.code == 2 and "needs --backend torch" in run.err


def test_missing_torch_is_a_clear_error(cli, write_spec, monkeypatch):
    monkeypatch.setitem(sys.modules, "torch", None)
    with pytest.raises(BackendError, match="needs torch"):
        backend("torch", "auto")
    run = cli("--backend", "torch", write_spec(ABSORBABLE))
    assert run.code == 2 and "needs torch" in run.err


def test_torch_backend_agrees_with_numpy():
    pytest.importorskip("torch", reason="torch is an optional extra: pip install "
                                        "'absorb_formal[torch]'")
    engine = backend("torch", "cpu")
    rng = np.random.default_rng(0)
    for path in sorted(CORPUS.rglob("*.mlp")):
        for block in load_file(path).blocks.values():
            if not block.is_concrete:
                continue
            fb = from_block(block)
            x = rng.normal(size=(257, block.dim)) * 3
            # Summed in another order, each output may differ by a few eps times the size
            # of what it sums (corpus blocks reach d = 100, m = 1260: outputs ~1e5 that
            # differ in the 10th decimal), not relative to the output, which may cancel.
            want, size = NUMPY.evaluate_scaled(fb, x)
            error = np.abs(engine.evaluate(fb, x) - want)
            assert (error <= 1e-12 * size + 1e-12).all(), (path, block.name, error.max())


def test_torch_backend_on_weights_read_from_a_file(tmp_path):
    """Weights loaded from a file are read-only arrays; torch warned on them, and under
    warnings as errors the cross-check became an internal error (exit 4). In a fresh
    process: torch warns once per process, and an import by pytest.importorskip (warnings
    ignored) can use that once up."""
    pytest.importorskip("torch", reason="torch is an optional extra")
    np.savez(tmp_path / "w.npz", up=np.array([[1.0, 0], [0, 1], [1, 1]]),
             down=np.array([[-1, 0, 0.5], [0, -1, 0.25]]))
    spec = tmp_path / "loaded.mlp"
    spec.write_text('block R { activation relu  dim 2  width 3\n'
                    '  up = load("w.npz", "up")  down = load("w.npz", "down") }\n'
                    'claim R is absorbable\n', encoding="utf-8")
    run = subprocess.run([sys.executable, "-W", "error", "-m", "absorb_formal", "--backend",
                          "torch", "--device", "cpu", "--crosscheck", "1000", str(spec)],
                         capture_output=True, text=True, cwd=ROOT)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "cross-check 1000 points" in run.stdout and "INTERNAL" not in run.stdout


def test_torch_cuda_crosscheck_when_a_gpu_is_present():
    torch = pytest.importorskip("torch", reason="torch is an optional extra")
    if not torch.cuda.is_available():
        pytest.skip("no CUDA device on this machine")
    spec, block = _spec_block(ABSORBABLE)
    result = decide(spec, spec.statements[0])
    found = crosscheck(block, result.certificate, 100_000, backend("torch", "cuda"))
    assert found is not None and found.ok and found.device == "cuda"


def test_exact_rationals_become_nearest_floats():
    _, block = _spec_block(ABSORBABLE)
    assert from_block(block).layers[0]["down"][0, 2] == float(Fraction(7, 10))


def test_a_witness_of_millions_of_weights_is_cross_checked_at_fewer_points():
    """points × weights stays within the budget, never below MIN_POINTS; small witnesses get
    every point asked for."""
    from absorb_formal.numeric.crosscheck import WORK, affordable

    assert affordable(100_000, 1_000) == 100_000
    assert affordable(100_000, 4_000_000) == max(MIN_POINTS, WORK // 4_000_000)
    assert affordable(100_000, 10**12) == MIN_POINTS
    assert affordable(500, 10**12) == 500  # never more than asked
