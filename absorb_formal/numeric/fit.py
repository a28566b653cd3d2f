"""`--fit`: an adversarial search for a plain block of width w that matches B on samples.

Variable projection: for hidden weights U (and G when gated) the best D is a linear least-
squares solution, so only U (and G) are optimised, by Adam with random restarts, on the
residual of that solution, with greedy sign moves (negate one neuron) every 100 steps.
Restarts alternate random starts and starts on the block's own kink normals; for width ≤ 10
the latter first sweep all neuron orientations, then descend. If the search reaches the
tolerance where the prover said "not absorbable", something is wrong, and the run says so
loudly. Depth 1 only.
"""

from __future__ import annotations

import itertools
import math
import time
from dataclasses import dataclass
from typing import Any

import numpy as np

from .. import budget
from ..activations import Scalar, _erf
from ..model import Block
from ..result import Result
from .backends import Backend
from .floatblock import from_block
from .points import batches

FIT_TOLERANCE = 1e-6  # max |P − B| / (1 + |B|) on fresh points
STEPS = 1500
RATE = 0.05
FLIP_EVERY = 100
SWEEP_MAX = 10  # widths whose 2^width neuron orientations are all tried
SAMPLES = 2048


def derivative(scalar: Scalar, z: np.ndarray) -> np.ndarray:
    """σ'(z) elementwise (a subgradient at kinks)."""
    kind = scalar.kind
    if kind == "relu":
        return (z > 0).astype(np.float64)
    if kind == "leaky_relu":
        return np.where(z >= 0, 1.0, float(scalar.param or 0))
    if kind == "relu_pow":
        k = scalar.power or 1
        return k * np.maximum(z, 0.0) ** (k - 1)
    if kind == "abs":
        return np.sign(z)
    if kind == "identity":
        return np.ones_like(z)
    if kind == "poly":
        value = np.zeros_like(z)
        for i, c in reversed(list(enumerate(scalar.coeffs))):
            if i:
                value = value * z + i * float(c)
        return value
    if kind == "gelu":
        return 0.5 * (1 + _erf(z / math.sqrt(2))) + z * np.exp(-z * z / 2) / math.sqrt(2 * math.pi)
    if kind == "gelu_tanh":
        root = math.sqrt(2 / math.pi)
        th = np.tanh(root * (z + 0.044715 * z**3))
        return 0.5 * (1 + th) + 0.5 * z * (1 - th * th) * root * (1 + 3 * 0.044715 * z * z)
    if kind == "silu":
        s = scalar.numpy(z) / np.where(z == 0, 1.0, z)
        s = np.where(z == 0, 0.5, s)
        return s * (1 + z * (1 - s))
    if kind == "tanh":
        return 1 - np.tanh(z) ** 2
    if kind == "sigmoid":
        s = scalar.numpy(z)
        return s * (1 - s)
    raise ValueError(kind)


@dataclass
class Fit:
    error: float
    up: np.ndarray
    gate: np.ndarray | None
    down: np.ndarray


def _hidden(scalar: Scalar, x: np.ndarray, up: np.ndarray, gate: np.ndarray | None
            ) -> np.ndarray:
    if gate is None:
        return scalar.numpy(x @ up.T)
    return scalar.numpy(x @ gate.T) * (x @ up.T)


def _solve(h: np.ndarray, y: np.ndarray) -> np.ndarray:
    down_t, *_ = np.linalg.lstsq(h, y, rcond=None)
    return down_t.T


def _start(width: int, d: int, hints: list[np.ndarray], rng: np.random.Generator,
           noise: float = 0.1) -> np.ndarray:
    """Random rows, or (hints given) the block's own kink normals with random orientation
    and noise — where any exact witness must put its neurons (docs/rules.md §4)."""
    if not hints:
        return rng.normal(size=(width, d))
    rows = [hints[i % len(hints)] * rng.choice((-1.0, 1.0)) for i in range(width)]
    start = np.array(rows) / np.linalg.norm(rows, axis=1, keepdims=True)
    return start + noise * rng.normal(size=(width, d))


def _loss(scalar: Scalar, x: np.ndarray, y: np.ndarray, params: list[np.ndarray]) -> float:
    h = _hidden(scalar, x, params[0], params[1] if len(params) > 1 else None)
    return float(((h @ _solve(h, y).T - y) ** 2).mean())


def _flips(scalar: Scalar, x: np.ndarray, y: np.ndarray, params: list[np.ndarray]
           ) -> list[np.ndarray]:
    """Greedy sign moves: negate one neuron's input row (the gate row when gated) if that
    lowers the projected loss. Gradient steps cannot cross from u to −u; these can."""
    flipped = 1 if len(params) > 1 else 0
    best = _loss(scalar, x, y, params)
    for i in range(len(params[flipped])):
        trial = [p.copy() for p in params]
        trial[flipped][i] = -trial[flipped][i]
        value = _loss(scalar, x, y, trial)
        if value < best:
            best, params = value, trial
    return params


def _sweep(scalar: Scalar, x: np.ndarray, y: np.ndarray, params: list[np.ndarray]
           ) -> list[np.ndarray]:
    """Every orientation of every neuron (2^width least-squares solves, width ≤ SWEEP_MAX):
    the discrete part of the search, where greedy moves stop at local minima."""
    flipped = 1 if len(params) > 1 else 0
    rows = params[flipped]
    best, chosen = math.inf, params
    for signs in itertools.product((1.0, -1.0), repeat=len(rows)):
        trial = list(params)
        trial[flipped] = rows * np.array(signs)[:, None]
        value = _loss(scalar, x, y, trial)
        if value < best:
            best, chosen = value, trial
    return chosen


def _adam(scalar: Scalar, x: np.ndarray, y: np.ndarray, params: list[np.ndarray],
          steps: int) -> list[np.ndarray]:
    """Adam on the projected loss (D re-solved every step), greedy flips every FLIP_EVERY."""
    gated = len(params) > 1
    moments = [(np.zeros_like(p), np.zeros_like(p)) for p in params]
    n = len(x)
    for step in range(1, steps + 1):
        up, gate = params[0], params[1] if gated else None
        h = _hidden(scalar, x, up, gate)
        down = _solve(h, y)
        dh = 2.0 / n * (h @ down.T - y) @ down  # ∂L/∂h for the projected loss
        if gate is None:
            grads = [(dh * derivative(scalar, x @ up.T)).T @ x]
        else:
            zg, zu = x @ gate.T, x @ up.T
            grads = [(dh * scalar.numpy(zg)).T @ x, (dh * derivative(scalar, zg) * zu).T @ x]
        if step % FLIP_EVERY == 0:
            params = _flips(scalar, x, y, params)
        lr = RATE * (0.5 * (1 + math.cos(math.pi * step / steps)) + 1e-3)
        for i, (g, (m, v)) in enumerate(zip(grads, moments, strict=True)):
            m[:] = 0.9 * m + 0.1 * g
            v[:] = 0.999 * v + 0.001 * g * g
            params[i] = params[i] - lr * (m / (1 - 0.9**step)) / (
                np.sqrt(v / (1 - 0.999**step)) + 1e-12)
    return params


def _descend(scalar: Scalar, x: np.ndarray, y: np.ndarray, width: int, gated: bool,
             rng: np.random.Generator, hints: dict[str, list[np.ndarray]]) -> Fit:
    d = x.shape[1]
    noise = 0.0 if hints and width <= SWEEP_MAX else 0.1
    params = [_start(width, d, hints.get("up", []), rng, noise)]
    if gated:
        params.append(_start(width, d, hints.get("gate", []), rng, noise))
    if hints and width <= SWEEP_MAX:
        params = _sweep(scalar, x, y, params)
    params = _adam(scalar, x, y, params, STEPS)
    up, gate = params[0], params[1] if gated else None
    down = _solve(_hidden(scalar, x, up, gate), y)
    return Fit(math.inf, up, gate, down)


@dataclass
class Best:
    """The fit so far: kept up to date after every restart, so that a timeout (which stops
    the search mid-restart) still has the best error reached and the restarts finished."""

    error: float = math.inf
    runs: int = 0


def search(block: Block, width: int, restarts: int, engine: Backend,
           seed: int = 0, best_so_far: Best | None = None) -> tuple[float, int]:
    """(best error on fresh points, restarts run) of the adversarial fit."""
    so_far = best_so_far if best_so_far is not None else Best()
    assert block.depth == 1 and block.is_concrete
    reference = from_block(block)
    normals = reference.normals()
    train = next(batches(block.dim, normals, SAMPLES, seed=seed + 1))
    test = next(batches(block.dim, normals, 4 * SAMPLES, seed=seed + 2))
    y_train, y_test = engine.evaluate(reference, train), engine.evaluate(reference, test)
    rng = np.random.default_rng(seed)
    scalar, gated = block.activation.scalar, block.activation.gated
    best = math.inf
    assert block.layers is not None
    layer = block.layers[0]
    informed = {"up": [r for r in layer.up.floats if np.any(r)]}
    if layer.gate is not None:
        informed["gate"] = [r for r in layer.gate.floats if np.any(r)]
    for run in range(1, restarts + 1):
        hints = informed if run % 2 == 0 else {}  # alternate random and kink-informed starts
        fit = _descend(scalar, train, y_train, width, gated, rng, hints)
        predicted = _hidden(scalar, test, fit.up, fit.gate) @ fit.down.T
        error = float((np.abs(predicted - y_test) / (1 + np.abs(y_test))).max())
        best = min(best, error)
        so_far.error, so_far.runs = best, run
        if best <= FIT_TOLERANCE:
            return best, run
    return best, restarts


def fit_alarm(block: Block, width: int, result: Result, restarts: int,
              engine: Backend) -> tuple[str, dict[str, Any]]:
    """(alarm message or "", JSON report) for --fit on one decided claim."""
    start = time.perf_counter()
    so_far, stopped = Best(), ""
    try:
        error, runs = search(block, width, restarts, engine, best_so_far=so_far)
    except budget.ClaimTimeout:  # keep the best error reached so far (issue 15.3)
        error, runs, stopped = so_far.error, so_far.runs, budget.timeout_reason()
    report: dict[str, Any] = {
        "width": width, "restarts": runs,
        "best_error": float(f"{error:.3g}") if math.isfinite(error) else None,
        "tolerance": FIT_TOLERANCE, "reached": error <= FIT_TOLERANCE,
        "seconds": round(time.perf_counter() - start, 2)}
    if stopped:
        report["stopped"] = stopped
    said = result.extra.get("decision", {})
    if error <= FIT_TOLERANCE and said.get("absorbable") is False \
            and said.get("width") == width:
        return (f"INTERNAL ERROR: --fit found a plain block of width {width} within "
                f"{error:.3g} of B where the prover said not absorbable (please report)"), report
    return "", report


def phrase(report: dict[str, Any]) -> str:
    """The fit on the text line: "fit width 3: best error 0.21 after 8 restarts"."""
    if "skipped" in report:
        return f"fit skipped: {report['skipped']}"
    best = report["best_error"]
    said = "no restart finished" if best is None else \
        f"best error {best:.3g} after {report['restarts']} restart{'s' * (report['restarts'] != 1)}"
    if report.get("reached"):
        said += " (reached the tolerance)"
    if report.get("stopped"):
        said += f", stopped ({report['stopped']})"
    return f"fit width {report['width']}: {said}"
