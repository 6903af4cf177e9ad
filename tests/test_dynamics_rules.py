"""Tests of `hardmax.dynamics.rules`: each rule's attention matrix against its closed form (ties and multiplicities
included), the limits between rules, the default tie tolerance, the registry's JSON spelling, and a one-line
ValueError for every bad parameter."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from tokens import gaussian

from hardmax.dynamics import RULES, Field, Hardmax, Localmax, Softmax, Unnormalised, simulate, solve
from hardmax.dynamics.rules import (
    default_tie_rtol,
    particle_model,
    row_stochastic,
    rule_from_dict,
    rule_parameters,
    rule_to_dict,
)
from hardmax.dynamics.solvers import Euler

BAD_RULES = {
    "softmax without beta": (lambda: Softmax(None), "beta"),
    "softmax beta zero": (lambda: Softmax(0.0), "beta > 0"),
    "softmax beta NaN": (lambda: Softmax(float("nan")), "beta > 0"),
    "softmax beta inf": (lambda: Softmax(float("inf")), "beta > 0"),
    "tie_rtol negative": (lambda: Hardmax(-1e-3), "tie_rtol"),
    "tie_rtol one": (lambda: Hardmax(1.0), "tie_rtol"),
    "tie_rtol NaN": (lambda: Hardmax(float("nan")), "tie_rtol"),
    "tie_rtol a string": (lambda: Hardmax("0.1"), "tie_rtol"),
    "localmax theta zero": (lambda: Localmax(0.0), "theta > 0"),
}


@pytest.mark.parametrize("name", BAD_RULES)
def test_bad_rule_raises_value_error(name):
    make, message = BAD_RULES[name]
    with pytest.raises(ValueError, match=message) as info:
        make()
    assert "\n" not in str(info.value)


def test_localmax_hulls_are_nested_and_tend_to_hardmax():
    z = gaussian((4, 12, 2), 12)
    sol = solve(Field(Localmax(0.5)), Euler.layers(1.0), z, steps=30)
    u = torch.nn.functional.normalize(gaussian((256, 2), 1), dim=-1)
    support = (sol.tokens @ u.T).amax(-2)
    assert float((support[1:] - support[:-1]).max()) <= 1e-12
    hard = simulate(z, alpha=1.0, layers=5).tokens
    tiny = solve(Field(Localmax(1e-9)), Euler(0.5), z, steps=5).tokens
    np.testing.assert_allclose(tiny.numpy(), hard.numpy(), rtol=0, atol=1e-12)


def test_localmax_tends_to_uniform_weights_as_theta_grows():
    z = gaussian((3, 8, 2), 16)
    wide = solve(Field(Localmax(1e12)), Euler(0.3), z, steps=6).tokens
    uniform = solve(Field(Unnormalised(0.0)), Euler(0.3), z, steps=6).tokens  # P_ij = 1/n
    np.testing.assert_allclose(wide.numpy(), uniform.numpy(), rtol=0, atol=1e-13)


# --------------------------------------------------------------------------------------------
# each rule's matrix is its closed form
# --------------------------------------------------------------------------------------------

# Three tokens on a line, the middle one counted twice: ⟨z_i, z_j⟩ = x_i x_j with x = (−1, 1, 2) (A = I, d = 1).
LINE = torch.tensor([[[-1.0], [1.0], [2.0]]], dtype=torch.float64)
WEIGHTS = torch.tensor([[1.0, 2.0, 1.0]], dtype=torch.float64)


def test_hardmax_attends_to_its_maximisers_with_their_multiplicity():
    """C_i = argmax_j x_i x_j: the last token for the positive ones, the first for −1; a tie (the 2-D square below)
    splits P_i by multiplicity, w_j / Σ_{l ∈ C_i} w_l."""
    P = Hardmax().matrix(LINE, WEIGHTS, None)
    assert P[0].tolist() == [[1.0, 0.0, 0.0], [0.0, 0.0, 1.0], [0.0, 0.0, 1.0]]
    square = torch.tensor([[[1.0, 0.0], [0.0, 1.0], [0.5, 0.5]]], dtype=torch.float64)
    tied = Hardmax().matrix(square, WEIGHTS, None)  # ⟨z_3, z_1⟩ = ⟨z_3, z_2⟩ = ⟨z_3, z_3⟩ = 1/2: a three-way tie
    assert tied[0, 2].tolist() == [0.25, 0.5, 0.25]  # split 1 : 2 : 1 by multiplicity


def test_softmax_and_unnormalised_are_their_formulas():
    """Softmax: P_ij = w_j e^{β s_ij} / Σ_l w_l e^{β s_il}; Unnormalised: w_j e^{β s_ij} / Σ_l w_l (rows need not sum
    to 1)."""
    beta, x, w = 0.7, [-1.0, 1.0, 2.0], [1.0, 2.0, 1.0]
    soft = Softmax(beta).matrix(LINE, WEIGHTS, None)[0]
    raw = Unnormalised(beta).matrix(LINE, WEIGHTS, None)[0]
    for i in range(3):
        e = [w[j] * math.exp(beta * x[i] * x[j]) for j in range(3)]
        np.testing.assert_allclose(soft[i].numpy(), np.array(e) / sum(e), rtol=1e-14, atol=0)
        np.testing.assert_allclose(raw[i].numpy(), np.array(e) / sum(w), rtol=1e-14, atol=0)
    assert float((soft.sum(-1) - 1).abs().max()) < 1e-15 and float(raw.sum(-1)[2]) > 1


def test_localmax_is_uniform_over_the_scores_within_theta_of_the_best():
    """P_ij ∝ w_j 1[s_ij ≥ max_l s_il − θ], θ = 2.5: row 3 (x = 2, scores −2, 2, 4) takes the keys within 2.5 of 4."""
    P = Localmax(2.5).matrix(LINE, WEIGHTS, None)[0]
    assert P[2].tolist() == [0.0, 2 / 3, 1 / 3]
    assert P[0].tolist() == [1 / 3, 2 / 3, 0.0]  # x = −1: scores 1, −1, −2; within 2.5 of 1: the first two


@pytest.mark.parametrize("rule", [Hardmax(), Softmax(1.3), Localmax(0.4), Unnormalised(0.8)])
def test_absent_tokens_neither_attend_nor_are_attended(rule):
    """A token of multiplicity 0 has a zero row and a zero column; the others are the rule on the present ones."""
    z = gaussian((2, 5, 3), 3)
    w = torch.tensor([[1.0, 0.0, 1.0, 1.0, 0.0], [1.0, 1.0, 1.0, 1.0, 1.0]], dtype=torch.float64)
    P = rule.matrix(z, w, None)
    assert bool((P[0, [1, 4]] == 0).all()) and bool((P[0, :, [1, 4]] == 0).all())
    alone = rule.matrix(z[:1, [0, 2, 3]], torch.ones(1, 3, dtype=torch.float64), None)
    torch.testing.assert_close(P[0][[0, 2, 3]][:, [0, 2, 3]], alone[0], rtol=0, atol=1e-15)


# --------------------------------------------------------------------------------------------
# the default tolerance, what a rule declares, the registry
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("dtype", "value"), [(torch.float32, 7.62939453125e-06),
                                             (torch.float64, 1.4210854715202004e-14)])
def test_the_default_tie_rtol_is_64_machine_epsilons(dtype, value):
    assert default_tie_rtol(dtype) == value == 64 * torch.finfo(dtype).eps
    assert Hardmax().rtol(dtype) == value and Hardmax(1e-3).rtol(dtype) == 1e-3


def test_what_each_rule_declares():
    assert [row_stochastic(r) for r in (Hardmax(), Softmax(1.0), Localmax(0.1), Unnormalised(1.0))] == \
        [True, True, True, False]
    assert [particle_model(r) for r in (Hardmax(), Softmax(1.0), Unnormalised(1.0))] == [None, "SA", "USA"]
    assert row_stochastic(object()) is False and particle_model(object()) is None  # undeclared: the defaults
    assert rule_parameters("softmax") == {"beta": True} and rule_parameters(Hardmax) == {"tie_rtol": False}


@pytest.mark.parametrize("rule", [Hardmax(), Hardmax(1e-6), Softmax(2.5), Localmax(0.3), Unnormalised(0.5)])
def test_every_registered_rule_round_trips_through_its_json_spelling(rule):
    record = rule_to_dict(rule)
    assert RULES[record["rule"]] is type(rule) and rule_from_dict(record) == rule


@pytest.mark.parametrize(("call", "message"), [
    (lambda: rule_from_dict({"rule": "sparsemax"}), "unknown attention rule 'sparsemax'; known: hardmax, softmax"),
    (lambda: rule_from_dict({"rule": "softmax", "temperature": 2.0}), "attention rule 'softmax': .*temperature"),
    (lambda: rule_parameters("sparsemax"), "unknown attention rule 'sparsemax'"),
    (lambda: rule_to_dict(object()), "object is not a registered rule .*add it to RULES"),
])
def test_the_registry_names_what_it_does_not_know(call, message):
    with pytest.raises(ValueError, match=message) as info:
        call()
    assert "\n" not in str(info.value)
