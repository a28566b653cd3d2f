"""`--fit`: an adversarial search for a plain block of width w that matches B on samples.

Variable projection: for hidden weights U (and G when gated) the best D is a linear least-
squares solution, so only U (and G) are optimised, by Adam with random restarts, on the
residual of that solution, with greedy sign moves (negate one neuron) every 100 steps.
Restarts alternate random starts and starts on the block's own kink normals; for width ≤ 10
the latter first sweep all neuron orientations, then descend. If the search reaches the
tolerance where the prover said "not absorbable", something is wrong, and the run says so
loudly. Depth 1 without biases by variable projection (`search`); stacks and blocks
with biases by back-propagation through every layer (`search_stack`).
"""

from __future__ import annotations

import itertools
import math
import time
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..decide import budget
from ..model.activations import Scalar, _erf
from ..model.blocks import Block
from ..model.result import Result
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


def _targets(block: Block, reference: Any, engine: Backend, train: np.ndarray,
             test: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """What the plain block must match on the samples: the block, or, with a norm clause,
    the sublayer the model computes (float64, `Block.evaluate`), so that a fit never
    compares a sublayer's verdict with its bare block."""
    if block.norm is not None:
        return block.evaluate(train), block.evaluate(test)
    return engine.evaluate(reference, train), engine.evaluate(reference, test)


def search(block: Block, width: int, restarts: int, engine: Backend,
           seed: int = 0, best_so_far: Best | None = None) -> tuple[float, int]:
    """(best error on fresh points, restarts run) of the adversarial fit."""
    so_far = best_so_far if best_so_far is not None else Best()
    assert block.depth == 1 and block.is_concrete
    reference = from_block(block)
    normals = reference.normals()
    train = next(batches(block.dim, normals, SAMPLES, seed=seed + 1))
    test = next(batches(block.dim, normals, 4 * SAMPLES, seed=seed + 2))
    y_train, y_test = _targets(block, reference, engine, train, test)
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
        if block.depth == 1 and not block.biased:
            error, runs = search(block, width, restarts, engine, best_so_far=so_far)
        else:  # stacks and biases: every layer trained (docs/rules.md §9 refutations, §8)
            error, runs = search_stack(block, width, restarts, engine, best_so_far=so_far)
    except budget.ClaimTimeout:  # report the best error reached so far, not nothing
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


# ---- stacks (depth ≥ 2) and blocks with biases -----------------------------------------------

def _stack_start(block: Block, width: int, rng: np.random.Generator, informed: bool
                 ) -> list[dict[str, np.ndarray]]:
    """One plain layer per block layer: random (He-scaled), or the block's own rows cycled to
    `width` with noise (where the block's kinks are), down random and small."""
    d, biased = block.dim, block.biased
    reference = from_block(block)
    out = []
    for layer in reference.layers:
        m = len(layer["up"])
        if informed and m:  # the block's neurons cycled to `width`, each copy's share of d_i
            picks = [i % m for i in range(width)]
            share = np.array([1.0 / picks.count(i) for i in picks])
            params = {"up": layer["up"][picks].copy(),
                      "down": layer["down"][:, picks] * share}
            if biased:
                params["up_bias"] = layer.get("up_bias", np.zeros(m))[picks].copy()
                params["down_bias"] = layer.get("down_bias", np.zeros(d)).copy()
        else:
            params = {"up": rng.normal(size=(width, d)) * math.sqrt(2.0 / d),
                      "down": rng.normal(size=(d, width)) * math.sqrt(1.0 / width)}
            if biased:
                params["up_bias"] = 0.1 * rng.normal(size=width)
                params["down_bias"] = np.zeros(d)
        out.append(params)
    return out


def _stack_sweep(block: Block, x: np.ndarray, y: np.ndarray, weight: np.ndarray,
                 params: list[dict[str, np.ndarray]], rng: np.random.Generator
                 ) -> list[dict[str, np.ndarray]]:
    """Neuron orientations of an informed start (a flipped neuron, biases with it, is how a
    layer's witness differs from the layer in the generic case, docs/rules.md §4): every sign
    vector when there are at most 2^SWEEP_MAX, else as many random ones; the last layer's
    down solved each time."""
    scalar, biased = block.activation.scalar, block.biased
    count = sum(len(p["up"]) for p in params)
    trials = (itertools.product((1.0, -1.0), repeat=count) if count <= SWEEP_MAX else
              (rng.choice((1.0, -1.0), size=count) for _ in range(2**SWEEP_MAX)))
    best, chosen = math.inf, params
    for signs in trials:
        flat = np.array(signs)
        trial, at = [], 0
        for p in params:
            k = len(p["up"])
            flipped = dict(p, up=p["up"] * flat[at:at + k, None])
            if biased:
                flipped["up_bias"] = p["up_bias"] * flat[at:at + k]
            trial.append(flipped)
            at += k
        _, _, act = _stack_forward(scalar, x, trial)
        down, bias = _last_solve(act[-1], y, weight, biased)
        value = float(((weight[:, None] * (act[-1] @ down.T + bias - y)) ** 2).mean())
        if value < best:
            best, chosen = value, trial
    return [dict(p) for p in chosen]


def _stack_forward(scalar: Scalar, x: np.ndarray, params: list[dict[str, np.ndarray]]
                   ) -> tuple[list[np.ndarray], list[np.ndarray], list[np.ndarray]]:
    """Inputs h_{k−1}, pre-activations z_k and activations a_k of every layer (the last
    layer's output is solved, not computed)."""
    inputs, pre, act = [], [], []
    h = x
    for k, p in enumerate(params):
        inputs.append(h)
        z = h @ p["up"].T + p.get("up_bias", 0.0)
        a = scalar.numpy(z)
        pre.append(z)
        act.append(a)
        if k < len(params) - 1:
            h = a @ p["down"].T + p.get("down_bias", 0.0)
    return inputs, pre, act


def _last_solve(a: np.ndarray, y: np.ndarray, weight: np.ndarray, biased: bool
                ) -> tuple[np.ndarray, np.ndarray]:
    """(down, down_bias) of the last layer by weighted least squares."""
    design = np.hstack([a, np.ones((len(a), 1))]) if biased else a
    theta, *_ = np.linalg.lstsq(design * weight[:, None], y * weight[:, None], rcond=None)
    return theta[: a.shape[1]].T, (theta[-1] if biased else np.zeros(y.shape[1]))


def _stack_adam(block: Block, x: np.ndarray, y: np.ndarray, weight: np.ndarray,
                params: list[dict[str, np.ndarray]], steps: int) -> list[dict[str, np.ndarray]]:
    """Adam on the weighted loss mean(w²·|P(x) − y|²), the last layer's down solved each step
    (variable projection), every other weight and bias trained by back-propagation."""
    scalar, biased, n = block.activation.scalar, block.biased, len(x)
    names = [[k for k in p if not (i == len(params) - 1 and k in ("down", "down_bias"))]
             for i, p in enumerate(params)]
    moments = {(i, k): (np.zeros_like(params[i][k]), np.zeros_like(params[i][k]))
               for i, ks in enumerate(names) for k in ks}
    for step in range(1, steps + 1):
        inputs, pre, act = _stack_forward(scalar, x, params)
        down, bias = _last_solve(act[-1], y, weight, biased)
        params[-1]["down"], params[-1]["down_bias"] = down, bias
        residual = 2.0 / n * (weight**2)[:, None] * (act[-1] @ down.T + bias - y)
        grads: dict[tuple[int, str], np.ndarray] = {}
        g_a = residual @ down
        for k in range(len(params) - 1, -1, -1):
            g_z = g_a * derivative(scalar, pre[k])
            grads[k, "up"] = g_z.T @ inputs[k]
            if biased:
                grads[k, "up_bias"] = g_z.sum(axis=0)
            if k:
                g_h = g_z @ params[k]["up"]
                grads[k - 1, "down"] = g_h.T @ act[k - 1]
                if biased:
                    grads[k - 1, "down_bias"] = g_h.sum(axis=0)
                g_a = g_h @ params[k - 1]["down"]
        lr = RATE * (0.5 * (1 + math.cos(math.pi * step / steps)) + 1e-3)
        for key, (m, v) in moments.items():
            g = grads[key]
            m[:] = 0.9 * m + 0.1 * g
            v[:] = 0.999 * v + 0.001 * g * g
            i, name = key
            params[i][name] = params[i][name] - lr * (m / (1 - 0.9**step)) / (
                np.sqrt(v / (1 - 0.999**step)) + 1e-8)  # 1e-8: at an exact fit, stay
    if not biased:
        for p in params:
            p.pop("up_bias", None)
            p.pop("down_bias", None)
    return params


def search_stack(block: Block, width: int, restarts: int, engine: Backend, seed: int = 0,
                 best_so_far: Best | None = None, steps: int = STEPS) -> tuple[float, int]:
    """(best error on fresh points, restarts run) of the adversarial fit of a plain stack of
    the block's depth and hidden width `width` (biases when the block has them), for ungated
    blocks of any depth. Restarts alternate random and kink-informed starts."""
    so_far = best_so_far if best_so_far is not None else Best()
    assert block.is_concrete and not block.activation.gated
    reference = from_block(block)
    normals = reference.normals()
    train = next(batches(block.dim, normals, SAMPLES, seed=seed + 1))
    test = next(batches(block.dim, normals, 4 * SAMPLES, seed=seed + 2))
    y_train, y_test = _targets(block, reference, engine, train, test)
    weight = 1.0 / (1.0 + np.abs(y_train).max(axis=1))
    rng = np.random.default_rng(seed)
    best = math.inf
    for run in range(1, restarts + 1):
        informed = run % 2 == 0
        params = _stack_start(block, width, rng, informed)
        if informed:  # the sweep's best orientation is a candidate itself
            params = _stack_sweep(block, train, y_train, weight, params, rng)
            best = min(best, _stack_error(block, params, train, y_train, weight, test, y_test))
        params = _stack_adam(block, train, y_train, weight, params, steps)
        best = min(best, _stack_error(block, params, train, y_train, weight, test, y_test))
        so_far.error, so_far.runs = best, run
        if best <= FIT_TOLERANCE:
            return best, run
    return best, restarts


def _stack_error(block: Block, params: list[dict[str, np.ndarray]], train: np.ndarray,
                 y_train: np.ndarray, weight: np.ndarray, test: np.ndarray,
                 y_test: np.ndarray) -> float:
    """max |P − B| / (1 + |B|) on the test points, the last down re-solved on the train set."""
    scalar = block.activation.scalar
    _, _, act = _stack_forward(scalar, train, params)
    down, bias = _last_solve(act[-1], y_train, weight, block.biased)
    _, _, act = _stack_forward(scalar, test, params)
    predicted = act[-1] @ down.T + bias
    return float((np.abs(predicted - y_test) / (1 + np.abs(y_test))).max())
