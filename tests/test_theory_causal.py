"""`hardmax.theory.causal`: what holds under causal attention passes on solved runs (hardmax on the causal kernel,
softmax in R^d and on the sphere with random QᵀK) and fails on doctored ones; the Rényi centres against their
definition one token at a time. The experiments built on them (`hardmax.experiments.causal`) are
test_experiments_causal.py's."""

from __future__ import annotations

import dataclasses
import math

import pytest
import torch

from hardmax.dynamics import RK4, Causal, Field, Hardmax, Pairs, Save, Softmax, Sphere, simulate, solve
from hardmax.theory.causal import check_causal, renyi_centres


def _hardmax_run(seed=0, n=40, layers=120, window=None):
    g = torch.Generator().manual_seed(seed)
    z = torch.randn(4, n, 2, generator=g, dtype=torch.float64)
    return simulate(z, Hardmax(), alpha=1.0, layers=layers, mask=Causal(window))


def test_causal_hardmax_keeps_its_first_token_prefix_hulls_and_leaders():
    sol = _hardmax_run()
    assert sol.engine == "causal"
    report = check_causal(sol)
    assert report["first_token"].passed and report["prefix_hulls"].passed and report["leaders_fixed"].passed
    assert report["leaders_fixed"].numbers["leaders"] > 0
    assert report["single_cluster"].status == "not tested"  # R^d hardmax: not KPR's model


def test_a_sliding_window_keeps_the_prefix_hulls_but_not_the_leaders():
    sol = _hardmax_run(window=3)
    report = check_causal(sol)
    assert report["prefix_hulls"].passed and report["leaders_fixed"].status == "not tested"
    # measured: under the window a token that led at some layer moves later (the full triangle's argument fails)
    allowed = Causal(3).pair_mask(sol.tokens.shape[1:])
    field = sol.field.restricted(allowed)
    ones = torch.ones(sol.tokens.shape[1:3], dtype=torch.float64)
    moved = 0.0
    for k in range(0, sol.tokens.shape[0], 10):
        lead = field.attention(0.0, sol.tokens[k], ones).diagonal(dim1=-2, dim2=-1) == 1
        moved = max(moved, float((sol.tokens[k:] - sol.tokens[k]).norm(dim=-1).amax(0)[lead].amax()))
    assert moved > 1e-3


def test_time_reversed_and_doctored_runs_fail():
    sol = _hardmax_run()
    reversed_ = dataclasses.replace(sol, tokens=sol.tokens.flip(0))
    assert report_status(reversed_, "prefix_hulls") == "failed"
    moved = sol.tokens.clone()
    moved[5:, :, 0] += 1e-6  # the first token moves
    assert report_status(dataclasses.replace(sol, tokens=moved), "first_token") == "failed"
    # a leader moved after it became one: push every token of the last state, leaders included
    pushed = sol.tokens.clone()
    pushed[-1] += 1e-3
    assert report_status(dataclasses.replace(sol, tokens=pushed), "leaders_fixed") == "failed"


def report_status(solution, name):
    return check_causal(solution)[name].status


def test_causal_softmax_in_rd_passes_and_needs_a_causal_mask():
    g = torch.Generator().manual_seed(1)
    z = torch.randn(3, 30, 2, generator=g, dtype=torch.float64)
    sol = solve(Field(Softmax(2.0)), RK4(0.1), z, t1=10.0, mask=Causal(), save=Save(every=10))
    report = check_causal(sol)
    assert report["first_token"].passed and report["prefix_hulls"].passed
    with pytest.raises(ValueError, match="check_flow"):
        check_causal(solve(Field(Softmax(2.0)), RK4(0.1), z, t1=1.0))
    # an anticausal mask: token 1 sees later tokens and the prefix hulls are not the claim
    upper = Pairs(torch.ones(30, 30, dtype=torch.bool).triu())
    report = check_causal(solve(Field(Softmax(2.0)), RK4(0.1), z, t1=1.0, mask=upper))
    assert report["first_token"].status == report["prefix_hulls"].status == "not tested"


def test_an_antipodal_pair_at_rest_fails_single_cluster():
    x = torch.tensor([[[1.0, 0.0], [-1.0, 0.0]]], dtype=torch.float64)
    sol = solve(Field(Softmax(1.0), manifold=Sphere()), RK4(0.1), x, t1=5.0, mask=Causal())
    assert check_causal(sol)["single_cluster"].status == "failed"
    # the same pair nudged off the antipode converges, once given time
    x[0, 1] = torch.tensor([math.cos(3.0), math.sin(3.0)], dtype=torch.float64)
    short = solve(Field(Softmax(1.0), manifold=Sphere()), RK4(0.1), x, t1=0.5, mask=Causal())
    assert check_causal(short)["single_cluster"].status == "not tested"  # still moving
    long = solve(Field(Softmax(1.0), manifold=Sphere()), RK4(0.1), x, t1=40.0, mask=Causal())
    assert check_causal(long)["single_cluster"].passed


def test_renyi_centres_are_their_definition():
    g = torch.Generator().manual_seed(3)
    x = torch.nn.functional.normalize(torch.randn(5, 50, 2, generator=g, dtype=torch.float64), dim=-1)
    delta = 0.5
    c = renyi_centres(x, delta)
    for b in range(5):
        centres = []
        for k in range(50):
            far = [float((x[b, k] - x[b, j]).norm()) > delta for j in range(k)]
            assert bool(c.strong[b, k]) == all(far)
            if all(float((x[b, k] - x[b, j]).norm()) > delta for j in centres):
                centres.append(k)
        assert c.greedy[b].nonzero().flatten().tolist() == centres
    assert bool((c.greedy | ~c.strong).all())  # every strong centre is a greedy one
    with pytest.raises(ValueError, match="delta"):
        renyi_centres(x, 0.0)
