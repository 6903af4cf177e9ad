"""
Causal attention: Rényi centres and one cluster
===============================================

A decoder's token k attends only to the tokens j ≤ k. On the sphere with :math:`V = I` the flow is

.. math:: \\dot x_k = P^\\perp_{x_k}\\Big(\\sum_{j \\le k} \\frac{e^{\\beta\\langle Q x_k, K x_j\\rangle}}
          {\\sum_{l \\le k} e^{\\beta\\langle Q x_k, K x_l\\rangle}}\\, x_j\\Big),

which Karagodin, Polyanskiy and Rigollet (NeurIPS 2024, arXiv 2411.04990) study: `Field(Softmax(β), Bilinear(QᵀK),
manifold=Sphere())` solved under `mask=Causal()`. Token 1 sees only itself and never moves.

**Their Figure 2**: n = 200 tokens uniform on the circle, K = Q = V = I₂, β = 64. A *strong Rényi centre* is a token
farther than δ = 4β^{-1/2} = 0.5 from every earlier token; its attention to any earlier token is at most
:math:`e^{-\\beta\\delta^2/2} = e^{-8}` of its attention to itself, so it barely moves (their Lemma 5.1), and later
tokens near it gather there. The greedy Rényi centres (the parking sequence: each token farther than δ from every
earlier *centre*) capture more of the metastable clusters but move and merge. `causal_figure2` runs the figure
(6,000 RK4 steps of dt = 0.05, about 3 s on one core) and `.check()` states the claim up to the caption's t = 150.
"""

import matplotlib.pyplot as plt
import numpy as np
import torch

from hardmax.dynamics import RK4, Bilinear, Causal, Field, Save, Softmax, Sphere, solve
from hardmax.experiments.causal import causal_clustering, causal_figure2

figure = causal_figure2()   # n = 200, d = 2, β = 64, K = Q = V = I₂, t = 0 … 300
print(figure.check())
centres = figure.centres
print(f"{int(centres.strong.sum())} strong and {int(centres.greedy.sum())} greedy Rényi centres at δ = "
      f"{centres.delta:g}")

times = figure.solution.times.numpy()
z = figure.solution.tokens.numpy()          # (saved, 200, 2)
strong, greedy = centres.strong.numpy(), centres.greedy.numpy()
fig, axes = plt.subplots(1, 4, figsize=(12, 3.5), layout="constrained")
for ax, t in zip(axes, (0, 25, 75, 150), strict=True):
    k = int(np.argmin(np.abs(times - t)))
    ax.add_patch(plt.Circle((0, 0), 1.0, fill=False, color="0.8"))
    ax.scatter(*z[k].T, s=10, color="#1f78b4", alpha=0.5, label="tokens")
    ax.scatter(*z[k, greedy].T, s=40, facecolors="none", edgecolors="black", label="Rényi centres")
    ax.scatter(*z[k, strong].T, s=22, color="#e31a1c", label="strong Rényi centres")
    ax.set_title(f"t = {times[k]:g}: {int(figure.clusters[k])} clusters")
    ax.set_aspect("equal")
    ax.set_xlim(-1.15, 1.15)
    ax.set_ylim(-1.15, 1.15)
    ax.axis("off")
axes[0].legend(loc="lower left", fontsize=7, frameon=False)
fig.suptitle("Causal SA on S¹, n = 200, β = 64 (KPR 2024, Figure 2)")

# %%
# The claim, measured at every saved time: the largest distance any strong centre has moved from its start stays
# below δ/4 up to t = 150 while the clusters merge from 12 (t = 25) to 7 (t = 150); the greedy centres move by
# about δ from the start. The strong centres are *metastable*, not fixed: run on and near t = 200 one of them is
# pulled into a neighbouring cluster (its move jumps to 0.52), as the theorem below says every token eventually is.
fig, (left, right) = plt.subplots(1, 2, figsize=(11, 3.5))
left.plot(times, figure.strong_move.numpy(), color="#e31a1c", label="strong centres (largest move)")
left.plot(times, figure.greedy_move.numpy(), color="black", label="greedy centres (largest move)")
left.plot(times, figure.median_move.numpy(), color="#1f78b4", label="median token")
left.axhline(centres.delta / 4, color="0.5", ls="--", lw=0.8, label="δ/4")
left.axvline(150, color="0.8", lw=0.8)
left.set_xlabel("t")
left.set_ylabel("distance from the start")
left.legend(fontsize=8)
right.step(times, figure.clusters.numpy(), where="post", color="black")
right.set_xlabel("t")
right.set_ylabel(f"clusters (diameter ≤ {figure.tol:g})")
right.set_yscale("log")
fig.tight_layout()

# %%
# **Their Theorem 4.1**: with V = I and *arbitrary* key and query matrices, every token converges to x₁ from almost
# every start. `causal_clustering` checks it over 16 random pairs K, Q with iid N(0, 1/d) entries (so QᵀK is neither
# symmetric nor definite), 4 uniform starts each, n = 24 tokens on S², β = 1, to t = 200; the check passes where
# every token is within 0.01 of x₁ and the state has come to rest, fails only at rest away from x₁, and says "not
# tested" while tokens still move.
print(causal_clustering())

# %%
# The same model for four of those draws, the farthest token's distance to x₁ over time.
g = torch.Generator().manual_seed(0)
Q = torch.randn(4, 3, 3, generator=g, dtype=torch.float64) / 3**0.5
K = torch.randn(4, 3, 3, generator=g, dtype=torch.float64) / 3**0.5
x = torch.nn.functional.normalize(torch.randn(4, 24, 3, generator=g, dtype=torch.float64), dim=-1)
field = Field(Softmax(1.0), Bilinear(Q.transpose(-1, -2) @ K), manifold=Sphere())
run = solve(field, RK4(0.1), x, t1=200.0, mask=Causal(), save=Save(every=10))
farthest = (run.tokens - run.tokens[:, :, :1]).norm(dim=-1).amax(-1)   # (saved, 4)
fig, ax = plt.subplots(figsize=(6, 3.3))
ax.semilogy(run.times.numpy(), farthest.clamp_min(1e-16).numpy())
ax.set_xlabel("t")
ax.set_ylabel("max_k ‖x_k − x_1‖")
ax.set_title("Causal SA, V = I, four random K, Q (n = 24, d = 3)")
fig.tight_layout()
