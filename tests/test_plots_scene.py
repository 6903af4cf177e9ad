"""Tests of the one scene path (hardmax.plots.scene -> panels -> figures): any `Solution` becomes a `Scene`, drawn
by one row of panels and one GIF; the paper's overlays (leaders, K, S) only on the paper's hardmax layers.

Figures are checked through what they contain (axes, titles, artists), not pixels; runs are short.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from matplotlib.collections import PathCollection
from matplotlib.figure import Figure
from PIL import Image
from plots_cases import SQUARE

from hardmax.dynamics import RK4, Causal, Euler, Field, Hardmax, Save, Softmax, Sphere, simulate, solve
from hardmax.plots import animate_scene, make_scene, plot_layers, scene_figure
from hardmax.plots.flows import cluster_colours, draw_flow, flow_figure
from hardmax.plots.scene import cluster_labels, paper_layers
from hardmax.theory import find_clusters, leader_layers


def _unit(shape: tuple[int, ...], seed: int) -> torch.Tensor:
    z = torch.randn(*shape, dtype=torch.float64, generator=torch.Generator().manual_seed(seed))
    return torch.nn.functional.normalize(z, dim=-1)


@pytest.fixture(scope="module")
def hardmax_run():
    return simulate(SQUARE, alpha=0.5, layers=12)


@pytest.fixture(scope="module")
def sphere_flow():
    return solve(Field(Softmax(4.0), manifold=Sphere()), RK4(0.1), _unit((12, 3), 1), t1=6.0, save=Save(every=10))


@pytest.fixture(scope="module")
def circle_flow():
    return solve(Field(Softmax(2.0), manifold=Sphere()), RK4(0.1), _unit((10, 2), 2), t1=5.0, save=Save(every=10))


def _stars(ax) -> int:
    """How many tokens are drawn as stars (leaders) on 2-D axes."""
    return sum(len(c.get_offsets()) for c in ax.collections
               if isinstance(c, PathCollection) and c.get_sizes().size and c.get_sizes()[0] >= 150)


def test_the_paper_hardmax_layers_get_leaders_K_and_S(hardmax_run):
    assert paper_layers(hardmax_run)
    scene = make_scene(hardmax_run, 2)
    assert scene.paper and scene.clock == "layer" and scene.background == "none"
    assert scene.path.shape == (13, 8, 2)
    np.testing.assert_array_equal(scene.leader_since, leader_layers(hardmax_run).numpy())
    np.testing.assert_array_equal(scene.labels, find_clusters(hardmax_run).labels.numpy())
    np.testing.assert_allclose(np.sort(scene.vertices, axis=0), np.sort(SQUARE[:4], axis=0))  # K: the square
    assert scene.k_dim == 2 and len(scene.edges) == 4
    assert len(scene.limit) == 2  # (±1, 0), where (±0.5, 0) converge
    fig = scene_figure(scene, (0, -1), title="square")
    assert [ax.get_title() for ax in fig.axes] == ["layer 0", "layer 12"]
    assert _stars(fig.axes[-1]) == 4 and fig.legends  # the four corners lead; the paper's legend
    assert any(p.get_visible() for p in fig.axes[-1].patches)  # K shaded at the last layer


def test_a_sphere_softmax_flow_is_drawn_on_its_wireframe(sphere_flow):
    assert not paper_layers(sphere_flow)
    scene = make_scene(sphere_flow)
    assert scene.dimension == 3 and scene.background == "sphere" and scene.clock == "time"
    assert not scene.paper and len(scene.vertices) == 0 and len(scene.limit) == 0
    assert (scene.leader_since == -1).all()
    fig = flow_figure(sphere_flow, (0, -1))
    assert [ax.name for ax in fig.axes] == ["3d", "3d"]
    assert [ax.get_title() for ax in fig.axes] == ["t = 0", "t = 6"]
    assert not fig.legends and not fig.axes[0].axison  # the wireframe is the frame, no axes box


def test_a_circle_flow_is_drawn_on_the_unit_circle(circle_flow, tmp_path):
    scene = make_scene(circle_flow)
    assert scene.dimension == 2 and scene.background == "circle"
    lo, hi = scene.box()
    assert (lo <= -1).all() and (hi >= 1).all()  # the whole circle fits
    fig = Figure()
    ax = fig.add_subplot()
    draw_flow(ax, circle_flow, -1)
    circle = [line for line in ax.lines if len(line.get_xdata()) == 200]
    assert len(circle) == 1
    np.testing.assert_allclose(np.hypot(circle[0].get_xdata(), circle[0].get_ydata()), 1.0)
    assert _stars(ax) == 0 and not ax.patches  # no leaders, no K, no hull on the circle
    path = animate_scene(scene, tmp_path / "circle.gif", range(len(circle_flow.times)), fps=4, dpi=30)
    with Image.open(path) as im:
        assert im.format == "GIF" and im.n_frames == len(circle_flow.times)


@pytest.mark.parametrize("kind", ["softmax", "every other layer", "causal"])
def test_a_solution_that_is_not_the_paper_hardmax_layers_has_no_K_or_S(kind):
    run = {"softmax": lambda: simulate(SQUARE, Softmax(2.0), alpha=0.5, layers=6),
           "every other layer": lambda: solve(Field(Hardmax()), Euler.layers(0.5), torch.tensor(SQUARE), steps=6,
                                              save=Save(every=2)),
           "causal": lambda: simulate(SQUARE, alpha=0.5, layers=6, mask=Causal())}[kind]()
    assert not paper_layers(run)
    scene = make_scene(run, 2)
    assert not scene.paper and scene.k_dim == -1
    assert len(scene.vertices) == len(scene.edges) == len(scene.limit) == 0 and (scene.leader_since == -1).all()
    assert scene.background == "hull"  # R^d: the tokens' own convex hull stands where K would
    fig = scene_figure(scene, (0, -1))
    assert not fig.legends and _stars(fig.axes[-1]) == 0
    hull = fig.axes[0].patches[0].get_xy()
    assert len(hull) >= 4  # the square's corners (closed polygon)


def test_plot_layers_takes_any_solution_of_layers():
    run = simulate(SQUARE, Softmax(2.0), alpha=0.5, layers=4)
    fig = plot_layers(run, (0, 2, 4))
    assert [ax.get_title() for ax in fig.axes] == ["layer 0", "layer 2", "layer 4"]


def test_one_colouring_rule(hardmax_run, circle_flow):
    # the paper's layers: the theory's clusters; a flow: components at the manifold's tolerance
    np.testing.assert_array_equal(cluster_labels(hardmax_run), find_clusters(hardmax_run).labels.numpy())
    for run in (hardmax_run, circle_flow):
        scene = make_scene(run)
        assert cluster_colours(run) == [f"#{''.join(f'{round(255 * c):02x}' for c in rgba[:3])}"
                                        for rgba in scene.colours]
    assert len(set(cluster_colours(circle_flow, tol=10.0))) == 1


def test_a_batched_flow_is_drawn_one_sequence_at_a_time():
    sol = solve(Field(Softmax(2.0), manifold=Sphere()), RK4(0.1), _unit((2, 6, 2), 3), t1=1.0, save=Save(every=5))
    first, second = (make_scene(sol, sequence=b) for b in (0, 1))
    np.testing.assert_array_equal(second.path, sol.tokens[:, 1].numpy())
    assert not np.array_equal(first.path, second.path)
    with pytest.raises(ValueError, match="one sequence"):
        make_scene(sol)
    with pytest.raises(ValueError, match="sequence must be in 0..1"):
        make_scene(sol, sequence=2)


def test_tokens_in_R1_are_drawn_against_time():
    sol = solve(Field(Softmax(1.0)), Euler(0.1), torch.linspace(-1, 1, 5, dtype=torch.float64)[:, None], steps=20,
                save=Save(every=5))
    scene = make_scene(sol)
    assert scene.dimension == 1
    fig = flow_figure(sol, (0, -1))
    assert fig.axes[-1].get_xlabel() == "t" and len(fig.axes[-1].lines) == 5
    assert make_scene(simulate(np.array([[-1.0], [0.2], [1.0]]), alpha=0.5, layers=3)).dimension == 2  # the paper's


def test_only_reached_points_of_S_are_marked_in_the_plane_and_above():
    # The square of SQUARE: S has the four midpoints of the sides (not the origin: S is tight), but only
    # (±1, 0), where (±0.5, 0) converge, are limits of tokens; the same square in the plane z = 0 of R^3.
    for d in (2, 3):
        tokens = np.pad(SQUARE, ((0, 0), (0, d - 2)))
        scene = make_scene(simulate(tokens, alpha=0.5, layers=40), d)
        want = np.pad([[-1.0, 0.0], [1.0, 0.0]], ((0, 0), (0, d - 2)))
        np.testing.assert_allclose(scene.limit[np.argsort(scene.limit[:, 0])], want, atol=1e-12)
