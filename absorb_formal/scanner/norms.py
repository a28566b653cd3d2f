"""Where the norm sits beside each MLP sublayer, read from `config.json` by model family
(docs/scan.md, "The sublayer the model computes"; docs/rules.md, normalised sublayers).

A family's entry says the norm's kind, its placement, the tensor name(s) of its scale γ
(and shift β) relative to the layer's prefix, and whether γ is stored minus 1 (Gemma).
ε is read from `layer_norm_eps`, `rms_norm_eps` or `layer_norm_epsilon`, else the
family's documented default. Nothing is assumed: a known family whose norm tensor is
missing, or norm tensors in a layer of an unknown family, make the sublayer `unknown`
(placement "unknown", with the reason); a checkpoint with no norm tensor at all is an MLP
whose sublayer is the bare block.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from fractions import Fraction
from typing import Any

from .found import FoundBlock, FoundNorm, TensorRef

EPS_KEYS = ("layer_norm_eps", "rms_norm_eps", "layer_norm_epsilon")


@dataclass(frozen=True)
class Family:
    """kind, placement, the norm tensor(s) beside the MLP (two for sandwich), ε's default
    (None: the config must give it), and the constant added to the stored γ."""

    kind: str
    placement: str
    names: tuple[str, ...]
    eps_default: str | None
    gamma_offset: str = "0"


LLAMA = Family("rmsnorm", "pre", ("post_attention_layernorm",), None)
GEMMA2 = Family("rmsnorm", "sandwich", ("pre_feedforward_layernorm",
                                        "post_feedforward_layernorm"), None, "1")
FAMILIES: dict[str, Family] = {
    "gpt2": Family("layernorm", "pre", ("ln_2",), "1e-5"),
    "gpt_neox": Family("layernorm", "pre", ("post_attention_layernorm",), "1e-5"),
    "gptj": Family("layernorm", "pre", ("ln_1",), "1e-5"),  # parallel: one norm for both
    "phi": Family("layernorm", "pre", ("input_layernorm",), "1e-5"),  # parallel, too
    "llama": LLAMA, "mistral": LLAMA, "mixtral": LLAMA, "qwen2": LLAMA, "qwen3": LLAMA,
    "qwen2_moe": LLAMA, "qwen3_moe": LLAMA,
    "gemma": Family("rmsnorm", "pre", ("post_attention_layernorm",), None, "1"),
    "gemma2": GEMMA2, "gemma3": GEMMA2, "gemma3_text": GEMMA2,
    "t5": Family("rmsnorm", "pre", ("layer_norm",), "1e-6"),
    "mt5": Family("rmsnorm", "pre", ("layer_norm",), "1e-6"),
    "vit": Family("layernorm", "pre", ("layernorm_after",), "1e-12"),
    "bert": Family("layernorm", "post", ("output.LayerNorm",), "1e-12"),
    "roberta": Family("layernorm", "post", ("output.LayerNorm",), "1e-5"),
    "xlm-roberta": Family("layernorm", "post", ("output.LayerNorm",), "1e-5"),
    "opt": Family("layernorm", "pre", ("final_layer_norm",), "1e-5"),
}
NORMISH = re.compile(r"norm|ln_|layer_norm|LayerNorm|layernorm")


def family_of(config: dict[str, Any]) -> tuple[str, Family | None]:
    """The config's model type and its family entry (OPT's `do_layer_norm_before` read)."""
    kind = str(config.get("model_type") or "")
    found = FAMILIES.get(kind)
    if kind == "opt" and found is not None and config.get("do_layer_norm_before") is False:
        found = replace(found, placement="post")  # OPT-350m
    return kind, found


def eps_of(config: dict[str, Any], family: Family) -> tuple[str | None, str]:
    """ε as exact decimal text and where it was read."""
    for key in EPS_KEYS:
        value = config.get(key)
        if isinstance(value, int | float) and not isinstance(value, bool):
            return _decimal(value), f"config.json {key}"
    if family.eps_default is not None:
        return family.eps_default, "the family's default"
    return None, ""


def _decimal(value: int | float) -> str:
    """A JSON number as the decimal the config wrote (1e-05 → 1e-05): exact, as written."""
    text = repr(value)
    Fraction(text)  # a float's repr is a decimal the language reads exactly
    return text


def attach(blocks: list[FoundBlock], tensors: dict[str, tuple[str, tuple[int, ...]]],
           config: dict[str, Any], prefixes: dict[str, str]) -> list[FoundBlock]:
    """Each block with the norm beside it (`FoundBlock.norm`); `prefixes`: a block's `where`
    → the layer prefix its tensors were matched under (`h.0.`, `model.layers.3.`)."""
    model, family = family_of(config)
    return [replace(b, norm=_norm(b, tensors, prefixes.get(b.where, ""), model, family,
                                  config)) for b in blocks]


def used(blocks: list[FoundBlock]) -> list[str]:
    """The tensors the blocks' norms read (γ, β of each norm), in order, once each."""
    keys: list[str] = []
    for block in blocks:
        norm = block.norm
        while norm is not None:
            keys += [r.key for r in (norm.gamma, norm.beta) if r is not None]
            norm = norm.second
    return list(dict.fromkeys(keys))


def _norm(block: FoundBlock, tensors: dict[str, tuple[str, tuple[int, ...]]], prefix: str,
          model: str, family: Family | None, config: dict[str, Any]) -> FoundNorm | None:
    if family is None:
        nearby = [k for k in tensors if NORMISH.search(k) and _layer(k) == _layer(prefix)
                  and _layer(prefix)]
        if not nearby:
            return None  # no norm in this layer: the sublayer is the bare block
        return FoundNorm("", "unknown", "", source=(
            f"norm tensor {nearby[0]!r} sits in this layer, but where a "
            f"{model or 'model without config.json model_type'} puts it (before or after "
            "the MLP) is not known to absorb_formal: the sublayer is not decided"))
    eps, eps_source = eps_of(config, family)
    if eps is None:  # placed by the family, but not stated without ε
        return FoundNorm(family.kind, family.placement, "", source=(
            f"config.json gives no ε ({', '.join(EPS_KEYS)}) for this {model} model"))
    parts = []
    for name in family.names:
        gamma = _find(tensors, prefix, f"{name}.weight", block.dim)
        if gamma is None:
            return FoundNorm(family.kind, "unknown", eps, source=(
                f"a {model} layer has its {name} norm beside the MLP, but no tensor "
                f"'{prefix}{name}.weight' of {block.dim} entries was found"))
        beta = _find(tensors, prefix, f"{name}.bias", block.dim) \
            if family.kind == "layernorm" else None
        parts.append((gamma, beta))
    where = f"config.json model_type {model!r}; ε from {eps_source}"
    second = None
    if family.placement == "sandwich":
        g2, b2 = parts[1]
        second = FoundNorm(family.kind, "post", eps, g2, b2, None, family.gamma_offset, where)
    gamma, beta = parts[0]
    return FoundNorm(family.kind, family.placement, eps, gamma, beta, second,
                     family.gamma_offset, where)


def _layer(key: str) -> str:
    """The layer part of a tensor name: up to the last number (`h.0.`, `layers.12.`)."""
    match = re.match(r"(.*\.\d+)\.", key)
    return match.group(1) if match else ""


def _find(tensors: dict[str, tuple[str, tuple[int, ...]]], prefix: str, name: str,
          dim: int) -> TensorRef | None:
    """`prefix + name`, or the same name under a shorter prefix (a MoE expert's layer)."""
    parts = prefix.rstrip(".").split(".") if prefix else []
    for cut in range(len(parts), -1, -1):
        key = ".".join(parts[:cut] + [name])
        found = tensors.get(key)
        if found is not None and tuple(found[1]) in ((dim,), (1, dim)):
            return TensorRef(found[0], key, False)
    return None
