"""PNG plots for RESULTS.md: time against width, log scale (matplotlib, the `bench` extra)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from common import median


def _figure() -> Any:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def absorb(rows: list[Any], path: Path) -> None:
    plt = _figure()
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.2), sharey=True)
    for ax, kind in zip(axes, ("random", "planted"), strict=True):
        for activation, style in (("relu", "-o"), ("gelu", "--s")):
            for d in sorted({r.d for r in rows if r.activation == activation}):
                sel = [r for r in rows if (r.activation, r.d, r.kind) == (activation, d, kind)]
                ax.plot([r.m for r in sel], [r.median for r in sel], style,
                        label=f"{activation} d={d}")
        brute = [r for r in rows if r.kind == kind and r.activation == "relu" and r.d == 8
                 and r.brute]
        ax.plot([r.m for r in brute], [r.brute[2] for r in brute], ":k",
                label="brute force, relu d=8 (extrapolated)")
        ax.axhline(10, color="grey", linewidth=0.6)
        ax.set(xscale="log", yscale="log", xlabel="width m", title=f"{kind} blocks")
        ax.set_xticks([8, 16, 32, 64, 128, 256], labels=["8", "16", "32", "64", "128", "256"])
    axes[0].set_ylabel("seconds (median; 10 s = limit)")
    axes[1].legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def equivalence(rows: list[Any], path: Path) -> None:
    plt = _figure()
    fig, ax = plt.subplots(figsize=(6.5, 4.2))
    for d, colour in ((4, "tab:blue"), (16, "tab:orange")):
        for kind, style in (("equal", "-"), ("near miss", "--")):
            sel = [r for r in rows if r.d == d and r.kind == kind]
            ax.plot([r.m for r in sel], [median(r.tool) for r in sel], style + "o", color=colour,
                    label=f"canonical forms d={d} {kind}")
            z3 = [r for r in sel if r.z3_answered]
            ax.plot([r.m for r in z3], [median(r.z3) for r in z3], style + "x", color=colour,
                    alpha=0.5, label=f"z3 d={d} {kind}")
    ax.axhline(60, color="grey", linewidth=0.6)
    ax.set(xscale="log", yscale="log", xlabel="width m", ylabel="seconds (60 s = z3 limit)",
           title="claim A equals B (ReLU)")
    ax.legend(fontsize=6)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
