"""Hand-written specs at the edges, decided without a crash or a false alarm: weights beyond
float range, cancellation in floats, huge widths, timeouts inside property proofs, and
malformed weight files."""

from __future__ import annotations

import contextlib
import copy
import io
import json
import tempfile
import tracemalloc
import zipfile
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from absorb_formal.decide import decide
from absorb_formal.language import load_text
from absorb_formal.model.result import ERROR
from absorb_formal.numeric.attach import Options, attach
from absorb_formal.numeric.backends import NumpyBackend
from absorb_formal.numeric.crosscheck import crosscheck
from absorb_formal.weights.arrays import ArrayError, load_matrix

from ..conftest import CORPUS

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
    # unchunked, one 32768 x 60000 float64 temporary (15.7 GB): MemoryError, then unknown
    run = cli("--crosscheck", "40000", write_spec(NARROW.replace(
        "claim R is absorbable", "claim R is absorbable at width 60000")))
    assert run.code == 0 and "cross-check 40000 points" in run.out, run.out


# --- 4. a timeout inside a property proof is never memoised ---------------------------------


def test_a_timeout_inside_a_property_proof_is_not_cached(cli, write_spec, monkeypatch):
    import sympy

    from absorb_formal.decide import budget
    from absorb_formal.decide import lemmas as props

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

    from absorb_formal.decide import lemmas as props
    from absorb_formal.model.activations import simple

    monkeypatch.setattr(props, "_proved", {})

    def broken(*args, **kwargs):
        raise NotImplementedError("sympy cannot do this limit")

    monkeypatch.setattr(sympy, "limit", broken)
    assert not props.properties(simple("tanh")).bounded


def test_properties_proved_past_the_deadline_are_not_cached(monkeypatch):
    from absorb_formal.decide import budget
    from absorb_formal.decide import lemmas as props
    from absorb_formal.model.activations import simple

    monkeypatch.setattr(props, "_proved", {})
    monkeypatch.setattr(budget, "spent", lambda: True)  # an alarm some sympy code swallowed
    props.properties(simple("sigmoid"))
    assert props._proved == {}
    monkeypatch.setattr(budget, "spent", lambda: False)
    assert props.properties(simple("sigmoid")).bounded and simple("sigmoid") in props._proved


# --- 5. malformed weight files are positioned errors ----------------------------------------

JSON = st.recursive(
    st.none() | st.booleans() | st.integers(-2**70, 2**70) | st.floats() | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner,
                                                                max_size=4),
    max_leaves=12)
NUMBERS = st.one_of(st.integers(-5, 40), st.integers(-2**70, 2**70), st.floats(),
                    st.booleans(), st.text(max_size=3), st.none())
# Near-valid entries: mostly the right fields, with wrong types, signs and sizes mixed in.
ENTRY = st.one_of(
    JSON,
    st.fixed_dictionaries({}, optional={
        "dtype": st.one_of(st.sampled_from(["F64", "F32", "F16", "BF16", "I64", "U8", "BOOL",
                                            "F8_E4M3", ""]), JSON),
        "shape": st.one_of(st.lists(NUMBERS, max_size=3), JSON),
        "data_offsets": st.one_of(st.lists(NUMBERS, max_size=3), JSON)}))
HEADER = st.one_of(JSON, st.dictionaries(st.sampled_from(["up", "down", "__metadata__"]),
                                         ENTRY, max_size=3))


def _load_only_array_errors(path: Path) -> None:
    """load_matrix either gives an array or raises ArrayError; nothing else may come out."""
    with contextlib.suppress(ArrayError):
        load_matrix(path, "up")


@settings(suppress_health_check=[HealthCheck.too_slow], deadline=None)
@given(header=HEADER, data=st.binary(max_size=64))
def test_fuzz_safetensors_headers_give_array_errors_only(header, data):
    head = json.dumps(header).encode()
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "w.safetensors"
        path.write_bytes(len(head).to_bytes(8, "little") + head + data)
        _load_only_array_errors(path)


@settings(suppress_health_check=[HealthCheck.too_slow], deadline=None)
@given(head=st.binary(max_size=64), data=st.binary(max_size=64))
def test_fuzz_safetensors_random_header_bytes(head, data):
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "w.safetensors"
        path.write_bytes(len(head).to_bytes(8, "little") + head + data)
        _load_only_array_errors(path)
        path.write_bytes(head + data)
        _load_only_array_errors(path)


@settings(suppress_health_check=[HealthCheck.too_slow], deadline=None)
@given(member=st.binary(max_size=200), prefix=st.booleans())
def test_fuzz_npz_with_garbage_members(member, prefix):
    npy = io.BytesIO()
    np.save(npy, np.eye(2))
    if prefix:  # a real .npy header, then garbage: the parser gets past the magic
        member = npy.getvalue()[:len(npy.getvalue()) - 32] + member
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "w.npz"
        with zipfile.ZipFile(path, "w") as archive:
            archive.writestr("up.npy", member)
        _load_only_array_errors(path)
        path.write_bytes(member)
        _load_only_array_errors(path)


MALFORMED = {
    "list as entry": {"up": [1, 2]},
    "string shape": {"up": {"dtype": "F64", "shape": "2x2", "data_offsets": [0, 32]}},
    "missing field": {"up": {"dtype": "F64", "shape": [2, 2]}},
    "negative offset": {"up": {"dtype": "F64", "shape": [2, 2], "data_offsets": [-32, 0]}},
    "huge offset": {"up": {"dtype": "F64", "shape": [2, 2], "data_offsets": [2**80, 2**80]}},
    "float shape": {"up": {"dtype": "F64", "shape": [2.0, 2], "data_offsets": [0, 32]}},
    "dtype not a string": {"up": {"dtype": 64, "shape": [2, 2], "data_offsets": [0, 32]}},
    "metadata a list": {"__metadata__": ["x"],
                        "up": {"dtype": "F64", "shape": [2, 2], "data_offsets": [0, 32]}},
}


@pytest.mark.parametrize("header", MALFORMED.values(), ids=MALFORMED.keys())
def test_malformed_safetensors_is_a_positioned_error_exit_2(cli, tmp_path, header):
    head = json.dumps(header).encode()
    (tmp_path / "w.safetensors").write_bytes(len(head).to_bytes(8, "little") + head
                                             + bytes(32))
    spec = tmp_path / "s.mlp"
    spec.write_text('block R { activation relu dim 2 width 2\n'
                    '  up = load("w.safetensors", "up")  down = [[1, 0], [0, 1]] }\n'
                    'claim R is absorbable\n')
    run = cli(spec)
    assert run.code == 2, run.out + run.err
    assert f"{spec}:2:8: error:" in run.err and "Traceback" not in run.err, run.err


def test_a_header_that_is_not_utf8_is_a_positioned_error(cli, tmp_path):
    head = b'{"up": "\xff\xfe"}'
    (tmp_path / "w.safetensors").write_bytes(len(head).to_bytes(8, "little") + head)
    spec = tmp_path / "s.mlp"
    spec.write_text('block R { activation relu dim 2 width 2\n'
                    '  up = load("w.safetensors", "up")  down = [[1, 0], [0, 1]] }\n')
    run = cli(spec)
    assert run.code == 2 and f"{spec}:2:8: error:" in run.err and "not UTF-8 JSON" in run.err


def test_a_npy_file_named_npz_is_a_positioned_error(cli, tmp_path):
    npy = io.BytesIO()
    np.save(npy, np.eye(2))
    (tmp_path / "w.npz").write_bytes(npy.getvalue())  # found by the npz fuzz: a TypeError
    spec = tmp_path / "s.mlp"
    spec.write_text('block R { activation relu dim 2 width 2\n'
                    '  up = load("w.npz", "up")  down = [[1, 0], [0, 1]] }\n')
    run = cli(spec)
    assert run.code == 2 and f"{spec}:2:8: error: cannot read 'w.npz'" in run.err, run.err
