"""Tests of `hardmax.dynamics.solution`: `Solution`, the one result of `solve`, `simulate` and a classifier's trace."""

from __future__ import annotations

import dataclasses
import json

import pytest
import torch

from hardmax.dynamics import (
    QK,
    RK4,
    Adaptive,
    Bilinear,
    Euler,
    Field,
    Hardmax,
    Save,
    Softmax,
    Solution,
    simulate,
    solve,
)

Z = torch.tensor([[1.0, 1], [1, -1], [-1, 1], [-1, -1], [0.5, 0]], dtype=torch.float64)


def test_the_papers_view_of_a_solution_comes_from_its_field_and_solver():
    A = torch.tensor([[2.0, 0.5], [0.5, 1.0]], dtype=torch.float64)
    run = simulate(Z, Softmax(2.0), alpha=[0.5, 1.0, 2.0], layers=3, A=A, save=Save(every=2))
    assert run.steps == (0, 2, 3) and run.layers == 3 and not run.complete
    assert run.rule == Softmax(2.0) and torch.equal(run.A, A) and run.alpha.tolist() == [0.5, 1.0, 2.0]
    gammas = torch.tensor([0.5 / 1.5, 1 / 2, 2 / 3], dtype=torch.float64)
    torch.testing.assert_close(run.times, torch.cumsum(torch.cat([torch.zeros(1, dtype=torch.float64), gammas]),
                                                       0)[[0, 2, 3]], rtol=0, atol=1e-15)
    assert torch.equal(run.after(2), run.tokens[1]) and torch.equal(run.after(-1), run.final)
    assert torch.equal(run.at(float(run.times[1]) + 1e-3), run.tokens[1])
    with pytest.raises(ValueError, match=r"^step 1 is not saved \(saved: 0, 2, 3\)"):
        run.after(1)


def test_a_solution_says_what_it_does_not_have():
    flow = solve(Field(Softmax(1.0), QK(torch.eye(2, dtype=torch.float64), 2 * torch.eye(2, dtype=torch.float64))),
                 RK4(0.1), Z, steps=3)
    with pytest.raises(ValueError, match="solved with RK4, not Euler.layers"):
        _ = flow.alpha
    with pytest.raises(ValueError, match="scores are QK, not Bilinear"):
        _ = flow.A
    with pytest.raises(ValueError, match="only a solution of the paper's layers"):
        flow.to_dict()
    adaptive = solve(Field(Softmax(1.0)), Adaptive(), Z, t1=1.0, save=Save.final())
    assert adaptive.steps is None and adaptive.times.tolist() == [0.0, 1.0]
    with pytest.raises(ValueError, match="an adaptive solution has saved times, not steps"):
        adaptive.after(1)


@pytest.mark.parametrize("rule", [Hardmax(), Softmax(3.0)])
def test_to_dict_round_trips_with_the_multiplicity_and_attention(rule):
    run = simulate(Z, rule, alpha=0.7, layers=4, save=Save(every=2, attention=True))
    back = Solution.from_dict(json.loads(json.dumps(run.to_dict())))
    assert back.steps == run.steps and back.rule == rule
    for name in ("tokens", "times", "alpha", "A", "mask", "attention"):
        assert torch.equal(getattr(back, name), getattr(run, name)), name
    with pytest.raises(ValueError, match="not a solution record"):
        Solution.from_dict({"dtype": "float64"})


def test_from_layers_builds_the_solution_a_classifier_trace_carries():
    w = torch.tensor([[2.0, 1.0, 0.0]], dtype=torch.float64)
    tokens = torch.randn(3, 1, 3, 2, dtype=torch.float64)
    alpha = torch.tensor([0.5, 0.5], dtype=torch.float64, requires_grad=True)
    s = Solution.from_layers(tokens, alpha, None, Hardmax(), w > 0, multiplicity=w)
    assert s.steps == (0, 1, 2) and s.layers == 2 and s.alpha.requires_grad
    assert torch.equal(s.counts, w) and s.engine == "layers"
    none = Solution.from_layers(tokens[:1], torch.zeros(0, dtype=torch.float64), None, Hardmax(), w > 0)
    assert none.layers == 0 and none.alpha.shape == (0,) and none.times.tolist() == [0.0]
    softplus_underflow = Solution.from_layers(tokens, torch.zeros(2, dtype=torch.float64, requires_grad=True), None,
                                              Hardmax(), w > 0)
    assert softplus_underflow.alpha.tolist() == [0.0, 0.0]  # a learned α that underflowed: a layer that does not move


def test_a_solution_is_immutable_and_replaceable():
    run = simulate(Z, alpha=0.5, layers=2)
    with pytest.raises(dataclasses.FrozenInstanceError):
        run.tokens = None
    moved = dataclasses.replace(run, solver=Euler.layers(0.6), field=Field(Hardmax(), Bilinear(2 * torch.eye(2))))
    assert moved.alpha.tolist() == [0.6, 0.6] and float(moved.A[0, 0]) == 2.0
