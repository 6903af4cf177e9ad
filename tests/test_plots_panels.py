"""Tests of `hardmax.plots.panels`: one saved state of a scene on one axis, 2-D (`draw_panel`, the mover it
returns) and 3-D (`draw_panel_3d`), and the paper's legend (`add_legend`). Figures are checked through their
artists, not pixels; rows of panels are test_plots_figures.py's and test_plots_scene.py's."""

from __future__ import annotations

import numpy as np
import pytest
from matplotlib.figure import Figure
from plots_cases import SQUARE

from hardmax.dynamics import simulate
from hardmax.plots.panels import add_legend, draw_panel, draw_panel_3d
from hardmax.plots.scene import make_scene


@pytest.fixture(scope="module")
def scene():
    return make_scene(simulate(SQUARE, alpha=0.5, layers=8), 2)


def _drawn(ax, points) -> bool:
    """Whether every point is at the offset of some marker drawn on `ax`."""
    offsets = np.concatenate([c.get_offsets() for c in ax.collections if len(c.get_offsets())])
    return all(np.abs(offsets - p).max(1).min() < 1e-9 for p in points)


def test_draw_panel_draws_a_state_and_moves_to_another(scene):
    ax = Figure().add_subplot()
    move = draw_panel(ax, scene, 0, scene.box())
    assert ax.get_title() == scene.stamp(0) == "layer 0" and _drawn(ax, scene.path[0])
    move(8)
    assert ax.get_title() == "layer 8" and _drawn(ax, scene.path[8])
    assert not _drawn(ax, scene.path[0][4:6])  # (±0.5, 0) have moved towards (±1, 0)
    lo, hi = scene.box()
    assert ax.get_xlim() == pytest.approx((lo[0], hi[0]))


def test_draw_panel_3d_draws_into_3d_axes():
    run = simulate(np.pad(SQUARE, ((0, 0), (0, 1))) + [0.0, 0.0, 0.1], alpha=0.5, layers=4)
    scene = make_scene(run, 3)
    ax = Figure().add_subplot(projection="3d")
    draw_panel_3d(ax, scene, 4, scene.box(), azim=30.0)
    assert ax.name == "3d" and ax.get_title() == "layer 4" and ax.azim == 30.0
    assert ax.collections  # K, its edges, trails, tokens


@pytest.mark.parametrize(("limit_label", "labels"), [(None, 4), ("S: limits of tokens", 5)])
def test_add_legend_names_what_the_panels_show(limit_label, labels):
    fig = Figure()
    add_legend(fig, limit_label)
    (legend,) = fig.legends
    texts = [t.get_text() for t in legend.get_texts()]
    assert len(texts) == labels and texts[0] == "leader" and texts[3].startswith("K:")
    assert (limit_label in texts) == (limit_label is not None)
