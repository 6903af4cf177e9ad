"""Tests of `hardmax.experiments.dynamics`: simulate -> check -> save as library calls (what `hardmax simulate`,
the explorer and the docs use)."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from hardmax.dynamics import Solution, simulate
from hardmax.experiments.dynamics import SimulateConfig, run_simulation, save_simulation
from hardmax.theory import TheoremReport, check_theorem, paper_figure2_configurations


def test_random_tokens_are_simulated_and_checked_as_simulate_does(tmp_path):
    config = SimulateConfig(random=9, dim=3, seed=4, layers=12, alpha=0.7, gif=False)
    result = run_simulation(config)
    tokens = np.random.default_rng(4).standard_normal((9, 3))
    expected = simulate(tokens, alpha=0.7, layers=12)
    assert list(result.solutions) == ["tokens"]
    assert torch.equal(result.solutions["tokens"].tokens, expected.tokens)
    assert result.reports["tokens"].table() == check_theorem(expected).table()
    assert result.passed and result.source == "random (seed 4)" and "n = 9 tokens in R^3" in result.describe()
    record = json.loads(json.dumps(result.to_dict()))
    assert torch.equal(Solution.from_dict(record["trajectories"]["tokens"]).tokens, expected.tokens)
    assert TheoremReport.from_dict(record["theorem"]["tokens"]).passed
    written = save_simulation(result, tmp_path / "run")
    assert sorted(p.name for p in written) == ["figure.pdf", "figure.png", "report.json", "report.txt",
                                                "trajectory.npy"]
    np.testing.assert_array_equal(np.load(tmp_path / "run" / "trajectory.npy"), expected.tokens.numpy())


def test_figure2_and_a_file_with_a_header(tmp_path):
    result = run_simulation(SimulateConfig(layers=3))
    assert list(result.solutions) == list(paper_figure2_configurations()) and result.passed
    assert result.table().count("## ") == 4
    path = tmp_path / "t.csv"
    path.write_text("x,y\n1,0\n0,1\n-1,-1\n")
    result = run_simulation(SimulateConfig(tokens=path, A="2,0;0,1", layers=4))
    assert result.notes == (f"{path}: line 1 (x, y) is a header, not numbers: skipped",) and result.A_given
    assert result.solutions["tokens"].tokens.shape == (5, 3, 2)


@pytest.mark.parametrize("changes, message", [({"random": 0}, "random needs"), ({"alpha": 0.0}, "alpha must"),
                                               ({"random": 3, "fps": 60}, "fps must"), ({"dim": 2}, "--random N")])
def test_bad_configs_name_the_field(changes, message):
    with pytest.raises(ValueError, match=message):
        SimulateConfig(**changes)
