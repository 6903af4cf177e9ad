"""
Positional bias and the lost-in-the-middle profile
==================================================

Duerinckx, Geshkovski and Rossi (arXiv 2605.09213; code borjanG/2026-lost-in-the-middle) study causal attention with
an ALiBi positional weight as a particle system on the circle: token j (an angle θ_j) follows

.. math:: \\dot\\theta_j = \\sum_{k<j} \\pi_{jk}\\,\\big(-\\beta \\sin(\\theta_j-\\theta_k)\\, e^{\\beta\\cos(\\theta_j-\\theta_k)}\\big),
          \\qquad \\pi_{jk} = \\frac{e^{-(\\lambda/n)(j-k)}}{\\sum_{l<j} e^{-(\\lambda/n)(j-l)}},

the positional weights normalised over the earlier tokens, the content weight :math:`e^{\\beta\\cos}` not. In hardmax
it is `lost_in_the_middle(β, λ)`, a `Field` on S¹ for `solve` under `mask=preceding(n)`, and `circle_flow`, its
compiled RK4 in the angles (a Fourier series of the interaction and one prefix sum per mode: O(nK) a stage instead
of n²/2 pairs), which the tests hold to a transcription of the authors' per-token loop to 1e-12.

**Their particle figure**: n = 64 tokens in four clusters (their script's start, seed 17), β = λ = 1, T = 10, RK4 with
dt = 0.0025 (4,000 steps, every one kept). `circle_flow` computes it in about 30 ms on one core, the authors' loop in
about 4 s (`benchmarks/bench_claims.py`: 100–150× here, the same angles to 2e-15).
"""

import math

import matplotlib.pyplot as plt
import numpy as np

from hardmax.dynamics.positional import circle_flow, retrieval_profile, t_crit, u_profile

rng = np.random.default_rng(17)               # their start: four clusters of 16 at (0.1, 0.7, 1.3, 1.9)π
labels = np.repeat(np.arange(4), 16)
theta = np.mod(np.linspace(0.1, 1.9, 4)[labels] * math.pi + rng.normal(0.0, 0.075, 64), 2 * math.pi)
flow = circle_flow(theta, beta=1.0, lam=1.0, t1=10.0, dt=0.0025)      # (4001, 64, 2): every RK4 step
print(f"{flow.tokens.shape[0] - 1} RK4 steps of {flow.tokens.shape[1]} tokens, engine {flow.engine!r}")

z = flow.tokens.numpy()
times = flow.times.numpy()
colours = np.array(["#00A4EF", "#F25022", "#7FBA00", "#FFB900"])[labels]
fig, axes = plt.subplots(1, 4, figsize=(12, 3.4), layout="constrained")
for ax, t in zip(axes, (0.0, 1.0, 4.0, 10.0), strict=True):
    k = int(round(t / 0.0025))
    ax.add_patch(plt.Circle((0, 0), 1.0, fill=False, color="0.8"))
    for j in range(64):                       # trails from the start, thinned to 400 points
        ax.plot(*z[: k + 1 : max(1, k // 400), j].T, color=colours[j], lw=0.7, alpha=0.8)
    ax.scatter(*z[0].T, marker="x", s=12, color=colours, alpha=0.3)
    ax.scatter(*z[k].T, s=16, facecolors="none", edgecolors=colours)
    ax.annotate("θ₁", 0.8 * z[k, 0], color=colours[0])
    ax.annotate("θ₆₄", 0.7 * z[k, -1], color=colours[-1])
    ax.set_title(f"t = {t:g}")
    ax.set_aspect("equal")
    ax.set_xlim(-1.1, 1.1)
    ax.set_ylim(-1.1, 1.1)
    ax.axis("off")
fig.suptitle("ALiBi-weighted causal attention on the circle, n = 64, β = λ = 1 (their particle figure)")

# %%
# **The U-shaped retrieval profile.** For iid uniform tokens the paper solves the limiting correlation equation in
# closed form: the soft retrieval of the token at relative position s of the prompt by the last token at time t is
#
# .. math:: S_t(s) = \sum_{q=1}^{20} \omega_{q} \frac{\lambda e^{\lambda s}}{e^\lambda - 1}
#           \psi_{a_q t}\Big(\log\frac{e^\lambda-1}{e^{\lambda s}-1}\Big),\quad a_q = q^2 I_q(\beta),\
#           \omega_q = e^{-\pi^2 q^2/(2M^2)},\ M = 8,
#
# (`u_profile`, their script's series), U-shaped — primacy, recency and one interior minimum — for t below
# `t_crit(β)` (2.46 at β = λ = 1), where its slope at s = 1 changes sign. `retrieval_profile` measures the same
# quantity from simulated prompts: n · mean of :math:`\sum_q \omega_q\cos q(\theta_n(t) - \theta_k(0))` over
# 20,000 prompts of n = 32 tokens (`circle_flow`, dt = 0.05; about 5–9 s on one core), with its standard error
# (≈ n/√prompts = 0.23). The paper's own figures use the closed form; the measurement is ours.
profile = retrieval_profile(times=(0.5, 1.0, 2.0), n=32, prompts=20_000, seed=0)
tc = t_crit(1.0)
print(f"t_crit(β = 1) = {tc:.3f}")
for t, z_scores in zip(profile.times, profile.z, strict=True):
    print(f"t = {t:g}: largest |measured − closed form| / error over the {profile.n - 1} sources "
          f"{np.abs(z_scores).max():.1f}, mean {z_scores.mean():+.1f}")

fig, axes = plt.subplots(1, 4, figsize=(13, 3.4), layout="constrained")
s = np.linspace(0.01, 0.99, 300)
for ax, t, measured, error in zip(axes[:3], profile.times, profile.measured, profile.error, strict=True):
    ax.plot(s, u_profile(s, t=t), color="black", lw=1, label="closed form (n → ∞)")
    ax.errorbar(profile.s, measured, yerr=2 * error, fmt="o", ms=3, color="#d95f02", elinewidth=0.8,
                label="measured, ± 2 s.e.")
    ax.set_title(f"t = {t:g}")
    ax.set_xlabel("source position s")
axes[0].set_ylabel("retrieval S_t(s)")
axes[0].legend(fontsize=7)
betas = np.linspace(0.1, 4.8, 48)
axes[3].plot(betas, [t_crit(b) for b in betas], color="black")
axes[3].scatter([1.0], [tc], color="#d95f02", zorder=3)
axes[3].set_yscale("log")
axes[3].set_xlabel("β")
axes[3].set_title("t_crit(β), λ = 1: U-shaped below")

# %%
# At t = 0.5 and t = 1 the measured profile lies on the closed form within its error bars at every source (the
# largest deviation about 2 standard errors of 31), the U with its interior minimum included. At t = 2, still below
# t_crit, it does not: only the primacy peak at the first sources matches; from s ≈ 0.1 on the measured profile is
# flat near 2.1, a third below the closed form's 3.2–3.5 (up to 12 standard errors). The closed form is the n → ∞
# limit, and the gap shrinks as n grows — 1.65, 1.12, 0.76 on average over s ≥ 0.1 for n = 16, 32, 64
# (docs/dynamics.md) — so at this t and these n the finite-n correction, not the closed form, sets the middle.
