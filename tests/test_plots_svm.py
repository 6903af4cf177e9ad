"""Tests of `hardmax.plots.svm`: `plot_correlations` and `plot_plane` drawn from hand-made results (the plots read
`SyntheticResult` and `PlaneResult` by their fields): curves, bands, stars on the selected tokens, rays."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch

from hardmax.plots.svm import plot_correlations, plot_plane

CURVES = ("corr(W_k, W^mm_α)", "corr((KQᵀ)_k, W^mm_⋆,α)", "control: corr(W_k, W^mm_⋆,α)",
          "control: corr((KQᵀ)_k, W^mm_α)")


@pytest.mark.parametrize("failures", [{}, {2: "infeasible"}])
def test_plot_correlations_draws_the_four_curves_and_the_mass(failures):
    steps = torch.arange(5)
    seeds = 3 - len(failures)
    result = SimpleNamespace(
        iterations=steps, curves={c: torch.linspace(0.6, 0.99, 5).repeat(seeds, 1) for c in CURVES},
        selected_mass={p: torch.linspace(0.5, 1.0, 5).repeat(seeds, 1) for p in ("W", "KQ")}, reported=seeds,
        failures=failures, config=SimpleNamespace(seeds=3, n=4, T=6, d=8))
    fig = plot_correlations(result)
    ax, mass = fig.axes
    assert [t.get_text() for t in ax.get_legend().get_texts()] == list(CURVES)
    assert len(ax.collections) == 4 and len(mass.collections) == 2  # the 10th-90th percentile bands
    title = ax.get_title()
    assert title == (f"{seeds} of 3 seeds, n = 4, T = 6, d = 8" if failures else "3 seeds, n = 4, T = 6, d = 8")
    assert mass.get_yscale() == "log" and mass.get_title() == "softmax becomes hardmax"


def test_plot_plane_marks_the_selected_tokens_and_the_svm_rays():
    T = 3
    X = torch.tensor([[[1.0, 0.6], [-0.8, 0.1], [-0.7, -0.2]], [[1.0, -0.6], [-0.9, 0.0], [-0.8, 0.2]]])
    path = SimpleNamespace(selection=torch.tensor([[0, 0]]), W=torch.rand(1, 4, 2, 2))
    result = SimpleNamespace(X=X, z=torch.eye(2), paths={"W": path, "KQ": path},
                             svm={"fro": SimpleNamespace(W=torch.eye(2)), "nuc": SimpleNamespace(W=torch.eye(2))})
    fig = plot_plane(result)
    assert [ax.get_title() for ax in fig.axes] == [f"W descent, T = {T}", f"(K, Q) descent, T = {T}"]
    for ax in fig.axes:
        markers = [c.get_paths()[0] for c in ax.collections]
        assert len(markers) == 2 * T and len(ax.lines) == 4  # every token; a path and a ray per input
        sizes = sorted(float(c.get_sizes()[0]) for c in ax.collections)
        assert sizes == [90.0] * (2 * T - 2) + [260.0] * 2  # token 0 of each input selected: a star
