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
    assert main(["svm", "--imdb-iterations", "0", "--out", str(tmp_path)]) == 2
    assert "--imdb-iterations must be" in capsys.readouterr().err


def test_imdb_join_on_a_small_classifier():
    # A tiny untrained classifier stands in for a trained run: the join's bookkeeping (feasibility by
    # prefix, leaders, words, agreement with the optimal word) is checked, not IMDb's numbers.
    from types import SimpleNamespace

    from hardmax.experiments.svm import imdb_join
    from hardmax.models import HardmaxClassifier, ModelConfig

    torch.manual_seed(0)
    words = [f"w{k}" for k in range(40)]
    model = HardmaxClassifier(ModelConfig(vocab_size=len(words), d=4, layers=2)).double().eval()
    g = torch.Generator().manual_seed(3)
    ids = torch.randint(1, len(words), (12, 9), generator=g)
    mask = torch.ones(12, 9, dtype=torch.bool)
    mask[::3, 6:] = False  # some shorter reviews
    split = SimpleNamespace(ids=ids, mask=mask, labels=torch.randint(0, 2, (12,), generator=g))
    run = SimpleNamespace(model=model, vocab=SimpleNamespace(words=words))
    result = imdb_join(run, split, reviews=8, iterations=100)
    assert result.reviews == 8 and result.d == 4 and 1 <= result.tokens_mean <= result.tokens_max <= 9
    assert 0 <= result.feasible_single <= 1 and 0 <= result.agree_optimal <= 1
    sizes = sorted(result.feasible_by_n)
    assert sizes[-1] == 8
    # A prefix's constraints are a subset of a longer prefix's: feasibility can only be lost as n grows.
    flags = [result.feasible_by_n[k] for k in sizes]
    assert flags == sorted(flags, reverse=True)
    assert result.corr is not None  # these 8 short reviews are jointly separable in d = 4
    assert -1 <= result.corr[0] <= 1 and result.feasible_by_n[result.corr[1]]
    assert 0 <= result.beats_support <= 1
    for share in (*result.selected_leader, *result.optimal_leader, *result.chance):
        assert 0 <= share <= 1
    assert sum(k for _, k in result.top_words) == 8 and all(w in words for w, _ in result.top_words)
    assert len(result.examples) == 8
    text = render_report(run_synthetic(SyntheticConfig(n=2, T=3, d=3, seeds=2, iterations=20)), None, result)
    assert "## IMDb: the d = 4 classifier's tokens" in text and "globally optimal word" in text
