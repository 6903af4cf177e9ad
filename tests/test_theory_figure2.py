"""Tests of `hardmax.theory.figure2`: the Figure 2 configurations (dyadic, 2-d, float64) and the paper's
own, which behave as the paper says.
"""

from __future__ import annotations

import numpy as np
import pytest

from hardmax.dynamics import simulate
from hardmax.theory import (
    FIGURE2_ALPHA,
    check_theorem,
    figure2_configurations,
    leader_layers,
    paper_figure2_configurations,
)

pytestmark = pytest.mark.usefixtures("one_thread")  # small tensors: see conftest.one_thread


def test_figure2_configurations_are_dyadic_2d_float64():
    configs = figure2_configurations()
    assert list(configs) == ["triangle", "emerging_leader", "square", "non_leader_clusters"]
    assert FIGURE2_ALPHA == 0.5
    for tokens in configs.values():
        assert tokens.dtype == np.float64 and tokens.ndim == 2 and tokens.shape[1] == 2
        assert np.array_equal(tokens * 8, np.round(tokens * 8))  # exact in binary: ties are exact
        assert len(np.unique(tokens, axis=0)) == len(tokens) and (np.abs(tokens).sum(1) > 0).all()


def test_the_papers_figure2_configurations_behave_as_the_paper_says():
    """The authors' four configurations (random followers with a fixed seed): the triangle's and the
    square's corners lead and every other token ends on a vertex; (−1/12, 1/12) becomes a leader at
    layer 1;
    (±1/2, 0) end at (±1, 0), points of S that are not vertices."""
    configs = paper_figure2_configurations()
    assert [len(z) for z in configs.values()] == [9, 8, 10, 10]
    np.testing.assert_array_equal(configs["square"], paper_figure2_configurations()["square"])  # seeded
    for name in ("triangle", "square"):
        run = simulate(configs[name], alpha=0.5, layers=30)
        corners = 3 if name == "triangle" else 4
        assert check_theorem(run).passed
        assert bool((leader_layers(run)[:corners] == 0).all())
        ends = run.final.numpy()
        assert np.abs(ends[:, None] - configs[name][None, :corners]).max(-1).min(1).max() < 1e-4
    emerging = simulate(configs["emerging_leader"], alpha=0.5, layers=30)
    assert leader_layers(emerging).tolist() == [0, 1, 0, -1, -1, -1, -1, -1] and check_theorem(emerging).passed
    clusters = simulate(configs["non_leader_clusters"], alpha=0.5, layers=60)
    np.testing.assert_allclose(clusters.final[4:6].numpy(), [[-1.0, 0.0], [1.0, 0.0]], atol=1e-9)
    assert check_theorem(clusters).passed
