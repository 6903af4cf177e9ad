"""Normalisation schemes as solvers: how a transformer's residual stream adds each attention layer, and normalises.

Karagodin, Ge, Polyanskiy, Rigollet, "Normalization in attention dynamics" (NeurIPS 2025, arXiv 2510.22026): with
the tokens written x_k = r_k θ_k (r_k = ‖x_k‖, θ_k on the sphere), every scheme moves the directions θ_k by the same
attention on the sphere at its own *speed*,

    θ̇_k = s_k · P⊥_{θ_k}(a_k),     a_k = V Σ_j P_kj θ_j,   P_kj ∝ e^{β⟨θ_k, A θ_j⟩}   (attention on the normalised
                                                                                      tokens, as LN(x) = θ feeds it)
    Post-LN   x ← N(x + dt a(N x))          s_k = 1              (the sphere model SA: tokens stay unit)
    Pre-LN    x ← x + dt a(N x)             s_k = 1 / r_k        (r_k grows: the layers slow down like 1/depth)
    Peri-LN   x ← x + dt N(a(N x))          s_k = 1 / (r_k ‖a_k‖)  (fast while attention averages spread tokens,
                                                                    ‖a_k‖ < 1; then slow like Pre-LN)
    nGPT      x ← N(x + α dt (N(a(N x)) − x))   s_k = α / ‖a_k‖  (unit tokens; never slows down)
    Mix-LN    Post-LN for the first `switch` layers, Pre-LN after

N(y) = y / ‖y‖ is the layer norm of the particle papers (scale only: no centring, no learned gain). Each is an Euler
step of its equation of motion (the right column, r_k following ṙ_k = ⟨θ_k, u_k⟩ for the added update u_k), so the
discrete layers and the flows agree to O(dt). Each is a solver of the `solve` verb (`steps`, `step`), used with a
`Field(rule, scores, value)` in R^d (`Flat()`: the radii are the point of Pre-LN and Peri-LN), which supplies a_k:

    solve(Field(Softmax(4.0)), PeriLN(0.1), x, steps=200)   # x (batch, n, d) unit tokens

The reference loop runs them (any rule, mask, device). What does not live here: the sphere manifold (`manifolds`),
the other solvers (`solvers`), the comparison of speeds (`hardmax.experiments.normalisation`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

import torch
from torch import Tensor

if TYPE_CHECKING:
    from hardmax.dynamics.field import Field

__all__ = ["NGPT", "SCHEMES", "MixLN", "PeriLN", "PostLN", "PreLN", "layer_norm"]


def layer_norm(x: Tensor) -> Tensor:
    """(..., d) N(x) = x / ‖x‖ (0 stays 0): the particle papers' layer norm, scale only."""
    norm = torch.linalg.vector_norm(x, dim=-1, keepdim=True)
    return x / torch.where(norm > 0, norm, torch.ones((), dtype=x.dtype, device=x.device))


def _dt(x, name: str = "dt") -> float:
    if isinstance(x, bool) or not isinstance(x, int | float) or not (math.isfinite(x) and x > 0):
        raise ValueError(f"{name} must be a finite number > 0, got {x!r}")
    return float(x)


def _attention(field: Field, t, z: Tensor, w: Tensor | None) -> tuple[Tensor, Tensor]:
    """(θ = N(z), a = V Σ_j P_kj θ_j with P from the normalised tokens), both (batch, n, d); rows that do not move
    (absent tokens, tokens with no allowed key) get a = 0."""
    theta = layer_norm(z)
    a = field.targets(t, theta, w)
    V = field.V(z)
    a = a if V is None else a @ V.transpose(-1, -2)
    moving = field.moving(z, w)
    return theta, a if moving is None else torch.where(moving.unsqueeze(-1), a, a.new_zeros(()))


@dataclass(frozen=True)
class _Scheme:
    """The constant-step part of the solver protocol, shared by the schemes: the step dt (checked), order 1."""

    dt: float
    order = 1

    def __post_init__(self):
        object.__setattr__(self, "dt", _dt(self.dt))

    def steps(self, count: int, dtype: torch.dtype, device) -> Tensor:
        """(count,) the constant step dt, in the tokens' dtype."""
        return torch.full((count,), self.dt, dtype=dtype, device=device)

    def _moving(self, field: Field, z: Tensor, w: Tensor | None, moved: Tensor) -> Tensor:
        m = field.moving(z, w)
        return moved if m is None else torch.where(m.unsqueeze(-1), moved, z)


@dataclass(frozen=True)
class PostLN(_Scheme):
    """Post-LN: x ← N(x + dt a(N x)) (speed 1; the sphere model SA of Geshkovski et al.)."""

    def step(self, field: Field, t, z: Tensor, w: Tensor | None, dt: float) -> Tensor:
        """(batch, n, d) the tokens after one Post-LN layer of size dt."""
        theta, a = _attention(field, t, z, w)
        return self._moving(field, z, w, layer_norm(theta + dt * a))


@dataclass(frozen=True)
class PreLN(_Scheme):
    """Pre-LN: x ← x + dt a(N x) (GPT, LLaMA); the directions move at speed 1/‖x‖, which grows with depth."""

    def step(self, field: Field, t, z: Tensor, w: Tensor | None, dt: float) -> Tensor:
        """(batch, n, d) the tokens after one Pre-LN layer of size dt."""
        _, a = _attention(field, t, z, w)
        return self._moving(field, z, w, z + dt * a)


@dataclass(frozen=True)
class PeriLN(_Scheme):
    """Peri-LN: x ← x + dt N(a(N x)) (normalised before and after attention; Gemma 3): speed 1/(‖x‖ ‖a‖)."""

    def step(self, field: Field, t, z: Tensor, w: Tensor | None, dt: float) -> Tensor:
        """(batch, n, d) the tokens after one Peri-LN layer of size dt."""
        _, a = _attention(field, t, z, w)
        return self._moving(field, z, w, z + dt * layer_norm(a))


@dataclass(frozen=True)
class NGPT(_Scheme):
    """nGPT (Loshchilov et al. 2024): x ← N(x + α dt (N(a(N x)) − x)), unit tokens, speed α/‖a‖.

    Args: dt: the step. alpha: the update rate α > 0 (nGPT's "eigen learning rate", one for every token here).
    """

    alpha: float = 1.0

    def __post_init__(self):
        super().__post_init__()
        object.__setattr__(self, "alpha", _dt(self.alpha, "alpha"))

    def step(self, field: Field, t, z: Tensor, w: Tensor | None, dt: float) -> Tensor:
        """(batch, n, d) the tokens after one nGPT layer of size dt."""
        theta, a = _attention(field, t, z, w)
        return self._moving(field, z, w, layer_norm(theta + self.alpha * dt * (layer_norm(a) - theta)))


@dataclass(frozen=True)
class MixLN(_Scheme):
    """Mix-LN (Li et al. 2024): Post-LN for the layers before `switch` (at time switch · dt), Pre-LN after."""

    switch: int = 8

    def __post_init__(self):
        super().__post_init__()
        if isinstance(self.switch, bool) or not isinstance(self.switch, int) or self.switch < 0:
            raise ValueError(f"switch must be an integer ≥ 0 (the layers of Post-LN), got {self.switch!r}")

    def step(self, field: Field, t, z: Tensor, w: Tensor | None, dt: float) -> Tensor:
        """(batch, n, d) one Post-LN layer while t < switch · dt, then Pre-LN layers."""
        scheme = PostLN(self.dt) if float(t) < (self.switch - 0.5) * self.dt else PreLN(self.dt)
        return scheme.step(field, t, z, w, dt)


#: The schemes by name, in the order the comparison reports them.
SCHEMES: dict[str, type] = {"post-ln": PostLN, "pre-ln": PreLN, "peri-ln": PeriLN, "ngpt": NGPT, "mix-ln": MixLN}
