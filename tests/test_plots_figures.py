"""Tests of `hardmax.plots.figures`: figures build for 2-D, 3-D and projected runs; GIFs animate.

Figures are checked through what they contain (panels, titles, limits, markers), not pixels.
Runs are short and GIFs small so the module takes a few seconds on 2 CPU cores.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from matplotlib.figure import Figure
from PIL import Image
from plots_cases import SQUARE, file_names

from hardmax.dynamics import simulate
from hardmax.plots import FIGURE2_LAYERS, animate, figure2, plot_layers, plot_layers_3d, plot_trajectory
from hardmax.plots.figures import frame_layers


@pytest.fixture(scope="module")
def run3d():
    tokens = np.random.default_rng(3).standard_normal((10, 3))
    return simulate(tokens, alpha=0.5, layers=6)


@pytest.fixture(scope="module")
def run5d():
    tokens = np.random.default_rng(5).standard_normal((9, 5))
    return simulate(tokens, alpha=0.5, layers=6)


def test_plot_layers_panels_and_limits(run2d):
    fig = plot_layers(run2d, (0, 1, 8), title="square")
    assert isinstance(fig, Figure)
    axes = fig.axes
    assert [ax.get_title() for ax in axes] == ["layer 0", "layer 1", "layer 8"]
    assert fig.get_suptitle() == "square"
    everything = run2d.tokens.reshape(-1, 2).numpy()
    for ax in axes:
        (x0, x1), (y0, y1) = ax.get_xlim(), ax.get_ylim()
        assert x0 < everything[:, 0].min() and everything[:, 0].max() < x1
        assert y0 < everything[:, 1].min() and everything[:, 1].max() < y1
        assert x1 - x0 == pytest.approx(y1 - y0)  # square boxes, equal aspect
        assert ax.get_aspect() == 1.0


def test_plot_layers_default_layers_follow_the_run(run2d):
    fig = plot_layers(run2d)
    assert [ax.get_title() for ax in fig.axes] == ["layer 0", "layer 1", "layer 2", "layer 5", "layer 8"]


def test_plot_layers_marks_leaders_and_limit_points(run2d):
    fig = plot_layers(run2d, (8,))
    ax = fig.axes[0]
    offsets = [np.asarray(c.get_offsets()) for c in ax.collections if hasattr(c, "get_offsets")]
    points = np.concatenate([o for o in offsets if o.size]).round(6)
    # The corners are leaders (stars); (±1, 0), where (±0.5, 0) converge, are points of S (diamonds).
    for corner in SQUARE[:4]:
        assert (np.abs(points - corner).max(1) < 1e-6).any()
    for midpoint in ([1.0, 0.0], [-1.0, 0.0]):
        assert (np.abs(points - midpoint).max(1) < 1e-3).any()


def test_K_and_S_are_drawn_at_the_final_layer_only(run2d):
    fig = Figure()
    axes = fig.subplots(1, 2)
    plot_layers(run2d, [0, run2d.layers], ax_row=axes)
    first, last = ([a for a in (*ax.patches, *ax.collections) if not a.get_visible()] for ax in axes)
    assert first and not last  # hidden at layer 0 (K, its edges, S), all shown at the last layer


def test_plot_layers_into_given_axes(run2d):
    fig = Figure()
    axes = fig.subplots(1, 2)
    assert plot_layers(run2d, (0, 8), ax_row=axes, title="row") is fig
    assert axes[0].get_ylabel() == "row"
    with pytest.raises(ValueError, match="ax_row has 2 axes for 3 layers"):
        plot_layers(run2d, (0, 1, 8), ax_row=axes)


def test_plot_layers_projects_high_dimensions(run5d):
    fig = plot_layers(run5d, (0, 6))
    assert "principal components" in fig.get_suptitle()
    assert len(fig.axes) == 2


def test_plot_trajectory_is_3d_for_d3(run3d):
    fig = plot_trajectory(run3d, (0, 6), title="cube")
    assert [ax.name for ax in fig.axes] == ["3d", "3d"]
    assert fig.get_suptitle() == "cube"


def test_bad_requests_raise_clear_errors(run2d):
    with pytest.raises(ValueError, match="outside the trajectory's layers 0..8"):
        plot_layers(run2d, (0, 9))
    with pytest.raises(ValueError, match="needs tokens in R\\^3"):
        plot_layers_3d(run2d)
    batched = simulate(np.stack([SQUARE, -SQUARE]), alpha=0.5, layers=2)
    with pytest.raises(ValueError, match="one sequence"):
        plot_layers(batched)


def test_figure2_has_four_rows_of_five_panels():
    fig = figure2()
    assert len(fig.axes) == 4 * len(FIGURE2_LAYERS)
    assert [ax.get_title() for ax in fig.axes[:5]] == [f"layer {k}" for k in FIGURE2_LAYERS]
    assert all(ax.get_ylabel() for ax in fig.axes[::5])  # each row names its configuration
    assert "α = 0.5, A = I" in fig.get_suptitle()


def _gif_frames(path) -> int:
    with Image.open(path) as im:
        assert im.format == "GIF"
        return im.n_frames


@pytest.mark.parametrize("run", ["run2d", "run3d", "run5d"])
def test_animate_writes_a_gif(tmp_path, request, run):
    trajectory = request.getfixturevalue(run)
    path = animate(trajectory, tmp_path / "run.gif", fps=2, max_frames=4, dpi=30)
    assert path == tmp_path / "run.gif"
    assert file_names(tmp_path) == ["run.gif"]
    assert _gif_frames(path) > 1


def test_frame_layers_are_dense_early_and_end_at_the_last_layer():
    assert frame_layers(8, 40) == list(range(9))
    frames = frame_layers(500, 40)
    assert frames[0] == 0 and frames[-1] == 500 and len(frames) <= 41
    assert frames == sorted(set(frames))
    assert frames[1] - frames[0] < frames[-1] - frames[-2]


def test_animate_rejects_bad_settings(tmp_path, run2d):
    with pytest.raises(ValueError, match="fps"):
        animate(run2d, tmp_path / "x.gif", fps=0)
    assert not list(tmp_path.iterdir())


def test_plots_accept_float32_runs(run2d):
    run = simulate(torch.tensor(SQUARE, dtype=torch.float32), alpha=0.5, layers=3)
    assert len(plot_layers(run).axes) == 4  # layers 0, 1, 2, 3
