"""Tests of `hardmax.dynamics.step`: the scores ⟨A z_i, z_j⟩, the attention matrix under a rule, and one layer
z_i + γ(Σ_j P_ij z_j − z_i), γ = α/(1+α), in closed form; absent tokens and tokens with no allowed key stay put;
gradients reach α and the tokens as the closed form says."""

from __future__ import annotations

import pytest
import torch
from tokens import gaussian

from hardmax.dynamics import HARDMAX, Causal, Hardmax, Softmax, attention_matrix, attention_step, scores

A = torch.tensor([[2.0, 1.0], [1.0, 3.0]], dtype=torch.float64)
# three tokens: z_3 = (1, 1) is every token's maximiser under A (⟨A z_i, z_3⟩ is the largest entry of each row)
Z = torch.tensor([[[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]]], dtype=torch.float64)


def test_scores_are_the_bilinear_form():
    s = scores(Z, A)[0]
    assert s.tolist() == [[2.0, 1.0, 3.0], [1.0, 3.0, 4.0], [3.0, 4.0, 7.0]]
    assert torch.equal(scores(Z)[0], Z[0] @ Z[0].T)  # None: the identity


def test_the_default_rule_is_hardmax_with_the_dtypes_tolerance():
    assert HARDMAX == Hardmax() and HARDMAX.tie_rtol is None
    P = attention_matrix(Z, A=A)
    assert P[0].tolist() == [[0.0, 0.0, 1.0]] * 3  # every token attends to its maximiser z_3


@pytest.mark.parametrize("alpha", [0.5, 1.0, 3.0])
def test_one_hardmax_layer_moves_each_token_by_gamma_toward_its_target(alpha):
    """Every row's target is z_3, so z_i ← z_i + γ(z_3 − z_i) with γ = α/(1+α); z_3 attends to itself and stays."""
    gamma = alpha / (1 + alpha)
    out = attention_step(Z, alpha=alpha, A=A)
    expected = Z + gamma * (Z[:, 2:3] - Z)
    torch.testing.assert_close(out, expected, rtol=0, atol=0)
    assert torch.equal(out[0, 2], Z[0, 2])


def test_absent_tokens_and_rows_with_no_allowed_key_stay_where_they_are():
    z = gaussian((2, 5, 3), 1)
    w = torch.tensor([[1.0, 0.0, 1.0, 2.0, 1.0], [1.0, 1.0, 1.0, 1.0, 0.0]], dtype=torch.float64)
    out = attention_step(z, w, alpha=0.8, rule=Softmax(1.5))
    assert torch.equal(out[0, 1], z[0, 1]) and torch.equal(out[1, 4], z[1, 4])
    assert bool((out[0, [0, 2, 3, 4]] != z[0, [0, 2, 3, 4]]).any())
    allowed = Causal().pair_mask(z.shape).clone()
    allowed[:, 2] = False  # row 2 may attend to nobody
    causal = attention_step(z, alpha=0.8, rule=Softmax(1.5), allowed=allowed)
    assert torch.equal(causal[:, 2], z[:, 2]) and torch.equal(causal[:, 0], z[:, 0])  # token 0 sees only itself


def test_the_gradient_in_alpha_is_the_closed_form():
    """z' = z + α/(1+α)(T − z) with T fixed (hardmax, away from ties): ∂z'/∂α = (T − z)/(1+α)²."""
    alpha = torch.tensor(0.6, dtype=torch.float64, requires_grad=True)
    out = attention_step(Z, alpha=alpha, A=A)
    out[0, 0].sum().backward()
    expected = float((Z[0, 2] - Z[0, 0]).sum()) / (1 + 0.6) ** 2
    assert alpha.grad.item() == pytest.approx(expected, rel=1e-15)
