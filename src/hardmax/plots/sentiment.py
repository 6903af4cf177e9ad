"""Figures of the sentiment classifier: leader words and the evolution of a review's tokens.

Consumes `Explanation` / counts from `hardmax.explain` and a trained `HardmaxClassifier`. Like the rest
of `hardmax.plots`, it draws on `matplotlib.figure.Figure` objects (no pyplot, no global backend);
figures are saved with `hardmax.plots.save_figure`, GIFs atomically here. No training or data loading.

A review's picture: leaders are stars in their own colour (tab20, up to 20 distinct colours) and the
legend lists their words, so that every follower (a dot in its leader's colour) can be traced to its
leader; leader names are also written beside the stars when they fit without overlapping. When almost
every word is its own leader (usual for d ≥ 8), the stars are the decisive leaders (|v·z + b| largest)
and the other words are dots coloured by the side of the decoder their own position falls on.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from pathlib import Path

import numpy as np
from matplotlib import colormaps
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import Patch

from hardmax.explain import Explanation, project_review
from hardmax.models import HardmaxClassifier
from hardmax.plots.save import save_gif

__all__ = ["animate_review", "plot_leader_words", "plot_review", "shown_leaders"]

POSITIVE, NEGATIVE = "#2a9d8f", "#e76f51"
FOLLOWER_GREY = (0.55, 0.55, 0.55, 1.0)
MAX_COLOURS = 20  # tab20: distinct colours for up to 20 leaders; more are listed as "… and N more"
MAX_LABELS = 8  # leader names written beside their stars when there are at most this many


def plot_leader_words(counts: dict[str, Counter], words: Sequence[str], *, top: int = 20, title: str = "") -> Figure:
    """Two horizontal bar charts: the most frequent leader words in positive and negative reviews."""
    fig = Figure(figsize=(10, 0.28 * top + 1.5), layout="tight")
    axes = fig.subplots(1, 2)
    for ax, side, colour in ((axes[0], "positive", POSITIVE), (axes[1], "negative", NEGATIVE)):
        common = counts.get(side, Counter()).most_common(top)
        labels = [words[k] for k, _ in common][::-1]
        values = [c for _, c in common][::-1]
        ax.barh(range(len(values)), values, color=colour)
        ax.set_yticks(range(len(values)), labels)
        ax.set_xlabel("reviews in which the word is a leader")
        ax.set_title(f"{side} reviews")
        ax.spines[["top", "right"]].set_visible(False)
    fig.suptitle(title)
    return fig


def shown_leaders(explanation: Explanation, decisive: float = 2.0) -> list[int]:
    """The leaders drawn as stars: all of them, or, when almost every word leads, the decisive ones
    (most decisive first); at most `MAX_COLOURS` get a colour of their own."""
    if explanation.mostly_leaders and explanation.word_logits:
        return explanation.decisive_leaders(decisive)
    return sorted(explanation.leaders, key=lambda i: -len(explanation.follows.get(i, [])))


def _colours(explanation: Explanation, stars: list[int]) -> tuple[list, dict[int, tuple]]:
    """A colour per word (its leader's; grey if none drawn) and per drawn leader."""
    cmap = colormaps["tab20"]
    # tab20 pairs each hue with its light shade: the ten hues first, then the shades.
    order = [*range(0, MAX_COLOURS, 2), *range(1, MAX_COLOURS, 2)]
    star_colour = {leader: cmap(order[rank % MAX_COLOURS]) for rank, leader in enumerate(stars)}
    m = len(explanation.words)
    if explanation.mostly_leaders and explanation.word_logits:  # every word its own leader: colour by side
        words = [POSITIVE if _towards(explanation, i) else NEGATIVE for i in range(m)]
    else:
        words = [FOLLOWER_GREY] * m
        for leader in reversed(stars):  # a follower tied between leaders takes the first one's colour
            for f in explanation.follows.get(leader, []):
                words[f] = star_colour[leader]
    for leader, colour in star_colour.items():
        words[leader] = colour
    return words, star_colour


def _place_labels(ax, now: np.ndarray, stars: list[int], words: list[str], limits: tuple) -> None:
    """Write leader names beside their stars, each at the first of eight offsets whose box overlaps no
    placed name and no star (boxes estimated in axes fractions); a name with no free place is left to
    the legend."""
    (x0, x1), (y0, y1) = limits
    to_axes = np.array([1 / (x1 - x0), 1 / (y1 - y0)])
    origin = np.array([x0, y0])
    star_boxes = [((now[i] - origin) * to_axes - 0.02, (now[i] - origin) * to_axes + 0.02) for i in stars]
    placed: list[tuple[np.ndarray, np.ndarray]] = []
    offsets = [(1, 1), (1, -1), (-1, 1), (-1, -1), (1, 0), (-1, 0), (0, 1), (0, -1)]
    for i in stars:
        centre = (now[i] - origin) * to_axes
        size = np.array([0.022 * len(words[i]) + 0.01, 0.06])
        for dx, dy in offsets:
            corner = centre + np.array([0.025 * dx - (size[0] if dx < 0 else 0 if dx > 0 else size[0] / 2),
                                        0.025 * dy - (size[1] if dy < 0 else 0 if dy > 0 else size[1] / 2)])
            box = (corner, corner + size)
            inside = (box[0] >= 0).all() and (box[1] <= 1).all()
            clash = any((box[0] < b[1]).all() and (b[0] < box[1]).all() for b in placed)
            covers = any((box[0] < b[1]).all() and (b[0] < box[1]).all()
                         for j, b in zip(stars, star_boxes, strict=True) if j != i)
            if inside and not clash and not covers:
                placed.append(box)
                ax.annotate(words[i], xy=tuple(now[i]), xytext=tuple(corner), textcoords="axes fraction",
                            fontsize=8, weight="bold", va="bottom", ha="left")
                break


def _draw(ax, points: np.ndarray, layer: int, explanation: Explanation, normal: np.ndarray, offset: float,
          limits: tuple, stars: list[int], trails: bool = True) -> None:
    (x0, x1), (y0, y1) = limits
    gx, gy = np.meshgrid(np.linspace(x0, x1, 200), np.linspace(y0, y1, 200))
    side = normal[0] * gx + normal[1] * gy + offset
    ax.contourf(gx, gy, side > 0, levels=[-0.5, 0.5, 1.5], colors=[NEGATIVE, POSITIVE], alpha=0.12)
    ax.contour(gx, gy, side, levels=[0], colors="k", linewidths=0.8, linestyles="--")
    colours, star_colour = _colours(explanation, stars)
    weights = np.asarray(explanation.multiplicity, dtype=float)
    if trails and layer > 0:
        for i in range(points.shape[1]):
            ax.plot(points[: layer + 1, i, 0], points[: layer + 1, i, 1], color=colours[i], lw=0.6, alpha=0.5)
    now = points[layer]
    dots = np.array([i not in star_colour for i in range(len(colours))])
    ax.scatter(now[dots, 0], now[dots, 1], s=12 + 6 * weights[dots],
               c=[colours[i] for i in np.flatnonzero(dots)], alpha=0.8, linewidths=0)
    for leader, colour in star_colour.items():
        ax.scatter(*now[leader], marker="*", s=220, color=colour, edgecolors="k", linewidths=0.6, zorder=5)
    if len(stars) <= MAX_LABELS:
        _place_labels(ax, now, stars, explanation.words, limits)
    mean = (weights[:, None] * now).sum(0) / weights.sum()
    ax.scatter(*mean, marker="X", s=90, color="k", zorder=6)
    ax.set_xlim(x0, x1)
    ax.set_ylim(y0, y1)
    ax.set_title(f"layer {layer}")


def _towards(explanation: Explanation, i: int) -> bool:
    """Whether word i pushes towards the side drawn green: class 1 for two classes (v·z_i + b > 0), the
    predicted class for k (its own class is the prediction)."""
    if len(explanation.classes) == 2 or not explanation.word_classes:
        return explanation.word_logits[i] > 0
    return explanation.classes[explanation.word_classes[i]] == explanation.label


def _sides(explanation: Explanation) -> tuple[str, str]:
    """The names of the green and red half-planes."""
    if len(explanation.classes) == 2:
        return explanation.classes[1], explanation.classes[0]
    return explanation.label, "the runner-up class"


def _legend(fig: Figure, explanation: Explanation, stars: list[int], decisive: float) -> None:
    """One legend for the figure: each drawn leader's word in its colour, then the mean token and the
    decoder's line and half-planes."""
    colours = {leader: colour for leader, colour in zip(stars, _colours(explanation, stars)[1].values(),
                                                         strict=True)}
    handles = [Line2D([], [], marker="*", ls="", markersize=12, markerfacecolor=colours[i], markeredgecolor="k",
                      label=explanation.words[i]) for i in stars[:MAX_COLOURS]]
    if len(stars) > MAX_COLOURS:
        handles.append(Line2D([], [], ls="", label=f"… and {len(stars) - MAX_COLOURS} more leaders"))
    handles += [Line2D([], [], marker="X", ls="", color="k", markersize=9, label="mean token (decided on)"),
                Line2D([], [], color="k", ls="--", lw=0.8, label="decision line v·z + b = 0"),
                Patch(facecolor=POSITIVE, alpha=0.3, label=f"{_sides(explanation)[0]} half-plane"),
                Patch(facecolor=NEGATIVE, alpha=0.3, label=f"{_sides(explanation)[1]} half-plane")]
    what = "|v·z + b|" if len(explanation.classes) == 2 else "margin"
    title = (f"decisive leaders ({what} > {decisive:g}); dots: other words, by side"
             if explanation.mostly_leaders and explanation.word_logits
             else "leaders (stars); dots: followers, in their leader's colour")
    fig.legend(handles=handles, loc="outside lower center", ncol=min(6, len(handles)), fontsize=8,
               title=title, title_fontsize=8, frameon=False)


def _limits(points: np.ndarray) -> tuple:
    lo, hi = points.reshape(-1, 2).min(0), points.reshape(-1, 2).max(0)
    pad = 0.08 * (hi - lo).max() + 1e-9
    return (lo[0] - pad, hi[0] + pad), (lo[1] - pad, hi[1] + pad)


def plot_review(explanation: Explanation, model: HardmaxClassifier, *, layers: Sequence[int] = (0, 1, 2, 8),
                decisive: float = 2.0) -> Figure:
    """Panels of a review's tokens at the given layers: leaders as stars (named in the legend, and beside
    the stars where there is room), followers coloured by their leader, the mean token (X), the decoder's
    line (dashed) and half-planes (green = positive). See the module docstring for d ≥ 8."""
    view = project_review(explanation, model)
    points, normal, offset, axes_label = view.points, view.normal, view.offset, view.axes
    layers = [min(k, points.shape[0] - 1) for k in layers]
    stars = shown_leaders(explanation, decisive)
    fig = Figure(figsize=(3.6 * len(layers), 4.6 + 0.25 * (min(len(stars), MAX_COLOURS) // 6)), layout="constrained")
    axes = fig.subplots(1, len(layers), squeeze=False)
    limits = _limits(points)
    for ax, k in zip(axes[0], layers, strict=True):
        _draw(ax, points, k, explanation, normal, offset, limits, stars)
    _legend(fig, explanation, stars, decisive)
    note = ("; almost every word is its own leader" if explanation.mostly_leaders else "")
    shown = explanation.classes[1] if len(explanation.classes) == 2 else explanation.label
    fig.suptitle(f"{explanation.label} (P({shown}) = {explanation.probability:.2f}), "
                 f"{len(explanation.leaders)} leaders{note}; axes: {axes_label}", fontsize=10)
    return fig


def animate_review(explanation: Explanation, model: HardmaxClassifier, path: str | Path, *, fps: int = 2,
                   decisive: float = 2.0) -> Path:
    """A GIF of a review's tokens layer by layer (same drawing and legend as `plot_review`)."""
    view = project_review(explanation, model)
    points, normal, offset = view.points, view.normal, view.offset
    stars = shown_leaders(explanation, decisive)
    fig = Figure(figsize=(5.2, 5.6 + 0.25 * (min(len(stars), MAX_COLOURS) // 4)), layout="constrained")
    ax = fig.subplots()
    limits = _limits(points)
    _legend(fig, explanation, stars, decisive)
    fig.legends[0].set_ncols(min(4, len(fig.legends[0].legend_handles)))
    # Lay out once and freeze: every frame must have the same size and placement.
    _draw(ax, points, 0, explanation, normal, offset, limits, stars)
    fig.draw_without_rendering()
    fig.set_layout_engine("none")

    def draw(k: int) -> None:
        ax.clear()
        _draw(ax, points, k, explanation, normal, offset, limits, stars)

    return save_gif(fig, draw, points.shape[0], path, fps=fps, hold=0.0, dpi=100)
