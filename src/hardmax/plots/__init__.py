"""Figures and animations of hardmax runs.

What lives here: pictures of a `Solution` (panels at chosen layers, in 2-D, in 3-D, or projected
onto two principal components), the paper's Figure 2, GIF animations, and atomic saving.
What does not: simulation (`hardmax.dynamics`) and geometry (`hardmax.theory`). Plotting functions
only draw what those return; `figure2` is the one function that runs the dynamics itself, because
its job is to reproduce the paper's figure from the paper's configurations.

Every picture shows the same things: leaders (tokens that stay leaders from that layer on) as stars,
the other tokens as dots coloured by the cluster they converge to, thin trails of past positions,
the polytope K spanned by the final leaders (shaded), and the points of the limit set S that are not
vertices of K as hollow diamonds (Theorem 2.1 of Alcalde, Fantuzzi, Zuazua 2024, arXiv 2407.01602);
for d > 2, where S has a point on most faces of K, only the points of S that tokens converge to.

Files: `scene` (what a picture shows) -> `panels` (one layer on one axis) -> `figures` (multi-panel
figures, Figure 2, animations); `save` writes them atomically.

Only the object-oriented Matplotlib API is used (`Figure`, never `pyplot`): no global state, no
backend to choose, and figures are freed as soon as they are dropped.
"""

from __future__ import annotations

from hardmax.plots.figures import animate, animate_figure2, figure2, plot_layers, plot_layers_3d, plot_trajectory
from hardmax.plots.save import save_figure
from hardmax.plots.scene import FIGURE2_LAYERS

__all__ = [
    "FIGURE2_LAYERS",
    "animate",
    "animate_figure2",
    "figure2",
    "plot_layers",
    "plot_layers_3d",
    "plot_trajectory",
    "save_figure",
]
