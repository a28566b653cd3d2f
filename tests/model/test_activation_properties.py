"""Activation properties (docs/rules.md §2) are proved from the formula, not looked up by name."""

from __future__ import annotations

import math
from fractions import Fraction as F

import numpy as np
import pytest

from absorb_formal.decide.lemmas import properties
from absorb_formal.model import activations as acts


def labels(activation: acts.Activation) -> set[str]:
    return set(properties(activation).names())


# The table of docs/rules.md §2, per activation (σ's properties; gated ones name the gate), plus
# An (real-analytic on R) and Lin (σ(z) = az), which the rules of §4 also use.
TABLE = {
    "relu": {"H(1)", "O(1/2)", "N"},
    "abs": {"H(1)", "E"},
    "square": {"H(2)", "E", "F", "An"},
    "identity": {"H(1)", "O(1)", "An", "Lin"},
    "gelu": {"O(1/2)", "N", "An"},
    "gelu_tanh": {"O(1/2)", "N", "An"},
    "silu": {"O(1/2)", "N", "An"},
    "swish": {"O(1/2)", "N", "An"},
    "tanh": {"Bd", "An"},
    "sigmoid": {"Bd", "Og(1/2)", "An"},
    "swiglu": {"F", "O(1/2)", "N", "An"},
    "geglu": {"F", "O(1/2)", "N", "An"},
    "reglu": {"H(1)", "F", "O(1/2)", "N"},
    "glu": {"Bd", "Og(1/2)", "An"},
    "bilinear": {"H(1)", "F", "O(1)", "An", "Lin"},
}


@pytest.mark.parametrize("name", sorted(TABLE))
def test_named_activations_match_the_table(name):
    assert labels(acts.simple(name)) == TABLE[name]


@pytest.mark.parametrize(("activation", "expected"), [
    (acts.leaky_relu(F(1)), {"H(1)", "O(1)", "An", "Lin"}),  # the identity
    (acts.leaky_relu(F(-1)), {"H(1)", "E"}),              # even: |z|
    (acts.leaky_relu(F(1, 2)), {"H(1)", "O(3/4)", "N"}),  # a = (1 + α)/2
    (acts.leaky_relu(F(0)), {"H(1)", "O(1/2)", "N"}),     # relu
    (acts.relu_power(2), {"H(2)", "F"}),
    (acts.relu_power(3), {"H(3)", "F"}),
    (acts.poly((F(0), F(0), F(1))), {"H(2)", "E", "F", "An"}),
    (acts.poly((F(0), F(1), F(1))), {"O(1)", "An"}),      # z + z²: not homogeneous, not N
    (acts.poly((F(0), F(0), F(0), F(2))), {"H(3)", "F", "An"}),
    (acts.poly((F(0), F(1), F(0), F(0))), {"H(1)", "O(1)", "An", "Lin"}),  # identity
])
def test_parameterised_activations(activation, expected):
    assert labels(activation) == expected


def test_relu_power_one_is_relu():
    assert acts.relu_power(1) == acts.simple("relu")


def test_block_degree_counts_the_gate():
    assert properties(acts.simple("reglu")).block_degree(gated=True) == 2
    assert properties(acts.simple("relu")).block_degree(gated=False) == 1
    assert properties(acts.simple("gelu")).block_degree(gated=False) is None


def test_lemmas_state_what_was_proved():
    lemmas = properties(acts.simple("gelu")).lemmas
    assert "O" in lemmas and "1/2" in lemmas["O"]
    assert "N" in lemmas


@pytest.mark.parametrize("name", ["gelu", "gelu_tanh", "silu", "tanh", "sigmoid"])
def test_float_values_of_transcendental_activations(name):
    scalar = acts.simple(name).scalar
    reference = {
        "gelu": lambda z: z * (1 + math.erf(z / math.sqrt(2))) / 2,
        "gelu_tanh": lambda z: z / 2 * (1 + math.tanh(math.sqrt(2 / math.pi)
                                                      * (z + 0.044715 * z**3))),
        "silu": lambda z: z / (1 + math.exp(-z)),
        "tanh": math.tanh,
        "sigmoid": lambda z: 1 / (1 + math.exp(-z)),
    }[name]
    zs = np.linspace(-30, 30, 121)
    got = scalar.numpy(zs)
    want = np.array([reference(z) for z in zs])
    assert np.allclose(got, want, rtol=1e-12, atol=1e-14)


def test_sigmoid_is_stable_at_extremes():
    values = acts.simple("sigmoid").scalar.numpy(np.array([-1000.0, 1000.0]))
    assert values.tolist() == [0.0, 1.0]


def test_exact_evaluation_refuses_irrational_activations():
    with pytest.raises(ValueError, match="not rational"):
        acts.simple("gelu").scalar.exact(F(1))
