"""What scan finds: MLP sublayers as tensor references, before anything is decided."""

from __future__ import annotations

from dataclasses import dataclass, field

from ..weights.common import CheckpointError as ScanError  # noqa: F401 - what a scan cannot read


@dataclass(frozen=True)
class TensorRef:
    """One tensor a block loads: `load("FILE", "KEY")`, with `.T` when `transpose`.

    file: the file's path relative to the checkpoint's root folder (a single-file checkpoint
    is its own root's only file); key: its name in the file (an ONNX initializer's name)."""

    file: str
    key: str
    transpose: bool = False


@dataclass(frozen=True)
class FoundNorm:
    """The normalisation beside an MLP sublayer (docs/rules.md, normalised sublayers).

    kind: "layernorm" | "rmsnorm"; placement: "pre" (`S x + F(N(x))`), "post"
    (`N(S x + F(x))`) or "sandwich" (`S x + N2(F(N(x)))`, `second` is N2); eps: the exact
    decimal text of ε as the config or graph states it; gamma, beta: the scale and shift
    tensors (None: 1 and 0); gamma_offset: a constant added to the stored scale (Gemma
    stores γ - 1); source: where the placement was read (a config key, a graph node)."""

    kind: str
    placement: str
    eps: str
    gamma: TensorRef | None = None
    beta: TensorRef | None = None
    second: FoundNorm | None = None
    gamma_offset: str = "0"
    source: str = ""

    @property
    def known(self) -> bool:
        """Placed and with its ε: a sublayer that can be stated (else `source` says why)."""
        return self.placement != "unknown" and bool(self.eps)


@dataclass(frozen=True)
class FoundBlock:
    """One MLP sublayer x ↦ down·σ(up·x + up_bias) + down_bias (gated: σ(gate·x + gate_bias)
    ⊙ (up·x + up_bias)), whose residual is x ↦ x + MLP(x).

    name: a block name valid in the language (e.g. `h0_mlp`); where: the sublayer's place in
    the checkpoint (`transformer.h.0.mlp`; in an ONNX model what its weights' names share,
    or `UP → DOWN`, the weights' names, never node names); activation: a language
    activation name (`gelu_tanh`, `swiglu`, ...) or "" when none is known yet (scan then
    asks for `--activation`); up: m×d after its transpose; down: d×m after its transpose."""

    name: str
    where: str
    activation: str
    dim: int
    width: int
    up: TensorRef
    down: TensorRef
    gate: TensorRef | None = None
    up_bias: TensorRef | None = None
    gate_bias: TensorRef | None = None
    down_bias: TensorRef | None = None
    notes: tuple[str, ...] = field(default_factory=tuple)
    norm: FoundNorm | None = None  # None: no norm found beside it (the bare block)

    @property
    def biased(self) -> bool:
        return any(b is not None for b in (self.up_bias, self.gate_bias, self.down_bias))


@dataclass(frozen=True)
class Skipped:
    """Something scan saw and did not decide, with why (attention, norms, embeddings, an
    MLP whose layout it cannot state exactly, ...)."""

    where: str
    why: str
