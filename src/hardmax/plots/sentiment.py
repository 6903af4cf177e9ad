"""Figures of the sentiment classifier: leader words and the evolution of a review's tokens.

Consumes `Explanation` / counts from `hardmax.explain` and a trained `HardmaxClassifier`; draws
with matplotlib (Agg). Figures are saved with `hardmax.plots.save_figure`, GIFs atomically here. No
training or data loading here.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
from matplotlib.animation import FuncAnimation, PillowWriter  # noqa: E402

from hardmax.explain import Explanation  # noqa: E402
from hardmax.io import atomic_write  # noqa: E402
from hardmax.models import HardmaxClassifier  # noqa: E402

__all__ = ["animate_review", "plot_leader_words", "plot_review", "project_review"]

POSITIVE, NEGATIVE = "#2a9d8f", "#e76f51"


def plot_leader_words(counts: dict[str, Counter], words: Sequence[str], *, top: int = 20, title: str = ""):
    """Two horizontal bar charts: the most frequent leader words in positive and negative reviews."""
    fig, axes = plt.subplots(1, 2, figsize=(10, 0.28 * top + 1.5))
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
    fig.tight_layout()
    return fig


def project_review(explanation: Explanation, model: HardmaxClassifier) -> tuple[np.ndarray, np.ndarray, float, str]:
    """2-D coordinates of a review's tokens at every layer.

    d = 2: the tokens themselves. d > 2: coordinates along the decoder direction w/|w| (the only
    direction the decision depends on) and the top principal component of the tokens orthogonal to it.

    Returns:
        points (layers + 1, m, 2), the decoder normal in these coordinates (2,), its offset b (the
        decision is normal · x + b > 0), and a description of the axes.
    """
    z = explanation.trace.tokens[:, 0].detach().cpu().double().numpy()  # (layers + 1, m, d)
    w = model.decoder.weight.detach().cpu().double().numpy()[0]
    b = float(model.decoder.bias.detach().cpu())
    if z.shape[-1] == 2:
        return z, w, b, "token coordinates"
    e1 = w / np.linalg.norm(w)
    flat = z.reshape(-1, z.shape[-1])
    rest = flat - np.outer(flat @ e1, e1)
    rest = rest - rest.mean(0)
    e2 = np.linalg.svd(rest, full_matrices=False)[2][0]
    basis = np.stack([e1, e2], axis=1)  # (d, 2)
    return z @ basis, np.array([np.linalg.norm(w), 0.0]), b, "decoder direction × principal component"


def _leader_of(explanation: Explanation) -> np.ndarray:
    m = len(explanation.words)
    owner = np.full(m, -1)
    for rank, leader in enumerate(explanation.leaders):
        owner[leader] = rank
        for f in explanation.follows.get(leader, []):
            if owner[f] < 0:
                owner[f] = rank
    return owner


def _draw(ax, points: np.ndarray, layer: int, explanation: Explanation, normal: np.ndarray, offset: float,
          limits: tuple, trails: bool = True) -> None:
    (x0, x1), (y0, y1) = limits
    gx, gy = np.meshgrid(np.linspace(x0, x1, 200), np.linspace(y0, y1, 200))
    side = normal[0] * gx + normal[1] * gy + offset
    ax.contourf(gx, gy, side > 0, levels=[-0.5, 0.5, 1.5], colors=[NEGATIVE, POSITIVE], alpha=0.12)
    ax.contour(gx, gy, side, levels=[0], colors="k", linewidths=0.8, linestyles="--")
    owner = _leader_of(explanation)
    cmap = plt.get_cmap("tab10")
    colours = [cmap(o % 10) if o >= 0 else (0.5, 0.5, 0.5, 1) for o in owner]
    weights = np.asarray(explanation.multiplicity, dtype=float)
    if trails and layer > 0:
        for i in range(points.shape[1]):
            ax.plot(points[: layer + 1, i, 0], points[: layer + 1, i, 1], color=colours[i], lw=0.6, alpha=0.5)
    now = points[layer]
    followers = np.array([i not in explanation.leaders for i in range(len(owner))])
    ax.scatter(now[followers, 0], now[followers, 1], s=12 + 6 * weights[followers],
               c=[colours[i] for i in np.flatnonzero(followers)], alpha=0.8, linewidths=0)
    for rank, leader in enumerate(explanation.leaders):
        ax.scatter(*now[leader], marker="*", s=220, color=cmap(rank % 10), edgecolors="k", linewidths=0.6, zorder=5)
        ax.annotate(explanation.words[leader], now[leader], xytext=(4, 4), textcoords="offset points",
                    fontsize=8, weight="bold")
    mean = (weights[:, None] * now).sum(0) / weights.sum()
    ax.scatter(*mean, marker="X", s=90, color="k", zorder=6, label="mean token")
    ax.set_xlim(x0, x1)
    ax.set_ylim(y0, y1)
    ax.set_title(f"layer {layer}")


def _limits(points: np.ndarray) -> tuple:
    lo, hi = points.reshape(-1, 2).min(0), points.reshape(-1, 2).max(0)
    pad = 0.08 * (hi - lo).max() + 1e-9
    return (lo[0] - pad, hi[0] + pad), (lo[1] - pad, hi[1] + pad)


def plot_review(explanation: Explanation, model: HardmaxClassifier, *, layers: Sequence[int] = (0, 1, 2, 8)):
    """Panels of a review's tokens at the given layers: leaders as labelled stars, followers coloured
    by their leader, the mean token (X), the decoder's line (dashed) and half-planes (green = positive)."""
    points, normal, offset, axes_label = project_review(explanation, model)
    layers = [min(k, points.shape[0] - 1) for k in layers]
    fig, axes = plt.subplots(1, len(layers), figsize=(3.6 * len(layers), 3.8), squeeze=False)
    limits = _limits(points)
    for ax, k in zip(axes[0], layers, strict=True):
        _draw(ax, points, k, explanation, normal, offset, limits)
    fig.suptitle(f"{explanation.label} (P(positive) = {explanation.probability:.2f}), "
                 f"{len(explanation.leaders)} leaders; axes: {axes_label}", fontsize=10)
    fig.tight_layout()
    return fig


def animate_review(explanation: Explanation, model: HardmaxClassifier, path: str | Path, *, fps: int = 2) -> Path:
    """A GIF of a review's tokens layer by layer (same drawing as `plot_review`)."""
    points, normal, offset, _ = project_review(explanation, model)
    fig, ax = plt.subplots(figsize=(5, 4.6))
    limits = _limits(points)

    def frame(k: int):
        ax.clear()
        _draw(ax, points, k, explanation, normal, offset, limits)

    anim = FuncAnimation(fig, frame, frames=points.shape[0], interval=1000 // fps)
    path = Path(path)
    atomic_write(path, lambda tmp: anim.save(tmp, writer=PillowWriter(fps=fps)))
    plt.close(fig)
    return path


