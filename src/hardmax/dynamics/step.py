"""One layer of the dynamics for a batch, for any attention rule: scores, P, and the step (1.1).

This is the definition of the attention layer: `simulate` and the sentiment classifier
(`hardmax.models`) both run it, so what is trained is exactly what is analysed. (`simulate`'s
hardmax engines, `layers` and the compiled `kernel`, run the same rule faster and are tested against it.)
"""

from __future__ import annotations

import torch
from torch import Tensor

from hardmax.dynamics.masks import live_rows
from hardmax.dynamics.rules import AttentionRule, Hardmax
from hardmax.dynamics.solvers import euler_update, layer_step

__all__ = ["HARDMAX", "attention_matrix", "attention_step", "scores"]

HARDMAX = Hardmax()  #: the default rule: hardmax with the dtype's default tie tolerance


def scores(tokens: Tensor, A: Tensor | None = None) -> Tensor:
    """Attention scores s_ij = ⟨A z_i, z_j⟩.

    Args:
        tokens: (batch, n, d). A: (d, d) symmetric positive definite, None for the identity.
    Returns:
        (batch, n, n).
    """
    queries = tokens if A is None else tokens @ A
    return queries @ tokens.transpose(-1, -2)


def _ones(tokens: Tensor) -> Tensor:
    return torch.ones(tokens.shape[:-1], dtype=tokens.dtype, device=tokens.device)


def attention_matrix(tokens: Tensor, multiplicity: Tensor | None = None, *, rule: AttentionRule = HARDMAX,
                     A: Tensor | None = None, allowed: Tensor | None = None) -> Tensor:
    """The attention matrix P of one layer under `rule` (see `hardmax.dynamics.rules`).

    Args:
        tokens: (batch, m, d). multiplicity: (batch, m), 0 = absent (padding); None = all 1.
        rule: `Hardmax(...)` or `Softmax(beta=...)`. A: (d, d) SPD or None (identity).
        allowed: (batch or 1, m, m) bool, token i may attend to token j (`hardmax.dynamics.masks`, e.g.
            `Causal().pair_mask(tokens.shape)`); None: every pair (and the rule is called without it).
    Returns:
        (batch, m, m); rows of present tokens sum to 1 and put the weight w_j on token j; rows of
        absent tokens, and of tokens with no allowed key, are 0.
    """
    w = _ones(tokens) if multiplicity is None else multiplicity
    return rule.matrix(tokens, w, A) if allowed is None else rule.matrix(tokens, w, A, allowed=allowed)


def attention_step(tokens: Tensor, multiplicity: Tensor | None = None, *, alpha: float | Tensor,
                   rule: AttentionRule = HARDMAX, A: Tensor | None = None, allowed: Tensor | None = None) -> Tensor:
    """One layer: z_i + γ (Σ_j P_ij z_j − z_i), γ = α/(1+α), for every present token.

    The hot path shared by `simulate` and the classifier; arguments are not validated here (`simulate`
    and the models validate once). Absent tokens (multiplicity 0) do not move. Differentiable in the
    tokens, α and A (hardmax: where the attention sets do not change).

    Args:
        tokens: (batch, m, d). multiplicity: (batch, m), 0 = absent; None = all present.
        alpha: scalar or 0-dim tensor > 0 (a tensor keeps autograd). rule, A, allowed: as in `attention_matrix`
            (a token with no allowed key does not move).
    Returns:
        (batch, m, d), the tokens after the layer.
    """
    w = _ones(tokens) if multiplicity is None else multiplicity
    if allowed is None:
        return euler_update(tokens, rule.targets(tokens, w, A), layer_step(alpha), w > 0)
    return euler_update(tokens, rule.targets(tokens, w, A, allowed=allowed), layer_step(alpha), live_rows(w, allowed))
