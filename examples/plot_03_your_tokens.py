"""
Leaders, K and S on your own tokens
===================================

Any tokens, any symmetric positive definite :math:`A`, any step :math:`\\alpha`: simulate, find the
leaders and the polytope :math:`K` their limits span, the tight set :math:`S` of Theorem 2.1, and check
the theorem on the run. Swap in your own ``tokens`` and ``A``.
"""

import torch

import hardmax
from hardmax.plots import plot_layers

torch.manual_seed(0)
tokens = torch.randn(40, 2, dtype=torch.float64)
A = torch.tensor([[2.0, 0.5], [0.5, 1.0]], dtype=torch.float64)

run = hardmax.simulate(tokens, alpha=0.5, layers=60, A=A)          # Solution: .tokens is (61, 40, 2)
# A follower that converged onto its leader is a copy of it in the last layer: leaders come from the history.
leaders = hardmax.leader_layers(run) >= 0                            # (n,) leading from some layer to the end
K = hardmax.polytope(run.final[leaders])                             # hull of the leaders' limits
S = hardmax.limit_set(K, A)                                          # vertices + reachable projections of 0
print(f"{int(leaders.sum())} leaders; K has {len(K.vertices)} vertices; S has {len(S)} points")
print(hardmax.check_theorem(run).table())

# The library's picture of the run: leaders as stars, the other tokens coloured by their limit, K shaded,
# the points of S off the vertices as hollow diamonds, at the layers chosen.
fig = plot_layers(run, layers=[0, 2, 10, 60])
fig  # hardmax.plots returns the Figure: shown here and in a notebook
