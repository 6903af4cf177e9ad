"""The lost-in-the-middle model on the circle, compiled: RK4 in the angles θ_j, one sequence per core.

    θ̇_j = (1/Z_j) Σ_{k<j} e^{−m(j−k)} f(θ_j − θ_k),   f(x) = −β sin x e^{β cos x} = Σ_q c_q sin(q x),
    m = λ/n,  Z_j = Σ_{l<j} e^{−m(j−l)}  (Z_0: no key, θ̇_0 = 0),

with c_q = −2 q I_q(β) (computed by `positional`): the ALiBi weights are geometric, so per Fourier mode the
sum over k < j is a prefix sum and a stage costs O(n K), K ≈ β + 15 modes, not n²/2 pairs. `circle_angles` is the
one entry; `hardmax.dynamics.positional.circle_flow` checks the arguments, computes c, e^{−m} and 1/Z and wraps the
angles as a `Solution` (engine "circle"). The tests hold it to `solve(lost_in_the_middle(β, λ), RK4(dt), x,
mask=preceding(n))` (the reference loop, in R² and retracted) and to a transcription of the paper's per-token loop.

What does not live here: the model as a `Field` and its checks (`positional`), the other engines (`_engines`).
"""

from __future__ import annotations

import math

import numpy as np

from hardmax._numba import numba, parallel

# fastmath's reassociation lets the prefix sums and the Taylor polynomials vectorise; no other flag (no finite-math
# assumption: a non-finite angle stays visible to the caller, who refuses it)
_FAST = dict(cache=True, error_model="numpy", fastmath={"reassoc", "contract"})


@numba.njit(inline="always", **_FAST)
def _force(cosines, sines, coef, decay, inv_z, er, ei, pr, pi, out):
    """out (n,) = θ̇ at the angles whose cosines and sines (n,) are given.

        θ̇_j = (1/Z_j) Σ_q c_q Im(e^{iqθ_j} P_jq),
        P_jq = Σ_{k<j} e^{−m(j−k)} e^{−iqθ_k} = e^{−m}(P_{j−1,q} + e^{−iqθ_{j−1}}),

    coef (K,) the c_q, decay = e^{−m}, inv_z (n,) the 1/Z_j (0 for j = 0: no key, no move). Scratch: er, ei (n, K)
    the powers e^{iqθ_j} (real and imaginary parts), pr, pi (K,) the running P_jq. Invariant: P_jq holds the keys
    k < j only (it is read before token j is added), so the flow is causal: θ̇_j depends on θ_0..θ_j alone."""
    # The powers e^{iqθ_j} first (a chain per token, the tokens' chains independent), then the prefix sums (the
    # modes independent: they vectorise).
    n, modes = cosines.shape[0], coef.shape[0]
    for j in range(n):
        c, s = cosines[j], sines[j]
        a, b = c, s
        er[j, 0] = a
        ei[j, 0] = b
        for q in range(1, modes):
            a, b = a * c - b * s, a * s + b * c
            er[j, q] = a
            ei[j, q] = b
    for q in range(modes):
        pr[q] = 0.0
        pi[q] = 0.0
    for j in range(n):
        f = 0.0
        for q in range(modes):
            f += coef[q] * (er[j, q] * pi[q] + ei[j, q] * pr[q])
            pr[q] = decay * (pr[q] + er[j, q])
            pi[q] = decay * (pi[q] - ei[j, q])
        out[j] = f * inv_z[j]


@numba.njit(inline="always", **_FAST)
def _turn(cb, sb, th, k, h, c, s):
    """c, s (n,) = cos and sin of θ_j + h k_j, from cb, sb (n,) the cos and sin of θ_j and k (n,) an increment.

        cos(θ + δ) = cos θ cos δ − sin θ sin δ,   sin(θ + δ) = sin θ cos δ + cos θ sin δ,   δ = h k_j,

    cos δ and sin δ by their Taylor polynomials to degree 14 where |δ| ≤ 1/4 (error below 1e-16), libm beyond. th
    (n,) only gives the length. Invariant: c² + s² = 1 to rounding when cb² + sb² = 1 (a rotation of a unit vector)."""
    for j in range(th.shape[0]):
        d = h * k[j]
        if abs(d) <= 0.25:
            d2 = d * d
            cd = 1.0 - d2 * (1.0 / 2) * (1.0 - d2 * (1.0 / 12) * (1.0 - d2 * (1.0 / 30) * (
                1.0 - d2 * (1.0 / 56) * (1.0 - d2 * (1.0 / 90) * (1.0 - d2 * (1.0 / 132) * (
                    1.0 - d2 * (1.0 / 182)))))))
            sd = d * (1.0 - d2 * (1.0 / 6) * (1.0 - d2 * (1.0 / 20) * (1.0 - d2 * (1.0 / 42) * (
                1.0 - d2 * (1.0 / 72) * (1.0 - d2 * (1.0 / 110) * (1.0 - d2 * (1.0 / 156) * (
                    1.0 - d2 * (1.0 / 210))))))))
        else:
            cd, sd = math.cos(d), math.sin(d)
        c[j] = cb[j] * cd - sb[j] * sd
        s[j] = sb[j] * cd + cb[j] * sd


@numba.njit(parallel=True, **_FAST)
def _run(theta0, coef, decay, inv_z, dt, steps, every, out):
    """RK4 in the angles of every sequence b of theta0 (batch, n), one per worker (`prange`), for `steps` steps dt:

        θ ← θ + (dt/6)(k1 + 2k2 + 2k3 + k4),   k1 = θ̇(θ), k2 = θ̇(θ + dt/2 k1), k3 = θ̇(θ + dt/2 k2), k4 = θ̇(θ + dt k3),

    the paper's script's scheme (stages in the angles, nothing retracted: the circle has no normal direction).
    out (steps // every + 1, batch, n) gets step 0 and every `every`-th step. The stages read only cos and sin of
    their angles (`_turn` from those of θ), which come from libm every 32 steps and by angle addition in between
    (the increment of the last step kept in k1), so that a stage costs no transcendental call."""
    batch, n = theta0.shape
    for b in numba.prange(batch):
        modes = coef.shape[0]
        pr, pi = np.empty(modes), np.empty(modes)
        er, ei = np.empty((n, modes)), np.empty((n, modes))
        th, k1, k2, k3, k4 = np.empty(n), np.empty(n), np.empty(n), np.empty(n), np.empty(n)
        cb, sb, c, s = np.empty(n), np.empty(n), np.empty(n), np.empty(n)
        th[:] = theta0[b]
        out[0, b] = th
        for step in range(1, steps + 1):
            if step % 32 == 1:  # cos θ, sin θ from libm every 32 steps, carried by angle addition between
                for j in range(n):
                    cb[j] = math.cos(th[j])
                    sb[j] = math.sin(th[j])
            else:
                _turn(cb, sb, th, k1, 1.0, c, s)  # k1 holds the last step's increment (below)
                cb[:] = c
                sb[:] = s
            _force(cb, sb, coef, decay, inv_z, er, ei, pr, pi, k1)
            _turn(cb, sb, th, k1, 0.5 * dt, c, s)
            _force(c, s, coef, decay, inv_z, er, ei, pr, pi, k2)
            _turn(cb, sb, th, k2, 0.5 * dt, c, s)
            _force(c, s, coef, decay, inv_z, er, ei, pr, pi, k3)
            _turn(cb, sb, th, k3, dt, c, s)
            _force(c, s, coef, decay, inv_z, er, ei, pr, pi, k4)
            for j in range(n):  # their scheme: θ + (dt/6)(k1 + 2k2 + 2k3 + k4); k1 keeps the increment
                k1[j] = (dt / 6.0) * (k1[j] + 2.0 * k2[j] + 2.0 * k3[j] + k4[j])
                th[j] = th[j] + k1[j]
            if step % every == 0:
                out[step // every, b] = th


def circle_angles(theta: np.ndarray, coef: np.ndarray, decay: float, inv_z: np.ndarray, dt: float, steps: int,
                  every: int, threads: int) -> np.ndarray:
    """(steps // every + 1, batch, n) the angles of `_run` from theta (batch, n) C-contiguous float64: coef (K,) the
    Fourier coefficients c_q, decay = e^{−λ/n}, inv_z (n,) the 1/Z_j, `threads` workers over the batch (under the
    kernels' lock, numba's thread count restored after). Unchecked: `positional.circle_flow` checks its inputs."""
    out = np.empty((steps // every + 1, *theta.shape))
    with parallel(threads):
        _run(theta, coef, decay, inv_z, dt, steps, every, out)
    return out
