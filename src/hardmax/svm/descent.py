"""Normalised gradient descent on a one-layer softmax attention model, many problems at once.

    f(X) = vᵀ Xᵀ softmax(X W z),     L(W) = (1/n) Σ_i log(1 + exp(−y_i f(X_i)))

with a fixed head v, trained either on W directly or on (K, Q) with W = K Qᵀ (scores x_tᵀ K Qᵀ z).
Every step moves each parameter by η along its normalised negative gradient, −η ∇/(‖∇‖_F + ε), the
scheme of Tarzanagh et al. 2023 (arXiv 2308.16898, §5): ‖W‖ then grows linearly and the direction of
W converges to the Att-SVM solution of the selection it settles on (Frobenius for W, nuclear for (K, Q)).

All problems of a batch (seeds) are one tensor computation with a leading batch axis S; the gradient
is written out (no autograd), float64 throughout. What is compared with what lives in
`hardmax.experiments.svm`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

import torch
from torch import Tensor

from hardmax.svm.solver import check_labels

__all__ = ["DescentConfig", "DescentPath", "Parameterisation", "correlation", "descend", "initial_parameters",
           "recorded_steps", "softmax_attention"]

#: The attention weights descent runs on: W = KQᵀ itself, or the pair (K, Q).
Parameterisation = Literal["W", "KQ"]
_EPS64 = float(torch.finfo(torch.float64).eps)


@dataclass(frozen=True, kw_only=True)
class DescentConfig:
    """Settings of `descend` (defaults: the paper's synthetic experiment)."""

    parameterisation: Parameterisation = "W"  # descend on W, or on (K, Q) with W = K Qᵀ
    iterations: int = 2000  # number of gradient steps
    lr: float = 0.1  # η, the length of every (normalised) step
    # ε of g / (‖g‖ + ε). Late in the descent ‖g‖ falls to ~1e-10; with ε = 1e-9 the step shrinks with
    # it and the direction stops converging, with machine ε (2.2e-16) it keeps its length η.
    eps: float = _EPS64
    record_every: int = 10  # keep the parameters every this many steps (and after the last one)
    # λ of the term λ(‖K‖² + ‖Q‖²) the authors add to the (K, Q) loss (their value: machine ε). It
    # decides where the (K, Q) descent ends: once the logistic gradient falls below 2λ‖K‖ the step
    # shrinks K and Q, so the iterates settle on the regularisation path at ‖W‖ ~ log(1/λ)·‖W^mm_⋆‖,
    # whose direction is the nuclear-norm SVM's (corr ≈ 0.997 at 1,000 steps); with λ = 0 ‖W‖ grows
    # as k² and the direction creeps (corr ≈ 0.97-0.98 at 2,000 steps). Ignored for "W".
    kq_ridge: float = _EPS64

    def __post_init__(self) -> None:
        if self.parameterisation not in ("W", "KQ"):
            raise ValueError(f"parameterisation must be 'W' or 'KQ', got {self.parameterisation!r}")
        if self.iterations < 1:
            raise ValueError(f"iterations must be ≥ 1, got {self.iterations}")
        if not (math.isfinite(self.lr) and self.lr > 0):
            raise ValueError(f"lr must be finite and > 0, got {self.lr}")
        if not (math.isfinite(self.eps) and self.eps >= 0):
            raise ValueError(f"eps must be finite and ≥ 0, got {self.eps}")
        if self.record_every < 1:
            raise ValueError(f"record_every must be ≥ 1, got {self.record_every}")
        if not (math.isfinite(self.kq_ridge) and self.kq_ridge >= 0):
            raise ValueError(f"kq_ridge must be finite and ≥ 0, got {self.kq_ridge}")


@dataclass(frozen=True)
class DescentPath:
    """What `descend` recorded (float64; S problems, R recorded iterations).

    Attributes:
        parameterisation: "W" or "KQ".
        iterations: (R,) int64, the step counts recorded (0 = the initial parameters, last = `iterations`).
        W: (S, R, d, d) the attention matrix (K Qᵀ for "KQ") at those steps.
        loss: (S, R) the logistic loss at those steps.
        attention: (S, n, T) softmax(X W z) after the last step.
        selection: (S, n) int64, argmax of that softmax: the token each input ends up selecting.
    """

    parameterisation: Parameterisation
    iterations: Tensor
    W: Tensor
    loss: Tensor
    attention: Tensor
    selection: Tensor

    def correlation(self, reference: Tensor) -> Tensor:
        """(S, R) corr(W_k, reference) = ⟨W_k, W_ref⟩ / (‖W_k‖_F ‖W_ref‖_F); reference (S, d, d)."""
        return correlation(self.W, reference.unsqueeze(1))


def correlation(A: Tensor, B: Tensor) -> Tensor:
    """Cosine of the angle between matrices, ⟨A, B⟩_F / (‖A‖_F ‖B‖_F), over the last two axes (broadcast).

    Formed without a temporary of the broadcast shape (A a whole path (S, R, d, d), B (S, 1, d, d)).
    """
    inner = torch.einsum("...ij,...ij->...", A, B)
    return inner / (torch.linalg.vector_norm(A, dim=(-2, -1)) * torch.linalg.vector_norm(B, dim=(-2, -1)))


def softmax_attention(X: Tensor, z: Tensor, W: Tensor, mask: Tensor | None = None) -> Tensor:
    """softmax_t(x_tᵀ W z_i): X (..., n, T, d), z (..., n, d), W (..., d, d) -> (..., n, T); padding gets 0.

    The leading axes broadcast without copies: X (S, 1, n, T, d) against W (S, R, d, d) (a whole
    recorded path) costs S·R·n·(T + d) floats, not the S·R·n·T·d (and S·R·n·d²) of broadcast matmuls.
    """
    s = torch.einsum("...ntd,...nd->...nt", X, torch.einsum("...de,...ne->...nd", W, z))
    if mask is not None:
        s = s.masked_fill(~mask, float("-inf"))
    return torch.softmax(s, dim=-1)


def initial_parameters(parameterisation: Parameterisation, batch: int, d: int, *,
                       generator: torch.Generator | None = None) -> Tensor | tuple[Tensor, Tensor]:
    """Uniform(−1/√d, 1/√d) entries, PyTorch's default for a d × d linear layer (the authors' start).

    Returns W (batch, d, d), or (K, Q), each (batch, d, d).
    """
    def draw() -> Tensor:
        u = torch.rand(batch, d, d, generator=generator, dtype=torch.float64)
        return (2 * u - 1) / math.sqrt(d)

    return draw() if parameterisation == "W" else (draw(), draw())


def _check(X: Tensor, z: Tensor, y: Tensor, v: Tensor, mask: Tensor | None) -> Tensor:
    if X.dim() != 4:
        raise ValueError(f"X must have shape (S, n, T, d), got {tuple(X.shape)}")
    S, n, T, d = X.shape
    shapes = {"z": (z, (S, n, d)), "y": (y, (S, n)), "v": (v, (S, d))}
    for name, (t, shape) in shapes.items():
        if tuple(t.shape) != shape:
            raise ValueError(f"{name} must have shape {shape}, got {tuple(t.shape)}")
    for name, t in (("X", X), ("z", z), ("y", y), ("v", v)):
        if t.dtype != torch.float64:
            raise ValueError(f"{name} must be float64, got {t.dtype}")
        if not torch.isfinite(t).all():
            raise ValueError(f"{name} contains NaN or inf")
    check_labels(y)
    if mask is None:
        return torch.ones(S, n, T, dtype=torch.bool, device=X.device)
    if mask.dtype != torch.bool or tuple(mask.shape) != (S, n, T):
        raise ValueError(f"mask must be bool of shape {(S, n, T)}, got {mask.dtype} {tuple(mask.shape)}")
    if not mask.any(-1).all():
        raise ValueError("every input needs at least one real (unmasked) token")
    return mask


def _loss_and_direction(X: Tensor, z: Tensor, y: Tensor, u: Tensor, W: Tensor,
                        mask: Tensor) -> tuple[Tensor, Tensor, Tensor]:
    """Loss (S,), D (S, d, d) and log c (S,) with ∇_W L = c · D, given u = X v (S, n, T).

        ∇_W L = Σ_i Σ_t g_i p_it (u_it − f_i) x_it z_iᵀ,   g_i = −y_i σ(−y_i f_i)/n,   f_i = Σ_t p_it u_it

    Normalised descent only needs the direction of ∇_W L, and the direction is what float64 loses first:
    once softmax saturates on a token m_i, the other p_it underflow (e^{-745}) and u_{i m_i} − f_i
    cancels, so the plain gradient is noise or exactly 0 long before the theory's limit. So, with
    L_i = max_{t ≠ m_i} log p_it (the runner-up), the coefficient of token t is formed as

        t ≠ m_i:  e^{log p_it − L_i} (u_it − f_i)           (u_it − f_i ≈ u_it − u_{i m_i}: no cancellation)
        t = m_i:  p_{i m_i} Σ_{t' ≠ m_i} e^{log p_it' − L_i} (u_{i m_i} − u_it')     (u − f term by term)

    times sign(g_i) e^{log|g_i| + L_i − M}, M the largest log|g_i| + L_i of the problem: exact up to
    the common factor e^{M}, never under- or overflowing as a whole, and O(n T) per problem.
    """
    s = (X @ (W.unsqueeze(-3) @ z.unsqueeze(-1))).squeeze(-1).masked_fill(~mask, float("-inf"))
    logp = torch.log_softmax(s, dim=-1)
    p = logp.exp()
    f = (p * u).sum(-1)
    n = X.shape[1]
    loss = torch.nn.functional.softplus(-y * f).mean(-1)
    g = -y * torch.sigmoid(-y * f) / n
    lead = logp.argmax(-1, keepdim=True)  # (S, n, 1): m_i (any choice among ties is exact)
    is_lead = torch.zeros_like(mask).scatter_(-1, lead, True)
    rest = logp.masked_fill(is_lead, float("-inf"))
    runner_up = rest.amax(-1, keepdim=True).clamp(min=-1e300)  # L_i; −inf only for a one-token input
    ratio = (rest - runner_up).exp()  # e^{log p_it − L_i}, 0 at m_i and at padding
    du_lead = (u.gather(-1, lead) - u).masked_fill(~mask, 0.0)
    coef = torch.where(is_lead, p * (ratio * du_lead).sum(-1, keepdim=True), ratio * (u - f.unsqueeze(-1)))
    scale = g.abs().log() + runner_up.squeeze(-1)  # (S, n)
    top = scale.amax(-1).clamp(min=-1e300)  # all −inf only when every input has one token
    c = (g.sign() * (scale - top[:, None]).exp()).unsqueeze(-1) * coef  # (S, n, T)
    direction = torch.einsum("snt,sntd,sne->sde", c, X, z)
    return loss, direction, top


def _combine(direction: Tensor, log_scale: Tensor, factor: Tensor, ridge: float) -> Tensor:
    """e^{log_scale} · direction + 2 λ · factor, up to a positive factor per problem (no under/overflow)."""
    if ridge == 0:
        return direction
    log_ridge = torch.full_like(log_scale, math.log(2 * ridge))
    top = torch.maximum(log_scale, log_ridge)
    return ((log_scale - top).exp()[:, None, None] * direction + (log_ridge - top).exp()[:, None, None] * factor)


def _normalised(g: Tensor, eps: float) -> Tensor:
    return g / (g.norm(dim=(-2, -1), keepdim=True) + eps)


def descend(X: Tensor, z: Tensor, y: Tensor, v: Tensor, init: Tensor | tuple[Tensor, Tensor],
            config: DescentConfig = DescentConfig(), *, mask: Tensor | None = None) -> DescentPath:
    """Run normalised gradient descent on S problems at once.

        W ← W − η ∇_W L / (‖∇_W L‖_F + ε)                                      (parameterisation "W")
        K ← K − η ∇_K L / (‖∇_K L‖_F + ε),  Q ← Q − η ∇_Q L / (‖∇_Q L‖_F + ε),  W = K Qᵀ   ("KQ")

    with ∇_K L = ∇_W L · Q + 2λK and ∇_Q L = (∇_W L)ᵀ K + 2λQ (λ = `config.kq_ridge`, the authors'
    machine-ε ridge), each normalised per problem. Gradients are formed up to a positive factor per
    problem, which normalisation removes, so that saturated softmax never turns them into noise.

    Args:
        X: (S, n, T, d) tokens. z: (S, n, d) queries. y: (S, n) labels, each +1 or −1. v: (S, d) fixed heads.
            All float64; tensors that require grad are detached.
        init: W (S, d, d) for "W", (K, Q) each (S, d, d) for "KQ" (see `initial_parameters`).
        config: `DescentConfig`. mask: (S, n, T) bool, True for real tokens (padding gets no attention).

    Returns:
        `DescentPath`.
    """
    # A measurement, not a layer: inputs that require grad are detached (no graph grows over the steps).
    X, z, y, v = (t.detach() if isinstance(t, Tensor) else t for t in (X, z, y, v))
    mask = _check(X, z, y, v, mask)
    S, _, _, d = X.shape
    if config.parameterisation == "W":
        if not isinstance(init, Tensor) or tuple(init.shape) != (S, d, d):
            raise ValueError(f"init must be W of shape {(S, d, d)} for parameterisation 'W'")
        W = init.detach().to(torch.float64).clone()
        K = Q = None
    else:
        if not (isinstance(init, tuple) and len(init) == 2 and all(tuple(t.shape) == (S, d, d) for t in init)):
            raise ValueError(f"init must be (K, Q), each of shape {(S, d, d)}, for parameterisation 'KQ'")
        K, Q = (t.detach().to(torch.float64).clone() for t in init)
        W = K @ Q.transpose(-1, -2)
    u = X @ v[:, None, :, None]  # (S, n, T, 1)
    u = u.squeeze(-1)
    steps = recorded_steps(config.iterations, config.record_every)
    Ws = torch.empty(S, len(steps), d, d, dtype=torch.float64, device=X.device)  # written in place: no copies
    losses = torch.empty(S, len(steps), dtype=torch.float64, device=X.device)
    r = 0
    for k in range(config.iterations + 1):
        loss, grad, log_scale = _loss_and_direction(X, z, y, u, W, mask)
        if r < len(steps) and k == steps[r]:
            Ws[:, r] = W
            losses[:, r] = loss
            r += 1
        if k == config.iterations:
            break
        if K is None:
            W = W - config.lr * _normalised(grad, config.eps)
        else:
            gK = _combine(grad @ Q, log_scale, K, config.kq_ridge)
            gQ = _combine(grad.transpose(-1, -2) @ K, log_scale, Q, config.kq_ridge)
            K = K - config.lr * _normalised(gK, config.eps)
            Q = Q - config.lr * _normalised(gQ, config.eps)
            W = K @ Q.transpose(-1, -2)
    attention = softmax_attention(X, z, W, mask)
    return DescentPath(parameterisation=config.parameterisation, iterations=torch.tensor(steps), W=Ws,
                       loss=losses, attention=attention, selection=attention.argmax(-1))


def recorded_steps(iterations: int, record_every: int) -> list[int]:
    """The steps `descend` keeps: 0, record_every, 2·record_every, …, and the last step `iterations`."""
    return [*range(0, iterations, record_every), iterations]
