"""Hand-written specs that once crashed or raised false alarms (issue 12): weights beyond
float range, cancellation in floats, huge widths, timeouts inside property proofs, and
malformed weight files."""

from __future__ import annotations

import copy
import tracemalloc

import numpy as np

from absorb_formal.decide import decide
from absorb_formal.language import load_text
from absorb_formal.numeric.attach import Options, attach
from absorb_formal.numeric.backends import NumpyBackend
from absorb_formal.numeric.crosscheck import crosscheck
from absorb_formal.result import ERROR

from .conftest import CORPUS

NUMPY = NumpyBackend()


def _block(text: str, name: str = "R"):
    spec = load_text(text, "t.mlp", CORPUS)
    return spec, spec.blocks[name]


# --- 1. weights beyond float64 range ----------------------------------------------------------

HUGE = """block R { activation relu dim 1 width 1 up = [[1e500]] down = [[-1e-500]] }
claim R is absorbable
"""


def test_weights_beyond_float_range_skip_the_crosscheck_honestly(cli, write_spec):
    run = cli("--crosscheck", "500", write_spec(HUGE))
    assert run.code == 0, run.out
    assert "proved" in run.out and "cross-check skipped: weights beyond float64 range" in run.out
    doc = cli("--json", "--crosscheck", "500", write_spec(HUGE)).json()
    [result] = doc["files"][0]["results"]
    assert result["outcome"] == "proved"
    assert result["crosscheck"] == {"skipped": "weights beyond float64 range"}


def test_a_refutation_beyond_float_range_keeps_its_verdict(cli, write_spec):
    text = ("block Q { activation square dim 1 width 1 up = [[1e400]] down = [[1]] }\n"
            "claim Q is not absorbable\n")
    doc = cli("--json", "--crosscheck", "500", write_spec(text)).json()
    [result] = doc["files"][0]["results"]
    assert result["outcome"] == "proved", result
    assert result["sanity"] == {"skipped": "weights beyond float64 range"}


def test_a_weight_that_underflows_is_out_of_range_too(cli, write_spec):
    text = ("block R { activation relu dim 1 width 2 up = [[1], [1e-400]]\n"
            "  down = [[-1, 1]] }\nclaim R is absorbable at width 3\n")
    run = cli("--crosscheck", "500", write_spec(text))
    assert "cross-check skipped: weights beyond float64 range" in run.out, run.out


# --- 2. the tolerance follows the size of what is summed -------------------------------------

CANCELLING = """block R { activation relu dim 1 width 2 up = [[1], [7]]
  down = [[3e23, -3e23/7]] }
claim R is absorbable
"""


def test_cancellation_in_floats_is_no_false_alarm(cli, write_spec):
    # B(x) = x + 3e23 relu(x) - (3e23/7) relu(7x) is exactly x, but float64 rounds the two
    # 3e23-sized terms: |P - B| is ~1e7 |x|, and only tiny relative to those terms.
    run = cli("--json", "--crosscheck", "2000", write_spec(CANCELLING))
    [result] = run.json()["files"][0]["results"]
    assert run.code == 0 and result["outcome"] == "proved", result
    assert result["crosscheck"]["max_abs_error"] > 1  # the rounding is real ...
    assert result["crosscheck"]["max_rel_error"] <= 1e-12  # ... and small against the terms


ABSORBABLE = """block R { activation relu dim 2 width 3
  up = [[1, 0], [0, 1], [1, 1]]  down = [[-1, 0, 7/10], [0, -1, 3/10]] }
claim R is absorbable
"""


def test_a_small_real_mismatch_is_still_flagged():
    spec, block = _block(ABSORBABLE)
    result = decide(spec, spec.statements[0])
    broken = copy.deepcopy(result.certificate)
    broken["layers"][0]["down"][0][2] = "7000001/10000000"  # off by 1e-7 of one weight
    bad = attach(block, type(result)(**{**result.__dict__, "certificate": broken}),
                 Options(2000, NUMPY), 3)
    assert bad.outcome == ERROR and "INTERNAL ERROR" in bad.reason


def test_scaled_evaluation_bounds_the_terms():
    from absorb_formal.numeric.floatblock import from_block

    _, block = _block(CANCELLING)
    x = np.array([[2.0], [-3.0]])
    value, size = NUMPY.evaluate_scaled(from_block(block), x)
    assert np.allclose(value, NUMPY.evaluate(from_block(block), x))
    # |S x| + sum_j |d_j| (|u_j x| + |relu(u_j x)|): the terms, with σ's input rounding
    assert size[0, 0] >= 2 + 2 * (3e23 * 2 + 3e23 / 7 * 14)
    assert size[1, 0] >= 3


# --- 3. memory stays bounded whatever the width ---------------------------------------------

NARROW = """block R { activation relu dim 1 width 1 up = [[1]] down = [[-1]] }
claim R is absorbable
"""


def _peak_bytes(run) -> tuple[object, int]:
    tracemalloc.start()
    try:
        found = run()
        return found, tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_a_million_neuron_witness_is_checked_in_bounded_memory():
    _, block = _block(NARROW)
    width = 10**6  # B(x) = x - relu(x) = -relu(-x): one live neuron, the rest zero
    certificate = {"kind": "witness", "width": width, "layers": [{
        "up": [["-1"]] + [["0"]] * (width - 1), "down": [["-1"] + ["0"] * (width - 1)]}]}
    found, peak = _peak_bytes(lambda: crosscheck(block, certificate, 20_000, NUMPY))
    assert found is not None and found.ok and found.points == 20_000
    assert peak < 200 * 2**20, peak


def test_wide_live_witnesses_are_evaluated_in_chunks():
    _, block = _block(NARROW)
    pairs = 10_000  # 1 + 2·10^4 live neurons whose pairs cancel: no neuron is dead
    up = [["-1"]] + [["1"], ["1"]] * pairs
    down = [["-1"] + ["3/2", "-3/2"] * pairs]
    certificate = {"kind": "witness", "width": len(up), "layers": [{"up": up, "down": down}]}
    found, peak = _peak_bytes(lambda: crosscheck(block, certificate, 2000, NUMPY))
    assert found is not None and found.ok
    assert peak < 100 * 2**20, peak  # unchunked: 2000 x 20001 x 8 bytes = 320 MB, 5 times


def test_a_wide_claim_on_a_narrow_block_completes(cli, write_spec):
    # before: one 32768 x 60000 float64 temporary (15.7 GB), MemoryError, then unknown
    run = cli("--crosscheck", "40000", write_spec(NARROW.replace(
        "claim R is absorbable", "claim R is absorbable at width 60000")))
    assert run.code == 0 and "cross-check 40000 points" in run.out, run.out


# --- 4. a timeout inside a property proof is never memoised ---------------------------------


def test_a_timeout_inside_a_property_proof_is_not_cached(cli, write_spec, monkeypatch):
    import sympy

    from absorb_formal import budget
    from absorb_formal import properties as props

    monkeypatch.setattr(props, "_proved", {})  # prove tanh afresh in this test
    real, calls = sympy.limit, []

    def alarm_in_first_limit(*args, **kwargs):  # the claim's SIGALRM, at a fixed point
        calls.append(args)
        if len(calls) == 1:
            raise budget.ClaimTimeout
        return real(*args, **kwargs)

    monkeypatch.setattr(sympy, "limit", alarm_in_first_limit)
    path = write_spec("block T { activation tanh dim 2 width 3 }\n"
                      "claim T is never absorbable\nclaim T is never absorbable\n")
    run = cli("--timeout", "60", path)
    first, second = run.out.splitlines()[:2]
    assert ": unknown: T is never absorbable — timeout after 60 s" in first, run.out
    assert ": proved: T is never absorbable" in second and "T3" in second, run.out


def test_sympy_failures_that_are_not_timeouts_still_mean_not_proved(monkeypatch):
    import sympy

    from absorb_formal import properties as props
    from absorb_formal.activations import simple

    monkeypatch.setattr(props, "_proved", {})

    def broken(*args, **kwargs):
        raise NotImplementedError("sympy cannot do this limit")

    monkeypatch.setattr(sympy, "limit", broken)
    assert not props.properties(simple("tanh")).bounded


def test_properties_proved_past_the_deadline_are_not_cached(monkeypatch):
    from absorb_formal import budget
    from absorb_formal import properties as props
    from absorb_formal.activations import simple

    monkeypatch.setattr(props, "_proved", {})
    monkeypatch.setattr(budget, "spent", lambda: True)  # an alarm some sympy code swallowed
    props.properties(simple("sigmoid"))
    assert props._proved == {}
    monkeypatch.setattr(budget, "spent", lambda: False)
    assert props.properties(simple("sigmoid")).bounded and simple("sigmoid") in props._proved
