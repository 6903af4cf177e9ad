"""Drawing one saved state of a `Scene` on an axis, and the shared legend: one path for every solution.

    draw_panel(ax, scene, k, box)      2-D axes: the plane (p = 2) or tokens against time (p = 1); returns a mover
    draw_panel_3d(ax, scene, k, box)   3-D axes (p = 3): K as a translucent solid, or the unit sphere's wireframe
    add_legend(fig, limit_label)       leader, token, trail, K and S below a figure of the paper's layers
"""


from __future__ import annotations

import contextlib
from collections.abc import Callable

import numpy as np
from matplotlib.axes import Axes
from matplotlib.collections import LineCollection
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import Patch, Polygon
from mpl_toolkits.mplot3d.art3d import Line3DCollection, Poly3DCollection
from scipy.spatial import ConvexHull, QhullError

from hardmax.plots.scene import HULL_EDGE, HULL_FACE, K_EDGE, K_FACE, PALETTE, Scene

__all__ = ["add_legend", "draw_panel", "draw_panel_3d"]

# --------------------------------------------------------------------------------------------
# Drawing one panel.
# --------------------------------------------------------------------------------------------


def draw_panel(ax: Axes, scene: Scene, k: int, box: tuple[np.ndarray, np.ndarray]
               ) -> Callable[[int], None]:
    """Draw `scene` at saved state `k` into 2-D axes (p = 2: the plane; p = 1: tokens against time); return a
    function that moves the tokens to another saved state (animations redraw only the tokens, their trails and
    the tokens' hull: K, S, the circle and the ticks stay)."""
    if scene.dimension == 1:
        return _draw_time(ax, scene, k)
    colours = scene.colours
    v = scene.vertices
    light = scene.projected  # the inner edges of K show: draw them lighter
    # K and the limits in S belong to the final layer (as in the paper's Figure 2): shown there only.
    final_only: list = []
    if len(v) >= 3:
        with contextlib.suppress(QhullError):  # collinear vertices: K is a segment, drawn below
            final_only += ax.fill(*v[ConvexHull(v).vertices].T, facecolor=K_FACE, edgecolor="none", zorder=0)
    if len(scene.edges):
        final_only.append(ax.add_collection(LineCollection(v[scene.edges], colors=K_EDGE,
                                                           linewidths=0.5 if light else 1.0,
                                                           alpha=0.6 if light else 1.0, zorder=1)))
    if len(scene.limit):
        final_only.append(ax.scatter(*scene.limit.T, marker="D", s=46, facecolors="none", edgecolors="black",
                                     linewidths=0.9, zorder=3))
    if scene.background == "circle":
        a = np.linspace(0, 2 * np.pi, 200)
        ax.plot(np.cos(a), np.sin(a), color="#bbbbbb", lw=0.8, zorder=0)
    hull = (ax.add_patch(Polygon(np.zeros((0, 2)), closed=True, facecolor=HULL_FACE, edgecolor=HULL_EDGE, lw=0.6,
                                 zorder=0)) if scene.background == "hull" else None)
    if not scene.paper:  # where the tokens started: the flows' pictures mark it (the paper's figure does not)
        ax.scatter(*scene.path[0].T, c="white", s=8, edgecolors="#999999", linewidths=0.3, zorder=3)
    last = scene.path.shape[0] - 1
    trails = LineCollection([], colors=colours, linewidths=0.8, alpha=0.55, zorder=2)
    ax.add_collection(trails)
    dots = ax.scatter(np.empty(0), np.empty(0), s=22, edgecolors=_edge(scene), linewidths=0.4, zorder=4)
    stars = ax.scatter(np.empty(0), np.empty(0), marker="*", s=190, edgecolors="black", linewidths=0.6,
                       zorder=5)
    ax.set_xlim(box[0][0], box[1][0])
    ax.set_ylim(box[0][1], box[1][1])
    ax.set_aspect("equal")
    ax.tick_params(labelsize=7, length=2)
    ax.locator_params(nbins=4)

    def show(k: int) -> None:
        if scene.trails:
            trails.set_segments(list(np.swapaxes(scene.path[: k + 1], 0, 1)))  # n trails of k + 1 points
        position, lead = scene.path[k], scene.leaders_at(k)
        dots.set_offsets(position[~lead])
        dots.set_facecolor(colours[~lead])
        stars.set_offsets(position[lead])
        stars.set_facecolor(colours[lead])
        if hull is not None:
            hull.set_xy(_hull(position))
        for artist in final_only:
            artist.set_visible(k == last)
        ax.set_title(scene.stamp(k), fontsize=10)

    show(k)
    return show


def _edge(scene: Scene) -> str:
    """The tokens' outline: white beside the paper's stars and K, black on a flow's hull, circle or sphere."""
    return "white" if scene.paper else "black"


def _hull(points: np.ndarray) -> np.ndarray:
    """(m, 2) the convex hull's corners of points (n, 2) in order; none when they are fewer than 3 or collinear."""
    if len(points) < 3:
        return np.zeros((0, 2))
    try:
        return points[ConvexHull(points).vertices]
    except QhullError:
        return np.zeros((0, 2))


def _draw_time(ax: Axes, scene: Scene, k: int) -> Callable[[int], None]:
    """Tokens in R^1 against time, up to saved state `k`; returns the mover (as `draw_panel`)."""
    lines = [ax.plot([], [], color=c, lw=0.8)[0] for c in scene.colours]
    z = scene.path[..., 0]
    ax.set(xlabel="t", ylabel="z", xlim=(0, float(scene.times[-1]) or 1), ylim=(z.min() - 0.5, z.max() + 0.5))

    def show(k: int) -> None:
        for i, line in enumerate(lines):
            line.set_data(scene.times[: k + 1], z[: k + 1, i])
        ax.set_title(scene.stamp(k), fontsize=10)

    show(k)
    return show


def _ordered_polygon(points: np.ndarray) -> np.ndarray:
    """Order coplanar points (m, 3) by angle around their centroid, within their plane."""
    centred = points - points.mean(0)
    _, _, vt = np.linalg.svd(centred, full_matrices=False)
    uv = centred @ vt[:2].T
    return points[np.argsort(np.arctan2(uv[:, 1], uv[:, 0]))]


def draw_panel_3d(ax, scene: Scene, k: int, box: tuple[np.ndarray, np.ndarray], azim: float = -60.0) -> None:
    """Draw `scene` (3 plot coordinates) at saved state `k` into 3-D axes."""
    colours = scene.colours
    v = scene.vertices
    faces: list[np.ndarray] = []
    if scene.k_dim == 3 and len(v) >= 4:
        with contextlib.suppress(QhullError):
            faces = list(v[ConvexHull(v).simplices])
    elif scene.k_dim == 2 and len(v) >= 3:
        faces = [_ordered_polygon(v)]
    if faces:
        ax.add_collection3d(Poly3DCollection(faces, facecolors=K_FACE, edgecolors="none", alpha=0.45))
    if len(scene.edges):
        ax.add_collection3d(Line3DCollection(v[scene.edges], colors=K_EDGE, linewidths=1.0))
    if scene.background == "sphere":
        u, w = np.mgrid[0:2 * np.pi:24j, 0:np.pi:12j]
        ax.plot_wireframe(np.cos(u) * np.sin(w), np.sin(u) * np.sin(w), np.cos(w), color="#cccccc", lw=0.3)
    if k > 0 and scene.trails:
        trails = np.swapaxes(scene.path[: k + 1], 0, 1)
        ax.add_collection3d(Line3DCollection(trails, colors=colours, linewidths=0.7, alpha=0.5))
    if len(scene.limit):
        ax.scatter(*scene.limit.T, marker="D", s=40, facecolors="none", edgecolors="black",
                   linewidths=0.9, depthshade=False)
    position, lead = scene.path[k], scene.leaders_at(k)
    if (~lead).any():
        ax.scatter(*position[~lead].T, s=18, c=colours[~lead], edgecolors=_edge(scene), linewidths=0.3,
                   depthshade=False)
    if lead.any():
        ax.scatter(*position[lead].T, marker="*", s=160, c=colours[lead], edgecolors="black",
                   linewidths=0.6, depthshade=False)
    ax.set_xlim(box[0][0], box[1][0])
    ax.set_ylim(box[0][1], box[1][1])
    ax.set_zlim(box[0][2], box[1][2])
    ax.set_box_aspect((1, 1, 1), zoom=0.95)
    ax.view_init(elev=22, azim=azim)
    ax.set_title(scene.stamp(k), fontsize=10)
    if scene.background == "sphere":  # the wireframe is the frame of reference
        ax.set_axis_off()
    ax.tick_params(labelsize=6, pad=0)
    ax.locator_params(nbins=4)


def _legend_handles(limit_label: str | None) -> list:
    handles = [
        Line2D([], [], marker="*", linestyle="none", markersize=12, markerfacecolor="0.75",
               markeredgecolor="black", label="leader"),
        Line2D([], [], marker="o", linestyle="none", markersize=5, markerfacecolor=PALETTE[0],
               markeredgecolor="white", label="token (colour: its limit)"),
        Line2D([], [], color=PALETTE[0], linewidth=0.8, alpha=0.6, label="trail"),
        Patch(facecolor=K_FACE, edgecolor=K_EDGE, label="K: hull of the final leaders (last layer)"),
    ]
    if limit_label:
        handles.append(Line2D([], [], marker="D", linestyle="none", markersize=6, markerfacecolor="none",
                              markeredgecolor="black", label=limit_label))
    return handles


def add_legend(fig: Figure, limit_label: str | None) -> None:
    """Add the legend below `fig`'s panels: leader, token, trail, K, and `limit_label` (points of S) unless None."""
    # "outside" places the legend in a margin reserved by the constrained layout engine.
    loc = "outside lower center" if fig.get_layout_engine() is not None else "lower center"
    fig.legend(handles=_legend_handles(limit_label), loc=loc, ncol=5, frameon=False, fontsize=8,
               handletextpad=0.4, columnspacing=1.2)
