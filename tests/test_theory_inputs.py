"""Tests of `hardmax.theory.inputs`: the theory functions refuse what `simulate` refuses (non-finite,
complex, non-numeric, empty, low-precision tokens), a tensor or a softmax run where a hardmax `Solution` is
needed, and tolerances that are not finite and ≥ 0, each with a one-line ValueError.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import torch
from theory_cases import SQUARE_WITH_A_POINT

import hardmax.theory as theory
from hardmax.dynamics import Softmax, simulate
from hardmax.theory import check_theorem, find_clusters, find_leaders, leader_layers, polytope

pytestmark = pytest.mark.usefixtures("one_thread")  # small tensors: see conftest.one_thread


def _with(value, at=(0, 0)):
    z = torch.tensor(SQUARE_WITH_A_POINT, dtype=torch.float64)
    z[at] = value
    return z


@pytest.mark.parametrize("tokens, message", [
    (_with(float("nan")), "NaN or inf"),
    (_with(float("inf")), "NaN or inf"),
    (torch.tensor(SQUARE_WITH_A_POINT, dtype=torch.complex128), "must be real"),
    (np.array(SQUARE_WITH_A_POINT, dtype=np.complex64), "must be real"),
    (np.array([["a", "b"]]), "must be numeric"),
    (torch.zeros(0, 5, 2), "at least one sequence"),
    (torch.zeros(3, 0, 2), "at least one sequence"),
    (torch.tensor(SQUARE_WITH_A_POINT, dtype=torch.float16), "cannot resolve ties"),
    (torch.tensor(SQUARE_WITH_A_POINT, dtype=torch.bfloat16), "cannot resolve ties"),
    (torch.tensor(SQUARE_WITH_A_POINT).to(torch.float8_e5m2), "cannot resolve ties"),
    (torch.ones(5), "shape"),
])
@pytest.mark.parametrize("function", ["find_leaders", "attention_sets", "polytope"])
def test_snapshot_functions_refuse_what_simulate_refuses(tokens, message, function):
    with pytest.raises(ValueError, match=message):
        getattr(theory, function)(tokens)


def test_finite_tokens_whose_sum_overflows_are_accepted_and_one_nan_among_them_refused():
    """The finiteness check sums first (NaN and inf survive a sum); a sum that overflows looks at every entry."""
    from hardmax.theory.inputs import as_tokens

    big = torch.full((4, 3, 2), 1e308, dtype=torch.float64)
    assert not torch.isfinite(big.sum())
    assert as_tokens(big) is not None
    for bad in (float("nan"), float("inf"), -float("inf")):
        z = big.clone()
        z[2, 1, 0] = bad
        with pytest.raises(ValueError, match="NaN or inf"):
            as_tokens(z)
    z = torch.tensor([[1e308, 0.0], [-1e308, float("inf")]])  # +inf among values that cancel
    with pytest.raises(ValueError, match="NaN or inf"):
        as_tokens(z)


@pytest.mark.parametrize("atol", [-1.0, float("nan"), float("inf")])
def test_invalid_atol_is_refused(atol):
    z = torch.tensor(SQUARE_WITH_A_POINT, dtype=torch.float64)
    run = simulate(z, alpha=0.5, layers=3)
    for call in (lambda: find_leaders(z, atol=atol), lambda: polytope(z, atol=atol),
                 lambda: leader_layers(run, atol=atol), lambda: find_clusters(run, atol=atol),
                 lambda: check_theorem(run, atol=atol)):
        with pytest.raises(ValueError, match="atol must be a finite number ≥ 0"):
            call()


@pytest.mark.parametrize("function", ["check_theorem", "leader_layers", "find_clusters"])
def test_trajectory_functions_refuse_tensors_and_softmax(function):
    z = torch.tensor(SQUARE_WITH_A_POINT, dtype=torch.float64)
    with pytest.raises(ValueError, match="expected a hardmax.dynamics.Solution"):
        getattr(theory, function)(z)
    with pytest.raises(ValueError, match="expected a hardmax.dynamics.Solution"):
        getattr(theory, function)(z.numpy())
    soft = simulate(z, Softmax(beta=2.0), alpha=0.5, layers=3)
    with pytest.raises(ValueError, match="hardmax"):
        getattr(theory, function)(soft)
    run = simulate(z, alpha=0.5, layers=3)
    broken = dataclasses.replace(run, tokens=run.tokens.clone().index_fill_(1, torch.tensor([2]), float("nan")))
    with pytest.raises(ValueError, match="NaN or inf"):
        getattr(theory, function)(broken)
