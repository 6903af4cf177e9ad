"""Rows of panels and GIFs of a `Scene` (any `Solution`), and the paper's figures spelled with them.

    scene_figure(scene, shown)        THE row of panels: plane, time, or 3-D; K, S and a legend for the paper's layers
    animate_scene(scene, path, ...)   THE GIF: tokens moving frame to frame (2-D), a turning view (3-D)
    plot_layers / plot_layers_3d / plot_trajectory / animate   a run at chosen layers, its GIF
    figure2 / animate_figure2         the paper's Figure 2, its four rows moving together
"""


from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from hardmax.dynamics import Solution, simulate
from hardmax.plots.panels import add_legend, draw_panel, draw_panel_3d
from hardmax.plots.save import check_fps, save_gif
from hardmax.plots.scene import FIGURE2_LAYERS, Scene, check_layers, check_single, make_scene
from hardmax.theory import FIGURE2_ALPHA, paper_figure2_configurations

__all__ = ["animate", "animate_figure2", "animate_scene", "figure2", "frame_layers", "plot_layers", "plot_layers_3d",
           "plot_trajectory", "scene_figure"]

# --------------------------------------------------------------------------------------------
# The one row of panels and the one GIF, for every scene.
# --------------------------------------------------------------------------------------------


def scene_figure(scene: Scene, shown: Sequence[int], *, ax_row: Sequence[Axes] | None = None,
                 title: str | None = None, size: float = 2.3) -> Figure:
    """A row of panels of `scene`, one per saved state in `shown` (indices into the saved states; negative count
    from the end), sharing their limits.

    The paper's layers get the legend (leader, token, trail, K, S); 3-D scenes are placed by hand (3-D axes keep
    empty space constrained layout cannot trim).

    Args:
        scene: from `make_scene`. shown: saved-state indices, one panel each.
        ax_row: 2-D axes to draw into, one per panel (a row of a larger figure); None makes a figure.
        title: the figure's title, or, when drawing into `ax_row`, the row's label (left y-label).
        size: the width of a panel in inches.

    Returns:
        The figure drawn into.
    """
    saved = scene.path.shape[0]
    shown = [int(k) % saved for k in shown]
    heading = "\n".join(s for s in (title, scene.note) if s)
    legend = scene.paper
    box = scene.box()
    if scene.dimension == 3:
        fig = Figure(figsize=((size + (0.5 if legend else 0.0)) * len(shown) + 0.2, size + (1.2 if legend else 0.4)))
        fig.subplots_adjust(left=0.0, right=0.97, bottom=0.1 if legend else 0.02,
                            top=0.86 if heading else 0.95, wspace=0.05)
        if heading:
            fig.suptitle(heading, fontsize=11)
        for i, k in enumerate(shown):
            draw_panel_3d(fig.add_subplot(1, len(shown), i + 1, projection="3d"), scene, k, box)
        if legend:
            add_legend(fig, scene.limit_label if len(scene.limit) else None)
        return fig
    if ax_row is None:
        fig = Figure(figsize=(size * len(shown) + 0.3, size + (1.1 if legend else 0.4)), layout="constrained")
        axes = list(np.atleast_1d(fig.subplots(1, len(shown))))
        if heading:
            fig.suptitle(heading, fontsize=11)
        if legend:
            add_legend(fig, scene.limit_label if len(scene.limit) else None)
    else:
        axes = list(ax_row)
        if len(axes) != len(shown):
            raise ValueError(f"ax_row has {len(axes)} axes for {len(shown)} layers")
        fig = axes[0].figure
        if heading:
            axes[0].set_ylabel(heading, fontsize=10)
    for i, (ax, k) in enumerate(zip(axes, shown, strict=True)):
        draw_panel(ax, scene, k, box)
        if i > 0 and scene.dimension == 2:  # the panels share their limits: one column of y labels is enough
            ax.tick_params(labelleft=False)
    return fig


def animate_scene(scene: Scene, path: str | os.PathLike, frames: Sequence[int], *, fps: int = 8, dpi: int = 90,
                  title: str | None = None, size: tuple[float, float] = (4.8, 5.0)) -> Path:
    """Write a GIF of `scene`, one frame per saved state in `frames` (the last frame held for half a second).

    2-D scenes move their tokens frame to frame; 3-D scenes are redrawn, the view turning slowly. Written
    atomically (temporary file, then rename).

    Args:
        scene: from `make_scene`. path: the .gif file to write (parent folders are created).
        frames: saved-state indices, in order. fps: frames per second. dpi: resolution.
        title: shown above the panel (with the scene's note). size: the frame in inches.

    Returns:
        The path written.
    """
    check_fps(fps)
    frames = [int(k) for k in frames]
    fig = Figure(figsize=size)
    heading = "\n".join(s for s in (title, scene.note) if s)
    # A fixed layout (no layout engine): every frame must have the same size and placement.
    fig.subplots_adjust(left=0.1, right=0.95, bottom=0.06,
                        top=0.91 - 0.035 * (heading.count("\n") + 1))
    if heading:
        fig.suptitle(heading, fontsize=9 if scene.note else 11)
    three = scene.dimension == 3
    ax = fig.add_subplot(projection="3d" if three else None)
    box = scene.box()
    show = None if three else draw_panel(ax, scene, frames[0], box)

    def draw(i: int) -> None:
        k = frames[i]
        if show is None:  # 3-D: redraw everything, turning the view a little each frame
            ax.clear()
            draw_panel_3d(ax, scene, k, box, azim=-60.0 + 40.0 * i / max(len(frames) - 1, 1))
        else:
            show(k)
        ax.set_title(scene.stamp(k, total=True), fontsize=10)

    return save_gif(fig, draw, len(frames), path, fps=fps, dpi=dpi)  # the end held for half a second


# --------------------------------------------------------------------------------------------
# The paper's figures: thin spellings of the row and the GIF above.
# --------------------------------------------------------------------------------------------


def _saved_indices(trajectory: Solution, layers: Sequence[int]) -> list[int]:
    """The saved-state index of each layer; ValueError for a layer that is not saved."""
    index = {step: i for i, step in enumerate(trajectory.steps)}
    missing = [k for k in layers if k not in index]
    if missing:
        raise ValueError(f"layers {missing} are not saved; solve with Save() to keep every layer")
    return [index[k] for k in layers]


def plot_layers(
    trajectory: Solution,
    layers: Sequence[int] | None = None,
    *,
    ax_row: Sequence[Axes] | None = None,
    title: str | None = None,
) -> Figure:
    """Panels of one run at the given layers, in the plane (`scene_figure` of `make_scene(trajectory, 2)`).

    The tokens are dots coloured by their limit cluster (`scene.cluster_labels`), with trails of their past
    positions. For the paper's hardmax layers, leaders are stars, K (hull of the final leaders) is shaded and
    the points of S off the vertices of K are hollow diamonds; any other run shows its manifold's background
    instead (the tokens' hull in R^d, the unit circle). Tokens of dimension d > 2 are projected onto their two
    principal components (said in the title; only the points of S that tokens reach are marked); d = 1 is drawn
    on the horizontal axis.

    Args:
        trajectory: a single-sequence `Solution` of layers (tokens (saved, n, d); `simulate`, `Euler.layers`).
        layers: layers to show; default (0, 1, 2, 5, 30) cut to the run and ending at its last layer.
        ax_row: axes to draw into, one per layer (e.g. a row of a larger figure); None makes a figure.
        title: the figure's title, or, when drawing into `ax_row`, the row's label (left y-label).

    Returns:
        The figure drawn into.
    """
    check_single(trajectory)
    chosen = check_layers(layers, trajectory.layers)
    return scene_figure(make_scene(trajectory, 2, clock="layer"), _saved_indices(trajectory, chosen),
                        ax_row=ax_row, title=title)


def plot_layers_3d(trajectory: Solution, layers: Sequence[int] | None = None, *,
                   title: str | None = None) -> Figure:
    """Like `plot_layers`, for a run in R^3: one 3-D panel per layer (K drawn as a translucent solid).

    Args:
        trajectory: a single-sequence `Solution` with d = 3. layers, title: as in `plot_layers`.
    """
    check_single(trajectory)
    if trajectory.tokens.shape[-1] != 3:
        raise ValueError(f"plot_layers_3d needs tokens in R^3, got d = {trajectory.tokens.shape[-1]}")
    chosen = check_layers(layers, trajectory.layers)
    return scene_figure(make_scene(trajectory, 3, clock="layer"), _saved_indices(trajectory, chosen),
                        title=title)


def plot_trajectory(trajectory: Solution, layers: Sequence[int] | None = None, *,
                    title: str | None = None) -> Figure:
    """The natural picture of a run: 3-D panels for d = 3, else `plot_layers` (projected when d > 2)."""
    check_single(trajectory)
    if trajectory.tokens.shape[-1] == 3:
        return plot_layers_3d(trajectory, layers, title=title)
    return plot_layers(trajectory, layers, title=title)


def figure2(
    trajectories: Mapping[str, Solution] | None = None,
    *,
    layers: Sequence[int] | None = None,
) -> Figure:
    """The paper's Figure 2: four configurations in the plane, each shown at layers 0, 1, 2, 5, 30.

    Rows: a triangle K with interior tokens; an emerging leader; a square K; clusters that are not
    at leaders (square plus (±0.5, 0)), all with α = 0.5 and A = I: the authors' configurations
    (`theory.paper_figure2_configurations`, random followers with a fixed seed). K is shaded, and the
    points of S that tokens reach are marked, at the final layer only, as in the paper.

    Args:
        trajectories: name -> single-sequence 2-D `Solution`, one row each; None runs the paper's
            configurations with α = `FIGURE2_ALPHA`, A = I for max(layers) layers.
        layers: the layers shown in each row; default (0, 1, 2, 5, 30), cut to the shortest run and
            ending at its last layer.

    Returns:
        The figure (rows × len(layers) panels).
    """
    if trajectories is None:
        trajectories = {
            name: simulate(tokens, alpha=FIGURE2_ALPHA, layers=max(layers or FIGURE2_LAYERS))
            for name, tokens in paper_figure2_configurations().items()
        }
    if not trajectories:
        raise ValueError("figure2 needs at least one trajectory")
    layers = check_layers(layers, min(t.layers for t in trajectories.values()))
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
    add_legend(fig, "limit in S: projection of 0 on a face of K")
    # Lay out once and freeze: saving to several formats would otherwise redo it for each.
    fig.draw_without_rendering()
    fig.set_layout_engine("none")
    return fig


def _describe(trajectory: Solution) -> str:
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
    trajectory: Solution,
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
    `animate_scene` of `make_scene(trajectory)`, named by layer.

    Args:
        trajectory: a single-sequence `Solution`.
        path: the .gif file to write (parent folders are created).
        fps: frames per second. max_frames: at most this many layers are shown, denser early on
            (where the dynamics move most). dpi: resolution (the frame is 4.8 × 5 inches).
        title: shown above the layer number.

    Returns:
        The path written.
    """
    check_single(trajectory)
    check_fps(fps)
    if max_frames < 1:
        raise ValueError(f"max_frames must be ≥ 1, got {max_frames}")
    p = 3 if trajectory.tokens.shape[-1] == 3 else 2
    scene = make_scene(trajectory, p, clock="layer")
    frames = frame_layers(len(scene.times) - 1, max_frames)
    return animate_scene(scene, path, frames, fps=fps, dpi=dpi, title=title)


def animate_figure2(
    trajectories: Mapping[str, Solution],
    path: str | os.PathLike,
    *,
    fps: int = 8,
    max_frames: int = 40,
    dpi: int = 80,
) -> Path:
    """Write a GIF of several 2-D runs side by side (the four rows of Figure 2), all at the same layer.

    Each run gets one panel (a grid of up to two columns), drawn as in `figure2`; every frame moves
    all of them to the next shown layer, so the rows can be compared as they converge.

    Args:
        trajectories: name -> single-sequence 2-D `Solution` (e.g. the paper's four configurations).
        path: the .gif file to write (parent folders are created). fps, max_frames, dpi: as in `animate`.

    Returns:
        The path written.
    """
    if not trajectories:
        raise ValueError("animate_figure2 needs at least one trajectory")
    check_fps(fps)
    if max_frames < 1:
        raise ValueError(f"max_frames must be ≥ 1, got {max_frames}")
    for name, trajectory in trajectories.items():
        check_single(trajectory)
        if trajectory.tokens.shape[-1] != 2:
            raise ValueError(f"animate_figure2 draws runs in the plane; {name!r} has d = {trajectory.tokens.shape[-1]}")
    total = min(t.layers for t in trajectories.values())
    frames = frame_layers(total, max_frames)
    cols = 1 if len(trajectories) == 1 else 2
    rows = -(-len(trajectories) // cols)
    fig = Figure(figsize=(3.3 * cols + 0.2, 3.3 * rows + 0.9))
    # A fixed layout (no layout engine): every frame must have the same size and placement.
    fig.subplots_adjust(left=0.06, right=0.97, bottom=0.1, top=0.9, wspace=0.15, hspace=0.25)
    axes = np.atleast_1d(fig.subplots(rows, cols, squeeze=False)).ravel()
    shows = []
    for ax, (name, trajectory) in zip(axes, trajectories.items(), strict=False):
        scene = make_scene(trajectory, 2)
        shows.append(draw_panel(ax, scene, 0, scene.box()))
        ax.set_title(name.replace("_", " "), fontsize=9)
    for ax in axes[len(trajectories):]:
        ax.set_visible(False)
    add_legend(fig, "limit in S: projection of 0 on a face of K")
    heading = fig.suptitle("", fontsize=11)

    def draw(i: int) -> None:
        for show in shows:
            show(frames[i])
        heading.set_text(f"Hardmax dynamics, {_describe(next(iter(trajectories.values())))}: "
                         f"layer {frames[i]} of {total}")

    return save_gif(fig, draw, len(frames), path, fps=fps, dpi=dpi)  # the end held for half a second


def frame_layers(total: int, max_frames: int) -> list[int]:
    """Layers to show: all of them if they fit, else up to `max_frames` spaced quadratically."""
    if total + 1 <= max_frames:
        return list(range(total + 1))
    return sorted({int(round(k)) for k in np.linspace(0, np.sqrt(total), max_frames) ** 2} | {total})
