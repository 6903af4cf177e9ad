"""Tests of `hardmax.plots.figures`: figures build for 2-D, 3-D and projected runs; GIFs animate. Two tests of
other modules still share this file's runs: `save_figure`'s atomic writes (`plots.save`) and the limit points a
scene marks (`plots.scene`).

Figures are checked through what they contain (panels, titles, limits, markers), not pixels.
Runs are short and GIFs small so the module takes a few seconds on 2 CPU cores.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from matplotlib.figure import Figure
from PIL import Image

from hardmax.dynamics import simulate
from hardmax.plots import (
    FIGURE2_LAYERS,
    animate,
    figure2,
    plot_layers,
    plot_layers_3d,
    plot_trajectory,
    save_figure,
)
from hardmax.plots.figures import frame_layers
from hardmax.plots.scene import make_scene

# A square K with four tokens inside and two that converge to the midpoints of its vertical sides
# (projections of the origin onto faces): every element of the picture shows up.
SQUARE = np.array([[1.0, 1.0], [1.0, -1.0], [-1.0, 1.0], [-1.0, -1.0], [0.5, 0.0], [-0.5, 0.0],
                   [0.3, 0.6], [-0.4, -0.5]])


@pytest.fixture(scope="module")
def run2d():
    return simulate(SQUARE, alpha=0.5, layers=8)


@pytest.fixture(scope="module")
def run3d():
    tokens = np.random.default_rng(3).standard_normal((10, 3))
    return simulate(tokens, alpha=0.5, layers=6)


@pytest.fixture(scope="module")
def run5d():
    tokens = np.random.default_rng(5).standard_normal((9, 5))
    return simulate(tokens, alpha=0.5, layers=6)


def _files(folder):
    return sorted(p.name for p in folder.iterdir())


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


def test_only_reached_points_of_S_are_marked_in_the_plane_and_above():
    # The square of SQUARE: S has the four midpoints of the sides (not the origin: S is tight), but only
    # (±1, 0), where (±0.5, 0) converge, are limits of tokens; the same square in the plane z = 0 of R^3.
    for d in (2, 3):
        tokens = np.pad(SQUARE, ((0, 0), (0, d - 2)))
        scene = make_scene(simulate(tokens, alpha=0.5, layers=40), d)
        want = np.pad([[-1.0, 0.0], [1.0, 0.0]], ((0, 0), (0, d - 2)))
        np.testing.assert_allclose(scene.limit[np.argsort(scene.limit[:, 0])], want, atol=1e-12)


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


def test_save_figure_writes_each_format_atomically(tmp_path, run2d):
    fig = plot_layers(run2d, (0, 8))
    written = save_figure(fig, tmp_path / "sub" / "fig.v1", formats=("png", "pdf", "svg"))
    assert [p.name for p in written] == ["fig.v1.png", "fig.v1.pdf", "fig.v1.svg"]
    assert _files(tmp_path / "sub") == ["fig.v1.pdf", "fig.v1.png", "fig.v1.svg"]  # no temporary files
    assert all(p.stat().st_size > 1000 for p in written)
    assert written[0].read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert written[1].read_bytes()[:5] == b"%PDF-"
    save_figure(fig, tmp_path / "sub" / "fig.v1", formats=("png",))  # overwriting is fine
    assert _files(tmp_path / "sub") == ["fig.v1.pdf", "fig.v1.png", "fig.v1.svg"]


def test_failed_save_leaves_nothing_behind(tmp_path, run2d):
    fig = plot_layers(run2d, (0,))
    with pytest.raises(ValueError):
        save_figure(fig, tmp_path / "fig", formats=("png", "no-such-format"))
    assert _files(tmp_path) == ["fig.png"]


def _gif_frames(path) -> int:
    with Image.open(path) as im:
        assert im.format == "GIF"
        return im.n_frames


@pytest.mark.parametrize("run", ["run2d", "run3d", "run5d"])
def test_animate_writes_a_gif(tmp_path, request, run):
    trajectory = request.getfixturevalue(run)
    path = animate(trajectory, tmp_path / "run.gif", fps=2, max_frames=4, dpi=30)
    assert path == tmp_path / "run.gif"
    assert _files(tmp_path) == ["run.gif"]
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
