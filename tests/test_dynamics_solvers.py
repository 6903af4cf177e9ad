"""Tests of `hardmax.dynamics.solvers`: the paper's step γ = α/(1+α) and its contraction 1/(1+α) in closed form, the
one update z + γ(T − z), each solver's measured order against its declared one, the adaptive solver against RK4, and
a one-line ValueError for every bad solver."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from tokens import gaussian, on_sphere

from hardmax.dynamics import Field, Save, Sphere, simulate, solve
from hardmax.dynamics.field import QK
from hardmax.dynamics.rules import Hardmax, Localmax, Softmax, Unnormalised
from hardmax.dynamics.solvers import RK4, Adaptive, Euler, euler_update, layer_contraction, layer_step


@pytest.mark.parametrize("solver_cls,order", [(Euler, 1), (RK4, 4)])
def test_the_measured_order_of_convergence(solver_cls, order):
    z = gaussian((6, 3), 5) * 0.5
    V = torch.eye(3, dtype=torch.float64) + 0.3 * gaussian((3, 3), 6)
    field = Field(Softmax(1.0), scores=QK(gaussian((3, 3), 7), gaussian((3, 3), 8)), value=V)
    t1 = 1.0
    exact = solve(field, RK4(1e-3), z, t1=t1, save=Save.final()).final  # error ~1e-15, below every measured one
    dts = [0.2, 0.1, 0.05, 0.025]
    errors = [float((solve(field, solver_cls(dt), z, t1=t1, save=Save.final()).final - exact).abs().max())
              for dt in dts]
    slope = np.polyfit(np.log(dts), np.log(errors), 1)[0]
    assert abs(slope - order) < 0.25, (slope, errors)


def test_adaptive_agrees_with_rk4_and_saves_at_the_times_asked():
    z = on_sphere(5, 3, 2, batch=2)
    field = Field(Softmax(3.0), manifold=Sphere())
    a = solve(field, Adaptive(rtol=1e-10, atol=1e-12), z, save=Save(times=(0.5, 1.0, 2.0)))
    b = solve(field, RK4(0.005), z, t1=2.0, save=Save(every=100))
    assert a.times.tolist() == [0.0, 0.5, 1.0, 2.0]
    np.testing.assert_allclose(a.tokens.numpy(), b.tokens[[0, 1, 2, 4]].numpy(), rtol=0, atol=1e-8)


def test_adaptive_saving_choices():
    z = on_sphere(4, 3, 17)
    field = Field(Softmax(2.0), manifold=Sphere())
    assert solve(field, Adaptive(), z, t1=1.0, save=Save.final()).times.tolist() == [0.0, 1.0]
    assert len(solve(field, Adaptive(), z, t1=1.0).times) == 101
    assert solve(field, Adaptive(), z, t1=1.0, save=Save(times=(0.5, 1.0))).times.tolist() == [0.0, 0.5, 1.0]


def test_euler_layers_takes_arrays_as_simulate_does():
    z = gaussian((6, 2), 18)
    alphas = np.array([0.3, 0.7, 1.1])
    for spelling in (alphas, torch.from_numpy(alphas), alphas.tolist()):
        got = solve(Field(Hardmax()), Euler.layers(spelling), z, steps=3).tokens
        assert torch.equal(got, simulate(z, alpha=alphas, layers=3).tokens)


def test_adaptive_tolerances_and_horizons_are_bounded():
    z = torch.randn(5, 2, dtype=torch.float64, generator=torch.Generator().manual_seed(1))
    with pytest.raises(ValueError, match="rtol must be ≥"):
        Adaptive(rtol=1e-300, atol=1e-300)
    for bad in (0, -1, 2.5, True, 2**31):
        with pytest.raises(ValueError, match="max_steps"):
            Adaptive(max_steps=bad)
    with pytest.raises(ValueError, match="below what float32"):
        solve(Field(Softmax(1.0)), Adaptive(rtol=1e-12), z.float(), t1=1.0)
    with pytest.raises(ValueError, match="more than 50 steps"):
        solve(Field(Unnormalised(1.0)), Adaptive(max_steps=50), z, t1=1e9)
    with pytest.raises(ValueError, match="finite t1"):
        solve(Field(Softmax(1.0)), Adaptive(), z, t1=math.inf)


# --------------------------------------------------------------------------------------------
# the paper's step, in one place
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("alpha", "gamma", "contraction"), [(1.0, 0.5, 0.5), (3.0, 0.75, 0.25), (0.25, 0.2, 0.8)])
def test_the_layer_step_and_its_contraction_are_their_closed_forms(alpha, gamma, contraction):
    """γ = α/(1+α) and 1 − γ = 1/(1+α), exact for these α (binary fractions), for floats, arrays and tensors alike."""
    assert layer_step(alpha) == gamma and layer_contraction(alpha) == contraction
    a = np.array([alpha, alpha])
    assert layer_step(a).tolist() == [gamma] * 2
    assert layer_contraction(torch.from_numpy(a)).tolist() == [contraction] * 2


def test_euler_layers_steps_by_the_layer_step_and_a_follower_contracts_by_it():
    """`Euler.layers(α).steps` is `layer_step` of each α_k; one layer towards a fixed target T moves z to
    T + (1 − γ)(z − T), so after k layers ‖z − T‖ is Π 1/(1 + α_l) of the first (the rate of Theorem 2.1)."""
    alphas = (0.5, 1.0, 3.0)
    steps = Euler.layers(alphas).steps(3, torch.float64, "cpu")
    assert torch.equal(steps, layer_step(torch.tensor(alphas, dtype=torch.float64)))
    z, target = torch.tensor([[[2.0, -1.0]]], dtype=torch.float64), torch.tensor([[[0.5, 0.5]]], dtype=torch.float64)
    for gamma in steps:
        z = euler_update(z, target, gamma)
    expected = math.prod(layer_contraction(a) for a in alphas) * math.dist((2.0, -1.0), (0.5, 0.5))
    assert float((z - target).norm()) == pytest.approx(expected, rel=1e-15)


def test_euler_update_moves_only_the_present_rows():
    z, target = gaussian((2, 4, 3), 1), gaussian((2, 4, 3), 2)
    present = torch.tensor([[True, False, True, True], [False, False, True, False]])
    moved = euler_update(z, target, 0.25, present)
    assert torch.equal(moved[~present], z[~present])  # absent rows: the same bits
    assert torch.equal(moved[present], (z + 0.25 * (target - z))[present])
    assert np.array_equal(euler_update(z.numpy(), target.numpy(), 0.25), (z + 0.25 * (target - z)).numpy())


def test_euler_layers_is_the_papers_layer_for_any_rule():
    """An Euler step of size γ of ż = T(z) − z is the layer z + γ(T − z): `solve` with `Euler.layers(α)` is
    `simulate`, for a rule without a fast path too."""
    z = gaussian((2, 5, 2), 4)
    rule = Localmax(0.3)
    assert torch.equal(solve(Field(rule), Euler.layers(0.7), z, steps=4).tokens,
                       simulate(z, rule, alpha=0.7, layers=4).tokens)


@pytest.mark.parametrize(("make", "message"), [
    (lambda: Euler(), "needs a step dt"),
    (lambda: Euler(0.1, alpha=1.0), "needs a step dt"),
    (lambda: RK4(-1.0), "dt must be"),
    (lambda: RK4(math.nan), "dt must be a finite number > 0"),
    (lambda: Adaptive(method="euler"), "method must be"),
    (lambda: Euler.layers([]), "empty"),
    (lambda: Euler.layers("fast"), "alpha must be"),
    (lambda: Euler.layers([0.5, -1.0]), "alpha must be a finite number > 0"),
    (lambda: Euler.layers((0.5, 1.0)).steps(3, torch.float64, "cpu"), "one value per layer"),
])
def test_a_bad_solver_gets_a_one_line_error(make, message):
    with pytest.raises(ValueError, match=message) as info:
        make()
    assert "\n" not in str(info.value)
