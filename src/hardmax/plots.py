"""Figures and animations of hardmax runs.

What lives here: pictures of a `Trajectory` (panels at chosen layers, in 2-D, in 3-D, or projected
onto two principal components), the paper's Figure 2, GIF animations, and atomic saving.
What does not: simulation (`hardmax.dynamics`) and geometry (`hardmax.theory`). Plotting functions
only draw what those return; `figure2` is the one function that runs the dynamics itself, because
its job is to reproduce the paper's figure from the paper's configurations.

Every picture shows the same things: leaders (tokens that stay leaders from that layer on) as stars,
the other tokens as dots coloured by the cluster they converge to, thin trails of past positions,
the polytope K spanned by the final leaders (shaded), and the points of the limit set S that are not
vertices of K as hollow diamonds (Theorem 2.1 of Alcalde, Fantuzzi, Zuazua 2024, arXiv 2407.01602);
for d > 2, where S has a point on most faces of K, only the points of S that tokens converge to.

Only the object-oriented Matplotlib API is used (`Figure`, never `pyplot`): no global state, no
backend to choose, and figures are freed as soon as they are dropped.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from matplotlib import colormaps
from matplotlib.animation import PillowWriter
from matplotlib.axes import Axes
from matplotlib.collections import LineCollection
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import Patch
from mpl_toolkits.mplot3d.art3d import Line3DCollection, Poly3DCollection
from scipy.spatial import ConvexHull, QhullError

from hardmax.dynamics import Trajectory, simulate
from hardmax.theory import (
    FIGURE2_ALPHA,
    figure2_configurations,
    find_clusters,
    leader_layers,
    limit_set,
    polytope,
)

__all__ = [
    "FIGURE2_LAYERS",
    "animate",
    "figure2",
    "plot_layers",
    "plot_layers_3d",
    "plot_trajectory",
    "save_figure",
]

FIGURE2_LAYERS = (0, 1, 2, 5, 30)  # the layers shown in the paper's Figure 2

# Tableau colours without grey (grey is K's colour); cycled when there are more clusters.
_PALETTE = np.array([colormaps["tab10"](i) for i in (0, 1, 2, 3, 4, 5, 6, 8, 9)])
_K_FACE = "#e4e6ee"
_K_EDGE = "#8c90a4"


# --------------------------------------------------------------------------------------------
# What is drawn: one sequence, in plot coordinates.
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Scene:
    """Everything drawn for one sequence, mapped to p = 2 or 3 plot coordinates."""

    path: np.ndarray  # (layers + 1, n, p) positions of the real (unmasked) tokens
    labels: np.ndarray  # (n,) index of the cluster each token converges to
    leader_since: np.ndarray  # (n,) first layer from which the token stays a leader, -1 if never
    vertices: np.ndarray  # (v, p) vertices of K
    edges: np.ndarray  # (e, 2) pairs of vertex indices: the edges of K
    k_dim: int  # dimension of K
    limit: np.ndarray  # (s, p) points of S that are not vertices of K (only limits of tokens if d > 2)
    projected: bool  # d > p: the tokens were projected onto principal components
    note: str  # how the tokens were mapped to the plot, and what was left out ("" if nothing)

    @property
    def limit_label(self) -> str:
        """Legend entry of the diamonds (in d > 2 the unreached points of S would bury the picture)."""
        what = "projection of 0 on a face of K"
        return f"limit in S: {what}" if self.reached_only else f"S: {what}"

    @property
    def reached_only(self) -> bool:
        return self.path.shape[-1] == 3 or self.projected

    @property
    def colours(self) -> np.ndarray:
        """(n, 4) RGBA colour of each token: its limit cluster's."""
        return _PALETTE[self.labels % len(_PALETTE)]

    def leaders_at(self, layer: int) -> np.ndarray:
        """(n,) bool: the tokens that are leaders from `layer` on."""
        return (self.leader_since >= 0) & (self.leader_since <= layer)

    def box(self) -> tuple[np.ndarray, np.ndarray]:
        """Lower and upper corners of a cube holding everything drawn, with a margin."""
        points = np.concatenate([self.path.reshape(-1, self.path.shape[-1]), self.vertices, self.limit])
        lo, hi = points.min(0), points.max(0)
        half = 0.6 * max(float((hi - lo).max()), 1e-9)
        centre = (lo + hi) / 2
        return centre - half, centre + half


def _single(trajectory: Trajectory) -> None:
    if trajectory.tokens.dim() != 3:
        raise ValueError(
            "plots show one sequence: trajectory.tokens must have shape (layers + 1, n, d), got "
            f"{tuple(trajectory.tokens.shape)}; simulate the sequence on its own to plot it"
        )


def _projection(points: np.ndarray, p: int) -> tuple[Callable[[np.ndarray], np.ndarray], str]:
    """Map R^d to R^p: identity, zero padding (d < p), or the top-p principal components (d > p).

    `points` (m, d) fixes the principal axes; signs are chosen so the projection is deterministic.
    """
    d = points.shape[-1]
    if d == p:
        return (lambda x: np.asarray(x, dtype=np.float64).reshape(-1, d)), ""
    if d < p:
        return (lambda x: np.pad(np.asarray(x, dtype=np.float64).reshape(-1, d), ((0, 0), (0, p - d)))), ""
    centre = points.mean(0)
    _, sv, vt = np.linalg.svd(points - centre, full_matrices=False)
    basis = vt[:p] * np.sign(vt[:p, [0]] + (vt[:p, [0]] == 0))  # (p, d)
    share = float((sv[:p] ** 2).sum() / max((sv**2).sum(), 1e-300))
    note = f"projection of d = {d} onto principal components 1–{p} ({share:.0%} of the variance)"
    return (lambda x: (np.asarray(x, dtype=np.float64).reshape(-1, d) - centre) @ basis.T), note


def _scene(trajectory: Trajectory, p: int) -> _Scene:
    """Gather leaders, clusters, K and S of a single-sequence trajectory (see `hardmax.theory`)."""
    _single(trajectory)
    real = trajectory.mask.detach().cpu().numpy().astype(bool)
    path = trajectory.tokens.detach().cpu().double().numpy()[:, real]
    labels = find_clusters(trajectory).labels.detach().cpu().numpy()[real]
    since = leader_layers(trajectory).detach().cpu().numpy()[real]
    d = path.shape[-1]
    leaders = path[-1, since >= 0]
    vertices, k_dim, edges, S = np.empty((0, d)), -1, np.empty((0, 2), np.int64), np.empty((0, d))
    notes = []
    if len(leaders):  # always true for hardmax (the token of largest A-norm leads); keeps plots total
        try:
            K = polytope(leaders)
            vertices, k_dim = np.asarray(K.vertices, dtype=np.float64).reshape(-1, d), K.dim
            edges = np.array([face for face in K.faces if len(face) == 2], dtype=np.int64).reshape(-1, 2)
            S = np.asarray(limit_set(K, trajectory.A.detach().cpu().double().numpy()), dtype=np.float64)
        except ValueError:  # too many faces to enumerate (high dimension): draw the hull of the leaders only
            vertices = np.unique(leaders, axis=0)
            k_dim = int(np.linalg.matrix_rank(vertices - vertices.mean(0))) if len(vertices) > 1 else 0
            notes.append("faces of K and S not drawn (too many faces)")
        # Vertices of K are already marked by the leaders' stars; keep the other points of S. Above
        # the plane, S has a point on most faces of K: keep those some token converges to.
        S = S.reshape(-1, d)
        scale = max(float(np.abs(path).max()), 1.0)
        gap = np.linalg.norm(S[:, None] - vertices[None], axis=-1).min(1, initial=np.inf)
        S = S[gap > 1e-6 * scale]
        if d > 2:
            reach = np.linalg.norm(S[:, None] - path[-1][None], axis=-1).min(1, initial=np.inf)
            S = S[reach <= 1e-3 * scale]
    project, note = _projection(path.reshape(-1, d), p)
    note = "; ".join([note, *notes] if note else notes)
    return _Scene(
        path=project(path).reshape(path.shape[0], path.shape[1], p),
        labels=labels,
        leader_since=since,
        vertices=project(vertices),
        edges=edges,
        k_dim=int(k_dim),
        limit=project(S),
        projected=d > p,
        note=note,
    )


def _default_layers(total: int) -> tuple[int, ...]:
    """Figure 2's layers (0, 1, 2, 5, 30) cut to a run of `total` layers, ending at its last layer."""
    return tuple(k for k in FIGURE2_LAYERS if k < total) + (total,)


def _check_layers(layers: Sequence[int] | None, total: int) -> tuple[int, ...]:
    chosen = _default_layers(total) if layers is None else tuple(int(k) for k in layers)
    if not chosen:
        raise ValueError("layers must name at least one layer to show")
    bad = [k for k in chosen if not 0 <= k <= total]
    if bad:
        raise ValueError(f"layers {bad} are outside the trajectory's layers 0..{total}")
    return chosen


# --------------------------------------------------------------------------------------------
# Drawing one panel.
# --------------------------------------------------------------------------------------------


def _draw_panel(ax: Axes, scene: _Scene, layer: int, box: tuple[np.ndarray, np.ndarray]
                ) -> Callable[[int], None]:
    """Draw `scene` at `layer` into a 2-D axes; return a function that moves the tokens to another
    layer (animations redraw only the tokens: K, S, limits and ticks stay)."""
    colours = scene.colours
    v = scene.vertices
    light = scene.projected  # the inner edges of K show: draw them lighter
    if len(v) >= 3:
        with contextlib.suppress(QhullError):  # collinear vertices: K is a segment, drawn below
            ax.fill(*v[ConvexHull(v).vertices].T, facecolor=_K_FACE, edgecolor="none", zorder=0)
    if len(scene.edges):
        ax.add_collection(LineCollection(v[scene.edges], colors=_K_EDGE, linewidths=0.5 if light else 1.0,
                                         alpha=0.6 if light else 1.0, zorder=1))
    if len(scene.limit):
        ax.scatter(*scene.limit.T, marker="D", s=46, facecolors="none", edgecolors="black", linewidths=0.9,
                   zorder=3)
    trails = LineCollection([], colors=colours, linewidths=0.8, alpha=0.55, zorder=2)
    ax.add_collection(trails)
    dots = ax.scatter(np.empty(0), np.empty(0), s=22, edgecolors="white", linewidths=0.4, zorder=4)
    stars = ax.scatter(np.empty(0), np.empty(0), marker="*", s=190, edgecolors="black", linewidths=0.6,
                       zorder=5)
    ax.set_xlim(box[0][0], box[1][0])
    ax.set_ylim(box[0][1], box[1][1])
    ax.set_aspect("equal")
    ax.tick_params(labelsize=7, length=2)
    ax.locator_params(nbins=4)

    def show(k: int) -> None:
        trails.set_segments(list(np.swapaxes(scene.path[: k + 1], 0, 1)))  # n trails of k + 1 points
        position, lead = scene.path[k], scene.leaders_at(k)
        dots.set_offsets(position[~lead])
        dots.set_facecolor(colours[~lead])
        stars.set_offsets(position[lead])
        stars.set_facecolor(colours[lead])
        ax.set_title(f"layer {k}", fontsize=10)

    show(layer)
    return show


def _ordered_polygon(points: np.ndarray) -> np.ndarray:
    """Order coplanar points (m, 3) by angle around their centroid, within their plane."""
    centred = points - points.mean(0)
    _, _, vt = np.linalg.svd(centred, full_matrices=False)
    uv = centred @ vt[:2].T
    return points[np.argsort(np.arctan2(uv[:, 1], uv[:, 0]))]


def _draw_panel_3d(ax, scene: _Scene, layer: int, box: tuple[np.ndarray, np.ndarray], azim: float = -60.0):
    """Draw `scene` (3 plot coordinates) at `layer` into a 3-D axes."""
    colours = scene.colours
    v = scene.vertices
    faces: list[np.ndarray] = []
    if scene.k_dim == 3 and len(v) >= 4:
        with contextlib.suppress(QhullError):
            faces = list(v[ConvexHull(v).simplices])
    elif scene.k_dim == 2 and len(v) >= 3:
        faces = [_ordered_polygon(v)]
    if faces:
        ax.add_collection3d(Poly3DCollection(faces, facecolors=_K_FACE, edgecolors="none", alpha=0.45))
    if len(scene.edges):
        ax.add_collection3d(Line3DCollection(v[scene.edges], colors=_K_EDGE, linewidths=1.0))
    if layer > 0:
        trails = np.swapaxes(scene.path[: layer + 1], 0, 1)
        ax.add_collection3d(Line3DCollection(trails, colors=colours, linewidths=0.7, alpha=0.5))
    if len(scene.limit):
        ax.scatter(*scene.limit.T, marker="D", s=40, facecolors="none", edgecolors="black",
                   linewidths=0.9, depthshade=False)
    position, lead = scene.path[layer], scene.leaders_at(layer)
    if (~lead).any():
        ax.scatter(*position[~lead].T, s=18, c=colours[~lead], edgecolors="white", linewidths=0.3,
                   depthshade=False)
    if lead.any():
        ax.scatter(*position[lead].T, marker="*", s=160, c=colours[lead], edgecolors="black",
                   linewidths=0.6, depthshade=False)
    ax.set_xlim(box[0][0], box[1][0])
    ax.set_ylim(box[0][1], box[1][1])
    ax.set_zlim(box[0][2], box[1][2])
    ax.set_box_aspect((1, 1, 1), zoom=0.95)
    ax.view_init(elev=22, azim=azim)
    ax.set_title(f"layer {layer}", fontsize=10)
    ax.tick_params(labelsize=6, pad=0)
    ax.locator_params(nbins=4)


def _legend_handles(limit_label: str | None) -> list:
    handles = [
        Line2D([], [], marker="*", linestyle="none", markersize=12, markerfacecolor="0.75",
               markeredgecolor="black", label="leader"),
        Line2D([], [], marker="o", linestyle="none", markersize=5, markerfacecolor=_PALETTE[0],
               markeredgecolor="white", label="token (colour: its limit)"),
        Line2D([], [], color=_PALETTE[0], linewidth=0.8, alpha=0.6, label="trail"),
        Patch(facecolor=_K_FACE, edgecolor=_K_EDGE, label="K: hull of the leaders"),
    ]
    if limit_label:
        handles.append(Line2D([], [], marker="D", linestyle="none", markersize=6, markerfacecolor="none",
                              markeredgecolor="black", label=limit_label))
    return handles


def _add_legend(fig: Figure, limit_label: str | None) -> None:
    # "outside" places the legend in a margin reserved by the constrained layout engine.
    loc = "outside lower center" if fig.get_layout_engine() is not None else "lower center"
    fig.legend(handles=_legend_handles(limit_label), loc=loc, ncol=5, frameon=False, fontsize=8,
               handletextpad=0.4, columnspacing=1.2)


# --------------------------------------------------------------------------------------------
# Public figures.
# --------------------------------------------------------------------------------------------


def plot_layers(
    trajectory: Trajectory,
    layers: Sequence[int] | None = None,
    *,
    ax_row: Sequence[Axes] | None = None,
    title: str | None = None,
) -> Figure:
    """Panels of one run at the given layers, in the plane.

    Leaders are stars, the other tokens dots coloured by their limit cluster (`theory.find_clusters`),
    with trails of their past positions; K (hull of the final leaders) is shaded and the points of S
    off the vertices of K are hollow diamonds. Tokens of dimension d > 2 are projected onto their two
    principal components (said in the title; only the points of S that tokens reach are marked);
    d = 1 is drawn on the horizontal axis.

    Args:
        trajectory: a single-sequence `Trajectory` (tokens (layers + 1, n, d)).
        layers: layers to show; default (0, 1, 2, 5, 30) cut to the run and ending at its last layer.
        ax_row: axes to draw into, one per layer (e.g. a row of a larger figure); None makes a figure.
        title: the figure's title, or, when drawing into `ax_row`, the row's label (left y-label).

    Returns:
        The figure drawn into.
    """
    _single(trajectory)
    chosen = _check_layers(layers, trajectory.layers)
    scene = _scene(trajectory, 2)
    if ax_row is None:
        fig = Figure(figsize=(2.3 * len(chosen) + 0.3, 3.4), layout="constrained")
        axes = list(np.atleast_1d(fig.subplots(1, len(chosen))))
        heading = "\n".join(s for s in (title, scene.note) if s)
        if heading:
            fig.suptitle(heading, fontsize=11)
        _add_legend(fig, scene.limit_label if len(scene.limit) else None)
    else:
        axes = list(ax_row)
        if len(axes) != len(chosen):
            raise ValueError(f"ax_row has {len(axes)} axes for {len(chosen)} layers")
        fig = axes[0].figure
        if title or scene.note:
            axes[0].set_ylabel("\n".join(s for s in (title, scene.note) if s), fontsize=10)
    box = scene.box()
    for i, (ax, layer) in enumerate(zip(axes, chosen, strict=True)):
        _draw_panel(ax, scene, layer, box)
        if i > 0:  # the panels share their limits: one column of y labels is enough
            ax.tick_params(labelleft=False)
    return fig


def plot_layers_3d(trajectory: Trajectory, layers: Sequence[int] | None = None, *,
                   title: str | None = None) -> Figure:
    """Like `plot_layers`, for a run in R^3: one 3-D panel per layer (K drawn as a translucent solid).

    Args:
        trajectory: a single-sequence `Trajectory` with d = 3. layers, title: as in `plot_layers`.
    """
    _single(trajectory)
    if trajectory.tokens.shape[-1] != 3:
        raise ValueError(f"plot_layers_3d needs tokens in R^3, got d = {trajectory.tokens.shape[-1]}")
    chosen = _check_layers(layers, trajectory.layers)
    scene = _scene(trajectory, 3)
    # 3-D axes keep a lot of empty space around their box, which constrained layout cannot
    # trim: place them by hand, edge to edge.
    fig = Figure(figsize=(2.8 * len(chosen) + 0.2, 3.5))
    fig.subplots_adjust(left=0.0, right=0.97, bottom=0.1, top=0.86 if title else 0.95, wspace=0.05)
    if title:
        fig.suptitle(title, fontsize=11)
    box = scene.box()
    for i, layer in enumerate(chosen):
        _draw_panel_3d(fig.add_subplot(1, len(chosen), i + 1, projection="3d"), scene, layer, box)
    _add_legend(fig, scene.limit_label if len(scene.limit) else None)
    return fig


def plot_trajectory(trajectory: Trajectory, layers: Sequence[int] | None = None, *,
                    title: str | None = None) -> Figure:
    """The natural picture of a run: 3-D panels for d = 3, else `plot_layers` (projected when d > 2)."""
    _single(trajectory)
    if trajectory.tokens.shape[-1] == 3:
        return plot_layers_3d(trajectory, layers, title=title)
    return plot_layers(trajectory, layers, title=title)


def figure2(
    trajectories: Mapping[str, Trajectory] | None = None,
    *,
    layers: Sequence[int] | None = None,
) -> Figure:
    """The paper's Figure 2: four configurations in the plane, each shown at layers 0, 1, 2, 5, 30.

    Rows: a triangle K with interior tokens; an emerging leader; a square K; clusters that are not
    at leaders (square plus (±0.5, 0)), all with α = 0.5 and A = I (`theory.figure2_configurations`).

    Args:
        trajectories: name -> single-sequence 2-D `Trajectory`, one row each; None runs the paper's
            configurations with α = `FIGURE2_ALPHA`, A = I for max(layers) layers.
        layers: the layers shown in each row; default (0, 1, 2, 5, 30), cut to the shortest run and
            ending at its last layer.

    Returns:
        The figure (rows × len(layers) panels).
    """
    if trajectories is None:
        trajectories = {
            name: simulate(tokens, alpha=FIGURE2_ALPHA, layers=max(layers or FIGURE2_LAYERS))
            for name, tokens in figure2_configurations().items()
        }
    if not trajectories:
        raise ValueError("figure2 needs at least one trajectory")
    layers = _check_layers(layers, min(t.layers for t in trajectories.values()))
    rows, cols = len(trajectories), len(layers)
    fig = Figure(figsize=(2.1 * cols + 0.5, 2.15 * rows + 0.6), layout="constrained")
    axes = np.asarray(fig.subplots(rows, cols, squeeze=False))
    for r, (name, trajectory) in enumerate(trajectories.items()):
        plot_layers(trajectory, layers, ax_row=axes[r], title=name.replace("_", " "))
        if r > 0:
            for ax in axes[r]:
                ax.set_title("")
    fig.suptitle(f"Hardmax dynamics, {_describe(next(iter(trajectories.values())))} "
                 "(Alcalde, Fantuzzi, Zuazua 2024, Figure 2)", fontsize=11)
    _add_legend(fig, "S: projection of 0 on a face of K")
    # Lay out once and freeze: saving to several formats would otherwise redo it for each.
    fig.draw_without_rendering()
    fig.set_layout_engine("none")
    return fig


def _describe(trajectory: Trajectory) -> str:
    """The parameters of a run as text, e.g. "α = 0.5, A = I"."""
    alphas = trajectory.alpha.detach().cpu().double().unique()
    if len(alphas) == 1:
        alpha = f"α = {float(alphas[0]):g}"
    else:
        alpha = "α varying by layer" if len(alphas) else "no layers"
    eye = np.eye(trajectory.A.shape[-1])
    A = "A = I" if np.array_equal(trajectory.A.detach().cpu().double().numpy(), eye) else "A ≠ I"
    return f"{alpha}, {A}"


def animate(
    trajectory: Trajectory,
    path: str | os.PathLike,
    *,
    fps: int = 8,
    max_frames: int = 40,
    dpi: int = 90,
    title: str | None = None,
) -> Path:
    """Write a GIF of a run, one frame per shown layer (the last frame held for half a second).

    d = 2 is drawn as is, d = 3 as a slowly turning 3-D scatter, d > 3 projected onto the top two
    principal components (said in the title). Written atomically (temporary file, then rename).

    Args:
        trajectory: a single-sequence `Trajectory`.
        path: the .gif file to write (parent folders are created).
        fps: frames per second. max_frames: at most this many layers are shown, denser early on
            (where the dynamics move most). dpi: resolution (the frame is 4.8 × 5 inches).
        title: shown above the layer number.

    Returns:
        The path written.
    """
    _single(trajectory)
    if fps < 1 or max_frames < 1:
        raise ValueError(f"fps and max_frames must be ≥ 1, got {fps} and {max_frames}")
    p = 3 if trajectory.tokens.shape[-1] == 3 else 2
    scene = _scene(trajectory, p)
    total = trajectory.layers
    frames = _frame_layers(total, max_frames)
    held = frames + [frames[-1]] * (fps // 2)  # hold the end for half a second
    fig = Figure(figsize=(4.8, 5.0))
    heading = "\n".join(s for s in (title, scene.note) if s)
    # A fixed layout (no layout engine): every frame must have the same size and placement.
    fig.subplots_adjust(left=0.1, right=0.95, bottom=0.06, top=0.91 - 0.035 * (heading.count("\n") + 1))
    if heading:
        fig.suptitle(heading, fontsize=9 if scene.note else 11)
    ax = fig.add_subplot(projection="3d" if p == 3 else None)
    box = scene.box()
    show = None if p == 3 else _draw_panel(ax, scene, 0, box)
    target = Path(path)
    writer = PillowWriter(fps=fps)
    with _atomic_path(target) as tmp:
        with writer.saving(fig, str(tmp), dpi):
            for i, layer in enumerate(held):
                if show is None:  # 3-D: redraw everything, turning the view a little each frame
                    ax.clear()
                    _draw_panel_3d(ax, scene, layer, box, azim=-60.0 + 40.0 * i / max(len(held) - 1, 1))
                else:
                    show(layer)
                ax.set_title(f"layer {layer} of {total}", fontsize=10)
                writer.grab_frame()
    return target


def _frame_layers(total: int, max_frames: int) -> list[int]:
    """Layers to show: all of them if they fit, else up to `max_frames` spaced quadratically."""
    if total + 1 <= max_frames:
        return list(range(total + 1))
    return sorted({int(round(k)) for k in np.linspace(0, np.sqrt(total), max_frames) ** 2} | {total})


# --------------------------------------------------------------------------------------------
# Saving.
# --------------------------------------------------------------------------------------------


@contextlib.contextmanager
def _atomic_path(target: Path) -> Iterator[Path]:
    """Yield a temporary path beside `target` (same suffix, so writers know the format); on success
    rename it onto `target`, on failure delete it. Readers never see a half-written file."""
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, name = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=f".tmp{target.suffix}")
    os.close(fd)
    tmp = Path(name)
    try:
        yield tmp
        os.chmod(tmp, 0o644)  # mkstemp makes 0600 files
        os.replace(tmp, target)
    finally:
        tmp.unlink(missing_ok=True)


def save_figure(fig: Figure, path_stem: str | os.PathLike, formats: Sequence[str] = ("png", "pdf"), *,
                dpi: int = 150) -> list[Path]:
    """Save `fig` as `path_stem.<format>` for each format, atomically (temp file + `os.replace`).

    Args:
        fig: the figure. path_stem: path without suffix (parent folders are created).
        formats: Matplotlib formats, e.g. ("png", "pdf", "svg"). dpi: resolution of raster formats.

    Returns:
        The paths written, in the order of `formats`.
    """
    if not formats:
        raise ValueError("save_figure needs at least one format")
    stem = Path(path_stem)
    written = []
    for fmt in formats:
        target = stem.parent / f"{stem.name}.{fmt}"
        with _atomic_path(target) as tmp:
            fig.savefig(tmp, format=fmt, dpi=dpi, facecolor="white")
        written.append(target)
    return written
