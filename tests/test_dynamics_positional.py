"""`hardmax.dynamics.positional`: ALiBi and the positional rules against their formulas, the lost-in-the-middle model
through `solve` and `circle_flow` against a transcription of the paper's per-token loop (borjanG/2026-lost-in-the-
middle, generate_alibi_particle_circle_dynamics.py: tests/transcriptions.py), and the closed-form profile against the
paper's own series (generate_u_shape_numerology_data.py, transcribed below)."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from transcriptions import alibi_run as _their_run

from hardmax.dynamics import RK4, Causal, Hardmax, Save, Softmax, Unnormalised, solve
from hardmax.dynamics.positional import (
    ALiBi,
    Positional,
    circle_flow,
    lost_in_the_middle,
    preceding,
    retrieval_profile,
    t_crit,
    u_profile,
)

# --- the paper's series, transcribed (their loops, their order of operations; the particle loop: transcriptions.py)


def _bessel_i_int(n, x, tol=1e-15):
    term = (x / 2.0) ** n / math.factorial(n)
    total = term
    for k in range(10000):
        term *= (x * x / 4.0) / ((k + 1) * (k + n + 1))
        total += term
        if abs(term) <= tol * max(1.0, abs(total)):
            break
    return total


def _psi_c(c, y, tol=1e-15):
    term = c
    total = term
    for k in range(10000):
        term *= c * y / ((k + 1) * (k + 2))
        total += term
        if abs(term) <= tol * max(1.0, abs(total)):
            break
    return total


def _their_profile(s, beta, t, lam, M, n_max):
    y = math.log(1.0 / s) if lam == 0 else math.log(math.expm1(lam) / math.expm1(lam * s))
    coeff = 1.0 if lam == 0 else lam * math.exp(lam * s) / math.expm1(lam)
    return sum(math.exp(-0.5 * (math.pi * n / M) ** 2) * coeff * _psi_c(n * n * _bessel_i_int(n, beta) * t, y)
               for n in range(1, n_max + 1))


def _their_t_crit(beta, lam, M, n_max):
    s1 = s2 = 0.0
    for n in range(1, n_max + 1):
        b = n * n * _bessel_i_int(n, beta)
        w = math.exp(-0.5 * (math.pi * n / M) ** 2)
        s1 += w * b
        s2 += w * b * b
    return 2.0 * (1.0 - math.exp(-lam)) * s1 / s2


# --- the objects --------------------------------------------------------------------------------------------


def test_alibi_bias_and_its_rate():
    b = ALiBi(0.5).bias(4)
    assert torch.equal(b, -0.5 * torch.tensor([[0, 1, 2, 3], [1, 0, 1, 2], [2, 1, 0, 1], [3, 2, 1, 0.]],
                                                 dtype=torch.float64))
    assert ALiBi(2.0, per_length=True).rate(8) == 0.25
    for bad in (-1.0, math.inf, "a", True):
        with pytest.raises(ValueError, match="slope"):
            ALiBi(bad)


def test_positional_rules_are_their_formulas_under_a_mask():
    g = torch.Generator().manual_seed(0)
    z = torch.randn(2, 6, 3, generator=g, dtype=torch.float64)
    w = torch.tensor([[1, 2, 1, 0, 1, 1], [1, 1, 1, 1, 1, 1]], dtype=torch.float64)
    A = torch.randn(3, 3, generator=g, dtype=torch.float64)
    allowed = Causal().pair_mask((2, 6, 3))
    bias = ALiBi(0.7).bias(6)
    s = 1.5 * (z @ A @ z.transpose(-1, -2))
    for inner in (Softmax(1.5), Unnormalised(1.5)):
        P = Positional(inner, ALiBi(0.7)).matrix(z, w, A, allowed)
        for b in range(2):
            for i in range(6):
                keys = [j for j in range(i + 1) if w[b, j] > 0]
                pos = torch.tensor([math.exp(bias[i, j]) * w[b, j] for j in keys], dtype=torch.float64)
                content = torch.exp(s[b, i, keys])
                expected = torch.zeros(6, dtype=torch.float64)
                if w[b, i] > 0:
                    expected[keys] = (pos * content / (pos * content).sum() if type(inner) is Softmax
                                      else pos * content / pos.sum())
                torch.testing.assert_close(P[b, i], expected, rtol=1e-13, atol=1e-15)


def test_positional_refuses_other_rules_and_a_row_with_no_key_is_zero():
    with pytest.raises(ValueError, match="Softmax"):
        Positional(Hardmax(), ALiBi(1.0))
    z = torch.randn(1, 4, 2, dtype=torch.float64)
    P = Positional(Unnormalised(1.0), ALiBi(1.0)).matrix(z, torch.ones(1, 4, dtype=torch.float64), None,
                                                          preceding(4).pair_mask((1, 4, 2)))
    assert torch.equal(P[0, 0], torch.zeros(4, dtype=torch.float64)) and bool(torch.isfinite(P).all())


def test_the_field_through_solve_is_the_papers_model():
    rng = np.random.default_rng(1)
    theta = rng.uniform(0, 2 * math.pi, 12)
    ours = solve(lost_in_the_middle(1.3, 2.0), RK4(0.01), torch.tensor(np.stack([np.cos(theta), np.sin(theta)], -1)),
                 t1=0.5, mask=preceding(12), save=Save.final())
    theirs = _their_run(theta, 1.3, 2.0, 0.01, 50)
    angle = np.arctan2(ours.final[:, 1].numpy(), ours.final[:, 0].numpy())
    # RK4 in R² then retracted (ours) and RK4 in the angles (theirs): two 4th-order schemes of one field
    assert np.abs(np.angle(np.exp(1j * (angle - theirs)))).max() < 1e-9
    assert float(ours.final[0].sub(ours.tokens[0, 0]).abs().max()) == 0  # token 1 sees nothing


@pytest.mark.parametrize("beta", [0.3, 1.0, 4.0])
def test_circle_flow_is_their_loop_to_rounding(beta):
    rng = np.random.default_rng(2)
    theta = rng.uniform(0, 2 * math.pi, (3, 20))
    sol = circle_flow(theta, beta=beta, lam=1.5, t1=0.25, dt=0.0025, every=25)
    assert sol.tokens.shape == (5, 3, 20, 2) and sol.engine == "circle"
    for b in range(3):
        theirs = _their_run(theta[b], beta, 1.5, 0.0025, 100)
        angle = np.arctan2(sol.final[b, :, 1].numpy(), sol.final[b, :, 0].numpy())
        assert np.abs(np.angle(np.exp(1j * (angle - theirs)))).max() < 1e-12


def test_circle_flow_is_solve_of_the_field_to_fourth_order():
    # RK4 in the angles (circle_flow) and RK4 in R² retracted (solve): two 4th-order schemes of one field, whose
    # difference shrinks 16-fold when dt halves
    theta = np.random.default_rng(3).uniform(0, 2 * math.pi, 16)
    x = torch.tensor(np.stack([np.cos(theta), np.sin(theta)], -1))
    gaps = []
    for dt in (0.004, 0.002):
        fast = circle_flow(theta, beta=3.0, lam=1.0, t1=0.2, dt=dt, every=round(0.2 / dt))
        ref = solve(lost_in_the_middle(3.0, 1.0), RK4(dt), x, t1=0.2, mask=preceding(16), save=Save.final())
        gaps.append(float((fast.final - ref.final).abs().max()))
    assert gaps[1] < 1e-7 and 10 < gaps[0] / gaps[1] < 24


def test_circle_flow_refuses_bad_input():
    with pytest.raises(ValueError, match="theta"):
        circle_flow(np.full(3, np.nan))
    with pytest.raises(ValueError, match="whole number"):
        circle_flow(np.zeros(3), t1=1.0, dt=0.3)
    with pytest.raises(ValueError, match="every"):
        circle_flow(np.zeros(3), t1=1.0, dt=0.25, every=3)
    with pytest.raises(ValueError, match="beta"):
        circle_flow(np.zeros(3), beta=0.0)


def test_the_closed_form_is_the_papers_series_and_its_threshold():
    s = np.linspace(0.02, 0.98, 25)
    for beta, t, lam in ((1.0, 0.5, 1.0), (1.0, 2.0, 1.0), (2.0, 0.3, 0.25), (0.5, 1.0, 0.0)):
        expected = np.array([_their_profile(x, beta, t, lam, 8.0, 20) for x in s])
        np.testing.assert_allclose(u_profile(s, t=t, beta=beta, lam=lam), expected, rtol=1e-12)
    for beta in (0.5, 1.0, 2.0, 3.0):
        tc = t_crit(beta)
        assert tc == pytest.approx(_their_t_crit(beta, 1.0, 8.0, 20), rel=1e-12)
        # the right end's slope changes sign at t_crit: rising before (recency), falling after
        slope = [u_profile([0.999999], t=t, beta=beta)[0] - u_profile([0.999998], t=t, beta=beta)[0]
                 for t in (0.9 * tc, 1.1 * tc)]
        assert slope[0] > 0 > slope[1]
    with pytest.raises(ValueError, match=r"\(0, 1\)"):
        u_profile([0.0, 0.5], t=1.0)


def test_the_measured_profile_is_zero_at_the_start_and_the_closed_form_early():
    r = retrieval_profile(times=(0.05, 0.5), n=8, prompts=6000, block=3000, dt=0.05)
    assert r.measured.shape == r.closed_form.shape == (2, 7)
    # n · E[Σ ω_q cos q(θ_n(t) − θ_k(0))]: within 4 standard errors of the closed form at every source
    assert np.abs(r.z).max() < 4.5
    with pytest.raises(ValueError, match="whole number"):
        retrieval_profile(times=(0.03,), n=8, prompts=10, dt=0.05)
