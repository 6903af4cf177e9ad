"""
Tokens on the sphere: clustering and metastability
==================================================

The paper's layer is an Euler step of :math:`\\dot z_i = V\\big(\\sum_j P_{ij} z_j - z_i\\big)` with
:math:`V = I`. The particle-system papers it builds on (Geshkovski, Letrouit, Polyanskiy, Rigollet 2023
and later) study self-attention in continuous time with the tokens kept on the unit sphere,

.. math:: \\dot x_i = P^\\perp_{x_i}\\Big(\\sum_j \\frac{e^{\\beta\\langle x_i, x_j\\rangle}}{\\sum_k e^{\\beta\\langle x_i, x_k\\rangle}} x_j\\Big),

where :math:`P^\\perp_x` projects onto the tangent space. In :math:`d \\ge 3` all tokens end in a single
cluster (here by t = 300 at β = 4); before that they can linger in a few clusters for a long time
(*metastability*). The same engine
solves both: a vector field (``Field``) and a solver (``RK4``) combined at the call site.
"""

import torch

import hardmax
from hardmax.experiments.particles import metastability
from hardmax.plots.flows import flow_figure, metastability_figure

torch.manual_seed(0)
x = torch.nn.functional.normalize(torch.randn(40, 3, dtype=torch.float64), dim=-1)   # 40 tokens on S²
field = hardmax.Field(hardmax.Softmax(beta=4.0), manifold=hardmax.Sphere())
solution = hardmax.solve(field, hardmax.RK4(dt=0.1), x, t1=300.0, save=hardmax.Save(every=50))
print(hardmax.check_flow(solution).table())      # the papers' claims that apply, checked on this run

fig = flow_figure(solution, panels=(0, 2, 10, -1))                     # t = 0, 10, 50, 300
fig  # hardmax.plots returns the Figure: shown here and in a notebook

# %%
# Metastability: five tokens on the circle at β = 4 gather into two clusters quickly, stay there for a
# long time, then merge. The energy :math:`E_\beta` climbs a staircase, one step per merge.
result = metastability(n=5, beta=4.0, t1=400.0, dt=0.1)
fig = metastability_figure(result)
fig  # hardmax.plots returns the Figure: shown here and in a notebook
