"""Solvers: how a `Field` is advanced in time. Small immutable objects, chosen at the call site.

    Euler(dt):         z ← R(z + dt · f(t, z))                                      order 1
    Euler.layers(α):   the paper's layers, dt_k = α_k / (1 + α_k) (bit for bit `simulate`'s)
    RK4(dt):           z ← R(z + dt/6 (k1 + 2k2 + 2k3 + k4))                        order 4
    Renormalised(dt):  x ← R(x + dt · V Σ_j P_ij x_j)   the "step then renormalise" scheme of the sphere codes
                       (Geshkovski, Koubbi, Polyanskiy, Rigollet 2024): not projected first; on a manifold that
                       declares it (`Manifold.renormalisable`: the sphere), refused elsewhere
    Adaptive(rtol, atol, method):  an embedded Runge–Kutta pair with step-size control (torchdiffeq's
                       `odeint`, dopri5 by default), saved at given times

R is the manifold's retraction (`Manifold.retract`: identity in R^d, x / |x| on the sphere), so fixed-step
solutions on the sphere have norm 1 to rounding at every step. A new solver is a class with `step` (fixed step)
or `solve` (its own time stepping) — CONTRIBUTING.md shows one.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import torch
from torch import Tensor

if TYPE_CHECKING:
    from hardmax.dynamics.field import Field

__all__ = ["RK4", "Adaptive", "Euler", "FixedStep", "Renormalised", "Solver", "euler_update", "layer_contraction",
           "layer_step"]


def layer_step(alpha):
    """γ = α / (1 + α): the step of the paper's layer of parameter α > 0 (eq. 1.1), the one place it is computed.

    alpha: a float or a tensor (any shape; one α_k per layer), gradients kept. Every engine takes its γ_k from here
    (through `Euler.steps`), so the compiled kernel, the compact hardmax path and the reference loop step by the
    same numbers bit for bit. A NumPy array works too (`theory.check` measures each layer's step with it)."""
    return alpha / (1 + alpha)


def layer_contraction(alpha):
    """1 − γ = 1 / (1 + α): the factor by which the paper's layer shrinks a follower's distance to a fixed target.

    With T(z) = x* fixed, z^{k+1} − x* = (1 − γ_k)(z^k − x*), so after k layers the distance is Π_{l<k} 1/(1 + α_l)
    times the first (the rate of Theorem 2.1). alpha: a float, a NumPy array or a tensor (any shape). Computed as
    1 / (1 + α), not 1 − `layer_step(α)`, which rounds differently; the one place the expression is written."""
    return 1 / (1 + alpha)


def euler_update(z: Tensor, target: Tensor, gamma, present: Tensor | None = None) -> Tensor:
    """z + γ (T − z): the paper's layer (an Euler step of ż = T(z) − z of size γ), in torch or NumPy.

    z, target: (..., n, d) tensors (or NumPy arrays when present is None); gamma: a float, a tensor or an array
    broadcasting against them (`layer_step`); present: (..., n) bool, the rows that move (the others are returned
    as they are); None: every row. The compiled kernels, which cannot call it, run the same operations in the same
    order on the γ_k `layer_step` gives them (`_target` in `_engines/kernel.py`, `_rows` in `_engines/causal.py`),
    which the exactness tests hold bit for bit."""
    moved = z + gamma * (target - z)
    return moved if present is None else torch.where(present.unsqueeze(-1), moved, z)


def _positive(x, name: str) -> float:
    if isinstance(x, bool) or not isinstance(x, int | float) or not (math.isfinite(x) and x > 0):
        raise ValueError(f"{name} must be a finite number > 0, got {x!r}")
    return float(x)


_FINEST_RTOL = 100 * float(np.finfo(np.float64).eps)  # Adaptive's smallest rtol


def _constant(dt: float, count: int, dtype: torch.dtype, device) -> Tensor:
    """(count,) the same step dt."""
    return torch.full((count,), dt, dtype=dtype, device=device)


@dataclass(frozen=True)
class Euler:
    """Explicit Euler, z ← R(z + dt f(t, z)); order 1. `Euler.layers(alpha)` is the paper's layer.

    Args:
        dt: the step, > 0 (`Euler.layers`: None, the steps come from α).
        alpha: α > 0, or one α_k per layer: step dt_k = α_k / (1 + α_k), computed as `simulate` computes it.
    """

    dt: float | None = None
    alpha: float | tuple[float, ...] | None = None
    order = 1

    def __post_init__(self):
        if (self.dt is None) == (self.alpha is None):
            raise ValueError("Euler needs a step dt, or use Euler.layers(alpha) for the paper's layers")
        if self.dt is not None:
            object.__setattr__(self, "dt", _positive(self.dt, "dt"))
        elif isinstance(self.alpha, torch.Tensor) and self.alpha.requires_grad:
            # α being learned (the classifier): kept as the tensor, so that gradients reach it through `solve`. A
            # learned α is a softplus, which can underflow to 0 (a layer that does not move): ≥ 0 is accepted here.
            values = self.alpha.detach().to(torch.float64).reshape(-1).cpu()
            if values.numel() == 0 or not bool((torch.isfinite(values) & (values >= 0)).all()):
                raise ValueError("alpha must be finite and ≥ 0 (learned) or > 0")
        else:
            try:
                given = self.alpha.detach().cpu().numpy() if isinstance(self.alpha, torch.Tensor) else self.alpha
                a = tuple(float(x) for x in np.asarray(given, dtype=np.float64).reshape(-1))
            except (TypeError, ValueError, RuntimeError):
                raise ValueError(f"alpha must be a number > 0 or one per layer, got {self.alpha!r}") from None
            if not a:
                raise ValueError("alpha must be a number > 0 or one per layer, got an empty array")
            object.__setattr__(self, "alpha", tuple(_positive(x, "alpha") for x in a) if len(a) > 1
                               else _positive(a[0], "alpha"))

    @classmethod
    def layers(cls, alpha) -> Euler:
        """The paper's layers z ← z + α/(1+α)(Σ_j P_ij z_j − z): Euler steps of size α_k/(1+α_k)."""
        return cls(alpha=alpha)

    def steps(self, count: int, dtype: torch.dtype, device) -> Tensor:
        """(count,) the step of each layer, in the tokens' dtype."""
        if self.dt is not None:
            return _constant(self.dt, count, dtype, device)
        a = torch.as_tensor(self.alpha, dtype=dtype, device=device).reshape(-1)
        if a.numel() not in (1, count):
            raise ValueError(f"alpha must be a scalar or have one value per layer ({count}), got {a.numel()}")
        a = a.expand(count) if a.numel() == 1 else a
        return layer_step(a)

    def step(self, field: Field, t, z: Tensor, w: Tensor | None, dt: float) -> Tensor:
        """(batch, n, d) tokens after one step of size `dt` from time `t`: R(z + dt ż), R the manifold's retraction."""
        return field.manifold.retract(z + dt * field.velocity(t, z, w))


@dataclass(frozen=True)
class RK4:
    """The classical fourth-order Runge–Kutta method, retracted after each step; order 4."""

    dt: float
    order = 4

    def __post_init__(self):
        object.__setattr__(self, "dt", _positive(self.dt, "dt"))

    def steps(self, count: int, dtype: torch.dtype, device) -> Tensor:
        """(count,) the constant step dt, in the tokens' dtype."""
        return _constant(self.dt, count, dtype, device)

    def step(self, field: Field, t, z: Tensor, w: Tensor | None, dt: float) -> Tensor:
        """(batch, n, d) tokens after one classical RK4 step of size `dt` from time `t`, then retracted."""
        f = field.velocity
        k1 = f(t, z, w)
        k2 = f(t + dt / 2, torch.add(z, k1, alpha=dt / 2), w)
        k3 = f(t + dt / 2, torch.add(z, k2, alpha=dt / 2), w)
        k4 = f(t + dt, torch.add(z, k3, alpha=dt), w)
        return field.manifold.retract(torch.add(z, k1.add_(k2, alpha=2).add_(k3, alpha=2).add_(k4), alpha=dt / 6))


@dataclass(frozen=True)
class Renormalised:
    """x ← (x + dt V Σ_j P_ij x_j) / |x + dt V Σ_j P_ij x_j|: the sphere codes' explicit scheme (sphere only).

    On a general manifold x ← R(x + dt V Σ_j P_ij x_j), R its retraction; it runs where the manifold declares the
    scheme its own (`Manifold.renormalisable`: `Sphere()`, not `Flat()`) and is refused elsewhere (one line).
    Not projected before the step: it is an Euler step of the projected field with a per-token step
    dt / (1 + dt⟨x_i, V Σ_j P_ij x_j⟩), so it agrees with `Euler` to O(dt²) per step.
    """

    dt: float
    order = 1

    def __post_init__(self):
        object.__setattr__(self, "dt", _positive(self.dt, "dt"))

    def steps(self, count: int, dtype: torch.dtype, device) -> Tensor:
        """(count,) the constant step dt, in the tokens' dtype."""
        return _constant(self.dt, count, dtype, device)

    def step(self, field: Field, t, z: Tensor, w: Tensor | None, dt: float) -> Tensor:
        """(batch, n, d) R(x + dt V Σ_j P_ij x_j) (on the sphere (…) / ‖…‖) for present tokens, absent ones (and
        tokens with no allowed key, `Field.moving`) unchanged; ValueError unless the manifold is `renormalisable`."""
        if not field.manifold.renormalisable:
            raise ValueError(f"Renormalised is a scheme on the sphere (step, then retract), not on "
                             f"{field.manifold.name}: use Field(..., manifold=Sphere()) or another solver")
        drift = field.targets(t, z, w)
        V = field.V(z)
        drift = drift if V is None else drift @ V.transpose(-1, -2)
        moved = field.manifold.retract(z + dt * drift)
        moving = field.moving(z, w)
        return moved if moving is None else torch.where(moving.unsqueeze(-1), moved, z)


@dataclass(frozen=True)
class Adaptive:
    """An adaptive embedded Runge–Kutta solver (torchdiffeq's `odeint`): error control by rtol and atol.

    The state is integrated in R^{n·d}; on the sphere the exact flow stays on it, the numerical one to the
    tolerance, and the saved states are retracted (x / |x|).

    Args:
        rtol, atol: relative and absolute tolerances (> 0; rtol ≥ 100 ulp of the tokens' dtype). method: a
            torchdiffeq adaptive method ("dopri5", "bosh3", "dopri8", "adaptive_heun", "fehlberg2").
        max_steps: the most steps it takes; a solve that needs more stops with a one-line error (a stiff or
            overflowing field, or a horizon far beyond the dynamics' time scale), instead of running for days.
    """

    rtol: float = 1e-7
    atol: float = 1e-9
    method: str = "dopri5"
    max_steps: int = 100_000

    METHODS = ("dopri5", "dopri8", "bosh3", "adaptive_heun", "fehlberg2")

    def __post_init__(self):
        _positive(self.rtol, "rtol")
        _positive(self.atol, "atol")
        if self.rtol < _FINEST_RTOL:  # below float64's resolution no step is ever accepted: dt underflows
            raise ValueError(f"rtol must be ≥ {_FINEST_RTOL:g} (100 ulp of float64: finer cannot be met), "
                             f"got {self.rtol!r}")
        if self.method not in self.METHODS:
            raise ValueError(f"method must be one of {self.METHODS}, got {self.method!r}")
        if isinstance(self.max_steps, bool) or not isinstance(self.max_steps, int | np.integer) or not \
                1 <= self.max_steps < 2**31:
            raise ValueError(f"max_steps must be an integer from 1 to 2^31 − 1, got {self.max_steps!r}")

    def solve(self, field: Field, z: Tensor, w: Tensor | None, times: Tensor) -> Tensor:
        """(len(times), batch, n, d) the states at `times` (increasing, times[0] the start), in at most `max_steps`
        steps (torchdiffeq then raises AssertionError 'max_num_steps exceeded')."""
        from torchdiffeq import odeint  # imported here: only this solver needs it

        if z.dtype == torch.float32 and self.rtol < 100 * torch.finfo(torch.float32).eps:
            raise ValueError(f"rtol = {self.rtol:g} is below what float32 tokens resolve (≥ "
                             f"{100 * torch.finfo(torch.float32).eps:.1e}); use float64 tokens or a larger rtol")
        out = odeint(lambda t, y: field.velocity(t, y, w), z, times, rtol=self.rtol, atol=self.atol,
                     method=self.method, options={"max_num_steps": int(self.max_steps)})
        return field.manifold.retract(out)


#: The non-adaptive solvers, whose steps are set in advance: Euler (dt, or α per layer), RK4, Renormalised.
FixedStep = Euler | RK4 | Renormalised
#: Every solver `solve` accepts: the fixed-step ones and `Adaptive`.
Solver = FixedStep | Adaptive
