"""`hardmax.dynamics.normalisation`: each scheme's layer against its formula written out, its flow's speed law
(θ̇ = s · P⊥ a with s = 1, 1/r, 1/(r‖a‖), α/‖a‖), the invariants (unit tokens for Post-LN and nGPT, growing radii
for Pre- and Peri-LN), and `hardmax.experiments.normalisation`: the paper's ordering of clustering speed."""

from __future__ import annotations

import pytest
import torch

from hardmax.dynamics import Causal, Field, Save, Softmax, solve
from hardmax.dynamics.normalisation import NGPT, MixLN, PeriLN, PostLN, PreLN, layer_norm
from hardmax.experiments.normalisation import compare_normalisations


def _start(seed=0, batch=3, n=7, d=4):
    g = torch.Generator().manual_seed(seed)
    return torch.nn.functional.normalize(torch.randn(batch, n, d, generator=g, dtype=torch.float64), dim=-1)


def _a(x, beta=2.0):
    """a_k = Σ_j softmax_j(β⟨θ_k, θ_j⟩) θ_j, one token at a time."""
    theta = x / x.norm(dim=-1, keepdim=True)
    out = torch.empty_like(x)
    for b in range(x.shape[0]):
        for k in range(x.shape[1]):
            p = torch.softmax(beta * theta[b] @ theta[b, k], 0)
            out[b, k] = (p[:, None] * theta[b]).sum(0)
    return out


def _norm(y):
    return y / y.norm(dim=-1, keepdim=True)


@pytest.mark.parametrize("scheme, formula", [
    (PostLN(0.1), lambda x, a: _norm(_norm(x) + 0.1 * a)),
    (PreLN(0.1), lambda x, a: x + 0.1 * a),
    (PeriLN(0.1), lambda x, a: x + 0.1 * _norm(a)),
    (NGPT(0.1, 0.5), lambda x, a: _norm(_norm(x) + 0.05 * (_norm(a) - _norm(x)))),
])
def test_each_layer_is_its_formula(scheme, formula):
    x = _start() * torch.tensor([1.0, 2.0, 0.5]).reshape(3, 1, 1)  # radii ≠ 1: the attention sees directions
    sol = solve(Field(Softmax(2.0)), scheme, x, steps=1)
    torch.testing.assert_close(sol.final, formula(x, _a(x)), rtol=1e-13, atol=1e-14)


def test_mix_ln_is_post_ln_then_pre_ln():
    x = _start()
    mixed = solve(Field(Softmax(2.0)), MixLN(0.1, switch=3), x, steps=5).final
    post = solve(Field(Softmax(2.0)), PostLN(0.1), x, steps=3).final
    pre = solve(Field(Softmax(2.0)), PreLN(0.1), post, steps=2).final
    torch.testing.assert_close(mixed, pre, rtol=0, atol=1e-15)


def test_the_speed_laws_of_the_flows():
    # one small step from radii r: the directions move by dt · s · |P⊥ a| to first order
    x = _start(1) * 3.0
    theta = _norm(x)
    a = _a(x)
    tangent = a - (a * theta).sum(-1, keepdim=True) * theta
    dt = 1e-6
    for scheme, s in ((PostLN(dt), 1.0), (PreLN(dt), 1 / 3.0), (PeriLN(dt), 1 / (3.0 * a.norm(dim=-1, keepdim=True))),
                      (NGPT(dt, 2.0), 2.0 / a.norm(dim=-1, keepdim=True))):
        moved = _norm(solve(Field(Softmax(2.0)), scheme, x, steps=1).final)
        torch.testing.assert_close((moved - theta) / dt, s * tangent, rtol=1e-4, atol=1e-6)


def test_invariants_unit_tokens_and_growing_radii_and_masks():
    x = _start(2)
    for scheme in (PostLN(0.1), NGPT(0.1)):
        sol = solve(Field(Softmax(2.0)), scheme, x, steps=50, save=Save(every=10))
        torch.testing.assert_close(sol.tokens.norm(dim=-1), torch.ones(6, 3, 7, dtype=torch.float64))
    for scheme in (PreLN(0.1), PeriLN(0.1)):
        r = solve(Field(Softmax(2.0)), scheme, x, steps=50, save=Save(every=10)).tokens.norm(dim=-1)
        assert bool((r[-1] > 2 * r[0]).all())  # ṙ = ⟨θ, u⟩ > 0 once the tokens gather: the radii grow
    sol = solve(Field(Softmax(2.0)), PeriLN(0.1), x, steps=20, mask=Causal())
    # the first token's a is itself: it only grows
    torch.testing.assert_close(_norm(sol.final[:, 0]), _norm(x[:, 0]), rtol=0, atol=1e-15)


def test_bad_steps_are_refused():
    for bad in (0.0, -1.0, float("nan"), True):
        with pytest.raises(ValueError, match="dt"):
            PreLN(bad)
    with pytest.raises(ValueError, match="alpha"):
        NGPT(0.1, 0.0)
    with pytest.raises(ValueError, match="switch"):
        MixLN(0.1, -1)


def test_layer_norm_keeps_zero():
    assert torch.equal(layer_norm(torch.zeros(2, 3)), torch.zeros(2, 3))


def test_the_papers_ordering_of_clustering_speed():
    comparison = compare_normalisations(starts=8, n=16, d=16, layers=1500, every=10)
    check = comparison.check()
    assert check.passed, check.value
    assert comparison.radius["pre-ln"][-1] > 10 and abs(float(comparison.radius["post-ln"][-1]) - 1) < 1e-12
