"""Tests of hardmax.experiments.svm (small, fast versions) and the `hardmax svm` command."""

from __future__ import annotations

import json
import math

import pytest
import torch

from hardmax.cli import main
from hardmax.experiments.svm import (
    CURVES,
    SyntheticConfig,
    join_hardmax,
    plane_problem,
    render_report,
    run_plane,
    run_synthetic,
)
from hardmax.svm import att_svm, is_locally_optimal

SMALL = SyntheticConfig(n=3, T=4, d=6, seeds=4, iterations=400, record_every=20)


@pytest.fixture(scope="module")
def small():
    return run_synthetic(SMALL)


def test_small_synthetic_run_converges_to_its_svms(small):
    assert set(small.curves) == set(CURVES)
    assert small.curves["corr(W_k, W^mm_α)"].shape == (4, 21)
    # Each parameterisation approaches its own SVM; W's curve ends above its cross control.
    assert small.at("corr(W_k, W^mm_α)", 400).mean() > 0.97
    assert small.at("corr((KQᵀ)_k, W^mm_⋆,α)", 400).mean() > 0.97
    assert (small.selected_mass["W"][:, -1] > 0.999).all()
    # The recorded SVMs are those of the final softmax selection.
    s = 1
    ref = att_svm(small.X[s], small.z[s], small.paths["KQ"].selection[s], norm="nuc").W
    torch.testing.assert_close(small.svm[("KQ", "nuc")][s], ref, atol=1e-6, rtol=0)
    # Local optimality agrees with the library's test.
    expected = is_locally_optimal(small.X[s], small.z[s], small.y[s], small.v[s], small.paths["W"].selection[s])
    assert bool(small.locally_optimal["W"][s]) == expected
    assert "corr(W_k, W^mm_α)" in small.table()


def test_join_hardmax_bound_and_selection():
    result = run_synthetic(SyntheticConfig(n=3, T=4, d=6, seeds=3, iterations=300, record_every=50,
                                           self_attention=True))
    join = join_hardmax(result)
    # Every margin of W^mm is ≥ 1, so the softmax of R·W^mm puts at most (T−1)e^{−R}/(1+(T−1)e^{−R}) off α.
    assert (join.scaled_off_mass <= join.bound * (1 + 1e-6)).all()  # margins are 1 to the solver's ~1e-8
    assert join.hardmax_asymmetric == 1.0
    assert join.off_mass[-1] < join.off_mass[0]
    assert 0 <= join.sym_positive_definite <= 1
    assert math.isnan(join.hardmax_sym) or 0 <= join.hardmax_sym <= 1
    text = render_report(result, join)
    assert "Joined to hardmax" in text and "bound" in text


def test_plane_problem_and_pictures():
    X, z, y, v = plane_problem(3)
    assert X.shape == (2, 3, 2) and torch.allclose(z.norm(dim=-1), torch.ones(2, dtype=torch.float64))
    result = run_plane(3, iterations=200)
    assert result.paths["W"].W.shape == (1, 201, 2, 2)
    # W_k z_i heads along the ray W^mm z_i.
    for i in range(2):
        path = result.paths["W"].W[0, -1] @ z[i]
        ray = result.svm["fro"].W @ z[i]
        assert torch.dot(path, ray) / (path.norm() * ray.norm()) > 0.95
    with pytest.raises(ValueError, match="T must be"):
        plane_problem(1)


@pytest.mark.parametrize(("field", "value"), [("T", 1), ("seeds", 0), ("lr", 0.0)])
def test_config_validation(field, value):
    with pytest.raises(ValueError, match=field):
        SyntheticConfig(**{field: value})


def test_cli_smoke(tmp_path, capsys):
    out = tmp_path / "svm"
    code = main(["svm", "--seeds", "3", "--iterations", "100", "--n", "3", "--T", "4", "--d", "6",
                 "--join-seeds", "2", "--out", str(out)])
    assert code == 0
    printed = capsys.readouterr().out
    assert "corr(W_k, W^mm_α)" in printed
    assert (out / "report.md").read_text().startswith("# Att-SVM")
    results = json.loads((out / "results.json").read_text())
    assert results["config"]["seeds"] == 3 and len(results["iterations"]) == 11
    for name in ("svm_correlation.png", "svm_plane_T3.png", "svm_plane_T5.png"):
        assert (out / name).stat().st_size > 1000


def test_cli_bad_input(tmp_path, capsys):
    assert main(["svm", "--seeds", "0", "--out", str(tmp_path)]) == 2
    assert "seeds must be" in capsys.readouterr().err
