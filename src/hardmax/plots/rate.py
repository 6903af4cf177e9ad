"""Curves of coding rates through the layers (`hardmax.experiments.rate`) and of CRATE's measures.

Consumes `RateReport` / `CrateMeasures` only; draws with Matplotlib's object-oriented API (`Figure`,
no pyplot state). Saving is `hardmax.plots.save_figure`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from matplotlib.figure import Figure

if TYPE_CHECKING:  # plots consume results by their fields; experiments import plots, never the reverse
    from hardmax.experiments.rate import CrateMeasures, RateReport

__all__ = ["plot_crate_measures", "plot_rates"]


def plot_rates(reports: Mapping[str, RateReport]) -> Figure:
    """Three panels for one or several models (e.g. {"d = 2": report, ...}):

    scale-free rate R̂ of the reviews' tokens per layer (classifier, solid: hardmax, dotted: softmax;
    faint: the long `simulate` run); ΔR between the classes of the mean tokens per layer; mean final R
    against the number of leaders.
    """
    fig = Figure(figsize=(13, 3.8), layout="constrained")
    ax_rate, ax_delta, ax_leaders = fig.subplots(1, 3)
    colors = ["tab:blue", "tab:orange", "tab:green", "tab:red", "tab:purple", "tab:brown"]
    for i, (name, report) in enumerate(reports.items()):
        color = colors[i % len(colors)]
        long = report.simulated["hardmax"]
        ax_rate.plot(long.layers, long.compression, color=color, alpha=0.3, lw=3)
        for attention, style in (("hardmax", "-"), ("softmax", ":")):
            rates = report.classifier[attention]
            label = f"{name} ({attention})" if attention == "hardmax" else None
            ax_rate.plot(rates.layers, rates.compression, style, color=color, label=label)
            ax_delta.plot(rates.layers, rates.reduction, style, color=color, label=label)
        ax_delta.plot(long.layers, long.reduction, color=color, alpha=0.3, lw=3)
        table = sorted(report.leaders.table.items())
        ax_leaders.plot([k for k, _ in table], [v[1] for _, v in table], "o-", color=color, ms=3, label=name)
    ax_rate.set(xlabel="layer", ylabel="R̂ / R̂ at layer 0", title="scale-free coding rate of a review's tokens")
    ax_delta.set(xlabel="layer", ylabel="ΔR (nats)", title="ΔR between classes (mean token per review)")
    ax_leaders.set(xlabel="number of leaders", ylabel="mean final R (nats)", title="final R vs leaders (long run)")
    ax_rate.legend(fontsize=7)
    for ax in (ax_rate, ax_delta, ax_leaders):
        ax.grid(alpha=0.3)
    return fig


def plot_crate_measures(measures: Mapping[str, CrateMeasures]) -> Figure:
    """Compression R^c(Z^ℓ | U^ℓ) and non-zero fraction after ISTA per layer, e.g. {"d = 16, init": m, ...}."""
    fig = Figure(figsize=(9, 3.6), layout="constrained")
    ax_c, ax_s = fig.subplots(1, 2)
    for name, m in measures.items():
        style = ":" if "init" in name else "-"
        layers = list(range(1, len(m.compression) + 1))
        ax_c.plot(layers, m.compression, style, marker="o", ms=3, label=name)
        ax_s.plot(layers, [1 - s for s in m.sparsity], style, marker="o", ms=3, label=name)
    ax_c.set(xlabel="block ℓ", ylabel="R^c(Z | U) (nats)", title="compression at each block's input")
    ax_s.set(xlabel="block ℓ", ylabel="non-zero fraction", title="after the ISTA step")
    ax_c.legend(fontsize=7)
    for ax in (ax_c, ax_s):
        ax.grid(alpha=0.3)
    return fig
