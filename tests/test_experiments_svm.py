"""Tests of hardmax.experiments.svm (small, fast versions) and the `hardmax svm` command."""

from __future__ import annotations

import dataclasses
import json
import math
import re
import warnings

import pytest
import torch

from hardmax.cli import main
from hardmax.experiments.svm import (
    CURVES,
    MAX_RECORDS,
    NoSolvableSeedError,
    SyntheticConfig,
    join_hardmax,
    plane_problem,
    render_report,
    run_plane,
    run_synthetic,
    synthetic_memory,
    synthetic_problems,
)
from hardmax.memory import MemoryBudgetError
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
    problem = plane_problem(3)
    X, z = problem.X, problem.z
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
    assert -1 <= result.corr <= 1 and result.feasible_by_n[result.corr_reviews]
    assert 0 <= result.beats_support <= 1
    for share in (*result.selected_leader, *result.optimal_leader, *result.chance):
        assert 0 <= share <= 1
    assert sum(k for _, k in result.top_words) == 8 and all(w in words for w, _ in result.top_words)
    assert len(result.examples) == 8
    text = render_report(run_synthetic(SyntheticConfig(n=2, T=3, d=3, seeds=2, iterations=20)), None, result)
    assert "## IMDb: the d = 4 classifier's tokens" in text and "globally optimal word" in text


# --------------------------------------------------------------------------------------------
# issue #23: failed seeds, options checked first, CRATE runs, memory
# --------------------------------------------------------------------------------------------

# Fast options for command-line tests that should never get as far as computing.
TINY = ["--seeds", "1", "--iterations", "2", "--n", "2", "--T", "2", "--d", "2", "--join-seeds", "0", "--no-figures"]


@pytest.fixture
def no_synthetic(monkeypatch):
    """Make any synthetic run fail loudly: what is checked must be checked before it."""
    import hardmax.experiments.svm as experiments

    def refuse(*args, **kwargs):
        raise AssertionError("the synthetic experiment ran")

    monkeypatch.setattr(experiments, "run_synthetic", refuse)


def test_infeasible_seeds_are_recorded_and_the_others_reported():
    # d = 1: unit tokens are ±1, so an input whose two tokens coincide has no separable selection.
    config = SyntheticConfig(n=1, T=2, d=1, seeds=8, iterations=50)
    result = run_synthetic(config)
    X = synthetic_problems(config, torch.Generator().manual_seed(config.seed)).X
    degenerate = {s for s in range(8) if X[s, 0, 0, 0] == X[s, 0, 1, 0]}
    assert 0 < len(degenerate) < 8 and set(result.failures) == degenerate
    assert all("infeasible" in why for why in result.failures.values())
    assert result.seeds.tolist() == [s for s in range(8) if s not in degenerate]
    S = result.reported
    assert S == 8 - len(degenerate) and result.X.shape[0] == S and result.paths["KQ"].W.shape[0] == S
    assert result.curves["corr(W_k, W^mm_α)"].shape[0] == S
    assert result.svm[("W", "fro")].shape[0] == S and result.locally_optimal["W"].shape == (S,)
    table = result.table()
    assert f"{len(degenerate)} of 8 seeds not reported" in table and f"/{S} seeds" in table
    assert ", ".join(map(str, sorted(degenerate))) in table


def test_no_solvable_seed_is_one_error():
    with pytest.raises(NoSolvableSeedError, match="no seed of the synthetic run could be solved.*seed 0: .*infeasible"):
        run_synthetic(SyntheticConfig(n=6, T=8, d=1, seeds=3, iterations=20))


def test_cli_reports_the_solvable_seeds(tmp_path, capsys):
    # One infeasible seed aborted the command after all the descent, writing nothing.
    out = tmp_path / "svm"
    assert main(["svm", "--d", "1", "--n", "1", "--T", "2", "--seeds", "8", "--iterations", "50", "--no-figures",
                 "--join-seeds", "0", "--out", str(out)]) == 0
    results = json.loads((out / "results.json").read_text())
    failed = [f["seed"] for f in results["failures"]]
    assert results["failed"] == len(failed) > 0 and all("infeasible" in f["why"] for f in results["failures"])
    assert sorted(results["seeds_reported"] + failed) == list(range(8))
    assert len(results["curves"]["corr(W_k, W^mm_α)"]["mean"]) == len(results["iterations"])
    assert f"{len(failed)} of 8 seeds not reported" in (out / "report.md").read_text()
    assert "not reported: seed" in capsys.readouterr().err
    # The command: no seed is solvable with n = 6, T = 8 in d = 1: one line, exit code 2.
    assert main(["svm", "--d", "1", "--n", "6", "--T", "8", "--seeds", "20", "--iterations", "50", "--no-figures",
                 "--out", str(tmp_path / "x")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].startswith("hardmax svm: error: no seed of the synthetic run could be solved")


@pytest.mark.parametrize(("option", "value", "message"), [
    ("--seeds", "0", "--seeds must be ≥ 1"), ("--iterations", "0", "--iterations must be ≥ 1"),
    ("--n", "0", "--n must be ≥ 1"), ("--T", "1", "--T must be ≥ 2"), ("--d", "0", "--d must be ≥ 1"),
    ("--join-seeds", "-1", "--join-seeds must be ≥ 0"), ("--reviews", "1", "--reviews must be ≥ 2"),
    ("--imdb-iterations", "0", "--imdb-iterations must be ≥ 1"),
    ("--seed", "-1", r"--seed must lie in \[0, 2\*\*63 − 1\]"),
    ("--seed", str(10**23), r"--seed must lie in \[0, 2\*\*63 − 1\]"),
])
def test_cli_integer_options_are_checked_first(tmp_path, capsys, no_synthetic, option, value, message):
    assert main(["svm", *TINY, option, value, "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and re.search(message, err[0]), err


def test_cli_checks_out_before_computing(tmp_path, capsys, no_synthetic, monkeypatch):
    existing = tmp_path / "file.txt"
    existing.write_text("x")
    for out, message in ((existing, "is an existing file, not a folder"),
                         (existing / "sub" / "dir", "file.txt is a file, not a folder")):
        assert main(["svm", *TINY, "--out", str(out)]) == 2
        assert message in capsys.readouterr().err
    import os

    real_access = os.access
    monkeypatch.setattr(os, "access", lambda path, mode: str(path) != str(tmp_path) and real_access(path, mode))
    assert main(["svm", *TINY, "--out", str(tmp_path / "new" / "out")]) == 2
    assert f"{tmp_path} is not a writable folder" in capsys.readouterr().err


def test_cli_one_seed_reports_no_spread(tmp_path, capsys):
    # --seeds 1 printed "± nan" after torch's std() warnings.
    out = tmp_path / "one"
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert main(["svm", "--seeds", "1", "--iterations", "40", "--n", "3", "--T", "4", "--d", "6",
                     "--join-seeds", "1", "--no-figures", "--out", str(out)]) == 0
    report = (out / "report.md").read_text()
    assert "nan" not in report and "± — (" in report
    results = json.loads((out / "results.json").read_text())
    assert all(curve["std"] is None for curve in results["curves"].values())


def _tiny_run(tmp_path, monkeypatch, layer: str):
    from test_cli_sentiment import write_archive

    monkeypatch.delenv("HARDMAX_IMDB", raising=False)
    monkeypatch.setenv("HARDMAX_CACHE", str(tmp_path / "cache"))
    archive = write_archive(tmp_path / "imdb.tar.gz", n=20)
    run = tmp_path / layer
    args = ["train", "--run", str(run), "--data", str(archive), "--d", "4", "--layers", "2", "--epochs", "1",
            "--min-count", "2", "--batch-size", "16"]
    assert main(args + (["--layer", "crate"] if layer == "crate" else [])) == 0
    return run, archive


def test_a_crate_run_is_refused_before_the_synthetic_work(tmp_path, capsys, monkeypatch):
    # `hardmax svm --imdb-run <CRATE run>` ran all the synthetic work, then ended in a traceback
    # ('CrateTrace' object has no attribute 'A').
    run, archive = _tiny_run(tmp_path, monkeypatch, "crate")
    capsys.readouterr()
    import hardmax.experiments.svm as experiments
    from hardmax.training import load_run

    monkeypatch.setattr(experiments, "run_synthetic", lambda *a, **k: pytest.fail("the synthetic experiment ran"))
    assert main(["svm", *TINY, "--imdb-run", str(run), "--data", str(archive), "--out", str(tmp_path / "svm")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "the IMDb join needs the paper's hardmax layer (a run trained without --layer crate)" \
        in err[0]
    # The library function refuses the model itself.
    loaded = load_run(run)
    with pytest.raises(ValueError, match="needs the paper's hardmax layer.*got a CrateClassifier"):
        experiments.imdb_join(loaded, loaded.load_data(str(archive)).test, reviews=4, iterations=10)


@pytest.mark.parametrize(("field", "value"), [("seed", -1), ("seed", 2**63), ("seed", 1.5), ("n", 2.0)])
def test_config_refuses_seeds_outside_the_generator_range(field, value):
    with pytest.raises(ValueError, match=field):
        SyntheticConfig(**{field: value})


def test_run_synthetic_refuses_what_does_not_fit_in_memory(monkeypatch):
    monkeypatch.setenv("HARDMAX_MEMORY_LIMIT", "1G")
    with pytest.raises(MemoryBudgetError, match=r"SyntheticConfig\(seeds=100000000, n=6, T=8, d=10"):
        run_synthetic(SyntheticConfig(seeds=100_000_000))
    with pytest.raises(MemoryBudgetError, match=r"d=100000"):
        run_synthetic(SyntheticConfig(d=100_000))


@pytest.mark.parametrize(("option", "value"), [("--seeds", "100000000"), ("--d", "100000"), ("--n", "10000000"),
                                               ("--T", "10000000"), ("--join-seeds", "100000000")])
def test_cli_refuses_what_does_not_fit_in_memory(tmp_path, capsys, monkeypatch, no_synthetic, option, value):
    monkeypatch.setenv("HARDMAX_MEMORY_LIMIT", "1G")
    assert main(["svm", option, value, "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and f"{option} {value}" in err[0] and "needs about" in err[0] and "1 GiB" in err[0]


def test_the_recorded_iterates_are_bounded_whatever_the_steps():
    # The descent kept every 10th W: 2 GB at 20,000 iterations of the default run. Now at most
    # MAX_RECORDS + 1 iterates are kept, so memory does not grow with --iterations.
    config = SyntheticConfig(n=2, T=3, d=2, seeds=2, iterations=3 * MAX_RECORDS, record_every=1)
    assert config.stride == 3
    result = run_synthetic(config)
    assert result.iterations.tolist() == list(range(0, 3 * MAX_RECORDS + 1, 3))
    assert result.paths["W"].W.shape == (2, MAX_RECORDS + 1, 2, 2)
    default = SyntheticConfig()
    assert synthetic_memory(dataclasses.replace(default, iterations=10**9)) < 1.05 * synthetic_memory(
        dataclasses.replace(default, iterations=20_000)) < 2**30
    # The estimate covers what the result holds (the iterates, curves, problems).
    held = sum(t.numel() * t.element_size() for t in _tensors(result))
    assert held <= synthetic_memory(config) <= 20 * held


def _tensors(result):
    yield from (result.X, result.z, result.y, result.v)
    for path in result.paths.values():
        yield from (path.W, path.loss, path.attention)
    yield from result.svm.values()
    yield from result.curves.values()
    yield from result.selected_mass.values()
