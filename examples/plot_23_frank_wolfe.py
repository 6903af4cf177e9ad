"""
Hardmax as Frank–Wolfe: Voronoi cells, contraction, metastability
=================================================================

Alcalde, Geshkovski and Ruiz-Balet (arXiv 2508.09628) read the hardmax layer

.. math:: z_i \\leftarrow z_i + \\gamma\\,(\\mathrm{mean}_{j \\in C_i} z_j - z_i),\\qquad
          C_i = \\arg\\max_j \\langle A z_i, z_j\\rangle,\\qquad \\gamma = \\frac{\\alpha}{1+\\alpha}

as a Frank–Wolfe step for :math:`f(z) = \\tfrac12\\langle Az, z\\rangle` over the hull of the current tokens: the
linear maximisation of :math:`\\langle \\nabla f(z_i), x\\rangle = \\langle A z_i, x\\rangle` over the hull is
attained at a token. With :math:`A \\succeq 0` the hull's vertices cut it into *dominance cells*
:math:`\\{x : \\langle Ax, v\\rangle \\ge \\langle Ax, w\\rangle\\ \\forall w\\}` (their code draws them); a token in
the cell of v moves straight to v, its distance shrinking by exactly :math:`1-\\gamma` a layer. With
:math:`A \\preceq 0` the tokens contract; at finite β softmax tokens near the vertices stay there for times
exponential in β. `hardmax.experiments.frank_wolfe` measures the three (about 3 s on one core here).
"""

import matplotlib.pyplot as plt
import numpy as np
import torch

from hardmax.dynamics import simulate
from hardmax.experiments.frank_wolfe import (
    contraction_rate,
    dominance_cells,
    escape_times,
    hardmax_layers,
    voronoi_check,
)

# %%
# **A ⪰ 0 (here A = I): the Voronoi picture.** Six vertices, each its own maximiser (⟨v, v⟩ > ⟨v, w⟩), and 24
# tokens inside, run by `simulate` (the compiled exact engine) for 40 layers at α = 0.5. Colours: the cells inside
# the hexagon; lines: every token's path, which is the segment to its cell's vertex.
angles = np.array([0.2, 1.2, 2.1, 3.3, 4.2, 5.3])
radii = np.array([1.0, 0.85, 0.95, 0.9, 1.0, 0.8])
vertices = torch.tensor(np.stack([radii * np.cos(angles), radii * np.sin(angles)], -1))
g = torch.Generator().manual_seed(3)
weights = -torch.log(torch.rand(24, 6, generator=g, dtype=torch.float64))
tokens = torch.cat([vertices, (weights / weights.sum(-1, keepdim=True)) @ vertices])
path = simulate(tokens, alpha=0.5, layers=40).tokens.numpy()  # (41, 30, 2)

grid = np.stack(np.meshgrid(np.linspace(-1.05, 1.05, 400), np.linspace(-1.05, 1.05, 400)), -1)
cells = dominance_cells(torch.tensor(grid.reshape(-1, 2)), vertices, torch.eye(2)).numpy().reshape(400, 400)
edges = np.roll(vertices.numpy(), -1, 0) - vertices.numpy()
inside = np.all(edges[:, 0] * (grid[..., 1:2] - vertices.numpy()[:, 1]) -
                edges[:, 1] * (grid[..., 0:1] - vertices.numpy()[:, 0]) >= 0, -1)

fig, (left, right) = plt.subplots(1, 2, figsize=(11, 5), layout="constrained")
left.imshow(np.where(inside, cells, np.nan), extent=(-1.05, 1.05, -1.05, 1.05), origin="lower", cmap="Pastel1",
            vmin=0, vmax=8)
left.plot(*np.vstack([vertices.numpy(), vertices.numpy()[:1]]).T, color="black", lw=1)
for i in range(6, 30):
    left.plot(path[:, i, 0], path[:, i, 1], color="0.3", lw=0.8)
left.scatter(*path[0, 6:].T, s=14, color="#1f78b4", zorder=3, label="tokens at layer 0")
left.scatter(*vertices.numpy().T, s=60, facecolors="none", edgecolors="black", zorder=3, label="vertices (fixed)")
left.scatter(0, 0, marker="x", color="black")
left.set_aspect("equal")
left.axis("off")
left.legend(loc="lower left", fontsize=8, frameon=False)
left.set_title("A = I: cells kept, straight lines to the vertex")

inner = path[:, 6:]
vertex = vertices.numpy()[dominance_cells(torch.tensor(inner[0]), vertices, torch.eye(2)).numpy()]
distance = np.linalg.norm(inner - vertex, axis=-1) / np.linalg.norm(inner[0] - vertex, axis=-1)
right.semilogy(distance, color="#1f78b4", lw=0.8, alpha=0.6)
right.semilogy((2 / 3) ** np.arange(41), "k--", lw=1.5, label="(1 − γ)^k, γ = 1/3")
right.set_xlabel("layer k")
right.set_ylabel("‖z_i(k) − v‖ / ‖z_i(0) − v‖")
right.legend()
report = voronoi_check()  # 64 random hexagons, 20 tokens each, 1,000 layers
print(report.check().value)

# %%
# Over 64 random hexagons and 1,000 layers the vertices move by exactly 0, every cell is kept, the paths leave their
# lines by ≤ 2·10⁻¹⁶ and the distance follows :math:`(1-\gamma)^k` to ≤ 10⁻¹⁵ (down to 10⁻¹⁷⁶). The hypothesis
# matters: among random convex hexagons with vertex radii in [0.4, 1] (their `sample_vertices`) only about 7 % have
# every vertex in its own cell, and in the others a vertex moves (`voronoi_check(own_cells=False)`).
#
# **A ⪯ 0 (here A = −I).** Each token moves towards the token most opposite it. One sequence of 16 Gaussian tokens,
# then 64 of them (`contraction_rate`): one cluster forms geometrically fast, at about :math:`1-\gamma` a layer on
# the energy gap — but *not at the origin* (×): the point they gather at is a median 2 % of the start's radius away.
z = torch.randn(16, 2, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
run = hardmax_layers(z, -torch.eye(2), alpha=0.5, layers=60).numpy()
result = contraction_rate()  # 64 sequences, n = 16, d = 2, α = 0.5, 300 layers
for name, check in result.check().items():
    print(f"{name}: {check.status} — {check.value}")

fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4.5), layout="constrained")
for i in range(16):
    left.plot(run[:, i, 0], run[:, i, 1], color="0.5", lw=0.7)
left.scatter(*run[0].T, s=14, color="#1f78b4", label="start")
left.scatter(*run[-1, :1].T, s=40, color="#e31a1c", zorder=3, label="the cluster after 60 layers")
left.scatter(0, 0, marker="x", s=60, color="black", label="origin")
left.set_aspect("equal")
left.legend(fontsize=8, loc="lower left")
left.set_title("A = −I: one cluster, not at the origin")
zoom = left.inset_axes((0.58, 0.2, 0.4, 0.32))
for i in range(16):
    zoom.plot(run[:, i, 0], run[:, i, 1], color="0.5", lw=0.7)
zoom.scatter(*run[-1, :1].T, s=30, color="#e31a1c", zorder=3)
zoom.scatter(0, 0, marker="x", s=40, color="black")
centre = run[-1, 0]
zoom.set_xlim(centre[0] - 0.15, centre[0] + 0.15)
zoom.set_ylim(centre[1] - 0.15, centre[1] + 0.15)
zoom.set_xticks([])
zoom.set_yticks([])
k = np.arange(len(result.gap))
right.semilogy(k, result.spread.numpy() / float(result.spread[0]), label="spread max‖z_i − z̄‖ (median)")
right.semilogy(k, result.gap.numpy() / float(result.gap[0]), label="energy gap E_k − E(limit) (median)")
right.semilogy(k, result.energy.numpy() / float(result.energy[0]), label="energy E_k (median)")
right.semilogy(k, (2 / 3) ** k, "k--", lw=1, label="(1 − γ)^k")
right.set_ylim(1e-17, 2)
right.set_xlim(0, 120)
right.set_xlabel("layer k")
right.legend(fontsize=8)
right.set_title(f"geometric: {result.ratio:.3f} a layer (R² {result.geometric_r2:.3f})")

# %%
# **Finite β: metastability.** Softmax (A = I) from four tokens within 0.01 of each vertex of a regular pentagon:
# the layers until some token is 0.1 from its vertex, for β = 2, 4, 8, 16 (8 sequences, α = 1). Beside them, the
# exact recurrence of the symmetric pentagon (every token on its vertex; the simulation from that start gives the
# same layers exactly). log T is a line in β; its slope approaches the score gap 1 − cos(2π/5) once the 1/β
# prefactor of T ∝ e^{βg}/β is divided out.
escape = escape_times()
print(escape.check().value)
betas = escape.betas.numpy()
fig, ax = plt.subplots(figsize=(6, 4), layout="constrained")
ax.semilogy(betas, escape.layers.numpy(), "o", color="#1f78b4", label="softmax layers (median of 8)")
ax.semilogy(betas, escape.polygon.numpy(), "s", mfc="none", color="black", label="symmetric pentagon, exact")
ax.semilogy(betas, np.exp(escape.intercept + escape.slope * betas), "--", color="#1f78b4",
            label=f"fit: slope {escape.slope:.2f} (R² {escape.r2:.3f})")
ax.set_xlabel("β")
ax.set_ylabel("escape layer T")
ax.legend(fontsize=8)
ax.set_title(r"escape time grows like $e^{\beta g}$, g = 1 − cos 72° = 0.69")
