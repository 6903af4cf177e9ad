"""Figures of the Att-SVM experiments: correlation curves with bands over seeds, and the 2-D pictures.

Consumes `hardmax.experiments.svm` results only (nothing is computed here but what is drawn). Object-
oriented Matplotlib (`Figure`, no pyplot state), like the rest of `hardmax.plots`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
from matplotlib.figure import Figure

if TYPE_CHECKING:  # plots consume results by their fields; experiments import plots, never the reverse
    from hardmax.experiments.svm import PlaneResult, SyntheticResult

__all__ = ["plot_correlations", "plot_plane"]

_STYLE = {"corr(W_k, W^mm_α)": ("tab:blue", "-"), "corr((KQᵀ)_k, W^mm_⋆,α)": ("tab:red", "-"),
          "control: corr(W_k, W^mm_⋆,α)": ("tab:blue", ":"), "control: corr((KQᵀ)_k, W^mm_α)": ("tab:red", ":")}


def plot_correlations(result: SyntheticResult) -> Figure:
    """Correlation with the Att-SVM solutions against steps: mean over seeds, band = 10th-90th percentile.

    Left: the four curves of `hardmax.experiments.svm.CURVES` (solid: each parameterisation against its
    own SVM; dotted: the cross controls). Right: softmax mass on the selected token (1 − mass, log scale).
    """
    steps = result.iterations.numpy()
    fig = Figure(figsize=(10, 3.8), layout="constrained")
    ax, ax_mass = fig.subplots(1, 2)
    for label, curve in result.curves.items():  # the order of experiments.svm.CURVES
        c = curve.numpy()
        color, style = _STYLE[label]
        ax.plot(steps, c.mean(0), color=color, linestyle=style, label=label)
        ax.fill_between(steps, np.quantile(c, 0.1, axis=0), np.quantile(c, 0.9, axis=0), color=color, alpha=0.15,
                        linewidth=0)
    ax.set(xlabel="gradient step k", ylabel="correlation", ylim=(0.5, 1.0),
           title=f"{result.reported}{f' of {result.config.seeds}' if result.failures else ''} seeds, "
                 f"n = {result.config.n}, T = {result.config.T}, d = {result.config.d}")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, loc="lower right")
    for p, color in (("W", "tab:blue"), ("KQ", "tab:red")):
        off = np.clip(1 - result.selected_mass[p].numpy(), 1e-300, None)
        ax_mass.semilogy(steps, np.median(off, 0), color=color, label=f"{p}: median over seeds")
        ax_mass.fill_between(steps, np.quantile(off, 0.1, axis=0), np.quantile(off, 0.9, axis=0), color=color,
                             alpha=0.15, linewidth=0)
    ax_mass.set(xlabel="gradient step k", ylabel="1 − softmax mass on the selected token",
                title="softmax becomes hardmax")
    ax_mass.grid(alpha=0.3)
    ax_mass.legend(fontsize=8)
    return fig


def plot_plane(result: PlaneResult) -> Figure:
    """The 2-D picture: paths of W_k z_i for both inputs, the SVM directions W^mm z_i as rays, selections as stars.

    Left: descent on W against the Frobenius SVM; right: descent on (K, Q) against the nuclear-norm SVM.
    """
    X, z = result.X.numpy(), result.z.numpy()
    T = X.shape[1]
    fig = Figure(figsize=(10, 4.6), layout="constrained")
    axes = fig.subplots(1, 2)
    colors, markers = ("tab:cyan", "tab:olive"), ("D", "o")
    for ax, (p, norm, name) in zip(axes, (("W", "fro", "W^{mm}"), ("KQ", "nuc", r"W^{mm}_\star")), strict=True):
        sel = result.paths[p].selection[0].numpy()
        for i in range(2):
            for t in range(T):
                star = t == sel[i]
                ax.scatter(*X[i, t], marker="*" if star else markers[i], s=260 if star else 90, color=colors[i],
                           edgecolors="black", linewidths=1.2, zorder=3)
            path = result.paths[p].W[0].numpy() @ z[i]  # (steps + 1, 2): W_k z_i
            ray = result.svm[norm].W.numpy() @ z[i]
            line = ("tab:red", "tab:blue")[i]
            ax.plot(path[:, 0], path[:, 1], color=line, linewidth=1.8, label=rf"$W_k z_{i + 1}$ ({p})")
            ax.plot([0, 100 * ray[0]], [0, 100 * ray[1]], color=line, linewidth=1, linestyle="--",
                    label=rf"${name} z_{i + 1}$ (ray)")
        lim = max(3.0, 1.2 * np.abs(X).max())
        ax.set(xlim=(-lim, 3 * lim), ylim=(-1.5 * lim, 1.5 * lim), aspect="equal",
               title=f"{'W' if p == 'W' else '(K, Q)'} descent, T = {T}")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7, loc="lower right")
    return fig
