"""Tests of `hardmax.plots.flows` beyond the scene path (test_plots_scene.py draws `flow_figure` and `draw_flow`):
`animate_flow`'s frames, `draw_flow`'s options, and the particle papers' plots, `metastability_figure` and
`phase_figure`, drawn from hand-made results. Figures are checked through what they contain, not pixels."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest
import torch
from matplotlib.collections import LineCollection, PathCollection
from matplotlib.figure import Figure
from PIL import Image

from hardmax.dynamics import RK4, Field, Save, Softmax, Sphere, simulate, solve
from hardmax.plots.flows import animate_flow, draw_flow, metastability_figure, phase_figure


@pytest.fixture(scope="module")
def circle_flow():
    z = torch.nn.functional.normalize(torch.randn(6, 2, dtype=torch.float64,
                                                  generator=torch.Generator().manual_seed(4)), dim=-1)
    return solve(Field(Softmax(2.0), manifold=Sphere()), RK4(0.1), z, t1=2.0, save=Save(every=4))


def test_animate_flow_spaces_at_most_max_frames(circle_flow, tmp_path):
    saved = len(circle_flow.times)
    path = animate_flow(circle_flow, tmp_path / "flow.gif", fps=5, max_frames=3, dpi=20)
    assert path == tmp_path / "flow.gif" and saved > 3
    with Image.open(path) as im:
        assert im.format == "GIF" and im.n_frames == 3
    with Image.open(animate_flow(circle_flow, tmp_path / "all.gif", max_frames=100, dpi=20)) as im:
        assert im.n_frames == saved


def test_draw_flow_takes_colours_and_leaves_out_trails_and_hull():
    run = simulate(np.array([[1.0, 0.0], [0.0, 1.0], [-1.0, -0.5], [0.2, 0.1]]), Softmax(1.0), alpha=0.5, layers=4)
    full, bare = (Figure().add_subplot() for _ in range(2))
    draw_flow(full, run, -1)
    draw_flow(bare, run, -1, trails=False, hull=False, colours=["red"] * 4)
    assert full.patches and not bare.patches  # the tokens' hull
    trails = [[len(c.get_segments()) for c in ax.collections if isinstance(c, LineCollection)] for ax in (full, bare)]
    assert trails == [[4], [0]]  # one trail per token, or none
    (dots,) = (c for c in bare.collections if isinstance(c, PathCollection) and len(c.get_offsets()) == 4
               and c.get_sizes()[0] > 8)  # the tokens, not the white marks of where they started
    tokens = dots.get_facecolors()
    np.testing.assert_allclose(tokens[:, :3], [[1.0, 0.0, 0.0]] * len(tokens))


def test_metastability_figure_has_the_circle_the_count_and_the_energy(circle_flow):
    saved = len(circle_flow.times)
    result = SimpleNamespace(solution=circle_flow, beta=2.0, clusters=torch.linspace(6, 1, saved).round(),
                             energy=torch.linspace(0.1, 1.0, saved))
    fig = metastability_figure(result)
    circle, count, energy = fig.axes
    assert count.get_title() == "cluster count: plateaus" and count.get_xscale() == "log"
    assert energy.get_title() == "energy: a staircase" and energy.get_ylabel() == "E_β"
    assert len(count.lines) == len(energy.lines) == 1 and len(energy.lines[0].get_xdata()) == saved
    assert "n = 6, β = 2" in fig.get_suptitle() and "dt = 0.1" in fig.get_suptitle()


def test_phase_figure_is_p_one_cluster_over_time_and_beta():
    diagram = SimpleNamespace(times=torch.tensor([0.0, 1.0, 2.0]), betas=torch.tensor([1.0, 4.0]),
                              single=torch.tensor([[0.0, 0.5, 1.0], [0.0, 0.0, 0.25]]), d=3, n=8, starts=5)
    fig = phase_figure(diagram)
    ax, colorbar = fig.axes
    assert (ax.get_xlabel(), ax.get_ylabel()) == ("t", "β") and ax.get_title() == "SA on S^2, n = 8, 5 starts per β"
    assert colorbar.get_ylabel() == "P(one cluster)"
    np.testing.assert_array_equal(ax.collections[0].get_array().reshape(2, 3), diagram.single.numpy())
