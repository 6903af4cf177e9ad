"""Figures and animations of hardmax runs.

What lives here: pictures of a `Solution` (panels at chosen layers, in 2-D, in 3-D, or projected
onto two principal components), the paper's Figure 2, GIF animations, and atomic saving.
What does not: simulation (`hardmax.dynamics`) and geometry (`hardmax.theory`). Plotting functions
only draw what those return; `figure2` is the one function that runs the dynamics itself, because
its job is to reproduce the paper's figure from the paper's configurations.

One scene path draws every `Solution` (flat, circle, sphere, or any manifold through its protocol):
`scene.make_scene` says what is drawn, `figures.scene_figure` draws a row of panels, `figures.animate_scene` a
GIF; `plot_layers`, `animate`, `flow_figure`, `animate_flow` are spellings of them. Every picture shows the
tokens coloured by the cluster they end in (`scene.cluster_labels`) with thin trails of their past positions,
and the manifold's background (the unit circle or sphere; in R^d the tokens' convex hull). The paper's hardmax
layers (`scene.paper_layers`) show, instead of the hull, their leaders (tokens that stay leaders from that layer
on) as stars, the polytope K spanned by the final leaders (shaded), and the points of the limit set S that are
not vertices of K as hollow diamonds (Theorem 2.1 of Alcalde, Fantuzzi, Zuazua 2024, arXiv 2407.01602); for
d > 2, where S has a point on most faces of K, only the points of S that tokens converge to.

Files: `scene` (what a picture shows) -> `panels` (one saved state on one axis) -> `figures` (rows of panels,
GIFs, Figure 2) and `flows` (the same named by time, the particle papers' plots); `save` writes them atomically.

Only the object-oriented Matplotlib API is used (`Figure`, never `pyplot`): no global state, no
backend to choose, and figures are freed as soon as they are dropped.
"""

from __future__ import annotations

from hardmax.plots.figures import (
    animate,
    animate_figure2,
    animate_scene,
    figure2,
    plot_layers,
    plot_layers_3d,
    plot_trajectory,
    scene_figure,
)
from hardmax.plots.flows import animate_flow, flow_figure
from hardmax.plots.save import save_figure
from hardmax.plots.scene import FIGURE2_LAYERS, make_scene

__all__ = [
    "FIGURE2_LAYERS",
    "animate",
    "animate_figure2",
    "animate_flow",
    "animate_scene",
    "figure2",
    "flow_figure",
    "make_scene",
    "plot_layers",
    "plot_layers_3d",
    "plot_trajectory",
    "save_figure",
    "scene_figure",
]
