"""Pictures of a `Solution` of `hardmax.dynamics.solve`: the plane, the circle and the sphere, with trails and
the tokens coloured by the cluster they end in; the metastability picture and the phase diagram.

    draw_flow(ax, solution, upto)         one frame: R^2 (with the convex hull), S^1 (the unit circle), S^2
                                          (a wireframe sphere, 3-D axes), R^1 (tokens against time)
    flow_figure(solution, panels)         a row of frames at chosen saved states
    animate_flow(solution, path)          a GIF of every saved state (atomic)
    metastability_figure(result)          cluster count and E_β against time (log scale): plateaus, staircase
    phase_figure(diagram)                 P(one cluster) over (t, β)
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import torch
from matplotlib.figure import Figure

from hardmax.dynamics import Solution
from hardmax.plots.save import save_gif

__all__ = ["animate_flow", "cluster_colours", "draw_flow", "flow_figure", "metastability_figure", "phase_figure"]

_PALETTE = ("#d95f02", "#1b9e77", "#7570b3", "#e7298a", "#66a61e", "#e6ab02", "#a6761d", "#1f78b4", "#666666")


def _path(solution: Solution, sequence: int) -> np.ndarray:
    z = solution.tokens.detach().cpu().to(torch.float64)
    if z.dim() == 4:
        if not 0 <= sequence < z.shape[1]:
            raise ValueError(f"sequence must be in 0..{z.shape[1] - 1}, got {sequence}")
        z = z[:, sequence]
    return z.numpy()  # (saved, n, d)


def cluster_colours(solution: Solution, sequence: int = 0, tol: float | None = None) -> list[str]:
    """One colour per token: the cluster it is in at the last saved state (components within `tol`; None: the
    manifold's `cluster_tolerance` of the start's extent)."""
    z = _path(solution, sequence)
    if tol is None:
        tol = solution.field.manifold.cluster_tolerance(np.ptp(z[0], axis=0).max() or 1.0)
    from scipy.sparse.csgraph import connected_components

    final = torch.from_numpy(z[-1])
    _, label = connected_components((torch.cdist(final, final) <= tol).numpy(), directed=False)
    order = {v: k for k, v in enumerate(dict.fromkeys(label.tolist()))}
    return [_PALETTE[order[v] % len(_PALETTE)] for v in label.tolist()]


def draw_flow(ax, solution: Solution, upto: int = -1, *, sequence: int = 0, trails: bool = True,
              colours: Sequence[str] | None = None, hull: bool = True) -> None:
    """Draw saved state `upto` (trails from the start) of one sequence on `ax` (3-D axes for tokens in R^3)."""
    z = _path(solution, sequence)
    k = upto % len(z)
    d = z.shape[-1]
    colours = cluster_colours(solution, sequence) if colours is None else colours
    sphere = solution.field.manifold.unit_sphere  # draw the unit circle / sphere; else the convex hull in R^d
    t = float(solution.times[k])
    if d == 1:
        times = solution.times.cpu().numpy()[: k + 1]
        for i in range(z.shape[1]):
            ax.plot(times, z[: k + 1, i, 0], color=colours[i], lw=0.8)
        ax.set(xlabel="t", ylabel="z", xlim=(0, float(solution.times[-1]) or 1), ylim=(z.min() - 0.5, z.max() + 0.5))
        ax.set_title(f"t = {t:.3g}")
        return
    if d == 3:
        if sphere:
            u, v = np.mgrid[0:2 * np.pi:24j, 0:np.pi:12j]
            ax.plot_wireframe(np.cos(u) * np.sin(v), np.sin(u) * np.sin(v), np.cos(v), color="#cccccc", lw=0.3)
        if trails:
            for i in range(z.shape[1]):
                ax.plot(*z[: k + 1, i].T, color=colours[i], lw=0.6, alpha=0.7)
        ax.scatter(*z[k].T, c=colours, s=18, edgecolors="black", linewidths=0.4, depthshade=False)
        ax.set_box_aspect((1, 1, 1))
        ax.set_axis_off()
        ax.set_title(f"t = {t:.3g}")
        return
    x = z[..., :2]
    if sphere:
        a = np.linspace(0, 2 * np.pi, 200)
        ax.plot(np.cos(a), np.sin(a), color="#bbbbbb", lw=0.8)
    elif hull and solution.field.manifold.euclidean and len(x[k]) >= 3:
        from scipy.spatial import ConvexHull, QhullError

        try:
            h = ConvexHull(x[k])
            loop = np.append(h.vertices, h.vertices[0])
            ax.fill(x[k][loop, 0], x[k][loop, 1], color="#eeeeee", zorder=0)
            ax.plot(x[k][loop, 0], x[k][loop, 1], color="#aaaaaa", lw=0.6, zorder=1)
        except QhullError:
            pass
    if trails:
        for i in range(x.shape[1]):
            ax.plot(x[: k + 1, i, 0], x[: k + 1, i, 1], color=colours[i], lw=0.6, ls="--", alpha=0.8, zorder=2)
    ax.scatter(x[0, :, 0], x[0, :, 1], c="white", s=8, edgecolors="#999999", linewidths=0.3, zorder=3)
    ax.scatter(x[k, :, 0], x[k, :, 1], c=colours, s=22, edgecolors="black", linewidths=0.5, zorder=4)
    lo, hi = x.reshape(-1, 2).min(0), x.reshape(-1, 2).max(0)
    pad = 0.08 * float((hi - lo).max() or 1.0)
    ax.set(xlim=(lo[0] - pad, hi[0] + pad), ylim=(lo[1] - pad, hi[1] + pad), aspect="equal")
    ax.set_title(f"t = {t:.3g}")


def flow_figure(solution: Solution, panels: Sequence[int] = (0, -1), *, sequence: int = 0,
                title: str | None = None, size: float = 3.2) -> Figure:
    """A row of `draw_flow` frames at the saved states `panels` (indices into solution.times)."""
    fig = Figure(figsize=(size * len(panels), size + 0.4), layout="constrained")
    three = _path(solution, sequence).shape[-1] == 3
    colours = cluster_colours(solution, sequence)
    for j, k in enumerate(panels):
        ax = fig.add_subplot(1, len(panels), j + 1, projection="3d" if three else None)
        draw_flow(ax, solution, k, sequence=sequence, colours=colours)
    if title:
        fig.suptitle(title)
    return fig


def animate_flow(solution: Solution, path: str | os.PathLike, *, sequence: int = 0, fps: int = 12,
                 title: str | None = None, max_frames: int = 120, dpi: int = 80) -> Path:
    """A GIF of one sequence through the saved states (at most `max_frames`, evenly spaced), written atomically."""
    frames = np.unique(np.linspace(0, len(solution.times) - 1, min(max_frames, len(solution.times))).round()
                       .astype(int))
    three = _path(solution, sequence).shape[-1] == 3
    colours = cluster_colours(solution, sequence)
    fig = Figure(figsize=(4.2, 4.2), layout="constrained")

    def draw(i: int) -> None:
        fig.clear()
        ax = fig.add_subplot(1, 1, 1, projection="3d" if three else None)
        draw_flow(ax, solution, int(frames[i]), sequence=sequence, colours=colours)
        if title:
            fig.suptitle(title, fontsize=9)

    return save_gif(fig, draw, len(frames), path, fps=fps, dpi=dpi)


def metastability_figure(result) -> Figure:
    """Cluster count and energy E_β against time (log scale) of a `metastability` run, beside the circle."""
    sol = result.solution
    times = sol.times.cpu().numpy()
    fig = Figure(figsize=(10, 3.4), layout="constrained")
    ax0 = fig.add_subplot(1, 3, 1)
    draw_flow(ax0, sol, -1)
    ax1, ax2 = fig.add_subplot(1, 3, 2), fig.add_subplot(1, 3, 3)
    t = np.maximum(times, times[1] if len(times) > 1 else 1.0)
    ax1.step(t, result.clusters.cpu().numpy(), where="post", color="#d95f02")
    ax1.set(xscale="log", xlabel="t", ylabel="clusters", title="cluster count: plateaus")
    ax1.yaxis.get_major_locator().set_params(integer=True)
    ax2.plot(t, result.energy.cpu().numpy(), color="#1b9e77")
    ax2.set(xscale="log", xlabel="t", ylabel="E_β", title="energy: a staircase")
    fig.suptitle(f"SA on the circle, n = {sol.tokens.shape[-2]}, β = {result.beta:g}, "
                 f"step then renormalise, dt = {sol.solver.dt:g}")
    return fig


def phase_figure(diagram) -> Figure:
    """P(one cluster) over (t, β) as a colour map."""
    fig = Figure(figsize=(5.2, 3.8), layout="constrained")
    ax = fig.add_subplot(1, 1, 1)
    mesh = ax.pcolormesh(diagram.times.numpy(), diagram.betas.numpy(), diagram.single.numpy(), cmap="RdBu_r",
                         vmin=0, vmax=1, shading="nearest", rasterized=True)
    fig.colorbar(mesh, ax=ax, label="P(one cluster)")
    ax.set(xlabel="t", ylabel="β", title=f"SA on S^{diagram.d - 1}, n = {diagram.n}, {diagram.starts} starts per β")
    return fig

