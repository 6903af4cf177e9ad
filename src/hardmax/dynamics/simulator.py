"""`simulate`: the paper's spelling of `solve` — Field(rule, Bilinear(A)) stepped by Euler.layers(α)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from torch import Tensor

from hardmax.dynamics.field import Bilinear, Field
from hardmax.dynamics.flow import solve
from hardmax.dynamics.inputs import MAX_STEPS, as_floating, validate_A, validate_alpha
from hardmax.dynamics.rules import AttentionRule
from hardmax.dynamics.save import Save
from hardmax.dynamics.solution import Solution
from hardmax.dynamics.solvers import Euler
from hardmax.dynamics.step import HARDMAX

__all__ = ["simulate"]


def simulate(tokens, rule: AttentionRule = HARDMAX, *, alpha: float | Sequence[float] | Tensor, layers: int, A=None,
             mask=None, save: Save | None = None) -> Solution:
    """Run the pure-attention dynamics (1.1) for `layers` layers under an attention `rule`: the paper's layers.

    z_i^{k+1} = z_i^k + α_k/(1+α_k) (Σ_j P_ij z_j^k − z_i^k), with P given by the rule: `Hardmax()` (the default:
    C_i = argmax_j ⟨A z_i^k, z_j^k⟩, every maximiser kept and counted with multiplicity, ties by rule (★)) or
    `Softmax(beta)` (P = softmax(β⟨A z_i, z_j⟩)). The same call as
    ``solve(Field(rule, Bilinear(A)), Euler.layers(alpha), tokens, steps=layers, save=save, mask=mask)``.

    Args:
        tokens: (n, d) or (batch, n, d), NumPy array (float64 unless already floating) or tensor (dtype and device
            kept; float16/bfloat16 are refused: they cannot resolve ties).
        rule: the attention rule, `Hardmax(tie_rtol=...)`, `Softmax(beta=...)`, ... (`hardmax.dynamics.rules`).
        alpha: α > 0, a scalar or one value per layer (a tensor that requires grad gets gradients).
        layers: number of layers ≥ 0.
        A: (d, d) symmetric positive definite matrix; None for the identity.
        mask: (n,) or (batch, n) bool (or `Tokens(present)`), True for real tokens: masked tokens (padding) neither
            attend nor are attended to, and do not move; or a pair mask (`Causal()`, `Pairs(allowed)`), which runs
            on the reference engine (`hardmax.dynamics.solve`).
        save: what to keep: `Save()` (every layer, the default), `Save(every=k)`, `Save.final()`, with
            `attention=True` for the attention matrix P of each saved layer. Memory is what is saved: a 4,096-review
            batch (n = 128, d = 16, float32) needs 34 MB per saved layer.

    Returns:
        `Solution` with `.tokens` of shape (saved layers, *tokens.shape), `.steps` the saved layers.

    Gradients: when tokens, α or A require grad (and grad mode is on), the layers run as the differentiable loop
    of `attention_step` (hardmax: exact where the attention sets do not change). Hardmax is run scale-free: a
    review whose largest coordinate is beyond 2^±20 is computed scaled by an exact power of two.

    Raises:
        ValueError: wrong shapes, NaN/inf tokens, a dtype that cannot resolve ties, non-SPD or wrongly sized A,
            α ≤ 0, negative layers, an unknown rule, softmax scores that overflow.

    Paper: Alcalde, Fantuzzi, Zuazua, "Clustering in pure-attention hardmax transformers", eq. (1.1).

    Example: the four corners of a square lead; the two tokens tied between two corners go to the
    projections of the origin onto the vertical sides.

    >>> import torch, hardmax
    >>> tokens = torch.tensor([[1., 1], [1, -1], [-1, 1], [-1, -1], [0.5, 0], [-0.5, 0]], dtype=torch.float64)
    >>> run = hardmax.simulate(tokens, alpha=0.5, layers=30)
    >>> run.tokens.shape
    torch.Size([31, 6, 2])
    >>> run.final[4:].round(decimals=4).tolist()
    [[1.0, 0.0], [-1.0, 0.0]]
    """
    z = as_floating(tokens, "tokens")
    if z.dim() not in (2, 3) or z.shape[-1] == 0 or z.shape[-2] == 0:
        raise ValueError(f"tokens must have shape (n, d) or (batch, n, d) with n, d ≥ 1, got {tuple(z.shape)}")
    if isinstance(layers, bool) or not isinstance(layers, int | np.integer) or layers < 0:
        raise ValueError(f"layers must be an integer ≥ 0, got {layers!r}")
    if layers > MAX_STEPS:
        raise ValueError(f"layers = {int(layers):,} is more than the {MAX_STEPS:,} a run takes")
    if isinstance(rule, type) or not isinstance(rule, AttentionRule):
        raise ValueError("rule must be an attention rule such as hardmax.dynamics.Hardmax() or "
                         f"Softmax(beta=...), got {rule!r}")
    A = validate_A(A, z.shape[-1], z.dtype, z.device)
    alphas = validate_alpha(alpha, int(layers), z.dtype, z.device)
    solver = Euler.layers(alphas if alphas.requires_grad else alpha)
    return solve(Field(rule, Bilinear(A)), solver, z, steps=int(layers), save=save, mask=mask)
