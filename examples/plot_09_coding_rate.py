"""
The coding rate through the layers
==================================

The coding-rate view of attention (MCR², Yu et al. 2020): the rate of :math:`N` tokens
:math:`Z \\in \\mathbb{R}^{N \\times d}` at distortion :math:`\\varepsilon`,

.. math:: R(Z, \\varepsilon) = \\tfrac12 \\log\\det\\Big(I + \\frac{d}{N\\varepsilon^2} Z^\\top Z\\Big),

measures how many bits the tokens need; clustering compresses them. Theorem 2.1 says hardmax layers
cluster tokens around leaders, which also pushes them out to the vertices of their hull (norms never
decrease) and alone would raise :math:`R`; the scale-free rate :math:`\\hat R` (tokens divided by their
RMS norm) separates the two, and falls as the tokens cluster. At the limit, the rate is bounded by the
number of distinct points. Here 256 sets of 32 Gaussian tokens in :math:`\\mathbb{R}^4`, all simulated as
one batch.
"""

import matplotlib.pyplot as plt
import torch

import hardmax
from hardmax.experiments.rate import layer_rates, leader_rates

torch.manual_seed(0)
tokens = torch.randn(256, 32, 4, dtype=torch.float64)                   # (batch, n, d)
run = hardmax.simulate(tokens, alpha=0.5, layers=80)                     # every layer stored

rates = layer_rates(run, eps=0.5)              # .rate_scaled: (layers + 1, sets), R of each set's scaled tokens
limits = leader_rates(run, eps=0.5)            # final R against the number of leaders of each set
first, last = rates.rate_scaled[0].mean().item(), rates.rate_scaled[-1].mean().item()
print(f"R̂: {first:.3f} at layer 0 → {last:.3f} at layer 80 (mean of 256 sets)")
print(f"limits: {limits.clusters_mean:.1f} distinct points per set; Spearman(R, leaders) = {limits.correlation:.2f}")

fig, (left, right) = plt.subplots(1, 2, figsize=(9, 3.8))
band = rates.rate_scaled.quantile(torch.tensor([0.1, 0.9], dtype=torch.float64), dim=1)
left.plot(rates.layers, rates.rate_scaled.mean(1), label="mean over sets")
left.fill_between(rates.layers, band[0], band[1], alpha=0.2, label="10–90 %")
left.set_xlabel("layer")
left.set_ylabel("scale-free rate R̂ (ε = 0.5)")
left.legend()
right.scatter(limits.leaders + 0.2 * torch.rand(len(limits.leaders)), limits.rate, s=8, alpha=0.5)
right.set_xlabel("number of leaders (jittered)")
right.set_ylabel("final R")
fig.tight_layout()
plt.show()
