"""The authors' published per-token loops, transcribed: what the compiled paths are held to, in the tests and in
benchmarks/bench_claims.py alike.

Each function keeps the published script's loops and order of operations (a line here is a line there), so a
difference from the library is a difference from the paper's code, not from a re-derivation.

- `alibi_weights`, `alibi_force`, `alibi_run`: the lost-in-the-middle model of Duerinckx, Geshkovski, Rossi (arXiv
  2605.09213), from generate_alibi_particle_circle_dynamics.py of borjanG/2026-lost-in-the-middle: angles θ_j on
  the circle, θ̇_j = Σ_{k<j} π_jk (−β sin(θ_j − θ_k) e^{β cos(θ_j − θ_k)}), π_jk ∝ e^{−(λ/n)(j−k)}, one RK4 step
  after another, every force a Python loop over the tokens.

Nothing here imports hardmax.
"""

from __future__ import annotations

import numpy as np


def alibi_weights(n: int, lam: float) -> np.ndarray:
    """(n, n) π_jk = e^{−(λ/n)(j−k)} / Σ_{l<j} e^{−(λ/n)(j−l)} for k < j, 0 elsewhere (row 0 is zero)."""
    weights = np.zeros((n, n))
    for j in range(1, n):
        k = np.arange(j)
        coeffs = np.exp(-(lam / n) * (j - k))
        weights[j, :j] = coeffs / coeffs.sum()
    return weights


def alibi_force(theta: np.ndarray, beta: float, weights: np.ndarray) -> np.ndarray:
    """(n,) θ̇, token after token."""
    out = np.zeros_like(theta)
    for j in range(1, theta.size):
        diff = theta[j] - theta[:j]
        out[j] = np.dot(weights[j, :j], -beta * np.sin(diff) * np.exp(beta * np.cos(diff)))
    return out


def alibi_run(theta: np.ndarray, beta: float, lam: float, dt: float, steps: int) -> np.ndarray:
    """(n,) the angles after `steps` RK4 steps of size dt from `theta` (n,)."""
    w = alibi_weights(theta.size, lam)
    for _ in range(steps):
        k1 = alibi_force(theta, beta, w)
        k2 = alibi_force(theta + 0.5 * dt * k1, beta, w)
        k3 = alibi_force(theta + 0.5 * dt * k2, beta, w)
        k4 = alibi_force(theta + dt * k3, beta, w)
        theta = theta + (dt / 6.0) * (k1 + 2.0 * k2 + 2.0 * k3 + k4)
    return theta
