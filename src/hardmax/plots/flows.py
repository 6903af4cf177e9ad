"""Pictures of a `Solution` of `hardmax.dynamics.solve` named by time: thin spellings of the one scene path
(`scene.make_scene` -> `figures.scene_figure` / `figures.animate_scene`), and the particle papers' own plots.

    draw_flow(ax, solution, upto)         one frame: R^2 (with the convex hull), S^1 (the unit circle), S^2
                                          (a wireframe sphere, 3-D axes), R^1 (tokens against time); the paper's
                                          hardmax layers with their leaders, K and S
    flow_figure(solution, panels)         a row of frames at chosen saved states
    animate_flow(solution, path)          a GIF of the saved states (atomic)
    cluster_colours(solution)             one colour per token: its final cluster's (`scene.cluster_labels`)
    metastability_figure(result)          cluster count and E_β against time (log scale): plateaus, staircase
    phase_figure(diagram)                 P(one cluster) over (t, β)
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Sequence
from pathlib import Path

import numpy as np
from matplotlib.colors import to_hex, to_rgba_array
from matplotlib.figure import Figure

from hardmax.dynamics import Solution
from hardmax.plots.figures import animate_scene, scene_figure
from hardmax.plots.panels import draw_panel, draw_panel_3d
from hardmax.plots.scene import Scene, cluster_labels, colours_of, make_scene

__all__ = ["animate_flow", "cluster_colours", "draw_flow", "flow_figure", "metastability_figure", "phase_figure"]


def cluster_colours(solution: Solution, sequence: int = 0, tol: float | None = None) -> list[str]:
    """One colour per token: the cluster it is in at the last saved state (`scene.cluster_labels`: components
    within `tol`; None: the manifold's `cluster_tolerance` of the start's extent, or the paper's clusters)."""
    return [to_hex(c) for c in colours_of(cluster_labels(solution, _sequence(solution, sequence), tol))]


def _sequence(solution: Solution, sequence: int) -> int | None:
    """The scene's `sequence` argument: None for an unbatched solution (any `sequence` then names it)."""
    return sequence if solution.tokens.dim() == 4 else None


def _scene(solution: Solution, sequence: int, p: int | None = None) -> Scene:
    return make_scene(solution, p, sequence=_sequence(solution, sequence), clock="time")


def draw_flow(ax, solution: Solution, upto: int = -1, *, sequence: int = 0, trails: bool = True,
              colours: Sequence[str] | None = None, hull: bool = True) -> None:
    """Draw saved state `upto` (trails from the start) of one sequence on `ax` (3-D axes for tokens in R^3):
    `panels.draw_panel` of `make_scene(solution)`. `colours` (one per token) replace the clusters' colours;
    `trails` and `hull` False leave them out."""
    three = getattr(ax, "name", "") == "3d"
    scene = _scene(solution, sequence, 3 if three else None)
    changes = {"trails": trails}
    if colours is not None:
        changes["colours"] = to_rgba_array(colours)
    if not hull and scene.background == "hull":
        changes["background"] = "none"
    scene = dataclasses.replace(scene, **changes)
    k = upto % scene.path.shape[0]
    if three:
        draw_panel_3d(ax, scene, k, scene.box())
    else:
        draw_panel(ax, scene, k, scene.box())


def flow_figure(solution: Solution, panels: Sequence[int] = (0, -1), *, sequence: int = 0,
                title: str | None = None, size: float = 3.2) -> Figure:
    """A row of frames at the saved states `panels` (indices into solution.times): `figures.scene_figure`."""
    return scene_figure(_scene(solution, sequence), panels, title=title, size=size)


def animate_flow(solution: Solution, path: str | os.PathLike, *, sequence: int = 0, fps: int = 12,
                 title: str | None = None, max_frames: int = 120, dpi: int = 80) -> Path:
    """A GIF of one sequence through the saved states (at most `max_frames`, evenly spaced), written atomically:
    `figures.animate_scene`."""
    saved = len(solution.times)
    frames = np.unique(np.linspace(0, saved - 1, min(max_frames, saved)).round().astype(int))
    return animate_scene(_scene(solution, sequence), path, frames, fps=fps, dpi=dpi, title=title, size=(4.2, 4.4))


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

